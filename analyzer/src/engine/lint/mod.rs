//! The conformance lint: rules of the MetaRoCE wire format (and of RoCEv2
//! RC) checked on the flow engine's stream, packet by packet.
//!
//! The checks run inside [`crate::Engine`] (switched on by
//! `Config::lint`), after the engine has analysed the packet: they see the
//! observation, the verdict the engine built and the engine's state of the
//! packet's direction, plus lint-only state of their own. There is no
//! second flow tracker. Findings reach consumers two ways:
//! - `Engine::findings()` / `Engine::clear_findings()`: every [`Finding`]
//!   (rule, frame, connection, path, numeric evidence), for the caller to
//!   drain as it goes (the CLI drains after every batch; at most
//!   [`MAX_PENDING`] wait, beyond that they are counted as dropped); and
//!   per-rule counts in the report (`Report::lint`, per direction in
//!   `DirectionReport::lint`, per RoCEv2 flow in `RoceFlowReport::lint`);
//! - `Verdict::lint`: the rules this packet broke ([`RuleSet`], inline), for
//!   a per-packet view (the Wireshark plugin's expert infos).
//!
//! # Files
//! - this file: the dispatch ([`LintState`]) and the per-direction and
//!   per-flow state ([`DirLint`], [`FlowLint`]);
//! - `registry.rs`: [`FAMILIES`], [`rules()`], [`rule_count()`];
//! - `vantage.rs`: where the capture was taken ([`CapturePoint`],
//!   [`Side`], [`HostGuess`]);
//! - `report.rs`: the counts ([`LintReport`], [`RuleCounts`]) and the
//!   overrides ([`LintConfig`]);
//! - `context.rs`: what a check works with ([`Ctx`], [`Evidence`],
//!   [`Recorder`], [`MAX_PENDING`]);
//! - `rule.rs`, `finding.rs`, `options.rs`, `timings.rs`: a rule as data
//!   and its id, a finding, the engine's lint options, the rules' timing
//!   bounds;
//! - `captured.rs`: the transmissions of the latest PSNs captured, kept
//!   beyond the engine's window (MR-RCV-004);
//! - one file per family: `packet`, `connection`, `sender`, `receiver`,
//!   `network`, `rocev2`.
//!
//! # The registry
//! Rules are data ([`Rule`]): each family file defines
//! `pub(super) const RULES: &[Rule]` and [`FAMILIES`] lists the families;
//! [`rules()`] walks them all. A check names its rule with a
//! `const X: RuleId = RuleId::of("MR-PKT-001");` (a compile error if the id
//! is not in the registry). Severities can be overridden per run with a
//! [`LintConfig`] (the CLI's `--allow` / `--deny`); the engine records every
//! finding and the consumer applies the overrides.
//!
//! # Where a rule can be judged
//! A rule's [`Vantage`] says which capture point can judge it. The engine
//! is told where its capture was taken with `LintOptions::point`
//! ([`CapturePoint`]): on a host (its address), unknown, or `Auto`. A
//! direction whose source is the host is seen from the sender side, one
//! whose destination is the host from the receiver side.
//! [`Ctx::judges`] tells a check whether its rule applies. With `Auto`,
//! side-specific checks run on every direction and the host is decided
//! when the report is made ([`HostGuess`]): the findings that do not hold
//! for that host are then left out of the counts, and a consumer drops
//! them with [`LintReport::keeps`]. A finding holds where its rule can be
//! judged, or, for a part of a rule only one vantage can judge (a gap in
//! MR-SND-003's path_seq: only at the sender), where that part can
//! ([`Finding::vantage`], recorded with [`Ctx::report_from`]).
//!
//! # Adding a family
//! 1. A file `lint/<family>.rs` with `pub(super) const RULES: &[Rule]`, a
//!    `pub(super) struct DirState` (per-direction state, `Default`) and/or
//!    `pub(super) struct State` (per-engine state, `Default`) if it needs
//!    any, and `pub(super) fn check_metaroce(ctx: &mut Ctx<'_>, ...)` (or
//!    `check_rocev2`).
//! 2. The family's `RULES` appended to [`FAMILIES`] (`registry.rs`); in
//!    this file: `mod <family>;`, its states added to [`LintState`] /
//!    [`DirLint`], and
//!    its check called from [`LintState::check_metaroce`] (and its
//!    common DATA packet from [`LintState::plain_data`]) or
//!    [`LintState::rocev2`] (a rule judged on what never came, from
//!    [`LintState::finish`], when the capture ends: its finding marks no
//!    packet's verdict; a rule of vantage two-capture, from
//!    [`LintState::copies`], when `MultiEngine` matches a transmission in
//!    two captures: `network`).
//! 3. Each rule gets violating cases in the lint test table
//!    (`analyzer/tests/lint/`, one file per family: see `cases.rs` there)
//!    and a line in `docs/lint.md` (a test compares the doc's table with
//!    the registry).
//!
//! Per-packet cost matters: a check reads the observation and the state it
//! keeps, and records a finding only when a rule is broken (a `Copy`
//! struct, no `String`). Most packets are DATA, and most feedback plain
//! ACKs, that no family has anything to say about: each family defines its
//! common packet once (a `steady`, `breaks_alone`, `plain_data` or
//! `plain_ack` predicate, and what such a packet changes), and
//! [`LintState::metaroce`] tests them all before it makes a check context; a family whose common case a new rule changes must keep
//! its predicate in step (its violating cases in the test table catch a
//! predicate that lets a broken packet through). Memory is bounded by the
//! flows: per-direction state lives in [`DirLint`] (made only when the
//! lint is on), per-engine maps are capped like the engine's.

mod captured;
mod connection;
mod context;
mod finding;
mod network;
mod options;
mod packet;
mod receiver;
mod registry;
mod report;
mod rocev2;
mod rule;
mod sender;
mod timings;
mod vantage;

use std::net::IpAddr;

use connection::Passes;
pub use context::MAX_PENDING;
use context::{ConnIds, Ctx, Evidence, Recorder};
pub use finding::{Conn, Finding};
pub use options::LintOptions;
use registry::{FAMILIES, RULE_COUNT};
pub use registry::{rule_count, rules};
use report::RuleCounts;
pub use report::{LintConfig, LintReport, NotJudged, RuleCount};
pub use rocev2::rnr_timer_ns;
pub use rule::{Protocol, Rule, RuleId, RuleSet, Severity, Vantage};
pub use timings::LintTimings;
use vantage::SideBits;
pub use vantage::{CapturePoint, HostGuess, Side};

use crate::engine::cross_capture::CaptureCopy;
use crate::engine::direction::Direction;
use crate::engine::rocev2::RoceTable;
use crate::engine::verdict::Verdict;
use crate::observation::{DataObs, FeedbackObs, MrBody, MrObs, ObsKind, Observation, RoceObs};

/// The rule whose packets not judged the report counts (MR-RCV-004:
/// echoes of PSNs beyond what is kept).
const ECHO_REAL: RuleId = RuleId::of("MR-RCV-004");

/// The lint's state of one engine direction.
#[derive(Debug, Default)]
pub(crate) struct DirLint {
    /// Which end of the direction the capture was taken at
    /// ([`LintState::side`]), worked out at its first packet (`None`:
    /// not yet).
    side: Option<Option<Side>>,
    /// `CapturePoint::Auto`: the [`HostGuess`] candidates its source is,
    /// worked out at its first packet.
    sources: Option<[bool; 2]>,
    /// `side` and `sources` for the fast paths.
    bits: SideBits,
    counts: RuleCounts,
    packet: packet::DirState,
    connection: connection::DirState,
    sender: sender::DirState,
    receiver: receiver::DirState,
}

/// The lint's state of one RoCEv2 flow of the engine.
#[derive(Debug, Default)]
pub(crate) struct FlowLint {
    /// The flow's first frame: a flow slot the engine reused for another
    /// flow has another, and its lint state starts again.
    first_frame: u64,
    counts: RuleCounts,
    rocev2: rocev2::FlowState,
}

/// The lint's part of an engine (present only when `Config::lint` is on).
pub(crate) struct LintState {
    point: CapturePoint,
    guess: HostGuess,
    /// By engine direction index (`Engine::dirs`).
    dirs: Vec<DirLint>,
    /// By engine RoCEv2 flow index.
    flows: Vec<FlowLint>,
    out: Recorder,
    connection: connection::State,
    rocev2: rocev2::State,
}

impl LintState {
    pub fn new(options: LintOptions) -> LintState {
        let LintOptions {
            point,
            cnp_interval_ns,
            timings,
        } = options;
        LintState {
            point,
            guess: HostGuess::default(),
            dirs: Vec::new(),
            flows: Vec::new(),
            out: Recorder {
                findings: Vec::new(),
                dropped: 0,
                undirected: RuleCounts::default(),
                timings,
            },
            connection: connection::State::default(),
            rocev2: rocev2::State::new(cnp_interval_ns),
        }
    }

    /// The engine made direction `index` (new, or reusing an evicted
    /// one's slot).
    pub fn new_dir(&mut self, index: u32) {
        let i = index as usize;
        if self.dirs.len() <= i {
            self.dirs.resize_with(i + 1, DirLint::default);
        }
        self.dirs[i] = DirLint::default();
    }

    pub fn findings(&self) -> &[Finding] {
        &self.out.findings
    }

    pub fn clear_findings(&mut self) {
        self.out.findings.clear();
    }

    /// The host the capture was taken on, as given or as decided so far.
    pub fn host(&self) -> Option<IpAddr> {
        match self.point {
            CapturePoint::Host(h) => Some(h),
            CapturePoint::Auto => self.guess.host(),
            CapturePoint::Unknown => None,
        }
    }

    fn side(&self, src: IpAddr, dst: IpAddr) -> Option<Side> {
        Self::side_at(self.point, src, dst)
    }

    fn side_at(point: CapturePoint, src: IpAddr, dst: IpAddr) -> Option<Side> {
        match point {
            CapturePoint::Auto => None,
            CapturePoint::Host(h) => Some(Side::of(src, dst, Some(h))),
            CapturePoint::Unknown => Some(Side::Unknown),
        }
    }

    /// A packet the engine could not analyse (malformed, spec 8).
    pub fn malformed(&mut self, obs: &Observation, v: &mut Verdict) {
        let ids = match obs.kind {
            ObsKind::MetaRoce(mr) => ConnIds::MetaRoce {
                src_conn: mr.src_conn,
                dst_conn: mr.dst_conn,
            },
            ObsKind::RoceV2(r) => ConnIds::RoceV2 { dest_qp: r.dest_qp },
        };
        let mut ctx = Ctx {
            obs,
            verdict: v,
            own: None,
            roce: None,
            side: self.side(obs.src, obs.dst),
            ids,
            reverse: false,
            marks: RuleSet::default(),
            counts: None,
            out: &mut self.out,
        };
        packet::check_malformed(&mut ctx);
        v.lint = ctx.marks;
    }

    /// One MetaRoCE packet the engine analysed: `own` is the index of its
    /// direction, `peer` that of the direction a feedback acknowledges.
    /// Most packets are DATA that break no rule and change little lint
    /// state: [`LintState::plain_data`] tells them and records them
    /// without a check context; the rest go through every family's
    /// checks ([`LintState::check_metaroce`]).
    #[inline(never)]
    pub fn metaroce(
        &mut self,
        obs: &Observation,
        mr: &MrObs,
        v: &mut Verdict,
        dirs: &[Option<Direction>],
        own: u32,
        peer: Option<u32>,
    ) {
        let plain = match &mr.body {
            MrBody::Data(d) => self.plain_data(obs, mr, d, v, dirs, own),
            MrBody::Feedback(fb) => self.plain_ack(obs, mr, fb, v, dirs, own, peer),
            _ => false,
        };
        if !plain {
            self.check_metaroce(obs, mr, v, dirs, own, peer);
        }
    }

    /// A DATA packet that is common for every family (the connection's
    /// [`connection::State::steady`], no packet rule broken, the sender's
    /// and the receiver's `plain_data`): recorded as those say, and
    /// `true`. Otherwise `false`, and nothing changed. A direction's first
    /// packet is never plain: it decides the direction's side and host
    /// guess sources.
    #[inline(always)]
    fn plain_data(
        &mut self,
        obs: &Observation,
        mr: &MrObs,
        d: &DataObs,
        v: &Verdict,
        dirs: &[Option<Direction>],
        own: u32,
    ) -> bool {
        let Some(lint) = self.dirs.get_mut(own as usize) else {
            return false;
        };
        let bits = lint.bits;
        if !bits.ready() {
            return false;
        }
        let sender = bits.judges(Vantage::Sender);
        let receiver = bits.judges(Vantage::Receiver);
        // At the sender, the receiver family records what was sent.
        let endpoint = bits.judges(Vantage::Endpoint);
        let connection = match self.connection.steady(mr, &lint.connection) {
            Passes::FullCheck => return false,
            Passes::Unannounced => true,
            Passes::Announced(announced) => !packet::breaks_announced(mr, *announced),
        };
        // The message's continuity last: it records the packet's piece.
        let plain = connection
            && !packet::breaks_alone(obs, mr)
            && sender::path_in_order(v)
            && (!sender || sender::plain_data(&lint.sender, obs, mr, v))
            && (!receiver || receiver::plain_data(&lint.receiver, mr, d, v))
            && packet::joins_message(&mut lint.packet, obs.frame, mr, d, v);
        if !plain {
            return false;
        }
        if sender {
            sender::record_plain_data(&mut lint.sender, mr, d);
        }
        if receiver || endpoint && !d.trimmed {
            let own_dir = dirs.get(own as usize).and_then(Option::as_ref);
            receiver::record_plain_data(&mut lint.receiver, mr, own_dir);
        }
        if let Some(sources) = bits.sources() {
            self.guess.timestamps(sources, obs.ts_ns, mr.tx_ts);
        }
        true
    }

    /// A feedback that is common for every family: a packet of its own
    /// direction that breaks no connection or packet rule and whose
    /// path_seq is in order, and for the direction it acknowledges the
    /// sender's and the receiver's `plain_ack`: recorded as those say, and
    /// `true`. Otherwise `false`, and nothing changed. Both directions'
    /// sides must be known (their first packets take the full check).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn plain_ack(
        &mut self,
        obs: &Observation,
        mr: &MrObs,
        fb: &FeedbackObs,
        v: &Verdict,
        dirs: &[Option<Direction>],
        own: u32,
        peer: Option<u32>,
    ) -> bool {
        let Some(p) = peer.filter(|&p| p != own) else {
            return false;
        };
        let Ok([lint, acked]) = self.dirs.get_disjoint_mut([own as usize, p as usize]) else {
            return false;
        };
        let (bits, acked_bits) = (lint.bits, acked.bits);
        if !bits.ready() || !acked_bits.side_known() {
            return false;
        }
        let connection = match self.connection.steady(mr, &lint.connection) {
            Passes::FullCheck => return false,
            Passes::Unannounced => true,
            Passes::Announced(announced) => !packet::breaks_announced(mr, *announced),
        };
        let sender = acked_bits.judges(Vantage::Sender);
        let receiver = acked_bits.judges(Vantage::Receiver);
        let endpoint = acked_bits.judges(Vantage::Endpoint);
        let acked_dir = dirs.get(p as usize).and_then(Option::as_ref);
        let plain = connection
            && !packet::breaks_alone(obs, mr)
            && sender::path_in_order(v)
            && (!sender || sender::plain_ack(&acked.sender, fb))
            && receiver::plain_ack(&acked.receiver, obs, mr, fb, acked_dir, endpoint, receiver);
        if !plain {
            return false;
        }
        if sender {
            sender::record_ack(&mut acked.sender, obs, mr, fb, v);
        }
        receiver::record_plain_ack(&mut acked.receiver, obs, mr, fb);
        if let Some(sources) = bits.sources() {
            self.guess.timestamps(sources, obs.ts_ns, mr.tx_ts);
        }
        true
    }

    /// [`LintState::metaroce`] through every family's checks. A feedback
    /// is judged twice with one context: as a packet of its own
    /// direction, then as part of the direction it acknowledges (that
    /// direction's side of the capture, connection, counts and state).
    #[inline(never)]
    fn check_metaroce(
        &mut self,
        obs: &Observation,
        mr: &MrObs,
        v: &mut Verdict,
        dirs: &[Option<Direction>],
        own: u32,
        peer: Option<u32>,
    ) {
        let get = |i: u32| dirs.get(i as usize).and_then(Option::as_ref);
        let fb = match &mr.body {
            MrBody::Feedback(fb) => Some(fb),
            _ => None,
        };
        let acknowledged = fb
            .and(peer)
            .filter(|&p| p != own && (p as usize) < self.dirs.len());
        let (lint, acknowledged) = match acknowledged {
            Some(p) => match self.dirs.get_disjoint_mut([own as usize, p as usize]) {
                Ok([lint, peer_lint]) => (lint, Some((p, peer_lint))),
                Err(_) => return,
            },
            None => match self.dirs.get_mut(own as usize) {
                Some(lint) => (lint, None),
                None => return,
            },
        };
        let point = self.point;
        let auto = point == CapturePoint::Auto;
        let DirLint {
            side,
            sources,
            bits,
            counts,
            packet,
            connection,
            sender,
            receiver,
        } = lint;
        if auto {
            let guess = &mut self.guess;
            let sources = *sources.get_or_insert_with(|| guess.direction(&obs.src, &obs.dst));
            guess.timestamps(sources, obs.ts_ns, mr.tx_ts);
        }
        let side = *side.get_or_insert_with(|| Self::side_at(point, obs.src, obs.dst));
        *bits = SideBits::of(Some(side), *sources, auto);
        let mut ctx = Ctx {
            obs,
            verdict: v,
            own: get(own),
            roce: None,
            side,
            ids: ConnIds::MetaRoce {
                src_conn: mr.src_conn,
                dst_conn: mr.dst_conn,
            },
            reverse: false,
            marks: RuleSet::default(),
            counts: Some(counts),
            out: &mut self.out,
        };
        let announced = self.connection.on_packet(&mut ctx, mr, connection);
        packet::check_metaroce(&mut ctx, mr, packet, announced);
        match &mr.body {
            MrBody::Data(d) => {
                sender::check_data(&mut ctx, mr, d, sender);
                receiver::check_data(&mut ctx, mr, d, receiver);
            }
            MrBody::Ctrl(_) => {}
            _ => sender::check_packet(&mut ctx, mr),
        }
        if let (Some(fb), Some((p, lint))) = (fb, acknowledged) {
            let DirLint {
                side,
                sources,
                bits,
                counts,
                sender,
                receiver,
                ..
            } = lint;
            ctx.side = *side.get_or_insert_with(|| Self::side_at(point, obs.dst, obs.src));
            *bits = SideBits::of(Some(ctx.side), *sources, auto);
            ctx.own = get(p);
            ctx.reverse = true;
            ctx.counts = Some(counts);
            sender::check_feedback(&mut ctx, mr, fb, sender);
            receiver::check_feedback(&mut ctx, mr, fb, receiver);
        }
        v.lint = ctx.marks;
    }

    /// One RoCEv2 packet the engine analysed (its verdict's `flow` names
    /// the flow): the RC rules (`rocev2`).
    pub fn rocev2(&mut self, obs: &Observation, r: &RoceObs, v: &mut Verdict, roce: &RoceTable) {
        if self.point == CapturePoint::Auto {
            self.guess.addresses(&obs.src, &obs.dst);
        }
        let flow = v.flow.and_then(|i| roce.flow(i).map(|f| (i as usize, f)));
        let side = self.side(obs.src, obs.dst);
        let counts = match flow {
            Some((i, f)) => {
                if self.flows.len() <= i {
                    self.flows.resize_with(i + 1, FlowLint::default);
                }
                let lint = &mut self.flows[i];
                if lint.first_frame != f.first_frame {
                    *lint = FlowLint {
                        first_frame: f.first_frame,
                        ..FlowLint::default()
                    };
                }
                Some((&mut lint.counts, &mut lint.rocev2))
            }
            None => None,
        };
        let (counts, state) = counts.unzip();
        let mut ctx = Ctx {
            obs,
            verdict: v,
            own: None,
            roce: flow.map(|(_, f)| f),
            side,
            ids: ConnIds::RoceV2 { dest_qp: r.dest_qp },
            reverse: false,
            marks: RuleSet::default(),
            counts,
            out: &mut self.out,
        };
        rocev2::check_rocev2(&mut ctx, r, state, &mut self.rocev2);
        v.lint = ctx.marks;
    }

    /// A MetaRoCE transmission `obs` matched in two captures
    /// (`MultiEngine`): `own` is this capture's copy (a frame already
    /// ingested, of engine direction `dir`), `other` the other capture's.
    /// The rules of vantage two-capture (`network`) judge `own`; a
    /// finding marks no verdict.
    pub(crate) fn copies(
        &mut self,
        obs: &Observation,
        mr: &MrObs,
        own: CaptureCopy,
        other: CaptureCopy,
        dir: Option<u32>,
    ) {
        let counts = dir
            .and_then(|i| self.dirs.get_mut(i as usize))
            .map(|lint| &mut lint.counts);
        network::check_copies(obs, mr, own, other, counts, &mut self.out)
    }

    /// The end of the capture at `end_ns` (`Engine::finish`): the rules
    /// judged on what never came (MR-CONN-010, a CLOSE never answered).
    pub fn finish(&mut self, end_ns: u64, dirs: &[Option<Direction>]) {
        self.connection
            .finish(end_ns, dirs, &mut self.dirs, &mut self.out);
    }

    /// The report's `lint`: per-rule counts of the directions' findings
    /// whose rule applies at the capture point, and the findings on no
    /// direction.
    pub fn report(&self, dirs: &[Option<Direction>], roce: &RoceTable) -> LintReport {
        let host = self.host();
        let mut counts = vec![0u64; rule_count()];
        let mut add = |c: &RuleCounts, side: Side| c.add_judged(side, &mut counts);
        add(&self.out.undirected, Side::Unknown);
        for (dir, lint) in dirs.iter().zip(&self.dirs) {
            if let Some(dir) = dir {
                add(&lint.counts, Side::of(dir.key.src, dir.key.dst, host));
            }
        }
        for (i, lint) in self.flows.iter().enumerate() {
            if let Some(flow) = roce.flow(i as u32)
                && flow.first_frame == lint.first_frame
            {
                let (src, dst) = flow.addresses();
                add(&lint.counts, Side::of(src, dst, host));
            }
        }
        let mut not_judged = 0;
        for (dir, lint) in dirs.iter().zip(&self.dirs) {
            if let Some(dir) = dir
                && Side::of(dir.key.src, dir.key.dst, host).judges(ECHO_REAL.rule().vantage)
            {
                not_judged += lint.receiver.echoes_not_judged();
            }
        }
        LintReport {
            host,
            not_judged: (not_judged > 0)
                .then_some(NotJudged {
                    rule: ECHO_REAL.rule().id,
                    count: not_judged,
                })
                .into_iter()
                .collect(),
            counts: rules()
                .zip(counts)
                .filter(|(_, n)| *n > 0)
                .map(|((_, rule), count)| RuleCount {
                    rule: rule.id,
                    severity: rule.severity,
                    count,
                })
                .collect(),
            findings_dropped: self.out.dropped,
        }
    }

    /// Direction `index`'s counts per rule (ids), those that apply at the
    /// capture point, for its `DirectionReport`.
    pub fn dir_counts(&self, index: usize, dir: &Direction) -> Vec<(&'static str, u64)> {
        let Some(lint) = self.dirs.get(index) else {
            return Vec::new();
        };
        lint.counts
            .judged(Side::of(dir.key.src, dir.key.dst, self.host()))
    }

    /// Each RoCEv2 flow's counts per rule (ids), those that apply at the
    /// capture point, with the flow's first frame (which names it in the
    /// report), for its `RoceFlowReport`; flows without findings are left
    /// out.
    pub fn flow_counts<'a>(
        &'a self,
        roce: &'a RoceTable,
    ) -> impl Iterator<Item = (u64, Vec<(&'static str, u64)>)> + 'a {
        let host = self.host();
        self.flows.iter().enumerate().filter_map(move |(i, lint)| {
            if lint.counts.0.is_empty() {
                return None;
            }
            let flow = roce.flow(i as u32)?;
            if flow.first_frame != lint.first_frame {
                return None;
            }
            let (src, dst) = flow.addresses();
            Some((
                flow.first_frame,
                lint.counts.judged(Side::of(src, dst, host)),
            ))
        })
    }
}
