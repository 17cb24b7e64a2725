//! TLVs after the fixed header (spec section 6 and 11.2).

use super::field;
use super::packet::{be16, be32, be64, put16, put32};
use super::{PathState, TlvType};
use crate::error::{Error, Layer, LenSource};

/// One TLV as found in a packet. `bytes` holds the whole TLV as captured,
/// type and len included. A PAD TLV covers the rest of the header (spec 6:
/// "type 0 is padding to the end of the header"): its len byte is padding,
/// not a length, and its length is what it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<'a> {
    pub tlv_type: TlvType,
    /// Offset of the TLV's first byte from the base header.
    pub offset: usize,
    /// Bytes of the header the TLV covers, type and len included: `len * 4`,
    /// or for PAD the rest of the header. More than `bytes.len()` when the
    /// capture cut the PAD short.
    pub covers: usize,
    pub bytes: &'a [u8],
}

/// One HOP_TELEMETRY entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HopTelemetry {
    pub switch_id: u32,
    /// Queue depth in cells.
    pub queue_depth: u16,
    /// Hop latency in ns.
    pub hop_latency: u16,
}

/// One PATH_STATUS entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PathStatusEntry {
    pub ev: u16,
    pub state: PathState,
}

impl<'a> Tlv<'a> {
    /// The TLV's length in 4-byte words: its `len` field, or for PAD the
    /// words to the end of the header (docs/spec-decisions.md 5).
    pub fn len_words(&self) -> u8 {
        u8::try_from(self.covers / field::TLV_WORD).unwrap_or(u8::MAX)
    }

    /// The bytes after type and len.
    pub fn value(&self) -> &'a [u8] {
        self.bytes.get(2..).unwrap_or(&[])
    }

    /// Entries that fit whole; a partial entry at the end is ignored
    /// (docs/spec-decisions.md).
    fn entries(&self, entry_len: usize) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.bytes
            .get(field::TLV_VALUE_START..)
            .unwrap_or(&[])
            .chunks_exact(entry_len)
    }

    pub fn hop_telemetry(&self) -> Option<impl Iterator<Item = HopTelemetry> + 'a> {
        (self.tlv_type == TlvType::HopTelemetry).then(|| {
            self.entries(field::HOP_TELEMETRY_ENTRY_LEN)
                .map(|e| HopTelemetry {
                    switch_id: be32(e, 0..4),
                    queue_depth: be16(e, 4..6),
                    hop_latency: be16(e, 6..8),
                })
        })
    }

    pub fn path_status(&self) -> Option<impl Iterator<Item = PathStatusEntry> + 'a> {
        (self.tlv_type == TlvType::PathStatus).then(|| {
            self.entries(field::PATH_STATUS_ENTRY_LEN)
                .map(|e| PathStatusEntry {
                    ev: be16(e, 0..2),
                    state: PathState::from(e[2]),
                })
        })
    }

    /// TS64: a 64-bit tx timestamp in ns.
    pub fn ts64(&self) -> Option<u64> {
        (self.tlv_type == TlvType::Ts64 && self.bytes.len() >= field::TS64_LEN)
            .then(|| be64(self.bytes, field::TLV_VALUE_START..field::TS64_LEN))
    }
}

/// Iterates the TLVs of `buf[start..end]`; a PAD ends the walk; a TLV of
/// length 0 or running past `end` is an error, and ends the walk.
#[derive(Debug, Clone)]
pub struct TlvIter<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> TlvIter<'a> {
    pub(super) fn new(buf: &'a [u8], start: usize, end: usize) -> Self {
        TlvIter {
            buf,
            pos: start,
            end,
        }
    }

    pub(super) fn empty() -> Self {
        TlvIter {
            buf: &[],
            pos: 0,
            end: 0,
        }
    }

    fn fail(&mut self, err: Error) -> Option<Result<Tlv<'a>, Error>> {
        self.pos = self.end;
        Some(Err(err))
    }
}

impl<'a> Iterator for TlvIter<'a> {
    type Item = Result<Tlv<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let pos = self.pos;
        if pos >= self.end {
            return None;
        }
        let captured_end = self.end.min(self.buf.len());
        let Some(&type_byte) = self.buf.get(pos) else {
            let captured = self.buf.len();
            return self.fail(Error::truncated(
                Layer::MetaRoceTlv,
                captured,
                pos + 1,
                captured,
                LenSource::Captured,
            ));
        };
        let tlv_type = TlvType::from(type_byte);
        if tlv_type == TlvType::Pad {
            self.pos = self.end;
            return Some(Ok(Tlv {
                tlv_type,
                offset: pos,
                covers: self.end - pos,
                bytes: &self.buf[pos..captured_end],
            }));
        }
        if pos + 2 > self.end {
            return self.fail(Error::truncated(
                Layer::MetaRoceTlv,
                pos,
                2,
                self.end - pos,
                LenSource::Header,
            ));
        }
        let Some(&len_words) = self.buf.get(pos + field::TLV_LEN) else {
            let captured = self.buf.len();
            return self.fail(Error::truncated(
                Layer::MetaRoceTlv,
                captured,
                pos + 2,
                captured,
                LenSource::Captured,
            ));
        };
        let tlv_end = pos + usize::from(len_words) * field::TLV_WORD;
        if len_words == 0 {
            return self.fail(Error::bad_value(
                Layer::MetaRoceTlv,
                pos + field::TLV_LEN,
                "tlv len",
                0,
                "at least 1 word for a TLV other than PAD",
            ));
        }
        if tlv_end > self.end {
            return self.fail(Error::bad_value(
                Layer::MetaRoceTlv,
                pos + field::TLV_LEN,
                "tlv len",
                len_words.into(),
                "a TLV that ends within hlen*4",
            ));
        }
        if tlv_end > self.buf.len() {
            let captured = self.buf.len();
            return self.fail(Error::truncated(
                Layer::MetaRoceTlv,
                captured,
                tlv_end,
                captured,
                LenSource::Captured,
            ));
        }
        self.pos = tlv_end;
        Some(Ok(Tlv {
            tlv_type,
            offset: pos,
            covers: tlv_end - pos,
            bytes: &self.buf[pos..tlv_end],
        }))
    }
}

/// An owned TLV that emits itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TlvRepr {
    HopTelemetry(Vec<HopTelemetry>),
    PathStatus(Vec<PathStatusEntry>),
    Ts64(u64),
    /// A type this crate does not know; `value` is everything after type and
    /// len, so `2 + value.len()` must be a multiple of 4.
    Unknown {
        tlv_type: u8,
        value: Vec<u8>,
    },
}

impl TlvRepr {
    pub fn parse(tlv: &Tlv<'_>) -> Option<Self> {
        Some(match tlv.tlv_type {
            TlvType::Pad => return None,
            TlvType::HopTelemetry => TlvRepr::HopTelemetry(tlv.hop_telemetry()?.collect()),
            TlvType::PathStatus => TlvRepr::PathStatus(tlv.path_status()?.collect()),
            TlvType::Ts64 => TlvRepr::Ts64(tlv.ts64()?),
            TlvType::Unknown(tlv_type) => TlvRepr::Unknown {
                tlv_type,
                value: tlv.value().to_vec(),
            },
        })
    }

    pub fn buffer_len(&self) -> usize {
        match self {
            TlvRepr::HopTelemetry(hops) => {
                field::TLV_VALUE_START + hops.len() * field::HOP_TELEMETRY_ENTRY_LEN
            }
            TlvRepr::PathStatus(paths) => {
                field::TLV_VALUE_START + paths.len() * field::PATH_STATUS_ENTRY_LEN
            }
            TlvRepr::Ts64(_) => field::TS64_LEN,
            TlvRepr::Unknown { value, .. } => (2 + value.len()).next_multiple_of(field::TLV_WORD),
        }
    }

    /// Writes the TLV at the start of `buf`. Panics when `buf` is shorter
    /// than `buffer_len()` or the TLV is longer than 255 words.
    pub fn emit(&self, buf: &mut [u8]) {
        let len = self.buffer_len();
        assert!(len <= 255 * field::TLV_WORD, "a TLV is at most 255 words");
        let buf = &mut buf[..len];
        buf.fill(0);
        buf[field::TLV_LEN] = (len / field::TLV_WORD) as u8;
        let value = field::TLV_VALUE_START;
        match self {
            TlvRepr::HopTelemetry(hops) => {
                buf[field::TLV_TYPE] = TlvType::HopTelemetry.into();
                for (entry, hop) in buf[value..]
                    .chunks_exact_mut(field::HOP_TELEMETRY_ENTRY_LEN)
                    .zip(hops)
                {
                    put32(entry, 0..4, hop.switch_id);
                    put16(entry, 4..6, hop.queue_depth);
                    put16(entry, 6..8, hop.hop_latency);
                }
            }
            TlvRepr::PathStatus(paths) => {
                buf[field::TLV_TYPE] = TlvType::PathStatus.into();
                for (entry, path) in buf[value..]
                    .chunks_exact_mut(field::PATH_STATUS_ENTRY_LEN)
                    .zip(paths)
                {
                    put16(entry, 0..2, path.ev);
                    entry[2] = path.state.into();
                }
            }
            TlvRepr::Ts64(ts) => {
                buf[field::TLV_TYPE] = TlvType::Ts64.into();
                buf[value..field::TS64_LEN].copy_from_slice(&ts.to_be_bytes());
            }
            TlvRepr::Unknown { tlv_type, value } => {
                buf[field::TLV_TYPE] = *tlv_type;
                buf[2..2 + value.len()].copy_from_slice(value);
            }
        }
    }
}
