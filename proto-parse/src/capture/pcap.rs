//! Classic pcap records: header checks, timestamps, resynchronisation.

use std::io::Read;

use pcap_parser::PcapHeader;

use super::reader::{Reader, RecordMeta, State, Step};
use super::{Format, MAX_RECORD_LEN, PCAP_MAX_SNAPLEN};
use crate::{Error, Layer, LenSource};

/// Seconds a resync candidate's timestamp may differ from the last good
/// record's (or from the next candidate's): one day.
const RESYNC_MAX_TS_JUMP: u64 = 86_400;

#[derive(Debug, Clone, Copy)]
pub(super) struct PcapState {
    big_endian: bool,
    nanos: bool,
    modified: bool,
    linktype: u16,
    snaplen: u32,
    /// Largest acceptable `caplen`.
    max_caplen: u32,
    /// Seconds of the last good record.
    last_ts_sec: Option<u32>,
}

impl PcapState {
    pub(super) const fn placeholder() -> Self {
        PcapState {
            big_endian: false,
            nanos: false,
            modified: false,
            linktype: 1,
            snaplen: 0,
            max_caplen: PCAP_MAX_SNAPLEN,
            last_ts_sec: None,
        }
    }

    pub(super) fn new(h: &PcapHeader) -> Self {
        PcapState {
            big_endian: h.is_bigendian(),
            nanos: h.is_nanosecond_precision(),
            modified: h.is_modified_format(),
            // The upper 16 bits hold FCS information (LT_FCS_* in libpcap).
            linktype: (h.network.0 as u32 & 0xffff) as u16,
            snaplen: h.snaplen,
            max_caplen: h.snaplen.max(PCAP_MAX_SNAPLEN).min(MAX_RECORD_LEN as u32),
            last_ts_sec: None,
        }
    }

    pub(super) const fn format(&self) -> Format {
        Format::Pcap {
            nanos: self.nanos,
            big_endian: self.big_endian,
            modified: self.modified,
            linktype: self.linktype,
            snaplen: self.snaplen,
        }
    }

    const fn header_len(&self) -> usize {
        if self.modified { 24 } else { 16 }
    }

    /// The four fields of a record header (seconds, fraction, caplen,
    /// origlen) from its first 16 bytes: one bounds check and one byte-order
    /// test instead of sixteen and four, on the hot path.
    #[inline]
    fn record_header(&self, h: &[u8; 16]) -> [u32; 4] {
        let mut out = [0u32; 4];
        for (v, b) in out.iter_mut().zip(h.chunks_exact(4)) {
            let b = [b[0], b[1], b[2], b[3]];
            *v = if self.big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            };
        }
        out
    }

    const fn frac_limit(&self) -> u32 {
        if self.nanos { 1_000_000_000 } else { 1_000_000 }
    }

    fn ts_ns(&self, sec: u32, frac: u32) -> u64 {
        let frac_ns = if self.nanos {
            u64::from(frac)
        } else {
            u64::from(frac) * 1000
        };
        u64::from(sec) * 1_000_000_000 + frac_ns
    }

    /// Is `b` (at least a record header) a plausible record header? Returns
    /// its `caplen` and seconds.
    fn plausible(&self, b: &[u8], near_sec: Option<u32>) -> Option<(usize, u32)> {
        let [sec, frac, caplen, origlen] = self.record_header(b.first_chunk::<16>()?);
        let ok = frac < self.frac_limit()
            && caplen <= self.max_caplen
            && caplen <= origlen
            && origlen <= MAX_RECORD_LEN as u32
            && near_sec.is_none_or(|s| u64::from(s.abs_diff(sec)) <= RESYNC_MAX_TS_JUMP);
        ok.then_some((caplen as usize, sec))
    }
}

impl<R: Read> Reader<R> {
    fn pcap_state(&self) -> Option<PcapState> {
        match &self.state {
            State::Pcap(p) => Some(*p),
            State::PcapNg(_) => None,
        }
    }

    /// A classic pcap record wholly in the buffer with a plausible `caplen`:
    /// the common case, which `next_record` checks first and
    /// [`Reader::step_pcap`] ends with. `None` sends the caller down the
    /// general path (refill, errors, pcapng).
    #[inline(always)]
    pub(super) fn pcap_buffered(&mut self) -> Option<RecordMeta> {
        let offset = self.position();
        let State::Pcap(st) = &mut self.state else {
            return None;
        };
        let hl = st.header_len();
        let head = self.buf[self.start..self.end].first_chunk::<16>()?;
        let [ts_sec, ts_frac, caplen, origlen] = st.record_header(head);
        let total = hl + caplen as usize;
        if caplen > st.max_caplen || total > self.end - self.start {
            return None;
        }
        st.last_ts_sec = Some(ts_sec);
        let meta = RecordMeta {
            data_start: self.start + hl,
            data_len: caplen as usize,
            ts_ns: st.ts_ns(ts_sec, ts_frac),
            linktype: st.linktype,
            orig_len: origlen,
            interface: None,
            offset,
        };
        self.consume(total);
        Some(meta)
    }

    pub(super) fn step_pcap(&mut self) -> Step {
        let Some(st) = self.pcap_state() else {
            return Step::End;
        };
        let hl = st.header_len();
        let offset = self.position();
        let avail = self.fill(hl);
        if avail == 0 {
            return Step::End;
        }
        if avail < hl {
            self.consume(avail);
            return Step::Error(truncated_tail(offset, hl, avail));
        }
        let Some(head) = self.window().first_chunk::<16>() else {
            return Step::End; // unreachable: `hl` >= 16 bytes are available
        };
        let [_, _, caplen, _] = st.record_header(head);
        if caplen > st.max_caplen {
            self.resync_from = Some(offset + 1);
            return Step::Error(Error::bad_value(
                Layer::Capture,
                (offset + 8) as usize,
                "pcap record caplen",
                u64::from(caplen),
                "at most the snaplen (or 262144)",
            ));
        }
        let total = hl + caplen as usize;
        let avail = self.fill(total);
        if avail < total {
            self.consume(avail);
            return Step::Error(truncated_tail(offset, total, avail));
        }
        // The record is now wholly buffered with a plausible caplen: the
        // common case takes it.
        match self.pcap_buffered() {
            Some(meta) => Step::Record(meta),
            None => Step::End, // unreachable: checked just above
        }
    }

    /// Scans forward from file offset `from` for two consecutive plausible
    /// record headers (or one that ends exactly at the end of the file).
    /// Leaves the reader at the first one and returns true, or false at the
    /// end of the input.
    pub(super) fn resync_pcap(&mut self, from: u64) -> bool {
        let Some(st) = self.pcap_state() else {
            return false;
        };
        let hl = st.header_len();
        let skip = from.saturating_sub(self.position()) as usize;
        self.stats.skipped_bytes += skip.min(self.avail()) as u64;
        self.consume(skip);
        loop {
            if self.fill(hl) < hl {
                return false;
            }
            if let Some((caplen, sec)) = st.plausible(self.window(), st.last_ts_sec) {
                let len = hl + caplen;
                let avail = self.fill(len + hl);
                if avail == len
                    || (avail >= len + hl
                        && st.plausible(&self.window()[len..], Some(sec)).is_some())
                {
                    return true;
                }
            }
            self.stats.skipped_bytes += 1;
            self.consume(1);
        }
    }
}

/// A record at file offset `offset` that needs `required` bytes of which the
/// file holds `available`: the error names the end of the data (the crate's
/// convention for `Truncated`).
pub(super) fn truncated_tail(offset: u64, required: usize, available: usize) -> Error {
    Error::truncated(
        Layer::Capture,
        (offset + available as u64) as usize,
        required,
        available,
        LenSource::File,
    )
}
