//! What a check works with: the packet's context ([`Ctx`]), the numbers a
//! finding carries ([`Evidence`]) and where findings go ([`Recorder`]).

use super::finding::{Conn, Finding};
use super::report::RuleCounts;
use super::rule::{RuleId, RuleSet, Vantage};
use super::timings::LintTimings;
use super::vantage::Side;
use crate::engine::direction::Direction;
use crate::engine::rocev2::RoceFlow;
use crate::engine::verdict::Verdict;
use crate::observation::Observation;

/// Findings kept for the caller to drain; beyond them new findings are
/// only counted (`LintReport::findings_dropped`).
pub const MAX_PENDING: usize = 1 << 16;

/// Where findings go: the engine's list and counts, the verdict's set.
pub(super) struct Recorder {
    pub(super) findings: Vec<Finding>,
    pub(super) dropped: u64,
    /// Findings on no direction (a malformed packet), per rule.
    pub(super) undirected: RuleCounts,
    /// The rules' timing bounds: here because every check's context
    /// holds the recorder already, so reading them costs a packet nothing.
    pub(super) timings: LintTimings,
}

impl Recorder {
    /// A finding made with no packet at hand (at the end of the capture):
    /// counted in `counts` (its direction's) or, without, at the top level.
    pub(super) fn record(&mut self, counts: Option<&mut RuleCounts>, finding: Finding) {
        match counts {
            Some(c) => c.add(finding.rule, finding.vantage),
            None => self.undirected.add(finding.rule, finding.vantage),
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
    pub(super) side: Option<Side>,
    /// The finding's connection: the packet's addresses (swapped when
    /// `reverse`) and these ids. Made into a [`Conn`] only for a finding.
    pub(super) ids: ConnIds,
    pub(super) reverse: bool,
    pub(super) marks: RuleSet,
    pub(super) counts: Option<&'a mut RuleCounts>,
    pub(super) out: &'a mut Recorder,
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
    pub(super) fn conn(&self) -> Conn {
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

    /// Whether the capture was given (`LintOptions::point`) as taken on
    /// the host that sends this packet's direction: the parts of a rule
    /// of vantage `Either` that only the sender's capture can judge
    /// (MR-SND-003's gaps) are judged as the rule's.
    pub fn at_sender(&self) -> bool {
        self.side == Some(Side::Sender)
    }

    /// Whether the capture point is guessed (`CapturePoint::Auto`): a
    /// part of a rule that only one vantage can judge is recorded with
    /// [`Ctx::report_from`], and kept once the host is decided.
    pub fn side_guessed(&self) -> bool {
        self.side.is_none()
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
        self.report_from(rule, rule.rule().vantage, evidence);
    }

    /// Records that this packet broke `rule`, on evidence that holds only
    /// from `vantage` (narrower than the rule's: [`Finding::vantage`]).
    /// With `CapturePoint::Auto` such a finding is recorded on every
    /// direction and kept where the host decided at the end is at that
    /// vantage ([`LintReport::keeps`](super::LintReport::keeps)).
    pub fn report_from(&mut self, rule: RuleId, vantage: Vantage, evidence: Evidence) {
        self.marks.insert(rule);
        match self.counts.as_deref_mut() {
            Some(c) => c.add(rule, vantage),
            None => self.out.undirected.add(rule, vantage),
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
            vantage,
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
