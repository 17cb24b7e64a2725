//! BTH opcodes: the transport service (top 3 bits) and the operation (low 5
//! bits), and which extension headers each opcode carries, after the table
//! of Wireshark's `packet-infiniband.c` (IBTA vol. 1, section 9.2 and the
//! RoCEv2 annex A17 for the CNP).

use bitflags::bitflags;

/// Declares an open enum over `u8`: every named value plus `Unknown(u8)`,
/// with lossless `From<u8>` / `From<Enum> for u8`.
macro_rules! enum_with_unknown {
    (
        $(#[$enum_attr:meta])*
        pub enum $name:ident {
            $( $(#[$variant_attr:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        $(#[$enum_attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$variant_attr])* $variant ),+,
            /// A value this decoder has no name for.
            Unknown(u8),
        }

        impl From<u8> for $name {
            #[inline]
            fn from(value: u8) -> Self {
                match value {
                    $( $value => $name::$variant ),+,
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for u8 {
            #[inline]
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value ),+,
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}

enum_with_unknown! {
    /// The BTH opcode byte. Values without a name (RD, XRC, reserved) are
    /// kept as `Unknown(u8)`; `Opcode::from(u8::from(op)) == op` always.
    pub enum Opcode {
        RcSendFirst = 0x00,
        RcSendMiddle = 0x01,
        RcSendLast = 0x02,
        RcSendLastImm = 0x03,
        RcSendOnly = 0x04,
        RcSendOnlyImm = 0x05,
        RcRdmaWriteFirst = 0x06,
        RcRdmaWriteMiddle = 0x07,
        RcRdmaWriteLast = 0x08,
        RcRdmaWriteLastImm = 0x09,
        RcRdmaWriteOnly = 0x0a,
        RcRdmaWriteOnlyImm = 0x0b,
        RcRdmaReadRequest = 0x0c,
        RcRdmaReadResponseFirst = 0x0d,
        RcRdmaReadResponseMiddle = 0x0e,
        RcRdmaReadResponseLast = 0x0f,
        RcRdmaReadResponseOnly = 0x10,
        RcAcknowledge = 0x11,
        RcAtomicAcknowledge = 0x12,
        RcCompareSwap = 0x13,
        RcFetchAdd = 0x14,
        RcSendLastInvalidate = 0x16,
        RcSendOnlyInvalidate = 0x17,
        UcSendFirst = 0x20,
        UcSendMiddle = 0x21,
        UcSendLast = 0x22,
        UcSendLastImm = 0x23,
        UcSendOnly = 0x24,
        UcSendOnlyImm = 0x25,
        UcRdmaWriteFirst = 0x26,
        UcRdmaWriteMiddle = 0x27,
        UcRdmaWriteLast = 0x28,
        UcRdmaWriteLastImm = 0x29,
        UcRdmaWriteOnly = 0x2a,
        UcRdmaWriteOnlyImm = 0x2b,
        UdSendOnly = 0x64,
        UdSendOnlyImm = 0x65,
        /// RoCEv2 Congestion Notification Packet (annex A17.9.3).
        Cnp = 0x81,
    }
}

/// The transport service of an opcode (its top three bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// Reliable Connection (0b000).
    Rc,
    /// Unreliable Connection (0b001).
    Uc,
    /// Reliable Datagram (0b010).
    Rd,
    /// Unreliable Datagram (0b011).
    Ud,
    /// CNP (0b100).
    Cnp,
    /// Extended Reliable Connection (0b101).
    Xrc,
    /// Manufacturer specific (0b110, 0b111).
    Vendor,
}

bitflags! {
    /// Which extension headers follow the BTH, in wire order (RDETH and
    /// XRCETH are not decoded: RD and XRC opcodes are `Unknown`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct ExtHeaders: u16 {
        /// Datagram ETH (8 bytes): Q_Key, source QP.
        const DETH = 1 << 0;
        /// RDMA ETH (16 bytes): virtual address, R_Key, DMA length.
        const RETH = 1 << 1;
        /// Atomic ETH (28 bytes): virtual address, R_Key, swap, compare.
        const ATOMIC_ETH = 1 << 2;
        /// ACK ETH (4 bytes): syndrome, MSN.
        const AETH = 1 << 3;
        /// Atomic ACK ETH (8 bytes): original remote data.
        const ATOMIC_ACK_ETH = 1 << 4;
        /// Immediate data (4 bytes).
        const IMM_DT = 1 << 5;
        /// Invalidate ETH (4 bytes): R_Key to invalidate.
        const IETH = 1 << 6;
        /// The 16 reserved bytes of a RoCEv2 CNP.
        const CNP_RESERVED = 1 << 7;
        /// The opcode carries a payload (possibly empty).
        const PAYLOAD = 1 << 15;
    }
}

impl ExtHeaders {
    /// Total length in bytes of the extension headers (not the payload).
    pub const fn byte_len(self) -> usize {
        let mut len = 0;
        if self.contains(ExtHeaders::DETH) {
            len += super::deth::HEADER_LEN;
        }
        if self.contains(ExtHeaders::RETH) {
            len += super::reth::HEADER_LEN;
        }
        if self.contains(ExtHeaders::ATOMIC_ETH) {
            len += super::atomic::ATOMIC_ETH_LEN;
        }
        if self.contains(ExtHeaders::AETH) {
            len += super::aeth::HEADER_LEN;
        }
        if self.contains(ExtHeaders::ATOMIC_ACK_ETH) {
            len += super::atomic::ATOMIC_ACK_ETH_LEN;
        }
        if self.contains(ExtHeaders::IMM_DT) {
            len += super::IMM_DT_LEN;
        }
        if self.contains(ExtHeaders::IETH) {
            len += super::IETH_LEN;
        }
        if self.contains(ExtHeaders::CNP_RESERVED) {
            len += super::CNP_RESERVED_LEN;
        }
        len
    }

    /// True when no extension header is present.
    pub const fn is_empty_headers(self) -> bool {
        self.difference(ExtHeaders::PAYLOAD).is_empty()
    }
}

/// The extension headers of an opcode byte, after Wireshark's
/// `packet-infiniband.c` (see [`Opcode::headers`]).
const fn headers_of(op: u8) -> ExtHeaders {
    const P: u16 = ExtHeaders::PAYLOAD.bits();
    const IMM: u16 = ExtHeaders::IMM_DT.bits();
    const IETH: u16 = ExtHeaders::IETH.bits();
    const RETH: u16 = ExtHeaders::RETH.bits();
    const AETH: u16 = ExtHeaders::AETH.bits();
    const DETH: u16 = ExtHeaders::DETH.bits();
    let bits = match op {
        // RC / UC Send First, Middle, Last, Only
        0x00 | 0x01 | 0x02 | 0x04 | 0x20 | 0x21 | 0x22 | 0x24 => P,
        // Send Last / Only with Immediate
        0x03 | 0x05 | 0x23 | 0x25 => IMM | P,
        // RC Send Last / Only with Invalidate
        0x16 | 0x17 => IETH | P,
        // RDMA Write First / Only
        0x06 | 0x0a | 0x26 | 0x2a => RETH | P,
        // RDMA Write Middle / Last
        0x07 | 0x08 | 0x27 | 0x28 => P,
        // RDMA Write Last with Immediate
        0x09 | 0x29 => IMM | P,
        // RDMA Write Only with Immediate
        0x0b | 0x2b => RETH | IMM | P,
        // RDMA Read Request
        0x0c => RETH,
        // RDMA Read Response First / Last / Only
        0x0d | 0x0f | 0x10 => AETH | P,
        // RDMA Read Response Middle
        0x0e => P,
        // Acknowledge
        0x11 => AETH,
        // Atomic Acknowledge
        0x12 => AETH | ExtHeaders::ATOMIC_ACK_ETH.bits(),
        // Compare & Swap, Fetch & Add
        0x13 | 0x14 => ExtHeaders::ATOMIC_ETH.bits(),
        // UD Send Only (with Immediate)
        0x64 => DETH | P,
        0x65 => DETH | IMM | P,
        // CNP
        0x81 => ExtHeaders::CNP_RESERVED.bits(),
        // RD, XRC, reserved, vendor: not decoded
        _ => P,
    };
    ExtHeaders::from_bits_retain(bits)
}

/// [`headers_of`] for every opcode byte.
static HEADERS: [ExtHeaders; 256] = {
    let mut table = [ExtHeaders::empty(); 256];
    let mut i = 0;
    while i < 256 {
        table[i] = headers_of(i as u8);
        i += 1;
    }
    table
};

/// Length of the extension headers of every opcode byte.
static EXT_LEN: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = headers_of(i as u8).byte_len() as u8;
        i += 1;
    }
    table
};

/// Length of the extension headers that follow the BTH for `opcode`.
#[inline]
pub fn ext_len(opcode: u8) -> usize {
    usize::from(EXT_LEN[usize::from(opcode)])
}

impl Opcode {
    /// The transport service (top three bits).
    #[inline]
    pub fn service(self) -> Service {
        match u8::from(self) >> 5 {
            0 => Service::Rc,
            1 => Service::Uc,
            2 => Service::Rd,
            3 => Service::Ud,
            4 => Service::Cnp,
            5 => Service::Xrc,
            _ => Service::Vendor,
        }
    }

    /// The extension headers this opcode carries and whether it has a
    /// payload. Unknown opcodes carry no known header and a payload (all
    /// bytes between the BTH and the ICRC).
    #[inline]
    pub fn headers(self) -> ExtHeaders {
        HEADERS[usize::from(u8::from(self))]
    }

    /// A short human name, as Wireshark's column shows it.
    pub fn name(self) -> &'static str {
        use Opcode::*;
        match self {
            RcSendFirst => "RC Send First",
            RcSendMiddle => "RC Send Middle",
            RcSendLast => "RC Send Last",
            RcSendLastImm => "RC Send Last Immediate",
            RcSendOnly => "RC Send Only",
            RcSendOnlyImm => "RC Send Only Immediate",
            RcRdmaWriteFirst => "RC RDMA Write First",
            RcRdmaWriteMiddle => "RC RDMA Write Middle",
            RcRdmaWriteLast => "RC RDMA Write Last",
            RcRdmaWriteLastImm => "RC RDMA Write Last Immediate",
            RcRdmaWriteOnly => "RC RDMA Write Only",
            RcRdmaWriteOnlyImm => "RC RDMA Write Only Immediate",
            RcRdmaReadRequest => "RC RDMA Read Request",
            RcRdmaReadResponseFirst => "RC RDMA Read Response First",
            RcRdmaReadResponseMiddle => "RC RDMA Read Response Middle",
            RcRdmaReadResponseLast => "RC RDMA Read Response Last",
            RcRdmaReadResponseOnly => "RC RDMA Read Response Only",
            RcAcknowledge => "RC Acknowledge",
            RcAtomicAcknowledge => "RC Atomic Acknowledge",
            RcCompareSwap => "RC Compare Swap",
            RcFetchAdd => "RC Fetch Add",
            RcSendLastInvalidate => "RC Send Last Invalidate",
            RcSendOnlyInvalidate => "RC Send Only Invalidate",
            UcSendFirst => "UC Send First",
            UcSendMiddle => "UC Send Middle",
            UcSendLast => "UC Send Last",
            UcSendLastImm => "UC Send Last Immediate",
            UcSendOnly => "UC Send Only",
            UcSendOnlyImm => "UC Send Only Immediate",
            UcRdmaWriteFirst => "UC RDMA Write First",
            UcRdmaWriteMiddle => "UC RDMA Write Middle",
            UcRdmaWriteLast => "UC RDMA Write Last",
            UcRdmaWriteLastImm => "UC RDMA Write Last Immediate",
            UcRdmaWriteOnly => "UC RDMA Write Only",
            UcRdmaWriteOnlyImm => "UC RDMA Write Only Immediate",
            UdSendOnly => "UD Send Only",
            UdSendOnlyImm => "UD Send Only Immediate",
            Cnp => "CNP",
            Unknown(_) => "Unknown",
        }
    }
}

impl core::fmt::Display for Opcode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} (0x{:02x})", self.name(), u8::from(*self))
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn open_enum_round_trips_every_byte() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(Opcode::from(v)), v);
        }
        assert_eq!(Opcode::from(0x40), Opcode::Unknown(0x40));
        assert_eq!(Opcode::from(0x81), Opcode::Cnp);
    }

    /// The table by opcode name (the one `headers_of` must agree with).
    fn by_name(op: Opcode) -> ExtHeaders {
        use ExtHeaders as H;
        use Opcode::*;
        match op {
            RcSendFirst | RcSendMiddle | RcSendLast | RcSendOnly | UcSendFirst | UcSendMiddle
            | UcSendLast | UcSendOnly => H::PAYLOAD,
            RcSendLastImm | RcSendOnlyImm | UcSendLastImm | UcSendOnlyImm => H::IMM_DT | H::PAYLOAD,
            RcSendLastInvalidate | RcSendOnlyInvalidate => H::IETH | H::PAYLOAD,
            RcRdmaWriteFirst | RcRdmaWriteOnly | UcRdmaWriteFirst | UcRdmaWriteOnly => {
                H::RETH | H::PAYLOAD
            }
            RcRdmaWriteMiddle | RcRdmaWriteLast | UcRdmaWriteMiddle | UcRdmaWriteLast => H::PAYLOAD,
            RcRdmaWriteLastImm | UcRdmaWriteLastImm => H::IMM_DT | H::PAYLOAD,
            RcRdmaWriteOnlyImm | UcRdmaWriteOnlyImm => H::RETH | H::IMM_DT | H::PAYLOAD,
            RcRdmaReadRequest => H::RETH,
            RcRdmaReadResponseFirst | RcRdmaReadResponseLast | RcRdmaReadResponseOnly => {
                H::AETH | H::PAYLOAD
            }
            RcRdmaReadResponseMiddle => H::PAYLOAD,
            RcAcknowledge => H::AETH,
            RcAtomicAcknowledge => H::AETH | H::ATOMIC_ACK_ETH,
            RcCompareSwap | RcFetchAdd => H::ATOMIC_ETH,
            UdSendOnly => H::DETH | H::PAYLOAD,
            UdSendOnlyImm => H::DETH | H::IMM_DT | H::PAYLOAD,
            Cnp => H::CNP_RESERVED,
            Unknown(_) => H::PAYLOAD,
        }
    }

    #[test]
    fn byte_table_matches_named_table() {
        for v in 0..=255u8 {
            let op = Opcode::from(v);
            assert_eq!(op.headers(), by_name(op), "{op}");
            assert_eq!(ext_len(v), by_name(op).byte_len(), "{op}");
        }
    }

    #[test]
    fn header_table_matches_wireshark() {
        assert_eq!(
            Opcode::RcRdmaWriteOnlyImm.headers(),
            ExtHeaders::RETH | ExtHeaders::IMM_DT | ExtHeaders::PAYLOAD
        );
        assert_eq!(Opcode::RcRdmaReadRequest.headers().byte_len(), 16);
        assert_eq!(Opcode::RcAtomicAcknowledge.headers().byte_len(), 12);
        assert_eq!(Opcode::RcCompareSwap.headers().byte_len(), 28);
        assert_eq!(Opcode::UdSendOnlyImm.headers().byte_len(), 12);
        assert_eq!(Opcode::Cnp.headers().byte_len(), 16);
        assert!(!Opcode::Cnp.headers().contains(ExtHeaders::PAYLOAD));
        assert_eq!(Opcode::UdSendOnly.service(), Service::Ud);
        assert_eq!(Opcode::Cnp.service(), Service::Cnp);
        assert_eq!(Opcode::Unknown(0xa0).service(), Service::Xrc);
    }
}
