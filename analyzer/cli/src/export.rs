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
//!   one).
//!
//! HOP_TELEMETRY is not part of the engine's `Observation` (a small `Copy`
//! struct the hot loop moves between threads); the export reads it with
//! proto-parse from a second reader of the same capture that follows the
//! frames the engine sees (standard input cannot be read twice: no
//! telemetry columns are filled then).

use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::pipeline::Sink;
use analyzer::engine::{MrBody, MsgDone, MsgView, ObsKind, Observation, Report, Verdict};
use proto_parse::capture::Reader;
use proto_parse::frame::{self, DecodeConfig, LinkType};
use proto_parse::metaroce::{Flags, HopTelemetry};

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
    type_code: Vec<u8>,
    tx_ts: Vec<Option<u32>>,
    /// HOP_TELEMETRY of each packet: a range of `hops`, or none.
    hop_range: Vec<Option<(u32, u32)>>,
    hops: Vec<HopTelemetry>,
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

    fn push(&mut self, obs: &Observation, v: &Verdict, hops: Option<&[HopTelemetry]>) {
        self.hop_range.push(hops.map(|h| {
            let start = self.hops.len() as u32;
            self.hops.extend_from_slice(h);
            (start, h.len() as u32)
        }));
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
                self.type_code.push(u8::from(mr.ptype));
                self.tx_ts.push(Some(mr.tx_ts));
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
                self.type_code.push(u8::from(r.opcode));
                self.tx_ts.push(None);
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

    /// One list column of the HOP_TELEMETRY entries.
    fn hop_column<T: PolarsNumericType>(
        &self,
        name: &str,
        field: impl Fn(&HopTelemetry) -> T::Native,
    ) -> Column {
        let mut b = ListPrimitiveChunkedBuilder::<T>::new(
            name.into(),
            self.hop_range.len(),
            self.hops.len(),
            T::get_static_dtype(),
        );
        let mut values = Vec::new();
        for range in &self.hop_range {
            match *range {
                Some((start, len)) => {
                    values.clear();
                    let hops = &self.hops[start as usize..(start + len) as usize];
                    values.extend(hops.iter().map(&field));
                    b.append_slice(&values);
                }
                None => b.append_null(),
            }
        }
        b.finish().into_series().into()
    }

    fn take_frame(&mut self, host: &str) -> PolarsResult<DataFrame> {
        let hop_columns = [
            self.hop_column::<UInt32Type>("hop_switch_id", |h| h.switch_id),
            self.hop_column::<UInt16Type>("hop_queue_depth", |h| h.queue_depth),
            self.hop_column::<UInt16Type>("hop_latency_ns", |h| h.hop_latency),
        ];
        // The address table is kept for the next part.
        let addrs = std::mem::take(&mut self.addrs);
        let p = std::mem::take(self);
        let rows = p.frame.len();
        let src = addrs.column("src", &p.src);
        let dst = addrs.column("dst", &p.dst);
        self.addrs = addrs;
        DataFrame::new_infer_height(
            vec![
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
                col("capture_host", vec![host; rows]),
                col("type_code", p.type_code),
                col("tx_ts", p.tx_ts),
            ]
            .into_iter()
            .chain(hop_columns)
            .collect(),
        )
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

/// A second reader of a capture that follows the frames the engine sees,
/// for what the engine's observations leave out (HOP_TELEMETRY).
struct Telemetry {
    reader: Reader<Box<dyn io::Read + Send>>,
    decode: DecodeConfig,
    hops: Vec<HopTelemetry>,
}

impl Telemetry {
    fn open(path: &Path, decode: DecodeConfig) -> Option<Telemetry> {
        if path.as_os_str() == "-" {
            return None;
        }
        Some(Telemetry {
            reader: Reader::map_or_open(path).ok()?,
            decode,
            hops: Vec::new(),
        })
    }

    /// The HOP_TELEMETRY entries of frame `frame` (frames are asked for in
    /// increasing order); `None` without the TLV.
    fn hops_of(&mut self, frame: u64) -> Option<&[HopTelemetry]> {
        loop {
            let record = match self.reader.next_record()? {
                Ok(r) => r,
                Err(_) => continue,
            };
            if record.index < frame {
                continue;
            }
            if record.index > frame {
                return None;
            }
            let link = LinkType::from(u32::from(record.linktype));
            let decoded = frame::decode(link, record.data, &self.decode);
            let packet = decoded.metaroce()?;
            self.hops.clear();
            let mut found = false;
            for tlv in packet.tlvs().flatten() {
                if let Some(entries) = tlv.hop_telemetry() {
                    found = true;
                    self.hops.extend(entries);
                }
            }
            return found.then_some(self.hops.as_slice());
        }
    }
}

/// The tables of one capture being written.
struct CaptureTables {
    host: String,
    packets: Packets,
    messages: Messages,
    part: usize,
    packets_written: u64,
    telemetry: Option<Telemetry>,
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
        let n = t.packets.len();
        if n == 0 && t.part > 0 {
            return Ok(());
        }
        let mut df = t.packets.take_frame(&t.host).map_err(io::Error::other)?;
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
                packets: Packets::default(),
                messages: Messages::default(),
                part: 0,
                packets_written: 0,
                telemetry: None,
            });
        }
        self.captures[index].host = stem.to_string();
        self.captures[index].telemetry = Telemetry::open(path, self.decode);
    }

    fn packet(&mut self, capture: usize, obs: &Observation, verdict: &Verdict, done: &[MsgDone]) {
        let Some(t) = self.captures.get_mut(capture) else {
            return;
        };
        let hops = match (&obs.kind, &mut t.telemetry) {
            (ObsKind::MetaRoce(mr), Some(tel)) if mr.flags.contains(Flags::EXT) => {
                tel.hops_of(obs.frame)
            }
            _ => None,
        };
        t.packets.push(obs, verdict, hops);
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
        self.write("paths", &host, 0, &mut df)?;
        let c = &report.capture;
        let exported = self.captures[index].packets_written;
        let mut df = DataFrame::new_infer_height(vec![
            col("capture_host", [host.as_str()]),
            col("frames", [c.frames]),
            col("first_ts_ns", [c.first_ts_ns]),
            col("last_ts_ns", [c.last_ts_ns]),
            col("packets_exported", [exported]),
        ])
        .map_err(io::Error::other)?;
        self.write("captures", &host, 0, &mut df)
    }
}
