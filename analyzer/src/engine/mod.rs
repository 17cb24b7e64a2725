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

mod context;
mod cross_capture;
mod direction;
mod ev_table;
mod hist;
mod interval;
pub mod lint;
mod loss;
mod report;
mod rocev2;
mod verdict;
mod window;

use std::net::IpAddr;

pub use crate::observation::{
    CrcCheck, CtrlObs, DataObs, FbKind, FeedbackObs, FlowLabel, MirrorTag, MrBody, MrChecks, MrObs,
    ObsKind, Observation, RoceObs,
};
pub use cross_capture::blob;
pub use cross_capture::{
    CaptureCopy, CrossCapture, FRAME_NUMBER_MASK, Fate, FlowPath, MAX_CAPTURES, MergeConfig,
    MultiEngine, Offsets, PathSums, Transmission, one_way_delay,
};
pub use direction::DirSize;
pub use hist::{Hist, Summary};
pub use interval::IntervalSet;
pub use report::{
    BetweenCaptures, BetweenPath, BetweenReport, CaptureReport, DirectionReport, EngineReport,
    PathReport, RoceFlowReport, StallReport,
};
pub use verdict::{
    MsgDone, MsgView, ReadProgress, Retransmission, RetxKind, RoceFacts, StallMark, Verdict,
};

use context::PacketContext;
use direction::{DirKey, Direction, DirectionTable};

use lint::{Finding, LintOptions, LintReport, LintState};
use rocev2::{RoceFlow, RoceTable};

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
    /// Run the conformance lint's checks on every packet ([`lint`]), as
    /// these options say: findings in [`Engine::findings`], rules in
    /// `Verdict::lint`, counts in `Report::lint`. `None` by default: the
    /// engine then keeps no lint state and spends nothing on it.
    pub lint: Option<LintOptions>,
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
            lint: None,
        }
    }
}

/// The engine's report as of a moment (`Engine::snapshot`, schema in
/// `analyzer/SCHEMA.md`): its parts are in `report.rs`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Report {
    pub capture: CaptureReport,
    pub directions: Vec<DirectionReport>,
    pub rocev2: Vec<RoceFlowReport>,
    pub between_captures: Vec<BetweenReport>,
    pub engine: EngineReport,
    /// The conformance lint's counts, when it ran (`Config::lint`).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub lint: Option<LintReport>,
}

impl Report {
    /// Adds the report of another capture analysed beside this one (the
    /// per-capture reports of one `MultiEngine`): the capture counters
    /// summed and the time span widened ([`CaptureReport::merge`]), the
    /// directions and RoCEv2 flows listed after this report's (a direction
    /// captured at both ends appears once per capture: each is that
    /// capture point's view), the lint's counts per rule summed, the
    /// engine's counters summed ([`EngineReport::merge`]).
    /// `between_captures` is this report's: the matcher's, carried by the
    /// first capture's report.
    ///
    /// Every field is named here (no `..`): a new field does not compile
    /// until it is merged or said not to be.
    pub fn merge(&mut self, other: &Report) {
        let Report {
            capture,
            directions,
            rocev2,
            between_captures: _,
            engine,
            lint,
        } = other;
        self.capture.merge(capture);
        self.directions.extend(directions.iter().cloned());
        self.rocev2.extend(rocev2.iter().cloned());
        match (&mut self.lint, lint) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, Some(theirs)) => *mine = Some(theirs.clone()),
            (_, None) => {}
        }
        self.engine.merge(engine);
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

/// The flow engine.
pub struct Engine {
    cfg: Config,
    now: u64,
    last_ts: Option<u64>,
    capture: CaptureReport,
    directions: DirectionTable,
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
            directions: DirectionTable::default(),
            roce: RoceTable::default(),
            done: Vec::new(),
            lint: cfg.lint.map(|options| Box::new(LintState::new(options))),
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

    /// The RoCEv2 facts of the last packet given to [`Engine::ingest`]
    /// (all `None` unless it was a RoCEv2 packet of an RC flow).
    pub fn rocev2_facts(&self) -> RoceFacts {
        self.roce.facts
    }

    /// The request flow's source, destination and destination QP of the
    /// RoCEv2 flow `flow` (a verdict's `flow`), while it is live.
    pub fn rocev2_flow_key(&self, flow: u32) -> Option<(IpAddr, IpAddr, u32)> {
        self.roce.flow(flow).map(RoceFlow::key)
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
    /// (`LintOptions::point`) or as decided from the traffic so far
    /// (`CapturePoint::Auto`); `None` when unknown or the lint is off. A
    /// per-packet view (the Wireshark plugin) keeps a side-specific
    /// finding only when this host makes its rule apply
    /// (`lint::Side::of(..).judges(..)`), as `Report::lint` counts it.
    pub fn lint_host(&self) -> Option<IpAddr> {
        self.lint.as_deref().and_then(LintState::host)
    }

    #[inline]
    fn ingest_metaroce(&mut self, obs: &Observation, mr: &MrObs, v: &mut Verdict) {
        let mut pkt = PacketContext {
            frame: obs.frame,
            ts: obs.ts_ns,
            cfg: &self.cfg,
            v: &mut *v,
            done: &mut self.done,
        };
        let lint = &mut self.lint;
        let new_dir = |i| {
            if let Some(lint) = lint.as_deref_mut() {
                lint.new_dir(i);
            }
        };
        let Some((own, peer)) = self.directions.ingest(obs, mr, &mut pkt, new_dir) else {
            return;
        };
        if let Some(lint) = self.lint.as_deref_mut() {
            lint.metaroce(obs, mr, v, self.directions.dirs(), own, peer);
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
        let dir = self.directions.find(&key);
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
        for dir in self.directions.iter_mut() {
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
            lint.finish(self.now, self.directions.dirs());
        }
    }

    /// Payload bytes in flight on MetaRoCE direction `flow` (the
    /// verdict's `flow` of a MetaRoCE packet: a DATA's own direction, the
    /// direction a feedback acknowledges), after the last packet ingested:
    /// `DirectionReport::bytes_in_flight`. `None` when it is not live.
    pub fn bytes_in_flight(&self, flow: u32) -> Option<u64> {
        self.directions.get(flow).map(Direction::bytes_in_flight)
    }

    /// [`Engine::bytes_in_flight`] of RoCEv2 request flow `flow` (the
    /// verdict's `flow` of a RoCEv2 packet): `RoceFlowReport::bytes_in_flight`.
    pub fn rocev2_bytes_in_flight(&self, flow: u32) -> Option<u64> {
        self.roce.flow(flow).map(RoceFlow::bytes_in_flight)
    }

    /// Sizes of the live state.
    pub fn state_size(&self) -> StateSize {
        let mut s = StateSize::default();
        self.directions.add_size(&mut s);
        self.roce.add_size(&mut s);
        s
    }

    /// The report as of now (see `analyzer/SCHEMA.md`).
    pub fn snapshot(&self) -> Report {
        let lint = self.lint.as_deref();
        let mut directions: Vec<DirectionReport> = self
            .directions
            .dirs()
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
            for (first_frame, counts) in lint.flow_counts(&self.roce) {
                if let Ok(at) = rocev2.binary_search_by_key(&first_frame, |r| r.first_frame) {
                    rocev2[at].lint = counts.into_iter().collect();
                }
            }
        }
        Report {
            capture,
            directions,
            rocev2,
            between_captures: Vec::new(),
            engine: EngineReport {
                stall_threshold_ns: self.cfg.stall_threshold_ns,
                max_flows: self.cfg.max_flows as u64,
                live_directions: self.directions.live() as u64,
                live_rocev2_flows: self.roce.live() as u64,
                evicted_directions: self.directions.evicted,
                evicted_rocev2_flows: self.roce.evicted,
                rocev2_unmatched_responses: self.roce.unmatched,
                rocev2_not_rc: self.roce.not_rc,
            },
            lint: lint.map(|l| l.report(self.directions.dirs(), &self.roce)),
        }
    }
}
