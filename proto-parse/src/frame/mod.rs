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
//!
//! One concern per file: the decoded layers ([`Ecn`], [`Vlans`], [`Ip`],
//! [`Udp`], [`RoceV2`]) in `layers`, the settings in `config`; the decode
//! itself goes link header by link type (`link_layer`), then VLAN tags,
//! IP and UDP with the protocol choice (`network`, the IP headers in
//! `ip`), and the mirror encapsulations that lead back into `network`
//! (`mirrored`). The hot loops' shortcuts for the common frame, plain or
//! mirrored, are in `fast_route`: they read what [`decode`] would, without
//! building a [`Frame`], and are tested against it.

mod config;
mod fast_route;
mod ip;
mod layers;
mod link_layer;
mod mirrored;
mod network;
#[cfg(test)]
mod test;

use crate::Error;
pub use crate::link::LinkType;
use crate::metaroce;
use crate::mirror::Mirror;
use crate::rocev2::IcrcStatus;
pub use config::{DecodeConfig, PortChoice};
pub use fast_route::{CommonIpv4, IP_GRE, IP_UDP, Ipv4Mirror, Ipv4Udp, ipv4_mirror, ipv4_udp};
pub use layers::{Ecn, Ip, RoceV2, Udp, Vlans};

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_VLAN: u16 = 0x8100;
const ETH_QINQ: u16 = 0x88a8;
const ETH_QINQ_OLD: u16 = 0x9100;
const UDP_HEADER_LEN: usize = 8;

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
    if let Err(err) = link_layer::decode_into(&mut frame, link, data, cfg) {
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
    if let Err(err) = link_layer::decode_into(&mut frame, link, data, cfg) {
        frame.error = Some(err);
    }
    f(&frame)
}
