//! The MetaRoCE v1 layout: every byte range of spec sections 2 to 7, and
//! nothing else. Swapping in the official layout later touches this file
//! and the fixtures next to the views.
//!
//! Offsets count from the first byte of the base header (the first byte of
//! the UDP payload).
#![allow(non_snake_case)]

pub type Field = core::ops::Range<usize>;

// Base header (section 2), 24 bytes on every packet.
/// version (bits 7..4) and type (bits 3..0).
pub const VER_TYPE: usize = 0;
pub const FLAGS: usize = 1;
pub const HLEN: usize = 2;
/// tx_attempt (bits 7..4) and 4 reserved bits.
pub const TX_ATTEMPT: usize = 3;
pub const EV: Field = 4..6;
pub const PATH_SEQ: Field = 6..8;
pub const DST_CONN: Field = 8..12;
pub const SRC_CONN: Field = 12..16;
pub const PSN: Field = 16..20;
pub const TX_TS: Field = 20..24;
pub const BASE_LEN: usize = TX_TS.end;

// DATA (section 3).
pub const DATA_OP: usize = 24;
pub const DATA_RESERVED: usize = 25;
pub const PAYLOAD_LEN: Field = 26..28;
pub const MSG_ID: Field = 28..32;
pub const MSG_OFFSET: Field = 32..36;
pub const MSG_LEN: Field = 36..40;
/// The part every op has; the op decides what follows.
pub const DATA_COMMON_LEN: usize = MSG_LEN.end;
pub const REMOTE_VA: Field = 40..48;
pub const RKEY: Field = 48..52;
pub const IMM_DATA_SEND: Field = 40..44;
pub const IMM_DATA_WRITE: Field = 52..56;

// Feedback block (section 4), shared by ACK, NACK, CNP and PROBE_REPLY.
pub const FB_FLAGS: usize = 24;
pub const SACK_WORDS: usize = 25;
pub const ECHO_EV: Field = 26..28;
pub const ECHO_PSN: Field = 28..32;
pub const ECHO_TX_TS: Field = 32..36;
pub const RX_TS: Field = 36..40;
pub const CE_COUNT: Field = 40..42;
pub const RX_BUF_LEVEL: usize = 42;
pub const FWD_HOPS: usize = 43;
pub const CREDIT: Field = 44..48;
pub const FEEDBACK_LEN: usize = CREDIT.end;

// ACK.
pub const SACK_BASE: Field = 48..52;
pub const SACK_BITMAP_START: usize = SACK_BASE.end;
pub const SACK_WORD_LEN: usize = 8;
pub const MAX_SACK_WORDS: u8 = 4;
pub const fn SACK_BITMAP(words: u8) -> Field {
    SACK_BITMAP_START..SACK_BITMAP_START + words as usize * SACK_WORD_LEN
}

// NACK.
pub const NACK_CODE: usize = 48;
pub const RNR_TIMER: usize = 49;
pub const NACK_RESERVED: Field = 50..52;
pub const NACK_PSN: Field = 52..56;
pub const NACK_LEN: usize = NACK_PSN.end;

// CNP.
pub const CNP_REASON: usize = 48;
pub const CNP_RESERVED: Field = 49..52;
pub const CNP_LEN: usize = CNP_RESERVED.end;

// CTRL (section 5).
pub const CTRL_OP: usize = 24;
pub const CC_ALGO: usize = 25;
pub const MTU: Field = 26..28;
pub const INIT_PSN: Field = 28..32;
pub const FEATURES: Field = 32..36;
pub const TS_UNIT_PS: Field = 36..40;
pub const CTRL_LEN: usize = TS_UNIT_PS.end;

// TLVs (section 6): {type 8, len 8 in 4-byte words incl. these 2 bytes, value}.
pub const TLV_TYPE: usize = 0;
pub const TLV_LEN: usize = 1;
/// The value of the three defined TLVs starts after 2 bytes of padding.
pub const TLV_VALUE_START: usize = 4;
pub const TLV_WORD: usize = 4;
pub const HOP_TELEMETRY_ENTRY_LEN: usize = 8;
pub const PATH_STATUS_ENTRY_LEN: usize = 4;
pub const TS64_LEN: usize = 12;

// Integrity (section 7).
pub const CRC_LEN: usize = 4;
