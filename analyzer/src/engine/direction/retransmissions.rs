//! Retransmissions: why a PSN was sent again (fast, timeout, spurious),
//! the loss it charges to the path of the previous transmission, and the
//! retransmissions kept after the window pruned them, for a late DUP
//! feedback that shows them spurious (spec 11.10).

use super::{Direction, RING, Tx};
use crate::engine::Config;
use crate::engine::context::PacketContext;
use crate::engine::verdict::{Retransmission, RetxKind};
use crate::engine::window::{diff, lt};
use crate::observation::MrObs;

/// A retransmission pruned by a cumulative ack before any DUP feedback
/// could show it spurious.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct PrunedRetx {
    pub(super) psn: u32,
    pub(super) tx_ts: u32,
    pub(super) frame: u64,
    pub(super) lost_ev: Option<u16>,
    pub(super) valid: bool,
}

impl Direction {
    /// [`Direction::on_data`] for a retransmission (rare: out of line, so that
    /// the first transmission's path stays short). `psn`'s slot, if the
    /// window holds it, was made by the caller. It adds to the bytes in
    /// flight only when it is the PSN's first captured transmission.
    #[cold]
    #[inline(never)]
    pub(super) fn on_retransmission(
        &mut self,
        pkt: &mut PacketContext<'_>,
        psn: u32,
        tx: Tx,
        mr: &MrObs,
        payload_len: u16,
        below_cum: bool,
    ) {
        let highest_sacked = self.highest_sacked;
        let slot = self.window.get_mut(psn);
        self.c.retransmissions += 1;
        let mut newly_retx = false;
        let (original_frame, count, kind, charge) = match slot {
            Some(slot) => {
                let original = slot.seen.then_some(slot.first.frame);
                let count = slot.count;
                let kind = if below_cum || slot.sacked {
                    RetxKind::Spurious
                } else if slot.nacked || highest_sacked.is_some_and(|h| lt(psn, h)) {
                    RetxKind::Fast
                } else {
                    RetxKind::Timeout
                };
                // Sender-side loss: the previous transmission was never
                // acked or SACKed.
                let charge = (kind != RetxKind::Spurious && slot.seen).then_some(slot.last.ev);
                if !slot.seen {
                    slot.first = tx;
                    slot.seen = true;
                    if !below_cum && !slot.sacked {
                        slot.flight = payload_len;
                        self.c.bytes_in_flight += u64::from(payload_len);
                    }
                }
                slot.last = tx;
                if !slot.retx {
                    slot.retx = true;
                    newly_retx = true;
                }
                slot.count = slot.count.saturating_add(1);
                if kind == RetxKind::Spurious {
                    slot.spurious = true;
                } else if charge.is_some() {
                    slot.lost_ev = charge;
                }
                (original, count, kind, charge)
            }
            None => (None, 0, RetxKind::Spurious, None),
        };
        if newly_retx {
            self.track_retx(psn, pkt.cfg);
        }
        match kind {
            RetxKind::Fast => self.c.fast += 1,
            RetxKind::Timeout => self.c.timeout += 1,
            RetxKind::Spurious => self.c.spurious += 1,
        }
        if let Some(ev) = charge
            && let Some(p) = self.paths.get_mut(ev)
        {
            p.lost_inferred += 1;
        }
        if let Some(p) = self.paths.get_mut(mr.ev) {
            p.retransmissions += 1;
        }
        pkt.v.retransmission = Some(Retransmission {
            original_frame,
            attempt: mr.tx_attempt.max(count),
            kind,
            shown_spurious_by: None,
        });
        self.stall_event(
            match kind {
                RetxKind::Fast => "fast_retransmission",
                RetxKind::Timeout => "timeout_retransmission",
                RetxKind::Spurious => "spurious_retransmission",
            },
            true,
        );
    }

    /// `psn`'s slot has just got `retx` set.
    pub(super) fn track_retx(&mut self, psn: u32, cfg: &Config) {
        if self.retx_psns.len() >= cfg.window {
            self.forget_dropped_retx();
        }
        self.retx_psns.push(psn);
    }

    /// Forgets the PSNs whose slot the window dropped on overflow.
    pub(super) fn forget_dropped_retx(&mut self) {
        let window = &self.window;
        self.retx_psns.retain(|&psn| window.get(psn).is_some());
    }

    /// Before the window drops every slot below `below`: the retransmitted
    /// ones not known to be spurious go to `pruned`, for a late DUP.
    pub(super) fn prune_retx(&mut self, below: u32) {
        if !self.retx_psns.iter().any(|&psn| lt(psn, below)) {
            return;
        }
        self.forget_dropped_retx();
        // In PSN order, as the window holds them.
        let window = &self.window;
        self.retx_psns
            .sort_unstable_by_key(|&psn| diff(window.base(), psn));
        // A PSN twice: its slot was dropped and made again.
        self.retx_psns.dedup();
        let gone = self.retx_psns.partition_point(|&psn| lt(psn, below));
        for psn in self.retx_psns.drain(..gone) {
            let Some(slot) = window.get(psn) else {
                continue;
            };
            if slot.retx && !slot.spurious {
                self.pruned[self.pruned_at] = PrunedRetx {
                    psn,
                    tx_ts: slot.last.tx_ts,
                    frame: slot.last.frame,
                    lost_ev: slot.lost_ev,
                    valid: true,
                };
                self.pruned_at = (self.pruned_at + 1) % RING;
            }
        }
    }

    pub(super) fn mark_spurious(&mut self, lost_ev: Option<u16>) {
        self.c.spurious += 1;
        if let Some(ev) = lost_ev
            && let Some(p) = self.paths.get_mut(ev)
        {
            p.lost_inferred = p.lost_inferred.saturating_sub(1);
        }
    }
}
