//! The Info line: one summary per packet, written without `core::fmt`
//! for numbers (it is built for every packet whose tree is shown).

use std::fmt::Write as _;

use proto_parse::Error;
use proto_parse::metaroce::{Flags, Layout, Packet, PacketType};

use super::text::*;

/// The name of a value of one of `proto_parse`'s open enums ("WRITE",
/// "unknown (9)").
macro_rules! push_enum {
    ($s:expr, $v:expr) => {{
        let v = $v;
        if v.is_known() {
            $s.push_str(v.name());
        } else {
            let _ = write!($s, "{v}");
        }
    }};
}

/// "0x11→0x22" (source → destination connection) for the Info line.
pub(super) fn push_conn(s: &mut String, p: &Packet<&[u8]>) {
    push_hex(s, p.src_conn());
    s.push('\u{2192}');
    push_hex(s, p.dst_conn());
}

/// Appends the Info line of `p` to `s`.
pub(super) fn info_line(
    s: &mut String,
    p: &Packet<&[u8]>,
    layout: Option<&Layout>,
    stop: Option<&Error>,
) {
    let ty = p.packet_type();
    match ty {
        PacketType::Data => {
            s.push_str("DATA ");
            if let Some(data) = p.data() {
                push_enum!(s, data.op());
                s.push(' ');
            }
            push_conn(s, p);
            push_field(s, " PSN=", p.psn());
            push_field(s, " ev=", p.ev());
            if let Some(data) = p.data() {
                push_field(s, " msg=", data.msg_id());
                push_field(s, ":", data.msg_offset());
                push_field(s, "/", data.msg_len());
                push_field(s, " len=", data.payload_len());
            }
        }
        PacketType::Ack | PacketType::Nack | PacketType::Cnp | PacketType::ProbeReply => {
            push_enum!(s, ty);
            if let Some(nack) = p.nack() {
                s.push(' ');
                push_enum!(s, nack.code());
            }
            if let Some(reason) = p.cnp_reason() {
                s.push(' ');
                push_enum!(s, reason);
            }
            s.push(' ');
            push_conn(s, p);
            push_field(s, " cack=", p.psn());
            if let Some(nack) = p.nack() {
                push_field(s, " nack_psn=", nack.nack_psn());
            }
            if let Some(ack) = p.ack()
                && ack.sack_bitmap().iter().any(|&b| b != 0)
            {
                s.push_str(" SACK=");
                push_sack_ranges(s, ack.sack_base(), ack.sack_bitmap());
            }
            if let Some(fb) = p.feedback() {
                push_field(s, " echo=", fb.echo_psn());
                push_field(s, "@ev", fb.echo_ev());
                let mut names = fb.flags().iter_names().map(|(n, _)| n).peekable();
                if names.peek().is_some() {
                    s.push_str(" <");
                    push_names(s, names);
                    s.push('>');
                }
            }
        }
        PacketType::Ctrl => {
            s.push_str("CTRL ");
            if let Some(ctrl) = p.ctrl() {
                push_enum!(s, ctrl.op());
                s.push(' ');
                push_conn(s, p);
                push_field(s, " init_psn=", ctrl.init_psn());
                push_field(s, " mtu=", ctrl.mtu());
                s.push_str(" cc=");
                push_enum!(s, ctrl.cc_algo());
            } else {
                push_conn(s, p);
            }
        }
        PacketType::Probe => {
            s.push_str("PROBE ");
            push_conn(s, p);
            push_field(s, " seq=", p.psn());
            push_field(s, " ev=", p.ev());
        }
        _ => {
            push_enum!(s, ty);
            s.push(' ');
            push_conn(s, p);
            push_field(s, " PSN=", p.psn());
            push_field(s, " ev=", p.ev());
        }
    }
    if p.tx_attempt() > 0 {
        push_field(s, " try=", p.tx_attempt());
    }
    let flags = p.flags() & !(Flags::EXT | Flags::CRC);
    if !flags.is_empty() {
        s.push_str(" [");
        push_names(s, flags.iter_names().map(|(n, _)| n));
        s.push(']');
    }
    if layout.is_some_and(|l| l.trimmed) {
        s.push_str(" [TRIMMED]");
    }
    if let Some(err) = stop {
        if err.is_capture_truncation() {
            s.push_str(" [cut by snaplen]");
        } else {
            s.push_str(" [Malformed]");
        }
    }
}
