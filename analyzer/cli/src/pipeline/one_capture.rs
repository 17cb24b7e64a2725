//! One capture file. A capture of plain packets, or of one mirror
//! session, is analysed by one engine, like any single capture; the
//! cross-capture matcher is fed only once a second capture point turns
//! up (`several_points`), with the items of the session's latest batches
//! kept for it meanwhile ([`Recent`]).

use std::collections::VecDeque;
use std::io;
use std::path::Path;

use analyzer::engine::{Engine, MergeConfig, MultiEngine, Observation, Verdict};
use proto_parse::mirror::MirrorSource;

use super::BATCH;
use super::batch::Batch;
use super::item::Item;
use super::reading::{Parser, open_with_len, spawn_parser};
use super::reassembly::Defrag;
use super::several_points::Multi;
use super::{CaptureResult, Options, Progress, Sink, hand_over_findings};
use crate::points::{Assigned, Points};

/// One capture: parsing on a second thread, the engine and the sink on
/// this one. A capture of plain packets, or of one mirror session, has one
/// engine; when a second capture point turns up (another session, or plain
/// packets beside a session), the analysis goes on with a [`Multi`] whose
/// first point is the engine so far, and the session's packets of its
/// latest `RECENT_BATCHES` batches go to the matcher so that copies seen
/// at both points match (plain packets before that are not kept).
pub(super) fn analyze_one<S: Sink + ?Sized>(
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
                    Item::Packet { obs, session: None } if points.plain_is_own(0) => obs,
                    Item::Packet {
                        obs,
                        session: Some(index),
                    } if own_index == Some(*index) => obs,
                    Item::Packet {
                        obs,
                        session: Some(index),
                    } if points.is_own_session(0, batch.side.sources[usize::from(*index)]) => {
                        let session = batch.side.sources[usize::from(*index)];
                        if let Assigned::Renamed(_) = points.session(0, session, &stems) {
                            sink.begin_capture(0, path, &points.point(0).name);
                        }
                        own_session = Some(session);
                        own_index = Some(*index);
                        obs
                    }
                    Item::Packet { .. } => {
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
                for obs in recent.packets().chain(Recent::mirrored(&batch.items[..at])) {
                    m.multi.remember(0, obs);
                }
                for item in &batch.items[at..] {
                    m.item(0, item, &batch, &mut defrag, sink);
                }
                parser.recycle(batch);
                break;
            }
            if own_session.is_some() {
                recent.keep(batch, &parser);
            } else {
                parser.recycle(batch);
            }
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

/// Batches kept while a capture's one point is a mirror session, for the
/// cross-capture matcher when a second point turns up: the latest
/// `RECENT_BATCHES * BATCH` frames (32,768, about 5 MB of items). The
/// matcher is not fed while there is one point, as it would hold every
/// packet of its window waiting for a copy (a million entries at 1 Mpps).
const RECENT_BATCHES: usize = (1 << 15) / BATCH;

/// The items of the latest `RECENT_BATCHES` batches of a capture whose one
/// point is a mirror session: nothing is copied per packet. A kept batch's
/// items are swapped for the oldest kept ones (emptied) and the batch goes
/// back to the parsing thread at once, its other buffers with it. Plain
/// packets before a session are not kept.
#[derive(Default)]
struct Recent {
    items: VecDeque<Vec<Item>>,
}

impl Recent {
    fn keep(&mut self, mut batch: Batch, parser: &Parser<'_>) {
        let mut spare = if self.items.len() == RECENT_BATCHES {
            self.items.pop_front().unwrap_or_default()
        } else {
            Vec::with_capacity(BATCH)
        };
        spare.clear();
        std::mem::swap(&mut batch.items, &mut spare);
        self.items.push_back(spare);
        parser.recycle(batch);
    }

    /// The mirrored packets of `items`: in a batch of the one-point loop,
    /// the session's own (a copy of another session, or a plain packet,
    /// ends that loop).
    fn mirrored(items: &[Item]) -> impl Iterator<Item = &Observation> {
        items.iter().filter_map(|item| match item {
            Item::Packet {
                obs,
                session: Some(_),
            } => Some(obs),
            _ => None,
        })
    }

    /// The session's packets of the kept batches, oldest first.
    fn packets(&self) -> impl Iterator<Item = &Observation> {
        self.items.iter().flat_map(|items| Recent::mirrored(items))
    }
}
