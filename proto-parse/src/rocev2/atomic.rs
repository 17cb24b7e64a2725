//! AtomicETH (IBTA vol. 1, 9.3.4: Compare & Swap and Fetch & Add requests)
//! and AtomicAckETH (9.3.6: the original remote data).

use super::{be32, be64};

/// Length of the AtomicETH.
pub const ATOMIC_ETH_LEN: usize = 28;
/// Length of the AtomicAckETH.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;

/// An owned AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicEthRepr {
    pub va: u64,
    pub r_key: u32,
    /// Swap (Compare & Swap) or add (Fetch & Add) data.
    pub swap_add: u64,
    /// Compare data (Compare & Swap).
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Reads an AtomicETH from the first [`ATOMIC_ETH_LEN`] bytes; `None`
    /// if there are fewer.
    pub fn parse(bytes: &[u8]) -> Option<AtomicEthRepr> {
        if bytes.len() < ATOMIC_ETH_LEN {
            return None;
        }
        Some(AtomicEthRepr {
            va: be64(bytes, 0..8),
            r_key: be32(bytes, 8..12),
            swap_add: be64(bytes, 12..20),
            compare: be64(bytes, 20..28),
        })
    }

    /// Writes the header into the first [`ATOMIC_ETH_LEN`] bytes.
    ///
    /// # Panics
    /// If `bytes` is shorter than [`ATOMIC_ETH_LEN`] (an emitting bug).
    pub fn emit(&self, bytes: &mut [u8]) {
        bytes[0..8].copy_from_slice(&self.va.to_be_bytes());
        bytes[8..12].copy_from_slice(&self.r_key.to_be_bytes());
        bytes[12..20].copy_from_slice(&self.swap_add.to_be_bytes());
        bytes[20..28].copy_from_slice(&self.compare.to_be_bytes());
    }
}

/// Reads the original remote data of an AtomicAckETH; `None` if fewer than
/// [`ATOMIC_ACK_ETH_LEN`] bytes.
pub fn parse_atomic_ack(bytes: &[u8]) -> Option<u64> {
    if bytes.len() < ATOMIC_ACK_ETH_LEN {
        return None;
    }
    Some(be64(bytes, 0..8))
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_parse_emit() {
        let repr = AtomicEthRepr {
            va: 0x1122_3344_5566_7788,
            r_key: 0xdead_beef,
            swap_add: 1,
            compare: 2,
        };
        let mut bytes = [0xa5; ATOMIC_ETH_LEN];
        repr.emit(&mut bytes);
        assert_eq!(&bytes[..4], &[0x11, 0x22, 0x33, 0x44]);
        assert_eq!(AtomicEthRepr::parse(&bytes), Some(repr));
        assert_eq!(AtomicEthRepr::parse(&bytes[..27]), None);
        assert_eq!(parse_atomic_ack(&[0, 0, 0, 0, 0, 0, 1, 0]), Some(256));
    }
}
