//! Multi-capture analysis (one capture per host or tap, each with its own
//! clock): every capture has its own [`Engine`]; a [`CrossCapture`] matcher
//! finds the same transmission in several captures, and from the time
//! differences estimates the clock offset between two captures, the
//! one-way delay per path and the packets lost between the capture points.
//!
//! A MetaRoCE transmission is (direction, type, PSN, tx_ts, ev, path_seq):
//! unique, retransmissions included. A RoCEv2 one is (src, dst, dest QP,
//! opcode, PSN) on its UDP source port (the entropy ECMP hashes: RoCEv2's
//! path); a retransmission repeats it, so a second sighting in the same
//! capture replaces the first, which then counts as not seen downstream.
//!
//! Feed the captures merged by timestamp (a k-way merge on the raw capture
//! times): the matcher only keeps `window_ns` of unmatched transmissions.
//! With the lint on, [`MultiEngine`] hands each match to both captures'
//! engines, whose rules of vantage two-capture compare the two copies
//! (`lint::network`).
//!
//! Clock offset of capture b relative to a: for a direction D whose packets
//! reach a first, `ts_b - ts_a = owd + offset`; for its reverse R,
//! `ts_b - ts_a = offset - owd'`. With the smallest delays taken as equal,
//! `offset = (min_D + max_R) / 2` (the NTP estimate on minimum delays).

//!
//! One concern per file: this module is the matcher (keys, the window,
//! duplicates and retransmissions, the fate at the end); `transmission`
//! what a transmission is; `report` the clock offsets and the
//! `between_captures` report; `rows` the row mode of a reduce over many
//! captures' rows (the Spark job); `multi` [`MultiEngine`], the engines of
//! several captures beside one matcher; `blob` the row mode's sightings
//! as bytes (what the Spark job moves between its tasks).

pub mod blob;
mod multi;
mod report;
mod rows;
mod transmission;

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use super::direction::PackedKey;
use crate::observation::Observation;

pub use multi::MultiEngine;
pub use report::one_way_delay;
use report::{END_MARGIN_DELAYS, PathDeltas};
use rows::Rows;
pub use rows::{FlowPath, PathSums};
pub use transmission::Transmission;

/// Most captures one matcher tells apart: a capture is a `u16` index.
pub const MAX_CAPTURES: usize = 1 << u16::BITS;

/// A [`CaptureCopy`]'s frame number is the frame's modulo 2^40 (a
/// sighting packs it beside its capture and ECN in 64 bits).
pub const FRAME_NUMBER_MASK: u64 = (1 << Sighting::FRAME_BITS) - 1;

/// Settings of the cross-capture matcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeConfig {
    /// How long an unmatched transmission waits for its copy in another
    /// capture (raw capture times). Default 1 s.
    pub window_ns: u64,
    /// Most unmatched transmissions kept. Default 1 << 20.
    pub max_pending: usize,
    /// Delay samples kept per (capture pair, direction, ev) (reservoir).
    /// Default 4096.
    pub samples: usize,
}

impl Default for MergeConfig {
    fn default() -> Self {
        MergeConfig {
            window_ns: 1_000_000_000,
            max_pending: 1 << 20,
            samples: 4096,
        }
    }
}

/// What became of a transmission captured at one point and never at the
/// next ([`CrossCapture::take_unmatched`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Lost between the capture points: `lost_between`.
    Lost,
    /// The captures cannot tell: `unknown`.
    Unknown,
}

/// A flow as the matcher sees it: a MetaRoCE direction, or a RoCEv2 flow
/// (src, dst, dest QP in `dst_conn`, `src_conn` 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FlowId {
    rocev2: bool,
    dir: PackedKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct TxKey {
    flow: FlowId,
    ptype: u8,
    psn: u32,
    tx_ts: u32,
    ev: u16,
    path_seq: u16,
}

/// An unmatched transmission's copy, kept until its match or the end of
/// the window: 16 bytes, as one is kept per unmatched transmission.
#[derive(Debug, Clone, Copy)]
struct Sighting {
    ts: u64,
    /// The frame number (low 40 bits), the capture (16 bits) and the IP
    /// ECN codepoint (8 bits): [`Sighting::copy`] unpacks them. A frame
    /// number past 2^40 (a trillion frames into one capture) is kept
    /// modulo 2^40: it only names the frame in findings and unmatched
    /// rows, the matching never reads it.
    packed: u64,
}

const _: () = assert!(std::mem::size_of::<Sighting>() == 16);

impl Sighting {
    const FRAME_BITS: u32 = 40;
    const ECN_SHIFT: u32 = Self::FRAME_BITS + u16::BITS;

    fn new(capture: u16, ts_ns: u64, frame: u64, ecn: u8) -> Sighting {
        let frame = frame & FRAME_NUMBER_MASK;
        Sighting {
            ts: ts_ns,
            packed: frame
                | u64::from(capture) << Self::FRAME_BITS
                | u64::from(ecn) << Self::ECN_SHIFT,
        }
    }

    fn capture(&self) -> u16 {
        (self.packed >> Self::FRAME_BITS) as u16
    }

    fn copy(&self) -> CaptureCopy {
        CaptureCopy {
            capture: self.capture(),
            frame: self.packed & FRAME_NUMBER_MASK,
            ts_ns: self.ts,
            ecn: (self.packed >> Self::ECN_SHIFT) as u8,
        }
    }
}

/// One capture's copy of a transmission that [`CrossCapture::observe`]
/// matched with a copy in another capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureCopy {
    /// The capture (0-based).
    pub capture: u16,
    /// Its frame number in that capture, modulo 2^40 ([`FRAME_NUMBER_MASK`]).
    pub frame: u64,
    pub ts_ns: u64,
    /// The IP ECN codepoint it was captured with.
    pub ecn: u8,
}

impl CaptureCopy {
    /// `obs`, captured in `capture`.
    pub fn of(capture: u16, obs: &Observation) -> CaptureCopy {
        CaptureCopy {
            capture,
            frame: obs.frame,
            ts_ns: obs.ts_ns,
            ecn: obs.ecn,
        }
    }
}

/// The matcher.
pub struct CrossCapture {
    cfg: MergeConfig,
    pending: FxHashMap<TxKey, Sighting>,
    order: VecDeque<(TxKey, u64)>,
    newest: u64,
    first_ts: Vec<Option<u64>>,
    last_ts: Vec<u64>,
    /// (capture a, capture b, flow, ev) -> deltas.
    deltas: FxHashMap<(u16, u16, FlowId, u16), PathDeltas>,
    /// (capture, flow, ev) -> transmissions never matched.
    unmatched: FxHashMap<(u16, FlowId, u16), u64>,
    /// (capture, flow, ev) -> transmissions unmatched at the end whose
    /// copy could still have been on its way when the other capture ended.
    unknown: FxHashMap<(u16, FlowId, u16), u64>,
    rng: u64,
    /// Row mode ([`CrossCapture::for_rows`]).
    rows: Option<Rows>,
}

/// Clock offsets between capture pairs, as [`CrossCapture::report`]
/// estimates them: the context of [`CrossCapture::fate_at_end`].
pub struct Offsets(FxHashMap<(u16, u16), i64>);

impl Offsets {
    /// Clock of `to` minus clock of `from` (0 when not estimated).
    fn between(&self, from: u16, to: u16) -> i128 {
        if from < to {
            self.0.get(&(from, to)).map_or(0, |&o| i128::from(o))
        } else {
            -self.0.get(&(to, from)).map_or(0, |&o| i128::from(o))
        }
    }
}

impl CrossCapture {
    pub fn new(cfg: MergeConfig) -> Self {
        CrossCapture {
            cfg,
            pending: FxHashMap::default(),
            order: VecDeque::new(),
            newest: 0,
            first_ts: Vec::new(),
            last_ts: Vec::new(),
            deltas: FxHashMap::default(),
            unmatched: FxHashMap::default(),
            unknown: FxHashMap::default(),
            rng: 0x9E37_79B9_7F4A_7C15,
            rows: None,
        }
    }

    /// Capture `capture` ran from `first_ts_ns` to `last_ts_ns`, as when
    /// its first and last frames had been [`CrossCapture::tick`]ed, but
    /// without moving the window (`newest`).
    pub fn set_span(&mut self, capture: u16, first_ts_ns: u64, last_ts_ns: u64) {
        let ci = usize::from(capture);
        if self.first_ts.len() <= ci {
            self.first_ts.resize(ci + 1, None);
            self.last_ts.resize(ci + 1, 0);
        }
        let first = self.first_ts[ci].map_or(first_ts_ns, |f| f.min(first_ts_ns));
        self.first_ts[ci] = Some(first);
        self.last_ts[ci] = self.last_ts[ci].max(last_ts_ns);
    }

    fn next_rand(&mut self) -> u64 {
        // xorshift64: deterministic reservoir sampling.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Number of unmatched transmissions held.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Notes that capture `capture` was running at `ts_ns` (every frame,
    /// whatever its protocol).
    pub fn tick(&mut self, capture: u16, ts_ns: u64) {
        let ci = usize::from(capture);
        if self.first_ts.len() <= ci {
            self.first_ts.resize(ci + 1, None);
            self.last_ts.resize(ci + 1, 0);
        }
        self.first_ts[ci].get_or_insert(ts_ns);
        self.last_ts[ci] = self.last_ts[ci].max(ts_ns);
        self.newest = self.newest.max(ts_ns);
    }

    /// One packet of capture `capture`. When it is the copy of a
    /// transmission already seen in another capture and not yet matched,
    /// the two are matched and that other copy is returned.
    pub fn observe(&mut self, capture: u16, obs: &Observation) -> Option<CaptureCopy> {
        self.tick(capture, obs.ts_ns);
        let tx = Transmission::of(obs)?;
        self.sighting(&tx, Sighting::new(capture, obs.ts_ns, obs.frame, obs.ecn))
    }

    /// The matching rules, for one sighting `now` of `tx`.
    fn sighting(&mut self, tx: &Transmission, now: Sighting) -> Option<CaptureCopy> {
        let (dir, key, capture) = (tx.dir(), tx.key(), now.capture());
        self.expire();
        match self.pending.remove(&key) {
            Some(seen) if seen.capture() != capture => {
                // Row mode: the reduce sums the matches itself
                // (`PathSums`), the matcher keeps no delays.
                if self.rows.is_some() {
                    return Some(seen.copy());
                }
                let seen_capture = seen.capture();
                let (a, b, delta) = if seen_capture < capture {
                    (seen_capture, capture, now.ts as i128 - seen.ts as i128)
                } else {
                    (capture, seen_capture, seen.ts as i128 - now.ts as i128)
                };
                let delta = delta.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
                let r = self.next_rand();
                let cap = self.cfg.samples;
                let d = self
                    .deltas
                    .entry((a, b, key.flow, key.ev))
                    .or_insert_with(|| PathDeltas {
                        rocev2: key.flow.rocev2,
                        dir,
                        ev: key.ev,
                        n: 0,
                        min: i64::MAX,
                        max: i64::MIN,
                        sum: 0,
                        samples: Vec::new(),
                        owd_buckets: Vec::new(),
                    });
                d.n += 1;
                d.min = d.min.min(delta);
                d.max = d.max.max(delta);
                d.sum += i128::from(delta);
                if d.samples.len() < cap {
                    d.samples.push(delta);
                } else {
                    let j = (r % d.n) as usize;
                    if j < cap {
                        d.samples[j] = delta;
                    }
                }
                Some(seen.copy())
            }
            // A MetaRoCE copy in the same capture is a duplicate: the first
            // sighting stands. A RoCEv2 one is a retransmission: it
            // replaces the first, which was not seen downstream.
            Some(seen) if !key.flow.rocev2 => {
                self.pending.insert(key, seen);
                None
            }
            seen => {
                if let Some(seen) = seen {
                    self.left_window(&key, seen);
                }
                if self.pending.len() >= self.cfg.max_pending
                    && let Some((old, ts)) = self.order.pop_front()
                {
                    self.drop_sighting(&old, ts);
                }
                // Row mode names what stays unmatched: every transmission
                // waits here once, its flow's addresses noted then.
                if let Some(rows) = &mut self.rows {
                    rows.flows.entry(key.flow).or_insert_with(|| tx.dir());
                }
                self.pending.insert(key, now);
                self.order.push_back((key, now.ts));
                None
            }
        }
    }

    fn expire(&mut self) {
        while let Some(&(key, ts)) = self.order.front() {
            if ts.saturating_add(self.cfg.window_ns) >= self.newest {
                break;
            }
            self.order.pop_front();
            self.drop_sighting(&key, ts);
        }
    }

    /// Drops the pending sighting `key` made at `ts` (an entry of `order`;
    /// a RoCEv2 sighting may have been replaced by a later one since).
    fn drop_sighting(&mut self, key: &TxKey, ts: u64) {
        if self.pending.get(key).is_some_and(|s| s.ts == ts) {
            self.drop_pending(key);
        }
    }

    /// An unmatched transmission leaves the window: count it when every
    /// other capture was already running at its time.
    fn drop_pending(&mut self, key: &TxKey) {
        if let Some(seen) = self.pending.remove(key) {
            self.left_window(key, seen);
        }
    }

    /// The pending sighting `seen` of `key`, taken out of `pending`,
    /// leaves the window unmatched.
    fn left_window(&mut self, key: &TxKey, seen: Sighting) {
        let others_running = self
            .first_ts
            .iter()
            .enumerate()
            .filter(|(c, _)| *c != usize::from(seen.capture()))
            .all(|(_, f)| f.is_some_and(|f| f <= seen.ts));
        if others_running && self.first_ts.len() > 1 {
            *self
                .unmatched
                .entry((seen.capture(), key.flow, key.ev))
                .or_default() += 1;
            if let Some(rows) = &mut self.rows {
                rows.left.push((*key, seen));
            }
        }
    }

    /// End of all captures: a transmission still unmatched is judged
    /// against the captures downstream of its own, those that matched
    /// traffic with it (a capture that never did is not on its way and
    /// says nothing of its fate). It is lost between the capture points
    /// when every one of them ran on, offset corrected, for the end margin
    /// after it (`END_MARGIN_DELAYS` times the largest one-way delay
    /// measured on its path, or on the pair); otherwise, or with no such
    /// capture, its fate is unknown. Those made before one of them started
    /// count in neither.
    pub fn finish(&mut self) {
        let offsets = self.offsets();
        let pending: Vec<(TxKey, Sighting)> = self.pending.drain().collect();
        self.order.clear();
        for (key, seen) in pending {
            let count = match self.fate_of(&offsets, &key, seen) {
                Some(Fate::Lost) => &mut self.unmatched,
                Some(Fate::Unknown) => &mut self.unknown,
                None => continue,
            };
            *count.entry((seen.capture(), key.flow, key.ev)).or_default() += 1;
        }
    }

    /// The fate of `tx`, captured in `capture` at `ts_ns` and still
    /// unmatched at the end of the captures (the rule of
    /// [`CrossCapture::finish`]); `None` when it counts in neither.
    pub fn fate_at_end(
        &self,
        offsets: &Offsets,
        tx: &Transmission,
        capture: u16,
        ts_ns: u64,
    ) -> Option<Fate> {
        self.fate_of(offsets, &tx.key(), Sighting::new(capture, ts_ns, 0, 0))
    }

    fn fate_of(&self, offsets: &Offsets, key: &TxKey, seen: Sighting) -> Option<Fate> {
        let captures = self.first_ts.len();
        if captures < 2 {
            return None;
        }
        let c = seen.capture();
        let at = |o: u16| i128::from(seen.ts) + offsets.between(c, o);
        // (capture, end margin) of each capture downstream of this one.
        let downstream: Vec<(u16, i128)> = (0..captures as u16)
            .filter(|&o| o != c)
            .filter_map(|o| {
                let (a, b) = (c.min(o), c.max(o));
                let offset = offsets.0.get(&(a, b)).copied().unwrap_or(0);
                let owd = self.max_delay(a, b, offset, key.flow, key.ev)?;
                Some((o, i128::from(owd.max(0)) * END_MARGIN_DELAYS))
            })
            .collect();
        let started = downstream
            .iter()
            .all(|&(o, _)| self.first_ts[usize::from(o)].is_some_and(|f| i128::from(f) <= at(o)));
        if !started {
            return None;
        }
        let ran_past_margin = !downstream.is_empty()
            && downstream
                .iter()
                .all(|&(o, margin)| i128::from(self.last_ts[usize::from(o)]) >= at(o) + margin);
        Some(if ran_past_margin {
            Fate::Lost
        } else {
            Fate::Unknown
        })
    }
}
