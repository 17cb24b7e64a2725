//! Tests of [`super::decode`] on every link type and layer, on real and
//! built frames: what it reads, where it stops and why. The hot loops'
//! shortcuts are tested against it in `fast_route`.

use super::*;
use std::net::IpAddr;

use crate::Layer;
use crate::build::UdpFrameBuilder;
use crate::rocev2::{self, Opcode, Syndrome, bth, icrc};
use crate::{ErrorKind, LenSource};

/// Frame 5 of montybeatnik_roce_capture_read-write-ecn.pcap: Ethernet /
/// IPv4 / UDP 57236 -> 4791 / RC Acknowledge (AETH 0x1f, MSN 1) / ICRC.
pub(super) static ACK_FRAME: [u8; 62] = [
    0x52, 0x54, 0x00, 0x0a, 0xaa, 0xba, 0x52, 0x54, 0x00, 0xbf, 0x43, 0x69, 0x08, 0x00, 0x45, 0x00,
    0x00, 0x30, 0x5e, 0xce, 0x40, 0x00, 0x40, 0x11, 0xd8, 0x94, 0xc0, 0xa8, 0x41, 0x04, 0xc0, 0xa8,
    0x41, 0x05, 0xdf, 0x94, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, 0x11, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x11, 0x00, 0x8c, 0x84, 0xdd, 0x1f, 0x00, 0x00, 0x01, 0xb3, 0x0c, 0xc2, 0xc0,
];

fn cfg() -> DecodeConfig {
    DecodeConfig::default()
}

#[test]
fn decode_with_sees_what_decode_returns() {
    let cut = &ACK_FRAME[..40];
    for data in [&ACK_FRAME[..], cut, &[][..]] {
        let owned = format!("{:?}", decode(LinkType::Ethernet, data, &cfg()));
        let seen = decode_with(LinkType::Ethernet, data, &cfg(), |f| format!("{f:?}"));
        assert_eq!(seen, owned);
    }
}

/// An RC Send Only with 6 payload bytes (+2 pad), ICRC zero.
fn send_only() -> Vec<u8> {
    let bth = bth::Repr::new(Opcode::RcSendOnly, 0x00_1234, 0x00ab_cdef)
        .with_pad_count(2)
        .with_ack_req(true);
    let repr = rocev2::Repr::new(bth, 8);
    let mut bytes = vec![0xa5; repr.buffer_len()];
    let mut packet = rocev2::Packet::new_unchecked(&mut bytes[..]);
    repr.emit(&mut packet);
    packet.payload_mut().copy_from_slice(b"abcdef\0\0");
    bytes
}

/// Writes the right ICRC into a RoCEv2 frame.
fn fix_icrc(link: LinkType, frame: &mut [u8]) {
    let (value, end) = {
        let f = decode(link, frame, &cfg());
        let ip = f.ip.unwrap();
        let udp = f.udp.unwrap();
        let end = udp.payload_offset + udp.payload_wire_len;
        let covered = &frame[udp.payload_offset..end - 4];
        (icrc::compute(ip.headers, udp.header, covered), end)
    };
    frame[end - 4..end].copy_from_slice(&value.to_le_bytes());
}

fn v6_frame() -> Vec<u8> {
    let mut frame = UdpFrameBuilder::new(
        "[fd00::1]:49153".parse().unwrap(),
        "[fd00::2]:4791".parse().unwrap(),
    )
    .with_ecn(3)
    .with_flow_label(0x12345)
    .with_vlan(100)
    .build(&send_only());
    fix_icrc(LinkType::Ethernet, &mut frame);
    frame
}

#[test]
fn real_ipv4_ack() {
    let f = decode(LinkType::Ethernet, &ACK_FRAME, &cfg());
    assert_eq!(f.error, None);
    assert_eq!(f.ether_type, Some(0x0800));
    let ip = f.ip.unwrap();
    assert_eq!(ip.src, "192.168.65.4".parse::<IpAddr>().unwrap());
    assert_eq!(ip.dst, "192.168.65.5".parse::<IpAddr>().unwrap());
    assert_eq!(
        (ip.ecn, ip.dscp, ip.ttl, ip.flow_label),
        (Ecn::NotEct, 0, 64, None)
    );
    let udp = f.udp.unwrap();
    assert_eq!((udp.src_port, udp.dst_port, udp.length), (57236, 4791, 28));
    assert_eq!((udp.payload_offset, udp.payload_wire_len), (42, 20));
    let roce = f.rocev2().unwrap();
    assert_eq!(roce.icrc, IcrcStatus::Good);
    let p = roce.packet.unwrap();
    assert_eq!(p.opcode(), Opcode::RcAcknowledge);
    assert_eq!(p.bth().psn(), 9_209_053);
    assert_eq!(p.aeth().unwrap().syndrome(), Syndrome::Ack { credit: 31 });
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
}

#[test]
fn corrupted_icrc_is_bad_and_masked_fields_are_ignored() {
    let mut frame = ACK_FRAME;
    frame[15] = 0x03; // CE
    frame[22] = 1; // TTL
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    assert_eq!(f.ip.unwrap().ecn, Ecn::Ce);
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
    frame[53] ^= 0x01; // PSN
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    assert!(
        matches!(f.icrc_status(), Some(IcrcStatus::Bad { stored, .. }) if stored == 0xc0c2_0cb3)
    );
    let off = DecodeConfig {
        verify_crc: false,
        ..cfg()
    };
    let f = decode(LinkType::Ethernet, &frame, &off);
    assert_eq!(f.icrc_status(), Some(IcrcStatus::NotChecked));
    assert!(matches!(
        f.rocev2().unwrap().verify_icrc(),
        IcrcStatus::Bad { .. }
    ));
}

#[test]
fn ipv6_vlan_rocev2() {
    let frame = v6_frame();
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    assert_eq!(f.error, None);
    assert_eq!(f.vlans.ids(), &[100]);
    let ip = f.ip.unwrap();
    assert!(ip.is_ipv6());
    assert_eq!(
        (ip.ecn, ip.flow_label, ip.ttl),
        (Ecn::Ce, Some(0x12345), 64)
    );
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
    let p = f.rocev2().unwrap().packet.unwrap();
    assert_eq!((p.bth().dest_qp(), p.bth().psn()), (0x1234, 0xab_cdef));
    assert_eq!(p.payload(), b"abcdef\0\0");
    assert_eq!(p.data_len(), 6);

    // traffic class, flow label and hop limit are masked; the PSN is not
    let mut other = frame.clone();
    other[18] = 0x6f; // version 6, traffic class high nibble
    other[19] = 0xff;
    other[25] = 3; // hop limit
    assert_eq!(
        decode(LinkType::Ethernet, &other, &cfg()).icrc_status(),
        Some(IcrcStatus::Good)
    );
    other[frame.len() - 4 - 8 - 1] ^= 0x80; // PSN
    assert!(matches!(
        decode(LinkType::Ethernet, &other, &cfg()).icrc_status(),
        Some(IcrcStatus::Bad { .. })
    ));
}

#[test]
fn qinq_tags() {
    let mut frame = v6_frame();
    // insert an outer 802.1ad tag (VLAN 7) in front of the 802.1Q one
    let tag = [0x88, 0xa8, 0x00, 0x07];
    frame.splice(12..12, tag);
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    assert_eq!(f.error, None);
    assert_eq!(f.vlans.ids(), &[7, 100]);
    assert_eq!((f.vlans.outer(), f.vlans.inner()), (Some(7), Some(100)));
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
}

#[test]
fn ipv4_options_and_ipv6_extension_headers() {
    // IPv4 with 4 bytes of options (NOPs)
    let mut frame = ACK_FRAME.to_vec();
    frame.splice(34..34, [1, 1, 1, 1]);
    frame[14] = 0x46;
    frame[17] += 4;
    fix_icrc(LinkType::Ethernet, &mut frame);
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    assert_eq!(f.error, None);
    assert_eq!(f.ip.unwrap().headers.len(), 24);
    assert_eq!(f.udp.unwrap().offset, 38);
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));

    // IPv6 with an 8-byte destination options header
    let mut frame = v6_frame();
    let ip = 18;
    frame[ip + 6] = 60; // next header: destination options
    frame.splice(ip + 40..ip + 40, [17, 0, 1, 4, 0, 0, 0, 0]);
    let plen = u16::from_be_bytes([frame[ip + 4], frame[ip + 5]]) + 8;
    frame[ip + 4..ip + 6].copy_from_slice(&plen.to_be_bytes());
    fix_icrc(LinkType::Ethernet, &mut frame);
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    assert_eq!(f.error, None);
    let ipl = f.ip.unwrap();
    assert_eq!((ipl.protocol, ipl.headers.len()), (17, 48));
    assert_eq!(f.udp.unwrap().dst_port, 4791);
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
}

#[test]
fn cooked_and_raw_link_types() {
    let ip_packet = &ACK_FRAME[14..];
    let mut sll = vec![
        0, 0, 0, 1, 0, 6, 0x52, 0x54, 0, 0xbf, 0x43, 0x69, 0, 0, 0x08, 0x00,
    ];
    sll.extend_from_slice(ip_packet);
    let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6];
    sll2.extend_from_slice(&[0x52, 0x54, 0, 0xbf, 0x43, 0x69, 0, 0]);
    sll2.extend_from_slice(ip_packet);
    let mut null = vec![2, 0, 0, 0];
    null.extend_from_slice(ip_packet);
    let cases: [(LinkType, &[u8]); 7] = [
        (LinkType::LinuxSll, &sll),
        (LinkType::LinuxSll2, &sll2),
        (LinkType::Raw, ip_packet),
        (LinkType::RawDlt12, ip_packet),
        (LinkType::RawDlt14, ip_packet),
        (LinkType::Ipv4, ip_packet),
        (LinkType::Null, &null),
    ];
    for (link, data) in cases {
        let f = decode(link, data, &cfg());
        assert_eq!(f.error, None, "{link}");
        assert_eq!(f.icrc_status(), Some(IcrcStatus::Good), "{link}");
        let udp = f.udp.unwrap();
        assert_eq!(udp.payload_offset, data.len() - 20, "{link}");
    }
    // raw IPv6
    let v6 = v6_frame();
    let f = decode(LinkType::Ipv6, &v6[18..], &cfg());
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
    let f = decode(LinkType::Raw, &v6[18..], &cfg());
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
    // raw with a bad version
    let f = decode(LinkType::Raw, &[0x50; 30], &cfg());
    let err = f.error.unwrap();
    assert_eq!((err.layer, err.offset), (Layer::Ipv4, 0));
}

/// The frame_decode fuzz target's crash: an ERF IPv4 record whose
/// extension header runs past the record; a clean stop, no panic.
#[test]
fn erf_extension_header_cut_short_is_a_truncation() {
    let bytes = [
        0x00, 0x00, 0x00, 0x96, 0x96, 0x96, 0x8c, 0x96, 0x96, 0x96, 0xff, 0x00, 0x00, 0x00, 0x0a,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    let f = decode(LinkType::Erf, &bytes, &cfg());
    let err = f.error.expect("a cut record stops");
    assert!(err.is_capture_truncation(), "{err}");
    assert_eq!(err.layer, Layer::Capture);
    assert!(f.ip.is_none());
}

#[test]
fn unsupported_link_type() {
    let f = decode(LinkType::from(147), &ACK_FRAME, &cfg());
    let err = f.error.unwrap();
    assert_eq!(err.layer, Layer::Capture);
    assert_eq!(
        err.kind,
        ErrorKind::Unsupported {
            what: "link type",
            value: 147
        }
    );
    assert!(f.ip.is_none() && matches!(f.payload, Transport::Other));
}

/// An ERF Ethernet record (type 2, 2 bytes of pad) carries the frame.
#[test]
fn erf_ethernet_record() {
    let mut record = vec![0u8; 18];
    record[8] = 2;
    record.extend_from_slice(&ACK_FRAME);
    let f = decode(LinkType::Erf, &record, &cfg());
    assert_eq!(f.error, None);
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
    assert_eq!(f.udp.unwrap().payload_offset, 18 + 42);
}

#[test]
fn snaplen_cut_payload_keeps_headers() {
    let f = decode(LinkType::Ethernet, &ACK_FRAME[..58], &cfg());
    let roce = f.rocev2().unwrap();
    assert_eq!(roce.icrc, IcrcStatus::NotPresent);
    assert_eq!(roce.packet.unwrap().aeth().unwrap().msn(), 1);
    let err = f.error.unwrap();
    assert_eq!((err.layer, err.offset), (Layer::Icrc, 58));
    assert!(err.is_capture_truncation());
    assert!(!f.udp.unwrap().is_complete());
}

#[test]
fn truncation_names_the_layer() {
    let cases = [
        (0, Layer::Ethernet),
        (13, Layer::Ethernet),
        (14, Layer::Ipv4),
        (33, Layer::Ipv4),
        (34, Layer::Udp),
        (41, Layer::Udp),
        (42, Layer::Bth),
        (53, Layer::Bth),
        (54, Layer::Aeth),
        (57, Layer::Aeth),
        (58, Layer::Icrc),
        (61, Layer::Icrc),
    ];
    for (cut, layer) in cases {
        let f = decode(LinkType::Ethernet, &ACK_FRAME[..cut], &cfg());
        let err = f.error.unwrap();
        assert_eq!((err.layer, err.offset), (layer, cut), "cut at {cut}");
        assert!(err.is_capture_truncation(), "cut at {cut}: {err}");
    }
    // a VLAN tag cut short
    let frame = v6_frame();
    let err = decode(LinkType::Ethernet, &frame[..16], &cfg())
        .error
        .unwrap();
    assert_eq!((err.layer, err.offset), (Layer::Vlan, 16));
}

#[test]
fn malformed_lengths_are_header_errors() {
    // UDP length larger than the IP payload
    let mut frame = ACK_FRAME;
    frame[39] = 0x40;
    let err = decode(LinkType::Ethernet, &frame, &cfg()).error.unwrap();
    assert_eq!(err.layer, Layer::Udp);
    assert!(matches!(
        err.kind,
        ErrorKind::Truncated {
            source: LenSource::Header,
            ..
        }
    ));
    // UDP length below 8
    frame[39] = 4;
    let err = decode(LinkType::Ethernet, &frame, &cfg()).error.unwrap();
    assert_eq!((err.layer, err.offset), (Layer::Udp, 38));
    // UDP length too short for BTH + AETH + ICRC
    frame[39] = 8 + 12;
    let err = decode(LinkType::Ethernet, &frame, &cfg()).error.unwrap();
    assert_eq!(err.layer, Layer::Aeth);
    assert!(!err.is_capture_truncation());
    // IPv4 total length below the header length
    let mut frame = ACK_FRAME;
    frame[17] = 10;
    let err = decode(LinkType::Ethernet, &frame, &cfg()).error.unwrap();
    assert_eq!((err.layer, err.offset), (Layer::Ipv4, 16));
    // IPv4 fragment
    let mut frame = ACK_FRAME;
    frame[20] = 0x20; // MF
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    let err = f.error.unwrap();
    assert!(matches!(err.kind, ErrorKind::Unsupported { .. }));
    assert_eq!((err.layer, err.offset), (Layer::Ipv4, 20));
    // the IP layer is still reported
    assert_eq!(f.ip.unwrap().dst, "192.168.65.5".parse::<IpAddr>().unwrap());
    assert!(f.udp.is_none());
}

#[test]
fn ethernet_padding_is_not_payload() {
    let mut frame = ACK_FRAME.to_vec();
    frame.extend_from_slice(&[0; 6]);
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    assert_eq!(f.error, None);
    assert_eq!(f.icrc_status(), Some(IcrcStatus::Good));
}

#[test]
fn port_choice() {
    let roce = send_only();
    let build = |src: u16, dst: u16| {
        UdpFrameBuilder::new(
            std::net::SocketAddr::from(([10, 0, 0, 1], src)),
            std::net::SocketAddr::from(([10, 0, 0, 2], dst)),
        )
        .build(&roce)
    };
    let kind =
        |frame: &[u8], cfg: &DecodeConfig| match decode(LinkType::Ethernet, frame, cfg).payload {
            Transport::MetaRoce(_) => "metaroce",
            Transport::RoceV2(_) => "rocev2",
            Transport::Other => "other",
        };
    // RoCEv2 keys on the destination port only
    assert_eq!(kind(&build(69, 4791), &cfg()), "rocev2");
    assert_eq!(kind(&build(4791, 5000), &cfg()), "other");
    assert_eq!(kind(&build(49152, 4794), &cfg()), "metaroce");
    assert_eq!(kind(&build(4794, 49152), &cfg()), "metaroce");
    // the RoCEv2 destination port wins over a MetaRoCE source port
    assert_eq!(kind(&build(4794, 4791), &cfg()), "rocev2");
    assert_eq!(cfg().port_choice(4794, 4791), PortChoice::RoceV2);
    assert_eq!(cfg().port_choice(1, 2), PortChoice::Unknown);
    let custom = DecodeConfig {
        rocev2_port: 5000,
        metaroce_port: 6000,
        ..cfg()
    };
    assert_eq!(kind(&build(1, 5000), &custom), "rocev2");
    assert_eq!(kind(&build(1, 4791), &custom), "other");
    assert_eq!(kind(&build(6000, 1), &custom), "metaroce");
}

#[test]
fn metaroce_errors_are_frame_offsets() {
    let frame = UdpFrameBuilder::new(
        "10.0.0.1:49153".parse().unwrap(),
        "10.0.0.2:4794".parse().unwrap(),
    )
    .build(&[0x10, 0, 1]);
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    assert!(matches!(f.payload, Transport::MetaRoce(_)));
    assert!(f.metaroce().is_none());
    let err = f.error.unwrap();
    assert!(err.layer.as_str().starts_with("metaroce"));
    assert!(err.offset >= 42, "{err}");
}

#[test]
fn not_udp_and_not_ip_are_other_without_error() {
    let mut frame = ACK_FRAME;
    frame[23] = 6; // TCP
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    assert_eq!(f.error, None);
    assert!(f.udp.is_none() && f.ip.is_some());
    let mut frame = ACK_FRAME;
    frame[12] = 0x08;
    frame[13] = 0x06; // ARP
    let f = decode(LinkType::Ethernet, &frame, &cfg());
    assert_eq!((f.error, f.ether_type), (None, Some(0x0806)));
    assert!(f.ip.is_none());
}
