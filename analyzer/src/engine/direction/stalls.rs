//! Stalls (spec 9): unacked data outstanding and no cumulative-ack
//! advance for longer than the threshold; what was in flight and what
//! happened first while it lasted.

use super::Direction;
use crate::engine::Config;
use crate::engine::report::StallReport;
use crate::engine::verdict::StallMark;
use crate::engine::window::{diff, lt};

#[derive(Debug, Clone)]
pub(super) struct OpenStall {
    pub(super) start: u64,
    pub(super) first_event: Option<&'static str>,
    pub(super) paths: Vec<u16>,
    pub(super) outstanding: u64,
    pub(super) retransmissions: u64,
}

impl Direction {
    /// Unacked DATA outstanding (highest PSN sent >= cumulative ack).
    pub(super) fn outstanding(&self) -> bool {
        match (self.highest, self.cum) {
            (Some(_), None) => true,
            (Some(h), Some(c)) => !lt(h, c),
            _ => false,
        }
    }

    pub(super) fn outstanding_packets(&self) -> u64 {
        match (self.highest, self.cum) {
            (Some(h), Some(c)) => diff(c, h.wrapping_add(1)).max(0) as u64,
            (Some(_), None) => self.window.iter().filter(|(_, s)| s.seen).count() as u64,
            _ => 0,
        }
    }

    pub(super) fn paths_in_flight(&self) -> Vec<u16> {
        let mut evs: Vec<u16> = Vec::new();
        for (psn, slot) in self.window.iter() {
            if !slot.seen || slot.sacked || self.cum.is_some_and(|c| lt(psn, c)) {
                continue;
            }
            if !evs.contains(&slot.last.ev) {
                evs.push(slot.last.ev);
                if evs.len() >= 64 {
                    break;
                }
            }
        }
        evs.sort_unstable();
        evs
    }

    /// Opens a stall when the direction has had unacked data outstanding
    /// for longer than the threshold.
    #[inline]
    pub(crate) fn check_stall(&mut self, now: u64, cfg: &Config) {
        // The time test first: it is false for almost every packet.
        if now.saturating_sub(self.stall_ref) > cfg.stall_threshold_ns
            && self.stall.is_none()
            && self.fb_seen
            && self.outstanding()
        {
            self.open_stall();
        }
    }

    #[cold]
    pub(super) fn open_stall(&mut self) {
        self.stall = Some(OpenStall {
            start: self.stall_ref,
            first_event: None,
            paths: self.paths_in_flight(),
            outstanding: self.outstanding_packets(),
            retransmissions: 0,
        });
    }

    pub(super) fn stall_mark(&self, now: u64) -> Option<StallMark> {
        self.stall.as_ref().map(|s| StallMark {
            start_ns: s.start,
            elapsed_ns: now.saturating_sub(s.start),
            ended: false,
        })
    }

    pub(super) fn stall_event(&mut self, what: &'static str, retx: bool) {
        if let Some(s) = &mut self.stall {
            if s.first_event.is_none() {
                s.first_event = Some(what);
            }
            if retx {
                s.retransmissions += 1;
            }
        }
    }

    pub(super) fn push_stall(&mut self, stall: StallReport, cfg: &Config) {
        if self.stalls.len() < cfg.max_stalls {
            self.stalls.push(stall);
        } else {
            self.stalls_dropped += 1;
        }
    }
}
