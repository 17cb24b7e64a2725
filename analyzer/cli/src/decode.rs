//! `metaroce-analyze decode`: one line (or one JSON object) per frame.
//!
//! Field names follow spec section 10 for MetaRoCE and tshark's InfiniBand
//! dissector for RoCEv2, so `decode --json` can be compared with
//! `tshark -T fields` field by field. All bytes are read through
//! `proto_parse`; this module only formats.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::net::IpAddr;
use std::ops::RangeInclusive;
use std::path::Path;

use proto_parse::capture::{Reader, Record};
use proto_parse::frame::{self, DecodeConfig, Frame, Transport};
use proto_parse::metaroce::{self, CrcStatus, Flags, PacketType};
use proto_parse::mirror::Mirror;
use proto_parse::rocev2::{self, IcrcStatus, Syndrome};
use proto_parse::{Error, ErrorKind};
use serde_json::{Map, Value, json};

/// Which frames to print (1-based, as tshark numbers them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameRange(pub RangeInclusive<u64>);

impl Default for FrameRange {
    fn default() -> Self {
        FrameRange(1..=u64::MAX)
    }
}

impl std::str::FromStr for FrameRange {
    type Err = String;

    /// `N`, `N-M`, `N-` or `-M`.
    fn from_str(s: &str) -> Result<Self, String> {
        let number = |t: &str, default: u64| -> Result<u64, String> {
            if t.is_empty() {
                Ok(default)
            } else {
                t.parse::<u64>()
                    .map_err(|_| format!("'{t}' is not a frame number"))
            }
        };
        let (first, last) = match s.split_once('-') {
            Some((a, b)) => (number(a, 1)?, number(b, u64::MAX)?),
            None => {
                let n = number(s, 1)?;
                (n, n)
            }
        };
        if first == 0 || first > last {
            return Err(format!(
                "'{s}' is not a frame range: frames count from 1 and the range must not be empty"
            ));
        }
        Ok(FrameRange(first..=last))
    }
}

/// Totals of a decode run, for the exit status and the closing line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeStats {
    pub frames: u64,
    pub metaroce: u64,
    pub rocev2: u64,
    /// Frames whose decoding stopped on a malformed packet (not on a snaplen
    /// cut).
    pub malformed: u64,
    /// Frames of a link type or protocol this toolkit does not decode.
    pub unsupported: u64,
    /// Corrupt capture records (the reader resynchronised or stopped).
    pub capture_errors: u64,
}

/// Decodes every frame of `path` in `range` and writes one line per frame
/// (or one JSON object per line with `json`).
pub fn run(
    path: &Path,
    config: &DecodeConfig,
    range: &FrameRange,
    json: bool,
    out: &mut dyn Write,
    errors: &mut dyn Write,
) -> io::Result<DecodeStats> {
    let mut reader = Reader::open_or_stdin(path).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })?;
    let mut stats = DecodeStats::default();
    let mut first_ts = None;
    while let Some(next) = reader.next_record() {
        let record = match next {
            Ok(record) => record,
            Err(err) => {
                stats.capture_errors += 1;
                writeln!(errors, "{}: {err}", path.display())?;
                continue;
            }
        };
        let first_ts = *first_ts.get_or_insert(record.ts_ns);
        if record.index > *range.0.end() {
            break;
        }
        let frame = frame::decode(
            frame::LinkType::from(u32::from(record.linktype)),
            record.data,
            config,
        );
        stats.frames += 1;
        match frame.payload {
            Transport::MetaRoce(_) => stats.metaroce += 1,
            Transport::RoceV2(_) => stats.rocev2 += 1,
            Transport::Other => {}
        }
        match frame.error.as_ref().map(|e| &e.kind) {
            Some(ErrorKind::Unsupported { .. }) => stats.unsupported += 1,
            Some(_)
                if !frame
                    .error
                    .as_ref()
                    .is_some_and(Error::is_capture_truncation) =>
            {
                stats.malformed += 1;
            }
            _ => {}
        }
        if !range.0.contains(&record.index) {
            continue;
        }
        if json {
            serde_json::to_writer(&mut *out, &frame_json(&record, &frame))?;
            writeln!(out)?;
        } else {
            writeln!(out, "{}", summary_line(&record, first_ts, &frame))?;
        }
    }
    Ok(stats)
}

fn proto_name(frame: &Frame<'_>) -> &'static str {
    match frame.payload {
        Transport::MetaRoce(_) => "metaroce",
        Transport::RoceV2(_) => "rocev2",
        Transport::Other => "other",
    }
}

fn error_json(err: &Error) -> Value {
    let kind = match err.kind {
        ErrorKind::Truncated { .. } if err.is_capture_truncation() => "capture_truncated",
        ErrorKind::Truncated { .. } => "malformed",
        ErrorKind::BadValue { .. } => "malformed",
        ErrorKind::Unsupported { .. } => "unsupported",
    };
    json!({
        "layer": err.layer.as_str(),
        "offset": err.offset,
        "reason": err.kind.to_string(),
        "kind": kind,
    })
}

/// The CRC status of a frame: CRC32C for MetaRoCE, the ICRC for RoCEv2.
pub fn crc_status(frame: &Frame<'_>) -> &'static str {
    match &frame.payload {
        Transport::MetaRoce(lax) => match (&lax.packet, &lax.layout) {
            (Some(packet), Some(layout)) => packet.crc_status(layout).as_str(),
            _ => CrcStatus::NotChecked.as_str(),
        },
        Transport::RoceV2(roce) => match roce.icrc {
            IcrcStatus::Good => "good",
            IcrcStatus::Bad { .. } => "bad",
            IcrcStatus::NotPresent => "not_present",
            IcrcStatus::NotChecked => "not_checked",
        },
        Transport::Other => "not_checked",
    }
}

/// One frame as the `--json` object.
pub fn frame_json(record: &Record<'_>, frame: &Frame<'_>) -> Value {
    let mut fields = Map::new();
    if let Some(ip) = &frame.ip {
        let (src, dst) = if ip.is_ipv6() {
            ("ipv6.src", "ipv6.dst")
        } else {
            ("ip.src", "ip.dst")
        };
        fields.insert(src.into(), json!(ip.src.to_string()));
        fields.insert(dst.into(), json!(ip.dst.to_string()));
        fields.insert("ip.dsfield.ecn".into(), json!(ip.ecn as u8));
    }
    if let Some(udp) = &frame.udp {
        fields.insert("udp.srcport".into(), json!(udp.src_port));
        fields.insert("udp.dstport".into(), json!(udp.dst_port));
    }
    match &frame.payload {
        Transport::MetaRoce(lax) => {
            if let Some(packet) = &lax.packet {
                metaroce_fields(packet, lax.layout.as_ref(), &mut fields);
            }
        }
        Transport::RoceV2(roce) => {
            if let Some(packet) = &roce.packet {
                rocev2_fields(packet, &mut fields);
            }
        }
        Transport::Other => {}
    }
    let mut value = json!({
        "frame": record.index,
        "ts_ns": record.ts_ns,
        "proto": proto_name(frame),
        "error": frame.error.as_ref().map(error_json),
        "crc": crc_status(frame),
        "fields": fields,
    });
    if let (Some(m), Value::Object(o)) = (&frame.mirror, &mut value) {
        o.insert("mirror".into(), mirror_json(m));
    }
    value
}

/// The outer layers of a mirrored frame (`"mirror"`, only on those).
fn mirror_json(m: &Mirror) -> Value {
    let switch_time = m.switch_time.map(|t| {
        json!({
            "raw": t.raw,
            "granularity": t.granularity.as_str(),
            "seconds": t.seconds,
            "ns": t.full_ns(),
        })
    });
    json!({
        "kind": m.kind.as_str(),
        "src": m.src.to_string(),
        "dst": m.dst.to_string(),
        "session": m.session,
        "gre.key": m.gre_key,
        "gre.seq": m.gre_seq,
        "truncated": m.truncated,
        "switch_time": switch_time,
        "inner_offset": m.inner_offset,
    })
}

/// `[ERSPAN III 192.0.2.1 -> 198.51.100.9 session 5 seq 9]` before a
/// mirrored frame's own line.
fn mirror_label(m: &Mirror) -> String {
    let mut s = format!("[{} {} -> {} session {}", m.kind, m.src, m.dst, m.session);
    if let Some(seq) = m.gre_seq {
        let _ = write!(s, " seq {seq}");
    }
    if let Some(t) = m.switch_time {
        match t.full_ns() {
            Some(ns) => {
                let _ = write!(
                    s,
                    " switch {}.{:09}",
                    ns / 1_000_000_000,
                    ns % 1_000_000_000
                );
            }
            None => {
                let _ = write!(s, " switch ts {} ({})", t.raw, t.granularity.as_str());
            }
        }
    }
    if m.truncated {
        s.push_str(" cut by the switch");
    }
    s.push_str("] ");
    s
}

fn metaroce_fields(
    packet: &metaroce::Packet<&[u8]>,
    layout: Option<&metaroce::Layout>,
    f: &mut Map<String, Value>,
) {
    let flags = packet.flags();
    f.insert("metaroce.version".into(), json!(packet.version()));
    f.insert(
        "metaroce.type".into(),
        json!(u8::from(packet.packet_type())),
    );
    f.insert("metaroce.flags".into(), json!(flags.bits()));
    for (name, flag) in [
        ("ar", Flags::AR),
        ("som", Flags::SOM),
        ("eom", Flags::EOM),
        ("se", Flags::SE),
        ("ext", Flags::EXT),
        ("crc", Flags::CRC),
    ] {
        f.insert(
            format!("metaroce.flags.{name}"),
            json!(flags.contains(flag)),
        );
    }
    f.insert("metaroce.hlen".into(), json!(packet.hlen()));
    f.insert("metaroce.tx_attempt".into(), json!(packet.tx_attempt()));
    f.insert("metaroce.ev".into(), json!(packet.ev()));
    f.insert("metaroce.path_seq".into(), json!(packet.path_seq()));
    f.insert("metaroce.dst_conn".into(), json!(packet.dst_conn()));
    f.insert("metaroce.src_conn".into(), json!(packet.src_conn()));
    f.insert("metaroce.psn".into(), json!(packet.psn()));
    f.insert("metaroce.tx_ts".into(), json!(packet.tx_ts()));
    if let Some(data) = packet.data() {
        f.insert("metaroce.data.op".into(), json!(u8::from(data.op())));
        f.insert(
            "metaroce.data.payload_len".into(),
            json!(data.payload_len()),
        );
        f.insert("metaroce.data.msg_id".into(), json!(data.msg_id()));
        f.insert("metaroce.data.msg_offset".into(), json!(data.msg_offset()));
        f.insert("metaroce.data.msg_len".into(), json!(data.msg_len()));
        if let (Some(va), Some(rkey)) = (data.remote_va(), data.rkey()) {
            f.insert("metaroce.data.remote_va".into(), json!(va));
            f.insert("metaroce.data.rkey".into(), json!(rkey));
        }
        if let Some(imm) = data.imm_data() {
            f.insert("metaroce.data.imm_data".into(), json!(imm));
        }
    }
    if let Some(fb) = packet.feedback() {
        let fb_flags = fb.flags();
        f.insert("metaroce.fb.flags".into(), json!(fb_flags.bits()));
        for (name, flag) in [
            ("ece", metaroce::FbFlags::ECE),
            ("trim", metaroce::FbFlags::TRIM),
            ("dup", metaroce::FbFlags::DUP),
            ("coal", metaroce::FbFlags::COAL),
        ] {
            f.insert(
                format!("metaroce.fb.flags.{name}"),
                json!(fb_flags.contains(flag)),
            );
        }
        f.insert("metaroce.fb.sack_words".into(), json!(fb.sack_words()));
        f.insert("metaroce.fb.echo_ev".into(), json!(fb.echo_ev()));
        f.insert("metaroce.fb.echo_psn".into(), json!(fb.echo_psn()));
        f.insert("metaroce.fb.echo_tx_ts".into(), json!(fb.echo_tx_ts()));
        f.insert("metaroce.fb.rx_ts".into(), json!(fb.rx_ts()));
        f.insert("metaroce.fb.ce_count".into(), json!(fb.ce_count()));
        f.insert("metaroce.fb.rx_buf_level".into(), json!(fb.rx_buf_level()));
        f.insert("metaroce.fb.fwd_hops".into(), json!(fb.fwd_hops()));
        f.insert("metaroce.fb.credit".into(), json!(fb.credit()));
    }
    if let Some(ack) = packet.ack() {
        f.insert("metaroce.ack.sack_base".into(), json!(ack.sack_base()));
        f.insert(
            "metaroce.ack.sack_bitmap".into(),
            json!(hex(ack.sack_bitmap())),
        );
    }
    if let Some(nack) = packet.nack() {
        f.insert("metaroce.nack.code".into(), json!(u8::from(nack.code())));
        f.insert("metaroce.nack.rnr_timer".into(), json!(nack.rnr_timer()));
        f.insert("metaroce.nack.psn".into(), json!(nack.nack_psn()));
    }
    if let Some(reason) = packet.cnp_reason() {
        f.insert("metaroce.cnp.reason".into(), json!(u8::from(reason)));
    }
    if let Some(ctrl) = packet.ctrl() {
        f.insert("metaroce.ctrl.op".into(), json!(u8::from(ctrl.op())));
        f.insert(
            "metaroce.ctrl.cc_algo".into(),
            json!(u8::from(ctrl.cc_algo())),
        );
        f.insert("metaroce.ctrl.mtu".into(), json!(ctrl.mtu()));
        f.insert("metaroce.ctrl.init_psn".into(), json!(ctrl.init_psn()));
        f.insert(
            "metaroce.ctrl.features".into(),
            json!(ctrl.features().bits()),
        );
        f.insert("metaroce.ctrl.ts_unit_ps".into(), json!(ctrl.ts_unit_ps()));
    }
    let tlvs: Vec<_> = packet.tlvs().filter_map(Result::ok).collect();
    if !tlvs.is_empty() {
        let types: Vec<u8> = tlvs.iter().map(|t| u8::from(t.tlv_type)).collect();
        let lens: Vec<u8> = tlvs.iter().map(|t| t.len_words()).collect();
        f.insert("metaroce.tlv.type".into(), json!(types));
        f.insert("metaroce.tlv.len".into(), json!(lens));
    }
    if let Some(layout) = layout {
        if let Some(stored) = packet.stored_crc(layout) {
            f.insert("metaroce.crc".into(), json!(stored));
        }
        f.insert(
            "metaroce.crc.status".into(),
            json!(packet.crc_status(layout).as_str()),
        );
        if layout.trimmed {
            f.insert("metaroce.analysis.trimmed".into(), json!(true));
        }
    }
}

fn rocev2_fields(packet: &rocev2::Packet<&[u8]>, f: &mut Map<String, Value>) {
    let bth = packet.bth();
    f.insert(
        "infiniband.bth.opcode".into(),
        json!(u8::from(bth.opcode())),
    );
    f.insert("infiniband.bth.se".into(), json!(bth.solicited()));
    f.insert("infiniband.bth.m".into(), json!(bth.mig_req()));
    f.insert("infiniband.bth.padcnt".into(), json!(bth.pad_count()));
    f.insert("infiniband.bth.tver".into(), json!(bth.tver()));
    f.insert("infiniband.bth.p_key".into(), json!(bth.p_key()));
    f.insert("infiniband.bth.fecn".into(), json!(bth.fecn()));
    f.insert("infiniband.bth.becn".into(), json!(bth.becn()));
    f.insert("infiniband.bth.destqp".into(), json!(bth.dest_qp()));
    f.insert("infiniband.bth.a".into(), json!(bth.ack_req()));
    f.insert("infiniband.bth.psn".into(), json!(bth.psn()));
    if let Some(deth) = packet.deth() {
        f.insert("infiniband.deth.q_key".into(), json!(deth.q_key()));
        f.insert("infiniband.deth.srcqp".into(), json!(deth.src_qp()));
    }
    if let Some(reth) = packet.reth() {
        f.insert("infiniband.reth.va".into(), json!(reth.va()));
        f.insert("infiniband.reth.r_key".into(), json!(reth.r_key()));
        f.insert("infiniband.reth.dmalen".into(), json!(reth.dma_len()));
    }
    if let Some(aeth) = packet.aeth() {
        f.insert(
            "infiniband.aeth.syndrome".into(),
            json!(aeth.syndrome_byte()),
        );
        f.insert("infiniband.aeth.msn".into(), json!(aeth.msn()));
    }
    if let Some(imm) = packet.imm_dt() {
        f.insert("infiniband.immdt".into(), json!(imm));
    }
    if let Some(rkey) = packet.ieth() {
        f.insert("infiniband.ieth".into(), json!(rkey));
    }
    if let Some(icrc) = packet.icrc() {
        // proto-parse reads the stored ICRC little-endian; tshark shows the
        // same four bytes as a big-endian number.
        f.insert("infiniband.invariant.crc".into(), json!(icrc.swap_bytes()));
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn endpoint(ip: Option<IpAddr>, port: Option<u16>) -> String {
    match (ip, port) {
        (Some(IpAddr::V6(ip)), Some(port)) => format!("[{ip}]:{port}"),
        (Some(ip), Some(port)) => format!("{ip}:{port}"),
        (Some(ip), None) => ip.to_string(),
        _ => "?".into(),
    }
}

/// The tshark-like summary line: number, time since the first frame,
/// addresses, protocol and what the packet says.
pub fn summary_line(record: &Record<'_>, first_ts_ns: u64, frame: &Frame<'_>) -> String {
    let rel = record.ts_ns.saturating_sub(first_ts_ns);
    let src = endpoint(frame.ip.map(|ip| ip.src), frame.udp.map(|u| u.src_port));
    let dst = endpoint(frame.ip.map(|ip| ip.dst), frame.udp.map(|u| u.dst_port));
    let mirror = frame.mirror.as_ref().map(mirror_label).unwrap_or_default();
    let mut line = format!(
        "{:>6} {}.{:09} {mirror}{src} -> {dst} ",
        record.index,
        rel / 1_000_000_000,
        rel % 1_000_000_000
    );
    match &frame.payload {
        Transport::MetaRoce(lax) => {
            line.push_str("MetaRoCE ");
            if let Some(packet) = &lax.packet {
                line.push_str(&metaroce_info(packet, lax.layout.as_ref()));
            }
        }
        Transport::RoceV2(roce) => {
            line.push_str("RoCEv2 ");
            if let Some(packet) = &roce.packet {
                line.push_str(&rocev2_info(packet));
            }
            let _ = write!(line, " icrc={}", crc_status(frame));
        }
        Transport::Other => line.push_str(if frame.udp.is_some() { "UDP" } else { "other" }),
    }
    if let Some(ecn) = frame.ip.map(|ip| ip.ecn)
        && ecn == frame::Ecn::Ce
    {
        line.push_str(" [CE]");
    }
    if let Some(err) = &frame.error {
        let label = match err.kind {
            ErrorKind::Unsupported { .. } => "unsupported",
            _ if err.is_capture_truncation() => "cut",
            _ => "malformed",
        };
        let _ = write!(line, " [{label}: {err}]");
    }
    line
}

/// The compact MetaRoCE description shared by the summary line (and the
/// dissector's Info column follows the same order).
pub fn metaroce_info(
    packet: &metaroce::Packet<&[u8]>,
    layout: Option<&metaroce::Layout>,
) -> String {
    let ty = packet.packet_type();
    let mut s = String::new();
    match packet.data() {
        Some(data) => {
            let _ = write!(s, "{}", data.op());
        }
        None => {
            let _ = write!(s, "{ty}");
        }
    }
    if let Some(ctrl) = packet.ctrl() {
        let _ = write!(
            s,
            " {} mtu={} init_psn={}",
            ctrl.op(),
            ctrl.mtu(),
            ctrl.init_psn()
        );
    }
    let _ = write!(s, " {:#x}->{:#x}", packet.src_conn(), packet.dst_conn());
    match ty {
        PacketType::Data => {
            let _ = write!(s, " psn={}", packet.psn());
        }
        PacketType::Ctrl => {}
        PacketType::Probe => {
            let _ = write!(s, " probe={}", packet.psn());
        }
        _ => {
            let _ = write!(s, " ack={}", packet.psn());
        }
    }
    let _ = write!(s, " ev={}", packet.ev());
    if packet.tx_attempt() > 0 {
        let _ = write!(s, " attempt={}", packet.tx_attempt());
    }
    if let Some(data) = packet.data() {
        let _ = write!(
            s,
            " msg={}:{}/{}",
            data.msg_id(),
            data.msg_offset(),
            data.msg_len()
        );
    }
    if let Some(fb) = packet.feedback() {
        let _ = write!(s, " echo={}@{}", fb.echo_psn(), fb.echo_ev());
    }
    if let Some(ack) = packet.ack() {
        let ranges = ack.sack_ranges();
        if !ranges.is_empty() {
            s.push_str(" sack=");
            for (i, r) in ranges.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let _ = write!(s, "{sep}{}-{}", r.start, r.end.wrapping_sub(1));
            }
        }
    }
    if let Some(nack) = packet.nack() {
        let _ = write!(s, " {} nack_psn={}", nack.code(), nack.nack_psn());
    }
    if let Some(reason) = packet.cnp_reason() {
        let _ = write!(s, " {reason}");
    }
    let flag_names: Vec<&str> = packet.flags().iter_names().map(|(name, _)| name).collect();
    if !flag_names.is_empty() {
        let _ = write!(s, " [{}]", flag_names.join(","));
    }
    if let Some(fb) = packet.feedback() {
        let names: Vec<&str> = fb.flags().iter_names().map(|(name, _)| name).collect();
        if !names.is_empty() {
            let _ = write!(s, " fb[{}]", names.join(","));
        }
    }
    if let Some(layout) = layout {
        if layout.trimmed {
            s.push_str(" TRIMMED");
        }
        let crc = packet.crc_status(layout);
        if crc != CrcStatus::NotPresent {
            let _ = write!(s, " crc={}", crc.as_str());
        }
    }
    s
}

fn rocev2_info(packet: &rocev2::Packet<&[u8]>) -> String {
    let bth = packet.bth();
    let mut s = format!("{} qp={:#x} psn={}", bth.opcode(), bth.dest_qp(), bth.psn());
    if bth.ack_req() {
        s.push_str(" [A]");
    }
    if let Some(reth) = packet.reth() {
        let _ = write!(
            s,
            " va={:#x} rkey={:#x} len={}",
            reth.va(),
            reth.r_key(),
            reth.dma_len()
        );
    }
    if let Some(aeth) = packet.aeth() {
        let kind = match aeth.syndrome() {
            Syndrome::Ack { .. } => "ACK".to_string(),
            Syndrome::RnrNak { timer } => format!("RNR-NAK timer={timer}"),
            Syndrome::Nak(code) => format!("NAK {code}"),
            Syndrome::Reserved { value } => format!("reserved syndrome {value}"),
        };
        let _ = write!(s, " {kind} msn={}", aeth.msn());
    }
    if let Some(imm) = packet.imm_dt() {
        let _ = write!(s, " imm={imm:#x}");
    }
    s
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn frame_ranges_parse_like_a_newcomer_expects() {
        assert_eq!("7".parse::<FrameRange>().unwrap(), FrameRange(7..=7));
        assert_eq!("3-9".parse::<FrameRange>().unwrap(), FrameRange(3..=9));
        assert_eq!(
            "5-".parse::<FrameRange>().unwrap(),
            FrameRange(5..=u64::MAX)
        );
        assert_eq!("-4".parse::<FrameRange>().unwrap(), FrameRange(1..=4));
        assert!("0".parse::<FrameRange>().is_err());
        assert!("9-3".parse::<FrameRange>().is_err());
        assert!("x".parse::<FrameRange>().is_err());
    }
}
