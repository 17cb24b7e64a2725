//! ACK Extended Transport Header (IBTA vol. 1, 9.3.5): the syndrome (ACK
//! with credit count, RNR NAK with timer, or NAK with error code) and the
//! message sequence number.

use super::{Field, be24, check_len};
use crate::{Error, Layer};

/// A read/write view of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;
    pub const SYNDROME: usize = 0;
    pub const MSN: Field = 1..4;
}

/// Length of the AETH.
pub const HEADER_LEN: usize = field::MSN.end;

/// Credit count value meaning "no credit information" (IBTA 9.7.5.1.3).
pub const CREDIT_INVALID: u8 = 0x1f;

/// The NAK codes of a NAK syndrome (IBTA table 43).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0: PSN sequence error.
    PsnSequenceError,
    /// 1: invalid request.
    InvalidRequest,
    /// 2: remote access error.
    RemoteAccessError,
    /// 3: remote operational error.
    RemoteOperationalError,
    /// 4: invalid RD request.
    InvalidRdRequest,
    /// 5..=31: reserved.
    Unknown(u8),
}

impl NakCode {
    /// The code's name (IBTA table 43), as reports show it.
    pub fn name(self) -> &'static str {
        match self {
            NakCode::PsnSequenceError => "PSN sequence error",
            NakCode::InvalidRequest => "invalid request",
            NakCode::RemoteAccessError => "remote access error",
            NakCode::RemoteOperationalError => "remote operational error",
            NakCode::InvalidRdRequest => "invalid RD request",
            NakCode::Unknown(_) => "reserved code",
        }
    }
}

/// The code's name, and its value when reserved: "PSN sequence error",
/// "reserved code 9".
impl core::fmt::Display for NakCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NakCode::Unknown(value) => write!(f, "reserved code {value}"),
            known => f.write_str(known.name()),
        }
    }
}

impl From<u8> for NakCode {
    fn from(value: u8) -> Self {
        match value {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            other => NakCode::Unknown(other),
        }
    }
}

impl From<NakCode> for u8 {
    fn from(value: NakCode) -> Self {
        match value {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Unknown(other) => other,
        }
    }
}

/// A decoded AETH syndrome byte: bit 7 reserved, bits 6..5 the kind, bits
/// 4..0 its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// 0b00: ACK; `credit` is the encoded credit count ([`CREDIT_INVALID`]
    /// when the responder sends no credit).
    Ack { credit: u8 },
    /// 0b01: receiver not ready; `timer` is the encoded RNR NAK timer.
    RnrNak { timer: u8 },
    /// 0b10: reserved kind; the low five bits.
    Reserved { value: u8 },
    /// 0b11: NAK with its code.
    Nak(NakCode),
}

impl Syndrome {
    /// Decodes a syndrome byte (the reserved bit 7 is ignored).
    pub fn from_byte(byte: u8) -> Syndrome {
        let value = byte & 0x1f;
        match (byte >> 5) & 0x3 {
            0 => Syndrome::Ack { credit: value },
            1 => Syndrome::RnrNak { timer: value },
            2 => Syndrome::Reserved { value },
            _ => Syndrome::Nak(NakCode::from(value)),
        }
    }

    /// Encodes the syndrome (reserved bit 7 clear).
    pub fn to_byte(self) -> u8 {
        match self {
            Syndrome::Ack { credit } => credit & 0x1f,
            Syndrome::RnrNak { timer } => 0x20 | (timer & 0x1f),
            Syndrome::Reserved { value } => 0x40 | (value & 0x1f),
            Syndrome::Nak(code) => 0x60 | (u8::from(code) & 0x1f),
        }
    }

    pub fn is_ack(self) -> bool {
        matches!(self, Syndrome::Ack { .. })
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length (emitting only).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking it holds a whole AETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let len = buffer.as_ref().len();
        check_len(Layer::Aeth, 0, HEADER_LEN, len, usize::MAX)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw syndrome byte (as `infiniband.aeth.syndrome`).
    #[inline]
    pub fn syndrome_byte(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }
    #[inline]
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_byte(self.syndrome_byte())
    }
    /// Message sequence number (24 bits).
    #[inline]
    pub fn msn(&self) -> u32 {
        be24(self.buffer.as_ref(), field::MSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    pub fn set_syndrome_byte(&mut self, value: u8) {
        self.buffer.as_mut()[field::SYNDROME] = value;
    }
    #[inline]
    pub fn set_msn(&mut self, value: u32) {
        self.buffer.as_mut()[field::MSN].copy_from_slice(&value.to_be_bytes()[1..]);
    }
}

/// An owned AETH. The syndrome is kept as its raw byte (so that the
/// reserved bit survives a round trip); [`Repr::syndrome`] decodes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub syndrome: u8,
    /// 24 bits
    pub msn: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Repr {
        Repr {
            syndrome: packet.syndrome_byte(),
            msn: packet.msn(),
        }
    }

    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_byte(self.syndrome)
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_syndrome_byte(self.syndrome);
        packet.set_msn(self.msn);
    }
}

impl core::fmt::Display for Repr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.syndrome() {
            Syndrome::Ack { credit } => write!(f, "AETH ACK credit={credit}")?,
            Syndrome::RnrNak { timer } => write!(f, "AETH RNR-NAK timer={timer}")?,
            Syndrome::Reserved { value } => write!(f, "AETH reserved({value})")?,
            Syndrome::Nak(code) => write!(f, "AETH NAK {code}")?,
        }
        write!(f, " msn={}", self.msn)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// What users read names the code, never a Rust variant.
    #[test]
    fn nak_codes_print_their_names() {
        assert_eq!(NakCode::PsnSequenceError.to_string(), "PSN sequence error");
        assert_eq!(NakCode::from(9).to_string(), "reserved code 9");
    }

    /// AETH of frame 5 of montybeatnik_roce_capture_read-write-ecn.pcap
    /// (ACK, no credit, MSN 1).
    static AETH_BYTES: [u8; 4] = [0x1f, 0x00, 0x00, 0x01];

    #[test]
    fn test_parse() {
        let packet = Packet::new_checked(&AETH_BYTES[..]).unwrap();
        assert_eq!(
            Repr::parse(&packet),
            Repr {
                syndrome: 0x1f,
                msn: 1
            }
        );
        assert_eq!(
            packet.syndrome(),
            Syndrome::Ack {
                credit: CREDIT_INVALID
            }
        );
    }

    #[test]
    fn test_emit() {
        let mut bytes = vec![0xa5; HEADER_LEN];
        Repr {
            syndrome: 0x1f,
            msn: 1,
        }
        .emit(&mut Packet::new_unchecked(&mut bytes));
        assert_eq!(bytes, AETH_BYTES);
    }

    #[test]
    fn test_syndromes() {
        assert_eq!(Syndrome::from_byte(0x06), Syndrome::Ack { credit: 6 });
        assert_eq!(Syndrome::from_byte(0x2e), Syndrome::RnrNak { timer: 14 });
        assert_eq!(
            Syndrome::from_byte(0x60),
            Syndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            Syndrome::from_byte(0x61),
            Syndrome::Nak(NakCode::InvalidRequest)
        );
        assert_eq!(
            Syndrome::from_byte(0x62),
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            Syndrome::from_byte(0x63),
            Syndrome::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            Syndrome::from_byte(0x64),
            Syndrome::Nak(NakCode::InvalidRdRequest)
        );
        assert_eq!(
            Syndrome::from_byte(0x7f),
            Syndrome::Nak(NakCode::Unknown(31))
        );
        assert_eq!(Syndrome::from_byte(0x45), Syndrome::Reserved { value: 5 });
        for b in 0..0x80u8 {
            assert_eq!(Syndrome::from_byte(b).to_byte(), b);
        }
    }
}
