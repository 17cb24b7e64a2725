//! Property tests of the RoCEv2 wire module: `Repr` round trips, every
//! truncation of a valid packet is a `Truncated` error, arbitrary bytes
//! never panic.

use proptest::prelude::*;
use proto_parse::rocev2::{
    self, AtomicEthRepr, ExtHeaders, IcrcStatus, Opcode, Packet, Repr, aeth, bth, deth, icrc,
    parse_lax, reth,
};
use proto_parse::{ErrorKind, LenSource};

fn opcode() -> impl Strategy<Value = Opcode> {
    prop_oneof![
        // every named opcode
        (0u8..=0x17).prop_map(Opcode::from),
        (0x20u8..=0x2b).prop_map(Opcode::from),
        Just(Opcode::UdSendOnly),
        Just(Opcode::UdSendOnlyImm),
        Just(Opcode::Cnp),
        any::<u8>().prop_map(Opcode::from),
    ]
}

fn bth_repr() -> impl Strategy<Value = bth::Repr> {
    (
        opcode(),
        any::<(bool, bool, bool, bool, bool)>(),
        0u8..4,
        0u8..16,
        any::<u16>(),
        0u8..64,
        0u32..1 << 24,
        0u8..128,
        0u32..1 << 24,
    )
        .prop_map(
            |(
                opcode,
                (solicited, mig_req, fecn, becn, ack_req),
                pad_count,
                tver,
                p_key,
                resv6a,
                dest_qp,
                resv7,
                psn,
            )| {
                bth::Repr {
                    opcode,
                    solicited,
                    mig_req,
                    pad_count,
                    tver,
                    p_key,
                    fecn,
                    becn,
                    resv6a,
                    dest_qp,
                    ack_req,
                    resv7,
                    psn,
                }
            },
        )
}

/// A consistent `Repr` (headers as the opcode says) and its payload.
fn repr_and_payload() -> impl Strategy<Value = (Repr, Vec<u8>)> {
    (
        bth_repr(),
        (any::<u32>(), any::<u8>(), 0u32..1 << 24).prop_map(|(q_key, reserved, src_qp)| {
            deth::Repr {
                q_key,
                reserved,
                src_qp,
            }
        }),
        any::<(u64, u32, u32)>().prop_map(|(va, r_key, dma_len)| reth::Repr { va, r_key, dma_len }),
        any::<(u64, u32, u64, u64)>().prop_map(|(va, r_key, swap_add, compare)| AtomicEthRepr {
            va,
            r_key,
            swap_add,
            compare,
        }),
        (any::<u8>(), 0u32..1 << 24).prop_map(|(syndrome, msn)| aeth::Repr { syndrome, msn }),
        any::<(u64, u32, u32)>(),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(
            |(bth, deth, reth, atomic, aeth, (ack, imm, ieth), payload)| {
                let h = bth.opcode.headers();
                let payload = if h.contains(ExtHeaders::PAYLOAD) {
                    payload
                } else {
                    Vec::new()
                };
                let pick = |flag: ExtHeaders| h.contains(flag);
                let repr = Repr {
                    bth,
                    deth: pick(ExtHeaders::DETH).then_some(deth),
                    reth: pick(ExtHeaders::RETH).then_some(reth),
                    atomic_eth: pick(ExtHeaders::ATOMIC_ETH).then_some(atomic),
                    aeth: pick(ExtHeaders::AETH).then_some(aeth),
                    atomic_ack_eth: pick(ExtHeaders::ATOMIC_ACK_ETH).then_some(ack),
                    imm_dt: pick(ExtHeaders::IMM_DT).then_some(imm),
                    ieth: pick(ExtHeaders::IETH).then_some(ieth),
                    payload_len: payload.len(),
                };
                (repr, payload)
            },
        )
}

fn emit(repr: &Repr, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0xa5; repr.buffer_len()];
    let mut packet = Packet::new_unchecked(&mut bytes[..]);
    repr.emit(&mut packet);
    packet.payload_mut().copy_from_slice(payload);
    packet.set_icrc(0x1234_5678);
    bytes
}

proptest! {
    #[test]
    fn parse_of_emit_is_identity((repr, payload) in repr_and_payload()) {
        prop_assert!(repr.is_consistent());
        let bytes = emit(&repr, &payload);
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(Repr::parse(&packet), repr);
        prop_assert_eq!(packet.payload(), &payload[..]);
        prop_assert_eq!(packet.icrc(), Some(0x1234_5678));
        // and emit(parse(x)) gives back the bytes
        prop_assert_eq!(emit(&Repr::parse(&packet), packet.payload()), bytes);
    }

    #[test]
    fn every_truncation_is_a_truncated_error((repr, payload) in repr_and_payload()) {
        let bytes = emit(&repr, &payload);
        let full = bytes.len();
        for cut in 0..full {
            // snaplen cut: the wire length is known
            let lax = parse_lax(&bytes[..cut], full);
            let stop = lax.stop.expect("a cut packet must stop");
            prop_assert!(stop.is_capture_truncation(), "cut {}: {}", cut, stop);
            prop_assert_eq!(stop.offset, cut);
            prop_assert_eq!(lax.packet.is_some(), cut >= repr.header_len());
            if let Some(p) = lax.packet {
                prop_assert_eq!(p.icrc(), None);
                prop_assert_eq!(p.verify_icrc(&[], &[]), IcrcStatus::NotPresent);
                prop_assert_eq!(Repr::parse(&p), repr);
            }
            // cut on the wire (the length itself is short): the headers
            // and the ICRC must still fit
            if cut < repr.header_len() + rocev2::ICRC_LEN {
                let err = Packet::new_checked(&bytes[..cut]).unwrap_err();
                let is_header_truncation = matches!(
                    err.kind,
                    ErrorKind::Truncated { source: LenSource::Header, .. }
                );
                prop_assert!(is_header_truncation, "{}", err);
            }
        }
        let lax = parse_lax(&bytes, full);
        prop_assert!(lax.stop.is_none());
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..96),
        wire in 0usize..128,
        ip in proptest::collection::vec(any::<u8>(), 0..64),
        udp in proptest::collection::vec(any::<u8>(), 0..12),
    ) {
        for packet in [Packet::new_checked(&bytes[..]).ok(), Packet::new_checked_lax(&bytes[..], wire).ok()]
            .into_iter()
            .flatten()
        {
            let _ = Repr::parse(&packet);
            let _ = (packet.payload(), packet.data_len(), packet.icrc(), packet.icrc_covered());
            let _ = (packet.deth(), packet.reth(), packet.aeth(), packet.atomic_eth());
            let _ = (packet.atomic_ack_eth(), packet.imm_dt(), packet.ieth());
            let _ = packet.verify_icrc(&ip, &udp);
            let _ = packet.warnings().count();
            let _ = Repr::parse(&packet).to_string();
        }
        let _ = parse_lax(&bytes, wire);
        let _ = icrc::compute(&ip, &udp, &bytes);
        let _ = bth::Packet::new_checked(&bytes[..]).map(|p| bth::Repr::parse(&p));
        let _ = reth::Packet::new_checked(&bytes[..]).map(|p| reth::Repr::parse(&p));
        let _ = aeth::Packet::new_checked(&bytes[..]).map(|p| aeth::Repr::parse(&p).to_string());
        let _ = deth::Packet::new_checked(&bytes[..]).map(|p| deth::Repr::parse(&p));
    }

    #[test]
    fn icrc_fill_then_verify(
        (repr, payload) in repr_and_payload(),
        v6 in any::<bool>(),
        ecn in 0u8..4,
        ttl in any::<u8>(),
    ) {
        let mut ip = if v6 { vec![0u8; 40] } else { vec![0u8; 20] };
        ip[0] = if v6 { 0x60 } else { 0x45 };
        let udp = [0xc0, 0x01, 0x12, 0xb7, 0, 0, 0, 0];
        let mut bytes = emit(&repr, &payload);
        Packet::new_unchecked(&mut bytes[..]).fill_icrc(&ip, &udp);
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(packet.verify_icrc(&ip, &udp), IcrcStatus::Good);
        // ECN and TTL / hop limit are masked
        if v6 { ip[1] |= ecn << 4; ip[7] = ttl; } else { ip[1] = ecn; ip[8] = ttl; }
        prop_assert_eq!(packet.verify_icrc(&ip, &udp), IcrcStatus::Good);
    }
}
