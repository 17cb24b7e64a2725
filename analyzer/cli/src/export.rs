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
//!   `stall_elapsed_ns`.
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

use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::pipeline::Sink;
use analyzer::engine::{MrBody, MsgDone, MsgView, ObsKind, Observation, Report, Verdict};

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

/// Addresses as indexes into a table of their strings: no allocation per
/// packet.
#[derive(Default)]
struct Addrs {
    index: rustc_hash::FxHashMap<IpAddr, u32>,
    names: Vec<String>,
}

impl Addrs {
    #[inline]
    fn id(&mut self, ip: IpAddr) -> u32 {
        let names = &mut self.names;
        *self.index.entry(ip).or_insert_with(|| {
            names.push(ip.to_string());
            (names.len() - 1) as u32
        })
    }

    fn column(&self, name: &str, ids: &[u32]) -> Column {
        let v: Vec<&str> = ids
            .iter()
            .map(|&i| self.names[i as usize].as_str())
            .collect();
        col(name, v)
    }
}

#[derive(Default)]
struct Packets {
    frame: Vec<u64>,
    ts_ns: Vec<u64>,
    addrs: Addrs,
    src: Vec<u32>,
    dst: Vec<u32>,
    src_port: Vec<u16>,
    dst_port: Vec<u16>,
    ecn: Vec<u8>,
    proto: Vec<&'static str>,
    malformed: Vec<bool>,
    ptype: Vec<&'static str>,
    ev: Vec<Option<u16>>,
    path_seq: Vec<Option<u16>>,
    src_conn: Vec<Option<u32>>,
    dst_conn: Vec<Option<u32>>,
    dest_qp: Vec<Option<u32>>,
    psn: Vec<u32>,
    tx_attempt: Vec<Option<u8>>,
    msg_id: Vec<Option<u32>>,
    msg_offset: Vec<Option<u32>>,
    payload_len: Vec<Option<u32>>,
    actual_len: Vec<Option<u32>>,
    echo_ev: Vec<Option<u16>>,
    echo_psn: Vec<Option<u32>>,
    retransmission: Vec<Option<&'static str>>,
    out_of_order: Vec<Option<u32>>,
    path_loss: Vec<Option<u32>>,
    trimmed: Vec<bool>,
    ce_marked: Vec<bool>,
    nack: Vec<Option<String>>,
    ack_rtt_ns: Vec<Option<u64>>,
    fabric_rtt_ns: Vec<Option<i64>>,
    acked_frame: Vec<Option<u64>>,
    cum_ack_advance: Vec<Option<u32>>,
    stall_elapsed_ns: Vec<Option<u64>>,
}

fn col<T>(name: &str, v: T) -> Column
where
    Series: NamedFrom<T, [<T as IntoIterator>::Item]>,
    T: IntoIterator + AsRef<[<T as IntoIterator>::Item]>,
{
    Series::new(name.into(), v).into()
}

impl Packets {
    fn len(&self) -> usize {
        self.frame.len()
    }

    fn push(&mut self, obs: &Observation, v: &Verdict) {
        self.frame.push(obs.frame);
        self.ts_ns.push(obs.ts_ns);
        let (src, dst) = (self.addrs.id(obs.src), self.addrs.id(obs.dst));
        self.src.push(src);
        self.dst.push(dst);
        self.src_port.push(obs.src_port);
        self.dst_port.push(obs.dst_port);
        self.ecn.push(obs.ecn);
        self.malformed.push(obs.malformed);
        match &obs.kind {
            ObsKind::MetaRoce(mr) => {
                self.proto.push("metaroce");
                self.ptype.push(mr.ptype.name());
                self.ev.push(Some(mr.ev));
                self.path_seq.push(Some(mr.path_seq));
                self.src_conn.push(Some(mr.src_conn));
                self.dst_conn.push(Some(mr.dst_conn));
                self.dest_qp.push(None);
                self.psn.push(mr.psn);
                self.tx_attempt.push(Some(mr.tx_attempt));
                match &mr.body {
                    MrBody::Data(d) => {
                        self.msg_id.push(Some(d.msg_id));
                        self.msg_offset.push(Some(d.msg_offset));
                        self.payload_len.push(Some(u32::from(d.payload_len)));
                        self.actual_len.push(Some(d.actual_len));
                    }
                    _ => {
                        self.msg_id.push(None);
                        self.msg_offset.push(None);
                        self.payload_len.push(None);
                        self.actual_len.push(None);
                    }
                }
                match &mr.body {
                    MrBody::Feedback(fb) => {
                        self.echo_ev.push(Some(fb.echo_ev));
                        self.echo_psn.push(Some(fb.echo_psn));
                    }
                    _ => {
                        self.echo_ev.push(None);
                        self.echo_psn.push(None);
                    }
                }
            }
            ObsKind::RoceV2(r) => {
                self.proto.push("rocev2");
                self.ptype.push(r.opcode.name());
                self.ev.push(None);
                self.path_seq.push(None);
                self.src_conn.push(None);
                self.dst_conn.push(None);
                self.dest_qp.push(Some(r.dest_qp));
                self.psn.push(r.psn);
                self.tx_attempt.push(None);
                self.msg_id.push(None);
                self.msg_offset.push(None);
                self.payload_len.push(Some(r.payload_len));
                self.actual_len.push(Some(r.payload_len));
                self.echo_ev.push(None);
                self.echo_psn.push(None);
            }
        }
        self.retransmission
            .push(v.retransmission.map(|r| r.kind.as_str()));
        self.out_of_order.push(v.out_of_order);
        self.path_loss.push(v.path_loss);
        self.trimmed.push(v.trimmed);
        self.ce_marked.push(v.ce_marked);
        self.nack.push(
            v.nack
                .map(|n| n.to_string())
                .or_else(|| v.rocev2_nak.map(|s| format!("syndrome 0x{s:02x}"))),
        );
        self.ack_rtt_ns.push(v.ack_rtt_ns);
        self.fabric_rtt_ns.push(v.fabric_rtt_ns);
        self.acked_frame.push(v.acked_frame);
        self.cum_ack_advance.push(v.cum_ack_advance);
        self.stall_elapsed_ns.push(v.stall.map(|s| s.elapsed_ns));
    }

    fn take_frame(&mut self) -> PolarsResult<DataFrame> {
        // The address table is kept for the next part.
        let addrs = std::mem::take(&mut self.addrs);
        let p = std::mem::take(self);
        let src = addrs.column("src", &p.src);
        let dst = addrs.column("dst", &p.dst);
        self.addrs = addrs;
        DataFrame::new_infer_height(vec![
            col("frame", p.frame),
            col("ts_ns", p.ts_ns),
            src,
            dst,
            col("src_port", p.src_port),
            col("dst_port", p.dst_port),
            col("ecn", p.ecn),
            col("proto", p.proto),
            col("malformed", p.malformed),
            col("type", p.ptype),
            col("ev", p.ev),
            col("path_seq", p.path_seq),
            col("src_conn", p.src_conn),
            col("dst_conn", p.dst_conn),
            col("dest_qp", p.dest_qp),
            col("psn", p.psn),
            col("tx_attempt", p.tx_attempt),
            col("msg_id", p.msg_id),
            col("msg_offset", p.msg_offset),
            col("payload_len", p.payload_len),
            col("actual_len", p.actual_len),
            col("echo_ev", p.echo_ev),
            col("echo_psn", p.echo_psn),
            col("retransmission", p.retransmission),
            col("out_of_order", p.out_of_order),
            col("path_loss", p.path_loss),
            col("trimmed", p.trimmed),
            col("ce_marked", p.ce_marked),
            col("nack", p.nack),
            col("ack_rtt_ns", p.ack_rtt_ns),
            col("fabric_rtt_ns", p.fabric_rtt_ns),
            col("acked_frame", p.acked_frame),
            col("cum_ack_advance", p.cum_ack_advance),
            col("stall_elapsed_ns", p.stall_elapsed_ns),
        ])
    }
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
        Format::Csv => CsvWriter::new(file).finish(df),
    };
    res.map_err(|e| io::Error::other(format!("{}: {e}", path.display())))
}

/// The tables of one capture being written.
struct CaptureTables {
    host: String,
    packets: Packets,
    messages: Messages,
    part: usize,
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
}

impl Exporter {
    pub fn new(targets: Vec<(Format, PathBuf)>) -> Exporter {
        Exporter {
            targets,
            captures: Vec::new(),
            written: Vec::new(),
            rows: [0; 3],
            error: None,
        }
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
        let n = t.packets.len();
        if n == 0 && t.part > 0 {
            return Ok(());
        }
        let mut df = t.packets.take_frame().map_err(io::Error::other)?;
        let (host, part) = (t.host.clone(), t.part);
        t.part += 1;
        self.write("packets", &host, part, &mut df)?;
        self.rows[0] += n as u64;
        Ok(())
    }
}

impl Sink for Exporter {
    fn begin_capture(&mut self, index: usize, _path: &Path, stem: &str) {
        while self.captures.len() <= index {
            self.captures.push(CaptureTables {
                host: String::new(),
                packets: Packets::default(),
                messages: Messages::default(),
                part: 0,
            });
        }
        self.captures[index].host = stem.to_string();
    }

    fn packet(&mut self, capture: usize, obs: &Observation, verdict: &Verdict, done: &[MsgDone]) {
        let Some(t) = self.captures.get_mut(capture) else {
            return;
        };
        t.packets.push(obs, verdict);
        t.messages.push(obs, done);
        if t.packets.len() >= PART_ROWS
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
        self.write("paths", &host, 0, &mut df)
    }
}
