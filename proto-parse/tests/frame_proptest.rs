//! Property tests of `frame::decode`: arbitrary bytes with every link type
//! never panic; mutated real-looking frames never panic; every truncation of
//! a valid RoCEv2 frame reports a capture truncation at or before the cut.

use proptest::prelude::*;
use proto_parse::build::UdpFrameBuilder;
use proto_parse::frame::{DecodeConfig, Frame, LinkType, Transport, decode};
use proto_parse::rocev2::{self, IcrcStatus, Opcode, Packet, Repr, bth, icrc, reth};

fn link_type() -> impl Strategy<Value = LinkType> {
    prop_oneof![
        proptest::sample::select(LinkType::SUPPORTED.to_vec()),
        any::<u32>().prop_map(LinkType::from),
    ]
}

fn config() -> impl Strategy<Value = DecodeConfig> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(heuristic, verify_crc, swap)| {
        let mut cfg = DecodeConfig {
            heuristic,
            verify_crc,
            ..DecodeConfig::default()
        };
        if swap {
            // both protocols on one port: RoCEv2 wins on the destination
            cfg.metaroce_port = cfg.rocev2_port;
        }
        cfg
    })
}

/// Touches every part of a decoded frame.
fn walk(frame: &Frame<'_>) {
    let _ = format!("{frame:?}");
    if let Some(err) = &frame.error {
        let _ = err.to_string();
        assert!(err.offset <= frame.data.len().max(1 << 17));
    }
    if let Some(udp) = &frame.udp {
        assert!(udp.payload_offset + udp.payload.len() <= frame.data.len());
        assert_eq!(
            &frame.data[udp.payload_offset..udp.payload_offset + udp.payload.len()],
            udp.payload
        );
    }
    if let Some(roce) = frame.rocev2() {
        let _ = roce.verify_icrc();
        if let Some(p) = &roce.packet {
            let _ = Repr::parse(p).to_string();
            let _ = (p.payload(), p.icrc(), p.data_len());
            let _ = p.warnings().count();
        }
    }
    let _ = frame.icrc_status();
    let _ = frame.metaroce();
}

fn rocev2_write(payload_len: usize) -> Vec<u8> {
    let repr = Repr {
        reth: Some(reth::Repr {
            va: 0x1000,
            r_key: 7,
            dma_len: 4096,
        }),
        ..Repr::new(
            bth::Repr::new(Opcode::RcRdmaWriteFirst, 0x11, 42),
            payload_len,
        )
    };
    let mut bytes = vec![0x5a; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
    bytes
}

/// A whole Ethernet frame carrying a RoCEv2 packet with a right ICRC.
fn rocev2_frame(v6: bool, vlan: Option<u16>, payload_len: usize) -> Vec<u8> {
    let (src, dst) = if v6 {
        ("[fd00::1]:49152", "[fd00::2]:4791")
    } else {
        ("10.0.0.1:49152", "10.0.0.2:4791")
    };
    let mut builder = UdpFrameBuilder::new(src.parse().unwrap(), dst.parse().unwrap());
    if let Some(v) = vlan {
        builder = builder.with_vlan(v);
    }
    let mut frame = builder.build(&rocev2_write(payload_len));
    let (value, end) = {
        let f = decode(LinkType::Ethernet, &frame, &DecodeConfig::default());
        let (ip, udp) = (f.ip.unwrap(), f.udp.unwrap());
        let end = udp.payload_offset + udp.payload_wire_len;
        let covered = &frame[udp.payload_offset..end - rocev2::ICRC_LEN];
        (icrc::compute(ip.headers, udp.header, covered), end)
    };
    frame[end - 4..end].copy_from_slice(&value.to_le_bytes());
    frame
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(
        link in link_type(),
        cfg in config(),
        data in proptest::collection::vec(any::<u8>(), 0..160),
    ) {
        walk(&decode(link, &data, &cfg));
    }

    #[test]
    fn arbitrary_ip_like_bytes_never_panic(
        cfg in config(),
        v6 in any::<bool>(),
        mut data in proptest::collection::vec(any::<u8>(), 0..160),
    ) {
        // steer the random bytes into the IP and UDP parsers
        if let Some(b) = data.first_mut() {
            *b = if v6 { 0x60 | (*b & 0x0f) } else { 0x45 };
        }
        if !v6 && data.len() > 9 {
            data[9] = 17;
        }
        if v6 && data.len() > 6 {
            data[6] = [17, 0, 43, 44, 60, 51][usize::from(data[6]) % 6];
        }
        walk(&decode(LinkType::Raw, &data, &cfg));
    }

    #[test]
    fn mutated_rocev2_frames_never_panic(
        v6 in any::<bool>(),
        vlan in proptest::option::of(0u16..4096),
        payload_len in 0usize..64,
        mutations in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
        cfg in config(),
    ) {
        let mut frame = rocev2_frame(v6, vlan, payload_len);
        for (at, value) in mutations {
            let i = at % frame.len();
            frame[i] = value;
        }
        let cut = cut % (frame.len() + 1);
        walk(&decode(LinkType::Ethernet, &frame[..cut], &cfg));
        walk(&decode(LinkType::Ethernet, &frame, &cfg));
    }

    #[test]
    fn valid_frames_decode_and_every_truncation_is_reported(
        v6 in any::<bool>(),
        vlan in proptest::option::of(0u16..4096),
        payload_len in 0usize..48,
    ) {
        let frame = rocev2_frame(v6, vlan, payload_len);
        let cfg = DecodeConfig::default();
        let whole = decode(LinkType::Ethernet, &frame, &cfg);
        prop_assert_eq!(whole.error.as_ref(), None);
        prop_assert_eq!(whole.icrc_status(), Some(IcrcStatus::Good));
        prop_assert_eq!(whole.vlans.outer(), vlan);
        let is_roce = matches!(whole.payload, Transport::RoceV2(_));
        prop_assert!(is_roce);
        for cut in 0..frame.len() {
            let f = decode(LinkType::Ethernet, &frame[..cut], &cfg);
            let err = f.error.clone().expect("a cut frame must report an error");
            prop_assert!(err.is_capture_truncation(), "cut {}: {}", cut, err);
            prop_assert!(err.offset <= cut, "cut {}: {}", cut, err);
            walk(&f);
        }
    }
}
