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
//!
//! One concern per file: what a frame becomes on the parsing thread
//! (`item`) and the batches that carry it (`batch`); the parsing thread
//! and its hand-over (`reading`); the engine thread's reassembly
//! (`reassembly`); one capture (`one_capture`), several capture points
//! (`several_points`) and several captures merged by timestamp
//! (`several_captures`); the one report of several ([`merge_reports`]);
//! the benchmark's bare walk ([`walk`]).

mod batch;
mod item;
mod merged_report;
mod one_capture;
mod reading;
mod reassembly;
mod several_captures;
mod several_points;
mod walk;

use std::io;
use std::path::{Path, PathBuf};

use proto_parse::frame::DecodeConfig;

use analyzer::engine::{Config, Engine, MsgDone, Observation, Report, Verdict};
use analyzer::lint::Finding;
use analyzer::traffic::TrafficReport;
use proto_parse::defrag::ReassemblyStats;
use proto_parse::mirror::MirrorSource;

pub use merged_report::merge_reports;
pub use walk::{WalkStats, walk};

/// Frames per batch sent from the parsing thread to the engine thread.
pub const BATCH: usize = 1024;

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
    pub(super) fn new(
        path: PathBuf,
        stem: String,
        read: ReadStats,
        mut report: Report,
    ) -> CaptureResult {
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
            one_capture::analyze_one(path, stem, opts, sink, progress)
        }
        _ => several_captures::analyze_many(paths, stems, opts, sink, progress),
    }
}

/// Gives the engine's lint findings to the sink and clears them.
#[inline]
pub(super) fn hand_over_findings<S: Sink + ?Sized>(
    engine: &mut Engine,
    capture: usize,
    sink: &mut S,
) {
    if !engine.findings().is_empty() {
        sink.findings(capture, engine.findings());
        engine.clear_findings();
    }
}
