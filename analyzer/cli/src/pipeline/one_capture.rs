//! One capture file. A capture of plain packets, or of one mirror
//! session, is analysed by one engine, like any single capture; the
//! cross-capture matcher is fed only once a second capture point turns
//! up (`several_points`), with the session's latest packets kept for it
//! meanwhile ([`Recent`]).

use std::io;
use std::path::Path;

use analyzer::engine::{Engine, MergeConfig, MultiEngine, Observation, Verdict};
use proto_parse::mirror::MirrorSource;

use super::item::Item;
use super::reading::{open_with_len, spawn_parser};
use super::reassembly::Defrag;
use super::several_points::Multi;
use super::{CaptureResult, Options, Progress, Sink, hand_over_findings};
use crate::points::{Assigned, Points};

/// One capture: parsing on a second thread, the engine and the sink on
/// this one. A capture of plain packets, or of one mirror session, has one
/// engine; when a second capture point turns up (another session, or plain
/// packets beside a session), the analysis goes on with a [`Multi`] whose
/// first point is the engine so far, and the session's latest `RECENT`
/// packets go to the matcher so that copies seen at both points match
/// (plain packets before that are not kept).
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
