//! The engine's cross-capture matcher over Arrow record batches, row by
//! row: the Spark job's per-transmission tables (`--tables`,
//! cluster/metaroce_cluster/tables.py). The job's report does not need
//! them (crate::shard, crate::buckets).
//!
//! The job partitions every host's sightings by transmission and orders
//! each partition by capture time; then
//!
//! 1. a [`Matcher`] per partition runs `CrossCapture` in row mode over its
//!    batches: matched transmissions, and those that left the window
//!    unmatched (lost) or still wait at the end;
//! 2. Spark sums the matches per path (count, min, max, sum of
//!    `ts_b - ts_a`): a [`Between`] built from those sums estimates the
//!    clock offsets as the engine does, gives each matched row its
//!    one-way delay and histogram bucket, and judges the transmissions
//!    still waiting at the end.

use std::net::IpAddr;
use std::sync::Arc;

use analyzer::engine::{
    CrossCapture, Fate, FlowPath, Hist, MAX_CAPTURES, MergeConfig, PathSums, Transmission,
    one_way_delay,
};
use arrow_array::builder::{BooleanBuilder, Int32Builder, Int64Builder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_pyarrow::PyArrowType;
use arrow_schema::{DataType, Field, Schema};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use rustc_hash::FxHashMap;

use crate::blob::Flow;
use crate::buckets::{Context, PathKey, PathList};

pub(crate) type PyBatch = PyArrowType<RecordBatch>;

pub(crate) fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Typed access to a batch's columns, with errors that name the column.
pub(crate) struct Cols<'a>(pub(crate) &'a RecordBatch);

impl<'a> Cols<'a> {
    pub(crate) fn get(&self, name: &str) -> PyResult<&'a ArrayRef> {
        self.0
            .column_by_name(name)
            .ok_or_else(|| PyKeyError::new_err(format!("the batch has no column {name:?}")))
    }

    pub(crate) fn i64(&self, name: &str) -> PyResult<&'a arrow_array::Int64Array> {
        self.get(name)?
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| {
                PyTypeError::new_err(format!("column {name:?} must be int64 (Spark: long)"))
            })
    }

    fn i32(&self, name: &str) -> PyResult<&'a arrow_array::Int32Array> {
        self.get(name)?
            .as_primitive_opt::<Int32Type>()
            .ok_or_else(|| {
                PyTypeError::new_err(format!("column {name:?} must be int32 (Spark: int)"))
            })
    }

    pub(crate) fn bool(&self, name: &str) -> PyResult<&'a arrow_array::BooleanArray> {
        self.get(name)?
            .as_boolean_opt()
            .ok_or_else(|| PyTypeError::new_err(format!("column {name:?} must be boolean")))
    }

    pub(crate) fn str(&self, name: &str) -> PyResult<Strings<'a>> {
        let a = self.get(name)?;
        match a.data_type() {
            DataType::Utf8 => Ok(Strings::Small(a.as_string::<i32>())),
            DataType::LargeUtf8 => Ok(Strings::Large(a.as_string::<i64>())),
            DataType::Utf8View => Ok(Strings::View(a.as_string_view())),
            _ => Err(PyTypeError::new_err(format!(
                "column {name:?} must be a string"
            ))),
        }
    }
}

/// A string column, whichever offsets Arrow gave it.
pub(crate) enum Strings<'a> {
    Small(&'a arrow_array::StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
}

impl Strings<'_> {
    pub(crate) fn value(&self, i: usize) -> &str {
        match self {
            Strings::Small(a) => a.value(i),
            Strings::Large(a) => a.value(i),
            Strings::View(a) => a.value(i),
        }
    }
}

/// Addresses parsed once per distinct string of a batch.
#[derive(Default)]
pub(crate) struct Ips(FxHashMap<String, IpAddr>);

impl Ips {
    pub(crate) fn parse(&mut self, text: &str, column: &str) -> PyResult<IpAddr> {
        if let Some(ip) = self.0.get(text) {
            return Ok(*ip);
        }
        let ip: IpAddr = text.parse().map_err(|_| {
            value_error(format!("column {column:?}: {text:?} is not an IP address"))
        })?;
        self.0.insert(text.to_string(), ip);
        Ok(ip)
    }
}

/// The flow columns of a row: `rocev2, src, dst, src_conn, dst_conn, ev`.
struct FlowCols<'a> {
    rocev2: &'a arrow_array::BooleanArray,
    src: Strings<'a>,
    dst: Strings<'a>,
    src_conn: &'a arrow_array::Int64Array,
    dst_conn: &'a arrow_array::Int64Array,
    ev: &'a arrow_array::Int64Array,
}

impl<'a> FlowCols<'a> {
    fn of(c: &Cols<'a>) -> PyResult<Self> {
        Ok(FlowCols {
            rocev2: c.bool("rocev2")?,
            src: c.str("src")?,
            dst: c.str("dst")?,
            src_conn: c.i64("src_conn")?,
            dst_conn: c.i64("dst_conn")?,
            ev: c.i64("ev")?,
        })
    }

    fn path(&self, i: usize, ips: &mut Ips) -> PyResult<FlowPath> {
        Ok(FlowPath {
            rocev2: self.rocev2.value(i),
            src: ips.parse(self.src.value(i), "src")?,
            dst: ips.parse(self.dst.value(i), "dst")?,
            src_conn: self.src_conn.value(i) as u32,
            dst_conn: self.dst_conn.value(i) as u32,
            ev: self.ev.value(i) as u16,
        })
    }
}

/// The matcher's output schema: the transmission, what became of it
/// (`state`: `matched`, `left` the window unmatched and counted lost,
/// `waiting` at the end of the partition's sightings), its copies (`a`:
/// the lower capture of a match, or the only copy) and the engine that
/// decided.
pub fn matched_schema() -> Schema {
    let long = |n: &str, null: bool| Field::new(n, DataType::Int64, null);
    Schema::new(vec![
        Field::new("rocev2", DataType::Boolean, false),
        Field::new("src", DataType::Utf8, false),
        Field::new("dst", DataType::Utf8, false),
        long("src_conn", false),
        long("dst_conn", false),
        long("ptype", false),
        long("psn", false),
        long("tx_ts", false),
        long("ev", false),
        long("path_seq", false),
        Field::new("state", DataType::Utf8, false),
        Field::new("ca", DataType::Int32, false),
        Field::new("cb", DataType::Int32, true),
        long("ts_a", false),
        long("ts_b", true),
        long("frame_a", false),
        long("frame_b", true),
        Field::new("engine", DataType::Utf8, false),
    ])
}

/// Rows of [`matched_schema`] being built.
#[derive(Default)]
struct Out {
    rocev2: BooleanBuilder,
    src: StringBuilder,
    dst: StringBuilder,
    src_conn: Int64Builder,
    dst_conn: Int64Builder,
    ptype: Int64Builder,
    psn: Int64Builder,
    tx_ts: Int64Builder,
    ev: Int64Builder,
    path_seq: Int64Builder,
    state: StringBuilder,
    ca: Int32Builder,
    cb: Int32Builder,
    ts_a: Int64Builder,
    ts_b: Int64Builder,
    frame_a: Int64Builder,
    frame_b: Int64Builder,
    engine: StringBuilder,
}

/// A copy: (capture, ts, frame).
type Copy3 = (u16, u64, u64);

impl Out {
    fn push(
        &mut self,
        tx: &Transmission,
        names: (&str, &str),
        state: &str,
        a: Copy3,
        b: Option<Copy3>,
    ) {
        self.rocev2.append_value(tx.rocev2);
        self.src.append_value(names.0);
        self.dst.append_value(names.1);
        self.src_conn.append_value(i64::from(tx.src_conn));
        self.dst_conn.append_value(i64::from(tx.dst_conn));
        self.ptype.append_value(i64::from(tx.ptype));
        self.psn.append_value(i64::from(tx.psn));
        self.tx_ts.append_value(i64::from(tx.tx_ts));
        self.ev.append_value(i64::from(tx.ev));
        self.path_seq.append_value(i64::from(tx.path_seq));
        self.state.append_value(state);
        self.ca.append_value(i32::from(a.0));
        self.ts_a.append_value(a.1 as i64);
        self.frame_a.append_value(a.2 as i64);
        self.cb.append_option(b.map(|b| i32::from(b.0)));
        self.ts_b.append_option(b.map(|b| b.1 as i64));
        self.frame_b.append_option(b.map(|b| b.2 as i64));
        self.engine.append_value(analyzer::ENGINE_VERSION);
    }

    fn finish(mut self) -> PyResult<RecordBatch> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.rocev2.finish()),
            Arc::new(self.src.finish()),
            Arc::new(self.dst.finish()),
            Arc::new(self.src_conn.finish()),
            Arc::new(self.dst_conn.finish()),
            Arc::new(self.ptype.finish()),
            Arc::new(self.psn.finish()),
            Arc::new(self.tx_ts.finish()),
            Arc::new(self.ev.finish()),
            Arc::new(self.path_seq.finish()),
            Arc::new(self.state.finish()),
            Arc::new(self.ca.finish()),
            Arc::new(self.cb.finish()),
            Arc::new(self.ts_a.finish()),
            Arc::new(self.ts_b.finish()),
            Arc::new(self.frame_a.finish()),
            Arc::new(self.frame_b.finish()),
            Arc::new(self.engine.finish()),
        ];
        RecordBatch::try_new(Arc::new(matched_schema()), columns).map_err(value_error)
    }
}

fn capture_index(c: i32) -> PyResult<u16> {
    u16::try_from(c).map_err(|_| {
        value_error(format!(
            "capture {c}: the engine matches at most {MAX_CAPTURES} captures (0..{MAX_CAPTURES})"
        ))
    })
}

/// The engine's matcher for one partition of the sightings (every
/// sighting of a transmission in the same partition, in capture-time
/// order). `spans[c]` is capture c's `(first_ts_ns, last_ts_ns)`.
///
/// Input batches have the columns `rocev2, malformed` (boolean), `src,
/// dst` (string), `src_conn, dst_conn, type_code, psn, tx_ts, ev,
/// path_seq, ts, frame, ecn` (int64; RoCEv2: `dst_conn` its destination
/// QP, `ev` its UDP source port) and `capture` (int32).
#[pyclass]
pub struct Matcher {
    cross: CrossCapture,
    ips: Ips,
}

#[pymethods]
impl Matcher {
    #[new]
    #[pyo3(signature = (spans, *, window_ns = 1_000_000_000))]
    fn new(spans: Vec<(u64, u64)>, window_ns: u64) -> PyResult<Self> {
        if spans.len() > MAX_CAPTURES {
            return Err(value_error(format!(
                "{} captures: the engine matches at most {MAX_CAPTURES}",
                spans.len()
            )));
        }
        let cfg = MergeConfig {
            window_ns,
            // Every transmission of the partition may wait: the reduce's
            // memory is the partition's, not a live capture's.
            max_pending: usize::MAX,
            ..MergeConfig::default()
        };
        Ok(Matcher {
            cross: CrossCapture::for_rows(cfg, &spans),
            ips: Ips::default(),
        })
    }

    /// Matches one batch of sightings: the transmissions it matched (the
    /// unmatched ones come at [`Matcher::finish`]).
    fn observe(&mut self, py: Python<'_>, batch: PyBatch) -> PyResult<PyBatch> {
        let batch = batch.0;
        py.detach(|| self.observe_batch(&batch)).map(PyArrowType)
    }

    /// The partition's end: the transmissions that left the window
    /// unmatched (`left`) and those still waiting (`waiting`).
    fn finish(&mut self) -> PyResult<PyBatch> {
        let mut out = Out::default();
        self.unmatched(&mut out);
        out.finish().map(PyArrowType)
    }
}

impl Matcher {
    fn observe_batch(&mut self, batch: &RecordBatch) -> PyResult<RecordBatch> {
        let c = Cols(batch);
        let flow = FlowCols::of(&c)?;
        let malformed = c.bool("malformed")?;
        let (type_code, psn, tx_ts) = (c.i64("type_code")?, c.i64("psn")?, c.i64("tx_ts")?);
        let (path_seq, ts, frame, ecn) = (
            c.i64("path_seq")?,
            c.i64("ts")?,
            c.i64("frame")?,
            c.i64("ecn")?,
        );
        let capture = c.i32("capture")?;
        let mut out = Out::default();
        for i in 0..batch.num_rows() {
            let p = flow.path(i, &mut self.ips)?;
            let row = Transmission {
                rocev2: p.rocev2,
                src: p.src,
                dst: p.dst,
                src_conn: p.src_conn,
                dst_conn: p.dst_conn,
                ptype: type_code.value(i) as u8,
                psn: psn.value(i) as u32,
                tx_ts: tx_ts.value(i) as u32,
                ev: p.ev,
                path_seq: path_seq.value(i) as u16,
            };
            let Some(tx) = row.matchable(malformed.value(i)) else {
                continue;
            };
            let here = (
                capture_index(capture.value(i))?,
                ts.value(i) as u64,
                frame.value(i) as u64,
            );
            let copy =
                self.cross
                    .observe_transmission(here.0, &tx, here.1, here.2, ecn.value(i) as u8);
            if let Some(other) = copy {
                let other = (other.capture, other.ts_ns, other.frame);
                let (a, b) = if other.0 < here.0 {
                    (other, here)
                } else {
                    (here, other)
                };
                let names = (flow.src.value(i), flow.dst.value(i));
                out.push(&tx, names, "matched", a, Some(b));
            }
        }
        out.finish()
    }

    fn unmatched(&mut self, out: &mut Out) {
        for (tx, copy, fate) in self.cross.take_unmatched() {
            let state = if fate == Some(Fate::Lost) {
                "left"
            } else {
                "waiting"
            };
            let (src, dst) = (tx.src.to_string(), tx.dst.to_string());
            out.push(
                &tx,
                (&src, &dst),
                state,
                (copy.capture, copy.ts_ns, copy.frame),
                None,
            );
        }
    }
}

/// The reduce's second step: the engine's estimates from the matches
/// summed per path over every partition.
///
/// `spans[c]`: capture c's `(first_ts_ns, last_ts_ns)`; `paths`: per path
/// between captures `ca < cb`, `(ca, cb, rocev2, src, dst, src_conn,
/// dst_conn, ev, n, min, max, sum)` of `ts_b - ts_a` (`sum` as a decimal
/// string: it may exceed 64 bits).
#[pyclass]
pub struct Between {
    /// The bucket reduce's context of the same sums: offsets, each path's
    /// direction.
    ctx: Context,
    ips: Ips,
}

type PathRow = (
    i32,
    i32,
    bool,
    String,
    String,
    i64,
    i64,
    i64,
    u64,
    i64,
    i64,
    String,
);

#[pymethods]
impl Between {
    #[new]
    fn new(spans: Vec<(u64, u64)>, paths: Vec<PathRow>) -> PyResult<Self> {
        let mut ips = Ips::default();
        let mut list: PathList = Vec::with_capacity(paths.len());
        for (ca, cb, rocev2, src, dst, src_conn, dst_conn, ev, n, min, max, sum) in &paths {
            let flow = Flow {
                rocev2: *rocev2,
                src: ips.parse(src, "src")?,
                dst: ips.parse(dst, "dst")?,
                src_conn: *src_conn as u32,
                dst_conn: *dst_conn as u32,
            };
            let sum: i128 = sum
                .parse()
                .map_err(|_| value_error(format!("path sum {sum:?} is not an integer")))?;
            let key = PathKey {
                a: capture_index(*ca)?,
                b: capture_index(*cb)?,
                flow,
                ev: *ev as u16,
            };
            list.push((
                key,
                PathSums {
                    n: *n,
                    min: *min,
                    max: *max,
                    sum,
                },
            ));
        }
        Ok(Between {
            ctx: Context::of_list(&spans, &list)?,
            ips,
        })
    }

    /// Matched rows (`ca, cb, rocev2, src, dst, src_conn, dst_conn, ev,
    /// ts_a, ts_b`) with their path's direction and delay: the batch's
    /// columns plus `up`, `down` (captures), `owd` (the offset-corrected
    /// one-way delay, ns) and `owd_bucket` (its histogram bucket's lowest
    /// value).
    fn one_way_delays(&mut self, py: Python<'_>, batch: PyBatch) -> PyResult<PyBatch> {
        let batch = batch.0;
        py.detach(|| self.delays(&batch)).map(PyArrowType)
    }

    /// Unmatched rows (`state, ca, ts_a` and the flow) judged: the batch's
    /// columns plus `fate`: `lost` for those that left the window (the
    /// matcher counted them), for those waiting at the end the engine's
    /// rule (`lost`, `unknown`, or null: they count in neither).
    fn judge(&mut self, py: Python<'_>, batch: PyBatch) -> PyResult<PyBatch> {
        let batch = batch.0;
        py.detach(|| self.fates(&batch)).map(PyArrowType)
    }
}

impl Between {
    fn delays(&mut self, batch: &RecordBatch) -> PyResult<RecordBatch> {
        let c = Cols(batch);
        let flow = FlowCols::of(&c)?;
        let (ca, cb) = (c.i32("ca")?, c.i32("cb")?);
        let (ts_a, ts_b) = (c.i64("ts_a")?, c.i64("ts_b")?);
        let n = batch.num_rows();
        let (mut up, mut down) = (
            Int32Builder::with_capacity(n),
            Int32Builder::with_capacity(n),
        );
        let mut delta_col = Int64Builder::with_capacity(n);
        let (mut owd, mut bucket) = (
            Int64Builder::with_capacity(n),
            Int64Builder::with_capacity(n),
        );
        for i in 0..n {
            let (a, b) = (capture_index(ca.value(i))?, capture_index(cb.value(i))?);
            let p = flow.path(i, &mut self.ips)?;
            let key = PathKey {
                a,
                b,
                flow: Flow::of_path(&p),
                ev: p.ev,
            };
            let &(a_first, offset) = self.ctx.direction.get(&key).ok_or_else(|| {
                value_error(format!(
                    "a matched row of a path Between was not given: {a} {b} {p:?}"
                ))
            })?;
            let delta = ts_b.value(i).saturating_sub(ts_a.value(i));
            let d = one_way_delay(a_first, delta, offset);
            let (u, w) = if a_first { (a, b) } else { (b, a) };
            up.append_value(i32::from(u));
            down.append_value(i32::from(w));
            delta_col.append_value(delta);
            owd.append_value(d as i64);
            bucket.append_value(Hist::bucket_lowest(d) as i64);
        }
        let added: [(&str, DataType, ArrayRef); 5] = [
            ("up", DataType::Int32, Arc::new(up.finish())),
            ("down", DataType::Int32, Arc::new(down.finish())),
            ("delta", DataType::Int64, Arc::new(delta_col.finish())),
            ("owd", DataType::Int64, Arc::new(owd.finish())),
            ("owd_bucket", DataType::Int64, Arc::new(bucket.finish())),
        ];
        extend(batch, added)
    }

    fn fates(&mut self, batch: &RecordBatch) -> PyResult<RecordBatch> {
        let c = Cols(batch);
        let flow = FlowCols::of(&c)?;
        let state = c.str("state")?;
        let (ca, ts_a) = (c.i32("ca")?, c.i64("ts_a")?);
        let (ptype, psn, tx_ts, path_seq) = (
            c.i64("ptype")?,
            c.i64("psn")?,
            c.i64("tx_ts")?,
            c.i64("path_seq")?,
        );
        let mut fate = StringBuilder::new();
        for i in 0..batch.num_rows() {
            let judged = match state.value(i) {
                "left" => Some(Fate::Lost),
                "waiting" => {
                    let p = flow.path(i, &mut self.ips)?;
                    let tx = Transmission {
                        rocev2: p.rocev2,
                        src: p.src,
                        dst: p.dst,
                        src_conn: p.src_conn,
                        dst_conn: p.dst_conn,
                        ptype: ptype.value(i) as u8,
                        psn: psn.value(i) as u32,
                        tx_ts: tx_ts.value(i) as u32,
                        ev: p.ev,
                        path_seq: path_seq.value(i) as u16,
                    };
                    let capture = capture_index(ca.value(i))?;
                    let ctx = &self.ctx;
                    ctx.cross
                        .fate_at_end(&ctx.offsets, &tx, capture, ts_a.value(i) as u64)
                }
                _ => None,
            };
            fate.append_option(judged.map(|f| match f {
                Fate::Lost => "lost",
                Fate::Unknown => "unknown",
            }));
        }
        extend(
            batch,
            [("fate", DataType::Utf8, Arc::new(fate.finish()) as ArrayRef)],
        )
    }
}

/// `batch` with `added` columns after its own.
fn extend<const N: usize>(
    batch: &RecordBatch,
    added: [(&str, DataType, ArrayRef); N],
) -> PyResult<RecordBatch> {
    let schema = batch.schema();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    for (name, ty, array) in added {
        fields.push(Field::new(
            name,
            ty,
            array.null_count() > 0 || name == "fate",
        ));
        columns.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(value_error)
}
