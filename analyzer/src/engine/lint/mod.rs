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
//! when the report is made ([`HostGuess`]): the findings of rules that do
//! not apply to that host are then left out of the counts, and a consumer
//! drops them with [`LintReport::keeps`].
//!
//! # Adding a family
//! 1. A file `lint/<family>.rs` with `pub(super) const RULES: &[Rule]`, a
//!    `pub(super) struct DirState` (per-direction state, `Default`) and/or
//!    `pub(super) struct State` (per-engine state, `Default`) if it needs
//!    any, and `pub(super) fn check_metaroce(ctx: &mut Ctx<'_>, ...)` (or
//!    `check_rocev2`).
//! 2. In this file: `mod <family>;`, the family's `RULES` appended to
//!    [`FAMILIES`], its states added to [`LintState`] / [`DirLint`], and
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
//! struct, no `String`). Most packets are DATA that no family has anything
//! to say about: each family defines its common packet once (a `steady`,
//! `breaks_alone` or `plain_data` predicate, and what such a packet
//! changes), and [`LintState::metaroce`] tests them all before it makes a
//! check context; a family whose common case a new rule changes must keep
//! its predicate in step (its violating cases in the test table catch a
//! predicate that lets a broken packet through). Memory is bounded by the
//! flows: per-direction state lives in [`DirLint`] (made only when the
//! lint is on), per-engine maps are capped like the engine's.

mod connection;
mod finding;
mod network;
mod options;
mod packet;
mod receiver;
mod rocev2;
mod rule;
mod sender;
mod timings;

use std::net::IpAddr;

use connection::Passes;
pub use finding::{Conn, Finding};
pub use options::LintOptions;
pub use rocev2::rnr_timer_ns;
pub use rule::{Protocol, Rule, RuleId, RuleSet, Severity, Vantage};
pub use timings::LintTimings;

use crate::engine::cross_capture::CaptureCopy;
use crate::engine::direction::Direction;
use crate::engine::rocev2::{RoceFlow, RoceTable};
use crate::engine::verdict::Verdict;
use crate::observation::{DataObs, MrBody, MrObs, ObsKind, Observation, RoceObs};

/// Every family's rules, in registry order (a [`RuleId`] is its family's
/// place here and the rule's place in the family).
pub(crate) const FAMILIES: &[&[Rule]] = &[
    packet::RULES,
    connection::RULES,
    sender::RULES,
    receiver::RULES,
    network::RULES,
    rocev2::RULES,
];

/// Every rule of the registry, with its id.
pub fn rules() -> impl Iterator<Item = (RuleId, &'static Rule)> {
    FAMILIES.iter().enumerate().flat_map(|(f, rules)| {
        rules
            .iter()
            .enumerate()
            .map(move |(i, rule)| (RuleId::new(f, i), rule))
    })
}

/// Rules in the registry.
pub fn rule_count() -> usize {
    RULE_COUNT
}

pub(crate) const RULE_COUNT: usize = {
    let mut n = 0;
    let mut f = 0;
    while f < FAMILIES.len() {
        n += FAMILIES[f].len();
        f += 1;
    }
    n
};

/// Findings kept for the caller to drain; beyond them new findings are
/// only counted (`LintReport::findings_dropped`).
pub const MAX_PENDING: usize = 1 << 16;

/// Where the capture was taken, for rules that can be judged only at the
/// sender or only at the receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CapturePoint {
    /// Decided from the traffic ([`HostGuess`]).
    #[default]
    Auto,
    /// On the host with this address.
    Host(IpAddr),
    /// Unknown or in the middle (a mirror port): only rules of vantage
    /// `Either` are judged.
    Unknown,
}

/// Which end of a direction the capture was taken at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Sender,
    Receiver,
    Unknown,
}

impl Side {
    /// The side of the direction `src -> dst` for a capture taken on `host`.
    pub fn of(src: IpAddr, dst: IpAddr, host: Option<IpAddr>) -> Side {
        match host {
            Some(h) if h == src => Side::Sender,
            Some(h) if h == dst => Side::Receiver,
            _ => Side::Unknown,
        }
    }

    /// Whether a rule of `vantage` can be judged from this side.
    pub fn judges(self, vantage: Vantage) -> bool {
        match vantage {
            Vantage::Either | Vantage::TwoCapture => true,
            Vantage::Sender => self == Side::Sender,
            Vantage::Receiver => self == Side::Receiver,
            Vantage::Endpoint => self != Side::Unknown,
        }
    }
}

/// Decides the host a capture was taken on, for `CapturePoint::Auto`.
///
/// A host's capture holds only packets it sent or received, so the host is
/// an address found in every MetaRoCE packet. When two are (a capture of
/// one pair of hosts, at either end), their packets' timestamps tell them
/// apart: a packet's tx_ts is its sender's clock when it left, so at the
/// sender's own capture the capture time minus tx_ts stays nearly constant
/// (the same clock, read twice a few microseconds apart), while at the
/// other end it also holds the one-way delay, which varies from path to
/// path and packet to packet. The host is the address whose packets show
/// the smaller spread of that difference, when it is less than half the
/// other's and either it is 0 (exactly constant: the same clock) or the
/// other's is at least 1 us; otherwise (or when one side
/// sent fewer than 2 packets) the point stays unknown and only rules of
/// vantage `Either` are judged.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostGuess {
    /// Addresses in every packet so far (`None`: no packet yet).
    candidates: Option<[Option<IpAddr>; 2]>,
    /// Per candidate, the spread of its packets' capture time minus tx_ts.
    spread: [Spread; 2],
}

/// Min and max of `capture time - tx_ts` (mod 2^32, relative to the first
/// packet's).
#[derive(Debug, Clone, Copy, Default)]
struct Spread {
    first: Option<u32>,
    min: i32,
    max: i32,
    packets: u64,
}

impl Spread {
    fn add(&mut self, offset: u32) {
        self.packets += 1;
        let Some(first) = self.first else {
            self.first = Some(offset);
            return;
        };
        let d = offset.wrapping_sub(first) as i32;
        self.min = self.min.min(d);
        self.max = self.max.max(d);
    }

    fn width(&self) -> Option<u64> {
        (self.packets >= 2).then(|| (i64::from(self.max) - i64::from(self.min)) as u64)
    }
}

impl HostGuess {
    /// One MetaRoCE packet: its addresses, capture time and tx_ts.
    pub fn packet(&mut self, src: &IpAddr, dst: &IpAddr, ts_ns: u64, tx_ts: u32) {
        let sources = self.direction(src, dst);
        self.timestamps(sources, ts_ns, tx_ts);
    }

    /// The first packet of a direction `src -> dst`: its addresses, and
    /// which candidates are its source (where its packets' timestamps go,
    /// [`HostGuess::timestamps`]). The addresses of the direction's later
    /// packets change nothing, and a candidate dropped later stays dropped
    /// (its spread no longer counts).
    pub fn direction(&mut self, src: &IpAddr, dst: &IpAddr) -> [bool; 2] {
        self.addresses(src, dst);
        match &self.candidates {
            Some([a, b]) => [a.as_ref() == Some(src), b.as_ref() == Some(src)],
            None => [false; 2],
        }
    }

    /// A MetaRoCE packet's capture time and tx_ts, from a source that is
    /// the candidates `sources` ([`HostGuess::direction`]).
    #[inline(always)]
    pub fn timestamps(&mut self, sources: [bool; 2], ts_ns: u64, tx_ts: u32) {
        for (&source, spread) in sources.iter().zip(self.spread.iter_mut()) {
            if source {
                spread.add((ts_ns as u32).wrapping_sub(tx_ts));
            }
        }
    }

    /// A packet's addresses (RoCEv2 has no transmit timestamp: its
    /// captures are decided only when one address is in every packet).
    #[inline]
    pub fn addresses(&mut self, src: &IpAddr, dst: &IpAddr) {
        let c = self.candidates.get_or_insert([Some(*src), Some(*dst)]);
        for slot in c.iter_mut() {
            if slot.is_some_and(|a| a != *src && a != *dst) {
                *slot = None;
            }
        }
    }

    /// The host, when the traffic says it.
    pub fn host(&self) -> Option<IpAddr> {
        const MIN_REMOTE_SPREAD_NS: u64 = 1_000;
        let c = self.candidates?;
        // A spread of exactly 0 is the capture host's own clock read twice
        // (no timestamp noise at all), so any other spread decides; a
        // spread under 1 us otherwise could be timestamp resolution alone.
        let clear = |own: Option<u64>, other: Option<u64>| match (own, other) {
            (Some(own), Some(other)) => {
                (own == 0 || other >= MIN_REMOTE_SPREAD_NS) && own * 2 < other
            }
            _ => false,
        };
        let [wa, wb] = [self.spread[0].width(), self.spread[1].width()];
        match c {
            [Some(a), None] => Some(a),
            [None, Some(b)] => Some(b),
            [Some(a), Some(_)] if clear(wa, wb) => Some(a),
            [Some(_), Some(b)] if clear(wb, wa) => Some(b),
            _ => None,
        }
    }
}

/// Per-run severity overrides (`--allow ID`, `--deny ID`), applied by the
/// consumer to the engine's findings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LintConfig {
    /// `None`: the rule is allowed (not reported); otherwise its severity.
    overrides: Vec<(RuleId, Option<Severity>)>,
}

impl LintConfig {
    /// Reports nothing of `rule`.
    pub fn allow(&mut self, rule: RuleId) {
        self.set(rule, None);
    }

    /// Makes `rule` an error.
    pub fn deny(&mut self, rule: RuleId) {
        self.set(rule, Some(Severity::Error));
    }

    fn set(&mut self, rule: RuleId, severity: Option<Severity>) {
        self.overrides.retain(|(r, _)| *r != rule);
        self.overrides.push((rule, severity));
    }

    /// The severity `rule` is reported with, `None` when it is allowed.
    pub fn severity(&self, rule: RuleId) -> Option<Severity> {
        match self.overrides.iter().find(|(r, _)| *r == rule) {
            Some((_, s)) => *s,
            None => Some(rule.rule().severity),
        }
    }
}

/// Per-rule finding counts of a capture (the report's `lint`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LintReport {
    /// The host the capture was taken on (given, or decided from the
    /// traffic), `None` when unknown: then only rules of vantage `either`
    /// were judged.
    pub host: Option<IpAddr>,
    /// Findings per rule, in registry order, only rules that fired (the
    /// registry's severities: overrides are the consumer's).
    pub counts: Vec<RuleCount>,
    /// Findings not kept for the caller (more than `MAX_PENDING` waited).
    pub findings_dropped: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RuleCount {
    pub rule: &'static str,
    pub severity: Severity,
    pub count: u64,
}

impl LintReport {
    /// Adds another capture's counts (a report over several captures):
    /// per rule summed, in registry order; the host kept when both
    /// captures were taken on the same one, else `None`.
    pub fn merge(&mut self, other: &LintReport) {
        if self.host != other.host {
            self.host = None;
        }
        for c in &other.counts {
            match self.counts.iter_mut().find(|m| m.rule == c.rule) {
                Some(m) => m.count += c.count,
                None => self.counts.push(c.clone()),
            }
        }
        self.counts
            .sort_by_key(|c| RuleId::find(c.rule).map(RuleId::index));
        self.findings_dropped += other.findings_dropped;
    }

    /// Whether `finding`'s rule could be judged at this capture point.
    pub fn keeps(&self, finding: &Finding) -> bool {
        Side::of(finding.conn.src(), finding.conn.dst(), self.host).judges(finding.rule().vantage)
    }
}

/// Counts per rule of one direction (a short list: few rules fire).
#[derive(Debug, Clone, Default)]
pub(crate) struct RuleCounts(Vec<(RuleId, u64)>);

impl RuleCounts {
    /// The counts of the rules judged from `side`, by rule id in registry
    /// order.
    fn judged(&self, side: Side) -> Vec<(&'static str, u64)> {
        let mut out: Vec<(RuleId, u64)> = self
            .0
            .iter()
            .filter(|(r, _)| side.judges(r.rule().vantage))
            .copied()
            .collect();
        out.sort_unstable();
        out.into_iter().map(|(r, n)| (r.rule().id, n)).collect()
    }

    fn add(&mut self, rule: RuleId) {
        match self.0.iter_mut().find(|(r, _)| *r == rule) {
            Some((_, n)) => *n += 1,
            None => self.0.push((rule, 1)),
        }
    }
}

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

/// Where findings go: the engine's list and counts, the verdict's set.
struct Recorder {
    findings: Vec<Finding>,
    dropped: u64,
    /// Findings on no direction (a malformed packet), per rule.
    undirected: RuleCounts,
    /// The rules' timing bounds: here because every check's context
    /// holds the recorder already, so reading them costs a packet nothing.
    timings: LintTimings,
}

impl Recorder {
    /// A finding made with no packet at hand (at the end of the capture):
    /// counted in `counts` (its direction's) or, without, at the top level.
    fn record(&mut self, counts: Option<&mut RuleCounts>, finding: Finding) {
        match counts {
            Some(c) => c.add(finding.rule),
            None => self.undirected.add(finding.rule),
        }
        if self.findings.len() >= MAX_PENDING {
            self.dropped += 1;
        } else {
            self.findings.push(finding);
        }
    }
}

/// What a check sees of one packet, and where it records what it finds.
// The engine state fields are for the sender, receiver and RoCEv2
// families (not every family reads every field).
#[allow(dead_code)]
pub(crate) struct Ctx<'a> {
    pub obs: &'a Observation,
    /// The verdict the engine built for this packet.
    pub verdict: &'a Verdict,
    /// The engine's state of the packet's own direction (`src -> dst`).
    pub own: Option<&'a Direction>,
    /// RoCEv2: the engine's state of the packet's flow (the request flow
    /// a response answers).
    pub roce: Option<&'a RoceFlow>,
    /// Which end of the packet's own direction the capture was taken at
    /// (`None`: `CapturePoint::Auto`, decided at the end).
    side: Option<Side>,
    /// The finding's connection: the packet's addresses (swapped when
    /// `reverse`) and these ids. Made into a [`Conn`] only for a finding.
    ids: ConnIds,
    reverse: bool,
    marks: RuleSet,
    counts: Option<&'a mut RuleCounts>,
    out: &'a mut Recorder,
}

/// The ids of a finding's [`Conn`], beside the packet's addresses.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ConnIds {
    /// The packet's own ids (swapped with the addresses when reversed).
    MetaRoce {
        src_conn: u32,
        dst_conn: u32,
    },
    RoceV2 {
        dest_qp: u32,
    },
}

impl Ctx<'_> {
    /// The connection a finding on this packet is about.
    fn conn(&self) -> Conn {
        let (src, dst) = match self.reverse {
            false => (self.obs.src, self.obs.dst),
            true => (self.obs.dst, self.obs.src),
        };
        match self.ids {
            ConnIds::MetaRoce { src_conn, dst_conn } if self.reverse => Conn::MetaRoce {
                src,
                dst,
                src_conn: dst_conn,
                dst_conn: src_conn,
            },
            ConnIds::MetaRoce { src_conn, dst_conn } => Conn::MetaRoce {
                src,
                dst,
                src_conn,
                dst_conn,
            },
            ConnIds::RoceV2 { dest_qp } => Conn::RoceV2 { src, dst, dest_qp },
        }
    }

    /// The rules' timing bounds (`LintOptions::timings`).
    pub fn timings(&self) -> &LintTimings {
        &self.out.timings
    }

    /// Whether a rule of `vantage` is judged on this packet's direction.
    /// With `CapturePoint::Auto` every side-specific rule is judged, and
    /// its findings are filtered once the host is known.
    pub fn judges(&self, vantage: Vantage) -> bool {
        self.side.is_none_or(|s| s.judges(vantage))
    }

    /// Whether a rule of `vantage` is judged on the reverse direction
    /// (what a feedback acknowledges): the sides swap.
    #[allow(dead_code)] // for the sender and receiver families
    pub fn judges_reverse(&self, vantage: Vantage) -> bool {
        let swapped = self.side.map(|s| match s {
            Side::Sender => Side::Receiver,
            Side::Receiver => Side::Sender,
            Side::Unknown => Side::Unknown,
        });
        swapped.is_none_or(|s| s.judges(vantage))
    }

    /// Records that this packet broke `rule`.
    pub fn report(&mut self, rule: RuleId, evidence: Evidence) {
        self.marks.insert(rule);
        match self.counts.as_deref_mut() {
            Some(c) => c.add(rule),
            None => self.out.undirected.add(rule),
        }
        if self.out.findings.len() >= MAX_PENDING {
            self.out.dropped += 1;
            return;
        }
        self.out.findings.push(Finding {
            rule,
            frame: self.obs.frame,
            ts_ns: self.obs.ts_ns,
            related_frame: evidence.related_frame,
            conn: self.conn(),
            ev: evidence.ev,
            observed: evidence.observed,
            expected: evidence.expected,
        });
    }
}

/// The numbers a finding carries (see [`Finding`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Evidence {
    pub observed: u64,
    pub expected: u64,
    pub related_frame: Option<u64>,
    pub ev: Option<u16>,
}

impl Evidence {
    pub fn new(observed: impl Into<u64>, expected: impl Into<u64>) -> Evidence {
        Evidence {
            observed: observed.into(),
            expected: expected.into(),
            ..Evidence::default()
        }
    }

    pub fn ev(self, ev: u16) -> Evidence {
        Evidence {
            ev: Some(ev),
            ..self
        }
    }

    pub fn related(self, frame: Option<u64>) -> Evidence {
        Evidence {
            related_frame: frame,
            ..self
        }
    }
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
        if let MrBody::Data(d) = &mr.body
            && self.plain_data(obs, mr, d, v, dirs, own)
        {
            return;
        }
        self.check_metaroce(obs, mr, v, dirs, own, peer);
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
        let Some(side) = lint.side else {
            return false;
        };
        let sources = match (self.point, lint.sources) {
            (CapturePoint::Auto, None) => return false,
            (_, sources) => sources,
        };
        let own_dir = dirs.get(own as usize).and_then(Option::as_ref);
        let sender = side.is_none_or(|s| s.judges(Vantage::Sender));
        let receiver = side.is_none_or(|s| s.judges(Vantage::Receiver));
        // At the sender, the receiver family records what was sent.
        let endpoint = side.is_none_or(|s| s.judges(Vantage::Endpoint));
        let connection = match self.connection.steady(mr, &lint.connection) {
            Passes::FullCheck => return false,
            Passes::Unannounced => true,
            Passes::Announced(announced) => !packet::breaks_announced(mr, *announced),
        };
        let plain = connection
            && !packet::breaks_alone(obs, mr)
            && packet::joins_message(&mut lint.packet, obs.frame, mr, d, v)
            && (!sender || sender::plain_data(&lint.sender, obs, mr, v, own_dir))
            && (!receiver || receiver::plain_data(&lint.receiver, mr, d, v));
        if !plain {
            return false;
        }
        if sender {
            sender::record_plain_data(&mut lint.sender, mr, d);
        }
        if receiver || endpoint && !d.trimmed {
            receiver::record_plain_data(&mut lint.receiver, mr, own_dir);
        }
        if let Some(sources) = sources {
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
        let DirLint {
            side,
            sources,
            counts,
            packet,
            connection,
            sender,
            receiver,
        } = lint;
        if point == CapturePoint::Auto {
            let guess = &mut self.guess;
            let sources = *sources.get_or_insert_with(|| guess.direction(&obs.src, &obs.dst));
            guess.timestamps(sources, obs.ts_ns, mr.tx_ts);
        }
        let side = *side.get_or_insert_with(|| Self::side_at(point, obs.src, obs.dst));
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
            _ => sender::check_packet(&mut ctx, mr, sender),
        }
        if let (Some(fb), Some((p, lint))) = (fb, acknowledged) {
            let DirLint {
                side,
                counts,
                sender,
                receiver,
                ..
            } = lint;
            ctx.side = *side.get_or_insert_with(|| Self::side_at(point, obs.dst, obs.src));
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
        let mut add = |c: &RuleCounts, side: Side| {
            for &(rule, n) in &c.0 {
                if side.judges(rule.rule().vantage) {
                    counts[rule.index()] += n;
                }
            }
        };
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
        LintReport {
            host,
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

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn rule_ids_are_unique_and_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for (id, rule) in rules() {
            assert!(seen.insert(rule.id), "{} twice in the registry", rule.id);
            assert_eq!(RuleId::find(rule.id), Some(id));
            assert_eq!(id.rule(), rule);
            let parts: Vec<&str> = rule.id.split('-').collect();
            assert_eq!(parts.len(), 3, "{}", rule.id);
            assert!(matches!(parts[0], "MR" | "RC"), "{}", rule.id);
            assert!(
                parts[2].len() == 3 && parts[2].bytes().all(|b| b.is_ascii_digit()),
                "{}",
                rule.id
            );
            assert!(rule.statement.ends_with('.'), "{}", rule.id);
            assert!(!rule.evidence.is_empty() && !rule.spec_section.is_empty());
            assert!(!rule.vantage_why.is_empty(), "{}: why its vantage", rule.id);
        }
        assert_eq!(seen.len(), rule_count());
        let indices: Vec<usize> = rules().map(|(id, _)| id.index()).collect();
        assert_eq!(indices, (0..rule_count()).collect::<Vec<_>>());
    }

    #[test]
    fn merged_reports_sum_their_counts_per_rule_in_registry_order() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let count = |rule: &'static str, count| RuleCount {
            rule,
            severity: RuleId::of(rule).rule().severity,
            count,
        };
        let mut merged = LintReport {
            host: Some(a),
            counts: vec![count("MR-PKT-002", 3), count("MR-SND-004", 1)],
            findings_dropped: 1,
        };
        merged.merge(&LintReport {
            host: Some(a),
            counts: vec![count("MR-PKT-001", 2), count("MR-SND-004", 5)],
            findings_dropped: 2,
        });
        assert_eq!(merged.host, Some(a));
        assert_eq!(
            merged.counts,
            [
                count("MR-PKT-001", 2),
                count("MR-PKT-002", 3),
                count("MR-SND-004", 6)
            ]
        );
        assert_eq!(merged.findings_dropped, 3);
        merged.merge(&LintReport {
            host: "10.0.0.2".parse().ok(),
            ..LintReport::default()
        });
        assert_eq!(merged.host, None, "captures taken on different hosts");
        assert_eq!(merged.counts.len(), 3);
    }

    #[test]
    fn overrides_change_severity() {
        let rule = RuleId::of("MR-PKT-001");
        let mut cfg = LintConfig::default();
        assert_eq!(cfg.severity(rule), Some(Severity::Error));
        cfg.allow(rule);
        assert_eq!(cfg.severity(rule), None);
        cfg.deny(rule);
        assert_eq!(cfg.severity(rule), Some(Severity::Error));
    }

    #[test]
    fn a_rule_set_holds_each_rule_once() {
        let mut set = RuleSet::default();
        assert!(set.is_empty());
        let ids: Vec<RuleId> = rules().map(|(id, _)| id).collect();
        for &id in ids.iter().rev().step_by(2) {
            set.insert(id);
            set.insert(id);
        }
        let mut want: Vec<RuleId> = ids.iter().rev().step_by(2).copied().collect();
        want.reverse();
        assert_eq!(set.len(), want.len());
        assert_eq!(set.iter().collect::<Vec<_>>(), want);
        assert!(!set.contains(ids[ids.len() - 2]));
    }

    #[test]
    fn the_host_is_the_address_in_every_packet_or_the_one_with_the_steadier_clock() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        let mut g = HostGuess::default();
        // Captured on A: A's packets leave 100 ns after their tx_ts, B's
        // arrive 10 to 30 us after theirs (B's clock 1 ms ahead).
        for (i, delay) in [10_000u64, 30_000, 12_000].into_iter().enumerate() {
            let t = 5_000_000 + i as u64 * 100_000;
            g.packet(&a, &b, t + 100, t as u32);
            if i < 2 {
                assert_eq!(g.host(), None, "fewer than 2 packets of B");
            }
            g.packet(&b, &a, t + delay, (t + 1_000_000) as u32);
        }
        assert_eq!(g.host(), Some(a));
        g.packet(&c, &a, 9_000_000, 0);
        assert_eq!(g.host(), Some(a), "A is in every packet");
        g.packet(&b, &c, 9_100_000, 0);
        assert_eq!(g.host(), None);
    }
}
