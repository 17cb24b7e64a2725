//! Datagram Extended Transport Header (IBTA vol. 1, 9.3.2) of UD packets:
//! Q_Key and source QP.

use super::{Field, be24, be32, check_len};
use crate::{Error, Layer};

/// A read/write view of a DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;
    pub const Q_KEY: Field = 0..4;
    pub const RESERVED: usize = 4;
    pub const SRC_QP: Field = 5..8;
}

/// Length of the DETH.
pub const HEADER_LEN: usize = field::SRC_QP.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length (emitting only).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking it holds a whole DETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let len = buffer.as_ref().len();
        check_len(Layer::Deth, 0, HEADER_LEN, len, usize::MAX)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn q_key(&self) -> u32 {
        be32(self.buffer.as_ref(), field::Q_KEY)
    }
    #[inline]
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }
    /// Source queue pair (24 bits).
    #[inline]
    pub fn src_qp(&self) -> u32 {
        be24(self.buffer.as_ref(), field::SRC_QP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    pub fn set_q_key(&mut self, value: u32) {
        self.buffer.as_mut()[field::Q_KEY].copy_from_slice(&value.to_be_bytes());
    }
    #[inline]
    pub fn set_reserved(&mut self, value: u8) {
        self.buffer.as_mut()[field::RESERVED] = value;
    }
    #[inline]
    pub fn set_src_qp(&mut self, value: u32) {
        self.buffer.as_mut()[field::SRC_QP].copy_from_slice(&value.to_be_bytes()[1..]);
    }
}

/// An owned DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub q_key: u32,
    pub reserved: u8,
    /// 24 bits
    pub src_qp: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Repr {
        Repr {
            q_key: packet.q_key(),
            reserved: packet.reserved(),
            src_qp: packet.src_qp(),
        }
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_q_key(self.q_key);
        packet.set_reserved(self.reserved);
        packet.set_src_qp(self.src_qp);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// DETH of a CM MAD (UD Send Only to QP1, Q_Key 0x80010000, source QP 1).
    static DETH_BYTES: [u8; 8] = [0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01];

    fn repr() -> Repr {
        Repr {
            q_key: 0x8001_0000,
            reserved: 0,
            src_qp: 1,
        }
    }

    #[test]
    fn test_parse() {
        let packet = Packet::new_checked(&DETH_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&packet), repr());
    }

    #[test]
    fn test_truncation_names_deth() {
        let err = Packet::new_checked(&DETH_BYTES[..7]).unwrap_err();
        assert_eq!((err.layer.as_str(), err.offset), ("infiniband.deth", 7));
    }

    #[test]
    fn test_emit() {
        let mut bytes = vec![0xa5; HEADER_LEN];
        repr().emit(&mut Packet::new_unchecked(&mut bytes));
        assert_eq!(bytes, DETH_BYTES);
    }
}
