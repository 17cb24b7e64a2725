//! `rocev2.analysis.*`: what the analyzer's engine says about a RoCEv2
//! packet, shown beside Wireshark's own InfiniBand dissector (which keeps
//! UDP port 4791 and every `infiniband.*` field). The plugin's `rocev2`
//! post-dissector decodes the frame with `proto_parse::frame` (the same
//! decode as `metaroce-analyze`), feeds the engine on the first pass
//! ([`crate::analysis::Analysis::ingest_rocev2`]) and calls [`add_items`]
//! on every pass. This module holds no flow logic: every sequence fact is
//! the engine's ([`Verdict`], [`RoceFacts`]); what it computes itself is
//! arithmetic on one packet (the PSN gap from the expected PSN, the
//! syndrome in words) and the ICRC check, a parser fact.

use analyzer::engine::RetxKind;
use proto_parse::rocev2::{IcrcStatus, NakCode, Syndrome};

use crate::analysis::{RoceAnalysed, fmt_ns, generated, marker, note, time, uint};
use crate::decode::{Dissection, Item, Value};
use crate::fields::{Ei, Ett, Hf};

/// What the post-dissector read from the packet itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RocePacket {
    /// 24-bit PSN of the BTH.
    pub psn: u32,
    /// Its ICRC, checked by `proto_parse` over the masked fields.
    pub icrc: IcrcStatus,
    /// The stored ICRC (read little-endian), when captured.
    pub stored_icrc: Option<u32>,
}

const PSN_MASK: u32 = 0x00FF_FFFF;

/// The syndrome of a NAK or RNR NAK in words ("PSN sequence error",
/// "RNR NAK, retry after 1.280 ms"); `None` for an ACK.
pub fn nak_words(syndrome: u8) -> Option<String> {
    match Syndrome::from_byte(syndrome) {
        Syndrome::Ack { .. } => None,
        Syndrome::RnrNak { timer } => Some(format!(
            "RNR NAK, retry after {}",
            fmt_ns(analyzer::lint::rnr_timer_ns(timer) as i64)
        )),
        Syndrome::Nak(code) => Some(format!("NAK: {code}")),
        Syndrome::Reserved { value } => Some(format!("reserved syndrome kind (value {value})")),
    }
}

/// Adds the RoCEv2 analysis of one packet to `d` (items in tree order,
/// expert notes, and Info tags in `d.info` when `tags`).
pub fn add_items(a: &RoceAnalysed, p: &RocePacket, d: &mut Dissection, tags: bool) {
    let v = &a.verdict;
    let f = &a.facts;
    let tag = |d: &mut Dissection, t: &str| {
        if tags {
            d.info.push_str(" [");
            d.info.push_str(t);
            d.info.push(']');
        }
    };
    if let Some(flow) = v.flow {
        d.add(uint(Hf::RcFlow, flow));
    }
    if let Some((_, _, qp)) = a.key {
        d.add(uint(Hf::RcQp, qp));
    }
    if let Some(expected) = f.expected_psn {
        d.add(uint(Hf::RcExpectedPsn, expected));
        let ahead = p.psn.wrapping_sub(expected) & PSN_MASK;
        // Beyond the expected PSN (24-bit serial arithmetic: less than
        // half the space ahead), not a retransmission: PSNs were skipped.
        if v.retransmission.is_none() && ahead != 0 && ahead < 0x80_0000 {
            d.add(uint(Hf::RcPsnGap, ahead));
            d.notes.push(note(
                Ei::RcPsnGap,
                format!("PSN gap: {ahead} PSNs missing before PSN {}", p.psn),
            ));
            tag(d, "PSN Gap");
        }
    }
    if let Some(r) = v.retransmission {
        d.open(marker(Hf::RcRetx), Ett::RoceAnalysis);
        if let Some(orig) = r.original_frame {
            d.add(uint(Hf::RcRetxOriginal, orig));
        }
        let kind = d.push_text(r.kind.as_str());
        d.add(generated(Hf::RcRetxKind, Value::Text(kind)));
        d.close();
        let of = r
            .original_frame
            .map_or(String::new(), |f| format!(" of frame {f}"));
        match r.kind {
            RetxKind::Spurious => {
                d.add(marker(Hf::RcDuplicate));
                d.notes.push(note(
                    Ei::RcDuplicate,
                    format!("Duplicate request: PSN {} was already acknowledged", p.psn),
                ));
                tag(d, "Duplicate");
            }
            RetxKind::Fast | RetxKind::Timeout => {
                d.add(marker(Hf::RcGoBackN));
                let why = if r.kind == RetxKind::Fast {
                    "after a PSN sequence error NAK"
                } else {
                    "no NAK captured: a timeout"
                };
                d.notes.push(note(
                    Ei::RcRetransmission,
                    format!("Go-back-N retransmission{of} ({why})"),
                ));
                tag(d, "Go-Back-N Retransmission");
            }
        }
        if r.original_frame.is_none() && r.kind != RetxKind::Spurious {
            d.add(marker(Hf::RcOutOfOrder));
            d.notes.push(note(
                Ei::RcOutOfOrder,
                format!(
                    "Out of order: PSN {} is below the expected PSN and was not captured before",
                    p.psn
                ),
            ));
        }
    }
    if let Some(syndrome) = v.rocev2_nak
        && let Some(words) = nak_words(syndrome)
    {
        let text = d.push_text(&words);
        d.open(generated(Hf::RcNak, Value::Text(text)), Ett::RoceAnalysis);
        d.add(uint(Hf::RcNakSyndrome, syndrome));
        if let Syndrome::RnrNak { timer } = Syndrome::from_byte(syndrome) {
            d.add(time(Hf::RcRnrTimer, analyzer::lint::rnr_timer_ns(timer)));
        }
        d.close();
        d.notes.push(note(Ei::RcNak, words));
        tag(
            d,
            match Syndrome::from_byte(syndrome) {
                Syndrome::RnrNak { .. } => "RNR NAK",
                Syndrome::Nak(NakCode::PsnSequenceError) => "NAK PSN Sequence Error",
                _ => "NAK",
            },
        );
    }
    if let Some(frame) = v.acked_frame {
        d.add(uint(Hf::RcAckedFrame, frame));
    }
    if let Some(frame) = f.request_frame {
        d.add(uint(Hf::RcRequestFrame, frame));
    }
    if let Some(rtt) = v.ack_rtt_ns {
        d.add(time(Hf::RcAckRtt, rtt));
    }
    if let Some(n) = v.cum_ack_advance {
        d.add(uint(Hf::RcCumAckAdvance, n));
    }
    if let Some(read) = f.read {
        d.add(uint(Hf::RcReadResponse, read.index));
        d.add(uint(Hf::RcReadSpan, read.span));
        if read.complete {
            d.add(marker(Hf::RcReadComplete));
        }
        if !read.accepted {
            d.add(marker(Hf::RcReadDiscarded));
            tag(d, "READ Response Out Of Order");
        }
    }
    if v.cnp_rocev2 {
        d.add(marker(Hf::RcCnp));
        if let Some(gap) = f.cnp_interval_ns {
            d.add(time(Hf::RcCnpInterval, gap));
        }
    }
    if v.ce_marked {
        d.add(marker(Hf::RcCeMarked));
        d.notes
            .push(note(Ei::RcCeMarked, "IP ECN CE (congestion experienced)"));
    }
    if let Some(m) = v.message {
        d.open(
            uint(Hf::RcMsgCount, v.messages_completed),
            Ett::RoceAnalysis,
        );
        let op = d.push_text(m.op);
        d.add(generated(Hf::RcMsgOp, Value::Text(op)));
        d.add(time(Hf::RcMsgLatency, m.latency_ns));
        d.close();
    }
    add_icrc(p, d, tags);
}

/// The ICRC as computed over the masked fields: the value (as Wireshark's
/// `infiniband.invariant.crc` shows the stored one, read big-endian) and
/// its status; a bad one is an expert info and an Info tag.
pub fn add_icrc(p: &RocePacket, d: &mut Dissection, tags: bool) {
    // Wireshark's checksum statuses (proto_checksum_vals): 0 bad, 1 good,
    // 2 unverified, 3 not present.
    let (computed, status) = match p.icrc {
        IcrcStatus::Good => (p.stored_icrc, 1u8),
        IcrcStatus::Bad { computed, .. } => (Some(computed), 0),
        IcrcStatus::NotPresent => (None, 3),
        IcrcStatus::NotChecked => (None, 2),
    };
    if let Some(c) = computed {
        d.add(uint(Hf::RcIcrc, c.swap_bytes()));
    }
    d.add(Item::field(Hf::RcIcrcStatus, 0..0, Value::Uint(status.into())).generated());
    if let IcrcStatus::Bad { stored, computed } = p.icrc {
        d.notes.push(note(
            Ei::RcIcrcBad,
            format!(
                "Bad ICRC: 0x{:08x} on the wire, 0x{:08x} computed",
                stored.swap_bytes(),
                computed.swap_bytes()
            ),
        ));
        if tags {
            d.info.push_str(" [Bad ICRC]");
        }
    }
}
