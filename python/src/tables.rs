//! The per-transmission tables of one bucket (the Spark job's
//! `--tables`), read from the bucket as pass 1 matched it
//! ([`crate::buckets::Matched`]) with the summed paths, as
//! [`crate::buckets::match_partials`] reads it: a row per transmission
//! where the partials hold counts.
//!
//! - `matched`: each match, its copies (`a` the lower capture), its
//!   direction (`up`, `down`), `delta` (`ts_b - ts_a`), `owd` (the
//!   offset-corrected one-way delay) and `owd_bucket` (its histogram
//!   bucket's lowest value);
//! - `lost`: each unmatched transmission that counts as `lost_between`
//!   or `unknown` (`fate`), at its one capture;
//! - `transmissions`: both, from the upstream capture, on the reference
//!   clock too (`t`); a lost one once per capture its flow's other
//!   packets reached (`down`; null when none did), as the fabric views
//!   count it;
//! - `hops`: per delivered transmission, the switches its downstream copy
//!   names (HOP_TELEMETRY), in order.

use std::sync::Arc;

use analyzer::engine::{Fate, Hist, one_way_delay};
use arrow_array::{ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_pyarrow::PyArrowType;
use arrow_schema::{DataType, Field, Schema};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use rustc_hash::FxHashMap;

use crate::blob::{Row, Sightings};
use crate::buckets::{Context, Kept, Matched, in_capture_order, path_of};
use crate::matching::{PyBatch, value_error};

/// A match of the bucket: its copies' rows (`lo` the lower capture's),
/// its path's direction and its delays.
struct Match {
    lo: u32,
    hi: u32,
    a_first: bool,
    delta: i64,
    owd: u64,
}

impl Match {
    /// The upstream and the downstream copy.
    fn up_down(&self) -> (u32, u32) {
        if self.a_first {
            (self.lo, self.hi)
        } else {
            (self.hi, self.lo)
        }
    }
}

/// A row of `transmissions`: the upstream copy's row, and the downstream
/// capture and copy (`None` when lost).
struct Sent {
    up: u32,
    down: Option<u16>,
    delivered: Option<(u32, u64)>,
}

fn matches(s: &Sightings, m: &Matched, ctx: &Context) -> PyResult<Vec<Match>> {
    // (a, b, flow, ev) -> (a first, the pair's offset), looked up once.
    let mut direction: FxHashMap<(u16, u16, u32, u16), (bool, i64)> = FxHashMap::default();
    m.pairs
        .iter()
        .map(|&(j, i)| {
            let (lo, hi, delta) = in_capture_order(s, j, i);
            let ri = &s.rows[i as usize];
            let (a, b) = (&s.rows[lo as usize], &s.rows[hi as usize]);
            let local = (a.capture, b.capture, ri.flow, ri.ev);
            let (a_first, offset) = match direction.get(&local) {
                Some(&d) => d,
                None => {
                    let d = ctx.direction_of(&path_of(s, j, i).0)?;
                    direction.insert(local, d);
                    d
                }
            };
            Ok(Match {
                lo,
                hi,
                a_first,
                delta,
                owd: one_way_delay(a_first, delta, offset),
            })
        })
        .collect()
}

/// The unmatched transmissions that count as lost between the captures
/// or of unknown fate: their rows and fates.
fn judged(s: &Sightings, m: &Matched, ctx: &Context) -> Vec<(u32, &'static str)> {
    m.unmatched
        .iter()
        .filter_map(|&(i, left)| {
            let fate = ctx.fate(s, &s.rows[i as usize], left)?;
            Some((
                i,
                match fate {
                    Fate::Lost => "lost",
                    Fate::Unknown => "unknown",
                },
            ))
        })
        .collect()
}

/// A table's columns as they are filled (its schema's fields and their
/// arrays, in order), rows described by the bucket's sightings.
struct Columns<'a> {
    s: &'a Sightings,
    /// Each flow's addresses formatted once per bucket, not per row.
    text: &'a [(String, String)],
    columns: Vec<(Field, ArrayRef)>,
}

impl<'a> Columns<'a> {
    fn new(s: &'a Sightings, text: &'a [(String, String)]) -> Self {
        Columns {
            s,
            text,
            columns: Vec::new(),
        }
    }

    fn add(&mut self, name: &str, ty: DataType, array: ArrayRef) {
        self.columns.push((Field::new(name, ty, true), array));
    }

    fn i64(&mut self, name: &str, v: impl IntoIterator<Item = i64>) {
        let a = Int64Array::from_iter_values(v);
        self.add(name, DataType::Int64, Arc::new(a));
    }

    fn opt_i64(&mut self, name: &str, v: impl IntoIterator<Item = Option<i64>>) {
        let a = Int64Array::from_iter(v);
        self.add(name, DataType::Int64, Arc::new(a));
    }

    fn i32(&mut self, name: &str, v: impl IntoIterator<Item = Option<i32>>) {
        let a = Int32Array::from_iter(v);
        self.add(name, DataType::Int32, Arc::new(a));
    }

    fn bool(&mut self, name: &str, v: impl IntoIterator<Item = bool>) {
        let a = BooleanArray::from_iter(v.into_iter().map(Some));
        self.add(name, DataType::Boolean, Arc::new(a));
    }

    fn str(&mut self, name: &str, v: impl IntoIterator<Item = &'a str>) {
        let a = StringArray::from_iter_values(v);
        self.add(name, DataType::Utf8, Arc::new(a));
    }

    fn row(&self, i: u32) -> &'a Row {
        &self.s.rows[i as usize]
    }

    /// A capture column of `rows`.
    fn capture(&mut self, name: &str, rows: &[u32]) {
        let c: Vec<Option<i32>> = rows
            .iter()
            .map(|&i| Some(i32::from(self.row(i).capture)))
            .collect();
        self.i32(name, c);
    }

    /// The flow's columns of `rows`: `rocev2, src, dst, src_conn,
    /// dst_conn` (RoCEv2: `src_conn` 0, `dst_conn` the destination QP).
    fn flow(&mut self, rows: &[u32]) {
        let (s, text) = (self.s, self.text);
        let flow = |i: &u32| s.rows[*i as usize].flow as usize;
        self.bool("rocev2", rows.iter().map(|i| s.flows[flow(i)].rocev2));
        self.str("src", rows.iter().map(|i| text[flow(i)].0.as_str()));
        self.str("dst", rows.iter().map(|i| text[flow(i)].1.as_str()));
        self.i64(
            "src_conn",
            rows.iter().map(|i| i64::from(s.flows[flow(i)].src_conn)),
        );
        self.i64(
            "dst_conn",
            rows.iter().map(|i| i64::from(s.flows[flow(i)].dst_conn)),
        );
    }

    /// A column of a field of `rows`.
    fn field(&mut self, name: &str, rows: &[u32], get: fn(&Row) -> i64) {
        let s = self.s;
        self.i64(name, rows.iter().map(|&i| get(&s.rows[i as usize])));
    }

    /// The flow's columns and the rest of the transmission key: `ptype,
    /// psn, tx_ts, ev, path_seq`.
    fn key(&mut self, rows: &[u32]) {
        self.flow(rows);
        self.field("ptype", rows, |r| i64::from(r.ptype));
        self.field("psn", rows, |r| i64::from(r.psn));
        self.field("tx_ts", rows, |r| i64::from(r.tx_ts));
        self.field("ev", rows, |r| i64::from(r.ev));
        self.field("path_seq", rows, |r| i64::from(r.path_seq));
    }

    fn batch(self) -> PyResult<RecordBatch> {
        let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = self.columns.into_iter().unzip();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(value_error)
    }
}

fn matched_table(c: &mut Columns<'_>, found: &[Match]) {
    let lo: Vec<u32> = found.iter().map(|x| x.lo).collect();
    let hi: Vec<u32> = found.iter().map(|x| x.hi).collect();
    let (up, down): (Vec<u32>, Vec<u32>) = found.iter().map(Match::up_down).unzip();
    let s = c.s;
    let at = |i: &u32| &s.rows[*i as usize];
    c.key(&lo);
    c.str("state", found.iter().map(|_| "matched"));
    c.capture("ca", &lo);
    c.capture("cb", &hi);
    c.i64("ts_a", lo.iter().map(|i| at(i).ts as i64));
    c.i64("ts_b", hi.iter().map(|i| at(i).ts as i64));
    c.i64("frame_a", lo.iter().map(|i| at(i).frame as i64));
    c.i64("frame_b", hi.iter().map(|i| at(i).frame as i64));
    c.capture("up", &up);
    c.capture("down", &down);
    c.i64("delta", found.iter().map(|x| x.delta));
    c.i64("owd", found.iter().map(|x| x.owd as i64));
    c.i64(
        "owd_bucket",
        found.iter().map(|x| Hist::bucket_lowest(x.owd) as i64),
    );
}

fn lost_table(c: &mut Columns<'_>, lost: &[(u32, &'static str)]) {
    let rows: Vec<u32> = lost.iter().map(|&(i, _)| i).collect();
    let s = c.s;
    c.key(&rows);
    c.capture("capture", &rows);
    c.i64("ts", rows.iter().map(|&i| s.rows[i as usize].ts as i64));
    c.i64(
        "frame",
        rows.iter().map(|&i| s.rows[i as usize].frame as i64),
    );
    c.str("fate", lost.iter().map(|&(_, f)| f));
}

/// `up, down`, the flow and `ev` of `transmissions` rows (and of their
/// hops).
fn path_columns(c: &mut Columns<'_>, sent: &[&Sent]) {
    let up: Vec<u32> = sent.iter().map(|x| x.up).collect();
    c.capture("up", &up);
    c.i32("down", sent.iter().map(|x| x.down.map(i32::from)));
    c.flow(&up);
    c.field("ev", &up, |r| i64::from(r.ev));
}

/// The four tables of one bucket.
fn tables(
    m: &Matched,
    ctx: &Context,
    to_ref: &[i64],
) -> PyResult<Vec<(&'static str, RecordBatch)>> {
    let s = &m.s;
    let text: Vec<(String, String)> = s
        .flows
        .iter()
        .map(|f| (f.src.to_string(), f.dst.to_string()))
        .collect();
    let found = matches(s, m, ctx)?;
    let lost = judged(s, m, ctx);

    let mut sent: Vec<Sent> = found
        .iter()
        .map(|x| {
            let (up, down) = x.up_down();
            Sent {
                up,
                down: Some(s.rows[down as usize].capture),
                delivered: Some((down, x.owd)),
            }
        })
        .collect();
    for &(i, _) in &lost {
        let row = &s.rows[i as usize];
        sent.extend(
            ctx.downs_of(row.capture, s.flow(row))
                .into_iter()
                .map(|down| Sent {
                    up: i,
                    down,
                    delivered: None,
                }),
        );
    }
    // A transmission's time on the reference clock.
    let t = |x: &Sent| {
        let up = &s.rows[x.up as usize];
        up.ts as i64 - to_ref.get(usize::from(up.capture)).copied().unwrap_or(0)
    };
    // The switches each delivered transmission's downstream copy names.
    let hops: Vec<(&Sent, usize, (u32, u16, u16))> = sent
        .iter()
        .filter_map(|x| Some((x, x.delivered?.0)))
        .flat_map(|(x, down)| {
            let hops = s.hops(&s.rows[down as usize]);
            hops.iter().enumerate().map(move |(h, &hop)| (x, h, hop))
        })
        .collect();

    let mut matched = Columns::new(s, &text);
    matched_table(&mut matched, &found);

    let mut judged = Columns::new(s, &text);
    lost_table(&mut judged, &lost);

    let mut tx = Columns::new(s, &text);
    let all: Vec<&Sent> = sent.iter().collect();
    path_columns(&mut tx, &all);
    tx.i64("ts", sent.iter().map(|x| s.rows[x.up as usize].ts as i64));
    tx.opt_i64(
        "owd",
        sent.iter().map(|x| x.delivered.map(|(_, owd)| owd as i64)),
    );
    tx.bool("lost", sent.iter().map(|x| x.delivered.is_none()));
    tx.opt_i64(
        "frame_down",
        sent.iter().map(|x| {
            x.delivered
                .map(|(down, _)| s.rows[down as usize].frame as i64)
        }),
    );
    tx.i64("t", sent.iter().map(t));

    let mut hop = Columns::new(s, &text);
    let of: Vec<&Sent> = hops.iter().map(|&(x, _, _)| x).collect();
    path_columns(&mut hop, &of);
    hop.i64("t", of.iter().map(|x| t(x)));
    hop.i32("hop", hops.iter().map(|&(_, h, _)| Some(h as i32)));
    hop.i64(
        "switch_id",
        hops.iter().map(|&(_, _, (sw, _, _))| i64::from(sw)),
    );
    hop.i64(
        "queue_depth",
        hops.iter().map(|&(_, _, (_, q, _))| i64::from(q)),
    );
    hop.i64(
        "hop_latency_ns",
        hops.iter().map(|&(_, _, (_, _, lat))| i64::from(lat)),
    );

    Ok(vec![
        ("matched", matched.batch()?),
        ("lost", judged.batch()?),
        ("transmissions", tx.batch()?),
        ("hops", hop.batch()?),
    ])
}

/// The per-transmission tables of one bucket: `[(table, record batch)]`
/// for `matched`, `lost`, `transmissions` and `hops` (module doc).
/// `kept`: the bucket as [`crate::buckets::match_paths`] kept it (its
/// bytes or its file);
/// `spans[c]`: capture c's `(first_ts_ns, last_ts_ns)`; `paths`:
/// [`crate::buckets::merge_paths`] of every bucket's first pass;
/// `to_ref[c]`: capture c's clock minus the reference's.
#[pyfunction]
pub fn match_tables(
    py: Python<'_>,
    kept: Kept,
    spans: Vec<(u64, u64)>,
    paths: PyBackedBytes,
    to_ref: Vec<i64>,
) -> PyResult<Vec<(&'static str, PyBatch)>> {
    let out = py.detach(|| {
        let (m, ctx) = Matched::read(&kept, &spans, &paths)?;
        tables(&m, &ctx, &to_ref)
    })?;
    Ok(out.into_iter().map(|(n, b)| (n, PyArrowType(b))).collect())
}
