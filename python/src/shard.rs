//! The reduce's first step, in the task that reads one host's `packets`
//! table: its sightings (the rows the matcher keys, [`Transmission::
//! matchable`]) cut into buckets by a 64-bit hash of the transmission key,
//! each bucket one compact blob ([`Sightings`], compressed:
//! [`crate::packed`]). Spark moves these
//! few large values to one partition per bucket (every sighting of a
//! transmission, whatever its host, lands in the same bucket), never a row
//! per packet; [`crate::buckets`] matches a bucket.
//!
//! Also the host's stalls (the engine's per-packet `stall_elapsed_ns`),
//! one row per stall, for the job's incidents.

use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use analyzer::engine::Transmission;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, Int64Array, ListArray, RecordBatch};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rustc_hash::{FxHashMap, FxHasher};

use crate::blob::{Flow, FlowIndex, Row, Sightings, Widths};
use crate::matching::{ByKey, Cols, Ips, PyBatch, Strings, not_an_address, value_error};
use crate::packed::pack;

/// A row's `proto`: RoCEv2 or MetaRoCE (`None`: another protocol, not
/// matched).
fn rocev2_of(proto: &str) -> Option<bool> {
    match proto {
        "rocev2" => Some(true),
        "metaroce" => Some(false),
        _ => None,
    }
}

/// An address column: parsed once per dictionary value, or per distinct
/// string through the batch's cache for another layout.
struct Addresses<'a> {
    name: &'static str,
    column: Strings<'a>,
    by_key: Option<ByKey<'a, Result<IpAddr, ()>>>,
}

impl<'a> Addresses<'a> {
    fn of(column: Strings<'a>, name: &'static str) -> Self {
        let by_key = column.by_key(|text| text.parse().map_err(|_| ()));
        Addresses {
            name,
            column,
            by_key,
        }
    }

    fn at(&self, i: usize, ips: &mut Ips) -> PyResult<IpAddr> {
        match &self.by_key {
            Some(by_key) => by_key
                .get(i)
                .map_err(|()| not_an_address(self.name, self.column.value(i))),
            None => ips.parse(self.column.value(i), self.name),
        }
    }
}

/// The bucket of a transmission: the same on every executor (FxHash has
/// no per-process seed).
fn bucket_of(tx: &Transmission, buckets: u32) -> u32 {
    let mut h = FxHasher::default();
    tx.hash(&mut h);
    // FxHash's low bits are weak: fold the high half in.
    let x = h.finish();
    ((x ^ (x >> 32)) % u64::from(buckets)) as u32
}

fn opt(a: &Int64Array, i: usize) -> Option<i64> {
    a.is_valid(i).then(|| a.value(i))
}

/// A list-of-int64 column (HOP_TELEMETRY's) and its values.
fn list<'a>(batch: &'a RecordBatch, name: &str) -> PyResult<(&'a ListArray, &'a [i64])> {
    let l = Cols(batch)
        .get(name)?
        .as_list_opt::<i32>()
        .ok_or_else(|| value_error(format!("column {name:?} must be a list of int64")))?;
    let v = l
        .values()
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(|| value_error(format!("column {name:?} must be a list of int64")))?;
    Ok((l, v.values()))
}

/// A list column's values at row `i` (empty when null).
fn list_at<'a>((l, values): (&ListArray, &'a [i64]), i: usize) -> &'a [i64] {
    if l.is_null(i) {
        return &[];
    }
    let o = l.value_offsets();
    &values[o[i] as usize..o[i + 1] as usize]
}

/// One host's sightings cut into `buckets` blobs: `[(bucket, blob)]` for
/// the buckets that hold any. `batches`: the host's `packets` table with
/// the columns `proto, src, dst, type` (string), `malformed` (boolean),
/// `src_port, src_conn, dst_conn, dest_qp, type_code, psn, tx_ts, ev,
/// path_seq, ts_ns, frame, ecn` (int64) and `hop_switch_id,
/// hop_queue_depth, hop_latency_ns` (list of int64); `host` its index in
/// the job's list of hosts.
#[pyfunction]
pub fn shard(
    py: Python<'_>,
    batches: Vec<PyBatch>,
    host: u32,
    buckets: u32,
) -> PyResult<Vec<(u32, Py<PyBytes>)>> {
    if buckets == 0 {
        return Err(value_error("buckets must be at least 1"));
    }
    let blobs = py.detach(|| -> PyResult<Vec<(u32, Vec<u8>)>> {
        let mut out: Vec<Sightings> = (0..buckets)
            .map(|_| Sightings {
                host,
                ..Sightings::default()
            })
            .collect();
        let mut flow_index: Vec<FlowIndex> = (0..buckets).map(|_| FlowIndex::default()).collect();
        let mut ips = Ips::default();
        for batch in &batches {
            let batch = &batch.0;
            let c = Cols(batch);
            let (proto, src, dst) = (c.str("proto")?, c.str("src")?, c.str("dst")?);
            // The job reads these as dictionaries: each distinct value is
            // converted once, not per row.
            let proto_by_key = proto.by_key(rocev2_of);
            let (src, dst) = (Addresses::of(src, "src"), Addresses::of(dst, "dst"));
            let malformed = c.bool("malformed")?;
            let [
                src_port,
                src_conn,
                dst_conn,
                dest_qp,
                type_code,
                psn,
                tx_ts,
                ev,
                path_seq,
                ts,
                frame,
                ecn,
            ] = [
                "src_port",
                "src_conn",
                "dst_conn",
                "dest_qp",
                "type_code",
                "psn",
                "tx_ts",
                "ev",
                "path_seq",
                "ts_ns",
                "frame",
                "ecn",
            ]
            .map(|n| c.i64(n));
            let (src_port, src_conn, dst_conn, dest_qp) =
                (src_port?, src_conn?, dst_conn?, dest_qp?);
            let (type_code, psn, tx_ts, ev) = (type_code?, psn?, tx_ts?, ev?);
            let (path_seq, ts, frame, ecn) = (path_seq?, ts?, frame?, ecn?);
            let hop_cols = [
                list(batch, "hop_switch_id")?,
                list(batch, "hop_queue_depth")?,
                list(batch, "hop_latency_ns")?,
            ];
            let has_hops = hop_cols[0].0.null_count() < batch.num_rows();
            for i in 0..batch.num_rows() {
                let rocev2 = match &proto_by_key {
                    Some(by_key) => *by_key.get(i),
                    None => rocev2_of(proto.value(i)),
                };
                let Some(rocev2) = rocev2 else { continue };
                let row = Transmission {
                    rocev2,
                    src: src.at(i, &mut ips)?,
                    dst: dst.at(i, &mut ips)?,
                    src_conn: if rocev2 {
                        0
                    } else {
                        opt(src_conn, i).unwrap_or(0) as u32
                    },
                    dst_conn: if rocev2 {
                        opt(dest_qp, i)
                    } else {
                        opt(dst_conn, i)
                    }
                    .unwrap_or(0) as u32,
                    ptype: type_code.value(i) as u8,
                    psn: psn.value(i) as u32,
                    tx_ts: opt(tx_ts, i).unwrap_or(0) as u32,
                    ev: if rocev2 { opt(src_port, i) } else { opt(ev, i) }.unwrap_or(0) as u16,
                    path_seq: opt(path_seq, i).unwrap_or(0) as u16,
                };
                let Some(tx) = row.matchable(malformed.value(i)) else {
                    continue;
                };
                let b = bucket_of(&tx, buckets) as usize;
                let bucket = &mut out[b];
                let flow = flow_index[b].index(&Flow::of(&tx), &mut bucket.flows);
                let hop_start = bucket.hops.len() as u32;
                if has_hops {
                    let [sw, q, lat] = hop_cols.map(|l| list_at(l, i));
                    let at = |v: &[i64], k: usize| v.get(k).copied().unwrap_or(0);
                    bucket.hops.extend(
                        sw.iter()
                            .enumerate()
                            .map(|(k, &s)| (s as u32, at(q, k) as u16, at(lat, k) as u16)),
                    );
                }
                bucket.rows.push(Row {
                    capture: 0,
                    ptype: tx.ptype,
                    ecn: ecn.value(i) as u8,
                    ev: tx.ev,
                    path_seq: tx.path_seq,
                    hop_count: (bucket.hops.len() as u32 - hop_start) as u16,
                    flow,
                    psn: tx.psn,
                    tx_ts: tx.tx_ts,
                    hop_start,
                    ts: ts.value(i) as u64,
                    frame: frame.value(i) as u64,
                });
            }
        }
        Ok(out
            .into_iter()
            .enumerate()
            .filter(|(_, b)| !b.rows.is_empty())
            .map(|(i, b)| (i as u32, pack(&b.encode(Widths::Narrowest))))
            .collect())
    })?;
    Ok(blobs
        .into_iter()
        .map(|(b, bytes)| (b, PyBytes::new(py, &bytes).unbind()))
        .collect())
}

/// A stall of one direction: `(src, dst, src_conn, dst_conn, start_ns,
/// end_ns)` on the capture's clock.
type Stall = (String, String, Option<i64>, Option<i64>, i64, i64);
type StallKey = (String, String, Option<i64>, Option<i64>, i64);

/// The host's stalls, one per (direction, start): the engine marks each
/// packet seen during a stall with the time since its last progress, so
/// a stall runs from `ts_ns - stall_elapsed_ns` to its latest such packet.
/// Feedback packets name their direction reversed. `batches`: columns
/// `type, src, dst` (string), `src_conn, dst_conn, ts_ns,
/// stall_elapsed_ns` (int64).
#[pyfunction]
pub fn stalls(batches: Vec<PyBatch>) -> PyResult<Vec<Stall>> {
    // (src, dst, src_conn, dst_conn, start) -> end.
    let mut per: FxHashMap<StallKey, i64> = FxHashMap::default();
    for batch in &batches {
        let c = Cols(&batch.0);
        let elapsed = c.i64("stall_elapsed_ns")?;
        if elapsed.null_count() == elapsed.len() {
            continue;
        }
        let (ptype, src, dst) = (c.str("type")?, c.str("src")?, c.str("dst")?);
        let (src_conn, dst_conn, ts) = (c.i64("src_conn")?, c.i64("dst_conn")?, c.i64("ts_ns")?);
        for i in 0..batch.0.num_rows() {
            let Some(e) = opt(elapsed, i) else { continue };
            let data = ptype.value(i) == "DATA";
            let (s, d) = (src.value(i).to_string(), dst.value(i).to_string());
            let (sc, dc) = (opt(src_conn, i), opt(dst_conn, i));
            let key = if data {
                (s, d, sc, dc, ts.value(i) - e)
            } else {
                (d, s, dc, sc, ts.value(i) - e)
            };
            let end = per.entry(key).or_insert(i64::MIN);
            *end = (*end).max(ts.value(i));
        }
    }
    let mut out: Vec<Stall> = per
        .into_iter()
        .map(|((s, d, sc, dc, start), end)| (s, d, sc, dc, start, end))
        .collect();
    out.sort();
    Ok(out)
}
