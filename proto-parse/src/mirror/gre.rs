//! GRE (RFC 2784, with RFC 2890's key and sequence number): the tunnel
//! switches mirror traffic through.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! |C|R|K|S| Reserved0       | Ver |         Protocol Type         |
//! |      Checksum (optional)      |       Reserved1 (optional)    |
//! |                         Key (optional)                        |
//! |                 Sequence Number (optional)                    |
//! ```
//!
//! Version 0 only (version 1 is PPTP's enhanced GRE); the RFC 1701
//! routing bit (R) is refused, as RFC 2784 requires of a receiver.

use crate::{Error, ErrorKind, Layer, LenSource};

/// Byte ranges of the fixed part.
pub mod field {
    use core::ops::Range;
    pub const FLAGS: Range<usize> = 0..2;
    pub const PROTOCOL: Range<usize> = 2..4;
    /// Length of the fixed part; each optional field adds 4.
    pub const FIXED_LEN: usize = 4;
}

const FLAG_C: u16 = 0x8000;
const FLAG_R: u16 = 0x4000;
const FLAG_K: u16 = 0x2000;
const FLAG_S: u16 = 0x1000;
const VERSION_MASK: u16 = 0x0007;

/// GRE protocol types this crate decapsulates.
pub mod protocol {
    /// Transparent Ethernet bridging: an Ethernet frame follows.
    pub const TEB: u16 = 0x6558;
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86DD;
    /// ERSPAN type I (no sequence number) and II.
    pub const ERSPAN_II: u16 = 0x88BE;
    /// ERSPAN type III.
    pub const ERSPAN_III: u16 = 0x22EB;
}

/// A GRE header over a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Checks the version, the routing bit and that the header (with its
    /// optional fields) was captured. Offsets of the error are from the
    /// first byte of the GRE header.
    #[inline(always)]
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let packet = Packet::new_unchecked(buffer);
        let len = packet.buffer.as_ref().len();
        if len < field::FIXED_LEN {
            return Err(truncated(field::FIXED_LEN, len));
        }
        let flags = packet.flags();
        if flags & VERSION_MASK != 0 {
            return Err(Error::bad_value(
                Layer::Gre,
                1,
                "version",
                u64::from(flags & VERSION_MASK),
                "0",
            ));
        }
        if flags & FLAG_R != 0 {
            return Err(Error {
                layer: Layer::Gre,
                offset: 0,
                kind: ErrorKind::Unsupported {
                    what: "GRE source routing (RFC 1701 R bit)",
                    value: 1,
                },
            });
        }
        if len < packet.header_len() {
            return Err(truncated(packet.header_len(), len));
        }
        Ok(packet)
    }

    #[inline(always)]
    fn flags(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[0], b[1]])
    }

    #[inline(always)]
    pub fn checksum_present(&self) -> bool {
        self.flags() & FLAG_C != 0
    }
    #[inline(always)]
    pub fn key_present(&self) -> bool {
        self.flags() & FLAG_K != 0
    }
    #[inline(always)]
    pub fn seq_present(&self) -> bool {
        self.flags() & FLAG_S != 0
    }
    #[inline(always)]
    pub fn version(&self) -> u8 {
        (self.flags() & VERSION_MASK) as u8
    }
    #[inline(always)]
    pub fn protocol(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::PROTOCOL.start], b[field::PROTOCOL.start + 1]])
    }

    /// The header's length: 4, plus 4 per optional field present.
    #[inline(always)]
    pub fn header_len(&self) -> usize {
        field::FIXED_LEN
            + 4 * (usize::from(self.checksum_present())
                + usize::from(self.key_present())
                + usize::from(self.seq_present()))
    }

    #[inline(always)]
    fn word_at(&self, at: usize) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
    }

    /// The checksum field, when present.
    #[inline(always)]
    pub fn checksum(&self) -> Option<u16> {
        self.checksum_present()
            .then(|| (self.word_at(field::FIXED_LEN) >> 16) as u16)
    }
    #[inline(always)]
    pub fn key(&self) -> Option<u32> {
        let at = field::FIXED_LEN + 4 * usize::from(self.checksum_present());
        self.key_present().then(|| self.word_at(at))
    }
    #[inline(always)]
    pub fn seq(&self) -> Option<u32> {
        let at = field::FIXED_LEN
            + 4 * (usize::from(self.checksum_present()) + usize::from(self.key_present()));
        self.seq_present().then(|| self.word_at(at))
    }

    /// True when the checksum field is absent or matches the buffer (the
    /// header and what follows it: give the whole GRE packet).
    pub fn verify_checksum(&self) -> bool {
        !self.checksum_present() || internet_checksum(self.buffer.as_ref()) == 0
    }

    /// The bytes after the header.
    #[inline(always)]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Computes the checksum over the whole buffer (header and payload:
    /// write the payload first) and stores it. No effect without the C bit.
    pub fn fill_checksum(&mut self) {
        if !self.checksum_present() {
            return;
        }
        let at = field::FIXED_LEN;
        self.buffer.as_mut()[at..at + 2].fill(0);
        let sum = internet_checksum(self.buffer.as_ref());
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    }
}

/// The one's complement of the one's complement sum of 16-bit words.
fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

#[cold]
#[inline(never)]
fn truncated(required: usize, available: usize) -> Error {
    Error::truncated(
        Layer::Gre,
        available,
        required,
        available,
        LenSource::Captured,
    )
}

/// A GRE header, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub protocol: u16,
    /// Carry a checksum (filled by [`Packet::fill_checksum`] once the
    /// payload is in place).
    pub checksum: bool,
    pub key: Option<u32>,
    pub seq: Option<u32>,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Repr {
        Repr {
            protocol: packet.protocol(),
            checksum: packet.checksum_present(),
            key: packet.key(),
            seq: packet.seq(),
        }
    }

    pub fn buffer_len(&self) -> usize {
        field::FIXED_LEN
            + 4 * (usize::from(self.checksum)
                + usize::from(self.key.is_some())
                + usize::from(self.seq.is_some()))
    }

    /// Writes the header into the first [`Repr::buffer_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let mut flags = 0u16;
        if self.checksum {
            flags |= FLAG_C;
        }
        if self.key.is_some() {
            flags |= FLAG_K;
        }
        if self.seq.is_some() {
            flags |= FLAG_S;
        }
        let b = packet.buffer.as_mut();
        b[field::FLAGS].copy_from_slice(&flags.to_be_bytes());
        b[field::PROTOCOL].copy_from_slice(&self.protocol.to_be_bytes());
        let mut at = field::FIXED_LEN;
        if self.checksum {
            b[at..at + 4].fill(0);
            at += 4;
        }
        for word in [self.key, self.seq].into_iter().flatten() {
            b[at..at + 4].copy_from_slice(&word.to_be_bytes());
            at += 4;
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// GRE with checksum, key 0x01020304 and sequence 7 over TEB, then two
    /// payload bytes; the checksum computed by hand: ~(0xB000 + 0x6558 +
    /// 0x0102 + 0x0304 + 0x0007 + 0xAABB) = 0x1C420, folded 0xC421, inverted 0x3BDE.
    static KEYED: [u8; 18] = [
        0xB0, 0x00, 0x65, 0x58, 0x3B, 0xDE, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00,
        0x07, 0xAA, 0xBB,
    ];

    #[test]
    fn reads_every_optional_field() {
        let p = Packet::new_checked(&KEYED[..]).unwrap();
        assert_eq!(p.header_len(), 16);
        assert_eq!(p.protocol(), protocol::TEB);
        assert_eq!(
            (p.checksum(), p.key(), p.seq()),
            (Some(0x3BDE), Some(0x0102_0304), Some(7))
        );
        assert!(p.verify_checksum());
        assert_eq!(p.payload(), &[0xAA, 0xBB]);
    }

    #[test]
    fn repr_round_trips_and_fills_the_checksum() {
        let repr = Repr::parse(&Packet::new_checked(&KEYED[..]).unwrap());
        let mut bytes = vec![0u8; repr.buffer_len() + 2];
        bytes[16..].copy_from_slice(&[0xAA, 0xBB]);
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut p);
        p.fill_checksum();
        assert_eq!(bytes, KEYED);
    }

    #[test]
    fn refuses_version_routing_and_truncation_by_name() {
        let err = Packet::new_checked(&[0x00, 0x01, 0x88, 0x0B][..]).unwrap_err();
        assert_eq!(err.to_string(), "gre at byte 1: version is 1, expected 0");
        let err = Packet::new_checked(&[0x40, 0x00, 0x08, 0x00][..]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "gre at byte 0: unsupported GRE source routing (RFC 1701 R bit) 1"
        );
        for len in 0..KEYED.len() - 2 {
            let err = Packet::new_checked(&KEYED[..len]).unwrap_err();
            assert_eq!((err.layer, err.offset), (Layer::Gre, len), "{len}");
        }
    }
}
