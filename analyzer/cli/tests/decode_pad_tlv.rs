//! `decode --json`'s `metaroce.tlv.len` of a PAD TLV is the words it
//! covers, the rest of the header (spec 6, docs/spec-decisions.md 5), as
//! the plugin reports it (dissector-plugin/tests/pad_tlv.rs), whatever the
//! byte after its type holds; it was that byte (0).

use std::process::Command;

use proto_parse::build::UdpFrameBuilder;
use proto_parse::capture::PcapWriter;
use proto_parse::metaroce::{
    Body, DataRepr, Flags, Op, Packet, PathState, PathStatusEntry, Repr, TlvRepr,
};
use serde_json::Value;

/// A SEND with TS64, then PAD where a 3-word PATH_STATUS was.
fn padded_send(second_byte: u8) -> Vec<u8> {
    let entry = |ev| PathStatusEntry {
        ev,
        state: PathState::Active,
    };
    let repr = Repr {
        flags: Flags::SOM | Flags::EOM,
        tx_attempt: 0,
        ev: 1,
        path_seq: 1,
        dst_conn: 0x22,
        src_conn: 0x11,
        psn: 7,
        tx_ts: 5000,
        body: Body::Data(DataRepr {
            op: Op::Send,
            payload_len: 0,
            msg_id: 1,
            msg_offset: 0,
            msg_len: 0,
        }),
        tlvs: vec![
            TlvRepr::Ts64(1_700_000_000_123_456_789),
            TlvRepr::PathStatus(vec![entry(5), entry(6)]),
        ],
        payload: &[],
        crc: false,
    };
    let mut bytes = repr.to_vec();
    let last = Packet::new_checked(&bytes[..])
        .unwrap()
        .tlvs()
        .last()
        .unwrap()
        .unwrap()
        .offset;
    bytes[last] = 0;
    bytes[last + 1] = second_byte;
    bytes
}

#[test]
fn pad_tlv_len_is_the_rest_of_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("pad.pcap");
    let builder = UdpFrameBuilder::new(
        "10.0.0.1:49152".parse().unwrap(),
        "10.0.0.2:4794".parse().unwrap(),
    );
    let mut w = PcapWriter::create(&pcap).unwrap();
    for (i, second) in [0u8, 1, 0xff].into_iter().enumerate() {
        w.write_frame(1_000 * i as u64, &builder.build(&padded_send(second)))
            .unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let out = Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
        .args(["decode", "--json"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    for line in &lines {
        let fields = &line["fields"];
        assert_eq!(
            fields["metaroce.tlv.type"],
            serde_json::json!([3, 0]),
            "{line}"
        );
        assert_eq!(
            fields["metaroce.tlv.len"],
            serde_json::json!([3, 3]),
            "{line}"
        );
    }
}
