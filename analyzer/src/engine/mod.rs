//! THE flow engine: one engine for the analyzer CLI, the live TUI and the
//! Wireshark plugin.
//!
//! Feed [`Observation`]s in capture order to [`Engine::ingest`]; each call
//! returns the packet's [`Verdict`]. [`Engine::snapshot`] gives the
//! [`Report`] (JSON schema in `analyzer/SCHEMA.md`) at any time;
//! [`Engine::advance_time`] lets a live caller see stalls while they happen
//! and [`Engine::finish`] closes the capture.
//!
//! The engine never reads bytes: observations are built from
//! `proto_parse` views ([`Observation::from_frame`],
//! [`Observation::from_metaroce`]). State is bounded by the number of live
//! flows: per-PSN state is pruned as the cumulative ack advances and capped
//! per direction ([`Config::window`]), and the number of flows is capped
//! ([`Config::max_flows`]) with least-recently-seen eviction.
//!
//! # Use
//! - **CLI** (batch): decode frames on one thread (or in parallel chunks),
//!   build `Observation`s (they are `Copy`, 144 bytes, no borrow), send them
//!   in capture order to the engine thread; frames that are neither MetaRoCE
//!   nor RoCEv2 go to [`Engine::ingest_other`]. At the end call
//!   [`Engine::finish`] with the last timestamp, then [`Engine::snapshot`].
//! - **TUI** (live): the same, plus [`Engine::advance_time`] with the wall
//!   clock at each refresh, so an ongoing stall shows before it ends, and a
//!   `snapshot()` per frame drawn.
//! - **Wireshark plugin**: on the first (in-order) pass call `ingest` for
//!   each frame and keep its [`Verdict`] by frame number; later passes (and
//!   random access) show the stored verdict. Verdicts carry frame numbers
//!   (original transmission, acknowledged DATA, DUP target).
//! - **Several captures** of one fabric (one per host, own clocks):
//!   [`MultiEngine`], fed the captures merged by timestamp; its report's
//!   `between_captures` gives clock offsets, one-way delay and loss between
//!   capture points per path.
//!
//! Cost: no allocation per packet in steady state (rings and maps reuse
//! their memory; a message is one map entry; a latency histogram costs
//! nothing until its first sample, keeps its first 128 samples as they are
//! (1 KB), and only then takes an HdrHistogram, tens of KB: a connection of
//! a few packets costs a few KB, see `tests/memory_per_connection.rs`).
//! Time per packet grows with the live directions and paths, as their
//! per-path histograms stop fitting in cache: `cargo bench -p analyzer
//! --bench engine` measures a heavy mix (one 4-packet message and one ACK
//! per 5 packets, every ACK an RTT sample) with 4 directions and with 64
//! directions x 16 paths; `docs/performance.md` has the end-to-end figures
//! and where the time goes.

mod ev_table;
mod hist;
mod interval;
mod loss;
mod merge;
mod metaroce;
mod observation;
mod report;
mod rocev2;
mod verdict;
mod window;

use std::net::IpAddr;

use proto_parse::metaroce::{CtrlOp, DEFAULT_TS_UNIT_PS};
use rustc_hash::FxHashMap;

pub use hist::{Hist, Summary};
pub use interval::IntervalSet;
pub use merge::{
    BetweenPath, BetweenReport, CaptureCopy, CrossCapture, Fate, FlowPath, MergeConfig,
    MultiEngine, Offsets, PathSums, Transmission, one_way_delay,
};
pub use metaroce::DirSize;
pub use observation::{
    CrcCheck, CtrlObs, DataObs, FbKind, FeedbackObs, FlowLabel, MrBody, MrChecks, MrObs, ObsKind,
    Observation, RoceObs,
};
pub use report::{
    BetweenCaptures, CaptureReport, DirectionReport, EngineReport, PathReport, Report,
    RoceFlowReport, StallReport,
};
pub use verdict::{MsgDone, MsgView, Retransmission, RetxKind, StallMark, Verdict};

pub(crate) use metaroce::Dir;
use metaroce::{DirKey, PackedKey};

use crate::lint::{CapturePoint, Finding, LintState, LintTimings};
pub(crate) use rocev2::{Flow as RoceFlow, RoceTable};
pub(crate) use rocev2::{OpKind as RoceOp, Role as RoceRole, role as roce_role, sext24};

/// Engine settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// A stall is an interval longer than this with unacked data and no
    /// cumulative-ack advance (spec 9). Default 1 ms.
    pub stall_threshold_ns: u64,
    /// Most live MetaRoCE directions (and, separately, RoCEv2 flows);
    /// beyond it the least recently seen are evicted (counted in the
    /// report). Default 16384.
    pub max_flows: usize,
    /// Most PSNs tracked per direction beyond the cumulative ack.
    /// Default 16384.
    pub window: usize,
    /// Most messages in flight tracked per direction. Default 4096.
    pub max_messages: usize,
    /// Most stalls kept per direction (more are counted). Default 1024.
    pub max_stalls: usize,
    /// Most paths (evs) tracked per direction; packets on further evs are
    /// analysed per direction only (see `StateSize::paths_overflow`).
    /// Default 4096.
    pub max_paths: usize,
    /// Acked PSNs kept in a direction's window so that feedback arriving
    /// after a later one (feedback comes back over paths of different
    /// delays) still finds its PSN's state. Beyond them, acked
    /// transmissions still awaiting their echo are kept apart (for 4
    /// times the direction's largest RTT sample, up to `window` of them),
    /// so an RTT sample does not depend on how far the cumulative ack
    /// moved. Default 128.
    pub acked_grace: usize,
    /// Run the conformance lint's checks on every packet (`crate::lint`):
    /// findings in [`Engine::findings`], rules in `Verdict::lint`, counts
    /// in `Report::lint`. Off by default: the engine then keeps no lint
    /// state and spends nothing on it.
    pub lint: bool,
    /// Where the capture was taken, for the lint's rules that only a
    /// sender-side or receiver-side capture can judge. Default `Auto`.
    pub lint_point: CapturePoint,
    /// The lint's RC-CNP-001: the least time between two RoCEv2 CNPs of
    /// one flow (DCQCN's notification point sends at most one per 50 us
    /// by default); 0 switches the rule off. Default 50,000 ns.
    pub lint_cnp_interval_ns: u64,
    /// The lint's timing bounds (the ack delay of MR-RCV-008, the NACK
    /// bound of MR-SND-005, the rate window of MR-SND-007). Default
    /// `LintTimings::default()`.
    pub lint_timings: LintTimings,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            stall_threshold_ns: 1_000_000,
            max_flows: 16384,
            window: 16384,
            max_messages: 4096,
            max_stalls: 1024,
            max_paths: 4096,
            acked_grace: 128,
            lint: false,
            lint_point: CapturePoint::Auto,
            lint_cnp_interval_ns: 50_000,
            lint_timings: LintTimings::default(),
        }
    }
}

/// Sizes of the engine's state (map and window entries), to check that
/// memory is bounded by the flows, not by the packets.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StateSize {
    pub directions: usize,
    pub rocev2_flows: usize,
    pub window_slots: usize,
    pub paths: usize,
    pub messages: usize,
    pub pending: usize,
    pub stalls: usize,
    pub rocev2_slots: usize,
    pub rocev2_messages: usize,
    pub ts_units: usize,
    /// Acked transmissions kept for a late echo (at most `Config::window`
    /// per direction).
    pub late_echoes: usize,
    /// Packets on evs beyond `Config::max_paths`, all directions.
    pub paths_overflow: u64,
}

/// Slots of the engine's direction cache (a power of two).
const DIR_CACHE_SLOTS: usize = 128;

/// A direction's slot in the cache: the low bits of both addresses and
/// both connection ids, mixed by a multiplication (the two directions of a
/// connection get different slots).
#[inline]
fn dir_cache_slot(key: &DirKey) -> usize {
    let low = |ip: IpAddr| match ip {
        IpAddr::V4(a) => a.to_bits(),
        IpAddr::V6(a) => a.to_bits() as u32,
    };
    let x = (u64::from(low(key.src) ^ key.dst_conn) << 32) | u64::from(low(key.dst) ^ key.src_conn);
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - DIR_CACHE_SLOTS.trailing_zeros())) as usize
}

/// The flow engine.
pub struct Engine {
    cfg: Config,
    now: u64,
    last_ts: Option<u64>,
    capture: CaptureReport,
    dirs: Vec<Option<Dir>>,
    free: Vec<u32>,
    index: FxHashMap<PackedKey, u32>,
    /// Directions by a hash of their key's low bits (direct-mapped): most
    /// packets find their direction here, without hashing the whole key
    /// for `index`.
    dir_cache: Box<[Option<(DirKey, u32)>; DIR_CACHE_SLOTS]>,
    /// ts_unit_ps announced by CTRL, by (sender IP, sender conn).
    units: FxHashMap<(IpAddr, u32), u32>,
    /// Senders (IP, conn) whose CONNECT or ACCEPT was captured.
    started: FxHashMap<(IpAddr, u32), ()>,
    evicted_dirs: u64,
    roce: RoceTable,
    /// Every message completed at the last ingested packet.
    done: Vec<MsgDone>,
    /// The lint's state, when `Config::lint` is on.
    lint: Option<Box<LintState>>,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new(Config::default())
    }
}

impl Engine {
    pub fn new(cfg: Config) -> Engine {
        Engine {
            cfg,
            now: 0,
            last_ts: None,
            capture: CaptureReport {
                files: 1,
                ..CaptureReport::default()
            },
            dirs: Vec::new(),
            free: Vec::new(),
            index: FxHashMap::default(),
            dir_cache: Box::new([None; DIR_CACHE_SLOTS]),
            units: FxHashMap::default(),
            started: FxHashMap::default(),
            evicted_dirs: 0,
            roce: RoceTable::default(),
            done: Vec::new(),
            lint: cfg.lint.then(|| {
                Box::new(LintState::new(
                    cfg.lint_point,
                    cfg.lint_cnp_interval_ns,
                    cfg.lint_timings,
                ))
            }),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Sets the number of capture files analysed together (report only).
    pub fn set_files(&mut self, files: u64) {
        self.capture.files = files;
    }

    /// The latest capture time seen (ns).
    pub fn now(&self) -> u64 {
        self.now
    }

    fn tick(&mut self, ts: u64) {
        self.capture.frames += 1;
        if self.capture.frames == 1 {
            self.capture.first_ts_ns = ts;
        }
        if let Some(last) = self.last_ts
            && ts < last
        {
            self.capture.time_went_backwards += 1;
        }
        self.last_ts = Some(ts);
        if ts > self.now {
            self.now = ts;
        }
        self.capture.last_ts_ns = self.now;
    }

    /// Counts a frame that is neither MetaRoCE nor RoCEv2.
    pub fn ingest_other(&mut self, ts_ns: u64) {
        self.tick(ts_ns);
    }

    /// Analyses one packet (in capture order) and returns its verdict.
    #[inline]
    pub fn ingest(&mut self, obs: &Observation) -> Verdict {
        let mut v = Verdict::default();
        self.ingest_into(obs, &mut v);
        v
    }

    /// [`Engine::ingest`] into the caller's verdict, which it overwrites:
    /// a loop over many packets reuses one instead of moving a returned
    /// verdict (200 bytes) per packet.
    #[inline]
    pub fn ingest_into(&mut self, obs: &Observation, v: &mut Verdict) {
        self.tick(obs.ts_ns);
        self.done.clear();
        *v = Verdict {
            frame: obs.frame,
            ..Verdict::default()
        };
        match &obs.kind {
            ObsKind::MetaRoce(mr) => {
                self.capture.metaroce_packets += 1;
                if obs.malformed {
                    self.capture.malformed += 1;
                    if let Some(lint) = self.lint.as_deref_mut() {
                        lint.malformed(obs, v);
                    }
                    return;
                }
                self.ingest_metaroce(obs, mr, v);
            }
            ObsKind::RoceV2(r) => {
                self.capture.rocev2_packets += 1;
                if obs.malformed {
                    self.capture.malformed += 1;
                    if let Some(lint) = self.lint.as_deref_mut() {
                        lint.malformed(obs, v);
                    }
                    return;
                }
                let cfg = self.cfg;
                self.roce.ingest(obs, r, &cfg, v, &mut self.done);
                if let Some(lint) = self.lint.as_deref_mut() {
                    lint.rocev2(obs, r, v, &self.roce);
                }
            }
        }
    }

    /// Every message completed at the last packet given to [`Engine::ingest`]
    /// (its verdict's `message` is the first of them).
    pub fn messages_done(&self) -> &[MsgDone] {
        &self.done
    }

    /// The lint's findings not yet cleared, in capture order (empty when
    /// `Config::lint` is off). At most `lint::MAX_PENDING` wait: a caller
    /// that wants them all clears them as it goes.
    pub fn findings(&self) -> &[Finding] {
        self.lint.as_deref().map_or(&[], LintState::findings)
    }

    /// Forgets the findings [`Engine::findings`] returned.
    pub fn clear_findings(&mut self) {
        if let Some(lint) = self.lint.as_deref_mut() {
            lint.clear_findings();
        }
    }

    /// The host the lint judges this capture from, as given
    /// (`Config::lint_point`) or as decided from the traffic so far
    /// (`CapturePoint::Auto`); `None` when unknown or the lint is off. A
    /// per-packet view (the Wireshark plugin) keeps a side-specific
    /// finding only when this host makes its rule apply
    /// (`lint::Side::of(..).judges(..)`), as `Report::lint` counts it.
    pub fn lint_host(&self) -> Option<IpAddr> {
        self.lint.as_deref().and_then(LintState::host)
    }

    #[inline]
    fn dir_index(&mut self, key: DirKey, frame: u64, ts: u64, protect: Option<u32>) -> u32 {
        if let Some((k, i)) = self.dir_cache[dir_cache_slot(&key)]
            && k == key
        {
            return i;
        }
        self.dir_index_lookup(key, frame, ts, protect)
    }

    /// [`Engine::dir_index`] past the cache: the map, or a new direction.
    #[inline(never)]
    fn dir_index_lookup(&mut self, key: DirKey, frame: u64, ts: u64, protect: Option<u32>) -> u32 {
        let packed = key.packed();
        if let Some(&i) = self.index.get(&packed) {
            self.dir_cache[dir_cache_slot(&key)] = Some((key, i));
            return i;
        }
        if self.index.len() >= self.cfg.max_flows {
            self.evict(protect);
        }
        let mut dir = Dir::new(key, frame, ts, &self.cfg);
        dir.start_seen = self.started.contains_key(&(key.src, key.src_conn));
        let i = match self.free.pop() {
            Some(i) => {
                self.dirs[i as usize] = Some(dir);
                i
            }
            None => {
                self.dirs.push(Some(dir));
                (self.dirs.len() - 1) as u32
            }
        };
        self.index.insert(packed, i);
        self.dir_cache[dir_cache_slot(&key)] = Some((key, i));
        if let Some(lint) = self.lint.as_deref_mut() {
            lint.new_dir(i);
        }
        i
    }

    /// Evicts the least recently seen sixteenth of the directions.
    fn evict(&mut self, protect: Option<u32>) {
        let mut ages: Vec<(u64, u32)> = self
            .dirs
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.as_ref().map(|d| (d.last_ts, i as u32)))
            .filter(|(_, i)| Some(*i) != protect)
            .collect();
        if ages.is_empty() {
            return;
        }
        // Evicted slots are reused: no cache entry may point at one.
        self.dir_cache.fill(None);
        let n = (ages.len() / 16).max(1);
        ages.select_nth_unstable(n - 1);
        for &(_, i) in &ages[..n] {
            if let Some(dir) = self.dirs[i as usize].take() {
                self.index.remove(&dir.key.packed());
                self.free.push(i);
                self.evicted_dirs += 1;
            }
        }
        if self.units.len() > self.cfg.max_flows {
            self.units.clear();
        }
        if self.started.len() > self.cfg.max_flows {
            self.started.clear();
        }
    }

    #[inline]
    fn ingest_metaroce(&mut self, obs: &Observation, mr: &MrObs, v: &mut Verdict) {
        let key = DirKey {
            src: obs.src,
            dst: obs.dst,
            src_conn: mr.src_conn,
            dst_conn: mr.dst_conn,
        };
        let ts = obs.ts_ns;
        let ce = obs.ce();
        let own = self.dir_index(key, obs.frame, ts, None);
        let Some(dir) = dir_mut(&mut self.dirs, own) else {
            return;
        };
        dir.last_ts = ts;
        if !matches!(mr.body, MrBody::Ctrl(_)) {
            dir.on_path_packet(mr, ce, &self.cfg, v);
        }
        // The direction a feedback acknowledges.
        let mut peer = None;
        match &mr.body {
            MrBody::Data(d) => {
                v.flow = Some(own);
                let read_done = dir.on_data(obs.frame, ts, mr, d, ce, &self.cfg, v, &mut self.done);
                if let Some(msg_id) = read_done {
                    // The READ_REQ was sent by the reverse direction.
                    if let Some(&req) = self.index.get(&key.reverse().packed())
                        && let Some(req_dir) = dir_mut(&mut self.dirs, req)
                    {
                        req_dir.complete_read(msg_id, ts, v, &mut self.done);
                    }
                }
            }
            MrBody::Feedback(fb) => {
                dir.c.feedback_sent += 1;
                if ce {
                    v.ce_marked = true;
                }
                let hold_units = mr.tx_ts.wrapping_sub(fb.rx_ts);
                let unit_ps = if self.units.is_empty() {
                    DEFAULT_TS_UNIT_PS
                } else {
                    self.units
                        .get(&(obs.src, mr.src_conn))
                        .copied()
                        .unwrap_or(DEFAULT_TS_UNIT_PS)
                };
                // u32 x u32 fits a u64.
                let hold_ns = u64::from(hold_units) * u64::from(unit_ps) / 1000;
                let acked = self.dir_index(key.reverse(), obs.frame, ts, Some(own));
                peer = Some(acked);
                v.flow = Some(acked);
                if let Some(dir) = dir_mut(&mut self.dirs, acked) {
                    dir.last_ts = ts;
                    dir.on_feedback(
                        obs.frame,
                        ts,
                        mr.psn,
                        fb,
                        hold_ns,
                        &self.cfg,
                        v,
                        &mut self.done,
                    );
                }
            }
            MrBody::Ctrl(c) => {
                v.flow = Some(own);
                dir.c.ctrl += 1;
                let starts = matches!(c.op, CtrlOp::Connect | CtrlOp::Accept);
                if starts {
                    dir.start_seen = true;
                }
                let unit = if c.ts_unit_ps == 0 {
                    DEFAULT_TS_UNIT_PS
                } else {
                    c.ts_unit_ps
                };
                if self.units.len() < 4 * self.cfg.max_flows {
                    self.units.insert((obs.src, mr.src_conn), unit);
                }
                // The connection's start is in the capture: every path of
                // this sender starts at path_seq 1.
                if starts && self.started.len() < 4 * self.cfg.max_flows {
                    self.started.insert((obs.src, mr.src_conn), ());
                }
            }
            MrBody::Probe => {
                v.flow = Some(own);
                dir.on_probe(obs.frame, ts, mr);
            }
            MrBody::Other | MrBody::Malformed => {}
        }
        if let Some(lint) = self.lint.as_deref_mut() {
            lint.metaroce(obs, mr, v, &self.dirs, own, peer);
        }
    }

    /// A transmission `obs` this capture holds (`own`, a frame already
    /// ingested) was matched with its copy `other` in another capture
    /// (`MultiEngine`): the lint's rules of vantage two-capture judge
    /// `own` ([`LintState::copies`]). Its findings wait in
    /// [`Engine::findings`] and count in the report, but mark no verdict
    /// (`own` may have been ingested long before).
    pub(crate) fn lint_copies(&mut self, obs: &Observation, own: CaptureCopy, other: CaptureCopy) {
        let (Some(lint), ObsKind::MetaRoce(mr)) = (self.lint.as_deref_mut(), &obs.kind) else {
            return;
        };
        let key = DirKey {
            src: obs.src,
            dst: obs.dst,
            src_conn: mr.src_conn,
            dst_conn: mr.dst_conn,
        };
        let dir = self.index.get(&key.packed()).copied();
        lint.copies(obs, mr, own, other, dir);
    }

    /// Moves the clock to `now_ns` without a packet (live capture): stalls
    /// that have lasted past the threshold by then become visible.
    pub fn advance_time(&mut self, now_ns: u64) {
        if now_ns > self.now {
            self.now = now_ns;
        }
        let now = self.now;
        let cfg = self.cfg;
        for dir in self.dirs.iter_mut().flatten() {
            dir.check_stall(now, &cfg);
            dir.flush_rtt();
        }
    }

    /// Ends the capture at `end_ts_ns` (the last frame's time, or later):
    /// stalls still open are reported as open, and the lint judges what
    /// never came (its findings then wait in [`Engine::findings`]).
    pub fn finish(&mut self, end_ts_ns: u64) {
        self.advance_time(end_ts_ns);
        if let Some(lint) = self.lint.as_deref_mut() {
            lint.finish(self.now, &self.dirs);
        }
    }

    /// Payload bytes in flight on MetaRoCE direction `flow` (the
    /// verdict's `flow` of a MetaRoCE packet: a DATA's own direction, the
    /// direction a feedback acknowledges), after the last packet ingested:
    /// `DirectionReport::bytes_in_flight`. `None` when it is not live.
    pub fn bytes_in_flight(&self, flow: u32) -> Option<u64> {
        self.dirs
            .get(flow as usize)
            .and_then(Option::as_ref)
            .map(Dir::bytes_in_flight)
    }

    /// [`Engine::bytes_in_flight`] of RoCEv2 request flow `flow` (the
    /// verdict's `flow` of a RoCEv2 packet): `RoceFlowReport::bytes_in_flight`.
    pub fn rocev2_bytes_in_flight(&self, flow: u32) -> Option<u64> {
        self.roce.flow(flow).map(RoceFlow::bytes_in_flight)
    }

    /// Sizes of the live state.
    pub fn state_size(&self) -> StateSize {
        let mut s = StateSize {
            directions: self.index.len(),
            ts_units: self.units.len() + self.started.len(),
            ..StateSize::default()
        };
        for dir in self.dirs.iter().flatten() {
            let d = dir.size();
            s.window_slots += d.window_slots;
            s.paths += d.paths;
            s.messages += d.messages;
            s.pending += d.pending_last + d.pending_reads + d.retx_psns;
            s.late_echoes += d.late_echoes;
            s.stalls += d.stalls;
            s.paths_overflow += dir.paths_overflow;
        }
        self.roce.add_size(&mut s);
        s
    }

    /// The report as of now (see `analyzer/SCHEMA.md`).
    pub fn snapshot(&self) -> Report {
        let lint = self.lint.as_deref();
        let mut directions: Vec<DirectionReport> = self
            .dirs
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.as_ref().map(|d| (i, d)))
            .map(|(i, d)| {
                let mut r = d.report(self.now, &self.cfg);
                if let Some(lint) = lint {
                    r.lint = lint.dir_counts(i, d).into_iter().collect();
                }
                r
            })
            .collect();
        directions.sort_by_key(|d| (d.first_frame, d.src, d.dst, d.src_conn, d.dst_conn));
        let mut capture = self.capture.clone();
        capture.duration_ns = capture.last_ts_ns.saturating_sub(capture.first_ts_ns);
        let mut rocev2 = self.roce.report();
        if let Some(lint) = lint {
            lint.flow_counts(&mut rocev2, &self.roce);
        }
        Report {
            capture,
            directions,
            rocev2,
            between_captures: Vec::new(),
            engine: EngineReport {
                stall_threshold_ns: self.cfg.stall_threshold_ns,
                max_flows: self.cfg.max_flows as u64,
                live_directions: self.index.len() as u64,
                live_rocev2_flows: self.roce.live() as u64,
                evicted_directions: self.evicted_dirs,
                evicted_rocev2_flows: self.roce.evicted,
                rocev2_unmatched_responses: self.roce.unmatched,
                rocev2_not_rc: self.roce.not_rc,
            },
            lint: lint.map(|l| l.report(&self.dirs, &self.roce)),
        }
    }
}

/// Direction `i`, if live (a free function so the engine's other fields
/// stay borrowable beside it).
fn dir_mut(dirs: &mut [Option<Dir>], i: u32) -> Option<&mut Dir> {
    dirs.get_mut(i as usize).and_then(Option::as_mut)
}
