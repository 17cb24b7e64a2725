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

use std::collections::VecDeque;
use std::net::IpAddr;

use rustc_hash::FxHashMap;

use super::direction::{DirKey, PackedKey};
use super::hist::Hist;
use proto_parse::metaroce::PacketType;
use proto_parse::rocev2::{Opcode, Service};

use super::report::{BetweenPath, BetweenReport};
use super::{Config, Engine, MsgDone, Report, Verdict};
use crate::observation::{MrBody, ObsKind, Observation};

/// The end margin of a path, in its largest measured one-way delays: a
/// copy later than that is not expected (delays vary; a few times the
/// largest seen leaves room for queueing the captures did not show).
const END_MARGIN_DELAYS: i128 = 4;

/// The largest offset-corrected one-way delay of a path's samples,
/// whichever capture sees it first (`ts_b - ts_a` is `offset + delay`
/// one way, `offset - delay` the other).
fn max_one_way_delay(d: &PathDeltas, offset: i64) -> i64 {
    d.max
        .saturating_sub(offset)
        .max(offset.saturating_sub(d.min))
}

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

/// A transmission as the matcher keys it, for callers that hold packets
/// as rows rather than as [`Observation`]s (the Spark reduce over every
/// host's `packets` table, through the `metaroce` Python package): built by
/// [`Transmission::matchable`] from the export's columns, matched by
/// [`CrossCapture::observe_transmission`] with the rules of
/// [`CrossCapture::observe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmission {
    pub rocev2: bool,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// MetaRoCE: the direction's connection ids. RoCEv2: 0 and the
    /// destination QP.
    pub src_conn: u32,
    pub dst_conn: u32,
    /// MetaRoCE type or RoCEv2 opcode.
    pub ptype: u8,
    pub psn: u32,
    /// MetaRoCE tx_ts; 0 for RoCEv2.
    pub tx_ts: u32,
    /// MetaRoCE ev; RoCEv2: the UDP source port (the entropy ECMP hashes).
    pub ev: u16,
    /// MetaRoCE path_seq; 0 for RoCEv2.
    pub path_seq: u16,
}

impl Transmission {
    /// The transmission `obs` is a copy of; `None` for packets that are
    /// not matched across captures: malformed ones, MetaRoCE CTRL and
    /// RoCEv2 CNPs (they carry no PSN of their own).
    pub fn of(obs: &Observation) -> Option<Transmission> {
        if obs.malformed {
            return None;
        }
        match &obs.kind {
            ObsKind::MetaRoce(mr) => {
                if matches!(mr.body, MrBody::Ctrl(_) | MrBody::Malformed) {
                    return None;
                }
                Some(Transmission {
                    rocev2: false,
                    src: obs.src,
                    dst: obs.dst,
                    src_conn: mr.src_conn,
                    dst_conn: mr.dst_conn,
                    ptype: u8::from(mr.ptype),
                    psn: mr.psn,
                    tx_ts: mr.tx_ts,
                    ev: mr.ev,
                    path_seq: mr.path_seq,
                })
            }
            ObsKind::RoceV2(r) => {
                if r.opcode.service() == Service::Cnp {
                    return None;
                }
                Some(Transmission {
                    rocev2: true,
                    src: obs.src,
                    dst: obs.dst,
                    src_conn: 0,
                    dst_conn: r.dest_qp,
                    ptype: u8::from(r.opcode),
                    psn: r.psn,
                    tx_ts: 0,
                    ev: obs.src_port,
                    path_seq: 0,
                })
            }
        }
    }

    /// The transmission of one row of the export's `packets` table
    /// (`self`, with `ptype` its `type_code`; for RoCEv2, `ev` the row's
    /// `src_port` and `dst_conn` its `dest_qp`), or `None` when
    /// [`Transmission::of`] would exclude it: `malformed`, MetaRoCE CTRL,
    /// RoCEv2 CNP. RoCEv2's MetaRoCE-only fields are set to 0.
    pub fn matchable(self, malformed: bool) -> Option<Transmission> {
        let excluded = if self.rocev2 {
            Opcode::from(self.ptype).service() == Service::Cnp
        } else {
            PacketType::from(self.ptype) == PacketType::Ctrl
        };
        if malformed || excluded {
            return None;
        }
        Some(if self.rocev2 {
            Transmission {
                src_conn: 0,
                tx_ts: 0,
                path_seq: 0,
                ..self
            }
        } else {
            self
        })
    }

    fn dir(&self) -> DirKey {
        DirKey {
            src: self.src,
            dst: self.dst,
            src_conn: self.src_conn,
            dst_conn: self.dst_conn,
        }
    }

    fn flow(&self) -> FlowId {
        FlowId {
            rocev2: self.rocev2,
            dir: self.dir().packed(),
        }
    }

    fn key(&self) -> TxKey {
        TxKey {
            flow: self.flow(),
            ptype: self.ptype,
            psn: self.psn,
            tx_ts: self.tx_ts,
            ev: self.ev,
            path_seq: self.path_seq,
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
    /// The frame number (low 48 bits), the capture (8 bits) and the IP
    /// ECN codepoint (8 bits): [`Sighting::copy`] unpacks them.
    packed: u64,
}

const _: () = assert!(std::mem::size_of::<Sighting>() == 16);

impl Sighting {
    const FRAME_BITS: u32 = 48;

    fn new(capture: u8, ts_ns: u64, frame: u64, ecn: u8) -> Sighting {
        let frame = frame & ((1 << Self::FRAME_BITS) - 1);
        Sighting {
            ts: ts_ns,
            packed: frame | u64::from(capture) << Self::FRAME_BITS | u64::from(ecn) << 56,
        }
    }

    fn capture(&self) -> u8 {
        (self.packed >> Self::FRAME_BITS) as u8
    }

    fn copy(&self) -> CaptureCopy {
        CaptureCopy {
            capture: self.capture(),
            frame: self.packed & ((1 << Self::FRAME_BITS) - 1),
            ts_ns: self.ts,
            ecn: (self.packed >> 56) as u8,
        }
    }
}

/// One capture's copy of a transmission that [`CrossCapture::observe`]
/// matched with a copy in another capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureCopy {
    /// The capture (0-based).
    pub capture: u8,
    /// Its frame number in that capture.
    pub frame: u64,
    pub ts_ns: u64,
    /// The IP ECN codepoint it was captured with.
    pub ecn: u8,
}

impl CaptureCopy {
    /// `obs`, captured in `capture`.
    pub fn of(capture: u8, obs: &Observation) -> CaptureCopy {
        CaptureCopy {
            capture,
            frame: obs.frame,
            ts_ns: obs.ts_ns,
            ecn: obs.ecn,
        }
    }
}

/// Time differences `ts_b - ts_a` of one direction and ev between captures
/// a < b.
#[derive(Debug, Clone)]
struct PathDeltas {
    rocev2: bool,
    dir: DirKey,
    ev: u16,
    n: u64,
    min: i64,
    max: i64,
    sum: i128,
    samples: Vec<i64>,
    /// One-way delays as histogram bucket counts (lowest value of the
    /// bucket, count), added by [`CrossCapture::add_one_way_delays`]
    /// instead of samples.
    owd_buckets: Vec<(u64, u64)>,
}

/// `ts_b - ts_a` over every ev of a direction (RoCEv2: of a host pair),
/// for the clock offset.
#[derive(Debug, Clone, Copy)]
struct DirSpread {
    rocev2: bool,
    dir: DirKey,
    min: i64,
    max: i64,
    sum: i128,
    n: u64,
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
    deltas: FxHashMap<(u8, u8, FlowId, u16), PathDeltas>,
    /// (capture, flow, ev) -> transmissions never matched.
    unmatched: FxHashMap<(u8, FlowId, u16), u64>,
    /// (capture, flow, ev) -> transmissions unmatched at the end whose
    /// copy could still have been on its way when the other capture ended.
    unknown: FxHashMap<(u8, FlowId, u16), u64>,
    rng: u64,
    /// Row mode ([`CrossCapture::for_rows`]).
    rows: Option<Rows>,
}

/// What a matcher in row mode keeps for [`CrossCapture::take_unmatched`]:
/// the transmissions that left the window counted as lost, and each
/// flow's addresses to name them.
#[derive(Default)]
struct Rows {
    flows: FxHashMap<FlowId, DirKey>,
    left: Vec<(TxKey, Sighting)>,
}

/// A path between two capture points as [`CrossCapture::add_path`] and
/// its siblings name it: a flow and its ev (RoCEv2: UDP source port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowPath {
    pub rocev2: bool,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_conn: u32,
    pub dst_conn: u32,
    pub ev: u16,
}

impl FlowPath {
    fn dir(&self) -> DirKey {
        DirKey {
            src: self.src,
            dst: self.dst,
            src_conn: self.src_conn,
            dst_conn: self.dst_conn,
        }
    }

    fn flow(&self) -> FlowId {
        FlowId {
            rocev2: self.rocev2,
            dir: self.dir().packed(),
        }
    }
}

/// The matches of one path summed: `n` transmissions whose `ts_b - ts_a`
/// ran from `min` to `max` and summed to `sum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSums {
    pub n: u64,
    pub min: i64,
    pub max: i64,
    pub sum: i128,
}

/// Clock offsets between capture pairs, as [`CrossCapture::report`]
/// estimates them: the context of [`CrossCapture::fate_at_end`].
pub struct Offsets(FxHashMap<(u8, u8), i64>);

impl Offsets {
    /// Clock of `to` minus clock of `from` (0 when not estimated).
    fn between(&self, from: u8, to: u8) -> i128 {
        if from < to {
            self.0.get(&(from, to)).map_or(0, |&o| i128::from(o))
        } else {
            -self.0.get(&(to, from)).map_or(0, |&o| i128::from(o))
        }
    }
}

/// The one-way delay of a matched transmission whose copies differ by
/// `delta` = `ts_b - ts_a` on a path whose packets reach capture a first
/// (`a_first`) or b first, with b's clock `offset` ahead of a's; at least
/// 0 (clocks estimated from minimum delays can leave a sample below).
pub fn one_way_delay(a_first: bool, delta: i64, offset: i64) -> u64 {
    let owd = if a_first {
        delta.saturating_sub(offset)
    } else {
        offset.saturating_sub(delta)
    };
    owd.max(0) as u64
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

    /// A matcher in row mode, for a reduce that partitions the sightings
    /// of many captures by transmission (every sighting of a transmission
    /// in the same partition, each partition in capture-time order): it
    /// applies the rules of [`CrossCapture::observe`] to the rows given
    /// to [`CrossCapture::observe_transmission`], and keeps what is
    /// unmatched for [`CrossCapture::take_unmatched`] instead of only
    /// counting it. `spans[c]` is capture c's first and last time: a
    /// partition sees only some of each capture's packets, and a
    /// transmission that leaves the window counts as lost only when every
    /// other capture had started before it.
    pub fn for_rows(cfg: MergeConfig, spans: &[(u64, u64)]) -> Self {
        let mut m = CrossCapture::new(cfg);
        for (c, &(first, last)) in spans.iter().enumerate() {
            m.set_span(c as u8, first, last);
        }
        m.rows = Some(Rows::default());
        m
    }

    /// Capture `capture` ran from `first_ts_ns` to `last_ts_ns`, as when
    /// its first and last frames had been [`CrossCapture::tick`]ed, but
    /// without moving the window (`newest`).
    pub fn set_span(&mut self, capture: u8, first_ts_ns: u64, last_ts_ns: u64) {
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
    pub fn tick(&mut self, capture: u8, ts_ns: u64) {
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
    pub fn observe(&mut self, capture: u8, obs: &Observation) -> Option<CaptureCopy> {
        self.tick(capture, obs.ts_ns);
        let tx = Transmission::of(obs)?;
        self.sighting(&tx, Sighting::new(capture, obs.ts_ns, obs.frame, obs.ecn))
    }

    /// [`CrossCapture::observe`] for a transmission given as a row: its
    /// copy in capture `capture`, frame `frame`, captured at `ts_ns` with
    /// the IP ECN codepoint `ecn`.
    pub fn observe_transmission(
        &mut self,
        capture: u8,
        tx: &Transmission,
        ts_ns: u64,
        frame: u64,
        ecn: u8,
    ) -> Option<CaptureCopy> {
        self.tick(capture, ts_ns);
        if let Some(rows) = &mut self.rows {
            rows.flows.entry(tx.flow()).or_insert_with(|| tx.dir());
        }
        self.sighting(tx, Sighting::new(capture, ts_ns, frame, ecn))
    }

    /// The matching rules, for one sighting `now` of `tx`.
    fn sighting(&mut self, tx: &Transmission, now: Sighting) -> Option<CaptureCopy> {
        let (dir, key, capture) = (tx.dir(), tx.key(), now.capture());
        self.expire();
        match self.pending.get(&key).copied() {
            Some(seen) if seen.capture() != capture => {
                self.pending.remove(&key);
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
            Some(_) if !key.flow.rocev2 => None,
            seen => {
                if seen.is_some() {
                    self.drop_pending(&key);
                }
                if self.pending.len() >= self.cfg.max_pending
                    && let Some((old, ts)) = self.order.pop_front()
                {
                    self.drop_sighting(&old, ts);
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
        let Some(seen) = self.pending.remove(key) else {
            return;
        };
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

    /// The largest one-way delay measured from `from` to the other
    /// capture of the pair (a, b) on `flow`'s path `ev`, or on any path of
    /// the pair when that one has no match; `None` without any.
    fn max_delay(&self, a: u8, b: u8, offset: i64, flow: FlowId, ev: u16) -> Option<i64> {
        let owd = |d: &PathDeltas| max_one_way_delay(d, offset);
        self.deltas.get(&(a, b, flow, ev)).map(owd).or_else(|| {
            self.deltas
                .iter()
                .filter(|(k, _)| k.0 == a && k.1 == b)
                .map(|(_, d)| owd(d))
                .max()
        })
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

    /// The clock offsets estimated so far.
    pub fn offsets(&self) -> Offsets {
        Offsets(
            self.report()
                .iter()
                .filter(|r| r.offset_estimated)
                .map(|r| ((r.capture_a as u8, r.capture_b as u8), r.clock_offset_ns))
                .collect(),
        )
    }

    /// The fate of `tx`, captured in `capture` at `ts_ns` and still
    /// unmatched at the end of the captures (the rule of
    /// [`CrossCapture::finish`]); `None` when it counts in neither.
    pub fn fate_at_end(
        &self,
        offsets: &Offsets,
        tx: &Transmission,
        capture: u8,
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
        let at = |o: u8| i128::from(seen.ts) + offsets.between(c, o);
        // (capture, end margin) of each capture downstream of this one.
        let downstream: Vec<(u8, i128)> = (0..captures as u8)
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

    /// Row mode: every transmission this matcher did not match, with its
    /// copy: those that left the window counted as lost
    /// (`Some(Fate::Lost)`), then those still waiting, to be judged with
    /// every partition's matches (`None`: [`CrossCapture::fate_at_end`]).
    /// Empty outside row mode.
    pub fn take_unmatched(&mut self) -> Vec<(Transmission, CaptureCopy, Option<Fate>)> {
        if self.rows.is_none() {
            return Vec::new();
        }
        // The single matcher sees every capture's packets up to the last:
        // what waited longer than the window before that left it.
        self.newest = self
            .newest
            .max(self.last_ts.iter().copied().max().unwrap_or(0));
        self.expire();
        let left = match &mut self.rows {
            Some(rows) => std::mem::take(&mut rows.left),
            None => return Vec::new(),
        };
        let mut waiting: Vec<(TxKey, Sighting)> = self.pending.drain().collect();
        self.order.clear();
        waiting.sort_by_key(|(_, s)| (s.ts, s.packed));
        let Some(rows) = &self.rows else {
            return Vec::new();
        };
        let named = |key: &TxKey| -> Option<Transmission> {
            let dir = rows.flows.get(&key.flow)?;
            Some(Transmission {
                rocev2: key.flow.rocev2,
                src: dir.src,
                dst: dir.dst,
                src_conn: dir.src_conn,
                dst_conn: dir.dst_conn,
                ptype: key.ptype,
                psn: key.psn,
                tx_ts: key.tx_ts,
                ev: key.ev,
                path_seq: key.path_seq,
            })
        };
        let left = left.into_iter().map(|(k, s)| (k, s, Some(Fate::Lost)));
        let waiting = waiting.into_iter().map(|(k, s)| (k, s, None));
        left.chain(waiting)
            .filter_map(|(k, s, fate)| Some((named(&k)?, s.copy(), fate)))
            .collect()
    }

    /// The reduce's last step: the matches of path `path` between
    /// captures `a < b`, summed over the partitions.
    pub fn add_path(&mut self, a: u8, b: u8, path: &FlowPath, sums: PathSums) {
        let d = self
            .deltas
            .entry((a, b, path.flow(), path.ev))
            .or_insert_with(|| PathDeltas {
                rocev2: path.rocev2,
                dir: path.dir(),
                ev: path.ev,
                n: 0,
                min: i64::MAX,
                max: i64::MIN,
                sum: 0,
                samples: Vec::new(),
                owd_buckets: Vec::new(),
            });
        d.n += sums.n;
        d.min = d.min.min(sums.min);
        d.max = d.max.max(sums.max);
        d.sum += sums.sum;
    }

    /// `count` one-way delays of path `path` (added by
    /// [`CrossCapture::add_path`]) fell in the histogram bucket whose
    /// lowest value is `bucket` ([`Hist::bucket_lowest`]): the report's
    /// delay summary comes from these counts, which give the percentiles
    /// all the samples give.
    pub fn add_one_way_delays(&mut self, a: u8, b: u8, path: &FlowPath, bucket: u64, count: u64) {
        if let Some(d) = self.deltas.get_mut(&(a, b, path.flow(), path.ev)) {
            d.owd_buckets.push((bucket, count));
        }
    }

    /// `count` transmissions of path `path` captured in `capture` and not
    /// at the next capture point, with their fate.
    pub fn add_unmatched(&mut self, capture: u8, path: &FlowPath, fate: Fate, count: u64) {
        let counts = match fate {
            Fate::Lost => &mut self.unmatched,
            Fate::Unknown => &mut self.unknown,
        };
        *counts.entry((capture, path.flow(), path.ev)).or_default() += count;
    }

    pub fn report(&self) -> Vec<BetweenReport> {
        let mut pairs: Vec<(u8, u8)> = self.deltas.keys().map(|k| (k.0, k.1)).collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut out = Vec::new();
        for (a, b) in pairs {
            let dirs: Vec<&PathDeltas> = self
                .deltas
                .iter()
                .filter(|(k, _)| k.0 == a && k.1 == b)
                .map(|(_, v)| v)
                .collect();
            // Per direction (all evs): min, max, mean of ts_b - ts_a. A
            // RoCEv2 flow's reverse is any RoCEv2 flow between the same
            // hosts the other way (responses go to the requester's QP),
            // so RoCEv2 flows are grouped by host pair.
            let group = |rocev2: bool, dir: DirKey| -> (bool, PackedKey) {
                let dir = if rocev2 {
                    DirKey {
                        src_conn: 0,
                        dst_conn: 0,
                        ..dir
                    }
                } else {
                    dir
                };
                (rocev2, dir.packed())
            };
            let mut per_dir: FxHashMap<(bool, PackedKey), DirSpread> = FxHashMap::default();
            for d in &dirs {
                let e = per_dir.entry(group(d.rocev2, d.dir)).or_insert(DirSpread {
                    rocev2: d.rocev2,
                    dir: d.dir,
                    min: i64::MAX,
                    max: i64::MIN,
                    sum: 0,
                    n: 0,
                });
                e.min = e.min.min(d.min);
                e.max = e.max.max(d.max);
                e.sum += d.sum;
                e.n += d.n;
            }
            let mut estimates = Vec::new();
            for d in per_dir.values() {
                let Some(r) = per_dir.get(&group(d.rocev2, d.dir.reverse())) else {
                    continue;
                };
                let mean = d.sum as f64 / d.n as f64;
                let rmean = r.sum as f64 / r.n as f64;
                // The NTP estimate, with the direction seen first at a.
                let (forward, reverse) = if mean > rmean { (d, r) } else { (r, d) };
                estimates.push(((i128::from(forward.min) + i128::from(reverse.max)) / 2) as i64);
            }
            let offset_estimated = !estimates.is_empty();
            let offset = if offset_estimated {
                (estimates.iter().map(|&e| i128::from(e)).sum::<i128>() / estimates.len() as i128)
                    as i64
            } else {
                0
            };
            let mut paths = Vec::new();
            let mut matched_packets = 0;
            for d in &dirs {
                matched_packets += d.n;
                let mean = (d.sum / i128::from(d.n.max(1))) as i64;
                let a_first = mean >= offset;
                let (up, down) = if a_first { (a, b) } else { (b, a) };
                let h = if d.owd_buckets.is_empty() {
                    let mut h = Hist::new();
                    for &s in &d.samples {
                        h.record(one_way_delay(a_first, s, offset));
                    }
                    h
                } else {
                    // The extremes are exact: the delay is monotonic in
                    // ts_b - ts_a.
                    let (lo, hi) = (
                        one_way_delay(a_first, d.min, offset),
                        one_way_delay(a_first, d.max, offset),
                    );
                    Hist::from_buckets(lo.min(hi), lo.max(hi), &d.owd_buckets)
                };
                let flow = FlowId {
                    rocev2: d.rocev2,
                    dir: d.dir.packed(),
                };
                let lost = self.unmatched.get(&(up, flow, d.ev)).copied().unwrap_or(0);
                let unknown = self.unknown.get(&(up, flow, d.ev)).copied().unwrap_or(0);
                let end_margin_ns =
                    max_one_way_delay(d, offset).max(0) as u64 * END_MARGIN_DELAYS as u64;
                paths.push(BetweenPath {
                    proto: if d.rocev2 { "rocev2" } else { "metaroce" },
                    src: d.dir.src,
                    dst: d.dir.dst,
                    src_conn: d.dir.src_conn,
                    dst_conn: d.dir.dst_conn,
                    ev: d.ev,
                    upstream: u64::from(up),
                    downstream: u64::from(down),
                    matched: d.n,
                    lost_between: lost,
                    unknown,
                    end_margin_ns,
                    one_way_delay_ns: h.summary(),
                });
            }
            paths.sort_by_key(|p| (p.proto, p.src, p.dst, p.src_conn, p.dst_conn, p.ev));
            out.push(BetweenReport {
                capture_a: u64::from(a),
                capture_b: u64::from(b),
                clock_offset_ns: offset,
                offset_estimated,
                matched_packets,
                paths,
            });
        }
        out
    }
}

/// Several captures analysed together: one engine per capture plus the
/// cross-capture matcher.
pub struct MultiEngine {
    engines: Vec<Engine>,
    cross: CrossCapture,
    /// The capture of the copy the last packet ingested was matched with.
    matched: Option<u8>,
}

impl MultiEngine {
    pub fn new(captures: usize, cfg: Config, merge: MergeConfig) -> Self {
        MultiEngine {
            engines: (0..captures.clamp(1, 255))
                .map(|_| Engine::new(cfg))
                .collect(),
            cross: CrossCapture::new(merge),
            matched: None,
        }
    }

    /// The first capture point is `engine`, which has analysed a capture
    /// until it found a second point in it (a second mirror session).
    pub fn from_engine(engine: Engine, merge: MergeConfig) -> Self {
        MultiEngine {
            engines: vec![engine],
            cross: CrossCapture::new(merge),
            matched: None,
        }
    }

    /// Gives the matcher a packet of capture `capture` that its engine
    /// has already ingested (`engine_mut(capture)`): the latest packets of
    /// a capture analysed alone until a second capture point turned up.
    pub fn remember(&mut self, capture: usize, obs: &Observation) {
        let c = capture.min(self.engines.len() - 1);
        self.cross.observe(c as u8, obs);
    }

    /// Adds a capture point (a mirror session found in a capture) and
    /// returns its index. Past 255 points the last one takes the rest.
    pub fn add_capture(&mut self, cfg: Config) -> usize {
        if self.engines.len() < 255 {
            self.engines.push(Engine::new(cfg));
        }
        self.engines.len() - 1
    }

    /// One packet of capture `capture` (0-based); the verdict is that
    /// capture's own. When the packet is the copy of a transmission in
    /// another capture, the lint (`Config::lint`) judges the two copies
    /// and may record a finding in either capture's engine, on a frame
    /// ingested earlier: [`MultiEngine::matched_capture`] names the other.
    pub fn ingest(&mut self, capture: usize, obs: &Observation) -> Verdict {
        let c = capture.min(self.engines.len() - 1);
        let matched = self.cross.observe(c as u8, obs);
        let v = self.engines[c].ingest(obs);
        self.matched = matched.map(|m| m.capture);
        if let Some(other) = matched {
            self.copies_matched(obs, CaptureCopy::of(c as u8, obs), other);
        }
        v
    }

    /// The capture (0-based) holding the copy that the packet last
    /// ingested was matched with, if any: the lint's findings on either
    /// copy wait in that capture's engine and the packet's own.
    pub fn matched_capture(&self) -> Option<usize> {
        self.matched.map(usize::from)
    }

    /// The same transmission `obs` in two captures (`here`, the packet
    /// just ingested, and `other`, seen earlier): each capture's lint
    /// judges its own copy against the other's (the rules of vantage
    /// two-capture, `lint::network`); its findings wait in that capture's
    /// engine, `Engine::findings`.
    fn copies_matched(&mut self, obs: &Observation, here: CaptureCopy, other: CaptureCopy) {
        for (own, theirs) in [(here, other), (other, here)] {
            if let Some(engine) = self.engines.get_mut(usize::from(own.capture)) {
                engine.lint_copies(obs, own, theirs);
            }
        }
    }

    /// Every message completed at the last packet ingested for `capture`.
    pub fn messages_done(&self, capture: usize) -> &[MsgDone] {
        self.engines.get(capture).map_or(&[], |e| e.messages_done())
    }

    pub fn ingest_other(&mut self, capture: usize, ts_ns: u64) {
        let c = capture.min(self.engines.len() - 1);
        self.cross.tick(c as u8, ts_ns);
        self.engines[c].ingest_other(ts_ns);
    }

    /// Ends every capture (`end_ts_ns[i]`: last time of capture i) and
    /// counts the transmissions never matched (`lost_between`).
    pub fn finish(&mut self, end_ts_ns: &[u64]) {
        for (e, &t) in self.engines.iter_mut().zip(end_ts_ns) {
            e.finish(t);
        }
        self.cross.finish();
    }

    pub fn engine(&self, capture: usize) -> Option<&Engine> {
        self.engines.get(capture)
    }

    /// Capture `capture`'s engine, to clear its lint findings.
    pub fn engine_mut(&mut self, capture: usize) -> Option<&mut Engine> {
        self.engines.get_mut(capture)
    }

    pub fn between(&self) -> Vec<BetweenReport> {
        self.cross.report()
    }

    /// The report of each capture, with `capture.files` set to the number
    /// of captures and `between_captures` filled in the first one.
    pub fn snapshots(&self) -> Vec<Report> {
        let between = self.between();
        self.engines
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mut r = e.snapshot();
                r.capture.files = self.engines.len() as u64;
                if i == 0 {
                    r.between_captures = between.clone();
                }
                r
            })
            .collect()
    }
}
