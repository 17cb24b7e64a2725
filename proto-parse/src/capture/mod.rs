//! Reader and writer of capture files: pcap (microsecond and
//! nanosecond magic, both byte orders, the "modified" Kuznetzov variant) and
//! pcapng (several sections and interfaces, Enhanced and Simple packet
//! blocks, per-interface `if_tsresol` and `if_tsoffset`).
//!
//! # Reading
//! [`Reader`] reads through one buffer (256 KiB by default, grown for a
//! larger record) that it refills from any [`std::io::Read`]: a file is
//! never loaded whole. Every record is lent as a [`Record`] whose `data`
//! borrows the buffer: there is no allocation per packet.
//! [`Reader::open_or_stdin`] also takes a gzip-compressed capture
//! (`.pcap.gz`, `.pcapng.gz`), decompressed on the fly.
//! [`Reader::map_or_open`] reads a regular file through a memory map
//! instead (`mapped.rs`: no copy at all, the pages read are given back as
//! the reader moves on); the parsing code is the same. The loop is the
//! rusticata one (parse the buffered bytes with `pcap-parser`, consume,
//! refill when a record is incomplete):
//!
//! ```no_run
//! use proto_parse::capture::Reader;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut reader = Reader::open("trace.pcap")?;
//! while let Some(rec) = reader.next_record() {
//!     match rec {
//!         Ok(rec) => println!("{} {} {} bytes", rec.index, rec.ts_ns, rec.data.len()),
//!         Err(err) => eprintln!("{err}"), // the reader resynchronises or ends
//!     }
//! }
//! println!("{:?}", reader.stats());
//! # Ok(()) }
//! ```
//!
//! # Errors
//! Problems with the file as a whole (I/O, not a capture file, a broken file
//! header) are an [`OpenError`] from [`Reader::open`]/[`Reader::from_reader`].
//! A corrupt record is an [`Error`](crate::Error) with
//! `layer: Layer::Capture` whose `offset` is the **file** byte offset of the
//! offending field. After a corrupt record header the reader scans forward
//! for a plausible record (pcap: two consecutive plausible record headers;
//! pcapng: a known block type whose leading and trailing lengths agree) and
//! goes on from there, or ends cleanly when none is found. A record cut by
//! the end of the file is reported as [`ErrorKind::Truncated`](crate::ErrorKind)
//! (`LenSource::File`: the file holds fewer bytes than the record header
//! announces) and ends the stream. No input panics. [`Stats`] counts what was
//! read, skipped and resynchronised.
//!
//! # Writing
//! [`PcapWriter`] and [`PcapNgWriter`] write what the fixture generator and
//! the reference stack's `--pcap` option need: frames with a nanosecond
//! timestamp.

mod mapped;
mod pcap;
mod pcapng;
mod reader;
mod writer;

pub use reader::{DEFAULT_BUFFER_SIZE, Reader};
pub use writer::{PcapNgWriter, PcapOptions, PcapWriter};

use std::fmt;
use std::io;

/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u16 = 1;
/// `LINKTYPE_RAW` (raw IPv4/IPv6, no link header).
pub const LINKTYPE_RAW: u16 = 101;
/// `LINKTYPE_LINUX_SLL` (Linux "cooked" capture v1).
pub const LINKTYPE_LINUX_SLL: u16 = 113;
/// `LINKTYPE_ERF` (Endace ERF records; the ERF header carries its own timestamp).
pub const LINKTYPE_ERF: u16 = 197;
/// `LINKTYPE_LINUX_SLL2` (Linux "cooked" capture v2).
pub const LINKTYPE_LINUX_SLL2: u16 = 276;

/// The largest pcapng block, and the largest pcap record, that the reader
/// accepts (16 MiB). Anything larger is treated as corruption.
pub const MAX_RECORD_LEN: usize = 16 * 1024 * 1024;

/// The largest pcap `caplen` accepted whatever the file's snaplen says
/// (libpcap's and Wireshark's maximum packet size).
pub const PCAP_MAX_SNAPLEN: u32 = 262_144;

/// One captured frame, lent by [`Reader::next_record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Frame number, 1-based, counting the records yielded so far (as
    /// tshark's `frame.number`, until the first corrupt record).
    pub index: u64,
    /// Timestamp in nanoseconds since the Unix epoch (pcapng `if_tsoffset`
    /// applied, clamped to `0..=u64::MAX`). Simple Packet Blocks carry no
    /// timestamp: 0.
    pub ts_ns: u64,
    /// Link type (the pcap `LINKTYPE_*` number; pcap's FCS bits masked off).
    pub linktype: u16,
    /// The captured bytes (`caplen` of them; pcapng padding removed).
    pub data: &'a [u8],
    /// Length of the frame on the wire (`orig_len`), `>= data.len()` in a
    /// sane file.
    pub orig_len: u32,
    /// pcapng interface id (within its section); `None` for pcap.
    pub interface: Option<u32>,
    /// File byte offset of the record (pcap record header or pcapng block).
    pub offset: u64,
}

impl Record<'_> {
    /// For an ERF record (`LINKTYPE_ERF`): the ERF header's own timestamp,
    /// finer than the pcap record's microseconds (tshark shows this one).
    pub fn erf_ts_ns(&self) -> Option<u64> {
        if self.linktype == LINKTYPE_ERF {
            erf_ts_ns(self.data)
        } else {
            None
        }
    }

    /// True when the capture holds fewer bytes than were on the wire.
    pub const fn is_cut(&self) -> bool {
        (self.data.len() as u64) < self.orig_len as u64
    }

    /// Seconds and nanoseconds of the timestamp.
    pub const fn ts_parts(&self) -> (u64, u32) {
        (
            self.ts_ns / 1_000_000_000,
            (self.ts_ns % 1_000_000_000) as u32,
        )
    }
}

/// Counters of a [`Reader`]; they include everything read before an error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records yielded.
    pub records: u64,
    /// Captured bytes yielded (sum of `data.len()`).
    pub bytes: u64,
    /// Errors yielded.
    pub errors: u64,
    /// Successful resynchronisations after a corrupt record.
    pub resyncs: u64,
    /// Bytes skipped while resynchronising (and left after a failed one).
    pub skipped_bytes: u64,
    /// pcapng blocks without packets that were skipped (statistics, name
    /// resolution, unknown types, ...).
    pub blocks_skipped: u64,
    /// pcapng sections seen.
    pub sections: u64,
    /// Bytes of the file consumed so far, headers included.
    pub file_bytes: u64,
}

/// The container format of an open capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Classic pcap.
    Pcap {
        /// Nanosecond magic (`0xa1b23c4d`).
        nanos: bool,
        /// The file is big-endian (relative to the magic as written).
        big_endian: bool,
        /// The "modified" (Kuznetzov, `0xa1b2cd34`) variant with 24-byte
        /// record headers.
        modified: bool,
        /// Link type of every record.
        linktype: u16,
        /// Snapshot length announced by the header.
        snaplen: u32,
    },
    /// pcapng; the byte order of the first section.
    PcapNg { big_endian: bool },
}

/// A pcapng interface (Interface Description Block) of the current section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interface {
    pub linktype: u16,
    pub snaplen: u32,
    /// Raw `if_tsresol` (default 6: microseconds). Bit 7 set: a negative
    /// power of 2, else a negative power of 10.
    pub tsresol: u8,
    /// `if_tsoffset` in seconds (default 0).
    pub tsoffset: i64,
}

impl Default for Interface {
    fn default() -> Self {
        Interface {
            linktype: LINKTYPE_ETHERNET,
            snaplen: 0,
            tsresol: 6,
            tsoffset: 0,
        }
    }
}

/// Why a capture could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot read capture: {0}")]
    Io(#[from] io::Error),
    /// The first four bytes are neither a pcap nor a pcapng magic.
    #[error("not a pcap or pcapng file: magic 0x{magic:08x}")]
    NotCapture { magic: u32 },
    /// Fewer bytes than the smallest file header.
    #[error("not a pcap or pcapng file: only {len} bytes")]
    TooShort { len: usize },
    /// A capture magic, but the file header is unusable.
    #[error("bad capture file header: {0}")]
    BadHeader(crate::Error),
}

/// The timestamp of an ERF record header (64-bit little-endian fixed point:
/// seconds in the high 32 bits, a binary fraction in the low 32), in
/// nanoseconds rounded to nearest as Wireshark does. `None` if `erf` is
/// shorter than 8 bytes.
pub fn erf_ts_ns(erf: &[u8]) -> Option<u64> {
    let b: [u8; 8] = erf.get(..8)?.try_into().ok()?;
    let ts = u64::from_le_bytes(b);
    let secs = ts >> 32;
    let frac = (ts & 0xffff_ffff) * 1_000_000_000;
    let ns = (frac + ((frac & 0x8000_0000) << 1)) >> 32;
    Some(secs * 1_000_000_000 + ns)
}

/// Converts a pcapng timestamp in `if_tsresol` units to nanoseconds, adding
/// `if_tsoffset` seconds; saturates at `0` and `u64::MAX`.
pub fn pcapng_ts_to_ns(units: u64, tsresol: u8, tsoffset: i64) -> u64 {
    TsConv::new(tsresol, tsoffset).to_ns(units)
}

/// A pcapng interface's timestamp conversion, computed once per interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TsConv {
    scale: Scale,
    offset_ns: i128,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scale {
    /// Units of `10^-e` s with `e <= 9`: multiply by `10^(9-e)`.
    Mul(u64),
    /// `9 < e <= 28`: divide by `10^(e-9)`.
    Div(u64),
    /// Units of `2^-e` s: `units * 10^9 >> e`.
    Shift(u32),
    /// Finer than `10^-28` s: every timestamp is 0 ns.
    Zero,
}

impl TsConv {
    pub(crate) fn new(tsresol: u8, tsoffset: i64) -> Self {
        let scale = if tsresol & 0x80 == 0 {
            let e = u32::from(tsresol);
            if e <= 9 {
                Scale::Mul(10u64.pow(9 - e))
            } else if e - 9 <= 19 {
                Scale::Div(10u64.pow(e - 9))
            } else {
                Scale::Zero
            }
        } else {
            // e <= 127, so the shift of a u128 is in range.
            Scale::Shift(u32::from(tsresol & 0x7f))
        };
        TsConv {
            scale,
            offset_ns: i128::from(tsoffset) * 1_000_000_000,
        }
    }

    #[inline]
    pub(crate) fn to_ns(self, units: u64) -> u64 {
        let ns: u128 = match self.scale {
            Scale::Mul(m) => u128::from(units) * u128::from(m),
            Scale::Div(d) => u128::from(units / d),
            Scale::Shift(e) => (u128::from(units) * 1_000_000_000) >> e,
            Scale::Zero => 0,
        };
        // ns < 2^94: no overflow in i128.
        let total = ns as i128 + self.offset_ns;
        u64::try_from(total.max(0)).unwrap_or(u64::MAX)
    }
}

/// Converts nanoseconds since the epoch to pcapng timestamp units of the
/// given `if_tsresol` (rounding down), subtracting `if_tsoffset` seconds.
/// `None` when the value does not fit in 64 bits or is negative.
pub fn ns_to_pcapng_ts(ts_ns: u64, tsresol: u8, tsoffset: i64) -> Option<u64> {
    let rel = i128::from(ts_ns) - i128::from(tsoffset) * 1_000_000_000;
    let rel = u128::try_from(rel).ok()?;
    let units = if tsresol & 0x80 == 0 {
        let e = u32::from(tsresol);
        if e <= 9 {
            rel / 10u128.pow(9 - e)
        } else {
            rel.checked_mul(10u128.checked_pow(e - 9)?)?
        }
    } else {
        let e = u32::from(tsresol & 0x7f);
        if e > 64 {
            return None;
        }
        (rel << e) / 1_000_000_000
    };
    u64::try_from(units).ok()
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Format::Pcap {
                nanos,
                big_endian,
                modified,
                linktype,
                snaplen,
            } => write!(
                f,
                "pcap{} ({}, {}-endian, linktype {linktype}, snaplen {snaplen})",
                if *modified { " (modified)" } else { "" },
                if *nanos { "ns" } else { "us" },
                if *big_endian { "big" } else { "little" },
            ),
            Format::PcapNg { big_endian } => write!(
                f,
                "pcapng ({}-endian)",
                if *big_endian { "big" } else { "little" }
            ),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn pcapng_ts_resolutions() {
        // microseconds (default), nanoseconds, 10^-12, 2^-10, 2^-30
        assert_eq!(pcapng_ts_to_ns(1_500_000, 6, 0), 1_500_000_000);
        assert_eq!(pcapng_ts_to_ns(1_500_000, 9, 0), 1_500_000);
        assert_eq!(pcapng_ts_to_ns(1_500_000, 12, 0), 1_500);
        assert_eq!(pcapng_ts_to_ns(1024 + 512, 0x80 | 10, 0), 1_500_000_000);
        assert_eq!(pcapng_ts_to_ns(1 << 30, 0x80 | 30, 0), 1_000_000_000);
        assert_eq!(pcapng_ts_to_ns(1, 0x80 | 30, 0), 0); // 0.93 ns rounds down
        assert_eq!(pcapng_ts_to_ns(10, 0, 100), 110_000_000_000);
        assert_eq!(pcapng_ts_to_ns(10, 0, -100), 0);
        assert_eq!(pcapng_ts_to_ns(u64::MAX, 0, i64::MAX), u64::MAX);
        assert_eq!(pcapng_ts_to_ns(u64::MAX, 0xff, 0), 0);
        assert_eq!(pcapng_ts_to_ns(u64::MAX, 127, 0), 0);
    }

    #[test]
    fn ns_to_units_inverts() {
        for resol in [0u8, 3, 6, 9, 0x80 | 10, 0x80 | 20, 0x80 | 30] {
            let ns = 1_700_000_000_123_456_789u64;
            let units = ns_to_pcapng_ts(ns, resol, 0).unwrap();
            let back = pcapng_ts_to_ns(units, resol, 0);
            assert!(back <= ns, "{resol}: {back} > {ns}");
            assert!(ns - back < 1_000_000_000, "{resol}");
        }
        assert_eq!(ns_to_pcapng_ts(5_000_000_000, 9, 3), Some(2_000_000_000));
        assert_eq!(ns_to_pcapng_ts(1, 9, 3), None);
        assert_eq!(ns_to_pcapng_ts(u64::MAX, 19, 0), None);
    }
}
