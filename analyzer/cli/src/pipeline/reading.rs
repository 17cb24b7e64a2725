//! The parsing thread: it reads capture records, decodes them into
//! batches (or sends them raw when the engine thread is idle enough to
//! decode them itself) and hands them over a bounded channel; the engine
//! thread takes them through a [`Parser`], which counts who waited for
//! whom ([`super::ThreadStats`]).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::time::Instant;

use proto_parse::capture::Reader;
use proto_parse::frame::DecodeConfig;

use analyzer::traffic::Census;

use super::batch::Batch;
use super::item::Item;
use super::{BATCH, Progress, ReadStats, ThreadStats};

/// Batches in flight between the two threads (plus the recycled ones).
const IN_FLIGHT: usize = 8;
/// The parsing thread sends raw records while fewer batches than this wait
/// for the engine thread (it has time to decode them itself).
const RAW_WHEN_QUEUED_BELOW: usize = 3;

/// Opens a capture (`-` for standard input), memory-mapped when `map`
/// allows it, or says why not.
pub(super) fn open(path: &Path, map: bool) -> io::Result<CaptureReader> {
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
pub(super) type CaptureReader = Reader<Box<dyn io::Read + Send>>;

/// A running parsing thread: its handle, its batches and the way back for
/// used ones.
pub(super) struct Parser<'scope> {
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
    pub(super) fn next_batch(&mut self) -> Option<Batch> {
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
    pub(super) fn recycle(&self, mut batch: Batch) {
        batch.clear();
        let _ = self.back.try_send(batch);
    }

    pub(super) fn join(self) -> io::Result<ReadStats> {
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
pub(super) fn open_with_len(path: &Path, map: bool) -> io::Result<(CaptureReader, Option<u64>)> {
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

pub(super) fn spawn_parser<'scope, 'env>(
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

#[cfg(test)]
mod test {
    use super::*;
    use crate::pipeline::{NoProgress, NoSink, Options, analyze};
    use analyzer::engine::Config;

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
