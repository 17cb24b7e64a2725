//! Rules about what the network did to a packet between two capture
//! points (vantage two-capture): judged when `MultiEngine`'s
//! `CrossCapture` matches one transmission in two captures, on the two
//! copies. A single capture never reaches them, so they cost its packets
//! nothing.
//!
//! Capture clocks differ, so a rule here does not ask which copy came
//! first: each capture's lint judges its own copy against the other's
//! ([`check_copies`] is called once per copy), and a finding is on the
//! copy that shows the damage, in its capture.

use proto_parse::frame::Ecn;

use super::rule::{Protocol, Rule, RuleId, Severity, Vantage};
use super::{Conn, Finding, Recorder, RuleCounts};
use crate::engine::cross_capture::CaptureCopy;
use crate::observation::{MrObs, Observation};

pub(super) const RULES: &[Rule] = &[Rule::new(
    Protocol::MetaRoce,
    "MR-NET-001",
    "1",
    "The network keeps the ECN field: a transmission captured ECT(0), ECT(1) or CE at one \
     capture point is not captured Not-ECT at another.",
    "IP ECN codepoint {observed} (0 Not-ECT) where frame {related} of another capture, the \
     same transmission, carries {expected} (1 ECT(1), 2 ECT(0), 3 CE): the network between \
     the capture points cleared the field, hiding congestion from the endpoints.",
)
.with_severity(Severity::Warning)
.judged_from(Vantage::TwoCapture)
.because("it compares two copies of one transmission, one per capture point")];

const ECN_KEPT: RuleId = RuleId::of("MR-NET-001");

/// `own`, this capture's copy of the MetaRoCE transmission `obs`, against
/// `other`, its copy in another capture: MR-NET-001 when `own` is
/// Not-ECT and `other` is not (the finding on `own`'s frame, `other`'s as
/// the related frame).
pub(super) fn check_copies(
    obs: &Observation,
    mr: &MrObs,
    own: CaptureCopy,
    other: CaptureCopy,
    counts: Option<&mut RuleCounts>,
    out: &mut Recorder,
) {
    let bleached =
        Ecn::from_bits(own.ecn) == Ecn::NotEct && Ecn::from_bits(other.ecn) != Ecn::NotEct;
    if bleached {
        out.record(
            counts,
            Finding {
                rule: ECN_KEPT,
                frame: own.frame,
                ts_ns: own.ts_ns,
                related_frame: Some(other.frame),
                conn: Conn::MetaRoce {
                    src: obs.src,
                    dst: obs.dst,
                    src_conn: mr.src_conn,
                    dst_conn: mr.dst_conn,
                },
                ev: Some(mr.ev),
                observed: u64::from(own.ecn),
                expected: u64::from(other.ecn),
                vantage: ECN_KEPT.rule().vantage,
            },
        );
    }
}
