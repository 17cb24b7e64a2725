//! Whole Ethernet / IP / UDP frames around a payload, for the fixture
//! generator, the reference stack's `--pcap` and tests. Built with
//! etherparse's `PacketBuilder` so checksums and lengths are right.

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;

use etherparse::{
    IpEcn, IpFragOffset, IpHeaders, IpNumber, Ipv4Extensions, Ipv4Header, Ipv6Extensions,
    Ipv6FlowLabel, Ipv6FragmentHeader, Ipv6Header, PacketBuilder, VlanId,
};

use crate::frame::Ecn;

/// How to frame a UDP payload. MAC addresses are derived from the IP
/// addresses (locally administered, `02:..`) so frames are reproducible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpFrameBuilder {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// The two ECN bits: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE.
    pub ecn: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// IPv6 flow label (20 bits); the spec says it SHOULD equal the ev.
    pub flow_label: u32,
    /// One 802.1Q tag.
    pub vlan: Option<u16>,
}

/// The two IP ECN bits of the codepoints a frame is built with
/// ([`Ecn`] states them).
pub const ECN_NOT_ECT: u8 = Ecn::NotEct.bits();
pub const ECN_ECT0: u8 = Ecn::Ect0.bits();
pub const ECN_CE: u8 = Ecn::Ce.bits();

fn mac_for(ip: IpAddr) -> [u8; 6] {
    let low = match ip {
        IpAddr::V4(v4) => v4.octets(),
        IpAddr::V6(v6) => {
            let o = v6.octets();
            [o[12], o[13], o[14], o[15]]
        }
    };
    [0x02, 0x00, low[0], low[1], low[2], low[3]]
}

fn ecn(bits: u8) -> IpEcn {
    IpEcn::try_new(bits & 0b11).expect("two bits are always a valid ECN value")
}

impl UdpFrameBuilder {
    /// ECT(0), TTL 64, no VLAN: what a MetaRoCE sender puts on the wire.
    pub fn new(src: SocketAddr, dst: SocketAddr) -> Self {
        UdpFrameBuilder {
            src,
            dst,
            ecn: ECN_ECT0,
            ttl: 64,
            flow_label: 0,
            vlan: None,
        }
    }

    #[must_use]
    pub fn with_ecn(mut self, ecn_bits: u8) -> Self {
        self.ecn = ecn_bits & 0b11;
        self
    }

    #[must_use]
    pub fn with_vlan(mut self, vlan: u16) -> Self {
        self.vlan = Some(vlan);
        self
    }

    #[must_use]
    pub fn with_flow_label(mut self, flow_label: u32) -> Self {
        self.flow_label = flow_label & 0xF_FFFF;
        self
    }

    /// The frame, Ethernet header first. Panics when source and destination
    /// are of different address families or the payload does not fit in
    /// one IP packet (emitting is trusted).
    pub fn build(&self, payload: &[u8]) -> Vec<u8> {
        let ip = match (self.src.ip(), self.dst.ip()) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let mut header =
                    Ipv4Header::new(0, self.ttl, IpNumber::UDP, src.octets(), dst.octets())
                        .expect("a zero payload length fits");
                header.ecn = ecn(self.ecn);
                IpHeaders::Ipv4(header, Ipv4Extensions::default())
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => IpHeaders::Ipv6(
                Ipv6Header {
                    traffic_class: self.ecn & 0b11,
                    flow_label: Ipv6FlowLabel::try_new(self.flow_label & 0xF_FFFF)
                        .expect("masked to 20 bits"),
                    payload_length: 0,
                    next_header: IpNumber::UDP,
                    hop_limit: self.ttl,
                    source: src.octets(),
                    destination: dst.octets(),
                },
                Ipv6Extensions::default(),
            ),
            _ => panic!("source and destination must be of one address family"),
        };
        let eth = PacketBuilder::ethernet2(mac_for(self.src.ip()), mac_for(self.dst.ip()));
        let builder = match self.vlan {
            Some(vlan) => eth
                .single_vlan(VlanId::try_new(vlan & 0x0FFF).expect("masked to 12 bits"))
                .ip(ip),
            None => eth.ip(ip),
        }
        .udp(self.src.port(), self.dst.port());
        let mut frame = Vec::with_capacity(builder.size(payload.len()));
        builder
            .write(&mut frame, payload)
            .expect("a payload that fits one IP packet");
        frame
    }
}

impl UdpFrameBuilder {
    /// Where the IP header starts in a frame of this builder.
    fn ip_start(&self) -> usize {
        14 + if self.vlan.is_some() { 4 } else { 0 }
    }

    /// One IP fragment of the datagram [`UdpFrameBuilder::build`] sends for
    /// `payload`: bytes `range` of its IP payload (the UDP header, checksum
    /// included, then `payload`), with identification `id` and the
    /// more-fragments flag `more`. IPv6 fragments carry a fragment header
    /// (RFC 8200 4.5). Panics when `range.start` is not a multiple of 8 or
    /// lies beyond the datagram (emitting is trusted).
    pub fn build_fragment(
        &self,
        payload: &[u8],
        id: u32,
        range: Range<usize>,
        more: bool,
    ) -> Vec<u8> {
        ip_fragment(&self.build(payload), self.ip_start(), id, range, more)
    }

    /// The datagram for `payload` cut into fragments of at most `max_piece`
    /// bytes of IP payload (rounded down to 8), in order: what a sender's IP
    /// layer puts on a link whose MTU is too small for it.
    pub fn build_fragments(&self, payload: &[u8], id: u32, max_piece: usize) -> Vec<Vec<u8>> {
        ip_fragments(&self.build(payload), self.ip_start(), id, max_piece)
    }
}

/// One IP fragment of the frame `whole` (link header, then an IPv4 or
/// IPv6 header without extension headers at `ip_start`, then the IP
/// payload): bytes `range` of its IP payload under the same link header,
/// with identification `id` and the more-fragments flag `more`; IPv6 gets
/// a fragment header naming the original next header. Panics when
/// `range.start` is not a multiple of 8 or lies beyond the datagram
/// (emitting is trusted).
fn ip_fragment(whole: &[u8], ip_start: usize, id: u32, range: Range<usize>, more: bool) -> Vec<u8> {
    assert!(
        range.start.is_multiple_of(8),
        "fragment offsets are in 8-byte units"
    );
    let offset = IpFragOffset::try_new((range.start / 8) as u16).expect("offset fits 13 bits");
    let mut frame = whole[..ip_start].to_vec();
    let piece = if whole[ip_start] >> 4 == 4 {
        let (mut header, rest) = Ipv4Header::from_slice(&whole[ip_start..]).expect("built above");
        let piece = &rest[range];
        header.identification = id as u16;
        header.dont_fragment = false;
        header.more_fragments = more;
        header.fragment_offset = offset;
        header
            .set_payload_len(piece.len())
            .expect("a piece of one datagram fits");
        header.write(&mut frame).expect("writing to a Vec");
        piece
    } else {
        let (mut header, rest) = Ipv6Header::from_slice(&whole[ip_start..]).expect("built above");
        let piece = &rest[range];
        let next = header.next_header;
        header.next_header = IpNumber::IPV6_FRAGMENTATION_HEADER;
        header.payload_length = (Ipv6FragmentHeader::LEN + piece.len()) as u16;
        header.write(&mut frame).expect("writing to a Vec");
        Ipv6FragmentHeader::new(next, offset, more, id)
            .write(&mut frame)
            .expect("writing to a Vec");
        piece
    };
    frame.extend_from_slice(piece);
    frame
}

/// The frame `whole` (as for [`ip_fragment`]) cut into fragments of at
/// most `max_piece` bytes of IP payload (rounded down to 8), in order.
fn ip_fragments(whole: &[u8], ip_start: usize, id: u32, max_piece: usize) -> Vec<Vec<u8>> {
    let piece = (max_piece / 8 * 8).max(8);
    let header_len = if whole[ip_start] >> 4 == 4 {
        usize::from(whole[ip_start] & 0x0F) * 4
    } else {
        Ipv6Header::LEN
    };
    let total = whole.len() - ip_start - header_len;
    (0..total)
        .step_by(piece)
        .map(|start| {
            let end = (start + piece).min(total);
            ip_fragment(whole, ip_start, id, start..end, end < total)
        })
        .collect()
}

/// How a switch wraps a mirrored frame ([`MirrorFrameBuilder`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encap {
    /// GRE transparent Ethernet bridging (0x6558), with an optional key
    /// and sequence number and a checksum when asked.
    Gre {
        key: Option<u32>,
        seq: Option<u32>,
        checksum: bool,
    },
    /// ERSPAN type II (GRE 0x88BE with a sequence number).
    ErspanII { session: u16, seq: u32 },
    /// ERSPAN type III (GRE 0x22EB) with the switch's IEEE 1588 time.
    ErspanIII {
        session: u16,
        seq: u32,
        switch_time_ns: u64,
    },
    /// VXLAN on UDP 4789.
    Vxlan { vni: u32 },
}

/// A mirrored copy of a frame as a switch sends it to a collector:
/// Ethernet / IPv4 or IPv6 (switch to collector) / GRE (and ERSPAN) or
/// UDP + VXLAN / the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorFrameBuilder {
    pub switch: IpAddr,
    pub collector: IpAddr,
    pub encap: Encap,
    /// The switch cut the copy to this many bytes of the frame (ERSPAN
    /// sets its T bit).
    pub truncate: Option<usize>,
}

impl MirrorFrameBuilder {
    pub fn new(switch: IpAddr, collector: IpAddr, encap: Encap) -> Self {
        MirrorFrameBuilder {
            switch,
            collector,
            encap,
            truncate: None,
        }
    }

    /// The encapsulation headers and the (possibly cut) frame: what
    /// follows the outer IP header (or the UDP header, for VXLAN).
    pub fn encapsulate(&self, frame: &[u8]) -> Vec<u8> {
        use crate::mirror::{erspan, gre, vxlan};
        let cut = self.truncate.is_some_and(|n| n < frame.len());
        let frame = &frame[..self.truncate.unwrap_or(frame.len()).min(frame.len())];
        let (gre_repr, erspan_repr) = match self.encap {
            Encap::Gre { key, seq, checksum } => (
                gre::Repr {
                    protocol: gre::protocol::TEB,
                    checksum,
                    key,
                    seq,
                },
                None,
            ),
            Encap::ErspanII { session, seq } => (
                gre::Repr {
                    protocol: gre::protocol::ERSPAN_II,
                    checksum: false,
                    key: None,
                    seq: Some(seq),
                },
                Some(erspan::Repr::type_ii(session)),
            ),
            Encap::ErspanIII {
                session,
                seq,
                switch_time_ns,
            } => (
                gre::Repr {
                    protocol: gre::protocol::ERSPAN_III,
                    checksum: false,
                    key: None,
                    seq: Some(seq),
                },
                Some(erspan::Repr::type_iii_ptp(session, switch_time_ns)),
            ),
            Encap::Vxlan { vni } => {
                let repr = vxlan::Repr { vni };
                let mut out = vec![0; repr.buffer_len()];
                repr.emit(&mut vxlan::Packet::new_unchecked(&mut out[..]));
                out.extend_from_slice(frame);
                return out;
            }
        };
        let erspan_repr = erspan_repr.map(|r| erspan::Repr {
            truncated: cut,
            ..r
        });
        let erspan_len = erspan_repr.map_or(0, |r| r.buffer_len());
        let mut out = vec![0; gre_repr.buffer_len() + erspan_len];
        let (gre_bytes, erspan_bytes) = out.split_at_mut(gre_repr.buffer_len());
        gre_repr.emit(&mut gre::Packet::new_unchecked(&mut gre_bytes[..]));
        if let Some(r) = erspan_repr {
            r.emit(&mut erspan::Packet::new_unchecked(erspan_bytes));
        }
        out.extend_from_slice(frame);
        gre::Packet::new_unchecked(&mut out[..]).fill_checksum();
        out
    }

    /// The whole mirrored frame as it crosses a collector path of `mtu`
    /// bytes (IP packets, outer header included): one frame when it fits,
    /// else the outer IP datagram cut into fragments of identification
    /// `id`, in order (IPv6: with a fragment header, as the switch's IP
    /// layer sends them).
    pub fn build_fragments(&self, frame: &[u8], id: u32, mtu: usize) -> Vec<Vec<u8>> {
        let whole = self.build(frame);
        const ETHERNET: usize = 14;
        if whole.len() - ETHERNET <= mtu {
            return vec![whole];
        }
        let max_piece = match self.switch {
            IpAddr::V4(_) => mtu - Ipv4Header::MIN_LEN,
            IpAddr::V6(_) => mtu - Ipv6Header::LEN - Ipv6FragmentHeader::LEN,
        };
        ip_fragments(&whole, ETHERNET, id, max_piece)
    }

    /// The whole mirrored frame. Panics when switch and collector are of
    /// different address families (emitting is trusted).
    pub fn build(&self, frame: &[u8]) -> Vec<u8> {
        let inner = self.encapsulate(frame);
        if let Encap::Vxlan { .. } = self.encap {
            let udp = UdpFrameBuilder::new(
                SocketAddr::new(self.switch, 49152),
                SocketAddr::new(self.collector, crate::mirror::vxlan::UDP_PORT),
            )
            .with_ecn(ECN_NOT_ECT);
            return udp.build(&inner);
        }
        let eth = PacketBuilder::ethernet2(mac_for(self.switch), mac_for(self.collector));
        let builder = match (self.switch, self.collector) {
            (IpAddr::V4(s), IpAddr::V4(c)) => eth.ipv4(s.octets(), c.octets(), 64),
            (IpAddr::V6(s), IpAddr::V6(c)) => eth.ipv6(s.octets(), c.octets(), 64),
            _ => panic!("switch and collector must be of one address family"),
        };
        let mut out = Vec::with_capacity(14 + 40 + inner.len());
        builder
            .write(&mut out, IpNumber::GRE, &inner)
            .expect("a copy that fits one IP packet");
        out
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn ipv4_frame_carries_ecn_ports_and_payload() {
        let frame = UdpFrameBuilder::new(
            "10.0.0.1:49153".parse().unwrap(),
            "10.0.0.2:4794".parse().unwrap(),
        )
        .with_ecn(ECN_CE)
        .build(&[1, 2, 3, 4]);
        assert_eq!(frame.len(), 14 + 20 + 8 + 4);
        assert_eq!(&frame[12..14], &[0x08, 0x00]);
        assert_eq!(frame[15] & 0b11, ECN_CE);
        assert_eq!(&frame[34..38], &[0xC0, 0x01, 0x12, 0xBA]);
        assert_eq!(&frame[42..], &[1, 2, 3, 4]);
    }

    #[test]
    fn ipv6_frame_with_vlan_and_flow_label() {
        let frame = UdpFrameBuilder::new(
            "[fd00::1]:1".parse().unwrap(),
            "[fd00::2]:4794".parse().unwrap(),
        )
        .with_vlan(7)
        .with_flow_label(0x1234)
        .build(&[9]);
        assert_eq!(&frame[12..14], &[0x81, 0x00]);
        assert_eq!(&frame[16..18], &[0x86, 0xDD]);
        let flow = u32::from_be_bytes([0, frame[19] & 0x0F, frame[20], frame[21]]);
        assert_eq!(flow, 0x1234);
        assert_eq!(frame.len(), 18 + 40 + 8 + 1);
    }
}
