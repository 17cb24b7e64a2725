//! `metaroce-analyze export`: per-packet, per-message and per-path tables
//! as Parquet and/or CSV (polars, feature `export`).
//!
//! Layout (Hive-style partitions, so the exports of many hosts can be
//! queried together by polars, DuckDB or Spark):
//!
//! ```text
//! DIR/table=packets/host=<capture stem>/part-<n>.parquet   (one part per 1 Mi packets)
//! DIR/table=messages/host=<capture stem>/part-0.parquet
//! DIR/table=paths/host=<capture stem>/part-0.parquet
//! DIR/table=captures/host=<capture stem>/part-0.parquet
//! ```
//!
//! Columns (names from spec section 10 without the `metaroce.` prefix;
//! analysis columns are the engine's per-packet `Verdict`, null when they
//! do not apply):
//!
//! - `packets`: `frame`, `ts_ns`, `src`, `dst`, `src_port`, `dst_port`,
//!   `ecn`, `proto` (`metaroce`/`rocev2`), `malformed`, `type` (MetaRoCE
//!   type or RoCEv2 opcode name), `ev`, `path_seq`, `src_conn`, `dst_conn`,
//!   `dest_qp` (RoCEv2), `psn` (DATA: its PSN; feedback: the cumulative
//!   ack), `tx_attempt`, `msg_id`, `msg_offset`, `payload_len`,
//!   `actual_len`, `echo_ev`, `echo_psn`, and the verdict: `retransmission`
//!   (`fast`/`timeout`/`spurious`), `out_of_order` (distance), `path_loss`
//!   (path_seq values missing before it), `trimmed`, `ce_marked`, `nack`,
//!   `ack_rtt_ns`, `fabric_rtt_ns`, `acked_frame`, `cum_ack_advance`,
//!   `stall_elapsed_ns`; for the fabric-wide analysis of many hosts'
//!   exports (`cluster/`): `capture_host` (the capture point: the capture
//!   stem), `type_code` (MetaRoCE type or RoCEv2 opcode number, where
//!   `type` names unknown ones alike), `tx_ts` (MetaRoCE), and the
//!   packet's HOP_TELEMETRY entries (spec 6), one list element per switch
//!   in path order, null without the TLV: `hop_switch_id`,
//!   `hop_queue_depth` (cells), `hop_latency_ns`. CSV writes each list as
//!   its numbers separated by spaces.
//! - `messages`: one row per message completion, at the packet that
//!   completed it (a cumulative ack can complete several: one row each):
//!   `frame`, `ts_ns`, `proto`, `src`, `dst`, `src_conn`, `dst_conn` (the
//!   message's direction), `msg_id`, `op`, `view` (`acked`, `delivered`,
//!   `read`), `latency_ns`.
//! - `paths`: one row per (direction, ev) from the final report: `src`,
//!   `dst`, `src_conn`, `dst_conn`, `ev`, `packets`, `data_packets`,
//!   `data_bytes`, `retransmissions`, `lost`, `lost_inferred`, `reordered`,
//!   `ce_marked`, `rtt_count`, `rtt_min_ns`, `rtt_p50_ns`, `rtt_p90_ns`,
//!   `rtt_p99_ns`, `rtt_p999_ns`, `rtt_max_ns`.
//! - `captures`: one row, the capture as a whole: `capture_host`, `frames`
//!   (of any protocol), `first_ts_ns`, `last_ts_ns`, `packets_exported`
//!   (rows of its packets table: a reader of the export can tell a partial
//!   one), `engine_version` (`analyzer::ENGINE_VERSION` of the engine that
//!   wrote it).
//!
//! The packets table's rows and columns are [`crate::rows`]' (shared with
//! the `metaroce` Python package); HOP_TELEMETRY comes from a second
//! reader of the capture (not from standard input).

use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::pipeline::Sink;
use crate::rows::{self, CapturePackets, PacketRows};
use analyzer::engine::{MsgDone, MsgView, ObsKind, Observation, Report, Verdict};
use proto_parse::frame::DecodeConfig;

/// Packets per `part-N` file of the packets table (bounds memory).
pub const PART_ROWS: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Parquet,
    Csv,
}

impl Format {
    fn ext(self) -> &'static str {
        match self {
            Format::Parquet => "parquet",
            Format::Csv => "csv",
        }
    }
}

fn ip_str(ip: IpAddr) -> String {
    ip.to_string()
}

fn col<T>(name: &str, v: T) -> Column
where
    Series: NamedFrom<T, [<T as IntoIterator>::Item]>,
    T: IntoIterator + AsRef<[<T as IntoIterator>::Item]>,
{
    Series::new(name.into(), v).into()
}

/// One list column.
fn list_column<T: PolarsNumericType>(name: &str, lists: &[Option<Vec<T::Native>>]) -> Column {
    let values = lists.iter().flatten().map(Vec::len).sum();
    let mut b = ListPrimitiveChunkedBuilder::<T>::new(
        name.into(),
        lists.len(),
        values,
        T::get_static_dtype(),
    );
    for list in lists {
        match list {
            Some(values) => b.append_slice(values),
            None => b.append_null(),
        }
    }
    b.finish().into_series().into()
}

/// The packets table's columns ([`crate::rows`]) as a polars column.
fn polars_column(c: rows::Column) -> Column {
    use rows::Values as V;
    match c.values {
        V::U8(v) => col(c.name, v),
        V::U16(v) => col(c.name, v),
        V::U32(v) => col(c.name, v),
        V::U64(v) => col(c.name, v),
        V::Bool(v) => col(c.name, v),
        V::OptU8(v) => col(c.name, v),
        V::OptU16(v) => col(c.name, v),
        V::OptU32(v) => col(c.name, v),
        V::OptU64(v) => col(c.name, v),
        V::OptI64(v) => col(c.name, v),
        V::Str(v) => col(c.name, v),
        V::OptStr(v) => col(c.name, v),
        V::Text(v) => col(c.name, v),
        V::OptText(v) => col(c.name, v),
        V::ListU32(v) => list_column::<UInt32Type>(c.name, &v),
        V::ListU16(v) => list_column::<UInt16Type>(c.name, &v),
    }
}

fn packets_frame(rows: &mut PacketRows, host: &str) -> PolarsResult<DataFrame> {
    let columns = rows
        .take_columns(host)
        .into_iter()
        .map(polars_column)
        .collect();
    DataFrame::new_infer_height(columns)
}

#[derive(Default)]
struct Messages {
    frame: Vec<u64>,
    ts_ns: Vec<u64>,
    proto: Vec<&'static str>,
    src: Vec<String>,
    dst: Vec<String>,
    src_conn: Vec<Option<u32>>,
    dst_conn: Vec<Option<u32>>,
    msg_id: Vec<u32>,
    op: Vec<&'static str>,
    view: Vec<&'static str>,
    latency_ns: Vec<u64>,
}

impl Messages {
    fn push(&mut self, obs: &Observation, done: &[MsgDone]) {
        for m in done {
            self.push_one(obs, m);
        }
    }

    fn push_one(&mut self, obs: &Observation, m: &MsgDone) {
        // Acked and READ completions are seen on a packet travelling
        // towards the message's sender; delivery on the message's own.
        let reverse = !matches!(m.view, MsgView::Delivered);
        let (src, dst) = if reverse {
            (obs.dst, obs.src)
        } else {
            (obs.src, obs.dst)
        };
        let (proto, conns) = match &obs.kind {
            ObsKind::MetaRoce(mr) if reverse => ("metaroce", Some((mr.dst_conn, mr.src_conn))),
            ObsKind::MetaRoce(mr) => ("metaroce", Some((mr.src_conn, mr.dst_conn))),
            ObsKind::RoceV2(_) => ("rocev2", None),
        };
        self.frame.push(obs.frame);
        self.ts_ns.push(obs.ts_ns);
        self.proto.push(proto);
        self.src.push(ip_str(src));
        self.dst.push(ip_str(dst));
        self.src_conn.push(conns.map(|c| c.0));
        self.dst_conn.push(conns.map(|c| c.1));
        self.msg_id.push(m.msg_id);
        self.op.push(m.op);
        self.view.push(match m.view {
            MsgView::Acked => "acked",
            MsgView::Delivered => "delivered",
            MsgView::Read => "read",
        });
        self.latency_ns.push(m.latency_ns);
    }

    fn take_frame(&mut self) -> PolarsResult<DataFrame> {
        let m = std::mem::take(self);
        DataFrame::new_infer_height(vec![
            col("frame", m.frame),
            col("ts_ns", m.ts_ns),
            col("proto", m.proto),
            col("src", m.src),
            col("dst", m.dst),
            col("src_conn", m.src_conn),
            col("dst_conn", m.dst_conn),
            col("msg_id", m.msg_id),
            col("op", m.op),
            col("view", m.view),
            col("latency_ns", m.latency_ns),
        ])
    }
}

fn paths_frame(report: &Report) -> PolarsResult<DataFrame> {
    let mut src = Vec::new();
    let mut dst = Vec::new();
    let mut src_conn = Vec::new();
    let mut dst_conn = Vec::new();
    let mut ev = Vec::new();
    let mut packets = Vec::new();
    let mut data_packets = Vec::new();
    let mut data_bytes = Vec::new();
    let mut retx = Vec::new();
    let mut lost = Vec::new();
    let mut lost_inferred = Vec::new();
    let mut reordered = Vec::new();
    let mut ce = Vec::new();
    let mut rtt: [Vec<u64>; 7] = Default::default();
    for d in &report.directions {
        for p in &d.paths {
            src.push(ip_str(d.src));
            dst.push(ip_str(d.dst));
            src_conn.push(d.src_conn);
            dst_conn.push(d.dst_conn);
            ev.push(p.ev);
            packets.push(p.packets);
            data_packets.push(p.data_packets);
            data_bytes.push(p.data_bytes);
            retx.push(p.retransmissions);
            lost.push(p.lost);
            lost_inferred.push(p.lost_inferred);
            reordered.push(p.reordered);
            ce.push(p.ce_marked);
            let s = &p.ack_rtt_ns;
            for (v, x) in rtt
                .iter_mut()
                .zip([s.count, s.min, s.p50, s.p90, s.p99, s.p999, s.max])
            {
                v.push(x);
            }
        }
    }
    let [count, min, p50, p90, p99, p999, max] = rtt;
    DataFrame::new_infer_height(vec![
        col("src", src),
        col("dst", dst),
        col("src_conn", src_conn),
        col("dst_conn", dst_conn),
        col("ev", ev),
        col("packets", packets),
        col("data_packets", data_packets),
        col("data_bytes", data_bytes),
        col("retransmissions", retx),
        col("lost", lost),
        col("lost_inferred", lost_inferred),
        col("reordered", reordered),
        col("ce_marked", ce),
        col("rtt_count", count),
        col("rtt_min_ns", min),
        col("rtt_p50_ns", p50),
        col("rtt_p90_ns", p90),
        col("rtt_p99_ns", p99),
        col("rtt_p999_ns", p999),
        col("rtt_max_ns", max),
    ])
}

/// The path of one part file.
pub fn part_path(dir: &Path, table: &str, host: &str, part: usize, format: Format) -> PathBuf {
    dir.join(format!("table={table}"))
        .join(format!("host={host}"))
        .join(format!("part-{part}.{}", format.ext()))
}

fn write_frame(path: &Path, format: Format, df: &mut DataFrame) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let file = BufWriter::new(File::create(path)?);
    let res = match format {
        Format::Parquet => ParquetWriter::new(file).finish(df).map(|_| ()),
        Format::Csv => lists_as_text(df).and_then(|mut df| CsvWriter::new(file).finish(&mut df)),
    };
    res.map_err(|e| io::Error::other(format!("{}: {e}", path.display())))
}

/// CSV has no lists: each list becomes its values separated by spaces.
fn lists_as_text(df: &DataFrame) -> PolarsResult<DataFrame> {
    let mut out = df.clone();
    for c in df.columns() {
        if !matches!(c.dtype(), DataType::List(_)) {
            continue;
        }
        let lists = c.list()?;
        let text: StringChunked = (0..lists.len())
            .map(|i| lists.get_as_series(i))
            .map(|item| {
                item.map(|values| {
                    let values = values.cast(&DataType::String)?;
                    let words = values.str()?;
                    let words: Vec<&str> = (0..words.len()).filter_map(|i| words.get(i)).collect();
                    PolarsResult::Ok(words.join(" "))
                })
                .transpose()
            })
            .collect::<PolarsResult<_>>()?;
        out.replace(
            c.name(),
            text.with_name(c.name().clone()).into_series().into(),
        )?;
    }
    Ok(out)
}

/// The tables of one capture being written.
struct CaptureTables {
    host: String,
    packets: CapturePackets,
    messages: Messages,
    part: usize,
    packets_written: u64,
}

/// The export sink: collects rows on the engine thread, writes a part of
/// a capture's packets table every [`PART_ROWS`] packets and the rest at
/// the end of the capture.
pub struct Exporter {
    targets: Vec<(Format, PathBuf)>,
    captures: Vec<CaptureTables>,
    written: Vec<PathBuf>,
    rows: [u64; 3],
    error: Option<io::Error>,
    decode: DecodeConfig,
}

impl Exporter {
    pub fn new(targets: Vec<(Format, PathBuf)>) -> Exporter {
        Exporter {
            targets,
            captures: Vec::new(),
            written: Vec::new(),
            rows: [0; 3],
            error: None,
            decode: DecodeConfig::default(),
        }
    }

    /// How the pipeline recognises the protocols (ports, heuristic): the
    /// telemetry reader must find the same packets.
    pub fn with_decode(mut self, decode: DecodeConfig) -> Exporter {
        self.decode = decode;
        self
    }

    /// Files written so far.
    pub fn files(&self) -> &[PathBuf] {
        &self.written
    }

    /// One line: rows and files written.
    pub fn summary(&self) -> String {
        format!(
            "exported {} packets, {} message completions, {} paths in {} files",
            self.rows[0],
            self.rows[1],
            self.rows[2],
            self.written.len()
        )
    }

    fn write(
        &mut self,
        table: &str,
        host: &str,
        part: usize,
        df: &mut DataFrame,
    ) -> io::Result<()> {
        for (format, dir) in &self.targets {
            let path = part_path(dir, table, host, part, *format);
            write_frame(&path, *format, df)?;
            self.written.push(path);
        }
        Ok(())
    }

    fn flush_packets(&mut self, capture: usize) -> io::Result<()> {
        let Some(t) = self.captures.get_mut(capture) else {
            return Ok(());
        };
        let n = t.packets.rows.len();
        if n == 0 && t.part > 0 {
            return Ok(());
        }
        let mut df = packets_frame(&mut t.packets.rows, &t.host).map_err(io::Error::other)?;
        let (host, part) = (t.host.clone(), t.part);
        t.part += 1;
        self.write("packets", &host, part, &mut df)?;
        self.rows[0] += n as u64;
        self.captures[capture].packets_written += n as u64;
        Ok(())
    }
}

impl Sink for Exporter {
    fn begin_capture(&mut self, index: usize, path: &Path, stem: &str) {
        while self.captures.len() <= index {
            self.captures.push(CaptureTables {
                host: String::new(),
                packets: CapturePackets::default(),
                messages: Messages::default(),
                part: 0,
                packets_written: 0,
            });
        }
        self.captures[index].host = stem.to_string();
        self.captures[index].packets = CapturePackets::new(path, self.decode);
    }

    fn packet(&mut self, capture: usize, obs: &Observation, verdict: &Verdict, done: &[MsgDone]) {
        let Some(t) = self.captures.get_mut(capture) else {
            return;
        };
        t.packets.push(obs, verdict);
        t.messages.push(obs, done);
        if t.packets.rows.len() >= PART_ROWS
            && self.error.is_none()
            && let Err(e) = self.flush_packets(capture)
        {
            self.error = Some(e);
        }
    }

    fn end_capture(&mut self, index: usize, report: &Report) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.flush_packets(index)?;
        let Some(t) = self.captures.get_mut(index) else {
            return Ok(());
        };
        let host = t.host.clone();
        let n = t.messages.frame.len() as u64;
        let mut df = t.messages.take_frame().map_err(io::Error::other)?;
        self.write("messages", &host, 0, &mut df)?;
        self.rows[1] += n;
        let mut df = paths_frame(report).map_err(io::Error::other)?;
        self.rows[2] += df.height() as u64;
        self.write("paths", &host, 0, &mut df)?;
        let c = &report.capture;
        let exported = self.captures[index].packets_written;
        let mut df = DataFrame::new_infer_height(vec![
            col("capture_host", [host.as_str()]),
            col("frames", [c.frames]),
            col("first_ts_ns", [c.first_ts_ns]),
            col("last_ts_ns", [c.last_ts_ns]),
            col("packets_exported", [exported]),
            col("engine_version", [analyzer::ENGINE_VERSION]),
        ])
        .map_err(io::Error::other)?;
        self.write("captures", &host, 0, &mut df)
    }
}
