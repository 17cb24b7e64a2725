//! Decapsulation of mirrored frames (GRE, ERSPAN I/II/III, VXLAN) by
//! `frame::decode`: the inner frame decodes as if captured plain, the outer
//! layers are named in `Frame::mirror`, bad encapsulations are errors that
//! name the layer and offset, and every truncation is a clean stop.

use std::net::IpAddr;

use proptest::prelude::*;
use proto_parse::build::{Encap, MirrorFrameBuilder, UdpFrameBuilder};
use proto_parse::frame::{DecodeConfig, Frame, LinkType, decode, ipv4_mirror};
use proto_parse::mirror::{Granularity, MirrorKind};
use proto_parse::rocev2::{self, IcrcStatus, Opcode, bth, icrc};
use proto_parse::{ErrorKind, Layer, LenSource};

/// An Ethernet frame with a RoCEv2 SEND Only (ICRC right), over IPv4 or IPv6.
fn rocev2_frame(v6: bool) -> Vec<u8> {
    let (src, dst) = if v6 {
        ("[fd00::1]:49152", "[fd00::2]:4791")
    } else {
        ("10.0.0.1:49152", "10.0.0.2:4791")
    };
    let payload = rocev2::Repr::new(bth::Repr::new(Opcode::RcSendOnly, 0x11, 42), 32).to_vec();
    let mut frame = UdpFrameBuilder::new(src.parse().unwrap(), dst.parse().unwrap())
        .with_vlan(10)
        .build(&payload);
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

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn encaps() -> Vec<Encap> {
    vec![
        Encap::Gre {
            key: None,
            seq: None,
            checksum: false,
        },
        Encap::Gre {
            key: Some(0xAB),
            seq: Some(9),
            checksum: true,
        },
        Encap::ErspanII {
            session: 301,
            seq: 5,
        },
        Encap::ErspanIII {
            session: 1023,
            seq: 6,
            switch_time_ns: 1_764_000_000_123_456_789,
        },
        Encap::Vxlan { vni: 0x12_3456 },
    ]
}

fn builders() -> Vec<MirrorFrameBuilder> {
    let mut out = Vec::new();
    for (switch, collector) in [
        ("192.0.2.1", "198.51.100.9"),
        ("2001:db8::1", "2001:db8::9"),
    ] {
        for encap in encaps() {
            out.push(MirrorFrameBuilder::new(ip(switch), ip(collector), encap));
        }
    }
    out
}

/// The inner frame's layers, as `decode` of the plain frame gives them.
fn same_inner(mirrored: &Frame<'_>, plain: &Frame<'_>, shift: usize) {
    let (m, p) = (mirrored.ip.unwrap(), plain.ip.unwrap());
    assert_eq!(
        (m.src, m.dst, m.ecn, m.headers),
        (p.src, p.dst, p.ecn, p.headers)
    );
    assert_eq!(m.offset, p.offset + shift);
    assert_eq!(mirrored.vlans, plain.vlans);
    let (m, p) = (mirrored.udp.unwrap(), plain.udp.unwrap());
    assert_eq!(
        (m.src_port, m.dst_port, m.payload),
        (p.src_port, p.dst_port, p.payload)
    );
    assert_eq!(mirrored.icrc_status(), Some(IcrcStatus::Good));
    assert_eq!(mirrored.error, None);
}

#[test]
fn every_encapsulation_carries_the_frame_through_the_normal_path() {
    let cfg = DecodeConfig::default();
    for v6 in [false, true] {
        let inner = rocev2_frame(v6);
        let plain = decode(LinkType::Ethernet, &inner, &cfg);
        for b in builders() {
            let bytes = b.build(&inner);
            let f = decode(LinkType::Ethernet, &bytes, &cfg);
            let m = f
                .mirror
                .unwrap_or_else(|| panic!("{b:?}: no mirror ({:?})", f.error));
            same_inner(&f, &plain, m.inner_offset);
            assert_eq!((m.src, m.dst), (b.switch, b.collector));
            let (kind, session) = match b.encap {
                Encap::Gre { key, .. } => (MirrorKind::Gre, key.unwrap_or(0)),
                Encap::ErspanII { session, .. } => (MirrorKind::ErspanII, u32::from(session)),
                Encap::ErspanIII { session, .. } => (MirrorKind::ErspanIII, u32::from(session)),
                Encap::Vxlan { vni } => (MirrorKind::Vxlan, vni),
            };
            assert_eq!((m.kind, m.session, m.truncated), (kind, session, false));
            if let Encap::ErspanIII { switch_time_ns, .. } = b.encap {
                let t = m.switch_time.unwrap();
                assert_eq!(t.granularity, Granularity::Ieee1588);
                assert_eq!(t.full_ns(), Some(switch_time_ns));
            }
            // The hot loops' shortcut reads the same mirror, IPv4 GRE only.
            let fast = ipv4_mirror(LinkType::Ethernet, &bytes);
            let expect_fast = b.switch.is_ipv4() && !matches!(b.encap, Encap::Vxlan { .. });
            assert_eq!(fast.is_some(), expect_fast, "{b:?}");
            if let Some(fast) = fast {
                assert_eq!(fast.mirror, m);
                assert_eq!(fast.inner, &bytes[m.inner_offset..]);
            }
        }
    }
}

#[test]
fn erspan_type_i_and_ip_in_gre() {
    let cfg = DecodeConfig::default();
    let inner = rocev2_frame(false);
    let switch = MirrorFrameBuilder::new(ip("192.0.2.1"), ip("198.51.100.9"), encaps()[0]);
    let mut bytes = switch.build(&inner);
    // GRE 0x88BE without a sequence number: ERSPAN type I.
    bytes[36..38].copy_from_slice(&0x88BEu16.to_be_bytes());
    let f = decode(LinkType::Ethernet, &bytes, &cfg);
    assert_eq!(f.mirror.unwrap().kind, MirrorKind::ErspanI);
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
    // IPv4 in GRE: the Ethernet header and the VLAN tag left out.
    let mut ip_in_gre = bytes[..38].to_vec();
    ip_in_gre[36..38].copy_from_slice(&0x0800u16.to_be_bytes());
    ip_in_gre.extend_from_slice(&inner[18..]);
    let total = (ip_in_gre.len() - 14) as u16;
    ip_in_gre[16..18].copy_from_slice(&total.to_be_bytes());
    let f = decode(LinkType::Ethernet, &ip_in_gre, &cfg);
    assert_eq!(
        (f.mirror.unwrap().kind, f.error.clone()),
        (MirrorKind::Gre, None)
    );
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
}

#[test]
fn bad_encapsulations_name_layer_and_offset() {
    let cfg = DecodeConfig::default();
    let inner = rocev2_frame(false);
    let erspan3 = MirrorFrameBuilder::new(ip("192.0.2.1"), ip("198.51.100.9"), encaps()[3]);
    let bytes = erspan3.build(&inner);
    // ERSPAN starts after Ethernet (14), IPv4 (20) and GRE with a sequence
    // number (8): an unknown version there.
    let mut bad = bytes.clone();
    bad[42] = 0x30 | (bad[42] & 0x0F);
    let err = decode(LinkType::Ethernet, &bad, &cfg).error.unwrap();
    assert_eq!(
        err.to_string(),
        "erspan at byte 42: version is 3, expected 1 (type II) or 2 (type III)"
    );
    // GRE inside a mirrored frame: recursion, not decoded.
    let nested = erspan3.build(&bytes);
    let f = decode(LinkType::Ethernet, &nested, &cfg);
    let err = f.error.unwrap();
    // The inner mirror's GRE: after the outer headers, its Ethernet and IPv4.
    let outer = nested.len() - bytes.len();
    assert_eq!((err.layer, err.offset), (Layer::Gre, outer + 14 + 20));
    assert!(matches!(err.kind, ErrorKind::Unsupported { .. }), "{err}");
    // A GRE protocol type that is not a mirror.
    let mut mpls = bytes.clone();
    mpls[36..38].copy_from_slice(&0x8847u16.to_be_bytes());
    let err = decode(LinkType::Ethernet, &mpls, &cfg).error.unwrap();
    assert_eq!(
        err.to_string(),
        "gre at byte 36: unsupported GRE protocol type 34887"
    );
    // The switch cut the copy: the T bit is read, the inner stop is a cut.
    let mut cut = erspan3;
    cut.truncate = Some(60);
    let short = cut.build(&inner);
    let f = decode(LinkType::Ethernet, &short, &cfg);
    assert!(f.mirror.unwrap().truncated);
    assert!(f.error.unwrap().is_capture_truncation());
}

#[test]
fn an_ip_length_shorter_than_the_gre_header_is_a_malformation() {
    let inner = rocev2_frame(false);
    let erspan2 = MirrorFrameBuilder::new(ip("192.0.2.1"), ip("198.51.100.9"), encaps()[2]);
    let mut bytes = erspan2.build(&inner);
    bytes[16..18].copy_from_slice(&(20u16 + 6).to_be_bytes());
    let err = decode(LinkType::Ethernet, &bytes, &DecodeConfig::default())
        .error
        .unwrap();
    assert_eq!(err.layer, Layer::Gre);
    assert!(
        matches!(
            err.kind,
            ErrorKind::Truncated {
                source: LenSource::Header,
                ..
            }
        ),
        "{err}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every cut of every mirrored frame is a capture truncation at or
    /// before the cut, never a panic, and the fast path agrees with decode.
    #[test]
    fn every_truncation_stops_cleanly(which in 0usize..10, v6 in any::<bool>()) {
        let b = builders()[which];
        let bytes = b.build(&rocev2_frame(v6));
        for len in 0..bytes.len() {
            let f = decode(LinkType::Ethernet, &bytes[..len], &DecodeConfig::default());
            let err = f.error.clone().expect("a cut frame stops");
            prop_assert!(err.is_capture_truncation(), "{len}: {err}");
            prop_assert!(err.offset <= len, "{len}: {err}");
            if let Some(fast) = ipv4_mirror(LinkType::Ethernet, &bytes[..len]) {
                prop_assert_eq!(Some(fast.mirror), f.mirror);
            }
        }
    }

    /// Arbitrary bytes after a GRE or ERSPAN header never panic.
    #[test]
    fn arbitrary_encapsulated_bytes_never_panic(
        which in 0usize..10,
        tail in proptest::collection::vec(any::<u8>(), 0..120),
        flip in any::<(usize, u8)>(),
    ) {
        let mut bytes = builders()[which].build(&tail);
        let at = flip.0 % bytes.len();
        bytes[at] ^= flip.1;
        let f = decode(LinkType::Ethernet, &bytes, &DecodeConfig { heuristic: true, ..DecodeConfig::default() });
        let _ = format!("{f:?}");
        if let Some(fast) = ipv4_mirror(LinkType::Ethernet, &bytes) {
            prop_assert_eq!(Some(fast.mirror), f.mirror);
        }
    }
}
