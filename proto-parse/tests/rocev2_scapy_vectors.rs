//! RoCEv2 frames made by scapy's contrib RoCE layer (`rocev2_scapy.pcap`,
//! made by `rocev2_scapy_gen.py` next to it). Scapy computes the ICRC with
//! its own implementation of the IBTA annex A17 pseudo-header, for IPv4 and
//! IPv6: these are independent ICRC vectors for IPv6 (the real captures are
//! all IPv4), and cover the opcodes the real captures lack (CNP, NAK,
//! RNR NAK, atomics, Send with Invalidate, UC, UD with immediate).
//! Every field is also compared with tshark, which this test runs (it fails,
//! not skips, without tshark).

mod rocev2_tshark;

use std::path::PathBuf;

use proto_parse::frame::{DecodeConfig, Ecn, LinkType, decode};
use proto_parse::rocev2::{IcrcStatus, NakCode, Opcode, Syndrome};

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/rocev2_scapy.pcap")
}

#[test]
fn scapy_icrc_verifies_over_ipv4_and_ipv6_and_fields_agree_with_tshark() {
    let (link, frames) = rocev2_tshark::read_pcap(&path());
    assert_eq!(link, 1);
    assert_eq!(frames.len(), 11);
    let rows = rocev2_tshark::tshark_rows(&path());
    assert_eq!(rows.len(), frames.len());
    let cfg = DecodeConfig::default();
    let mut v6 = 0;
    for (i, (data, theirs)) in frames.iter().zip(&rows).enumerate() {
        let frame = decode(LinkType::from(link), data, &cfg);
        assert_eq!(frame.error, None, "frame {}", i + 1);
        assert_eq!(
            frame.icrc_status(),
            Some(IcrcStatus::Good),
            "frame {}",
            i + 1
        );
        v6 += usize::from(frame.ip.unwrap().is_ipv6());
        let ours = rocev2_tshark::our_row(i + 1, &frame);
        assert_eq!(&ours, theirs, "frame {}: ours vs tshark", i + 1);
    }
    assert_eq!(v6, 4);
}

#[test]
fn scapy_vectors_decode_as_built() {
    let (link, frames) = rocev2_tshark::read_pcap(&path());
    let cfg = DecodeConfig::default();
    let decoded: Vec<_> = frames
        .iter()
        .map(|d| decode(LinkType::from(link), d, &cfg))
        .collect();
    let packet = |i: usize| decoded[i].rocev2().unwrap().packet.unwrap();

    // 1: IPv6 NAK (invalid request), traffic class 0x8b, flow label, FECN
    let ip = decoded[0].ip.unwrap();
    assert_eq!(
        (ip.dscp, ip.ecn, ip.flow_label, ip.ttl),
        (34, Ecn::Ce, Some(0xabcde), 7)
    );
    assert_ne!(decoded[0].udp.unwrap().checksum, 0);
    let p = packet(0);
    assert!(p.bth().fecn());
    assert_eq!(
        p.aeth().unwrap().syndrome(),
        Syndrome::Nak(NakCode::InvalidRequest)
    );
    assert_eq!(p.aeth().unwrap().msn(), 0xbeef);

    // 2: IPv6 CNP with BECN
    let p = packet(1);
    assert_eq!(p.opcode(), Opcode::Cnp);
    assert!(p.bth().becn());
    assert_eq!(
        (p.bth().dest_qp(), p.header_len(), p.payload_wire_len()),
        (0x12_3456, 28, 0)
    );

    // 3: RDMA Write Only Immediate, pad 1
    let p = packet(2);
    assert_eq!(p.reth().unwrap().dma_len(), 7);
    assert_eq!(p.imm_dt(), Some(0xcafe_babe));
    assert_eq!((p.payload(), p.data_len()), (&b"payload\0"[..], 7));

    // 4: VLAN 42, IPv6, UD Send Only Immediate
    assert_eq!(decoded[3].vlans.ids(), &[42]);
    let p = packet(3);
    assert_eq!(p.deth().unwrap().src_qp(), 0x99);
    assert_eq!(p.payload().len(), 40);

    // 5, 6: atomics
    let a = packet(4).atomic_eth().unwrap();
    assert_eq!(
        (a.va, a.r_key, a.compare),
        (0x1000, 0x42, 0x2222_2222_2222_2222)
    );
    let p = packet(5);
    assert_eq!(p.aeth().unwrap().syndrome(), Syndrome::Ack { credit: 3 });
    assert_eq!(p.atomic_ack_eth(), Some(0x1111_1111_1111_1111));

    // 7: RNR NAK, BECN
    let p = packet(6);
    assert_eq!(p.aeth().unwrap().syndrome(), Syndrome::RnrNak { timer: 14 });
    assert!(p.bth().becn());

    // 8: Send Only with Invalidate
    assert_eq!(packet(7).ieth(), Some(0x00ab_cdef));
    // 9: UC RDMA Write First
    assert_eq!(packet(8).opcode(), Opcode::UcRdmaWriteFirst);
    // 10: Read Response Last, credit 4, pad 3
    assert_eq!(packet(9).data_len(), 1);
    // 11: reserved bits kept
    let p = packet(10);
    let b = p.bth();
    assert_eq!((b.resv6a(), b.resv7()), (0x15, 0x55));
}
