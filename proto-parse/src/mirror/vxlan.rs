//! VXLAN (RFC 7348) on UDP port 4789: an Ethernet frame after an 8-byte
//! header. Some fabrics send their mirror sessions this way.
//!
//! ```text
//! |R|R|R|R|I|R|R|R|            Reserved                           |
//! |                VXLAN Network Identifier (VNI) |   Reserved    |
//! ```

use crate::{Error, Layer, LenSource};

/// The IANA port.
pub const UDP_PORT: u16 = 4789;

pub mod field {
    use core::ops::Range;
    pub const FLAGS: usize = 0;
    pub const VNI: Range<usize> = 4..7;
    pub const HEADER_LEN: usize = 8;
}

/// The I flag: the VNI is valid (RFC 7348 requires it set).
const FLAG_I: u8 = 0x08;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Checks the length and the I flag (offsets from the VXLAN header).
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let packet = Packet::new_unchecked(buffer);
        let b = packet.buffer.as_ref();
        if b.len() < field::HEADER_LEN {
            return Err(Error::truncated(
                Layer::Vxlan,
                b.len(),
                field::HEADER_LEN,
                b.len(),
                LenSource::Captured,
            ));
        }
        if b[field::FLAGS] & FLAG_I == 0 {
            return Err(Error::bad_value(
                Layer::Vxlan,
                0,
                "flags",
                u64::from(b[field::FLAGS]),
                "the I bit (0x08) set",
            ));
        }
        Ok(packet)
    }

    pub fn vni(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VNI];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::HEADER_LEN..]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub vni: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Repr {
        Repr { vni: packet.vni() }
    }
    pub const fn buffer_len(&self) -> usize {
        field::HEADER_LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let b = packet.buffer.as_mut();
        b[..field::HEADER_LEN].fill(0);
        b[field::FLAGS] = FLAG_I;
        b[field::VNI].copy_from_slice(&self.vni.to_be_bytes()[1..]);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn vni_round_trips_and_the_i_flag_is_required() {
        let bytes = [0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.vni(), 0x12_3456);
        let mut out = [0xFFu8; 8];
        Repr::parse(&p).emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        let err = Packet::new_checked(&[0u8; 8][..]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "vxlan at byte 0: flags is 0, expected the I bit (0x08) set"
        );
        assert_eq!(Packet::new_checked(&bytes[..5]).unwrap_err().offset, 5);
    }
}
