use std::ops::Range;

use proto_parse::metaroce::{FbFlags, Flags, Packet, PacketType};

use super::text::{push_dec, push_hex, push_sack_ranges};
use super::*;
use crate::fields::{Custom, Ei, Ett, FlagSet, Hf};
use proto_parse::metaroce::{
    AckRepr, Body, DataRepr, FeedbackRepr, NackCode, NackRepr, Op, Repr, SackBitmap, TlvRepr,
};

fn repr(body: Body, payload: &'static [u8], crc: bool) -> Repr<'static> {
    Repr {
        flags: Flags::SOM,
        tx_attempt: 1,
        ev: 7,
        path_seq: 3,
        dst_conn: 0x22,
        src_conn: 0x11,
        psn: 100,
        tx_ts: 9,
        body,
        tlvs: Vec::new(),
        payload,
        crc,
    }
}

fn write(payload_len: u16) -> Body {
    Body::Data(DataRepr {
        op: Op::Write {
            remote_va: 0x1000,
            rkey: 5,
        },
        payload_len,
        msg_id: 4,
        msg_offset: 0,
        msg_len: 64,
    })
}

fn uint(d: &Dissection, hf: Hf) -> Option<u64> {
    match d.value(hf)? {
        Value::Uint(v) => Some(*v),
        Value::Bits(v) => Some(u64::from(*v)),
        _ => None,
    }
}

/// Every item and note range lies within the captured bytes, at every
/// depth: `ffi` relies on it.
fn assert_ranges_within(d: &Dissection, captured: usize) {
    for n in &d.items {
        assert!(
            n.range.end <= captured && n.range.start <= n.range.end,
            "{n:?}"
        );
    }
    assert_tree_shape(d);
    for note in &d.notes {
        assert!(note.range.end <= captured, "{note:?}");
    }
    if let Some(p) = &d.payload {
        assert!(p.end <= captured);
    }
    if let Checksum::Present { offset, .. } = d.checksum {
        assert!(offset + 4 <= captured);
    }
    assert!(d.header.end <= captured.max(d.header.start));
}

/// The flat list is a well-formed tree: it starts at depth 0, goes at
/// most one level deeper from an item to the next, and every text
/// item has a subtree kind.
fn assert_tree_shape(d: &Dissection) {
    let mut prev = None::<u8>;
    for n in &d.items {
        assert!(n.depth <= prev.map_or(0, |p| p + 1), "{:?}", d.items);
        assert!(n.depth <= MAX_DEPTH);
        if let Label::Text(_) = n.label {
            assert!(n.subtree.is_some(), "{n:?}");
        }
        prev = Some(n.depth);
    }
}

#[test]
fn numbers_in_the_info_line() {
    let mut s = String::new();
    for v in [
        0u64,
        7,
        9,
        10,
        42,
        99,
        100,
        101,
        1000,
        12_345,
        4_294_967_295,
        u64::MAX,
    ] {
        s.clear();
        push_dec(&mut s, v);
        assert_eq!(s, v.to_string());
    }
    for v in [0u32, 0xa, 0x11, u32::MAX] {
        s.clear();
        push_hex(&mut s, v);
        assert_eq!(s, format!("{v:#x}"));
    }
}

/// The tree of a DATA WRITE, level by level, as Wireshark shows it.
#[test]
fn items_are_in_tree_order_with_depths() {
    static PAYLOAD: [u8; 8] = [1; 8];
    let mut r = repr(write(8), &PAYLOAD, false);
    r.flags |= Flags::EXT;
    r.tlvs = vec![TlvRepr::Ts64(1)];
    let bytes = r.to_vec();
    let d = dissect(&bytes, bytes.len(), &Options::default());
    let top: Vec<_> = d
        .items
        .iter()
        .filter(|n| n.depth == 0)
        .map(|n| n.hf())
        .collect();
    assert_eq!(
        top,
        [
            Some(Hf::Version),
            Some(Hf::Type),
            Some(Hf::Flags),
            Some(Hf::Hlen),
            Some(Hf::TxAttempt),
            Some(Hf::Ev),
            Some(Hf::PathSeq),
            Some(Hf::DstConn),
            Some(Hf::SrcConn),
            Some(Hf::Conn),
            Some(Hf::Conn),
            Some(Hf::Psn),
            Some(Hf::TxTs),
            Some(Hf::DataHeader),
            None, // TLVs (1)
        ]
    );
    let at = |hf| d.items.iter().position(|n| n.hf() == Some(hf)).unwrap();
    let flags: Vec<_> = d.children(at(Hf::Flags)).map(|i| d.items[i].hf()).collect();
    assert_eq!(flags.len(), 6);
    assert!(flags.iter().all(|hf| hf.is_some_and(|hf| {
        hf.def()
            .abbrev
            .to_str()
            .unwrap()
            .starts_with("metaroce.flags.")
    })));
    assert_eq!(d.items[at(Hf::Flags)].subtree, Some(Ett::Flags));
    let data: Vec<_> = d
        .children(at(Hf::DataHeader))
        .map(|i| d.items[i].hf().unwrap())
        .collect();
    assert_eq!(
        data,
        [
            Hf::DataOp,
            Hf::PayloadLen,
            Hf::MsgId,
            Hf::MsgOffset,
            Hf::MsgLen,
            Hf::RemoteVa,
            Hf::Rkey
        ]
    );
    let tlvs = d.items.len() - 1 - d.items.iter().rev().position(|n| n.depth == 0).unwrap();
    assert_eq!(d.item_text(&d.items[tlvs]), Some("TLVs (1)"));
    let tlv: Vec<_> = d.children(tlvs).collect();
    assert_eq!(tlv.len(), 1);
    let tlv_fields: Vec<_> = d
        .children(tlv[0])
        .map(|i| d.items[i].hf().unwrap())
        .collect();
    assert_eq!(tlv_fields, [Hf::TlvType, Hf::TlvLen, Hf::Ts64]);
    assert_eq!(d.depth, 0, "every subtree closed");
    assert_tree_shape(&d);
}

#[test]
fn data_packet_fields_and_crc_are_decoded() {
    static PAYLOAD: [u8; 32] = [0xAB; 32];
    let bytes = repr(write(32), &PAYLOAD, true).to_vec();
    let d = dissect(&bytes, bytes.len(), &Options::default());
    assert_eq!(d.packet_type, Some(PacketType::Data));
    assert_eq!(uint(&d, Hf::Psn), Some(100));
    assert_eq!(uint(&d, Hf::Ev), Some(7));
    assert_eq!(uint(&d, Hf::DataOp), Some(2));
    assert_eq!(uint(&d, Hf::RemoteVa), Some(0x1000));
    assert_eq!(uint(&d, Hf::Rkey), Some(5));
    assert_eq!(uint(&d, Hf::TxAttempt), Some(1 << 4));
    assert_eq!(d.payload, Some(52..84));
    assert!(
        matches!(d.checksum, Checksum::Present { offset: 84, computed: Some(c), stored } if c == stored)
    );
    assert!(d.notes.is_empty(), "{:?}", d.notes);
    assert!(
        d.info
            .starts_with("DATA WRITE 0x11\u{2192}0x22 PSN=100 ev=7 msg=4:0/64"),
        "{}",
        d.info
    );
    assert_ranges_within(&d, bytes.len());

    let off = dissect(
        &bytes,
        bytes.len(),
        &Options {
            check_crc: false,
            ..Options::default()
        },
    );
    assert!(matches!(
        off.checksum,
        Checksum::Present { computed: None, .. }
    ));
}

/// Without info and labels (tshark -T fields) the same items, values,
/// notes and checksum come out; only the texts nobody shows are empty.
#[test]
fn lean_options_keep_values_and_notes() {
    static PAYLOAD: [u8; 32] = [0xAB; 32];
    let bytes = repr(write(32), &PAYLOAD, true).to_vec();
    let full = dissect(&bytes, bytes.len(), &Options::default());
    let lean_opts = Options {
        info: false,
        labels: false,
        ..Options::default()
    };
    let lean = dissect(&bytes, bytes.len(), &lean_opts);
    assert!(lean.info.is_empty());
    assert_eq!(lean.notes, full.notes);
    assert_eq!(lean.checksum, full.checksum);
    assert_eq!(lean.payload, full.payload);
    let fields = |d: &Dissection| {
        d.items
            .iter()
            .filter_map(|n| match &n.label {
                Label::Field(hf, value) => Some((
                    *hf,
                    *value,
                    d.item_text(n).map(str::to_owned),
                    n.range.clone(),
                    n.depth,
                )),
                Label::Text(_) => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(fields(&lean), fields(&full));
    let info_only = Options {
        labels: false,
        ..Options::default()
    };
    assert_eq!(dissect(&bytes, bytes.len(), &info_only).info, full.info);
}

/// The labels Wireshark asks for lazily (value strings, BASE_CUSTOM),
/// and no generated payload length when it repeats payload_len.
#[test]
fn lazy_labels_and_no_redundant_payload_length() {
    assert_eq!(flag_names(FlagSet::Base, 0x44), "SOM,CRC");
    assert_eq!(flag_names(FlagSet::Base, 0x00), "none");
    assert_eq!(flag_names(FlagSet::Base, 0x05), "CRC,reserved");
    assert_eq!(flag_names(FlagSet::Feedback, 0x80), "ECE");
    assert_eq!(custom_label(Custom::Words, 13), "13 words (52 bytes)");
    assert_eq!(custom_label(Custom::RnrTimer, 5), "5 (50 us)");
    assert_eq!(
        custom_label(Custom::Credit, u32::MAX),
        "not credit-limited (0xffffffff)"
    );
    assert_eq!(custom_label(Custom::Credit, 7), "7");
    static PAYLOAD: [u8; 32] = [0xAB; 32];
    let bytes = repr(write(32), &PAYLOAD, true).to_vec();
    let d = dissect(&bytes, bytes.len(), &Options::default());
    assert_eq!(d.value(Hf::PayloadActual), None);
    assert_eq!(d.value(Hf::DataHeader), Some(&Value::Marker));
}

#[test]
fn trimmed_packet_has_marker_note_and_no_trailer() {
    static PAYLOAD: [u8; 10] = [1; 10];
    let bytes = repr(write(32), &PAYLOAD, true).to_vec();
    let d = dissect(&bytes, bytes.len(), &Options::default());
    assert!(d.has_note(Ei::Trimmed));
    assert_eq!(d.value(Hf::Trimmed), Some(&Value::Marker));
    assert_eq!(uint(&d, Hf::PayloadActual), Some(10));
    assert_eq!(d.checksum, Checksum::Missing { trimmed: true });
    assert!(d.info.ends_with("[TRIMMED]"), "{}", d.info);
}

#[test]
fn ack_info_names_cumulative_ack_sack_ranges_and_echo() {
    let fb = FeedbackRepr {
        echo_psn: 104,
        echo_ev: 2,
        flags: FbFlags::DUP,
        ..FeedbackRepr::default()
    };
    let mut r = repr(
        Body::Ack(AckRepr {
            feedback: fb,
            sack_base: 100,
            sack: SackBitmap::from_psns(100, [101, 102, 104, 200]),
        }),
        &[],
        false,
    );
    r.flags = Flags::empty();
    let bytes = r.to_vec();
    let d = dissect(&bytes, bytes.len(), &Options::default());
    assert_eq!(
        d.info,
        "ACK 0x11\u{2192}0x22 cack=100 SACK=101-102,104,200 echo=104@ev2 <DUP> try=1"
    );
    assert_eq!(
        d.value(Hf::SackRanges).map(|_| d.item_text(
            &d.items[d
                .items
                .iter()
                .position(|n| n.hf() == Some(Hf::SackRanges))
                .unwrap()]
        )),
        Some(Some("101-102,104,200"))
    );
    assert_ranges_within(&d, bytes.len());
}

/// The SACK ranges text is what `Ack::sack_ranges` gives, on bitmaps
/// of every size with runs across word boundaries and a base that
/// wraps.
#[test]
fn sack_ranges_text_matches_proto_parse_ranges() {
    let reference = |ranges: &[Range<u32>]| {
        ranges
            .iter()
            .map(|r| {
                let last = r.end.wrapping_sub(1);
                if last == r.start {
                    format!("{}", r.start)
                } else {
                    format!("{}-{last}", r.start)
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for case in 0..3000 {
        let words = case % 5;
        let base = match case % 3 {
            0 => next() as u32,
            1 => u32::MAX - (case as u32 % 70),
            _ => 100,
        };
        let mut bitmap = vec![0u8; words * 8];
        for b in &mut bitmap {
            // Dense, sparse and empty bytes.
            *b = match next() % 4 {
                0 => 0,
                1 => 0xFF,
                _ => next() as u8,
            };
        }
        let psns = bitmap
            .iter()
            .enumerate()
            .flat_map(|(i, &byte)| {
                (0..8)
                    .filter(move |bit| byte & (0x80 >> bit) != 0)
                    .map(move |bit| base.wrapping_add((i * 8 + bit) as u32))
            })
            .collect::<Vec<_>>();
        let sack = SackBitmap::from_psns(base, psns.iter().copied());
        let mut r = repr(
            Body::Ack(AckRepr {
                feedback: FeedbackRepr::default(),
                sack_base: base,
                sack,
            }),
            &[],
            false,
        );
        r.flags = Flags::empty();
        let bytes = r.to_vec();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let ack = p.ack().unwrap();
        let mut got = String::new();
        push_sack_ranges(&mut got, ack.sack_base(), ack.sack_bitmap());
        assert_eq!(got, reference(&ack.sack_ranges()), "case {case}");
    }
}

#[test]
fn malformed_packets_carry_the_proto_parse_error_text() {
    let r = repr(
        Body::Nack(NackRepr {
            feedback: FeedbackRepr::default(),
            code: NackCode::Gap,
            rnr_timer: 0,
            nack_psn: 5,
        }),
        &[],
        false,
    );
    let mut bytes = r.to_vec();
    bytes.push(0); // a NACK has no payload
    let d = dissect(&bytes, bytes.len(), &Options::default());
    let note = d
        .notes
        .iter()
        .find(|n| n.ei == Ei::Malformed)
        .expect("malformed");
    let err = metaroce::parse_lax(&bytes, bytes.len()).stop.unwrap();
    assert_eq!(note.text, err.to_string());
    // With the payload at frame offset 42, the text gives frame offsets.
    let opts = Options {
        frame_offset: 42,
        ..Options::default()
    };
    let d = dissect(&bytes, bytes.len(), &opts);
    let note = d.notes.iter().find(|n| n.ei == Ei::Malformed).unwrap();
    assert_eq!(note.text, err.clone().at_offset(42).to_string());
    assert!(d.info.ends_with("[Malformed]"));
}

#[test]
fn tlv_running_past_hlen_is_malformed() {
    let mut r = repr(write(0), &[], false);
    r.tlvs = vec![TlvRepr::Ts64(1)];
    let mut bytes = r.to_vec();
    bytes[52 + 1] = 9; // TS64 len: 9 words, past hlen
    let d = dissect(&bytes, bytes.len(), &Options::default());
    assert!(d.has_note(Ei::Malformed), "{:?}", d.notes);
    assert_ranges_within(&d, bytes.len());
}

#[test]
fn every_truncation_and_byte_flip_stays_within_the_capture() {
    static PAYLOAD: [u8; 40] = [7; 40];
    let mut r = repr(write(40), &PAYLOAD, true);
    r.tlvs = vec![
        TlvRepr::Ts64(1),
        TlvRepr::Unknown {
            tlv_type: 77,
            value: vec![1, 2],
        },
    ];
    let bytes = r.to_vec();
    for cut in 0..=bytes.len() {
        // A snaplen cut (wire length kept) and a short packet.
        for wire in [bytes.len(), cut] {
            let d = dissect(&bytes[..cut], wire, &Options::default());
            assert_ranges_within(&d, cut);
        }
    }
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            let d = dissect(&b, b.len(), &Options::default());
            assert_ranges_within(&d, b.len());
        }
    }
}

#[test]
fn empty_and_short_payloads_are_malformed_not_panics() {
    for len in 0..24 {
        let bytes = vec![0x10; len];
        let d = dissect(&bytes, len, &Options::default());
        assert!(d.items.is_empty());
        assert!(d.has_note(Ei::Malformed), "len {len}: {:?}", d.notes);
    }
    // Captured short, wire long: a capture truncation.
    let d = dissect(&[0x10; 10], 100, &Options::default());
    assert!(d.has_note(Ei::CaptureTruncated));
}
