//! Labels and texts shared by the tree's items and the Info line.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::OnceLock;

use proto_parse::Error;
use proto_parse::metaroce::{FbFlags, Flags, field};

use crate::fields::{Custom, Ei, FlagSet};

use super::model::*;

/// A subtree title, built only when labels are (`on`).
pub(super) fn title<S: Into<Cow<'static, str>>>(
    on: bool,
    text: impl FnOnce() -> S,
) -> Cow<'static, str> {
    if on { text().into() } else { Cow::Borrowed("") }
}

pub(super) fn clamp(range: Range<usize>, captured: usize) -> Range<usize> {
    let start = range.start.min(captured);
    start..range.end.clamp(start, captured)
}

/// An expert note for a `proto_parse` error (`err` has payload offsets;
/// the text gives the frame offset).
pub(super) fn note_for(err: &Error, captured: usize, frame_offset: usize) -> Note {
    let ei = if err.is_capture_truncation() {
        Ei::CaptureTruncated
    } else {
        Ei::Malformed
    };
    Note {
        ei,
        text: err.clone().at_offset(frame_offset).to_string(),
        range: clamp(err.offset..err.offset + 1, captured),
    }
}

/// Appends the names of `names` joined by ',' to `out`.
pub(super) fn push_names<'a>(out: &mut String, names: impl Iterator<Item = &'a str>) {
    for (i, name) in names.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
    }
}

/// Texts that depend on one octet only (flags, lengths in words, op
/// names), built once per process for all 256 values: a packet's labels
/// then cost no formatting and no allocation. Each static is used with one
/// `make` function only.
struct ByteTexts(OnceLock<Box<[Box<str>]>>);

impl ByteTexts {
    const fn new() -> Self {
        ByteTexts(OnceLock::new())
    }

    fn get(&'static self, b: u8, make: fn(u8) -> String) -> &'static str {
        let texts = self
            .0
            .get_or_init(|| (0..=u8::MAX).map(|b| make(b).into_boxed_str()).collect());
        &texts[usize::from(b)]
    }
}

static WORDS_TEXT: ByteTexts = ByteTexts::new();
static RNR_TEXT: ByteTexts = ByteTexts::new();

/// "13 words (52 bytes)" (hlen, TLV length).
pub(super) fn words_text(words: u8) -> &'static str {
    WORDS_TEXT.get(words, |w| {
        format!("{w} words ({} bytes)", usize::from(w) * field::TLV_WORD)
    })
}

/// The label of a flags octet's value (the value-string entry of
/// `metaroce.flags` / `metaroce.fb.flags`, shown as "Flags: SOM,CRC (0x44)"):
/// the names of its set flags joined by ',', "reserved" when a reserved bit
/// is set, "none" when no bit is.
pub fn flag_names(set: FlagSet, bits: u8) -> String {
    let mut out = String::with_capacity(24);
    let reserved = match set {
        FlagSet::Base => {
            push_names(
                &mut out,
                Flags::from_bits_retain(bits).iter_names().map(|(n, _)| n),
            );
            bits & Flags::RESERVED != 0
        }
        FlagSet::Feedback => {
            push_names(
                &mut out,
                FbFlags::from_bits_retain(bits).iter_names().map(|(n, _)| n),
            );
            bits & FbFlags::RESERVED != 0
        }
    };
    if reserved {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str("reserved");
    }
    if out.is_empty() {
        out.push_str("none");
    }
    out
}

/// The label text of a [`Custom`] field's value, which Wireshark asks for
/// only when the item is shown (`BASE_CUSTOM`).
pub fn custom_label(custom: Custom, value: u32) -> Cow<'static, str> {
    match (custom, u8::try_from(value)) {
        (Custom::Words, Ok(w)) => words_text(w).into(),
        (Custom::RnrTimer, Ok(r)) => RNR_TEXT
            .get(r, |r| format!("{r} ({} us)", u32::from(r) * 10))
            .into(),
        (Custom::Credit, _) if value == u32::MAX => "not credit-limited (0xffffffff)".into(),
        _ => value.to_string().into(),
    }
}

/// Appends the PSNs a SACK bitmap reports received (bit `i`, counted from
/// the most significant bit of the first byte, is PSN `base + i`) as
/// inclusive ranges, "a-b,c" (what `Ack::sack_ranges` gives, joined). Reads
/// the bitmap a 64-bit word at a time, a run of bits at a time.
pub(super) fn push_sack_ranges(s: &mut String, base: u32, bitmap: &[u8]) {
    // The run being built, as bit indices [start, end).
    let mut run: Option<(usize, usize)> = None;
    let mut first = true;
    let mut flush = |s: &mut String, (start, end): (usize, usize)| {
        if !first {
            s.push(',');
        }
        first = false;
        let lo = base.wrapping_add(start as u32);
        let hi = base.wrapping_add((end - 1) as u32);
        push_dec(s, lo);
        if hi != lo {
            s.push('-');
            push_dec(s, hi);
        }
    };
    for (wi, chunk) in bitmap.chunks(8).enumerate() {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        let mut w = u64::from_be_bytes(word);
        let mut at = wi * 64;
        while w != 0 {
            let zeros = w.leading_zeros() as usize;
            w <<= zeros;
            at += zeros;
            let ones = (!w).leading_zeros() as usize;
            w = w.checked_shl(ones as u32).unwrap_or(0);
            run = match run {
                Some((start, end)) if end == at => Some((start, at + ones)),
                Some(done) => {
                    flush(s, done);
                    Some((at, at + ones))
                }
                None => Some((at, at + ones)),
            };
            at += ones;
        }
    }
    if let Some(done) = run {
        flush(s, done);
    }
}

/// The Info line is written with these instead of `write!`: it is built
/// for every packet whose tree is shown (the protocol item repeats it), and
/// `core::fmt` costs several times more per number.
pub(super) fn push_dec(s: &mut String, v: impl Into<u64>) {
    s.push_str(itoa::Buffer::new().format(v.into()));
}

/// `label` and `v` in decimal (" PSN=100").
pub(super) fn push_field(s: &mut String, label: &str, v: impl Into<u64>) {
    s.push_str(label);
    push_dec(s, v);
}

/// "0x" and `v` in lower-case hex, no padding.
pub(super) fn push_hex(s: &mut String, v: u32) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 8];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = DIGITS[(v & 0xF) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    s.push_str("0x");
    for &b in &buf[i..] {
        s.push(char::from(b));
    }
}
