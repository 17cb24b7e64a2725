//! 24-bit packet sequence numbers (IBTA 9.7.1): the BTH carries the PSN
//! in 24 bits and every comparison of two PSNs is serial, modulo 2^24.

/// The bits of a PSN (and of an AETH's MSN).
pub const PSN_MASK: u32 = 0x00FF_FFFF;

/// Sign-extends a 24-bit difference: `sext24(b.wrapping_sub(a) & PSN_MASK)`
/// is how far PSN `b` is after PSN `a`, negative when it is before (the
/// half of the sequence space behind `a`).
#[inline]
pub const fn sext24(d: u32) -> i32 {
    ((d << 8) as i32) >> 8
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_24_bit_difference_is_signed_by_its_top_bit() {
        assert_eq!(sext24(0), 0);
        assert_eq!(sext24(1), 1);
        assert_eq!(sext24(0x7F_FFFF), 0x7F_FFFF);
        assert_eq!(sext24(0x80_0000), -0x80_0000);
        assert_eq!(sext24(0xFF_FFFF), -1);
        // Bits above the 24th are ignored.
        assert_eq!(sext24(0xFF00_0001), 1);
    }

    #[test]
    fn differences_across_the_wrap_are_small() {
        let after = |a: u32, b: u32| sext24(b.wrapping_sub(a) & PSN_MASK);
        assert_eq!(after(0xFF_FFFF, 0), 1);
        assert_eq!(after(0, 0xFF_FFFF), -1);
        assert_eq!(after(0xFF_FFF0, 0x10), 0x20);
        assert_eq!(after(0x10, 0xFF_FFF0), -0x20);
    }
}
