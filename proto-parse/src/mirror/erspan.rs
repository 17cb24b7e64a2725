//! ERSPAN type II and III headers (draft-foschiano-erspan-03), carried by
//! GRE protocol 0x88BE (II) and 0x22EB (III). Type I has no header (GRE
//! 0x88BE without a sequence number): the mirrored frame follows GRE.
//!
//! ```text
//! type II (8 bytes)
//! |  Ver  |          VLAN         | COS | En|T|    Session ID     |
//! |      Reserved         |                 Index                 |
//! type III (12 bytes, + 8 with the platform-specific subheader)
//! |  Ver  |          VLAN         | COS |BSO|T|    Session ID     |
//! |                          Timestamp                            |
//! |             SGT               |P|    FT   |   Hw ID   |D|Gra|O|
//! | Platf ID  |          Platform-specific info (58 bits) ...     |
//! ```

use crate::{Error, Layer, LenSource};

/// Byte ranges of the headers.
pub mod field {
    use core::ops::Range;
    /// Version, VLAN, COS, En/BSO, T, session id (both types).
    pub const WORD0: Range<usize> = 0..4;
    /// Type II: reserved and index.
    pub const INDEX: Range<usize> = 4..8;
    /// Type III: the switch's timestamp (granularity in `Gra`).
    pub const TIMESTAMP: Range<usize> = 4..8;
    /// Type III: SGT, P, FT, Hw ID, D, Gra, O.
    pub const WORD2: Range<usize> = 8..12;
    /// Type III: the optional platform-specific subheader.
    pub const PLATFORM: Range<usize> = 12..20;
    pub const II_LEN: usize = 8;
    pub const III_LEN: usize = 12;
    pub const PLATFORM_LEN: usize = 8;
}

/// The version field of a header (1: type II, 2: type III).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    II,
    III,
}

impl Version {
    pub const fn number(self) -> u8 {
        match self {
            Version::II => 1,
            Version::III => 2,
        }
    }
}

/// The unit of a type III timestamp (`Gra`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// 00: 100 microseconds.
    Us100,
    /// 01: 100 nanoseconds.
    Ns100,
    /// 10: IEEE 1588: nanoseconds of the second (its seconds in the
    /// platform-specific subheader).
    Ieee1588,
    /// 11: user-configured.
    User,
}

impl Granularity {
    pub const fn from_bits(bits: u8) -> Granularity {
        match bits & 3 {
            0 => Granularity::Us100,
            1 => Granularity::Ns100,
            2 => Granularity::Ieee1588,
            _ => Granularity::User,
        }
    }
    pub const fn bits(self) -> u8 {
        match self {
            Granularity::Us100 => 0,
            Granularity::Ns100 => 1,
            Granularity::Ieee1588 => 2,
            Granularity::User => 3,
        }
    }
    pub const fn as_str(self) -> &'static str {
        match self {
            Granularity::Us100 => "100us",
            Granularity::Ns100 => "100ns",
            Granularity::Ieee1588 => "ieee1588",
            Granularity::User => "user",
        }
    }
}

/// The switch's timestamp of a type III copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SwitchTime {
    /// The header's 32-bit timestamp, in units of `granularity`.
    pub raw: u32,
    pub granularity: Granularity,
    /// The seconds of an IEEE 1588 time, from a platform-specific
    /// subheader that carries them (platform ids 3, 5, 6, 7).
    pub seconds: Option<u32>,
}

impl SwitchTime {
    /// The time in ns since the PTP epoch, when the copy carries a whole
    /// IEEE 1588 time (seconds and nanoseconds); `None` otherwise (the
    /// other granularities wrap within minutes and have an epoch of the
    /// switch's own).
    pub fn full_ns(&self) -> Option<u64> {
        match (self.granularity, self.seconds) {
            (Granularity::Ieee1588, Some(s)) if self.raw < 1_000_000_000 => {
                Some(u64::from(s) * 1_000_000_000 + u64::from(self.raw))
            }
            _ => None,
        }
    }
}

/// Frame type (`FT`) of a type III copy.
pub mod frame_type {
    pub const ETHERNET: u8 = 0;
    pub const IP: u8 = 2;
}

/// An ERSPAN II or III header over a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

#[cold]
#[inline(never)]
fn truncated(required: usize, available: usize) -> Error {
    Error::truncated(
        Layer::Erspan,
        available,
        required,
        available,
        LenSource::Captured,
    )
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Checks that the version is 1 (type II) or 2 (type III) and that the
    /// header, subheader included, was captured. Offsets of the error are
    /// from the first byte of the ERSPAN header.
    #[inline(always)]
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let packet = Packet::new_unchecked(buffer);
        let len = packet.buffer.as_ref().len();
        if len < field::II_LEN {
            return Err(truncated(field::II_LEN, len));
        }
        let ver = packet.buffer.as_ref()[0] >> 4;
        if ver != 1 && ver != 2 {
            return Err(Error::bad_value(
                Layer::Erspan,
                0,
                "version",
                u64::from(ver),
                "1 (type II) or 2 (type III)",
            ));
        }
        if ver == 2 && len < field::III_LEN {
            return Err(truncated(field::III_LEN, len));
        }
        if len < packet.header_len() {
            return Err(truncated(packet.header_len(), len));
        }
        Ok(packet)
    }

    #[inline(always)]
    fn word(&self, at: usize) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
    }

    #[inline(always)]
    pub fn version(&self) -> Version {
        if self.buffer.as_ref()[0] >> 4 == 2 {
            Version::III
        } else {
            Version::II
        }
    }
    /// The mirrored frame's VLAN (12 bits).
    #[inline(always)]
    pub fn vlan(&self) -> u16 {
        ((self.word(0) >> 16) & 0x0FFF) as u16
    }
    #[inline(always)]
    pub fn cos(&self) -> u8 {
        ((self.word(0) >> 13) & 7) as u8
    }
    /// Type II: the original frame's encapsulation (En); type III: bad or
    /// short frame status (BSO).
    #[inline(always)]
    pub fn encap_or_bso(&self) -> u8 {
        ((self.word(0) >> 11) & 3) as u8
    }
    /// T: the switch cut the copy (it is shorter than the frame was).
    #[inline(always)]
    pub fn truncated(&self) -> bool {
        self.word(0) & 0x0400 != 0
    }
    /// The mirror session (10 bits).
    #[inline(always)]
    pub fn session_id(&self) -> u16 {
        (self.word(0) & 0x03FF) as u16
    }
    /// Type II: the port index (20 bits).
    #[inline(always)]
    pub fn index(&self) -> u32 {
        self.word(field::INDEX.start) & 0x000F_FFFF
    }

    #[inline(always)]
    fn word2(&self) -> u32 {
        match self.version() {
            Version::III => self.word(field::WORD2.start),
            Version::II => 0,
        }
    }
    /// Type III: the security group tag.
    #[inline(always)]
    pub fn sgt(&self) -> u16 {
        (self.word2() >> 16) as u16
    }
    /// Type III: the frame type (`FT`: 0 Ethernet, 2 IP).
    #[inline(always)]
    pub fn frame_type(&self) -> u8 {
        ((self.word2() >> 10) & 0x1F) as u8
    }
    #[inline(always)]
    pub fn hw_id(&self) -> u8 {
        ((self.word2() >> 4) & 0x3F) as u8
    }
    /// Type III: D, true when the copy was taken at egress.
    #[inline(always)]
    pub fn egress(&self) -> bool {
        self.word2() & 0x8 != 0
    }
    #[inline(always)]
    pub fn granularity(&self) -> Granularity {
        Granularity::from_bits(((self.word2() >> 1) & 3) as u8)
    }
    /// Type III: O, the platform-specific subheader follows.
    #[inline(always)]
    pub fn has_platform(&self) -> bool {
        self.word2() & 1 != 0
    }
    /// The platform-specific subheader: its id (6 bits) and the 58 bits
    /// after it.
    #[inline(always)]
    pub fn platform(&self) -> Option<(u8, u64)> {
        if !self.has_platform() {
            return None;
        }
        let b = self.buffer.as_ref();
        let raw = u64::from_be_bytes(b[field::PLATFORM].try_into().ok()?);
        Some(((raw >> 58) as u8, raw & ((1 << 58) - 1)))
    }
    /// Type III: the switch's timestamp.
    #[inline(always)]
    pub fn switch_time(&self) -> Option<SwitchTime> {
        if self.version() != Version::III {
            return None;
        }
        let seconds = self
            .platform()
            .filter(|(id, _)| matches!(id, 3 | 5 | 6 | 7))
            .map(|(_, info)| info as u32);
        Some(SwitchTime {
            raw: self.word(field::TIMESTAMP.start),
            granularity: self.granularity(),
            seconds,
        })
    }

    #[inline(always)]
    pub fn header_len(&self) -> usize {
        match self.version() {
            Version::II => field::II_LEN,
            Version::III => {
                field::III_LEN
                    + if self.has_platform() {
                        field::PLATFORM_LEN
                    } else {
                        0
                    }
            }
        }
    }

    /// The mirrored frame (or IP packet, FT 2).
    #[inline(always)]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// An ERSPAN header, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub version: Version,
    pub vlan: u16,
    pub cos: u8,
    pub truncated: bool,
    pub session_id: u16,
    /// Type II only.
    pub index: u32,
    /// Type III only: the timestamp word, granularity, frame type,
    /// direction, hardware id and platform subheader.
    pub timestamp: u32,
    pub granularity: Granularity,
    pub frame_type: u8,
    pub egress: bool,
    pub hw_id: u8,
    pub platform: Option<(u8, u64)>,
}

impl Repr {
    /// A type II header of session `session_id`.
    pub fn type_ii(session_id: u16) -> Repr {
        Repr {
            version: Version::II,
            vlan: 0,
            cos: 0,
            truncated: false,
            session_id: session_id & 0x3FF,
            index: 0,
            timestamp: 0,
            granularity: Granularity::Us100,
            frame_type: frame_type::ETHERNET,
            egress: false,
            hw_id: 0,
            platform: None,
        }
    }

    /// A type III header of session `session_id` with an IEEE 1588 time
    /// (nanoseconds in the header, seconds in a platform id 3 subheader).
    pub fn type_iii_ptp(session_id: u16, time_ns: u64) -> Repr {
        Repr {
            version: Version::III,
            timestamp: (time_ns % 1_000_000_000) as u32,
            granularity: Granularity::Ieee1588,
            platform: Some((3, (time_ns / 1_000_000_000) & 0xFFFF_FFFF)),
            ..Repr::type_ii(session_id)
        }
    }

    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Repr {
        Repr {
            version: packet.version(),
            vlan: packet.vlan(),
            cos: packet.cos(),
            truncated: packet.truncated(),
            session_id: packet.session_id(),
            index: if packet.version() == Version::II {
                packet.index()
            } else {
                0
            },
            timestamp: packet.switch_time().map_or(0, |t| t.raw),
            granularity: packet.granularity(),
            frame_type: packet.frame_type(),
            egress: packet.egress(),
            hw_id: packet.hw_id(),
            platform: packet.platform(),
        }
    }

    pub fn buffer_len(&self) -> usize {
        match self.version {
            Version::II => field::II_LEN,
            Version::III => {
                field::III_LEN
                    + if self.platform.is_some() {
                        field::PLATFORM_LEN
                    } else {
                        0
                    }
            }
        }
    }

    /// Writes the header into the first [`Repr::buffer_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let b = packet.buffer.as_mut();
        let word0 = u32::from(self.version.number()) << 28
            | u32::from(self.vlan & 0x0FFF) << 16
            | u32::from(self.cos & 7) << 13
            | u32::from(self.truncated) << 10
            | u32::from(self.session_id & 0x3FF);
        b[field::WORD0].copy_from_slice(&word0.to_be_bytes());
        match self.version {
            Version::II => {
                b[field::INDEX].copy_from_slice(&(self.index & 0x000F_FFFF).to_be_bytes());
            }
            Version::III => {
                b[field::TIMESTAMP].copy_from_slice(&self.timestamp.to_be_bytes());
                let word2 = u32::from(self.frame_type & 0x1F) << 10
                    | u32::from(self.hw_id & 0x3F) << 4
                    | u32::from(self.egress) << 3
                    | u32::from(self.granularity.bits()) << 1
                    | u32::from(self.platform.is_some());
                b[field::WORD2].copy_from_slice(&word2.to_be_bytes());
                if let Some((id, info)) = self.platform {
                    let raw = u64::from(id & 0x3F) << 58 | info & ((1 << 58) - 1);
                    b[field::PLATFORM].copy_from_slice(&raw.to_be_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// Type III, VLAN 0, session 5, timestamp 0x3B9AC9FF (999,999,999 ns),
    /// FT 0, D egress, Gra 10 (IEEE 1588), O; platform id 3, port 7,
    /// seconds 1,700,000,000 (0x6553F100).
    static TYPE_III: [u8; 20] = [
        0x20, 0x00, 0x00, 0x05, 0x3B, 0x9A, 0xC9, 0xFF, 0x00, 0x00, 0x00, 0x0D, 0x0C, 0x00, 0x00,
        0x07, 0x65, 0x53, 0xF1, 0x00,
    ];

    #[test]
    fn type_iii_with_a_ptp_time() {
        let p = Packet::new_checked(&TYPE_III[..]).unwrap();
        assert_eq!(
            (p.version(), p.session_id(), p.header_len()),
            (Version::III, 5, 20)
        );
        assert!(p.egress() && p.has_platform() && !p.truncated());
        assert_eq!(p.platform(), Some((3, 0x0007_6553_F100)));
        let t = p.switch_time().unwrap();
        assert_eq!(t.full_ns(), Some(1_700_000_000_999_999_999));
        let mut repr = Repr::parse(&p);
        assert!(repr.egress);
        let mut bytes = [0u8; 20];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, TYPE_III);
        repr.egress = false;
        repr.platform = Some((3, 1_700_000_000));
        assert_eq!(repr, Repr::type_iii_ptp(5, 1_700_000_000_999_999_999));
    }

    #[test]
    fn type_ii_session_and_truncated_bit() {
        let bytes = [0x10, 0x64, 0x04, 0x2A, 0x00, 0x00, 0x00, 0x09];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            (p.version(), p.vlan(), p.session_id(), p.index()),
            (Version::II, 100, 42, 9)
        );
        assert!(p.truncated());
        assert_eq!(p.switch_time(), None);
        let repr = Repr::parse(&p);
        let mut out = [0u8; 8];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    #[test]
    fn unknown_version_and_truncation_are_named() {
        let err = Packet::new_checked(&[0x30, 0, 0, 1, 0, 0, 0, 0][..]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "erspan at byte 0: version is 3, expected 1 (type II) or 2 (type III)"
        );
        for len in 0..TYPE_III.len() {
            let err = Packet::new_checked(&TYPE_III[..len]).unwrap_err();
            assert_eq!((err.layer, err.offset), (Layer::Erspan, len), "{len}");
        }
    }
}
