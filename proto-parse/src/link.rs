//! Link layers of captured frames: the pcap link type numbers this crate
//! decodes, and the small headers `etherparse` does not cover (Linux cooked
//! capture v1 and v2, BSD loopback).

use crate::{Error, ErrorKind, Layer, LenSource};

/// The link type of a capture (the pcap `LINKTYPE_*` number; pcapng uses
/// the same numbers). Open: numbers without a name stay `Unknown(n)`, and
/// `LinkType::from(u32::from(t)) == t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// 0: BSD loopback, 4-byte address family in the capturing host's order.
    Null,
    /// 1: Ethernet II (with optional 802.1Q / 802.1ad tags).
    Ethernet,
    /// 12: raw IP (`DLT_RAW` on most BSDs, found in old files).
    RawDlt12,
    /// 14: raw IP (`DLT_RAW` on OpenBSD, found in old files).
    RawDlt14,
    /// 101: raw IPv4 or IPv6 (version from the first nibble).
    Raw,
    /// 108: OpenBSD loopback, address family in network order.
    Loop,
    /// 113: Linux cooked capture v1 (`any` device).
    LinuxSll,
    /// 228: raw IPv4.
    Ipv4,
    /// 229: raw IPv6.
    Ipv6,
    /// 276: Linux cooked capture v2.
    LinuxSll2,
    /// 197: Endace ERF records (capture cards, some vendor dump tools):
    /// Ethernet and IP records are decoded; InfiniBand records (native
    /// InfiniBand, not RoCE) are reported as unsupported.
    Erf,
    /// Any other link type, reported as unsupported.
    Unknown(u32),
}

impl From<u32> for LinkType {
    fn from(value: u32) -> Self {
        match value {
            0 => LinkType::Null,
            1 => LinkType::Ethernet,
            12 => LinkType::RawDlt12,
            14 => LinkType::RawDlt14,
            101 => LinkType::Raw,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            276 => LinkType::LinuxSll2,
            197 => LinkType::Erf,
            other => LinkType::Unknown(other),
        }
    }
}

impl From<LinkType> for u32 {
    fn from(value: LinkType) -> Self {
        match value {
            LinkType::Null => 0,
            LinkType::Ethernet => 1,
            LinkType::RawDlt12 => 12,
            LinkType::RawDlt14 => 14,
            LinkType::Raw => 101,
            LinkType::Loop => 108,
            LinkType::LinuxSll => 113,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::LinuxSll2 => 276,
            LinkType::Erf => 197,
            LinkType::Unknown(other) => other,
        }
    }
}

impl LinkType {
    /// All link types [`crate::frame::decode`] understands.
    pub const SUPPORTED: [LinkType; 11] = [
        LinkType::Null,
        LinkType::Ethernet,
        LinkType::RawDlt12,
        LinkType::RawDlt14,
        LinkType::Raw,
        LinkType::Loop,
        LinkType::LinuxSll,
        LinkType::Ipv4,
        LinkType::Ipv6,
        LinkType::LinuxSll2,
        LinkType::Erf,
    ];

    pub fn is_supported(self) -> bool {
        !matches!(self, LinkType::Unknown(_))
    }
}

impl core::fmt::Display for LinkType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The names of the tcpdump.org link-type list.
        let name = match self {
            LinkType::Null => "NULL",
            LinkType::Ethernet => "ETHERNET",
            LinkType::RawDlt12 | LinkType::RawDlt14 | LinkType::Raw => "RAW",
            LinkType::Loop => "LOOP",
            LinkType::LinuxSll => "LINUX_SLL",
            LinkType::Ipv4 => "IPV4",
            LinkType::Ipv6 => "IPV6",
            LinkType::LinuxSll2 => "LINUX_SLL2",
            LinkType::Erf => "ERF",
            LinkType::Unknown(n) => return write!(f, "linktype {n}"),
        };
        write!(f, "{name} ({})", u32::from(*self))
    }
}

/// What follows a link header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Next {
    /// An EtherType (possibly a VLAN tag).
    EtherType(u16),
    /// IPv4 or IPv6 chosen by the version nibble.
    IpAny,
    /// Something that is not IP (loopback families other than IP).
    NotIp(u16),
}

/// Linux cooked capture v1 header length.
pub const SLL_HEADER_LEN: usize = 16;
/// Linux cooked capture v2 header length.
pub const SLL2_HEADER_LEN: usize = 20;
/// BSD loopback header length.
pub const NULL_HEADER_LEN: usize = 4;

fn truncated(layer: Layer, need: usize, have: usize) -> Error {
    Error::truncated(layer, have, need, have, LenSource::Captured)
}

/// SLL v1: packet type (2), ARPHRD (2), address length (2), address (8),
/// protocol (2). Returns the protocol field, an EtherType for Ethernet-like
/// devices.
pub(crate) fn sll(data: &[u8]) -> Result<(usize, Next), Error> {
    if data.len() < SLL_HEADER_LEN {
        return Err(truncated(Layer::LinuxSll, SLL_HEADER_LEN, data.len()));
    }
    let proto = u16::from_be_bytes([data[14], data[15]]);
    Ok((SLL_HEADER_LEN, Next::EtherType(proto)))
}

/// SLL v2: protocol (2), reserved (2), interface index (4), ARPHRD (2),
/// packet type (1), address length (1), address (8).
pub(crate) fn sll2(data: &[u8]) -> Result<(usize, Next), Error> {
    if data.len() < SLL2_HEADER_LEN {
        return Err(truncated(Layer::LinuxSll2, SLL2_HEADER_LEN, data.len()));
    }
    let proto = u16::from_be_bytes([data[0], data[1]]);
    Ok((SLL2_HEADER_LEN, Next::EtherType(proto)))
}

/// BSD loopback: a 4-byte address family, in host order for `Null` (so
/// either order is accepted) and network order for `Loop`. AF_INET is 2;
/// AF_INET6 is 10, 24, 28 or 30 depending on the OS.
pub(crate) fn null(data: &[u8], network_order: bool) -> Result<(usize, Next), Error> {
    if data.len() < NULL_HEADER_LEN {
        return Err(truncated(Layer::Capture, NULL_HEADER_LEN, data.len()));
    }
    let raw = [data[0], data[1], data[2], data[3]];
    let family = if network_order {
        u32::from_be_bytes(raw)
    } else {
        let le = u32::from_le_bytes(raw);
        if le > 0xffff {
            u32::from_be_bytes(raw)
        } else {
            le
        }
    };
    let next = match family {
        2 => Next::EtherType(0x0800),
        10 | 24 | 28 | 30 => Next::EtherType(0x86dd),
        other => Next::NotIp(other as u16),
    };
    Ok((NULL_HEADER_LEN, next))
}

/// ERF record header length (without extension headers).
pub const ERF_HEADER_LEN: usize = 16;

/// An ERF record: a 16-byte header (timestamp, type, flags, record and
/// wire lengths), 8-byte extension headers while the type's high bit (then
/// each extension's) says another follows, then for Ethernet types 2
/// bytes of offset and padding. Returns where the payload starts and what
/// it is: an Ethernet frame (`None`) or an IP packet.
pub(crate) fn erf(data: &[u8]) -> Result<(usize, Option<Next>), Error> {
    if data.len() < ERF_HEADER_LEN {
        return Err(truncated(Layer::Capture, ERF_HEADER_LEN, data.len()));
    }
    let mut ty = data[8];
    let mut off = ERF_HEADER_LEN;
    let mut more = ty & 0x80 != 0;
    while more {
        // An extension header is 8 bytes, all of them captured.
        let Some(ext) = data.get(off..off + 8) else {
            return Err(truncated(Layer::Capture, off + 8, data.len()));
        };
        more = ext[0] & 0x80 != 0;
        off += 8;
    }
    ty &= 0x7F;
    match ty {
        // ETH, COLOR_ETH, DSM_COLOR_ETH, COLOR_HASH_ETH: 2 bytes of pad.
        2 | 10 | 16 | 20 => {
            let start = off + 2;
            if data.len() < start {
                return Err(truncated(Layer::Capture, start, data.len()));
            }
            Ok((start, None))
        }
        // IPV4, IPV6.
        22 => Ok((off, Some(Next::EtherType(0x0800)))),
        23 => Ok((off, Some(Next::EtherType(0x86dd)))),
        // 21 is InfiniBand: native InfiniBand, not RoCE.
        other => Err(Error {
            layer: Layer::Capture,
            offset: 8,
            kind: ErrorKind::Unsupported {
                what: "ERF record type (21: native InfiniBand)",
                value: u64::from(other),
            },
        }),
    }
}

/// The error for a link type this crate does not decode.
pub(crate) fn unsupported(link: LinkType) -> Error {
    Error {
        layer: Layer::Capture,
        offset: 0,
        kind: ErrorKind::Unsupported {
            what: "link type",
            value: u64::from(u32::from(link)),
        },
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn link_types_print_their_registry_names() {
        assert_eq!(LinkType::LinuxSll2.to_string(), "LINUX_SLL2 (276)");
        assert_eq!(LinkType::RawDlt12.to_string(), "RAW (12)");
        assert_eq!(LinkType::Unknown(147).to_string(), "linktype 147");
        assert_eq!(LinkType::Erf.to_string(), "ERF (197)");
    }

    #[test]
    fn link_type_round_trips() {
        for n in [
            0u32, 1, 12, 14, 101, 108, 113, 147, 197, 228, 229, 276, 65535,
        ] {
            assert_eq!(u32::from(LinkType::from(n)), n);
        }
        assert_eq!(LinkType::from(147), LinkType::Unknown(147));
        assert!(!LinkType::from(147).is_supported());
        for t in LinkType::SUPPORTED {
            assert!(t.is_supported());
        }
    }

    #[test]
    fn cooked_headers() {
        let mut sll_bytes = [0u8; 16];
        sll_bytes[14] = 0x08;
        assert_eq!(sll(&sll_bytes), Ok((16, Next::EtherType(0x0800))));
        let err = sll(&sll_bytes[..15]).unwrap_err();
        assert_eq!((err.layer, err.offset), (Layer::LinuxSll, 15));
        let mut sll2_bytes = [0u8; 20];
        sll2_bytes[0] = 0x86;
        sll2_bytes[1] = 0xdd;
        assert_eq!(sll2(&sll2_bytes), Ok((20, Next::EtherType(0x86dd))));
        assert!(sll2(&sll2_bytes[..3]).is_err());
        assert_eq!(null(&[2, 0, 0, 0], false), Ok((4, Next::EtherType(0x0800))));
        assert_eq!(null(&[0, 0, 0, 2], false), Ok((4, Next::EtherType(0x0800))));
        assert_eq!(null(&[0, 0, 0, 30], true), Ok((4, Next::EtherType(0x86dd))));
        assert_eq!(null(&[7, 0, 0, 0], false), Ok((4, Next::NotIp(7))));
    }

    #[test]
    fn unsupported_link_type_error() {
        let err = unsupported(LinkType::from(147));
        assert_eq!(
            err.to_string(),
            "capture at byte 0: unsupported link type 147"
        );
    }

    #[test]
    fn erf_records() {
        // Type 2 (Ethernet) with one extension header: 16 + 8 + 2 bytes.
        let mut eth = [0u8; 26];
        eth[8] = 0x82;
        assert_eq!(erf(&eth), Ok((26, None)));
        assert!(erf(&eth[..20]).is_err());
        let mut ip = [0u8; 16];
        ip[8] = 22;
        assert_eq!(erf(&ip), Ok((16, Some(Next::EtherType(0x0800)))));
        // An extension header cut short (found by the frame_decode fuzz
        // target: an IPv4 record whose extension header ended past the
        // record, then sliced past its end).
        let mut cut = [0u8; 23];
        cut[8] = 0x80 | 22;
        assert_eq!(
            erf(&cut).map_err(|e| (e.layer, e.offset)),
            Err((Layer::Capture, 23))
        );
        ip[8] = 21;
        let err = erf(&ip).unwrap_err();
        assert_eq!(
            err.to_string(),
            "capture at byte 8: unsupported ERF record type (21: native InfiniBand) 21"
        );
    }
}
