//! Views of the type-specific headers (sections 3 to 7): what
//! [`Packet::data`](super::Packet::data) and its siblings hand out once the
//! packet's type and length are checked.

use core::ops::Range;

use super::field;
use super::packet::{be16, be32, be64};
use super::repr::SackBitmap;
use super::{CcAlgo, CtrlOp, DataOp, FbFlags, Features, NackCode};
/// The DATA header (section 3).
#[derive(Debug, Clone, Copy)]
pub struct Data<'a> {
    pub(super) buf: &'a [u8],
    pub(super) op: DataOp,
}

impl Data<'_> {
    #[inline]
    pub fn op(&self) -> DataOp {
        self.op
    }

    #[inline]
    pub fn reserved(&self) -> u8 {
        self.buf[field::DATA_RESERVED]
    }

    /// Payload bytes as sent (before any trimming).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.buf, field::PAYLOAD_LEN)
    }

    #[inline]
    pub fn msg_id(&self) -> u32 {
        be32(self.buf, field::MSG_ID)
    }

    #[inline]
    pub fn msg_offset(&self) -> u32 {
        be32(self.buf, field::MSG_OFFSET)
    }

    #[inline]
    pub fn msg_len(&self) -> u32 {
        be32(self.buf, field::MSG_LEN)
    }

    /// WRITE, WRITE_IMM and READ_REQ only.
    #[inline]
    pub fn remote_va(&self) -> Option<u64> {
        self.op
            .has_remote_address()
            .then(|| be64(self.buf, field::REMOTE_VA))
    }

    /// WRITE, WRITE_IMM and READ_REQ only.
    #[inline]
    pub fn rkey(&self) -> Option<u32> {
        self.op
            .has_remote_address()
            .then(|| be32(self.buf, field::RKEY))
    }

    /// SEND_IMM and WRITE_IMM only.
    #[inline]
    pub fn imm_data(&self) -> Option<u32> {
        self.op.imm_data_field().map(|f| be32(self.buf, f))
    }
}

/// The feedback block (section 4) of ACK, NACK, CNP and PROBE_REPLY.
#[derive(Debug, Clone, Copy)]
pub struct Feedback<'a> {
    pub(super) buf: &'a [u8],
}

impl Feedback<'_> {
    #[inline]
    pub fn flags(&self) -> FbFlags {
        FbFlags::from_bits_retain(self.buf[field::FB_FLAGS])
    }

    #[inline]
    pub fn sack_words(&self) -> u8 {
        self.buf[field::SACK_WORDS]
    }

    #[inline]
    pub fn echo_ev(&self) -> u16 {
        be16(self.buf, field::ECHO_EV)
    }

    /// PSN of the triggering packet (PROBE_REPLY: the probe sequence number).
    #[inline]
    pub fn echo_psn(&self) -> u32 {
        be32(self.buf, field::ECHO_PSN)
    }

    /// T1: tx_ts of the triggering packet.
    #[inline]
    pub fn echo_tx_ts(&self) -> u32 {
        be32(self.buf, field::ECHO_TX_TS)
    }

    /// T2: receiver clock when the triggering packet arrived.
    #[inline]
    pub fn rx_ts(&self) -> u32 {
        be32(self.buf, field::RX_TS)
    }

    #[inline]
    pub fn ce_count(&self) -> u16 {
        be16(self.buf, field::CE_COUNT)
    }

    #[inline]
    pub fn rx_buf_level(&self) -> u8 {
        self.buf[field::RX_BUF_LEVEL]
    }

    #[inline]
    pub fn fwd_hops(&self) -> u8 {
        self.buf[field::FWD_HOPS]
    }

    /// Bytes beyond the cumulative ack the sender may send; `u32::MAX` =
    /// not credit-limited.
    #[inline]
    pub fn credit(&self) -> u32 {
        be32(self.buf, field::CREDIT)
    }
}

/// An ACK: feedback block, sack_base and 0 to 4 SACK words.
#[derive(Debug, Clone, Copy)]
pub struct Ack<'a> {
    pub(super) feedback: Feedback<'a>,
    pub(super) words: u8,
}

impl<'a> Ack<'a> {
    #[inline]
    pub fn feedback(&self) -> Feedback<'a> {
        self.feedback
    }

    #[inline]
    pub fn sack_words(&self) -> u8 {
        self.words
    }

    #[inline]
    pub fn sack_base(&self) -> u32 {
        be32(self.feedback.buf, field::SACK_BASE)
    }

    #[inline]
    pub fn sack_bitmap(&self) -> &'a [u8] {
        &self.feedback.buf[field::SACK_BITMAP(self.words)]
    }

    /// The bitmap as words, for state machines that keep it.
    #[inline]
    pub fn sack(&self) -> SackBitmap {
        let mut sack = SackBitmap::with_words(self.words);
        for (i, chunk) in self
            .sack_bitmap()
            .chunks_exact(field::SACK_WORD_LEN)
            .enumerate()
        {
            sack.set_word(i, be64(chunk, 0..8));
        }
        sack
    }

    /// Whether bit `i` (counted from the most significant bit of the first
    /// bitmap byte) is set.
    #[inline]
    pub fn sack_bit(&self, i: usize) -> bool {
        self.sack_bitmap()
            .get(i / 8)
            .is_some_and(|byte| byte & (0x80 >> (i % 8)) != 0)
    }

    /// PSNs the bitmap reports received, in increasing order.
    #[inline]
    pub fn sacked_psns(&self) -> impl Iterator<Item = u32> + 'a {
        let base = self.sack_base();
        let bitmap = self.sack_bitmap();
        (0..bitmap.len() * 8)
            .filter(move |&i| bitmap[i / 8] & (0x80 >> (i % 8)) != 0)
            .map(move |i| base.wrapping_add(i as u32))
    }

    /// Received PSN ranges `[start, end)` of the bitmap, for display.
    #[inline]
    pub fn sack_ranges(&self) -> Vec<Range<u32>> {
        let mut ranges: Vec<Range<u32>> = Vec::new();
        for psn in self.sacked_psns() {
            match ranges.last_mut() {
                Some(last) if last.end == psn => last.end = psn.wrapping_add(1),
                _ => ranges.push(psn..psn.wrapping_add(1)),
            }
        }
        ranges
    }
}

/// A NACK.
#[derive(Debug, Clone, Copy)]
pub struct Nack<'a> {
    pub(super) feedback: Feedback<'a>,
}

impl<'a> Nack<'a> {
    #[inline]
    pub fn feedback(&self) -> Feedback<'a> {
        self.feedback
    }

    #[inline]
    pub fn code(&self) -> NackCode {
        NackCode::from(self.feedback.buf[field::NACK_CODE])
    }

    /// RNR back-off in units of 10 us.
    #[inline]
    pub fn rnr_timer(&self) -> u8 {
        self.feedback.buf[field::RNR_TIMER]
    }

    #[inline]
    pub fn reserved(&self) -> u16 {
        be16(self.feedback.buf, field::NACK_RESERVED)
    }

    /// The PSN to retransmit (GAP/TRIMMED) or the PSN refused.
    #[inline]
    pub fn nack_psn(&self) -> u32 {
        be32(self.feedback.buf, field::NACK_PSN)
    }
}

/// The CTRL header (section 5).
#[derive(Debug, Clone, Copy)]
pub struct Ctrl<'a> {
    pub(super) buf: &'a [u8],
}

impl Ctrl<'_> {
    #[inline]
    pub fn op(&self) -> CtrlOp {
        CtrlOp::from(self.buf[field::CTRL_OP])
    }

    #[inline]
    pub fn cc_algo(&self) -> CcAlgo {
        CcAlgo::from(self.buf[field::CC_ALGO])
    }

    /// Largest payload the sender puts in one DATA packet (11.13).
    #[inline]
    pub fn mtu(&self) -> u16 {
        be16(self.buf, field::MTU)
    }

    #[inline]
    pub fn init_psn(&self) -> u32 {
        be32(self.buf, field::INIT_PSN)
    }

    #[inline]
    pub fn features(&self) -> Features {
        Features::from_bits_retain(be32(self.buf, field::FEATURES))
    }

    #[inline]
    pub fn ts_unit_ps(&self) -> u32 {
        be32(self.buf, field::TS_UNIT_PS)
    }
}
