//! MetaRoCE v1 (spec `metaroce-wire-v1.md`): zero-copy views, owned
//! representations that parse and emit, TLVs, the CRC32C trailer and
//! trimming.
//!
//! The layout lives in [`field`] alone. On top of it:
//! - [`Packet`]: a view over one UDP payload. `Packet::new_checked` validates
//!   the whole packet (spec sections 8 and 11.1); its getters then never
//!   panic. Type-specific fields are reached through typed views
//!   ([`Packet::data`], [`Packet::feedback`], [`Packet::ack`], ...) that exist
//!   only for the right type and length.
//! - [`parse_lax`]: for captures cut by a snaplen: decodes what is there and
//!   says where it stopped.
//! - [`Repr`]: an owned representation; `Repr::parse(&packet)` and
//!   `repr.emit(&mut buf)`. Emitting is trusted: `emit` panics when the
//!   buffer is shorter than `repr.buffer_len()`, as smoltcp's emitters do.
//!
//! Choices where the spec is silent are listed in `docs/spec-decisions.md`.

pub mod field;
mod headers;
mod packet;
mod repr;
mod tlv;

pub use headers::{Ack, Ctrl, Data, Feedback, Nack};
pub use packet::{CrcStatus, Lax, Layout, Packet, WarningFlags, looks_like, parse_lax};
pub use repr::{
    AckRepr, Body, CnpRepr, CtrlRepr, DataRepr, FeedbackRepr, NackRepr, Op, Repr, SackBitmap,
};
pub use tlv::{HopTelemetry, PathStatusEntry, Tlv, TlvIter, TlvRepr};

/// Default UDP destination port (spec section 1).
pub const DEFAULT_PORT: u16 = 4794;
/// The only version this crate decodes.
pub const VERSION: u8 = 1;
/// Default timestamp unit: 1 ns (spec section 5, `ts_unit_ps`).
pub const DEFAULT_TS_UNIT_PS: u32 = 1000;

/// UDP source port for an entropy value, the RoCEv2 convention (spec 1).
pub const fn udp_source_port(ev: u16) -> u16 {
    0xC000 | (ev & 0x3FFF)
}

/// Declares a wire enum that keeps unknown values (`Unknown(n)`), with the
/// value/name table Wireshark's `value_string` needs.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident : $repr:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal => $label:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A value the spec does not define; decoded as "unknown (N)".
            Unknown($repr),
        }

        impl $name {
            /// Every defined value with its display name.
            pub const VALUES: &'static [($repr, &'static str)] = &[$( ($value, $label), )*];

            /// The spec's name, or `"unknown"`.
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $label, )*
                    $name::Unknown(_) => "unknown",
                }
            }

            pub const fn is_known(self) -> bool {
                !matches!(self, $name::Unknown(_))
            }
        }

        impl $name {
            /// `From<$repr>`, usable in constants.
            pub const fn from_raw(value: $repr) -> Self {
                match value {
                    $( $value => $name::$variant, )*
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$repr> for $name {
            fn from(value: $repr) -> Self {
                Self::from_raw(value)
            }
        }

        impl From<$name> for $repr {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )*
                    $name::Unknown(other) => other,
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self {
                    $name::Unknown(value) => write!(f, "unknown ({value})"),
                    known => f.write_str(known.name()),
                }
            }
        }
    };
}

open_enum! {
    /// Base header `type` (4 bits).
    pub enum PacketType: u8 {
        Data = 0 => "DATA",
        Ack = 1 => "ACK",
        Nack = 2 => "NACK",
        Cnp = 3 => "CNP",
        Probe = 4 => "PROBE",
        ProbeReply = 5 => "PROBE_REPLY",
        Ctrl = 6 => "CTRL",
        Experimental = 15 => "EXPERIMENTAL",
    }
}

impl PacketType {
    /// Types that carry the feedback block (section 4).
    pub const fn has_feedback(self) -> bool {
        matches!(
            self,
            PacketType::Ack | PacketType::Nack | PacketType::Cnp | PacketType::ProbeReply
        )
    }
}

open_enum! {
    /// DATA `op`.
    pub enum DataOp: u8 {
        Send = 0x00 => "SEND",
        SendImm = 0x01 => "SEND_IMM",
        Write = 0x02 => "WRITE",
        WriteImm = 0x03 => "WRITE_IMM",
        ReadReq = 0x04 => "READ_REQ",
        ReadResp = 0x05 => "READ_RESP",
    }
}

impl DataOp {
    /// Fixed DATA header size with the base header (section 3). An unknown
    /// op is given the common part only (docs/spec-decisions.md).
    pub const fn header_len(self) -> usize {
        match self {
            DataOp::Send | DataOp::ReadResp | DataOp::Unknown(_) => field::DATA_COMMON_LEN,
            DataOp::SendImm => field::IMM_DATA_SEND.end,
            DataOp::Write | DataOp::ReadReq => field::RKEY.end,
            DataOp::WriteImm => field::IMM_DATA_WRITE.end,
        }
    }

    pub const fn has_remote_address(self) -> bool {
        matches!(self, DataOp::Write | DataOp::WriteImm | DataOp::ReadReq)
    }

    /// The range of `imm_data`, for the two ops that carry it.
    pub const fn imm_data_field(self) -> Option<field::Field> {
        match self {
            DataOp::SendImm => Some(field::IMM_DATA_SEND),
            DataOp::WriteImm => Some(field::IMM_DATA_WRITE),
            _ => None,
        }
    }
}

open_enum! {
    /// NACK `code`.
    pub enum NackCode: u8 {
        Gap = 0x01 => "GAP",
        Trimmed = 0x02 => "TRIMMED",
        Rnr = 0x03 => "RNR",
        PsnOutOfWindow = 0x04 => "PSN_OUT_OF_WINDOW",
        UnknownConn = 0x05 => "UNKNOWN_CONN",
        RemoteAccess = 0x06 => "REMOTE_ACCESS",
        NoResource = 0x07 => "NO_RESOURCE",
    }
}

open_enum! {
    /// CNP `reason`.
    pub enum CnpReason: u8 {
        Ecn = 1 => "ECN",
        Trim = 2 => "TRIM",
        RxBuffer = 3 => "RX_BUFFER",
        Delay = 4 => "DELAY",
    }
}

open_enum! {
    /// CTRL `ctrl_op`.
    pub enum CtrlOp: u8 {
        Connect = 1 => "CONNECT",
        Accept = 2 => "ACCEPT",
        Close = 3 => "CLOSE",
        CloseAck = 4 => "CLOSE_ACK",
        Resync = 5 => "RESYNC",
        Keepalive = 6 => "KEEPALIVE",
        Abort = 7 => "ABORT",
    }
}

open_enum! {
    /// CTRL `cc_algo`.
    pub enum CcAlgo: u8 {
        None = 0 => "none",
        DelayBased = 1 => "delay-based",
        Ecn = 2 => "ECN",
        Credit = 3 => "credit",
        Hybrid = 4 => "hybrid",
    }
}

open_enum! {
    /// TLV `type` (section 6).
    pub enum TlvType: u8 {
        Pad = 0 => "PAD",
        HopTelemetry = 1 => "HOP_TELEMETRY",
        PathStatus = 2 => "PATH_STATUS",
        Ts64 = 3 => "TS64",
    }
}

open_enum! {
    /// PATH_STATUS entry `state`.
    pub enum PathState: u8 {
        Active = 0 => "active",
        Probing = 1 => "probing",
        Retired = 2 => "retired",
    }
}

bitflags::bitflags! {
    /// Base header `flags`. Reserved bits are kept (`from_bits_retain`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Flags: u8 {
        /// Ack requested now.
        const AR = 0x80;
        /// First packet of a message.
        const SOM = 0x40;
        /// Last packet of a message.
        const EOM = 0x20;
        /// Solicited event.
        const SE = 0x10;
        /// TLVs present.
        const EXT = 0x08;
        /// CRC32C trailer present.
        const CRC = 0x04;
    }
}

impl Flags {
    pub const RESERVED: u8 = 0x03;
}

bitflags::bitflags! {
    /// Feedback `fb_flags`: they describe the triggering packet only (11.6).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct FbFlags: u8 {
        /// The triggering packet was CE-marked.
        const ECE = 0x80;
        /// It arrived trimmed.
        const TRIM = 0x40;
        /// It had already been received (spurious retransmission).
        const DUP = 0x20;
        /// This feedback covers more than one DATA packet.
        const COAL = 0x10;
    }
}

impl FbFlags {
    pub const RESERVED: u8 = 0x0F;
}

bitflags::bitflags! {
    /// CTRL `features`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Features: u32 {
        const CRC = 1 << 0;
        const PATH_SEQ = 1 << 1;
        const TELEMETRY_TLVS = 1 << 2;
        const TRIMMING_AWARE = 1 << 3;
        const CLOCKS_SYNCHRONISED = 1 << 4;
    }
}

/// RFC 1982 serial-number comparison of 32-bit PSNs: `a < b`.
#[inline]
pub const fn psn_lt(a: u32, b: u32) -> bool {
    a != b && (b.wrapping_sub(a) as i32) > 0
}

/// Signed distance `b - a` in serial arithmetic.
#[inline]
pub const fn psn_diff(a: u32, b: u32) -> i32 {
    b.wrapping_sub(a) as i32
}

#[cfg(test)]
mod enum_test {
    use super::*;

    #[test]
    fn open_enums_keep_unknown_values() {
        assert_eq!(PacketType::from(6), PacketType::Ctrl);
        assert_eq!(PacketType::from(9), PacketType::Unknown(9));
        assert_eq!(u8::from(PacketType::Unknown(9)), 9);
        assert_eq!(PacketType::Unknown(9).to_string(), "unknown (9)");
        assert_eq!(DataOp::from(0xF3).to_string(), "unknown (243)");
        assert_eq!(NackCode::RemoteAccess.to_string(), "REMOTE_ACCESS");
    }

    #[test]
    fn data_header_sizes_match_spec_section_3() {
        let sizes: Vec<_> = (0..6u8).map(|op| DataOp::from(op).header_len()).collect();
        assert_eq!(sizes, [40, 44, 52, 56, 52, 40]);
    }

    #[test]
    fn serial_arithmetic_wraps() {
        assert!(psn_lt(u32::MAX, 0));
        assert!(psn_lt(5, 6));
        assert!(!psn_lt(6, 6));
        assert_eq!(psn_diff(u32::MAX - 1, 2), 4);
    }

    #[test]
    fn source_port_carries_entropy() {
        assert_eq!(udp_source_port(0x1234), 0xD234);
        assert_eq!(udp_source_port(0xFFFF), 0xFFFF);
    }
}

#[cfg(test)]
pub(crate) mod test;
