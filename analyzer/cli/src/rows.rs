//! The `packets` table's rows and columns: one row per MetaRoCE or RoCEv2
//! packet, the observation and the engine's verdict side by side. One
//! model for every writer of the table: `export` turns the columns into a
//! polars frame (Parquet, CSV), the `metaroce` Python package
//! (`python/`) into Arrow arrays; neither lists a column of its own.
//! The columns are documented in [`crate::export`].
//!
//! HOP_TELEMETRY is not part of the engine's `Observation` (a small `Copy`
//! struct the hot loop moves between threads); [`Telemetry`] reads it
//! with proto-parse from a second reader of the same capture that follows
//! the frames the engine sees (standard input cannot be read twice: no
//! telemetry columns are filled then).

use std::io;
use std::net::IpAddr;
use std::path::Path;

use analyzer::engine::{MrBody, ObsKind, Observation, Verdict};
use proto_parse::capture::Reader;
use proto_parse::frame::{self, DecodeConfig, LinkType};
use proto_parse::metaroce::{Flags, HopTelemetry};

/// The values of one column, typed as the table stores them.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
    OptU8(Vec<Option<u8>>),
    OptU16(Vec<Option<u16>>),
    OptU32(Vec<Option<u32>>),
    OptU64(Vec<Option<u64>>),
    OptI64(Vec<Option<i64>>),
    Str(Vec<&'static str>),
    OptStr(Vec<Option<&'static str>>),
    Text(Vec<String>),
    OptText(Vec<Option<String>>),
    /// A list per row (null without one).
    ListU32(Vec<Option<Vec<u32>>>),
    ListU16(Vec<Option<Vec<u16>>>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::U8(v) => v.len(),
            Values::U16(v) => v.len(),
            Values::U32(v) => v.len(),
            Values::U64(v) => v.len(),
            Values::Bool(v) => v.len(),
            Values::OptU8(v) => v.len(),
            Values::OptU16(v) => v.len(),
            Values::OptU32(v) => v.len(),
            Values::OptU64(v) => v.len(),
            Values::OptI64(v) => v.len(),
            Values::Str(v) => v.len(),
            Values::OptStr(v) => v.len(),
            Values::Text(v) => v.len(),
            Values::OptText(v) => v.len(),
            Values::ListU32(v) => v.len(),
            Values::ListU16(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A named column.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: &'static str,
    pub values: Values,
}

fn column(name: &'static str, values: Values) -> Column {
    Column { name, values }
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

    fn column(&self, name: &'static str, ids: &[u32]) -> Column {
        let v = ids
            .iter()
            .map(|&i| self.names[i as usize].clone())
            .collect();
        column(name, Values::Text(v))
    }
}

/// The rows of one capture's packets table, as columns being filled.
#[derive(Default)]
pub struct PacketRows {
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

impl PacketRows {
    pub fn len(&self) -> usize {
        self.frame.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frame.is_empty()
    }

    /// One packet, its verdict and its HOP_TELEMETRY entries.
    pub fn push(&mut self, obs: &Observation, v: &Verdict, hops: Option<&[HopTelemetry]>) {
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

    /// One list per packet of a field of its HOP_TELEMETRY entries.
    fn hop_lists<T>(&self, field: impl Fn(&HopTelemetry) -> T) -> Vec<Option<Vec<T>>> {
        self.hop_range
            .iter()
            .map(|range| {
                range.map(|(start, len)| {
                    self.hops[start as usize..(start + len) as usize]
                        .iter()
                        .map(&field)
                        .collect()
                })
            })
            .collect()
    }

    /// The rows so far as the table's columns, in the table's order
    /// (`host`: the `capture_host` column); empties the rows, keeping the
    /// address table for the next part.
    pub fn take_columns(&mut self, host: &str) -> Vec<Column> {
        let hop_switch_id = self.hop_lists(|h| h.switch_id);
        let hop_queue_depth = self.hop_lists(|h| h.queue_depth);
        let hop_latency_ns = self.hop_lists(|h| h.hop_latency);
        let addrs = std::mem::take(&mut self.addrs);
        let p = std::mem::take(self);
        let rows = p.frame.len();
        let src = addrs.column("src", &p.src);
        let dst = addrs.column("dst", &p.dst);
        self.addrs = addrs;
        vec![
            column("frame", Values::U64(p.frame)),
            column("ts_ns", Values::U64(p.ts_ns)),
            src,
            dst,
            column("src_port", Values::U16(p.src_port)),
            column("dst_port", Values::U16(p.dst_port)),
            column("ecn", Values::U8(p.ecn)),
            column("proto", Values::Str(p.proto)),
            column("malformed", Values::Bool(p.malformed)),
            column("type", Values::Str(p.ptype)),
            column("ev", Values::OptU16(p.ev)),
            column("path_seq", Values::OptU16(p.path_seq)),
            column("src_conn", Values::OptU32(p.src_conn)),
            column("dst_conn", Values::OptU32(p.dst_conn)),
            column("dest_qp", Values::OptU32(p.dest_qp)),
            column("psn", Values::U32(p.psn)),
            column("tx_attempt", Values::OptU8(p.tx_attempt)),
            column("msg_id", Values::OptU32(p.msg_id)),
            column("msg_offset", Values::OptU32(p.msg_offset)),
            column("payload_len", Values::OptU32(p.payload_len)),
            column("actual_len", Values::OptU32(p.actual_len)),
            column("echo_ev", Values::OptU16(p.echo_ev)),
            column("echo_psn", Values::OptU32(p.echo_psn)),
            column("retransmission", Values::OptStr(p.retransmission)),
            column("out_of_order", Values::OptU32(p.out_of_order)),
            column("path_loss", Values::OptU32(p.path_loss)),
            column("trimmed", Values::Bool(p.trimmed)),
            column("ce_marked", Values::Bool(p.ce_marked)),
            column("nack", Values::OptText(p.nack)),
            column("ack_rtt_ns", Values::OptU64(p.ack_rtt_ns)),
            column("fabric_rtt_ns", Values::OptI64(p.fabric_rtt_ns)),
            column("acked_frame", Values::OptU64(p.acked_frame)),
            column("cum_ack_advance", Values::OptU32(p.cum_ack_advance)),
            column("stall_elapsed_ns", Values::OptU64(p.stall_elapsed_ns)),
            column("capture_host", Values::Text(vec![host.to_string(); rows])),
            column("type_code", Values::U8(p.type_code)),
            column("tx_ts", Values::OptU32(p.tx_ts)),
            column("hop_switch_id", Values::ListU32(hop_switch_id)),
            column("hop_queue_depth", Values::ListU16(hop_queue_depth)),
            column("hop_latency_ns", Values::ListU16(hop_latency_ns)),
        ]
    }
}
/// A second reader of a capture that follows the frames the engine sees,
/// for what the engine's observations leave out (HOP_TELEMETRY).
pub struct Telemetry {
    reader: Reader<Box<dyn io::Read + Send>>,
    decode: DecodeConfig,
    hops: Vec<HopTelemetry>,
}

impl Telemetry {
    /// A reader of `path` (none for standard input, `-`).
    pub fn open(path: &Path, decode: DecodeConfig) -> Option<Telemetry> {
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
    pub fn hops_of(&mut self, frame: u64) -> Option<&[HopTelemetry]> {
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

/// The packets table of one capture being filled: its rows and the
/// telemetry reader that follows the engine through the same capture.
#[derive(Default)]
pub struct CapturePackets {
    pub rows: PacketRows,
    telemetry: Option<Telemetry>,
}

impl CapturePackets {
    /// Rows of the capture at `path`, whose frames are recognised with
    /// `decode` (the telemetry reader must find the packets the engine
    /// sees).
    pub fn new(path: &Path, decode: DecodeConfig) -> CapturePackets {
        CapturePackets {
            rows: PacketRows::default(),
            telemetry: Telemetry::open(path, decode),
        }
    }

    /// One packet and its verdict, with its HOP_TELEMETRY entries.
    pub fn push(&mut self, obs: &Observation, verdict: &Verdict) {
        let hops = match (&obs.kind, &mut self.telemetry) {
            (ObsKind::MetaRoce(mr), Some(tel)) if mr.flags.contains(Flags::EXT) => {
                tel.hops_of(obs.frame)
            }
            _ => None,
        };
        self.rows.push(obs, verdict, hops);
    }
}
