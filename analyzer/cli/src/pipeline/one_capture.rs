//! One capture file. A capture of plain packets, or of one mirror
//! session, is analysed by one engine, like any single capture; the
//! cross-capture matcher is fed only once a second capture point turns
//! up (`several_points`), with the items of the point's latest batches
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
use super::reassembly::{Datagram, Defrag};
use super::several_points::Multi;
use super::{CaptureResult, Options, Progress, Sink, hand_over_findings};
use crate::points::{Assigned, Points};

/// One capture: parsing on a second thread, the engine and the sink on
/// this one. A capture of plain packets, or of one mirror session, has one
/// engine; when a second capture point turns up (another session, or plain
/// packets beside a session, or a session beside plain packets), the
/// analysis goes on with a [`Multi`] whose first point is the engine so
/// far, and the first point's packets of its latest `RECENT_BATCHES`
/// batches go to the matcher so that copies seen at both points match.
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
        // The datagrams rebuilt from IP fragments in a batch, for `Recent`.
        let mut rebuilt: Vec<(usize, Datagram)> = Vec::new();
        while let Some(mut batch) = parser.next_batch() {
            // Where a second point turned up: the item, and the datagram
            // it completed if it was an IP fragment.
            let mut second_point: Option<(usize, Option<Datagram>)> = None;
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
                        let source = batch.side.sources[usize::from(*index)];
                        own_session = Some(claim(&mut points, source, path, &stems, sink));
                        own_index = Some(*index);
                        obs
                    }
                    Item::Packet { .. } => {
                        second_point = Some((at, None));
                        break;
                    }
                    _ => match defrag.datagram(item, &batch.side) {
                        Some(d) => {
                            let own = match d.mirror {
                                None => points.plain_is_own(0),
                                Some(source) => {
                                    own_session == Some(source) || points.is_own_session(0, source)
                                }
                            };
                            if !own {
                                second_point = Some((at, Some(d)));
                                break;
                            }
                            if let Some(source) = d.mirror {
                                own_session = Some(claim(&mut points, source, path, &stems, sink));
                            }
                            rebuilt.push((at, d));
                            reassembled = d.obs;
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
            // A rebuilt datagram is a packet of the batch from now on, in
            // place of the fragment that completed it.
            for (at, d) in rebuilt.drain(..) {
                let session = d.mirror.map(|source| batch.side.source(source));
                batch.items[at] = Item::Packet {
                    obs: d.obs,
                    session,
                };
            }
            hand_over_findings(&mut engine, 0, sink);
            if let Some((at, datagram)) = second_point {
                let first = std::mem::replace(&mut engine, Engine::new(opts.engine));
                let m = multi.insert(Multi {
                    multi: MultiEngine::from_engine(first, MergeConfig::default()),
                    points: std::mem::replace(&mut points, Points::new(&[])),
                    cfg: opts.engine,
                    paths: &paths,
                    stems: &stems,
                });
                for obs in recent
                    .packets()
                    .chain(Recent::packets_of(&batch.items[..at]))
                {
                    m.multi.remember(0, obs);
                }
                let rest = match datagram {
                    Some(d) => {
                        m.datagram(0, &d, sink);
                        at + 1
                    }
                    None => at,
                };
                for item in &batch.items[rest..] {
                    m.item(0, item, &batch.side, &mut defrag, sink);
                }
                parser.recycle(batch);
                break;
            }
            recent.keep(batch, &parser);
        }
        // Several points: the rest of the capture.
        if let Some(m) = &mut multi {
            while let Some(batch) = parser.next_batch() {
                for item in &batch.items {
                    m.item(0, item, &batch.side, &mut defrag, sink);
                }
                parser.recycle(batch);
            }
        }
        parser.join()
    });
    progress.finish();
    let mut read = read?;
    defrag.finish(&mut read);
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

/// Mirror session `source` becomes (or is) the capture's one point: the
/// point takes its name if it had no packet yet (announced to the sink).
/// Returns `source`.
fn claim<S: Sink + ?Sized>(
    points: &mut Points,
    source: MirrorSource,
    path: &Path,
    stems: &[String],
    sink: &mut S,
) -> MirrorSource {
    if let Assigned::Renamed(_) = points.session(0, source, stems) {
        sink.begin_capture(0, path, &points.point(0).name);
    }
    source
}

/// Batches kept while a capture has one point (plain packets, or a
/// mirror session), for the cross-capture matcher when a second point
/// turns up: the latest `RECENT_BATCHES * BATCH` frames (32,768, about
/// 5 MB of items). The matcher is not fed while there is one point, as it
/// would hold every packet of its window waiting for a copy (a million
/// entries at 1 Mpps).
const RECENT_BATCHES: usize = (1 << 15) / BATCH;

/// The items of the latest `RECENT_BATCHES` batches of a capture with one
/// point: nothing is copied per packet. A kept batch's items are swapped
/// for the oldest kept ones (emptied) and the batch goes back to the
/// parsing thread at once, its other buffers with it. Every packet of a
/// kept batch is the point's (a packet of another point ends the
/// one-point loop; a datagram rebuilt from IP fragments is written over
/// the fragment that completed it).
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

    /// The packets of `items`.
    fn packets_of(items: &[Item]) -> impl Iterator<Item = &Observation> {
        items.iter().filter_map(|item| match item {
            Item::Packet { obs, .. } => Some(obs),
            _ => None,
        })
    }

    /// The point's packets of the kept batches, oldest first.
    fn packets(&self) -> impl Iterator<Item = &Observation> {
        self.items
            .iter()
            .flat_map(|items| Recent::packets_of(items))
    }
}
