//! RTT samples (spec 11.9): the transmissions and probes a feedback can
//! echo, late echoes of transmissions the window already pruned, and the
//! samples batched into the histograms.

use super::{Direction, RING};
use crate::engine::Config;
use crate::engine::verdict::Verdict;
use crate::engine::window::lt;
use crate::observation::MrObs;

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Probe {
    pub(super) seq: u32,
    pub(super) tx_ts: u32,
    pub(super) ts: u64,
    pub(super) frame: u64,
    pub(super) ev: u16,
    pub(super) sampled: bool,
}

/// An acked transmission that left the window before any feedback echoed
/// it: the feedback it triggered may still come back on a slower path
/// (spec 11.9: its first echo gives its RTT sample).
#[derive(Debug, Clone, Copy)]
pub(super) struct LateTx {
    pub(super) psn: u32,
    pub(super) tx_ts: u32,
    pub(super) ev: u16,
    pub(super) sampled: bool,
    pub(super) ts: u64,
    pub(super) frame: u64,
}

/// An acked transmission waits for its late echo this many times the
/// direction's largest RTT sample after it was captured.
pub(super) const LATE_ECHO_RTTS: u64 = 4;

/// RTT samples recorded into the histograms this many at a time (see
/// `Direction::rtt_pending`).
pub(super) const RTT_BATCH: usize = 32;

/// One RTT sample waiting for the histograms.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RttSample {
    pub(super) rtt: u64,
    /// RTT less the receiver's hold time; negative ones are not recorded.
    pub(super) fabric: i64,
    pub(super) ev: u16,
}

impl Direction {
    /// A PROBE this direction sent.
    pub(crate) fn on_probe(&mut self, frame: u64, ts: u64, mr: &MrObs) {
        self.c.probes += 1;
        self.probes[self.probes_at] = Probe {
            seq: mr.psn,
            tx_ts: mr.tx_ts,
            ts,
            frame,
            ev: mr.ev,
            sampled: false,
        };
        self.probes_at = (self.probes_at + 1) % RING;
        self.stall_event("probe", false);
    }

    /// Records the pending RTT samples (`rtt_pending`).
    #[inline(never)]
    pub(crate) fn flush_rtt(&mut self) {
        let pending = &self.rtt_pending[..usize::from(self.rtt_pending_len)];
        for s in pending.iter().filter(|s| s.fabric >= 0) {
            self.fabric.record(s.fabric as u64);
        }
        for s in pending {
            match self.paths.get_mut(s.ev) {
                Some(p) => p.rtt.record(s.rtt),
                None => self.rtt_off_path.record(s.rtt),
            }
        }
        self.rtt_pending_len = 0;
    }

    /// Before the window drops every slot below `below`: the transmissions
    /// no feedback has echoed yet go to `late`, so that the first echo
    /// still gives their sample however far the cumulative ack moved (a
    /// retransmission that fills the hole and the ack then jumps ahead).
    pub(super) fn keep_unechoed(&mut self, below: u32, now: u64, cfg: &Config) {
        // Feedback comes back within a few round trips or not at all: an
        // echo later than `LATE_ECHO_RTTS` times the direction's largest
        // RTT sample is not awaited (before any sample: no limit).
        let max_rtt = self.max_rtt;
        let expired = |tx_ts: u64| {
            max_rtt > 0 && tx_ts.saturating_add(max_rtt.saturating_mul(LATE_ECHO_RTTS)) < now
        };
        let late = &mut self.late;
        while late.front().is_some_and(|l| expired(l.ts)) {
            late.pop_front();
        }
        for (psn, slot) in self.window.iter() {
            if !lt(psn, below) {
                break;
            }
            if !slot.seen || slot.last.sampled || slot.coalesced || expired(slot.last.ts) {
                continue;
            }
            if late.len() >= cfg.window {
                late.pop_front();
            }
            late.push_back(LateTx {
                psn,
                tx_ts: slot.last.tx_ts,
                ev: slot.last.ev,
                sampled: false,
                ts: slot.last.ts,
                frame: slot.last.frame,
            });
        }
    }

    /// The transmission (`psn`, `tx_ts`) among those kept for a late echo.
    pub(super) fn late_echo(&mut self, psn: u32, tx_ts: u32) -> Option<&mut LateTx> {
        let at = self.late.partition_point(|l| lt(l.psn, psn));
        self.late
            .range_mut(at..)
            .take_while(|l| l.psn == psn)
            .find(|l| l.tx_ts == tx_ts)
    }

    /// An RTT sample (and its fabric part, less the receiver's `hold_ns`)
    /// for the verdict, batched for the histograms (`flush_rtt`).
    #[inline]
    pub(super) fn record_rtt(&mut self, rtt: u64, ev: u16, hold_ns: u64, v: &mut Verdict) {
        self.max_rtt = self.max_rtt.max(rtt);
        v.ack_rtt_ns = Some(rtt);
        let fabric =
            (rtt.min(i64::MAX as u64) as i64).saturating_sub(hold_ns.min(i64::MAX as u64) as i64);
        v.fabric_rtt_ns = Some(fabric);
        self.rtt_pending[usize::from(self.rtt_pending_len)] = RttSample { rtt, fabric, ev };
        self.rtt_pending_len += 1;
        if usize::from(self.rtt_pending_len) == RTT_BATCH {
            self.flush_rtt();
        }
    }
}
