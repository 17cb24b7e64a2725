//! The two-thread analysis pipeline of `metaroce-analyze`.
//!
//! One thread reads capture records and decodes every frame into a small,
//! owned [`Observation`] (`Observation::decode`); batches of them (reused)
//! go over a bounded channel to the calling thread, which feeds the engine
//! in capture order and hands each packet and its [`Verdict`] to an
//! optional sink (export, plots).
//! Parsing and analysis thus run on two cores at once; memory is a few
//! batches plus the engine's bounded state, whatever the file size.
//!
//! Decoding costs about as much as the analysis, so the work is balanced
//! between the two threads: when the engine thread has few batches
//! waiting, the parsing thread sends the next batch as raw records and the
//! engine thread decodes them itself (see `Batch`). The engine still sees
//! every frame in capture order, so the result does not depend on the split.
//!
//! Several captures (one per host, each with its own clock) get one
//! parsing thread each; the engine thread merges them by timestamp into the
//! engine's `MultiEngine` (one engine per capture plus the cross-capture
//! matcher: clock offsets, one-way delay and loss between capture points).
//! [`merge_reports`] joins the per-capture reports into one.
//!
//! IP fragments take the slow route: the frame that `Observation::decode`
//! does not take is checked for fragmentation (`defrag::is_fragment`), its
//! bytes travel in the batch (`Item::Fragment`), and the engine thread's
//! `Reassembler` (one per capture, fed in capture order) rebuilds the
//! datagram, which is decoded and analysed like any other packet. The
//! common frame never reaches the reassembler.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::time::Instant;

use proto_parse::capture::{Reader, Record};
use proto_parse::defrag::{self, Reassembler, Reassembly, ReassemblyStats};
use proto_parse::frame::{DecodeConfig, LinkType};

use analyzer::engine::{
    Config, Engine, MergeConfig, MsgDone, MultiEngine, ObsKind, Observation, Report, Verdict,
};
use analyzer::lint::Finding;
use analyzer::observation::MirrorTag;
use analyzer::traffic::{Census, TrafficReport};
use proto_parse::mirror::MirrorSource;

use crate::points::{Assigned, CapturePoint, Points};

/// Frames per batch sent from the parsing thread to the engine thread.
pub const BATCH: usize = 1024;
/// Batches in flight between the two threads (plus the recycled ones).
const IN_FLIGHT: usize = 8;
/// The parsing thread sends raw records while fewer batches than this wait
/// for the engine thread (it has time to decode them itself).
const RAW_WHEN_QUEUED_BELOW: usize = 3;

/// What the parsing thread produced for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// A MetaRoCE or RoCEv2 frame (malformed ones included: the engine
    /// counts them).
    Packet(Observation),
    /// A MetaRoCE or RoCEv2 frame mirrored by the session
    /// `Batch::side.sources[source]` (its time: the switch's, when the
    /// copy carries a whole IEEE 1588 one).
    Mirrored { obs: Observation, source: u16 },
    /// Any other frame: its number and timestamp.
    Other { frame: u64, ts_ns: u64 },
    /// An IP fragment, for the engine thread's reassembler: its bytes are
    /// `Batch::fragment_bytes[start..end]`.
    Fragment {
        frame: u64,
        ts_ns: u64,
        linktype: u16,
        start: usize,
        end: usize,
    },
}

impl Item {
    fn ts_ns(&self) -> u64 {
        match self {
            Item::Packet(obs) | Item::Mirrored { obs, .. } => obs.ts_ns,
            Item::Other { ts_ns, .. } | Item::Fragment { ts_ns, .. } => *ts_ns,
        }
    }
}

/// One record as read, for the engine thread to decode: its bytes are
/// `Batch::raw_bytes[previous end..end]`.
#[derive(Debug, Clone, Copy)]
struct RawRecord {
    index: u64,
    ts_ns: u64,
    linktype: u16,
    end: usize,
}

/// Frames from the parsing thread to the engine thread: decoded
/// (`items`), or raw records the receiver decodes with [`Batch::decode`].
#[derive(Debug, Default)]
struct Batch {
    items: Vec<Item>,
    raw: Vec<RawRecord>,
    raw_bytes: Vec<u8>,
    side: Side,
}

/// What decoding a batch's frames keeps beside its items.
#[derive(Debug, Default)]
struct Side {
    /// The bytes of the batch's IP fragments (`Item::Fragment`).
    fragment_bytes: Vec<u8>,
    /// The mirror sessions of the batch's `Item::Mirrored`.
    sources: Vec<MirrorSource>,
    /// Mirrored frames and what the frames that made no packet were.
    census: Census,
}

impl Side {
    /// The index of `source` in `sources` (added if new; a batch sees few).
    fn source(&mut self, source: MirrorSource) -> u16 {
        let at = match self.sources.iter().rposition(|s| *s == source) {
            Some(at) => at,
            None => {
                self.sources.push(source);
                self.sources.len() - 1
            }
        };
        at as u16
    }

    /// The index of `source` in `sources`, if the batch has copies of it.
    fn index_of(&self, source: MirrorSource) -> Option<u16> {
        self.sources
            .iter()
            .position(|s| *s == source)
            .map(|at| at as u16)
    }

    fn clear(&mut self) {
        self.fragment_bytes.clear();
        self.sources.clear();
        self.census.clear();
    }
}

impl Batch {
    fn with_capacity(n: usize) -> Batch {
        Batch {
            items: Vec::with_capacity(n),
            raw: Vec::new(),
            raw_bytes: Vec::new(),
            side: Side::default(),
        }
    }

    fn len(&self) -> usize {
        self.items.len() + self.raw.len()
    }

    fn clear(&mut self) {
        self.items.clear();
        self.raw.clear();
        self.raw_bytes.clear();
        self.side.clear();
    }

    /// Keeps a record as read, for [`Batch::decode`] on the engine thread.
    fn push_raw(&mut self, record: &Record<'_>) {
        self.raw_bytes.extend_from_slice(record.data);
        self.raw.push(RawRecord {
            index: record.index,
            ts_ns: record.ts_ns,
            linktype: record.linktype,
            end: self.raw_bytes.len(),
        });
    }

    /// Decodes the raw records into `items` (after those already there:
    /// a batch holds one kind or the other).
    fn decode(&mut self, decode: &DecodeConfig) {
        let mut start = 0;
        for r in &self.raw {
            let data = &self.raw_bytes[start..r.end];
            start = r.end;
            let item = Item::decode(r.index, r.ts_ns, r.linktype, data, decode, &mut self.side);
            self.items.push(item);
        }
        self.raw.clear();
        self.raw_bytes.clear();
    }

    /// The bytes of an `Item::Fragment` of this batch.
    fn fragment(&self, start: usize, end: usize) -> &[u8] {
        &self.side.fragment_bytes[start..end]
    }
}

impl Item {
    /// Decodes one captured frame; an IP fragment's bytes, a mirror's
    /// session and what a frame of no protocol of ours was go to `side`.
    /// Always inlined into the batch loops: as a call it costs
    /// instructions per packet (cachegrind), most of them moving the
    /// returned `Item`.
    #[inline(always)]
    fn decode(
        index: u64,
        ts_ns: u64,
        linktype: u16,
        data: &[u8],
        decode: &DecodeConfig,
        side: &mut Side,
    ) -> Item {
        let link = LinkType::from(u32::from(linktype));
        match Observation::decode_common(index, ts_ns, link, data, decode) {
            Some(Some(obs)) => Item::Packet(obs),
            Some(None) => Item::not_observed(index, ts_ns, linktype, data, decode, side),
            None => Item::uncommon(index, ts_ns, linktype, data, decode, side),
        }
    }

    /// A packet mirrored where `tag` says, counted in the census; its time
    /// is the switch's when the copy carries a whole one.
    #[inline(always)]
    fn mirrored(mut obs: Observation, tag: &MirrorTag, side: &mut Side) -> Item {
        side.census.mirrored(tag);
        if let Some(switch_ts) = tag.switch_ts_ns {
            obs.ts_ns = switch_ts;
        }
        Item::Mirrored {
            obs,
            source: side.source(tag.source),
        }
    }

    /// A frame the common route did not take: the common mirror, read
    /// here as the common frame is in `decode` (its observation built in
    /// the returned item, not moved into it), or anything else through
    /// the full decode. Out of line, so that the common frame's route
    /// stays as it is.
    #[inline(never)]
    fn uncommon(
        index: u64,
        ts_ns: u64,
        linktype: u16,
        data: &[u8],
        decode: &DecodeConfig,
        side: &mut Side,
    ) -> Item {
        let link = LinkType::from(u32::from(linktype));
        if let Some((obs, tag)) =
            Observation::decode_common_mirrored(index, ts_ns, link, data, decode)
        {
            return Item::mirrored(obs, &tag, side);
        }
        match Observation::decode_full(index, ts_ns, link, data, decode) {
            (Some(obs), None) => Item::Packet(obs),
            (Some(obs), Some(tag)) => Item::mirrored(obs, &tag, side),
            (None, _) => Item::not_observed(index, ts_ns, linktype, data, decode, side),
        }
    }

    /// A frame that is no packet of ours: an IP fragment (its bytes kept
    /// for the reassembler) or any other frame (counted by what it was,
    /// `Census::other`). Out of line, so that the common frame's `decode`
    /// stays small enough to be inlined into the loops that build batches.
    #[cold]
    #[inline(never)]
    fn not_observed(
        index: u64,
        ts_ns: u64,
        linktype: u16,
        data: &[u8],
        decode: &DecodeConfig,
        side: &mut Side,
    ) -> Item {
        let link = LinkType::from(u32::from(linktype));
        if !defrag::is_fragment(link, data) {
            side.census.other(link, data, decode);
            return Item::Other {
                frame: index,
                ts_ns,
            };
        }
        let start = side.fragment_bytes.len();
        side.fragment_bytes.extend_from_slice(data);
        Item::Fragment {
            frame: index,
            ts_ns,
            linktype,
            start,
            end: side.fragment_bytes.len(),
        }
    }
}

/// The engine thread's side of IP reassembly for one capture.
struct Defrag {
    reassembler: Reassembler,
    decode: DecodeConfig,
}

impl Defrag {
    fn new(decode: DecodeConfig) -> Defrag {
        Defrag {
            reassembler: Reassembler::default(),
            decode,
        }
    }

    /// An item of `batch`, in capture order: if it is the fragment that
    /// completes a datagram decoding as MetaRoCE or RoCEv2, the datagram's
    /// observation (at the completing fragment's frame and time).
    fn datagram(&mut self, item: &Item, batch: &Batch) -> Option<Observation> {
        let Item::Fragment {
            frame,
            ts_ns,
            linktype,
            start,
            end,
        } = *item
        else {
            return None;
        };
        let link = LinkType::from(u32::from(linktype));
        match self
            .reassembler
            .push(ts_ns, link, batch.fragment(start, end))
        {
            Reassembly::Datagram(ip) => {
                Observation::decode(frame, ts_ns, LinkType::Raw, ip, &self.decode)
            }
            Reassembly::Held | Reassembly::NotFragment => None,
        }
    }

    /// The capture ended: what never completed is counted.
    fn finish(mut self) -> ReassemblyStats {
        self.reassembler.finish();
        self.reassembler.stats()
    }
}

/// How to read and analyse captures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub decode: DecodeConfig,
    pub engine: Config,
    /// Read regular files through a memory map (`Reader::map_or_open`):
    /// off for a capture that may be truncated while it is read.
    pub map_files: bool,
}

impl Options {
    /// Decode settings with the ICRC check off: the engine does not use it,
    /// and it costs three times the rest of the decode (see
    /// `DecodeConfig::verify_crc`).
    pub fn new(mut decode: DecodeConfig, engine: Config) -> Options {
        decode.verify_crc = false;
        Options {
            decode,
            engine,
            map_files: true,
        }
    }
}

/// Reading totals of one capture, beside the engine's report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Records read.
    pub frames: u64,
    /// Corrupt capture records (the reader resynchronised or stopped).
    pub corrupt_records: u64,
    /// Bytes skipped while resynchronising.
    pub skipped_bytes: u64,
    /// The corrupt records' messages (the first 100).
    pub errors: Vec<String>,
    /// An I/O error that ended reading early.
    pub io_error: Option<String>,
    /// How the parsing and engine threads shared the work.
    pub threads: ThreadStats,
    /// IP fragments and the datagrams rebuilt from them.
    pub reassembly: ReassemblyStats,
    /// Mirrored frames decapsulated and what the frames that made no
    /// packet were.
    pub traffic: TrafficReport,
}

/// How the two threads of one capture shared the work: which one waited
/// for the other, and so which one set the wall time (the bench prints
/// this per run; docs/performance.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadStats {
    /// Batches sent by the parsing thread.
    pub batches: u64,
    /// Of them, sent as raw records for the engine thread to decode.
    pub raw_batches: u64,
    /// Sends that found the queue full: the parsing thread waited for
    /// the engine thread (the engine thread was the slower).
    pub parser_waits: u64,
    pub parser_wait_ns: u64,
    /// Receives that found the queue empty: the engine thread waited for
    /// the parsing thread.
    pub engine_waits: u64,
    pub engine_wait_ns: u64,
}

/// One capture point analysed: a capture file, or a mirror session in one
/// (`crate::points`).
#[derive(Debug, Clone)]
pub struct CaptureResult {
    pub path: PathBuf,
    /// The point's name (the `host=` partition of exports): the file name
    /// without extension, and for a mirror session its kind, switch and
    /// session (`collector-erspan3-192.0.2.1-s1`).
    pub stem: String,
    /// The mirror session this point is, if it is one.
    pub mirror: Option<MirrorSource>,
    /// The file's reading totals, on the file's first point only (the
    /// others' are zero, so that sums count each file once).
    pub read: ReadStats,
    pub report: Report,
}

impl CaptureResult {
    /// Joins the reading totals to the engine's report (its
    /// `capture.corrupt_records` and `capture.skipped_bytes`).
    fn new(path: PathBuf, stem: String, read: ReadStats, mut report: Report) -> CaptureResult {
        report.capture.corrupt_records = read.corrupt_records;
        report.capture.skipped_bytes = read.skipped_bytes;
        let r = &read.reassembly;
        report.capture.ip_fragments = r.fragments;
        report.capture.reassembled_datagrams = r.datagrams;
        report.capture.incomplete_datagrams = r.incomplete_datagrams;
        report.capture.incomplete_fragments = r.incomplete_fragments;
        report.capture.traffic = read.traffic.clone();
        CaptureResult {
            path,
            stem,
            mirror: None,
            read,
            report,
        }
    }
}

/// Receives every packet and its verdict, in capture order (several
/// captures: merged by timestamp), on the engine thread.
pub trait Sink {
    /// Capture `index` (in the order given) will be analysed; called for
    /// every capture before the first packet.
    fn begin_capture(&mut self, _index: usize, _path: &Path, _stem: &str) {}
    /// One packet, its verdict and every message completed at it (the
    /// verdict's `message` is the first of them).
    fn packet(&mut self, capture: usize, obs: &Observation, verdict: &Verdict, done: &[MsgDone]);
    /// Right after `packet`: the engine that judged it, for a sink that
    /// reads the engine's state of the packet's flow through its getters
    /// (`trace --counters`: `Engine::bytes_in_flight`).
    fn flow_state(&mut self, _capture: usize, _obs: &Observation, _v: &Verdict, _engine: &Engine) {}
    /// Lint findings of capture `capture` (only with `Config::lint`), in
    /// capture order, some packets after the packets they are about (they
    /// are handed over after each batch).
    fn findings(&mut self, _capture: usize, _findings: &[Finding]) {}
    /// Capture `index` is finished; `report` is its final report.
    fn end_capture(&mut self, _index: usize, _report: &Report) -> io::Result<()> {
        Ok(())
    }
}

/// A sink that does nothing (`report` alone).
pub struct NoSink;

impl Sink for NoSink {
    #[inline]
    fn packet(&mut self, _: usize, _: &Observation, _: &Verdict, _: &[MsgDone]) {}
}

/// Progress of the parsing thread, in bytes of the file.
pub trait Progress: Sync {
    fn start(&self, _path: &Path, _len: Option<u64>) {}
    fn set(&self, _position: u64) {}
    fn finish(&self) {}
}

/// No progress display.
pub struct NoProgress;

impl Progress for NoProgress {}

/// The stem of a capture path (`-` for standard input): the file name
/// without its extension, and without `.gz` first (`host1.pcap.gz` is
/// `host1`, like `host1.pcap`).
pub fn capture_stem(path: &Path) -> String {
    if path.as_os_str() == "-" {
        return "stdin".to_string();
    }
    let path = match path.extension() {
        Some(ext) if ext.eq_ignore_ascii_case("gz") => path.with_extension(""),
        _ => path.to_path_buf(),
    };
    path.file_stem().map_or_else(
        || "capture".to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Opens a capture (`-` for standard input), memory-mapped when `map`
/// allows it, or says why not.
fn open(path: &Path, map: bool) -> io::Result<CaptureReader> {
    let reader = if map {
        Reader::map_or_open(path)
    } else {
        Reader::open_or_stdin(path)
    };
    reader.map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// The parsing thread: records to observations (or raw records, see
/// `Batch`), in batches. `queued` counts the batches sent and not yet
/// taken by the engine thread.
fn parse_loop(
    mut reader: CaptureReader,
    decode: DecodeConfig,
    tx: SyncSender<Batch>,
    recycle: Receiver<Batch>,
    queued: &AtomicUsize,
    progress: &dyn Progress,
) -> ReadStats {
    let mut stats = ReadStats::default();
    let mut batch = Batch::with_capacity(BATCH);
    let mut raw = false;
    while let Some(next) = reader.next_record() {
        let record = match next {
            Ok(record) => record,
            Err(err) => {
                stats.corrupt_records += 1;
                if stats.errors.len() < 100 {
                    stats.errors.push(err.to_string());
                }
                continue;
            }
        };
        if raw {
            batch.push_raw(&record);
        } else {
            batch.items.push(Item::decode(
                record.index,
                record.ts_ns,
                record.linktype,
                record.data,
                &decode,
                &mut batch.side,
            ));
        }
        if batch.len() == BATCH {
            let next = recycle
                .try_recv()
                .unwrap_or_else(|_| Batch::with_capacity(BATCH));
            queued.fetch_add(1, Ordering::Relaxed);
            if !send(&tx, std::mem::replace(&mut batch, next), &mut stats.threads) {
                break;
            }
            raw = queued.load(Ordering::Relaxed) < RAW_WHEN_QUEUED_BELOW;
            if stats.threads.batches.is_multiple_of(64) {
                progress.set(reader.input_position());
            }
        }
    }
    if batch.len() > 0 {
        queued.fetch_add(1, Ordering::Relaxed);
        send(&tx, batch, &mut stats.threads);
    }
    progress.set(reader.input_position());
    let s = reader.stats();
    stats.frames = s.records;
    stats.skipped_bytes = s.skipped_bytes;
    stats.io_error = reader.io_error().map(ToString::to_string);
    stats
}

/// Sends a batch, counting it and any wait for a free slot; false when
/// the engine thread is gone.
fn send(tx: &SyncSender<Batch>, batch: Batch, stats: &mut ThreadStats) -> bool {
    stats.batches += 1;
    stats.raw_batches += u64::from(!batch.raw.is_empty());
    match tx.try_send(batch) {
        Ok(()) => true,
        Err(TrySendError::Full(batch)) => {
            let start = Instant::now();
            let sent = tx.send(batch).is_ok();
            stats.parser_waits += 1;
            stats.parser_wait_ns += start.elapsed().as_nanos() as u64;
            sent
        }
        Err(TrySendError::Disconnected(_)) => false,
    }
}

/// A capture reader over a file or standard input.
type CaptureReader = Reader<Box<dyn io::Read + Send>>;

/// A running parsing thread: its handle, its batches and the way back for
/// used ones.
struct Parser<'scope> {
    handle: std::thread::ScopedJoinHandle<'scope, ReadStats>,
    rx: Receiver<Batch>,
    back: SyncSender<Batch>,
    queued: Arc<AtomicUsize>,
    decode: DecodeConfig,
    /// The census of every batch taken.
    census: Census,
    /// The engine thread's waits for a batch.
    waits: u64,
    wait_ns: u64,
}

impl Parser<'_> {
    /// The next batch, decoded (`None` at the end of the capture).
    fn next_batch(&mut self) -> Option<Batch> {
        let mut batch = match self.rx.try_recv() {
            Ok(batch) => batch,
            Err(TryRecvError::Empty) => {
                let start = Instant::now();
                let batch = self.rx.recv().ok();
                self.waits += 1;
                self.wait_ns += start.elapsed().as_nanos() as u64;
                batch?
            }
            Err(TryRecvError::Disconnected) => return None,
        };
        self.queued.fetch_sub(1, Ordering::Relaxed);
        batch.decode(&self.decode);
        if !batch.side.census.is_empty() {
            self.census.add(&batch.side.census);
        }
        Some(batch)
    }

    /// Hands a used batch back for reuse.
    fn recycle(&self, mut batch: Batch) {
        batch.clear();
        let _ = self.back.try_send(batch);
    }

    fn join(self) -> io::Result<ReadStats> {
        let mut stats = self
            .handle
            .join()
            .map_err(|_| io::Error::other("a parsing thread panicked"))?;
        stats.threads.engine_waits = self.waits;
        stats.threads.engine_wait_ns = self.wait_ns;
        stats.traffic = self.census.report();
        Ok(stats)
    }
}

/// Opens a capture and its length (for the progress bar).
fn open_with_len(path: &Path, map: bool) -> io::Result<(CaptureReader, Option<u64>)> {
    let reader = open(path, map)?;
    // The progress bar counts the file's own bytes (`input_position`:
    // compressed ones for a gzip file).
    let len = if path.as_os_str() == "-" {
        None
    } else {
        std::fs::metadata(path).ok().map(|m| m.len())
    };
    Ok((reader, len))
}

fn spawn_parser<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    name: String,
    reader: CaptureReader,
    decode: DecodeConfig,
    progress: &'scope dyn Progress,
) -> io::Result<Parser<'scope>> {
    let (tx, rx) = sync_channel::<Batch>(IN_FLIGHT);
    let (back_tx, back_rx) = sync_channel::<Batch>(IN_FLIGHT + 2);
    let queued = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&queued);
    let handle = std::thread::Builder::new()
        .name(name)
        .spawn_scoped(scope, move || {
            parse_loop(reader, decode, tx, back_rx, &counter, progress)
        })
        .map_err(|e| io::Error::other(format!("cannot start a parsing thread: {e}")))?;
    Ok(Parser {
        handle,
        rx,
        back: back_tx,
        queued,
        decode,
        census: Census::default(),
        waits: 0,
        wait_ns: 0,
    })
}

/// One capture: parsing on a second thread, the engine and the sink on
/// this one. A capture of plain packets, or of one mirror session, has one
/// engine; when a second capture point turns up (another session, or plain
/// packets beside a session), the analysis goes on with a [`Multi`] whose
/// first point is the engine so far, and the session's latest `RECENT`
/// packets go to the matcher so that copies seen at both points match
/// (plain packets before that are not kept).
fn analyze_one<S: Sink + ?Sized>(
    path: &Path,
    stem: String,
    opts: &Options,
    sink: &mut S,
    progress: &dyn Progress,
) -> io::Result<Vec<CaptureResult>> {
    let (reader, len) = open_with_len(path, opts.map_files)?;
    progress.start(path, len);
    let mut engine = Engine::new(opts.engine);
    let decode = opts.decode;
    let mut defrag = Defrag::new(decode);
    let paths = [path.to_path_buf()];
    let stems = [stem];
    let mut points = Points::new(&stems);
    let mut multi: Option<Multi<'_>> = None;
    let mut recent = Recent::default();
    // The mirror session that is the capture's one point, once known.
    let mut own_session: Option<MirrorSource> = None;
    let read = std::thread::scope(|scope| {
        let mut parser = spawn_parser(scope, "mra-parse".into(), reader, decode, progress)?;
        let mut v = Verdict::default();
        // One engine while the capture has one point.
        while let Some(batch) = parser.next_batch() {
            let mut second_point = None;
            // The index of the point's session among the batch's sources:
            // a copy of it is known by its index alone.
            let mut own_index = own_session.and_then(|own| batch.side.index_of(own));
            for (at, item) in batch.items.iter().enumerate() {
                let reassembled;
                let obs = match item {
                    Item::Packet(obs) if points.plain_is_own(0) => obs,
                    Item::Mirrored { obs, source } if own_index == Some(*source) => {
                        recent.push(obs);
                        obs
                    }
                    Item::Mirrored { obs, source }
                        if points.is_own_session(0, batch.side.sources[usize::from(*source)]) =>
                    {
                        let session = batch.side.sources[usize::from(*source)];
                        if let Assigned::Renamed(_) = points.session(0, session, &stems) {
                            sink.begin_capture(0, path, &points.point(0).name);
                        }
                        own_session = Some(session);
                        own_index = Some(*source);
                        recent.push(obs);
                        obs
                    }
                    Item::Packet(_) | Item::Mirrored { .. } => {
                        second_point = Some(at);
                        break;
                    }
                    _ => match defrag.datagram(item, &batch) {
                        Some(obs) => {
                            reassembled = obs;
                            &reassembled
                        }
                        None => {
                            engine.ingest_other(item.ts_ns());
                            continue;
                        }
                    },
                };
                points.saw(0, obs.ts_ns, true);
                engine.ingest_into(obs, &mut v);
                sink.packet(0, obs, &v, engine.messages_done());
                sink.flow_state(0, obs, &v, &engine);
            }
            hand_over_findings(&mut engine, 0, sink);
            if let Some(at) = second_point {
                let first = std::mem::replace(&mut engine, Engine::new(opts.engine));
                let m = multi.insert(Multi {
                    multi: MultiEngine::from_engine(first, MergeConfig::default()),
                    points: std::mem::replace(&mut points, Points::new(&[])),
                    cfg: opts.engine,
                    paths: &paths,
                    stems: &stems,
                });
                for obs in recent.oldest_first() {
                    m.multi.remember(0, obs);
                }
                for item in &batch.items[at..] {
                    m.item(0, item, &batch, &mut defrag, sink);
                }
                parser.recycle(batch);
                break;
            }
            parser.recycle(batch);
        }
        // Several points: the rest of the capture.
        if let Some(m) = &mut multi {
            while let Some(batch) = parser.next_batch() {
                for item in &batch.items {
                    m.item(0, item, &batch, &mut defrag, sink);
                }
                parser.recycle(batch);
            }
        }
        parser.join()
    });
    progress.finish();
    let mut read = read?;
    read.reassembly = defrag.finish();
    if let Some(m) = multi {
        return m.finish(vec![read], sink);
    }
    let end = engine.now();
    engine.finish(end);
    hand_over_findings(&mut engine, 0, sink);
    let report = engine.snapshot();
    sink.end_capture(0, &report)?;
    let point = points.point(0);
    let mut result = CaptureResult::new(path.to_path_buf(), point.name.clone(), read, report);
    result.mirror = point.mirror;
    Ok(vec![result])
}

/// Mirrored packets kept while a capture has one capture point, for the
/// cross-capture matcher when a second point turns up (about 5 MB). The
/// matcher is not fed while there is one point, as it would hold every
/// packet of its window waiting for a copy (a million entries at 1 Mpps).
const RECENT: usize = 1 << 15;

/// The latest `RECENT` mirrored packets of a capture's one point: a ring,
/// overwritten in place once full (a copy of the observation per packet,
/// no more).
#[derive(Default)]
struct Recent {
    ring: Vec<Observation>,
    /// Where the next packet goes once the ring is full: the oldest.
    next: usize,
}

impl Recent {
    #[inline]
    fn push(&mut self, obs: &Observation) {
        if self.ring.capacity() == 0 {
            // At once, not grown by copying as it fills.
            self.ring.reserve_exact(RECENT);
        }
        if self.ring.len() < RECENT {
            self.ring.push(*obs);
        } else {
            self.ring[self.next] = *obs;
            self.next = (self.next + 1) % RECENT;
        }
    }

    fn oldest_first(&self) -> impl Iterator<Item = &Observation> {
        let (newer, older) = self.ring.split_at(self.next);
        older.iter().chain(newer)
    }
}

/// The engine side of an analysis with several capture points (several
/// files, or mirror sessions in one): one engine per point and the
/// cross-capture matcher, points made as they turn up.
struct Multi<'a> {
    multi: MultiEngine,
    points: Points,
    cfg: Config,
    paths: &'a [PathBuf],
    stems: &'a [String],
}

impl Multi<'_> {
    /// The point an item of file `file` belongs to, made (and announced
    /// to the sink) if new.
    fn point_of<S: Sink + ?Sized>(
        &mut self,
        file: usize,
        item: &Item,
        batch: &Batch,
        sink: &mut S,
    ) -> usize {
        let assigned = match item {
            Item::Mirrored { source, .. } => {
                let source = batch.side.sources[usize::from(*source)];
                self.points.session(file, source, self.stems)
            }
            Item::Packet(_) | Item::Fragment { .. } => self.points.plain(file, self.stems),
            Item::Other { .. } => Assigned::Known(file),
        };
        match assigned {
            Assigned::Known(p) => p,
            Assigned::New(p) | Assigned::Renamed(p) => {
                if let Assigned::New(_) = assigned {
                    let made = self.multi.add_capture(self.cfg);
                    debug_assert_eq!(made, p.min(254));
                }
                let point = self.points.point(p);
                sink.begin_capture(p, &self.paths[point.file], &point.name);
                p
            }
        }
    }

    /// One item of file `file`, in capture order (several files: merged
    /// by timestamp).
    fn item<S: Sink + ?Sized>(
        &mut self,
        file: usize,
        item: &Item,
        batch: &Batch,
        defrag: &mut Defrag,
        sink: &mut S,
    ) {
        let reassembled;
        let obs = match item {
            Item::Packet(obs) | Item::Mirrored { obs, .. } => Some(obs),
            _ => {
                reassembled = defrag.datagram(item, batch);
                reassembled.as_ref()
            }
        };
        let Some(obs) = obs else {
            // Other frames count in the file's own point.
            self.points.saw(file, item.ts_ns(), false);
            self.multi.ingest_other(file, item.ts_ns());
            return;
        };
        let i = self.point_of(file, item, batch, sink);
        self.observed(i, obs, sink);
    }

    /// A packet of point `i`.
    fn observed<S: Sink + ?Sized>(&mut self, i: usize, obs: &Observation, sink: &mut S) {
        self.points.saw(i, obs.ts_ns, true);
        let v = self.multi.ingest(i, obs);
        sink.packet(i, obs, &v, self.multi.messages_done(i));
        if let Some(engine) = self.multi.engine(i) {
            sink.flow_state(i, obs, &v, engine);
        }
        // A transmission matched in another capture may give a finding
        // (two-capture rules) in either capture, on a frame ingested
        // earlier.
        let matched = self.multi.matched_capture();
        if (!v.lint.is_empty() || matched.is_some())
            && let Some(engine) = self.multi.engine_mut(i)
        {
            hand_over_findings(engine, i, sink);
        }
        if let Some(m) = matched
            && let Some(engine) = self.multi.engine_mut(m)
        {
            hand_over_findings(engine, m, sink);
        }
    }

    /// Ends every point and makes one result per point; `reads[f]` is
    /// file f's reading totals (given to the file's own point).
    fn finish<S: Sink + ?Sized>(
        mut self,
        reads: Vec<ReadStats>,
        sink: &mut S,
    ) -> io::Result<Vec<CaptureResult>> {
        self.multi.finish(&self.points.ends());
        for i in 0..self.points.len() {
            if let Some(engine) = self.multi.engine_mut(i) {
                hand_over_findings(engine, i, sink);
            }
        }
        let files = self.paths.len() as u64;
        let reports = self.multi.snapshots();
        let points = self.points.into_points();
        let mut reads: Vec<Option<ReadStats>> = reads.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(points.len());
        for (i, (mut report, point)) in reports.into_iter().zip(points).enumerate() {
            report.capture.files = files;
            sink.end_capture(i, &report)?;
            let read = reads
                .get_mut(point.file)
                .and_then(Option::take)
                .unwrap_or_default();
            let CapturePoint { file, mirror, name } = point;
            let mut result = CaptureResult::new(self.paths[file].clone(), name, read, report);
            result.mirror = mirror;
            out.push(result);
        }
        Ok(out)
    }
}

/// Gives the engine's lint findings to the sink and clears them.
#[inline]
fn hand_over_findings<S: Sink + ?Sized>(engine: &mut Engine, capture: usize, sink: &mut S) {
    if !engine.findings().is_empty() {
        sink.findings(capture, engine.findings());
        engine.clear_findings();
    }
}

/// One capture's stream of batches, for the merge by timestamp.
struct Source<'scope> {
    parser: Parser<'scope>,
    batch: Batch,
    pos: usize,
    done: bool,
    defrag: Defrag,
}

impl Source<'_> {
    /// The next item's timestamp (blocks for the next batch).
    fn head(&mut self) -> Option<u64> {
        while !self.done && self.pos >= self.batch.items.len() {
            self.pos = 0;
            match self.parser.next_batch() {
                Some(batch) => {
                    let old = std::mem::replace(&mut self.batch, batch);
                    self.parser.recycle(old);
                }
                None => self.done = true,
            }
        }
        if self.done {
            return None;
        }
        Some(self.batch.items[self.pos].ts_ns())
    }
}

/// Progress of several parsing threads, summed into one bar.
struct SharedProgress<'a> {
    inner: &'a dyn Progress,
    positions: Vec<std::sync::atomic::AtomicU64>,
}

struct PartProgress<'a> {
    shared: &'a SharedProgress<'a>,
    index: usize,
}

impl Progress for PartProgress<'_> {
    fn set(&self, position: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.shared.positions[self.index].store(position, Relaxed);
        let total = self.shared.positions.iter().map(|p| p.load(Relaxed)).sum();
        self.shared.inner.set(total);
    }
}

/// Several captures: one parsing thread each, merged by raw timestamp
/// into the engine's [`MultiEngine`] (one engine per capture plus the
/// cross-capture matcher that fills `between_captures`).
fn analyze_many<S: Sink + ?Sized>(
    paths: &[PathBuf],
    stems: Vec<String>,
    opts: &Options,
    sink: &mut S,
    progress: &dyn Progress,
) -> io::Result<Vec<CaptureResult>> {
    let mut readers = Vec::with_capacity(paths.len());
    let mut total = Some(0u64);
    for path in paths {
        let (reader, len) = open_with_len(path, opts.map_files)?;
        total = total.zip(len).map(|(a, b)| a + b);
        readers.push(reader);
    }
    progress.start(&paths[0], total);
    let shared = SharedProgress {
        inner: progress,
        positions: paths.iter().map(|_| Default::default()).collect(),
    };
    let parts: Vec<PartProgress<'_>> = (0..paths.len())
        .map(|index| PartProgress {
            shared: &shared,
            index,
        })
        .collect();
    let n = paths.len();
    let mut multi = Multi {
        multi: MultiEngine::new(n, opts.engine, MergeConfig::default()),
        points: Points::new(&stems),
        cfg: opts.engine,
        paths,
        stems: &stems,
    };
    let decode = opts.decode;
    let reads = std::thread::scope(|scope| -> io::Result<Vec<ReadStats>> {
        let mut sources = Vec::with_capacity(n);
        for (i, (reader, part)) in readers.into_iter().zip(&parts).enumerate() {
            let parser = spawn_parser(scope, format!("mra-parse-{i}"), reader, decode, part)?;
            sources.push(Source {
                parser,
                batch: Batch::default(),
                pos: 0,
                done: false,
                defrag: Defrag::new(decode),
            });
        }
        loop {
            // The capture whose next frame is earliest (ties: lowest index).
            let mut best: Option<(u64, usize)> = None;
            for (i, src) in sources.iter_mut().enumerate() {
                if let Some(ts) = src.head()
                    && best.is_none_or(|(b, _)| ts < b)
                {
                    best = Some((ts, i));
                }
            }
            let Some((_, i)) = best else { break };
            let src = &mut sources[i];
            let item = src.batch.items[src.pos];
            src.pos += 1;
            multi.item(i, &item, &src.batch, &mut src.defrag, sink);
        }
        sources
            .into_iter()
            .map(|s| {
                let mut read = s.parser.join()?;
                read.reassembly = s.defrag.finish();
                Ok(read)
            })
            .collect()
    });
    progress.finish();
    multi.finish(reads?, sink)
}

/// Analyses every capture and returns one result per capture (in the
/// order given). Several captures are merged by timestamp into one
/// analysis (`between_captures` in the first capture's report).
///
/// Generic over the sink so that `report`'s [`NoSink`] costs nothing per
/// packet (a `dyn` sink was a call per packet).
pub fn analyze<S: Sink + ?Sized>(
    paths: &[PathBuf],
    opts: &Options,
    sink: &mut S,
    progress: &dyn Progress,
) -> io::Result<Vec<CaptureResult>> {
    let mut stems: Vec<String> = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        // Two captures with the same file name get distinct stems.
        let mut stem = capture_stem(path);
        if stems.contains(&stem) {
            stem = format!("{stem}-{}", i + 1);
        }
        sink.begin_capture(i, path, &stem);
        stems.push(stem);
    }
    match paths {
        [] => Ok(Vec::new()),
        [path] => {
            let stem = stems.pop().unwrap_or_default();
            analyze_one(path, stem, opts, sink, progress)
        }
        _ => analyze_many(paths, stems, opts, sink, progress),
    }
}

/// One report for several captures.
///
/// With one capture this is its engine's report unchanged. With several
/// (the `MultiEngine`'s per-capture reports), the reports are joined by
/// `Report::merge`, and `files` is the number of captures.
pub fn merge_reports(results: &[CaptureResult]) -> Option<Report> {
    let (first, rest) = results.split_first()?;
    let mut merged = first.report.clone();
    if rest.is_empty() {
        explain_traffic(&mut merged);
        return Some(merged);
    }
    // Capture points of one file (mirror sessions) count it once.
    merged.capture.files = results
        .iter()
        .map(|r| r.report.capture.files)
        .max()
        .unwrap_or(1)
        .max(results.iter().filter(|r| r.mirror.is_none()).count() as u64);
    for r in rest {
        merged.merge(&r.report);
    }
    explain_traffic(&mut merged);
    Some(merged)
}

/// Says, in the capture section, why a capture with frames held none of
/// our packets (`analyzer::traffic::explain`).
fn explain_traffic(report: &mut Report) {
    let c = &report.capture;
    let note =
        analyzer::traffic::explain(c.frames, c.metaroce_packets + c.rocev2_packets, &c.traffic);
    report.capture.traffic.note = note;
}

/// Totals of a bare walk (records and frame decode, no analysis).
#[derive(Debug, Clone, Copy, Default)]
pub struct WalkStats {
    pub frames: u64,
    pub metaroce: u64,
    pub rocev2: u64,
    pub corrupt_records: u64,
}

/// Reads every record (memory-mapped, as the analysis reads a file) and
/// decodes every frame, nothing else (the benchmark's baseline); with an
/// `engine`, feeds it every packet on this thread.
pub fn walk(
    path: &Path,
    decode: &DecodeConfig,
    mut engine: Option<Engine>,
) -> io::Result<WalkStats> {
    let mut reader = open(path, true)?;
    let mut stats = WalkStats::default();
    let mut verdict = Verdict::default();
    while let Some(next) = reader.next_record() {
        let Ok(record) = next else {
            stats.corrupt_records += 1;
            continue;
        };
        let link = LinkType::from(u32::from(record.linktype));
        stats.frames += 1;
        // The same decoding as the analysis (`Item::decode`).
        let obs = Observation::decode(record.index, record.ts_ns, link, record.data, decode);
        match &obs {
            Some(Observation {
                kind: ObsKind::MetaRoce(_),
                ..
            }) => stats.metaroce += 1,
            Some(Observation {
                kind: ObsKind::RoceV2(_),
                ..
            }) => stats.rocev2 += 1,
            None => {}
        }
        if let Some(engine) = &mut engine {
            match &obs {
                Some(obs) => {
                    engine.ingest_into(obs, &mut verdict);
                    std::hint::black_box(&verdict);
                }
                None => engine.ingest_other(record.ts_ns),
            }
        }
    }
    if let Some(engine) = &mut engine {
        engine.finish(engine.now());
        std::hint::black_box(engine.snapshot());
    }
    Ok(stats)
}

#[cfg(test)]
mod test {
    use super::*;

    /// The lint's counts of several captures are summed per rule.
    #[test]
    fn merged_reports_sum_the_lint_counts() {
        use analyzer::lint::{RuleCount, RuleId};
        let count = |rule: &'static str, count| RuleCount {
            rule,
            severity: RuleId::of(rule).rule().severity,
            count,
        };
        let capture = |counts: Vec<RuleCount>| {
            let engine = Engine::new(Config {
                lint: Some(Default::default()),
                ..Config::default()
            });
            let mut report = engine.snapshot();
            report.lint.as_mut().expect("lint on").counts = counts;
            CaptureResult::new(
                PathBuf::from("c.pcap"),
                "c".into(),
                ReadStats::default(),
                report,
            )
        };
        let merged = merge_reports(&[
            capture(vec![count("MR-PKT-002", 3), count("MR-RCV-001", 1)]),
            capture(vec![count("MR-PKT-001", 1), count("MR-RCV-001", 4)]),
        ])
        .unwrap();
        assert_eq!(
            merged.lint.unwrap().counts,
            [
                count("MR-PKT-001", 1),
                count("MR-PKT-002", 3),
                count("MR-RCV-001", 5)
            ]
        );
    }

    /// A batch sent raw and decoded on the engine thread holds exactly the
    /// items the parsing thread would have decoded itself.
    #[test]
    fn raw_batches_decode_like_the_parsing_thread() {
        let decode = Options::new(DecodeConfig::default(), Config::default()).decode;
        for name in [
            "all_types.pcap",
            "malformed.pcap",
            "snaplen.pcap",
            "ip_fragments.pcap",
        ] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/generated")
                .join(name);
            let mut reader = Reader::open(&path).unwrap();
            let mut raw = Batch::with_capacity(BATCH);
            let mut direct = Vec::new();
            let mut side = Side::default();
            while let Some(record) = reader.next_record() {
                let record = record.unwrap();
                raw.push_raw(&record);
                direct.push(Item::decode(
                    record.index,
                    record.ts_ns,
                    record.linktype,
                    record.data,
                    &decode,
                    &mut side,
                ));
            }
            assert!(direct.len() > 10, "{name}: {} frames", direct.len());
            raw.decode(&decode);
            assert_eq!(raw.items, direct, "{name}");
            assert_eq!(raw.side.fragment_bytes, side.fragment_bytes, "{name}");
            assert_eq!(raw.side.sources, side.sources, "{name}");
            assert_eq!(raw.side.census.report(), side.census.report(), "{name}");
            assert!(raw.raw.is_empty() && raw.raw_bytes.is_empty());
        }
    }

    /// The thread statistics count every batch (several per capture, the
    /// last one partial), and the waits they report took time.
    #[test]
    fn thread_stats_count_every_batch_and_wait() {
        use proto_parse::capture::PcapWriter;
        let dir = tempfile::tempdir().unwrap();
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/generated/all_types.pcap");
        let mut frames = Vec::new();
        let mut reader = Reader::open(&fixture).unwrap();
        while let Some(record) = reader.next_record() {
            frames.push(record.unwrap().data.to_vec());
        }
        let path = dir.path().join("repeated.pcap");
        let mut writer = PcapWriter::create(&path).unwrap();
        let total = 3 * BATCH + 7;
        for i in 0..total {
            writer
                .write_frame(i as u64 * 1000, &frames[i % frames.len()])
                .unwrap();
        }
        writer.flush().unwrap();
        drop(writer);

        let opts = Options::new(DecodeConfig::default(), Config::default());
        for paths in [vec![path.clone()], vec![path.clone(), path.clone()]] {
            let results = analyze(&paths, &opts, &mut NoSink, &NoProgress).unwrap();
            for r in &results {
                let t = r.read.threads;
                assert_eq!(r.read.frames, total as u64);
                assert_eq!(t.batches, 4, "{t:?}");
                assert!(t.raw_batches <= t.batches, "{t:?}");
                assert_eq!(t.parser_waits == 0, t.parser_wait_ns == 0, "{t:?}");
                assert_eq!(t.engine_waits == 0, t.engine_wait_ns == 0, "{t:?}");
            }
        }
    }
}
