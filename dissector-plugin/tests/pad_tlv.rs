//! The PAD TLV in tshark with the plugin: it covers the rest of the header
//! (spec 6, docs/spec-decisions.md 5), and its `metaroce.tlv.len` is the
//! words it covers, as proto-parse (and so `metaroce-analyze decode`)
//! reports it, whatever its len byte holds.

mod common;

use common::*;
use proto_parse::metaroce::{Op, Packet, PathState, PathStatusEntry, TlvRepr, TlvType};

/// A SEND with TS64 and then PAD where a 3-word PATH_STATUS was, its len
/// byte set to `len_byte`.
fn padded_send(len_byte: u8) -> Vec<u8> {
    let mut send = base(data(Op::Send, 0, 1, 0, 0), 7, 1);
    send.tlvs = vec![
        TlvRepr::Ts64(1_700_000_000_123_456_789),
        TlvRepr::PathStatus(vec![
            PathStatusEntry {
                ev: 5,
                state: PathState::Active,
            },
            PathStatusEntry {
                ev: 6,
                state: PathState::Active,
            },
        ]),
    ];
    let mut bytes = send.to_vec();
    let packet = Packet::new_checked(&bytes[..]).unwrap();
    let last = packet.tlvs().last().unwrap().unwrap().offset;
    bytes[last] = 0;
    bytes[last + 1] = len_byte;
    bytes
}

#[test]
fn pad_tlv_len_is_the_rest_of_the_header() {
    let t = Tshark::new();
    let payloads: Vec<Vec<u8>> = [0u8, 1, 0xff].into_iter().map(padded_send).collect();
    let frames: Vec<Vec<u8>> = payloads
        .iter()
        .map(|p| udp_frame(p, 49152, PORT, true))
        .collect();
    let pcap = write_pcap(&t, "pad.pcap", &frames);
    let rows = t.fields(&pcap, &["metaroce.tlv.type", "metaroce.tlv.len"], None);
    assert_eq!(rows.len(), payloads.len());
    for (row, payload) in rows.iter().zip(&payloads) {
        let packet = Packet::new_checked(&payload[..]).unwrap();
        let tlvs: Vec<_> = packet.tlvs().map(Result::unwrap).collect();
        assert_eq!(tlvs[1].tlv_type, TlvType::Pad);
        let lens: Vec<String> = tlvs.iter().map(|t| t.len_words().to_string()).collect();
        assert_eq!(lens, ["3", "3"], "proto-parse");
        assert_eq!(row[0], "3,0", "tlv types");
        assert_eq!(row[1], lens.join(","), "plugin against proto-parse");
    }
}
