//! The buffered reader: one buffer refilled from any `Read`, records
//! lent out of it.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::read::MultiGzDecoder;

use pcap_parser::pcapng::{BOM_MAGIC, SHB_MAGIC};
use pcap_parser::{PcapHeader, parse_pcap_header};

use super::mapped::{self, Mapped};
use super::pcap::PcapState;
use super::pcapng::NgState;
use super::{Format, Interface, MAX_RECORD_LEN, OpenError, Record, Stats};
use crate::{Error, Layer, LenSource};

/// Default size of the read buffer (256 KiB; it grows when one record needs
/// more). A record is moved only when it straddles the buffer's end. Bigger
/// is slower once the buffer outgrows the caches: the kernel's copy and the
/// parse then both miss.
pub const DEFAULT_BUFFER_SIZE: usize = 256 * 1024;

/// Smallest buffer (it grows when one record needs more).
const MIN_BUFFER_SIZE: usize = 64;

/// The bytes the reader parses: a buffer refilled from the source, or the
/// whole file mapped (`refill` then only moves the window's end).
pub(super) enum Bytes {
    Buffer(Vec<u8>),
    Mapped(Mapped),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    #[inline(always)]
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Buffer(buf) => buf,
            Bytes::Mapped(map) => map,
        }
    }
}

pub(super) enum State {
    Pcap(PcapState),
    PcapNg(NgState),
}

/// What one step of the parser produced; plain data (positions in the
/// buffer), so that the borrow of the buffer starts only when the
/// [`Record`] is built.
pub(super) enum Step {
    Record(RecordMeta),
    Error(Error),
    End,
}

pub(super) struct RecordMeta {
    pub(super) data_start: usize,
    pub(super) data_len: usize,
    pub(super) ts_ns: u64,
    pub(super) linktype: u16,
    pub(super) orig_len: u32,
    pub(super) interface: Option<u32>,
    pub(super) offset: u64,
}

/// A streaming capture reader (pcap or pcapng) over any [`Read`].
///
/// See the [module documentation](super) for the error and resync rules.
pub struct Reader<R = File> {
    src: R,
    /// `buf[start..end]` holds unread bytes; `buf.len()` is the capacity.
    pub(super) buf: Bytes,
    pub(super) start: usize,
    pub(super) end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
    io_error: Option<io::Error>,
    pub(super) state: State,
    format: Format,
    /// Set after an error that ends the stream.
    pub(super) done: bool,
    /// File offset from which to resynchronise before the next record.
    pub(super) resync_from: Option<u64>,
    pub(super) stats: Stats,
    /// For a gzip-compressed input (offsets count decompressed bytes): the
    /// compressed bytes read so far.
    gzip_read: Option<Arc<AtomicU64>>,
}

impl Reader<File> {
    /// Opens a capture file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let file = File::open(path)?;
        // Small files get a small buffer.
        let cap = match file.metadata() {
            Ok(m) if m.len() < DEFAULT_BUFFER_SIZE as u64 => (m.len() as usize + 1).max(4096),
            _ => DEFAULT_BUFFER_SIZE,
        };
        Reader::with_capacity(file, cap)
    }
}

impl Reader<Box<dyn Read + Send>> {
    /// Opens a capture file, or reads standard input when `path` is `-`
    /// (for command lines: `tool -r -` after `tcpdump -w -`). A
    /// gzip-compressed capture (`trace.pcap.gz`, as Wireshark opens them)
    /// is decompressed on the fly; see [`Reader::is_gzip`].
    pub fn open_or_stdin(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        let src: Box<dyn Read + Send> = if path.as_os_str() == "-" {
            Box::new(io::stdin())
        } else {
            Box::new(File::open(path)?)
        };
        Reader::from_maybe_gzip(src)
    }

    /// Like [`Reader::open_or_stdin`], but a regular, uncompressed file is
    /// memory-mapped: records are lent from the page cache without being
    /// copied (the kernel's copy was a large share of a whole analysis' CPU
    /// time on a large capture, docs/performance.md). The file must not be
    /// truncated while it is read (SIGBUS): read a file that another
    /// program may truncate with [`Reader::open_or_stdin`].
    pub fn map_or_open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        if path.as_os_str() == "-" {
            return Reader::open_or_stdin(path);
        }
        let file = File::open(path)?;
        match Mapped::new(&file) {
            Some(map) if !map.starts_with(&GZIP_MAGIC) => {
                let src: Box<dyn Read + Send> = Box::new(file);
                Reader::start(src, Bytes::Mapped(map))
            }
            _ => Reader::from_maybe_gzip(file),
        }
    }

    /// Reads a capture from a byte stream that may be gzip-compressed
    /// (recognised by its magic, `1f 8b`).
    pub fn from_maybe_gzip(src: impl Read + Send + 'static) -> Result<Self, OpenError> {
        // The peek buffer is bypassed by the reader's own larger reads, so
        // an uncompressed stream is not copied twice.
        let read = Arc::new(AtomicU64::new(0));
        let mut peek = BufReader::new(CountingRead {
            inner: src,
            read: Arc::clone(&read),
        });
        let gzip = peek.fill_buf()?.starts_with(&GZIP_MAGIC);
        let src: Box<dyn Read + Send> = if gzip {
            Box::new(MultiGzDecoder::new(peek))
        } else {
            Box::new(peek)
        };
        let mut reader = Reader::from_reader(src)?;
        reader.gzip_read = gzip.then_some(read);
        Ok(reader)
    }
}

/// The first two bytes of a gzip stream (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Counts the bytes read through it (the compressed bytes of a gzip
/// input), for [`Reader::input_position`].
struct CountingRead<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl<R: Read> Reader<R> {
    /// Reads a capture from any byte stream (a pipe, stdin, a slice).
    pub fn from_reader(src: R) -> Result<Self, OpenError> {
        Reader::with_capacity(src, DEFAULT_BUFFER_SIZE)
    }

    /// Like [`Reader::from_reader`] with a buffer of `capacity` bytes (it
    /// grows when a single record needs more).
    pub fn with_capacity(src: R, capacity: usize) -> Result<Self, OpenError> {
        let buf = vec![0; capacity.clamp(MIN_BUFFER_SIZE, MAX_RECORD_LEN + 64)];
        Reader::start(src, Bytes::Buffer(buf))
    }

    /// A reader over `buf`, its file header read.
    fn start(src: R, buf: Bytes) -> Result<Self, OpenError> {
        let mut reader = Reader {
            src,
            buf,
            start: 0,
            end: 0,
            base: 0,
            eof: false,
            io_error: None,
            state: State::Pcap(PcapState::placeholder()),
            format: Format::PcapNg { big_endian: false },
            done: false,
            resync_from: None,
            stats: Stats::default(),
            gzip_read: None,
        };
        reader.read_file_header()?;
        Ok(reader)
    }

    fn read_file_header(&mut self) -> Result<(), OpenError> {
        let avail = self.fill(4);
        if let Some(e) = self.io_error.take() {
            return Err(OpenError::Io(e));
        }
        if avail < 4 {
            return Err(OpenError::TooShort { len: avail });
        }
        let head = self.window();
        let magic_le = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        match magic_le {
            0xa1b2_c3d4 | 0xa1b2_3c4d | 0xa1b2_cd34 | 0xd4c3_b2a1 | 0x4d3c_b2a1 => {
                let avail = self.fill(24);
                if let Some(e) = self.io_error.take() {
                    return Err(OpenError::Io(e));
                }
                if avail < 24 {
                    return Err(OpenError::BadHeader(Error::truncated(
                        Layer::Capture,
                        avail,
                        24,
                        avail,
                        LenSource::File,
                    )));
                }
                let header: PcapHeader = match parse_pcap_header(&self.window()[..24]) {
                    Ok((_, h)) => h,
                    Err(_) => {
                        return Err(OpenError::BadHeader(Error::bad_value(
                            Layer::Capture,
                            0,
                            "pcap magic",
                            u64::from(magic_le),
                            "a pcap magic",
                        )));
                    }
                };
                let state = PcapState::new(&header);
                self.format = state.format();
                self.state = State::Pcap(state);
                self.consume(24);
                Ok(())
            }
            SHB_MAGIC => {
                let avail = self.fill(28);
                if let Some(e) = self.io_error.take() {
                    return Err(OpenError::Io(e));
                }
                if avail < 28 {
                    return Err(OpenError::BadHeader(Error::truncated(
                        Layer::Capture,
                        avail,
                        28,
                        avail,
                        LenSource::File,
                    )));
                }
                let w = self.window();
                let bom = u32::from_le_bytes([w[8], w[9], w[10], w[11]]);
                let big_endian = if bom == BOM_MAGIC {
                    false
                } else if bom == BOM_MAGIC.swap_bytes() {
                    true
                } else {
                    return Err(OpenError::BadHeader(Error::bad_value(
                        Layer::Capture,
                        8,
                        "pcapng byte-order magic",
                        u64::from(bom),
                        "0x1a2b3c4d in either byte order",
                    )));
                };
                self.format = Format::PcapNg { big_endian };
                // The section header block itself is read as the first block.
                self.state = State::PcapNg(NgState::new(big_endian));
                Ok(())
            }
            _ => {
                // The magic as written (a text file shows its first letters).
                let magic = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
                Err(OpenError::NotCapture { magic })
            }
        }
    }

    /// The next record, an error, or `None` at the end.
    ///
    /// The record borrows the reader's buffer (no copy): drop it before the
    /// next call, or copy what must outlive it.
    ///
    /// After an `Err` the reader either resynchronises (the next call goes
    /// on after the corrupt bytes) or ends (the next call returns `None`).
    #[allow(clippy::should_implement_trait)]
    #[inline(always)]
    pub fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        // The common case, inlined into the caller's loop: a classic pcap
        // record wholly in the buffer. The rest stays out of line (inlining
        // all of it cost more than the call).
        if !self.done
            && self.resync_from.is_none()
            && let Some(m) = self.pcap_buffered()
        {
            return Some(Ok(self.yield_record(m)));
        }
        self.next_record_general()
    }

    /// [`Reader::next_record`] in every case: refills, errors,
    /// resynchronisation, pcapng, the end.
    #[inline(never)]
    fn next_record_general(&mut self) -> Option<Result<Record<'_>, Error>> {
        if self.done {
            return None;
        }
        if let Some(from) = self.resync_from.take() {
            let found = match self.state {
                State::Pcap(_) => self.resync_pcap(from),
                State::PcapNg(_) => self.resync_pcapng(from),
            };
            if !found {
                self.stats.skipped_bytes += self.avail() as u64;
                let n = self.avail();
                self.consume(n);
                self.done = true;
                return None;
            }
            self.stats.resyncs += 1;
        }
        let step = match self.state {
            State::Pcap(_) => self.step_pcap(),
            State::PcapNg(_) => self.step_pcapng(),
        };
        match step {
            Step::Record(m) => Some(Ok(self.yield_record(m))),
            Step::Error(e) => {
                self.stats.errors += 1;
                if self.resync_from.is_none() && self.at_end() {
                    self.done = true;
                }
                Some(Err(e))
            }
            Step::End => {
                self.done = true;
                None
            }
        }
    }

    /// Counts a record read and lends it.
    #[inline(always)]
    fn yield_record(&mut self, m: RecordMeta) -> Record<'_> {
        self.stats.records += 1;
        self.stats.bytes += m.data_len as u64;
        Record {
            index: self.stats.records,
            ts_ns: m.ts_ns,
            linktype: m.linktype,
            data: &self.buf[m.data_start..m.data_start + m.data_len],
            orig_len: m.orig_len,
            interface: m.interface,
            offset: m.offset,
        }
    }

    /// Calls `f` for every record and error until the end; returns the
    /// final [`Stats`].
    pub fn for_each<F>(&mut self, mut f: F) -> Stats
    where
        F: FnMut(Result<Record<'_>, Error>),
    {
        while let Some(rec) = self.next_record() {
            f(rec);
        }
        self.stats
    }

    /// Counters so far.
    pub const fn stats(&self) -> &Stats {
        &self.stats
    }

    /// True when the input was gzip-compressed: file offsets in errors,
    /// records and [`Reader::position`] then count decompressed bytes.
    pub const fn is_gzip(&self) -> bool {
        self.gzip_read.is_some()
    }

    /// How far into the input itself reading has gone, for progress
    /// against its size: [`Reader::position`], or for a gzip input the
    /// compressed bytes read so far (a little ahead of what was parsed).
    pub fn input_position(&self) -> u64 {
        match &self.gzip_read {
            Some(read) => read.load(Ordering::Relaxed),
            None => self.position(),
        }
    }

    /// True when the file is read through a memory map
    /// ([`Reader::map_or_open`]).
    pub const fn is_mapped(&self) -> bool {
        matches!(self.buf, Bytes::Mapped(_))
    }

    /// The container format (for pcapng, the byte order of the first section).
    pub const fn format(&self) -> Format {
        self.format
    }

    /// pcapng: the interfaces of the current section (empty for pcap).
    pub fn interfaces(&self) -> &[Interface] {
        match &self.state {
            State::Pcap(_) => &[],
            State::PcapNg(ng) => &ng.interfaces,
        }
    }

    /// The I/O error that ended reading early, if any (the stream is then
    /// treated as ending where the error happened).
    pub const fn io_error(&self) -> Option<&io::Error> {
        self.io_error.as_ref()
    }

    /// File offset of the next unread byte.
    pub const fn position(&self) -> u64 {
        self.base + self.start as u64
    }

    /// Gives back the underlying reader.
    pub fn into_inner(self) -> R {
        self.src
    }

    // ---- buffer -------------------------------------------------------

    /// Unread buffered bytes.
    pub(super) fn window(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub(super) const fn avail(&self) -> usize {
        self.end - self.start
    }

    #[inline]
    pub(super) fn consume(&mut self, n: usize) {
        let n = n.min(self.avail());
        self.start += n;
        self.stats.file_bytes += n as u64;
    }

    /// True when every byte of the input has been consumed.
    fn at_end(&mut self) -> bool {
        self.fill(1) == 0
    }

    /// Makes at least `need` bytes available if the input holds them;
    /// returns how many are available (fewer only at the end of input).
    #[inline(always)]
    pub(super) fn fill(&mut self, need: usize) -> usize {
        if self.avail() >= need || self.eof {
            return self.avail();
        }
        self.refill(need)
    }

    #[inline(never)]
    fn refill(&mut self, need: usize) -> usize {
        let buf = match &mut self.buf {
            Bytes::Buffer(buf) => buf,
            Bytes::Mapped(map) => {
                // Every byte is there: move the window's end, give back
                // what lies behind its start.
                self.end = map.len().min(self.start + need.max(mapped::WINDOW));
                self.eof = self.end == map.len();
                map.release_below(self.start);
                return self.avail();
            }
        };
        if buf.len() - self.start < need {
            // Move the unread bytes to the front, then grow the buffer if
            // even all of it cannot hold `need` bytes.
            buf.copy_within(self.start..self.end, 0);
            self.base += self.start as u64;
            self.end -= self.start;
            self.start = 0;
            if buf.len() < need {
                buf.resize(need.next_power_of_two(), 0);
            }
        }
        while self.end - self.start < need {
            match self.src.read(&mut buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.end += n.min(buf.len() - self.end),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.io_error = Some(e);
                    self.eof = true;
                    break;
                }
            }
        }
        self.avail()
    }
}

impl<R: Read> std::fmt::Debug for Reader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("format", &self.format)
            .field("position", &self.position())
            .field("stats", &self.stats)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
