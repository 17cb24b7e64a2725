//! The layers of a decoded frame, as [`super::Frame`] holds them: ECN,
//! VLAN tags, IP, UDP and a RoCEv2 packet. Views into the captured bytes
//! (no copy), filled by the decode in `network` and `ip`.

use std::net::IpAddr;

#[cfg(doc)]
use super::Frame;
use crate::rocev2::{self, IcrcStatus};

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

    pub(super) fn push(&mut self, id: u16) {
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
