//! The two-thread analysis pipeline of `metaroce-analyze`.
//!
//! One thread reads capture records, decodes every frame with
//! `proto_parse::frame::decode` and turns it into a small, owned
//! [`Observation`]; batches of them (reused `Vec`s) go over a bounded
//! channel to the calling thread, which feeds the engine in capture order
//! and hands each packet and its [`Verdict`] to an optional sink (export,
//! plots). Parsing and analysis thus run on the two cores at once; memory
//! is a few batches plus the engine's bounded state, whatever the file size.
//!
//! Several captures (one per host, each with its own clock) are analysed
//! one after the other, each by its own engine; [`merge_reports`] joins
//! their reports into one (see its documentation for what is merged).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use proto_parse::capture::Reader;
use proto_parse::frame::{self, DecodeConfig, LinkType, Transport};

use crate::engine::{Config, Engine, Observation, Report, Verdict};

/// Frames per batch sent from the parsing thread to the engine thread.
pub const BATCH: usize = 1024;
/// Batches in flight between the two threads (plus the recycled ones).
const IN_FLIGHT: usize = 8;

/// What the parsing thread produced for one frame.
#[derive(Debug, Clone, Copy)]
pub enum Item {
    /// A MetaRoCE or RoCEv2 frame (malformed ones included: the engine
    /// counts them).
    Packet(Observation),
    /// Any other frame: its number and timestamp.
    Other { frame: u64, ts_ns: u64 },
}

/// How to read and analyse captures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub decode: DecodeConfig,
    pub engine: Config,
}

impl Options {
    /// Decode settings with the ICRC check off: the engine does not use it,
    /// and it costs three times the rest of the decode (see
    /// `DecodeConfig::verify_crc`).
    pub fn new(mut decode: DecodeConfig, engine: Config) -> Options {
        decode.verify_crc = false;
        Options { decode, engine }
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
}

/// One capture analysed.
#[derive(Debug, Clone)]
pub struct CaptureResult {
    pub path: PathBuf,
    /// The file name without extension (the `host=` partition of exports).
    pub stem: String,
    pub read: ReadStats,
    pub report: Report,
}

/// Receives every packet and its verdict, in capture order, on the engine
/// thread.
pub trait Sink {
    /// A new capture starts (index in the list of captures).
    fn begin_capture(&mut self, _index: usize, _path: &Path, _stem: &str) {}
    fn packet(&mut self, obs: &Observation, verdict: &Verdict);
    /// The capture is finished; `report` is its engine's final report.
    fn end_capture(&mut self, _report: &Report) -> io::Result<()> {
        Ok(())
    }
}

/// A sink that does nothing (`report` alone).
pub struct NoSink;

impl Sink for NoSink {
    #[inline]
    fn packet(&mut self, _obs: &Observation, _verdict: &Verdict) {}
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

/// The stem of a capture path (`-` for standard input).
pub fn capture_stem(path: &Path) -> String {
    if path.as_os_str() == "-" {
        return "stdin".to_string();
    }
    path.file_stem().map_or_else(
        || "capture".to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Opens a capture (`-` for standard input) or says why not.
fn open(path: &Path) -> io::Result<Reader<Box<dyn io::Read + Send>>> {
    Reader::open_or_stdin(path).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// The parsing thread: records to observations, in batches.
fn parse_loop(
    mut reader: Reader<Box<dyn io::Read + Send>>,
    decode: DecodeConfig,
    tx: SyncSender<Vec<Item>>,
    recycle: Receiver<Vec<Item>>,
    progress: &dyn Progress,
) -> ReadStats {
    let mut stats = ReadStats::default();
    let mut batch: Vec<Item> = Vec::with_capacity(BATCH);
    let mut batches = 0u32;
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
        let frame = frame::decode(
            LinkType::from(u32::from(record.linktype)),
            record.data,
            &decode,
        );
        let item = match frame.payload {
            Transport::Other => Item::Other {
                frame: record.index,
                ts_ns: record.ts_ns,
            },
            _ => match Observation::from_frame(record.index, record.ts_ns, &frame) {
                Some(obs) => Item::Packet(obs),
                None => Item::Other {
                    frame: record.index,
                    ts_ns: record.ts_ns,
                },
            },
        };
        batch.push(item);
        if batch.len() == BATCH {
            let next = recycle
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(BATCH));
            if tx.send(std::mem::replace(&mut batch, next)).is_err() {
                break;
            }
            batches += 1;
            if batches.is_multiple_of(64) {
                progress.set(reader.position());
            }
        }
    }
    if !batch.is_empty() {
        let _ = tx.send(batch);
    }
    progress.set(reader.position());
    let s = reader.stats();
    stats.frames = s.records;
    stats.skipped_bytes = s.skipped_bytes;
    stats.io_error = reader.io_error().map(ToString::to_string);
    stats
}

/// Analyses one capture: parsing on a second thread, the engine and the
/// sink on this one.
pub fn analyze_capture(
    path: &Path,
    opts: &Options,
    sink: &mut dyn Sink,
    progress: &dyn Progress,
) -> io::Result<CaptureResult> {
    let reader = open(path)?;
    let len = if path.as_os_str() == "-" {
        None
    } else {
        std::fs::metadata(path).ok().map(|m| m.len())
    };
    progress.start(path, len);
    let mut engine = Engine::new(opts.engine);
    let (tx, rx) = sync_channel::<Vec<Item>>(IN_FLIGHT);
    let (back_tx, back_rx) = sync_channel::<Vec<Item>>(IN_FLIGHT + 2);
    let decode = opts.decode;
    let read = std::thread::scope(|scope| {
        let parser = scope.spawn(move || parse_loop(reader, decode, tx, back_rx, progress));
        for mut batch in rx {
            for item in &batch {
                match item {
                    Item::Packet(obs) => {
                        let v = engine.ingest(obs);
                        sink.packet(obs, &v);
                    }
                    Item::Other { ts_ns, .. } => engine.ingest_other(*ts_ns),
                }
            }
            batch.clear();
            let _ = back_tx.try_send(batch);
        }
        parser.join()
    });
    progress.finish();
    let read = read.map_err(|_| io::Error::other("the parsing thread panicked"))?;
    let end = engine.now();
    engine.finish(end);
    let report = engine.snapshot();
    sink.end_capture(&report)?;
    Ok(CaptureResult {
        path: path.to_path_buf(),
        stem: capture_stem(path),
        read,
        report,
    })
}

/// Analyses every capture (in the order given) and returns one result per
/// capture.
pub fn analyze(
    paths: &[PathBuf],
    opts: &Options,
    sink: &mut dyn Sink,
    progress: &dyn Progress,
) -> io::Result<Vec<CaptureResult>> {
    let mut stems: Vec<String> = Vec::new();
    let mut out = Vec::with_capacity(paths.len());
    for (i, path) in paths.iter().enumerate() {
        // Two captures with the same file name get distinct stems.
        let mut stem = capture_stem(path);
        if stems.contains(&stem) {
            stem = format!("{stem}-{}", i + 1);
        }
        stems.push(stem.clone());
        sink.begin_capture(i, path, &stem);
        let mut result = analyze_capture(path, opts, sink, progress)?;
        result.stem = stem;
        out.push(result);
    }
    Ok(out)
}

/// One report for several captures.
///
/// With one capture this is its engine's report unchanged. With several,
/// until the engine merges captures itself (`between_captures`), the
/// reports are joined: capture counters are summed (`files` = the number
/// of captures, first/last timestamps the extremes), `directions` and
/// `rocev2` are listed capture after capture (a direction captured at both
/// ends appears once per capture: each is that capture point's view), the
/// engine counters are summed and `between_captures` stays empty.
pub fn merge_reports(results: &[CaptureResult]) -> Option<Report> {
    let (first, rest) = results.split_first()?;
    let mut merged = first.report.clone();
    if rest.is_empty() {
        return Some(merged);
    }
    merged.capture.files = results.len() as u64;
    for r in rest {
        let c = &r.report.capture;
        let m = &mut merged.capture;
        if c.frames > 0 {
            m.first_ts_ns = if m.frames == 0 {
                c.first_ts_ns
            } else {
                m.first_ts_ns.min(c.first_ts_ns)
            };
            m.last_ts_ns = m.last_ts_ns.max(c.last_ts_ns);
        }
        m.frames += c.frames;
        m.metaroce_packets += c.metaroce_packets;
        m.rocev2_packets += c.rocev2_packets;
        m.malformed += c.malformed;
        m.time_went_backwards += c.time_went_backwards;
        merged
            .directions
            .extend(r.report.directions.iter().cloned());
        merged.rocev2.extend(r.report.rocev2.iter().cloned());
        let e = &r.report.engine;
        let me = &mut merged.engine;
        me.live_directions += e.live_directions;
        me.live_rocev2_flows += e.live_rocev2_flows;
        me.evicted_directions += e.evicted_directions;
        me.evicted_rocev2_flows += e.evicted_rocev2_flows;
        me.rocev2_unmatched_responses += e.rocev2_unmatched_responses;
        me.rocev2_not_rc += e.rocev2_not_rc;
    }
    merged.capture.duration_ns = merged
        .capture
        .last_ts_ns
        .saturating_sub(merged.capture.first_ts_ns);
    Some(merged)
}

/// Totals of a bare walk (records and frame decode, no analysis).
#[derive(Debug, Clone, Copy, Default)]
pub struct WalkStats {
    pub frames: u64,
    pub metaroce: u64,
    pub rocev2: u64,
    pub corrupt_records: u64,
}

/// Reads every record and decodes every frame, nothing else (the
/// benchmark's baseline).
pub fn walk(path: &Path, decode: &DecodeConfig) -> io::Result<WalkStats> {
    let mut reader = open(path)?;
    let mut stats = WalkStats::default();
    while let Some(next) = reader.next_record() {
        let Ok(record) = next else {
            stats.corrupt_records += 1;
            continue;
        };
        let frame = frame::decode(
            LinkType::from(u32::from(record.linktype)),
            record.data,
            decode,
        );
        stats.frames += 1;
        match frame.payload {
            Transport::MetaRoce(_) => stats.metaroce += 1,
            Transport::RoceV2(_) => stats.rocev2 += 1,
            Transport::Other => {}
        }
    }
    Ok(stats)
}
