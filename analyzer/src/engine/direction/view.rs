//! What the conformance lint reads of a direction (`engine::lint`): the
//! engine's state after the packet being judged, read-only.

use super::Direction;
use crate::engine::window::lt;

/// The captured transmissions of one PSN, as the window holds them (the
/// first and the latest).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PsnTxs {
    /// Transmissions captured (saturating).
    pub count: u8,
    pub first_frame: u64,
    /// tx_ts and ev of the first and of the latest transmission.
    pub first: (u32, u16),
    pub last: (u32, u16),
}

impl Direction {
    /// The cumulative ack (the highest any feedback carried).
    pub(crate) fn cum_ack(&self) -> Option<u32> {
        self.cum
    }

    /// The highest PSN captured on the direction.
    pub(crate) fn highest_psn(&self) -> Option<u32> {
        self.highest
    }

    /// `psn` is below the cumulative ack or SACKed.
    pub(crate) fn acked(&self, psn: u32) -> bool {
        self.cum.is_some_and(|c| lt(psn, c)) || self.window.get(psn).is_some_and(|s| s.sacked)
    }

    /// Whether a probe captured on the direction carries `seq`, `tx_ts`
    /// and `ev` (what a PROBE_REPLY echoes): `None` when not and some were
    /// dropped from the ring of the latest probes.
    pub(crate) fn probe_sent(&self, seq: u32, tx_ts: u32, ev: u16) -> Option<bool> {
        let sent = self
            .probes
            .iter()
            .any(|p| p.frame != 0 && p.seq == seq && p.tx_ts == tx_ts && p.ev == ev);
        (sent || self.c.probes <= self.probes.len() as u64).then_some(sent)
    }

    /// Whether the window holds a slot for `psn` (captured or not).
    pub(crate) fn tracks(&self, psn: u32) -> bool {
        self.window.get(psn).is_some()
    }

    /// The transmissions of `psn` captured, while the window holds it.
    pub(crate) fn transmissions(&self, psn: u32) -> Option<PsnTxs> {
        let s = self.window.get(psn)?;
        s.seen.then_some(PsnTxs {
            count: s.count,
            first_frame: s.first.frame,
            first: (s.first.tx_ts, s.first.ev),
            last: (s.last.tx_ts, s.last.ev),
        })
    }
}
