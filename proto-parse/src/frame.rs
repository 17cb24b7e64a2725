//! Decoding of one captured frame: link layer, 802.1Q/802.1ad tags, IPv4
//! (options) or IPv6 (extension headers), UDP, then MetaRoCE or RoCEv2.
//!
//! [`decode`] is lax: it never panics and never fails as a whole; it returns
//! every layer it could decode plus, in [`Frame::error`], where (as a frame
//! offset) and why it stopped. It does not allocate.
//!
//! Ethernet, VLAN, IPv4, IPv6, IPv6 extension headers and UDP are read with
//! `etherparse`; Linux cooked headers and BSD loopback in [`crate::link`].
//!
//! Mirrored frames ([`crate::mirror`]: GRE, ERSPAN I/II/III, VXLAN on UDP
//! 4789) are decapsulated once: the frame they carry goes through the same
//! layers, and [`Frame::mirror`] keeps the outer ones. An encapsulation
//! inside a mirrored frame is not decoded (an `Unsupported` error).
//!
//! Protocol choice on UDP: destination port `rocev2_port` (4791) -> RoCEv2
//! (keyed on the destination port only: one real capture sends from source
//! port 69); destination or source port `metaroce_port` (4794) -> MetaRoCE;
//! otherwise, with `heuristic`, [`crate::metaroce::looks_like`] -> MetaRoCE;
//! else [`Transport::Other`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{
    Ethernet2HeaderSlice, IpNumber, Ipv4HeaderSlice, Ipv6ExtensionsSlice, Ipv6HeaderSlice,
    SingleVlanHeaderSlice, UdpHeaderSlice,
};

pub use crate::link::LinkType;
use crate::link::{self, Next};
use crate::mirror::{Mirror, MirrorKind, erspan, gre, vxlan};
use crate::rocev2::{self, IcrcStatus, check_len};
use crate::{Error, ErrorKind, Layer, LenSource, metaroce};

/// How to decode frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodeConfig {
    /// UDP port (source or destination) of MetaRoCE. Default 4794.
    pub metaroce_port: u16,
    /// UDP destination port of RoCEv2. Default 4791.
    pub rocev2_port: u16,
    /// Also try MetaRoCE on other UDP ports ([`metaroce::looks_like`]).
    /// Default false.
    pub heuristic: bool,
    /// Verify the RoCEv2 ICRC while decoding (else
    /// [`IcrcStatus::NotChecked`]; [`RoceV2::verify_icrc`] still works).
    /// Default true. It costs a CRC-32 over the whole IP packet, more than
    /// the rest of `decode` together (`cargo bench -p proto-parse --bench
    /// header_parse`), so bulk analysis may turn it off and call
    /// [`RoceV2::verify_icrc`] only where needed.
    pub verify_crc: bool,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        DecodeConfig {
            metaroce_port: 4794,
            rocev2_port: rocev2::UDP_PORT,
            heuristic: false,
            verify_crc: true,
        }
    }
}

/// What a UDP datagram's ports say it carries (the rule in the module
/// documentation, before any heuristic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortChoice {
    RoceV2,
    MetaRoce,
    /// Neither port is configured: the heuristic, when on, decides.
    Unknown,
}

impl DecodeConfig {
    /// The protocol of a UDP datagram by its ports.
    #[inline]
    pub fn port_choice(&self, src_port: u16, dst_port: u16) -> PortChoice {
        if dst_port == self.rocev2_port {
            PortChoice::RoceV2
        } else if dst_port == self.metaroce_port || src_port == self.metaroce_port {
            PortChoice::MetaRoce
        } else {
            PortChoice::Unknown
        }
    }
}

/// The two ECN bits of the IP header (RFC 3168).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// 0b00
    #[default]
    NotEct,
    /// 0b01
    Ect1,
    /// 0b10
    Ect0,
    /// 0b11: congestion experienced.
    Ce,
}

impl Ecn {
    /// From the low two bits of the TOS / traffic class byte.
    #[inline]
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 0x3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    #[inline]
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }
}

/// Up to three VLAN ids, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Vlans {
    ids: [u16; Vlans::CAP],
    len: u8,
}

impl Vlans {
    /// Tags kept; more are skipped (and counted in [`Vlans::tags`]).
    pub const CAP: usize = 3;

    fn push(&mut self, id: u16) {
        if usize::from(self.len) < Self::CAP {
            self.ids[usize::from(self.len)] = id;
        }
        self.len = self.len.saturating_add(1);
    }

    /// The VLAN ids, outermost first (at most [`Vlans::CAP`]).
    pub fn ids(&self) -> &[u16] {
        &self.ids[..usize::from(self.len).min(Self::CAP)]
    }
    /// Number of tags in the frame (may exceed [`Vlans::CAP`]).
    pub fn tags(&self) -> usize {
        usize::from(self.len)
    }
    pub fn outer(&self) -> Option<u16> {
        self.ids().first().copied()
    }
    pub fn inner(&self) -> Option<u16> {
        self.ids().last().copied()
    }
}

/// The IP layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub ecn: Ecn,
    /// DSCP (six bits).
    pub dscp: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// IPv6 flow label (20 bits); `None` for IPv4.
    pub flow_label: Option<u32>,
    /// The transport protocol number (after IPv6 extension headers).
    pub protocol: u8,
    /// Frame offset of the IP header.
    pub offset: usize,
    /// The IP header with IPv4 options or IPv6 extension headers (all bytes
    /// up to the transport header).
    pub headers: &'a [u8],
    /// The IP packet length on the wire (IPv4 total length, or 40 + IPv6
    /// payload length).
    pub wire_len: usize,
}

impl Ip<'_> {
    pub fn is_ipv6(&self) -> bool {
        self.src.is_ipv6()
    }
}

/// The UDP layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    /// The UDP length field (header included).
    pub length: u16,
    pub checksum: u16,
    /// Frame offset of the UDP header.
    pub offset: usize,
    /// The 8 header bytes.
    pub header: &'a [u8],
    /// The captured payload bytes (fewer than `payload_wire_len` when a
    /// snaplen cut the frame).
    pub payload: &'a [u8],
    /// Frame offset of the payload.
    pub payload_offset: usize,
    /// Payload length on the wire (UDP length - 8).
    pub payload_wire_len: usize,
}

impl Udp<'_> {
    /// True when the capture holds the whole UDP payload.
    pub fn is_complete(&self) -> bool {
        self.payload.len() >= self.payload_wire_len
    }
}

/// A RoCEv2 packet of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceV2<'a> {
    /// The packet, when BTH and extension headers were captured (offsets of
    /// its own errors are from the UDP payload; [`Frame::error`] has them as
    /// frame offsets).
    pub packet: Option<rocev2::Packet<&'a [u8]>>,
    /// The ICRC check done at decode time (`NotChecked` when
    /// `verify_crc` was off).
    pub icrc: IcrcStatus,
    /// IP headers and UDP header, kept for [`RoceV2::verify_icrc`].
    pub ip_headers: &'a [u8],
    pub udp_header: &'a [u8],
}

impl RoceV2<'_> {
    /// Verifies the ICRC now (whatever `verify_crc` said).
    pub fn verify_icrc(&self) -> IcrcStatus {
        match &self.packet {
            Some(p) => p.verify_icrc(self.ip_headers, self.udp_header),
            None => IcrcStatus::NotPresent,
        }
    }
}

/// What the UDP payload was decoded as.
#[derive(Debug, Clone)]
pub enum Transport<'a> {
    /// MetaRoCE, as [`metaroce::parse_lax`] decoded it. Its `stop` has
    /// offsets from the UDP payload; [`Frame::error`] has the same error
    /// at frame offsets.
    MetaRoce(metaroce::Lax<'a>),
    RoceV2(RoceV2<'a>),
    /// Not UDP, or UDP of another protocol, or nothing decoded.
    Other,
}

/// One decoded frame.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    pub link: LinkType,
    /// The captured bytes.
    pub data: &'a [u8],
    /// The EtherType (or SLL protocol) after VLAN tags; `None` for raw IP
    /// link types or when the link header did not decode.
    pub ether_type: Option<u16>,
    pub vlans: Vlans,
    pub ip: Option<Ip<'a>>,
    pub udp: Option<Udp<'a>>,
    pub payload: Transport<'a>,
    /// The outer layers of a mirrored frame (GRE, ERSPAN, VXLAN): then
    /// `ether_type`, `vlans`, `ip`, `udp` and `payload` describe the frame
    /// it carries.
    pub mirror: Option<Mirror>,
    /// Where and why decoding stopped (frame offset); `None` if every layer
    /// present decoded in full.
    pub error: Option<Error>,
}

impl<'a> Frame<'a> {
    fn empty(link: LinkType, data: &'a [u8]) -> Frame<'a> {
        Frame {
            link,
            data,
            ether_type: None,
            vlans: Vlans::default(),
            ip: None,
            udp: None,
            payload: Transport::Other,
            mirror: None,
            error: None,
        }
    }

    /// The RoCEv2 packet, if this frame carries one.
    pub fn rocev2(&self) -> Option<&RoceV2<'a>> {
        match &self.payload {
            Transport::RoceV2(r) => Some(r),
            _ => None,
        }
    }

    /// The MetaRoCE packet, if this frame carries one that decoded.
    pub fn metaroce(&self) -> Option<&metaroce::Packet<&'a [u8]>> {
        match &self.payload {
            Transport::MetaRoce(lax) => lax.packet.as_ref(),
            _ => None,
        }
    }

    /// The ICRC status decided at decode time; `None` if not RoCEv2.
    pub fn icrc_status(&self) -> Option<IcrcStatus> {
        self.rocev2().map(|r| r.icrc)
    }
}

/// Decodes one captured frame of the given link type. Never panics and
/// never allocates.
#[inline]
pub fn decode<'a>(link: LinkType, data: &'a [u8], cfg: &DecodeConfig) -> Frame<'a> {
    let mut frame = Frame::empty(link, data);
    if let Err(err) = decode_into(&mut frame, link, data, cfg) {
        frame.error = Some(err);
    }
    frame
}

/// Decodes one captured frame and hands it to `f` by reference: the same
/// as [`decode`] without moving the (large) `Frame` out, for hot loops that
/// only read it.
#[inline]
pub fn decode_with<'a, R>(
    link: LinkType,
    data: &'a [u8],
    cfg: &DecodeConfig,
    f: impl FnOnce(&Frame<'a>) -> R,
) -> R {
    let mut frame = Frame::empty(link, data);
    if let Err(err) = decode_into(&mut frame, link, data, cfg) {
        frame.error = Some(err);
    }
    f(&frame)
}

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

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_VLAN: u16 = 0x8100;
const ETH_QINQ: u16 = 0x88a8;
const ETH_QINQ_OLD: u16 = 0x9100;
const UDP_HEADER_LEN: usize = 8;

fn decode_into<'a>(
    frame: &mut Frame<'a>,
    link: LinkType,
    data: &'a [u8],
    cfg: &DecodeConfig,
) -> Result<(), Error> {
    let (off, next) = match link {
        LinkType::Ethernet => {
            let eth = Ethernet2HeaderSlice::from_slice(data).map_err(|e| {
                Error::truncated(
                    Layer::Ethernet,
                    data.len(),
                    e.required_len,
                    data.len(),
                    LenSource::Captured,
                )
            })?;
            (eth.slice().len(), Next::EtherType(eth.ether_type().0))
        }
        LinkType::LinuxSll => link::sll(data)?,
        LinkType::LinuxSll2 => link::sll2(data)?,
        LinkType::Null => link::null(data, false)?,
        LinkType::Loop => link::null(data, true)?,
        LinkType::Raw | LinkType::RawDlt12 | LinkType::RawDlt14 => (0, Next::IpAny),
        LinkType::Ipv4 => (0, Next::EtherType(ETH_IPV4)),
        LinkType::Ipv6 => (0, Next::EtherType(ETH_IPV6)),
        LinkType::Erf => match link::erf(data)? {
            (off, Some(next)) => (off, next),
            (off, None) => {
                let rest = &data[off..];
                let eth = Ethernet2HeaderSlice::from_slice(rest).map_err(|e| {
                    Error::truncated(
                        Layer::Ethernet,
                        data.len(),
                        e.required_len,
                        rest.len(),
                        LenSource::Captured,
                    )
                })?;
                (off + eth.slice().len(), Next::EtherType(eth.ether_type().0))
            }
        },
        LinkType::Unknown(_) => return Err(link::unsupported(link)),
    };
    let link_ether = matches!(
        link,
        LinkType::Ethernet | LinkType::LinuxSll | LinkType::LinuxSll2 | LinkType::Erf
    );
    network(frame, data, off, next, link_ether, cfg)
}

/// The layers after a link header at `off`: VLAN tags (when the link is
/// Ethernet-like), IP, then UDP (MetaRoCE, RoCEv2, VXLAN) or GRE. A
/// mirror encapsulation comes back here for the frame it carries.
fn network<'a>(
    frame: &mut Frame<'a>,
    data: &'a [u8],
    mut off: usize,
    next: Next,
    link_ether: bool,
    cfg: &DecodeConfig,
) -> Result<(), Error> {
    let is_v6 = match next {
        Next::NotIp(_) => return Ok(()),
        Next::IpAny => match data.get(off) {
            Some(b) if b >> 4 == 4 => false,
            Some(b) if b >> 4 == 6 => true,
            Some(b) => {
                return Err(Error::bad_value(
                    Layer::Ipv4,
                    off,
                    "version",
                    u64::from(b >> 4),
                    "4 or 6",
                ));
            }
            None => {
                return Err(Error::truncated(
                    Layer::Ipv4,
                    off,
                    20,
                    0,
                    LenSource::Captured,
                ));
            }
        },
        Next::EtherType(mut ether_type) => {
            while link_ether && matches!(ether_type, ETH_VLAN | ETH_QINQ | ETH_QINQ_OLD) {
                let rest = &data[off..];
                let tag = SingleVlanHeaderSlice::from_slice(rest).map_err(|e| {
                    Error::truncated(
                        Layer::Vlan,
                        off + rest.len(),
                        e.required_len,
                        rest.len(),
                        LenSource::Captured,
                    )
                })?;
                frame.vlans.push(tag.vlan_identifier().value());
                ether_type = tag.ether_type().0;
                off += tag.slice().len();
            }
            frame.ether_type = Some(ether_type);
            match ether_type {
                ETH_IPV4 => false,
                ETH_IPV6 => true,
                _ => return Ok(()),
            }
        }
    };

    // IP layer: `ip_end` is where the IP packet ends on the wire (from its
    // length field), `cap_end` where its captured bytes end.
    let ip_off = off;
    let (ip_end, ip, stop) = if is_v6 {
        ipv6(data, ip_off)?
    } else {
        ipv4(data, ip_off)?
    };
    frame.ip = Some(ip);
    if let Some(err) = stop {
        // the addresses are known, the transport header is not usable
        return Err(err);
    }
    let cap_end = ip_end.min(data.len());
    off = ip_off + ip.headers.len();
    if ip.protocol == IpNumber::GRE.0 {
        return gre(frame, data, off, cap_end, ip_end, &ip, cfg);
    }
    if ip.protocol != IpNumber::UDP.0 {
        return Ok(());
    }

    // UDP
    let udp_off = off;
    check_len(
        Layer::Udp,
        udp_off,
        udp_off + UDP_HEADER_LEN,
        cap_end,
        ip_end,
    )?;
    let hdr = UdpHeaderSlice::from_slice(&data[udp_off..cap_end]).map_err(|e| {
        Error::truncated(
            Layer::Udp,
            cap_end,
            e.required_len,
            cap_end - udp_off,
            LenSource::Captured,
        )
    })?;
    let length = hdr.length();
    if usize::from(length) < UDP_HEADER_LEN {
        return Err(Error::bad_value(
            Layer::Udp,
            udp_off + 4,
            "length",
            u64::from(length),
            ">= 8",
        ));
    }
    let udp_end = udp_off + usize::from(length);
    if udp_end > ip_end {
        return Err(Error::truncated(
            Layer::Udp,
            ip_end,
            usize::from(length),
            ip_end - udp_off,
            LenSource::Header,
        ));
    }
    let payload_offset = udp_off + UDP_HEADER_LEN;
    let payload = &data[payload_offset..udp_end.min(data.len())];
    let payload_wire_len = usize::from(length) - UDP_HEADER_LEN;
    let udp = Udp {
        src_port: hdr.source_port(),
        dst_port: hdr.destination_port(),
        length,
        checksum: hdr.checksum(),
        offset: udp_off,
        header: hdr.slice(),
        payload,
        payload_offset,
        payload_wire_len,
    };
    frame.udp = Some(udp);

    let choice = cfg.port_choice(udp.src_port, udp.dst_port);
    if choice == PortChoice::RoceV2 {
        let lax = rocev2::parse_lax(payload, payload_wire_len);
        let icrc = match (&lax.packet, cfg.verify_crc) {
            (Some(p), true) => p.verify_icrc(ip.headers, udp.header),
            (None, true) => IcrcStatus::NotPresent,
            (_, false) => IcrcStatus::NotChecked,
        };
        frame.payload = Transport::RoceV2(RoceV2 {
            packet: lax.packet,
            icrc,
            ip_headers: ip.headers,
            udp_header: udp.header,
        });
        return lax
            .stop
            .map_or(Ok(()), |e| Err(e.at_offset(payload_offset)));
    }
    if choice == PortChoice::MetaRoce || (cfg.heuristic && metaroce::looks_like(payload)) {
        let lax = metaroce::parse_lax(payload, payload_wire_len);
        let stop = lax.stop.clone();
        frame.payload = Transport::MetaRoce(lax);
        return stop.map_or(Ok(()), |e| Err(e.at_offset(payload_offset)));
    }
    if udp.dst_port == vxlan::UDP_PORT && frame.mirror.is_none() {
        return vxlan_mirror(frame, data, &ip, &udp, udp_end, cfg);
    }
    Ok(())
}

/// What a mirror encapsulation carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inner {
    Ethernet,
    /// An IP packet (GRE 0x0800 / 0x86DD, ERSPAN III frame type 2).
    Ip(Next),
}

/// An encapsulation error at `start` (layer-relative offsets shifted): a
/// length cut by the capture stays a snaplen cut; a header longer than
/// the enclosing packet's length field is a malformation.
fn encap_err(err: Error, start: usize, cut_by_capture: bool) -> Error {
    let mut err = err.at_offset(start);
    if let ErrorKind::Truncated { source, .. } = &mut err.kind
        && !cut_by_capture
    {
        *source = LenSource::Header;
    }
    err
}

/// GRE at `off` (and ERSPAN after it): the mirror it describes and what
/// it carries, at which frame offset. Shared by [`decode`] and
/// [`ipv4_mirror`], so both read a mirror alike; always inlined, as the
/// latter's errors are dropped (`None`) and most of the mirror's fields
/// unused by the hot loops.
#[inline(always)]
fn gre_mirror(
    data: &[u8],
    off: usize,
    cap_end: usize,
    ip_end: usize,
    src: IpAddr,
    dst: IpAddr,
) -> Result<(Mirror, usize, Inner), Error> {
    let cut = cap_end < ip_end;
    let packet =
        gre::Packet::new_checked(&data[off..cap_end]).map_err(|e| encap_err(e, off, cut))?;
    let mut mirror = Mirror {
        kind: MirrorKind::Gre,
        src,
        dst,
        session: packet.key().unwrap_or(0),
        gre_key: packet.key(),
        gre_seq: packet.seq(),
        truncated: false,
        switch_time: None,
        offset: off,
        inner_offset: 0,
    };
    let mut inner_off = off + packet.header_len();
    let inner = match packet.protocol() {
        gre::protocol::TEB => Inner::Ethernet,
        gre::protocol::IPV4 => Inner::Ip(Next::EtherType(ETH_IPV4)),
        gre::protocol::IPV6 => Inner::Ip(Next::EtherType(ETH_IPV6)),
        gre::protocol::ERSPAN_II if !packet.seq_present() => {
            mirror.kind = MirrorKind::ErspanI;
            Inner::Ethernet
        }
        gre::protocol::ERSPAN_II | gre::protocol::ERSPAN_III => {
            let e = erspan::Packet::new_checked(&data[inner_off..cap_end])
                .map_err(|e| encap_err(e, inner_off, cut))?;
            mirror.session = u32::from(e.session_id());
            mirror.truncated = e.truncated();
            let (frame_type, header_len) = match e.version() {
                erspan::Version::II => {
                    mirror.kind = MirrorKind::ErspanII;
                    (erspan::frame_type::ETHERNET, erspan::field::II_LEN)
                }
                erspan::Version::III => {
                    mirror.kind = MirrorKind::ErspanIII;
                    mirror.switch_time = e.switch_time();
                    (e.frame_type(), e.header_len())
                }
            };
            let inner = match frame_type {
                erspan::frame_type::ETHERNET => Inner::Ethernet,
                erspan::frame_type::IP => Inner::Ip(Next::IpAny),
                other => {
                    return Err(Error {
                        layer: Layer::Erspan,
                        offset: inner_off + 10,
                        kind: ErrorKind::Unsupported {
                            what: "ERSPAN frame type",
                            value: u64::from(other),
                        },
                    });
                }
            };
            inner_off += header_len;
            inner
        }
        other => {
            return Err(Error {
                layer: Layer::Gre,
                offset: off + gre::field::PROTOCOL.start,
                kind: ErrorKind::Unsupported {
                    what: "GRE protocol type",
                    value: u64::from(other),
                },
            });
        }
    };
    mirror.inner_offset = inner_off;
    Ok((mirror, inner_off, inner))
}

/// The error for an encapsulation inside a mirrored frame.
fn recursion(layer: Layer, offset: usize) -> Error {
    Error {
        layer,
        offset,
        kind: ErrorKind::Unsupported {
            what: "encapsulation inside a mirrored frame (recursion), depth",
            value: 2,
        },
    }
}

/// GRE in the IP packet `ip`, whose header ends at `off`.
fn gre<'a>(
    frame: &mut Frame<'a>,
    data: &'a [u8],
    off: usize,
    cap_end: usize,
    ip_end: usize,
    ip: &Ip<'a>,
    cfg: &DecodeConfig,
) -> Result<(), Error> {
    if frame.mirror.is_some() {
        return Err(recursion(Layer::Gre, off));
    }
    let (mirror, inner_off, inner) = gre_mirror(data, off, cap_end, ip_end, ip.src, ip.dst)?;
    mirror_inner(frame, &data[..cap_end], mirror, inner_off, inner, cfg)
}

/// VXLAN in the UDP datagram `udp` (ending at frame offset `udp_end`); a
/// datagram on port 4789 without VXLAN's I flag is left as other UDP.
fn vxlan_mirror<'a>(
    frame: &mut Frame<'a>,
    data: &'a [u8],
    ip: &Ip<'a>,
    udp: &Udp<'a>,
    udp_end: usize,
    cfg: &DecodeConfig,
) -> Result<(), Error> {
    let cut = udp.payload.len() < udp.payload_wire_len;
    let packet = match vxlan::Packet::new_checked(udp.payload) {
        Ok(p) => p,
        Err(e) if matches!(e.kind, ErrorKind::BadValue { .. }) => return Ok(()),
        Err(e) => return Err(encap_err(e, udp.payload_offset, cut)),
    };
    let inner_off = udp.payload_offset + vxlan::field::HEADER_LEN;
    let mirror = Mirror {
        kind: MirrorKind::Vxlan,
        src: ip.src,
        dst: ip.dst,
        session: packet.vni(),
        gre_key: None,
        gre_seq: None,
        truncated: false,
        switch_time: None,
        offset: udp.payload_offset,
        inner_offset: inner_off,
    };
    let end = udp_end.min(data.len());
    mirror_inner(frame, &data[..end], mirror, inner_off, Inner::Ethernet, cfg)
}

/// The mirrored frame at `off` (`data` ends where the outer packet does):
/// it replaces the outer layers in `frame`, which keeps them in `mirror`.
fn mirror_inner<'a>(
    frame: &mut Frame<'a>,
    data: &'a [u8],
    mirror: Mirror,
    off: usize,
    inner: Inner,
    cfg: &DecodeConfig,
) -> Result<(), Error> {
    frame.mirror = Some(mirror);
    frame.vlans = Vlans::default();
    frame.ether_type = None;
    frame.ip = None;
    frame.udp = None;
    match inner {
        Inner::Ip(next) => network(frame, data, off, next, false, cfg),
        Inner::Ethernet => {
            let rest = &data[off..];
            let eth = Ethernet2HeaderSlice::from_slice(rest).map_err(|e| {
                Error::truncated(
                    Layer::Ethernet,
                    data.len(),
                    e.required_len,
                    rest.len(),
                    LenSource::Captured,
                )
            })?;
            let next = Next::EtherType(eth.ether_type().0);
            network(frame, data, off + eth.slice().len(), next, true, cfg)
        }
    }
}

/// Maps an etherparse length error of a header starting at `start`.
fn len_err(layer: Layer, start: usize, e: &etherparse::err::LenError) -> Error {
    Error::truncated(
        layer,
        start + e.len,
        e.required_len,
        e.len,
        LenSource::Captured,
    )
}

/// The IP layer at `off`: where the IP packet ends on the wire, its fields,
/// and an error that stops decoding after it (fragments, bad extension
/// headers). `Err` when not even the IP header decoded.
type IpResult<'a> = Result<(usize, Ip<'a>, Option<Error>), Error>;

fn ipv4(data: &[u8], off: usize) -> IpResult<'_> {
    use etherparse::err::ipv4::{HeaderError, HeaderSliceError};
    let hdr = Ipv4HeaderSlice::from_slice(&data[off..]).map_err(|e| match e {
        HeaderSliceError::Len(e) => len_err(Layer::Ipv4, off, &e),
        HeaderSliceError::Content(HeaderError::UnexpectedVersion { version_number }) => {
            Error::bad_value(Layer::Ipv4, off, "version", version_number.into(), "4")
        }
        HeaderSliceError::Content(HeaderError::HeaderLengthSmallerThanHeader { ihl }) => {
            Error::bad_value(Layer::Ipv4, off, "ihl", ihl.into(), ">= 5")
        }
    })?;
    let header_len = hdr.slice().len();
    let total_len = usize::from(hdr.total_len());
    if total_len < header_len {
        return Err(Error::bad_value(
            Layer::Ipv4,
            off + 2,
            "total length",
            total_len as u64,
            ">= header length",
        ));
    }
    let frag = hdr.fragments_offset().value();
    let ip = Ip {
        src: IpAddr::V4(Ipv4Addr::from(hdr.source())),
        dst: IpAddr::V4(Ipv4Addr::from(hdr.destination())),
        ecn: Ecn::from_bits(hdr.ecn().value()),
        dscp: hdr.dcp().value(),
        ttl: hdr.ttl(),
        flow_label: None,
        protocol: hdr.protocol().0,
        offset: off,
        headers: hdr.slice(),
        wire_len: total_len,
    };
    if frag != 0 || hdr.more_fragments() {
        let stop = Some(Error {
            layer: Layer::Ipv4,
            offset: off + 6,
            kind: crate::ErrorKind::Unsupported {
                what: "IPv4 fragment at offset",
                value: u64::from(frag) * 8,
            },
        });
        return Ok((off + total_len, ip, stop));
    }
    Ok((off + total_len, ip, None))
}

fn ipv6(data: &[u8], off: usize) -> IpResult<'_> {
    use etherparse::err::ipv6::{HeaderError, HeaderSliceError};
    use etherparse::err::ipv6_exts::HeaderSliceError as ExtError;
    let hdr = Ipv6HeaderSlice::from_slice(&data[off..]).map_err(|e| match e {
        HeaderSliceError::Len(e) => len_err(Layer::Ipv6, off, &e),
        HeaderSliceError::Content(HeaderError::UnexpectedVersion { version_number }) => {
            Error::bad_value(Layer::Ipv6, off, "version", version_number.into(), "6")
        }
    })?;
    let fixed = hdr.slice().len();
    let ip_end = off + fixed + usize::from(hdr.payload_length());
    let cap_end = ip_end.min(data.len());
    let ext_start = off + fixed;
    let (exts, next, _rest, ext_err) =
        Ipv6ExtensionsSlice::from_slice_lax(hdr.next_header(), &data[ext_start..cap_end]);
    let headers_len = fixed + exts.slice().len();
    let tc = hdr.traffic_class();
    let ip = Ip {
        src: IpAddr::V6(Ipv6Addr::from(hdr.source())),
        dst: IpAddr::V6(Ipv6Addr::from(hdr.destination())),
        ecn: Ecn::from_bits(tc),
        dscp: tc >> 2,
        ttl: hdr.hop_limit(),
        flow_label: Some(hdr.flow_label().value()),
        protocol: next.0,
        offset: off,
        headers: &data[off..off + headers_len],
        wire_len: ip_end - off,
    };
    if let Some((err, _)) = ext_err {
        let stop = Some(match err {
            ExtError::Len(e) => {
                let at = ext_start + e.layer_start_offset;
                check_len(
                    Layer::Ipv6Extension,
                    at,
                    at + e.required_len,
                    cap_end,
                    ip_end,
                )
                .err()
                .unwrap_or_else(|| len_err(Layer::Ipv6Extension, at, &e))
            }
            ExtError::Content(_) => Error::bad_value(
                Layer::Ipv6Extension,
                ext_start + exts.slice().len(),
                "extension header",
                u64::from(next.0),
                "a well-formed IPv6 extension header",
            ),
        });
        return Ok((ip_end, ip, stop));
    }
    if exts.is_fragmenting_payload() {
        let stop = Some(Error {
            layer: Layer::Ipv6Extension,
            offset: ext_start,
            kind: crate::ErrorKind::Unsupported {
                what: "IPv6 fragment, next header",
                value: u64::from(next.0),
            },
        });
        return Ok((ip_end, ip, stop));
    }
    Ok((ip_end, ip, None))
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::build::UdpFrameBuilder;
    use crate::rocev2::{Opcode, Syndrome, bth, icrc};
    use crate::{ErrorKind, LenSource};

    /// Frame 5 of montybeatnik_roce_capture_read-write-ecn.pcap: Ethernet /
    /// IPv4 / UDP 57236 -> 4791 / RC Acknowledge (AETH 0x1f, MSN 1) / ICRC.
    static ACK_FRAME: [u8; 62] = [
        0x52, 0x54, 0x00, 0x0a, 0xaa, 0xba, 0x52, 0x54, 0x00, 0xbf, 0x43, 0x69, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x30, 0x5e, 0xce, 0x40, 0x00, 0x40, 0x11, 0xd8, 0x94, 0xc0, 0xa8, 0x41, 0x04,
        0xc0, 0xa8, 0x41, 0x05, 0xdf, 0x94, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, 0x11, 0x00, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x8c, 0x84, 0xdd, 0x1f, 0x00, 0x00, 0x01, 0xb3, 0x0c,
        0xc2, 0xc0,
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
            0x00, 0x00, 0x00, 0x96, 0x96, 0x96, 0x8c, 0x96, 0x96, 0x96, 0xff, 0x00, 0x00, 0x00,
            0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
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
        let kind = |frame: &[u8], cfg: &DecodeConfig| match decode(LinkType::Ethernet, frame, cfg)
            .payload
        {
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
