//! The lint's timing bounds: where a rule says "within the ack delay" or
//! "reacts", the spec sets no number, so the lint uses these, and an
//! implementer whose transport has other timers sets their own
//! (`LintOptions::timings`, the CLI's `--ack-delay`, `--nack-rtts`, ...).

/// The timing bounds of the lint's rules. Read by the checks from the
/// lint's state (one copy per engine), never looked up per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LintTimings {
    /// MR-RCV-008: a DATA packet with AR is acknowledged within this
    /// (the receiver's ack delay). Default 1 ms.
    pub ack_delay_ns: u64,
    /// MR-SND-005: a NACK GAP or TRIMMED is answered within this many of
    /// the direction's largest RTT sample... Default 8.
    pub nack_rtts: u64,
    /// ...and at least this long. Default 2 ms.
    pub nack_min_ns: u64,
    /// MR-SND-007: the DATA rate after a congestion signal is measured
    /// over this many RTTs... Default 4.
    pub rate_window_rtts: u64,
    /// ...and at least this long. Default 100 us.
    pub rate_window_min_ns: u64,
    /// The sender's reaction time: MR-SND-007's window starts one RTT,
    /// and at least this long, after the signal; RC-REQ-001, RC-REQ-003
    /// and MR-SND-004 judge only what was sent at least this long after
    /// its trigger (a NAK, an acknowledgement) was captured: a packet sent
    /// sooner left before the sender could react. Default 10 us.
    pub reaction_min_ns: u64,
    /// MR-CONN-010: a CLOSE is unanswered when the capture went on this
    /// long after it with no CLOSE_ACK (or ABORT) from the peer. Default
    /// 10 ms: a CLOSE_ACK is sent at once, this leaves room for RTTs and
    /// a lost CLOSE sent again.
    pub close_wait_ns: u64,
}

impl Default for LintTimings {
    fn default() -> Self {
        LintTimings {
            ack_delay_ns: 1_000_000,
            nack_rtts: 8,
            nack_min_ns: 2_000_000,
            rate_window_rtts: 4,
            rate_window_min_ns: 100_000,
            reaction_min_ns: 10_000,
            close_wait_ns: 10_000_000,
        }
    }
}

impl LintTimings {
    /// MR-SND-005's bound for a direction whose largest RTT sample is
    /// `max_rtt_ns`.
    pub fn nack_bound(&self, max_rtt_ns: u64) -> u64 {
        max_rtt_ns
            .saturating_mul(self.nack_rtts)
            .max(self.nack_min_ns)
    }

    /// MR-SND-007: how long after a congestion signal its window starts.
    pub fn reaction_delay(&self, max_rtt_ns: u64) -> u64 {
        max_rtt_ns.max(self.reaction_min_ns)
    }

    /// MR-SND-007: how long the window after a congestion signal lasts
    /// (never 0, so the rate's checkpoints move on).
    pub fn rate_window(&self, max_rtt_ns: u64) -> u64 {
        max_rtt_ns
            .saturating_mul(self.rate_window_rtts)
            .max(self.rate_window_min_ns)
            .max(1)
    }
}
