//! Errors are data: every error names the layer that broke, the byte offset
//! (counted from the first byte of the frame, spec 11.8) and what was legal.
//!
//! Parsers of one layer report offsets relative to that layer's first byte;
//! the caller that knows where the layer starts calls [`Error::at_offset`]
//! to shift them to frame offsets.

use std::fmt;

/// The protocol layer (or header) in which decoding stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// A capture file record (pcap / pcapng framing).
    Capture,
    Ethernet,
    LinuxSll,
    LinuxSll2,
    Vlan,
    Ipv4,
    Ipv6,
    Ipv6Extension,
    Udp,
    /// GRE (mirror encapsulation).
    Gre,
    /// ERSPAN type II or III header.
    Erspan,
    Vxlan,
    MetaRoceBase,
    MetaRoceData,
    MetaRoceFeedback,
    MetaRoceAck,
    MetaRoceNack,
    MetaRoceCnp,
    MetaRoceCtrl,
    MetaRoceTlv,
    MetaRocePayload,
    Bth,
    Deth,
    Reth,
    AtomicEth,
    Aeth,
    AtomicAckEth,
    ImmDt,
    Ieth,
    /// The 16 reserved bytes of a RoCEv2 CNP.
    CnpReserved,
    Icrc,
}

impl Layer {
    /// The stable name used in JSON output and messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Layer::Capture => "capture",
            Layer::Ethernet => "eth",
            Layer::LinuxSll => "sll",
            Layer::LinuxSll2 => "sll2",
            Layer::Vlan => "vlan",
            Layer::Ipv4 => "ip",
            Layer::Ipv6 => "ipv6",
            Layer::Ipv6Extension => "ipv6.ext",
            Layer::Udp => "udp",
            Layer::Gre => "gre",
            Layer::Erspan => "erspan",
            Layer::Vxlan => "vxlan",
            Layer::MetaRoceBase => "metaroce",
            Layer::MetaRoceData => "metaroce.data",
            Layer::MetaRoceFeedback => "metaroce.fb",
            Layer::MetaRoceAck => "metaroce.ack",
            Layer::MetaRoceNack => "metaroce.nack",
            Layer::MetaRoceCnp => "metaroce.cnp",
            Layer::MetaRoceCtrl => "metaroce.ctrl",
            Layer::MetaRoceTlv => "metaroce.tlv",
            Layer::MetaRocePayload => "metaroce.payload",
            Layer::Bth => "infiniband.bth",
            Layer::Deth => "infiniband.deth",
            Layer::Reth => "infiniband.reth",
            Layer::AtomicEth => "infiniband.atomiceth",
            Layer::Aeth => "infiniband.aeth",
            Layer::AtomicAckEth => "infiniband.atomicacketh",
            Layer::ImmDt => "infiniband.immdt",
            Layer::Ieth => "infiniband.ieth",
            Layer::CnpReserved => "infiniband.cnp",
            Layer::Icrc => "infiniband.icrc",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a length that turned out too short came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LenSource {
    /// The bytes the capture holds (a snaplen cut the frame): the packet
    /// itself may be fine.
    Captured,
    /// A length field of an enclosing header (IP total length, UDP length,
    /// `hlen`): the packet itself is malformed.
    Header,
    /// The capture file ends before the record (or file header) does: a
    /// file cut short, e.g. copied while the capture was running.
    File,
}

/// What was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The layer needs more bytes than there are.
    Truncated {
        required: usize,
        available: usize,
        source: LenSource,
    },
    /// A field holds a value the spec does not allow.
    BadValue {
        field: &'static str,
        value: u64,
        expected: &'static str,
    },
    /// Something this decoder does not handle (a link type, an IP protocol).
    Unsupported { what: &'static str, value: u64 },
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Truncated {
                required,
                available,
                source: LenSource::Captured,
            } => write!(
                f,
                "needs {required} bytes but the capture holds {available} (cut by snaplen)"
            ),
            ErrorKind::Truncated {
                required,
                available,
                source: LenSource::Header,
            } => write!(
                f,
                "needs {required} bytes but its length field allows {available}"
            ),
            ErrorKind::Truncated {
                required,
                available,
                source: LenSource::File,
            } => write!(
                f,
                "needs {required} bytes but the file ends after {available}"
            ),
            ErrorKind::BadValue {
                field,
                value,
                expected,
            } => write!(f, "{field} is {value}, expected {expected}"),
            ErrorKind::Unsupported { what, value } => write!(f, "unsupported {what} {value}"),
        }
    }
}

/// A decoding error: the layer, the byte offset where it broke, and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{layer} at byte {offset}: {kind}")]
pub struct Error {
    pub layer: Layer,
    /// Byte offset of the offending field (or of the end of the available
    /// data for [`ErrorKind::Truncated`]).
    pub offset: usize,
    pub kind: ErrorKind,
}

impl Error {
    pub const fn truncated(
        layer: Layer,
        offset: usize,
        required: usize,
        available: usize,
        source: LenSource,
    ) -> Self {
        Error {
            layer,
            offset,
            kind: ErrorKind::Truncated {
                required,
                available,
                source,
            },
        }
    }

    pub const fn bad_value(
        layer: Layer,
        offset: usize,
        field: &'static str,
        value: u64,
        expected: &'static str,
    ) -> Self {
        Error {
            layer,
            offset,
            kind: ErrorKind::BadValue {
                field,
                value,
                expected,
            },
        }
    }

    /// Shifts a layer-relative offset by where the layer starts in the frame.
    #[must_use]
    pub const fn at_offset(mut self, layer_start: usize) -> Self {
        self.offset += layer_start;
        self
    }

    /// True when the error only says the capture was cut short (snaplen,
    /// or the file ends), not that the packet is malformed.
    pub const fn is_capture_truncation(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Truncated {
                source: LenSource::Captured | LenSource::File,
                ..
            }
        )
    }
}

/// Something legal but suspicious: non-zero reserved bits, padding without
/// the EXT flag. Reported, never fatal (spec section 0 and 11.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Warning {
    pub layer: Layer,
    pub offset: usize,
    pub message: &'static str,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at byte {}: {}",
            self.layer, self.offset, self.message
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn display_names_layer_offset_and_legal_value() {
        let err = Error::bad_value(Layer::MetaRoceBase, 0, "version", 2, "1").at_offset(42);
        assert_eq!(
            err.to_string(),
            "metaroce at byte 42: version is 2, expected 1"
        );
        let err = Error::truncated(Layer::Udp, 8, 8, 3, LenSource::Captured);
        assert_eq!(
            err.to_string(),
            "udp at byte 8: needs 8 bytes but the capture holds 3 (cut by snaplen)"
        );
        assert!(err.is_capture_truncation());
    }
}
