//! Several captures (one per host, each with its own clock): one parsing
//! thread each, their items merged by timestamp on the engine thread into
//! [`Multi`], and one progress bar for all of them.

use std::io;
use std::path::PathBuf;

use analyzer::engine::{MergeConfig, MultiEngine};

use super::batch::Batch;
use super::reading::{Parser, open_with_len, spawn_parser};
use super::reassembly::Defrag;
use super::several_points::Multi;
use super::{CaptureResult, Options, Progress, ReadStats, Sink};
use crate::points::Points;

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
pub(super) fn analyze_many<S: Sink + ?Sized>(
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
            multi.item(i, &item, &src.batch.side, &mut src.defrag, sink);
        }
        sources
            .into_iter()
            .map(|s| {
                let mut read = s.parser.join()?;
                s.defrag.finish(&mut read);
                Ok(read)
            })
            .collect()
    });
    progress.finish();
    multi.finish(reads?, sink)
}
