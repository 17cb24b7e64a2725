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

use super::{ETH_IPV4, Ecn, LinkType, UDP_HEADER_LEN};
#[cfg(doc)]
use super::{Frame, decode};
use crate::mirror::{Granularity, Mirror, MirrorKind, SwitchTime, erspan, gre};

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
    CommonIpv4::of(link, data)?.udp()
}

/// The common frame's Ethernet and IPv4 headers, checked once for the
/// hot loops' two routes: [`CommonIpv4::udp`] is [`ipv4_udp`] and
/// [`CommonIpv4::mirror`] is [`ipv4_mirror`] on the same frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommonIpv4<'a> {
    data: &'a [u8],
    /// The IP protocol (17 UDP, 47 GRE...).
    pub protocol: u8,
}

impl<'a> CommonIpv4<'a> {
    /// Ethernet II without a tag and IPv4 with a 20-byte header, not a
    /// fragment, with the bytes of a UDP header after it (every common
    /// mirror has as many: GRE and ERSPAN or an Ethernet header); `None`
    /// for any other frame.
    #[inline(always)]
    pub fn of(link: LinkType, data: &'a [u8]) -> Option<CommonIpv4<'a>> {
        if link != LinkType::Ethernet {
            return None;
        }
        let h = data.first_chunk::<FAST_PAYLOAD>()?;
        let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
        let common = be16(12) == ETH_IPV4
            && h[FAST_IP] == 0x45 // version 4, IHL 5
            && be16(FAST_IP + 6) & 0x3FFF == 0; // neither MF nor a fragment offset
        common.then_some(CommonIpv4 {
            data,
            protocol: h[FAST_IP + 9],
        })
    }

    /// [`ipv4_udp`] of this frame.
    #[inline(always)]
    pub fn udp(self) -> Option<Ipv4Udp<'a>> {
        match self.protocol {
            IP_UDP => udp_after_ip(self.data),
            _ => None,
        }
    }

    /// [`ipv4_mirror`] of this frame.
    #[inline(always)]
    pub fn mirror(self) -> Option<Ipv4Mirror<'a>> {
        match self.protocol {
            IP_GRE => mirror_after_ip(self.data),
            _ => None,
        }
    }
}

/// IP protocols of the two routes.
pub const IP_UDP: u8 = IpNumber::UDP.0;
pub const IP_GRE: u8 = IpNumber::GRE.0;

/// UDP after the common IPv4 header ([`CommonIpv4::of`]).
#[inline(always)]
fn udp_after_ip(data: &[u8]) -> Option<Ipv4Udp<'_>> {
    let h = data.first_chunk::<FAST_PAYLOAD>()?;
    let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let ip_total = usize::from(be16(FAST_IP + 2));
    let udp_len = usize::from(be16(FAST_UDP + 4));
    if udp_len < UDP_HEADER_LEN || FAST_IP + 20 + udp_len > FAST_IP + ip_total {
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
/// (version 0, no routing) carrying an Ethernet frame: ERSPAN I, II or III
/// (type III with an Ethernet frame), or transparent Ethernet bridging.
/// `Some` only when [`decode`] reads the same [`Frame::mirror`] and
/// decodes `inner` as the mirrored frame; `None` for anything else,
/// which [`decode`] handles.
///
/// It reads the fields at their offsets in one pass rather than through
/// the [`gre`] and [`erspan`] views `decode` uses: on a switch mirror's
/// copy this route is most of what the copy costs beyond the plain frame
/// (docs/mirrors.md). The tests below hold it to `decode` on every byte
/// of mutated and cut mirrors.
#[inline(always)]
pub fn ipv4_mirror(link: LinkType, data: &[u8]) -> Option<Ipv4Mirror<'_>> {
    CommonIpv4::of(link, data)?.mirror()
}

/// GRE (and ERSPAN) after the common IPv4 header ([`CommonIpv4::of`]).
#[inline(always)]
fn mirror_after_ip(data: &[u8]) -> Option<Ipv4Mirror<'_>> {
    let h = data.first_chunk::<FAST_GRE_PAYLOAD>()?;
    let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let ip_total = usize::from(be16(FAST_IP + 2));
    let flags = be16(FAST_UDP);
    if flags & (GRE_ROUTING | GRE_VERSION) != 0 {
        return None;
    }
    // The GRE header and what follows, in the IP packet's captured bytes.
    let cap_end = (FAST_IP + ip_total).min(data.len());
    let src = Ipv4Addr::new(h[26], h[27], h[28], h[29]).into();
    let dst = Ipv4Addr::new(h[30], h[31], h[32], h[33]).into();
    let protocol = be16(FAST_UDP + 2);
    // ERSPAN II or III as switches send it, GRE with a sequence number
    // and nothing else: every field at a fixed offset.
    if flags == GRE_SEQ
        && matches!(
            protocol,
            gre::protocol::ERSPAN_II | gre::protocol::ERSPAN_III
        )
        && cap_end >= FAST_ERSPAN + erspan::field::III_LEN
    {
        let f = data.first_chunk::<{ FAST_ERSPAN + erspan::field::III_LEN }>()?;
        let be32 = |at: usize| u32::from_be_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]]);
        let word0 = be32(FAST_ERSPAN);
        let (kind, switch_time, header) = match word0 >> 28 {
            1 => (MirrorKind::ErspanII, None, erspan::field::II_LEN),
            2 => {
                let word2 = be32(FAST_ERSPAN + erspan::field::WORD2.start);
                // Frame type 0, Ethernet (2, IP, is not this route's).
                if (word2 >> 10) & 0x1F != 0 {
                    return None;
                }
                let (seconds, header) = if word2 & 1 != 0 {
                    let at = FAST_ERSPAN + erspan::field::PLATFORM.start;
                    let sub = u64::from_be_bytes(*data.get(at..cap_end)?.first_chunk()?);
                    let seconds = matches!(sub >> 58, 3 | 5 | 6 | 7).then_some(sub as u32);
                    (
                        seconds,
                        erspan::field::III_LEN + erspan::field::PLATFORM_LEN,
                    )
                } else {
                    (None, erspan::field::III_LEN)
                };
                let time = SwitchTime {
                    raw: be32(FAST_ERSPAN + erspan::field::TIMESTAMP.start),
                    granularity: Granularity::from_bits(((word2 >> 1) & 3) as u8),
                    seconds,
                };
                (MirrorKind::ErspanIII, Some(time), header)
            }
            _ => return None,
        };
        let inner_offset = FAST_ERSPAN + header;
        let mirror = Mirror {
            kind,
            src,
            dst,
            session: word0 & 0x03FF,
            gre_key: None,
            gre_seq: Some(be32(FAST_UDP + gre::field::FIXED_LEN)),
            truncated: word0 & 0x0400 != 0,
            switch_time,
            offset: FAST_UDP,
            inner_offset,
        };
        return Some(Ipv4Mirror {
            mirror,
            inner: &data[inner_offset..cap_end],
        });
    }
    let gre = data.get(FAST_UDP..cap_end)?;
    let be32 =
        |at: usize| -> Option<u32> { Some(u32::from_be_bytes(*gre.get(at..)?.first_chunk()?)) };
    let mut off = gre::field::FIXED_LEN + if flags & GRE_CHECKSUM != 0 { 4 } else { 0 };
    let gre_key = if flags & GRE_KEY != 0 {
        off += 4;
        Some(be32(off - 4)?)
    } else {
        None
    };
    let gre_seq = if flags & GRE_SEQ != 0 {
        off += 4;
        Some(be32(off - 4)?)
    } else {
        None
    };
    if gre.len() < off {
        return None;
    }
    let mut mirror = Mirror {
        kind: MirrorKind::Gre,
        src,
        dst,
        session: gre_key.unwrap_or(0),
        gre_key,
        gre_seq,
        truncated: false,
        switch_time: None,
        offset: FAST_UDP,
        inner_offset: 0,
    };
    match protocol {
        gre::protocol::TEB => {}
        gre::protocol::ERSPAN_II if gre_seq.is_none() => mirror.kind = MirrorKind::ErspanI,
        gre::protocol::ERSPAN_II | gre::protocol::ERSPAN_III => {
            // ERSPAN's word 0: version, ..., T, session id.
            let word0 = be32(off)?;
            mirror.session = word0 & 0x03FF;
            mirror.truncated = word0 & 0x0400 != 0;
            match word0 >> 28 {
                1 if gre.len() >= off + erspan::field::II_LEN => {
                    mirror.kind = MirrorKind::ErspanII;
                    off += erspan::field::II_LEN;
                }
                2 => {
                    let word2 = be32(off + erspan::field::WORD2.start)?;
                    let platform = word2 & 1 != 0;
                    let header = erspan::field::III_LEN
                        + if platform {
                            erspan::field::PLATFORM_LEN
                        } else {
                            0
                        };
                    // Frame type 0, Ethernet (2, IP, is not this route's).
                    if gre.len() < off + header || (word2 >> 10) & 0x1F != 0 {
                        return None;
                    }
                    let seconds = if platform {
                        let at = off + erspan::field::PLATFORM.start;
                        let sub = u64::from_be_bytes(*gre[at..].first_chunk()?);
                        matches!(sub >> 58, 3 | 5 | 6 | 7).then_some(sub as u32)
                    } else {
                        None
                    };
                    mirror.kind = MirrorKind::ErspanIII;
                    mirror.switch_time = Some(SwitchTime {
                        raw: be32(off + erspan::field::TIMESTAMP.start)?,
                        granularity: Granularity::from_bits(((word2 >> 1) & 3) as u8),
                        seconds,
                    });
                    off += header;
                }
                _ => return None,
            }
        }
        _ => return None,
    }
    mirror.inner_offset = FAST_UDP + off;
    Some(Ipv4Mirror {
        mirror,
        inner: &data[mirror.inner_offset..cap_end],
    })
}

/// GRE flags word bits (RFC 2784, RFC 2890): checksum, routing, key,
/// sequence number present; the version.
const GRE_CHECKSUM: u16 = 0x8000;
const GRE_ROUTING: u16 = 0x4000;
const GRE_KEY: u16 = 0x2000;
const GRE_SEQ: u16 = 0x1000;
const GRE_VERSION: u16 = 0x0007;
/// The common mirror's bytes up to the end of GRE's fixed part.
const FAST_GRE_PAYLOAD: usize = FAST_UDP + gre::field::FIXED_LEN;
/// The ERSPAN header after GRE with a sequence number.
const FAST_ERSPAN: usize = FAST_UDP + gre::field::FIXED_LEN + 4;

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

    /// `ipv4_mirror` accepts a frame only when `decode` reads the same
    /// mirror and decodes `inner` as the frame it carries.
    fn assert_mirror_agrees(data: &[u8]) -> bool {
        let Some(fast) = ipv4_mirror(LinkType::Ethernet, data) else {
            return false;
        };
        let f = decode(LinkType::Ethernet, data, &cfg());
        let m = f.mirror.expect("decode reads a mirror");
        assert_eq!(fast.mirror, m);
        let ip_end = (14 + usize::from(u16::from_be_bytes([data[16], data[17]]))).min(data.len());
        assert_eq!(fast.inner, &data[m.inner_offset..ip_end]);
        if let Some(e) = &f.error {
            assert!(
                !matches!(
                    e.layer,
                    Layer::Ethernet | Layer::Ipv4 | Layer::Gre | Layer::Erspan
                ) || e.offset >= m.inner_offset,
                "{e}"
            );
        }
        true
    }

    #[test]
    fn the_fast_mirror_read_agrees_with_decode_on_every_mutation() {
        use crate::build::{Encap, MirrorFrameBuilder};
        let inner = UdpFrameBuilder::new(
            "10.0.0.1:49153".parse().unwrap(),
            "10.0.0.2:4794".parse().unwrap(),
        )
        .build(&[0x10; 60]);
        let encaps = [
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
        ];
        let (switch, collector) = (
            "192.0.2.1".parse().unwrap(),
            "198.51.100.9".parse().unwrap(),
        );
        let mut bases: Vec<Vec<u8>> = encaps
            .iter()
            .map(|e| MirrorFrameBuilder::new(switch, collector, *e).build(&inner))
            .collect();
        let mut cut = MirrorFrameBuilder::new(switch, collector, encaps[3]);
        cut.truncate = Some(40);
        bases.push(cut.build(&inner));
        for base in &bases {
            assert!(assert_mirror_agrees(base));
        }
        let (mut accepted, mut tried) = (0, 0);
        for base in &bases {
            for at in 0..base.len().min(80) {
                for value in [
                    0x00,
                    0xFF,
                    0x0C,
                    0x10,
                    0x1C,
                    0x20,
                    0x88,
                    base[at] ^ 0x01,
                    base[at] ^ 0x80,
                ] {
                    let mut data = base.clone();
                    data[at] = value;
                    tried += 1;
                    accepted += usize::from(assert_mirror_agrees(&data));
                    // and every cut of it
                    if value == 0 {
                        for len in 0..data.len().min(90) {
                            assert_mirror_agrees(&data[..len]);
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
}
