//! The tree's items, layer by layer: base header, type header, TLVs,
//! padding, the layout's payload, and the notes on unknown values.

use proto_parse::Error;
use proto_parse::metaroce::{
    CrcStatus, FbFlags, Flags, Layout, Packet, PacketType, Tlv, TlvType, field,
};

use crate::fields::{Ei, Ett, Hf};

use super::Options;
use super::model::*;
use super::text::*;

pub(super) fn base_items(p: &Packet<&[u8]>, d: &mut Dissection) {
    let flags = p.flags().bits();
    let ty = p.packet_type();
    let hlen = p.hlen();
    let ver_type = (p.version() << 4) | (u8::from(ty) & 0x0F);
    // Fields under a bit mask get the whole octet; Wireshark masks and
    // shifts.
    d.add(Item::bits(Hf::Version, 0..1, ver_type));
    d.add(Item::bits(Hf::Type, 0..1, ver_type));
    d.open(Item::at(Hf::Flags, field::FLAGS, flags), Ett::Flags);
    for hf in [
        Hf::FlagAr,
        Hf::FlagSom,
        Hf::FlagEom,
        Hf::FlagSe,
        Hf::FlagExt,
        Hf::FlagCrc,
    ] {
        d.add(Item::bits(hf, 1..2, flags));
    }
    if flags & Flags::RESERVED != 0 {
        d.add(Item::at(
            Hf::FlagsReserved,
            field::FLAGS,
            flags & Flags::RESERVED,
        ));
    }
    d.close();
    d.add(Item::at(Hf::Hlen, field::HLEN, hlen));
    d.add(Item::bits(
        Hf::TxAttempt,
        field::TX_ATTEMPT..field::TX_ATTEMPT + 1,
        u32::from(p.tx_attempt()) << 4,
    ));
    d.add(Item::uint(Hf::Ev, field::EV, p.ev()));
    d.add(Item::uint(Hf::PathSeq, field::PATH_SEQ, p.path_seq()));
    d.add(Item::uint(Hf::DstConn, field::DST_CONN, p.dst_conn()));
    d.add(Item::uint(Hf::SrcConn, field::SRC_CONN, p.src_conn()));
    // Hidden: either connection id, for "Apply as filter" on a
    // conversation (`metaroce.conn == 0x11` matches both directions).
    d.add(Item::uint(Hf::Conn, field::DST_CONN, p.dst_conn()));
    d.add(Item::uint(Hf::Conn, field::SRC_CONN, p.src_conn()));
    d.add(Item::uint(Hf::Psn, field::PSN, p.psn()));
    d.add(Item::uint(Hf::TxTs, field::TX_TS, p.tx_ts()));
}

pub(super) fn type_items(p: &Packet<&[u8]>, layout: Option<&Layout>, d: &mut Dissection) {
    let ty = p.packet_type();
    let cap = p.as_bytes().len();
    if let Some(data) = p.data() {
        let op = data.op();
        d.open(
            Item::field(
                Hf::DataHeader,
                clamp(field::DATA_OP..op.header_len(), cap),
                Value::Marker,
            ),
            Ett::TypeHeader,
        );
        d.add(Item::at(Hf::DataOp, field::DATA_OP, u8::from(op)));
        d.add(Item::uint(
            Hf::PayloadLen,
            field::PAYLOAD_LEN,
            data.payload_len(),
        ));
        d.add(Item::uint(Hf::MsgId, field::MSG_ID, data.msg_id()));
        d.add(Item::uint(
            Hf::MsgOffset,
            field::MSG_OFFSET,
            data.msg_offset(),
        ));
        d.add(Item::uint(Hf::MsgLen, field::MSG_LEN, data.msg_len()));
        if let Some(va) = data.remote_va() {
            d.add(Item::uint(Hf::RemoteVa, field::REMOTE_VA, va));
        }
        if let Some(rkey) = data.rkey() {
            d.add(Item::uint(Hf::Rkey, field::RKEY, rkey));
        }
        if let (Some(imm), Some(range)) = (data.imm_data(), op.imm_data_field()) {
            d.add(Item::uint(Hf::ImmData, range, imm));
        }
        // The payload carried, only when it is not what payload_len says
        // (trimmed): a copy of payload_len on every packet would cost a
        // tree item and tell nothing.
        if let Some(layout) = layout
            && layout.payload.len() != usize::from(data.payload_len())
        {
            d.add(Item::uint(Hf::PayloadActual, 0..0, layout.payload.len() as u64).generated());
        }
        d.close();
        return;
    }
    if let Some(fb) = p.feedback() {
        let header = match ty {
            PacketType::Ack => Hf::AckHeader,
            PacketType::Nack => Hf::NackHeader,
            PacketType::Cnp => Hf::CnpHeader,
            _ => Hf::FbHeader,
        };
        // The type header ends with the fixed header; a capture cut inside
        // it shows the feedback block that it holds.
        let end = p.fixed_len().unwrap_or(field::FEEDBACK_LEN);
        d.open(
            Item::field(header, clamp(field::FB_FLAGS..end, cap), Value::Marker),
            Ett::TypeHeader,
        );
        let fb_bits = fb.flags().bits();
        let fb_flags = field::FB_FLAGS..field::FB_FLAGS + 1;
        d.open(
            Item::at(Hf::FbFlags, field::FB_FLAGS, fb_bits),
            Ett::FbFlags,
        );
        for hf in [Hf::FbEce, Hf::FbTrim, Hf::FbDup, Hf::FbCoal] {
            d.add(Item::bits(hf, fb_flags.clone(), fb_bits));
        }
        if fb_bits & FbFlags::RESERVED != 0 {
            d.add(Item::at(
                Hf::FbReserved,
                field::FB_FLAGS,
                fb_bits & FbFlags::RESERVED,
            ));
        }
        d.close();
        d.add(Item::at(Hf::SackWords, field::SACK_WORDS, fb.sack_words()));
        d.add(Item::uint(Hf::EchoEv, field::ECHO_EV, fb.echo_ev()));
        d.add(Item::uint(Hf::EchoPsn, field::ECHO_PSN, fb.echo_psn()));
        d.add(Item::uint(Hf::EchoTxTs, field::ECHO_TX_TS, fb.echo_tx_ts()));
        d.add(Item::uint(Hf::RxTs, field::RX_TS, fb.rx_ts()));
        d.add(Item::uint(Hf::CeCount, field::CE_COUNT, fb.ce_count()));
        d.add(Item::at(
            Hf::RxBufLevel,
            field::RX_BUF_LEVEL,
            fb.rx_buf_level(),
        ));
        d.add(Item::at(Hf::FwdHops, field::FWD_HOPS, fb.fwd_hops()));
        d.add(Item::uint(Hf::Credit, field::CREDIT, fb.credit()));
        if let Some(ack) = p.ack() {
            let words = ack.sack_words();
            d.add(Item::uint(Hf::SackBase, field::SACK_BASE, ack.sack_base()));
            if words > 0 {
                d.add(Item::field(
                    Hf::SackBitmap,
                    field::SACK_BITMAP(words),
                    Value::Bytes,
                ));
                let ranges =
                    d.write_text(|s| push_sack_ranges(s, ack.sack_base(), ack.sack_bitmap()));
                d.add(
                    Item::field(
                        Hf::SackRanges,
                        field::SACK_BITMAP(words),
                        Value::Text(ranges),
                    )
                    .generated(),
                );
            }
        } else if let Some(nack) = p.nack() {
            d.add(Item::at(
                Hf::NackCode,
                field::NACK_CODE,
                u8::from(nack.code()),
            ));
            d.add(Item::at(Hf::RnrTimer, field::RNR_TIMER, nack.rnr_timer()));
            d.add(Item::uint(Hf::NackPsn, field::NACK_PSN, nack.nack_psn()));
        } else if let Some(reason) = p.cnp_reason() {
            d.add(Item::at(Hf::CnpReason, field::CNP_REASON, u8::from(reason)));
        }
        d.close();
        return;
    }
    if let Some(ctrl) = p.ctrl() {
        let fbits = ctrl.features().bits();
        d.open(
            Item::field(
                Hf::CtrlHeader,
                clamp(field::CTRL_OP..field::CTRL_LEN, cap),
                Value::Marker,
            ),
            Ett::TypeHeader,
        );
        d.add(Item::at(Hf::CtrlOp, field::CTRL_OP, u8::from(ctrl.op())));
        d.add(Item::at(
            Hf::CcAlgo,
            field::CC_ALGO,
            u8::from(ctrl.cc_algo()),
        ));
        d.add(Item::uint(Hf::Mtu, field::MTU, ctrl.mtu()));
        d.add(Item::uint(Hf::InitPsn, field::INIT_PSN, ctrl.init_psn()));
        d.open(
            Item::uint(Hf::Features, field::FEATURES, fbits),
            Ett::Features,
        );
        for hf in [
            Hf::FeatCrc,
            Hf::FeatPathSeq,
            Hf::FeatTelemetry,
            Hf::FeatTrimAware,
            Hf::FeatClockSync,
        ] {
            d.add(Item::bits(hf, field::FEATURES, fbits));
        }
        d.close();
        d.add(Item::uint(
            Hf::TsUnitPs,
            field::TS_UNIT_PS,
            ctrl.ts_unit_ps(),
        ));
        d.close();
    }
}

/// Adds the subtree of one TLV.
pub(super) fn tlv_items(tlv: &Tlv<'_>, labels: bool, d: &mut Dissection) {
    let start = tlv.offset;
    let range = start..start + tlv.bytes.len();
    let ty = tlv.tlv_type;
    if ty == TlvType::Pad {
        d.open_text(
            &title(labels, || format!("PAD ({} bytes)", tlv.covers)),
            range.clone(),
            Ett::Tlv,
        );
        d.add(Item::at(Hf::TlvType, start + field::TLV_TYPE, u8::from(ty)));
        // PAD runs to the end of the header (spec 6): its len byte is
        // padding; the length it covers is computed.
        d.add(Item::uint(Hf::TlvLen, range.clone(), tlv.len_words()).generated());
        if tlv.bytes.len() > 1 {
            d.add(Item::field(
                Hf::TlvPadding,
                start + 1..range.end,
                Value::Bytes,
            ));
        }
        d.close();
        return;
    }
    d.open_text(
        &title(labels, || format!("TLV: {ty} ({} bytes)", tlv.bytes.len())),
        range.clone(),
        Ett::Tlv,
    );
    d.add(Item::at(Hf::TlvType, start + field::TLV_TYPE, u8::from(ty)));
    d.add(Item::at(
        Hf::TlvLen,
        start + field::TLV_LEN,
        tlv.len_words(),
    ));
    let value_start = start + field::TLV_VALUE_START;
    if let Some(hops) = tlv.hop_telemetry() {
        for (i, hop) in hops.enumerate() {
            let at = value_start + i * field::HOP_TELEMETRY_ENTRY_LEN;
            d.open_text(
                &title(labels, || {
                    format!(
                        "Hop {i}: switch 0x{:08x}, queue {} cells, latency {} ns",
                        hop.switch_id, hop.queue_depth, hop.hop_latency
                    )
                }),
                at..at + field::HOP_TELEMETRY_ENTRY_LEN,
                Ett::TlvEntry,
            );
            d.add(Item::uint(Hf::HopSwitchId, at..at + 4, hop.switch_id));
            d.add(Item::uint(
                Hf::HopQueueDepth,
                at + 4..at + 6,
                hop.queue_depth,
            ));
            d.add(Item::uint(Hf::HopLatency, at + 6..at + 8, hop.hop_latency));
            d.close();
        }
    } else if let Some(paths) = tlv.path_status() {
        for (i, path) in paths.enumerate() {
            let at = value_start + i * field::PATH_STATUS_ENTRY_LEN;
            d.open_text(
                &title(labels, || format!("Path ev {}: {}", path.ev, path.state)),
                at..at + field::PATH_STATUS_ENTRY_LEN,
                Ett::TlvEntry,
            );
            d.add(Item::uint(Hf::PathEv, at..at + 2, path.ev));
            d.add(Item::at(Hf::PathStateF, at + 2, u8::from(path.state)));
            d.close();
        }
    } else if let Some(ts) = tlv.ts64() {
        d.add(Item::uint(
            Hf::Ts64,
            value_start..start + field::TS64_LEN,
            ts,
        ));
    } else if tlv.bytes.len() > 2 {
        d.add(Item::field(
            Hf::TlvValue,
            start + 2..range.end,
            Value::Bytes,
        ));
    }
    d.close();
}

pub(super) fn tlvs_items(
    p: &Packet<&[u8]>,
    stop: Option<&Error>,
    opts: &Options,
    d: &mut Dissection,
) {
    // TLVs follow the fixed header: nothing to show unless it is captured.
    if !p.flags().contains(Flags::EXT) || p.fixed_len().is_none() {
        return;
    }
    let cap = p.as_bytes().len();
    // The "TLVs (n)" head is added now and completed (title, range) once
    // the TLVs are read, or taken out again when there is none.
    let head = d.items.len();
    let none = d.push_text("");
    d.open(Item::text(none, 0..0), Ett::Tlvs);
    let mut n = 0usize;
    let mut first = usize::MAX;
    let mut last = 0;
    for tlv in p.tlvs() {
        match tlv {
            Ok(tlv) => {
                n += 1;
                first = first.min(tlv.offset);
                last = last.max(tlv.offset + tlv.bytes.len());
                tlv_items(&tlv, opts.labels, d);
            }
            Err(err) => {
                // The lax parse reports the same error when it stopped there.
                if stop != Some(&err) {
                    d.notes.push(note_for(&err, cap, opts.frame_offset));
                }
            }
        }
    }
    d.close();
    if n == 0 {
        d.items.truncate(head);
    } else {
        let text = d.push_text(&title(opts.labels, || format!("TLVs ({n})")));
        let item = &mut d.items[head];
        item.label = Label::Text(text);
        item.range = clamp(first..last, cap);
    }
}

pub(super) fn padding_item(p: &Packet<&[u8]>, cap: usize, d: &mut Dissection) {
    if p.flags().contains(Flags::EXT) {
        return;
    }
    let Some(fixed) = p.fixed_len() else { return };
    let end = p.header_len().min(cap);
    if end > fixed {
        d.add(Item::field(Hf::HeaderPadding, fixed..end, Value::Bytes));
    }
}

pub(super) fn unknown_value_notes(p: &Packet<&[u8]>, d: &mut Dissection) {
    let cap = p.as_bytes().len();
    let mut note = |what: String, offset: usize| {
        d.notes.push(Note {
            ei: Ei::UnknownValue,
            text: what,
            range: clamp(offset..offset + 1, cap),
        });
    };
    let ty = p.packet_type();
    if !ty.is_known() {
        note(format!("type {ty}"), field::VER_TYPE);
    }
    if let Some(data) = p.data()
        && !data.op().is_known()
    {
        note(format!("DATA op {}", data.op()), field::DATA_OP);
    }
    if let Some(nack) = p.nack()
        && !nack.code().is_known()
    {
        note(format!("NACK code {}", nack.code()), field::NACK_CODE);
    }
    if let Some(reason) = p.cnp_reason()
        && !reason.is_known()
    {
        note(format!("CNP reason {reason}"), field::CNP_REASON);
    }
    if let Some(ctrl) = p.ctrl() {
        if !ctrl.op().is_known() {
            note(format!("CTRL op {}", ctrl.op()), field::CTRL_OP);
        }
        if !ctrl.cc_algo().is_known() {
            note(format!("cc_algo {}", ctrl.cc_algo()), field::CC_ALGO);
        }
    }
}

pub(super) fn layout_items(p: &Packet<&[u8]>, layout: &Layout, opts: &Options, d: &mut Dissection) {
    let bytes = p.as_bytes();
    let cap = bytes.len();
    if layout.trimmed {
        let declared = p.data().map_or(0, |data| usize::from(data.payload_len()));
        d.add(Item::field(Hf::Trimmed, 0..0, Value::Marker).generated());
        d.notes.push(Note {
            ei: Ei::Trimmed,
            text: format!(
                "payload trimmed from {declared} to {} bytes",
                layout.payload.len()
            ),
            range: clamp(field::PAYLOAD_LEN, cap),
        });
    }
    let payload = clamp(layout.payload.clone(), cap);
    if !payload.is_empty() {
        d.payload = Some(payload);
    }
    if !p.flags().contains(Flags::CRC) {
        return;
    }
    d.checksum = match (p.crc_status(layout), layout.trailer.clone()) {
        (CrcStatus::NotPresent, _) | (_, None) => Checksum::Missing {
            trimmed: layout.trimmed,
        },
        (CrcStatus::NotChecked, Some(_)) => Checksum::Missing { trimmed: false },
        (CrcStatus::Good, Some(t)) => {
            let stored = p.stored_crc(layout).unwrap_or_default();
            Checksum::Present {
                offset: t.start,
                stored,
                computed: opts.check_crc.then_some(stored),
            }
        }
        (CrcStatus::Bad { stored, computed }, Some(t)) => Checksum::Present {
            offset: t.start,
            stored,
            computed: opts.check_crc.then_some(computed),
        },
    };
}
