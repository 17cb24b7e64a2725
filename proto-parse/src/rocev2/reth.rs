//! RDMA Extended Transport Header (IBTA vol. 1, 9.3.3): remote virtual
//! address, R_Key and DMA length of an RDMA Write or Read Request.

use super::{Field, be32, be64, check_len};
use crate::{Error, Layer};

/// A read/write view of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;
    pub const VA: Field = 0..8;
    pub const R_KEY: Field = 8..12;
    pub const DMA_LEN: Field = 12..16;
}

/// Length of the RETH.
pub const HEADER_LEN: usize = field::DMA_LEN.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length (emitting only).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking it holds a whole RETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let len = buffer.as_ref().len();
        check_len(Layer::Reth, 0, HEADER_LEN, len, usize::MAX)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Remote virtual address.
    #[inline]
    pub fn va(&self) -> u64 {
        be64(self.buffer.as_ref(), field::VA)
    }
    #[inline]
    pub fn r_key(&self) -> u32 {
        be32(self.buffer.as_ref(), field::R_KEY)
    }
    /// Length of the whole RDMA operation in bytes.
    #[inline]
    pub fn dma_len(&self) -> u32 {
        be32(self.buffer.as_ref(), field::DMA_LEN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    pub fn set_va(&mut self, value: u64) {
        self.buffer.as_mut()[field::VA].copy_from_slice(&value.to_be_bytes());
    }
    #[inline]
    pub fn set_r_key(&mut self, value: u32) {
        self.buffer.as_mut()[field::R_KEY].copy_from_slice(&value.to_be_bytes());
    }
    #[inline]
    pub fn set_dma_len(&mut self, value: u32) {
        self.buffer.as_mut()[field::DMA_LEN].copy_from_slice(&value.to_be_bytes());
    }
}

/// An owned RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub va: u64,
    pub r_key: u32,
    pub dma_len: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Repr {
        Repr {
            va: packet.va(),
            r_key: packet.r_key(),
            dma_len: packet.dma_len(),
        }
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_r_key(self.r_key);
        packet.set_dma_len(self.dma_len);
    }
}

impl core::fmt::Display for Repr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "RETH va=0x{:016x} rkey=0x{:08x} len={}",
            self.va, self.r_key, self.dma_len
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// RETH of frame 6 of montybeatnik_roce_capture_read-write-ecn.pcap
    /// (RDMA Read Request of 4096 bytes).
    static RETH_BYTES: [u8; 16] = [
        0x00, 0x00, 0xaa, 0xab, 0x09, 0xdd, 0x50, 0x00, 0x00, 0x00, 0x02, 0xd5, 0x00, 0x00, 0x10,
        0x00,
    ];

    fn repr() -> Repr {
        Repr {
            va: 0x0000_aaab_09dd_5000,
            r_key: 0x2d5,
            dma_len: 4096,
        }
    }

    #[test]
    fn test_parse() {
        let packet = Packet::new_checked(&RETH_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&packet), repr());
    }

    #[test]
    fn test_emit() {
        let mut bytes = vec![0xa5; HEADER_LEN];
        repr().emit(&mut Packet::new_unchecked(&mut bytes));
        assert_eq!(bytes, RETH_BYTES);
    }

    #[test]
    fn test_truncated() {
        let err = Packet::new_checked(&RETH_BYTES[..15]).unwrap_err();
        assert_eq!((err.layer, err.offset), (Layer::Reth, 15));
    }
}
