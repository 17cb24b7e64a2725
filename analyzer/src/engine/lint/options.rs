//! The lint's settings for one engine (`Config::lint`).

use super::{CapturePoint, LintTimings};

/// How the lint judges a capture: where it was taken and the bounds of
/// the rules whose numbers the spec leaves open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LintOptions {
    /// Where the capture was taken, for the rules that only a
    /// sender-side or receiver-side capture can judge. Default `Auto`.
    pub point: CapturePoint,
    /// RC-CNP-001: the least time between two RoCEv2 CNPs of one flow
    /// (DCQCN's notification point sends at most one per 50 us by
    /// default); 0 switches the rule off. Default 50,000 ns.
    pub cnp_interval_ns: u64,
    /// The timing bounds (the ack delay of MR-RCV-008, the NACK bound of
    /// MR-SND-005, the rate window of MR-SND-007, ...).
    pub timings: LintTimings,
}

impl Default for LintOptions {
    fn default() -> Self {
        LintOptions {
            point: CapturePoint::Auto,
            cnp_interval_ns: 50_000,
            timings: LintTimings::default(),
        }
    }
}
