//! The hot loops' shortcuts for the common frame: Ethernet II without a
//! tag, IPv4 with a 20-byte header and not a fragment, then UDP
//! ([`ipv4_udp`]) or GRE carrying a mirrored Ethernet frame
//! ([`ipv4_mirror`]). They read at fixed offsets what [`decode`] would
//! put in a [`Frame`], without building one (which costs more than the
//! rest of the per-packet analysis), and give up (`None`) on anything
//! else, which [`decode`] handles. Each agrees with [`decode`] on every
//! frame it accepts: tested below on every byte of mutated frames, and
//! fuzzed (`frame_decode`, `mirror_decode`).

use std::net::Ipv4Addr;

use etherparse::IpNumber;

use super::mirrored::{Inner, gre_mirror};
use super::{ETH_IPV4, Ecn, LinkType, UDP_HEADER_LEN};
#[cfg(doc)]
use super::{Frame, decode};
use crate::mirror::Mirror;

/// The outer layers of the common frame (Ethernet II without VLAN tags,
/// IPv4 without options or fragmentation, UDP), read without building a
/// [`Frame`]: what [`decode`] would put in `ip` and `udp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Udp<'a> {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ecn: Ecn,
    pub src_port: u16,
    pub dst_port: u16,
    /// The captured UDP payload (Ethernet padding excluded).
    pub payload: &'a [u8],
    /// The UDP payload's length on the wire.
    pub payload_wire_len: usize,
}

/// Offsets of the common frame read by [`ipv4_udp`].
const FAST_IP: usize = 14;
const FAST_UDP: usize = FAST_IP + 20;
const FAST_PAYLOAD: usize = FAST_UDP + UDP_HEADER_LEN;

/// Reads the outer layers of the common frame in one pass, for hot loops:
/// `Some` only when [`decode`] would read the same frame as Ethernet II
/// (no tag), IPv4 with a 20-byte header, not a fragment, UDP, all without
/// an error in these layers; `None` for anything else, which [`decode`]
/// handles. Agrees with [`decode`] on every frame it accepts (tested on
/// every byte of mutated frames below).
#[inline]
pub fn ipv4_udp(link: LinkType, data: &[u8]) -> Option<Ipv4Udp<'_>> {
    if link != LinkType::Ethernet {
        return None;
    }
    let h = data.first_chunk::<FAST_PAYLOAD>()?;
    let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let ip_total = usize::from(be16(FAST_IP + 2));
    let udp_len = usize::from(be16(FAST_UDP + 4));
    let common = be16(12) == ETH_IPV4
        && h[FAST_IP] == 0x45 // version 4, IHL 5
        && be16(FAST_IP + 6) & 0x3FFF == 0 // neither MF nor a fragment offset
        && h[FAST_IP + 9] == IpNumber::UDP.0
        && udp_len >= UDP_HEADER_LEN
        && FAST_IP + 20 + udp_len <= FAST_IP + ip_total;
    if !common {
        return None;
    }
    let udp_end = FAST_UDP + udp_len;
    Some(Ipv4Udp {
        src: Ipv4Addr::new(h[26], h[27], h[28], h[29]),
        dst: Ipv4Addr::new(h[30], h[31], h[32], h[33]),
        ecn: Ecn::from_bits(h[FAST_IP + 1]),
        src_port: be16(FAST_UDP),
        dst_port: be16(FAST_UDP + 2),
        payload: &data[FAST_PAYLOAD..udp_end.min(data.len())],
        payload_wire_len: udp_len - UDP_HEADER_LEN,
    })
}

/// A mirrored frame read by [`ipv4_mirror`]: the mirror and the
/// Ethernet frame it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Mirror<'a> {
    pub mirror: Mirror,
    /// The mirrored Ethernet frame, cut where the outer IP packet ends.
    pub inner: &'a [u8],
}

/// The outer layers of the common mirrored frame, for hot loops: Ethernet
/// II without a tag, IPv4 with a 20-byte header and not a fragment, GRE
/// carrying an Ethernet frame (ERSPAN I, II or III, or transparent
/// Ethernet bridging). `Some` only when [`decode`] reads the same
/// [`Frame::mirror`] and decodes `inner` as the mirrored frame (both read
/// GRE and ERSPAN with one function); `None` for anything else.
#[inline(always)]
pub fn ipv4_mirror(link: LinkType, data: &[u8]) -> Option<Ipv4Mirror<'_>> {
    if link != LinkType::Ethernet {
        return None;
    }
    let h = data.first_chunk::<FAST_UDP>()?;
    let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let ip_total = usize::from(be16(FAST_IP + 2));
    let common = be16(12) == ETH_IPV4
        && h[FAST_IP] == 0x45
        && be16(FAST_IP + 6) & 0x3FFF == 0
        && h[FAST_IP + 9] == IpNumber::GRE.0
        && ip_total >= 20;
    if !common {
        return None;
    }
    let ip_end = FAST_IP + ip_total;
    let cap_end = ip_end.min(data.len());
    let src = Ipv4Addr::new(h[26], h[27], h[28], h[29]);
    let dst = Ipv4Addr::new(h[30], h[31], h[32], h[33]);
    let (mirror, off, inner) =
        gre_mirror(data, FAST_UDP, cap_end, ip_end, src.into(), dst.into()).ok()?;
    (inner == Inner::Ethernet).then(|| Ipv4Mirror {
        mirror,
        inner: &data[off..cap_end],
    })
}

#[cfg(test)]
mod test {
    use std::net::IpAddr;

    use super::*;
    use crate::Layer;
    use crate::build::UdpFrameBuilder;
    use crate::frame::test::ACK_FRAME;
    use crate::frame::{DecodeConfig, decode};

    fn cfg() -> DecodeConfig {
        DecodeConfig::default()
    }

    /// `ipv4_udp` accepts a frame only when `decode` reads the same IPv4
    /// and UDP fields without an error in the outer layers.
    fn assert_fast_agrees(data: &[u8]) -> bool {
        let Some(fast) = ipv4_udp(LinkType::Ethernet, data) else {
            return false;
        };
        let f = decode(LinkType::Ethernet, data, &cfg());
        let (ip, udp) = (f.ip.expect("ip"), f.udp.expect("udp"));
        assert_eq!(f.vlans.tags(), 0);
        assert_eq!(
            (ip.src, ip.dst, ip.ecn, ip.headers.len()),
            (IpAddr::V4(fast.src), IpAddr::V4(fast.dst), fast.ecn, 20)
        );
        assert_eq!(
            (
                udp.src_port,
                udp.dst_port,
                udp.payload,
                udp.payload_wire_len
            ),
            (
                fast.src_port,
                fast.dst_port,
                fast.payload,
                fast.payload_wire_len
            )
        );
        if let Some(e) = &f.error {
            assert!(
                !matches!(
                    e.layer,
                    Layer::Ethernet | Layer::Vlan | Layer::Ipv4 | Layer::Udp
                ),
                "{e}"
            );
        }
        true
    }

    #[test]
    fn the_fast_outer_read_agrees_with_decode_on_every_mutation() {
        let metaroce = UdpFrameBuilder::new(
            "10.0.0.1:49153".parse().unwrap(),
            "10.0.0.2:4794".parse().unwrap(),
        )
        .with_ecn(3)
        .build(&[0x10; 60]);
        let tagged = UdpFrameBuilder::new(
            "10.0.0.1:49153".parse().unwrap(),
            "10.0.0.2:4794".parse().unwrap(),
        )
        .with_vlan(7)
        .build(&[0x10; 60]);
        let v6 = UdpFrameBuilder::new(
            "[fd00::1]:49153".parse().unwrap(),
            "[fd00::2]:4794".parse().unwrap(),
        )
        .build(&[0x10; 60]);
        let mut padded = ACK_FRAME.to_vec();
        padded.extend_from_slice(&[0; 6]); // Ethernet padding past the IP packet
        assert!(assert_fast_agrees(&metaroce) && assert_fast_agrees(&padded));
        assert!(!assert_fast_agrees(&tagged) && !assert_fast_agrees(&v6));
        let (mut accepted, mut tried) = (0, 0);
        for base in [&metaroce, &tagged, &v6, &padded, &ACK_FRAME.to_vec()] {
            for at in 0..base.len().min(64) {
                for value in [
                    0x00,
                    0xFF,
                    0x45,
                    0x11,
                    0x08,
                    base[at] ^ 0x01,
                    base[at] ^ 0x80,
                ] {
                    let mut data = base.clone();
                    data[at] = value;
                    tried += 1;
                    accepted += usize::from(assert_fast_agrees(&data));
                    // and every cut of it
                    if value == 0 {
                        for len in 0..data.len().min(80) {
                            assert_fast_agrees(&data[..len]);
                        }
                    }
                }
            }
        }
        assert!(
            accepted > tried / 4 && accepted < tried,
            "{accepted} of {tried}"
        );
    }

    proptest::proptest! {
        #[test]
        fn the_fast_outer_read_agrees_with_decode_on_random_frames(
            head in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            keep_common in proptest::prelude::any::<bool>(),
        ) {
            let mut data = head;
            if keep_common && data.len() >= 42 {
                // Mostly a plausible IPv4/UDP frame, so both branches are hit.
                data[12] = 0x08;
                data[13] = 0x00;
                data[14] = 0x45;
                data[23] = 0x11;
            }
            assert_fast_agrees(&data);
        }
    }
}
