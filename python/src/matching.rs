//! The engine's cross-capture matcher over Arrow record batches, row by
//! row ([`Matcher`]): the package's matching for a caller that partitions
//! the sightings itself (every sighting of a transmission in the same
//! partition, each partition in capture-time order, e.g. Spark's
//! `mapInArrow`). One row per transmission: matched, left the window
//! unmatched (lost), or still waiting at the end. The Spark job's reduce
//! matches compact bucket blobs instead ([`crate::shard`],
//! [`crate::buckets`]).
//!
//! Also the Arrow access the other modules share: typed columns whose
//! errors name the column ([`Cols`]), string columns of any offsets, and
//! addresses parsed once per distinct string.

use std::net::IpAddr;
use std::sync::Arc;

use analyzer::engine::{CrossCapture, Fate, FlowPath, MAX_CAPTURES, MergeConfig, Transmission};
use arrow_array::builder::{BooleanBuilder, Int32Builder, Int64Builder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_pyarrow::PyArrowType;
use arrow_schema::{DataType, Field, Schema};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use rustc_hash::FxHashMap;

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
            DataType::Dictionary(key, value)
                if **key == DataType::Int32 && **value == DataType::Utf8 =>
            {
                let d = a.as_dictionary::<Int32Type>();
                Ok(Strings::Dictionary(
                    d.keys().values(),
                    d.values().as_string::<i32>(),
                ))
            }
            _ => Err(PyTypeError::new_err(format!(
                "column {name:?} must be a string (or a dictionary of int32 to string)"
            ))),
        }
    }
}

/// A string column, whichever layout Arrow gave it: a dictionary (a few
/// distinct values, such as addresses, read from Parquet without a
/// string per row) is its keys and values.
pub(crate) enum Strings<'a> {
    Small(&'a arrow_array::StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
    Dictionary(&'a [i32], &'a arrow_array::StringArray),
}

impl Strings<'_> {
    pub(crate) fn value(&self, i: usize) -> &str {
        match self {
            Strings::Small(a) => a.value(i),
            Strings::Large(a) => a.value(i),
            Strings::View(a) => a.value(i),
            // A null row's key may be any value: only keys of the
            // dictionary name a value.
            Strings::Dictionary(keys, values) => match usize::try_from(keys[i]) {
                Ok(k) if k < values.len() => values.value(k),
                _ => "",
            },
        }
    }
}

impl<'a> Strings<'a> {
    /// Each distinct value turned into a `T` once: `(convert(v) per
    /// dictionary value, then convert(""))`, looked up by
    /// [`ByKey::get`]; `None` for a column that is not a dictionary.
    pub(crate) fn by_key<T>(&self, mut convert: impl FnMut(&str) -> T) -> Option<ByKey<'a, T>> {
        let Strings::Dictionary(keys, values) = *self else {
            return None;
        };
        let mut converted: Vec<T> = (0..values.len())
            .map(|k| convert(values.value(k)))
            .collect();
        converted.push(convert(""));
        Some(ByKey { keys, converted })
    }
}

/// A dictionary column's values converted once ([`Strings::by_key`]).
pub(crate) struct ByKey<'a, T> {
    keys: &'a [i32],
    converted: Vec<T>,
}

impl<T> ByKey<'_, T> {
    /// Row `i`'s value converted (a key outside the dictionary, such as
    /// a null row's, reads as "", as [`Strings::value`] has it).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> &T {
        let last = self.converted.len() - 1;
        let k = usize::try_from(self.keys[i]).map_or(last, |k| k.min(last));
        &self.converted[k]
    }
}

pub(crate) fn not_an_address(column: &str, text: &str) -> PyErr {
    value_error(format!("column {column:?}: {text:?} is not an IP address"))
}

/// Addresses parsed once per distinct string of a batch.
#[derive(Default)]
pub(crate) struct Ips(FxHashMap<String, IpAddr>);

impl Ips {
    pub(crate) fn parse(&mut self, text: &str, column: &str) -> PyResult<IpAddr> {
        if let Some(ip) = self.0.get(text) {
            return Ok(*ip);
        }
        let ip: IpAddr = text.parse().map_err(|_| not_an_address(column, text))?;
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
