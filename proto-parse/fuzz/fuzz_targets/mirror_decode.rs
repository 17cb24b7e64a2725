//! Mirrored frames: arbitrary bytes after an Ethernet / IPv4 or IPv6 / GRE
//! or UDP 4789 prefix, so that GRE, ERSPAN II/III and VXLAN and the frame
//! they carry are reached on every run; `frame::ipv4_mirror`, the hot
//! loops' shortcut, checked against `frame::decode`; the headers' `Repr`s
//! round-trip; and a copy of the bytes cut into outer IP fragments on the
//! collector path (IPv4 or IPv6) decodes, once `defrag::Reassembler` has
//! rebuilt it, as the copy sent whole.
#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use proto_parse::build::{Encap, MirrorFrameBuilder};
use proto_parse::defrag::{Reassembler, Reassembly};
use proto_parse::frame::{DecodeConfig, LinkType, decode, ipv4_mirror};
use proto_parse::mirror::{Mirror, erspan, gre, vxlan};

/// Ethernet / IPv4 (protocol 47) with the total length set later.
const V4_GRE: [u8; 34] = [
    0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 0, 0, 0, 0, 0, 64, 47, 0, 0,
    192, 0, 2, 1, 198, 51, 100, 9,
];

/// A mirror's layers without its frame offsets (a rebuilt datagram is raw
/// IP: 14 bytes fewer before them).
fn layers(m: Mirror, shift: usize) -> Mirror {
    Mirror { offset: m.offset - shift, inner_offset: m.inner_offset - shift, ..m }
}

/// `body` as the frame of a copy cut into outer IP fragments for a
/// collector path of a small MTU, rebuilt: the same mirror and mirrored
/// frame as the copy sent whole.
fn outer_fragments(selector: u8, body: &[u8]) {
    let (switch, collector): (IpAddr, IpAddr) = if selector & 0x10 != 0 {
        ("2001:db8::1".parse().unwrap(), "2001:db8::9".parse().unwrap())
    } else {
        ("192.0.2.1".parse().unwrap(), "198.51.100.9".parse().unwrap())
    };
    let encap = match selector % 3 {
        0 => Encap::ErspanII { session: 7, seq: 1 },
        1 => Encap::ErspanIII { session: 7, seq: 1, switch_time_ns: 1_700_000_000_123_456_789 },
        _ => Encap::Gre { key: Some(9), seq: Some(1), checksum: selector & 0x40 != 0 },
    };
    let b = MirrorFrameBuilder::new(switch, collector, encap);
    let mtu = 96 + usize::from(selector & 0x0F) * 8;
    let cfg = DecodeConfig::default();
    let whole = b.build(body);
    let sent = decode(LinkType::Ethernet, &whole, &cfg);
    let mut r = Reassembler::default();
    let mut rebuilt = None;
    let pieces = b.build_fragments(body, 0x1234, mtu);
    let cut = pieces.len() > 1;
    for piece in pieces {
        let _ = decode(LinkType::Ethernet, &piece, &cfg).error;
        if let Reassembly::Datagram(ip) = r.push(0, LinkType::Ethernet, &piece) {
            rebuilt = Some(ip.to_vec());
        }
    }
    if !cut {
        assert!(rebuilt.is_none());
        return;
    }
    let ip = rebuilt.expect("every piece given, in order");
    let got = decode(LinkType::Raw, &ip, &cfg);
    assert_eq!(got.mirror.map(|m| layers(m, 0)), sent.mirror.map(|m| layers(m, 14)));
    assert_eq!(
        got.udp.map(|u| (u.src_port, u.dst_port, u.payload)),
        sent.udp.map(|u| (u.src_port, u.dst_port, u.payload))
    );
    assert_eq!(got.error.is_some(), sent.error.is_some());
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, body)) = input.split_first() else { return };
    if selector & 0x20 != 0 {
        outer_fragments(selector, body);
    }
    let mut frame = V4_GRE.to_vec();
    match selector % 4 {
        0 => {} // GRE as given
        1 => frame.extend_from_slice(&[0x10, 0x00, 0x88, 0xBE, 0, 0, 0, 1]), // ERSPAN II
        2 => frame.extend_from_slice(&[0x10, 0x00, 0x22, 0xEB, 0, 0, 0, 1]), // ERSPAN III
        _ => {
            // UDP to 4789 (VXLAN)
            frame[23] = 17;
            frame.extend_from_slice(&[0xC0, 0x00, 0x12, 0xB5, 0, 0, 0, 0]);
        }
    }
    frame.extend_from_slice(body);
    let ip_len = (frame.len() - 14).min(usize::from(u16::MAX)) as u16;
    let len_field = if selector & 0x80 != 0 { ip_len } else { ip_len.saturating_sub(u16::from(selector & 0x1F)) };
    frame[16..18].copy_from_slice(&len_field.to_be_bytes());
    if selector % 4 == 3 {
        let udp_len = ((frame.len() - 34) as u16).to_be_bytes();
        frame[38..40].copy_from_slice(&udp_len);
    }
    let cfg = DecodeConfig { heuristic: selector & 0x40 != 0, ..DecodeConfig::default() };
    let f = decode(LinkType::Ethernet, &frame, &cfg);
    let _ = (format!("{:?}", f.error), f.metaroce().map(|p| p.psn()), f.icrc_status());
    if let Some(fast) = ipv4_mirror(LinkType::Ethernet, &frame) {
        assert_eq!(Some(fast.mirror), f.mirror);
        assert_eq!(fast.inner.as_ptr(), frame[fast.mirror.inner_offset..].as_ptr());
    }
    // The header views and their representations agree on arbitrary bytes.
    if let Ok(p) = gre::Packet::new_checked(body) {
        let repr = gre::Repr::parse(&p);
        let mut out = vec![0; repr.buffer_len()];
        repr.emit(&mut gre::Packet::new_unchecked(&mut out[..]));
        assert_eq!(gre::Repr::parse(&gre::Packet::new_checked(&out[..]).unwrap()), repr);
    }
    if let Ok(p) = erspan::Packet::new_checked(body) {
        let repr = erspan::Repr::parse(&p);
        let mut out = vec![0; repr.buffer_len()];
        repr.emit(&mut erspan::Packet::new_unchecked(&mut out[..]));
        let again = erspan::Repr::parse(&erspan::Packet::new_checked(&out[..]).unwrap());
        assert_eq!((again.session_id, again.version, again.truncated), (repr.session_id, repr.version, repr.truncated));
    }
    if let Ok(p) = vxlan::Packet::new_checked(body) {
        assert_eq!(vxlan::Repr::parse(&p).vni, p.vni());
    }
});
