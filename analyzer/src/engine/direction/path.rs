//! A direction's paths (evs): per-path counters and path_seq loss and
//! reordering (spec 9), for every non-CTRL packet the direction sends.

use super::{Counters, Direction};
use crate::engine::Config;
use crate::engine::hist::LazyHist;
use crate::engine::verdict::Verdict;
use crate::observation::{MrBody, MrObs};

/// Per-path state of one direction. `repr(C)` keeps the fields every
/// packet touches in the first 32 bytes, so they share a cache line (the
/// default layout put `last_seq` after the histogram, on another line).
#[derive(Debug, Default, Clone)]
#[repr(C)]
pub(super) struct Path {
    /// The highest path_seq in order (the engine's loss and reordering).
    pub(super) last_seq: u16,
    /// The path_seq of the path's latest packet (capture order; 0: none).
    pub(super) prev_seq: u16,
    /// The tx_ts of the packet that carried `last_seq`.
    pub(super) last_tx_ts: u32,
    pub(super) packets: u64,
    pub(super) data_packets: u64,
    pub(super) data_bytes: u64,
    pub(super) ce_marked: u64,
    pub(super) retransmissions: u64,
    pub(super) lost: u64,
    pub(super) lost_inferred: u64,
    pub(super) reordered: u64,
    pub(super) rtt: LazyHist,
}

impl Path {
    /// One non-CTRL packet sent on this path: its counters and the
    /// path_seq loss (also added to the direction's `path_loss`).
    #[inline]
    pub(super) fn on_packet(
        &mut self,
        mr: &MrObs,
        ce: bool,
        start_seen: bool,
        c: &mut Counters,
        v: &mut Verdict,
    ) {
        self.packets += 1;
        if let MrBody::Data(d) = &mr.body {
            self.data_packets += 1;
            self.data_bytes += u64::from(d.actual_len);
        }
        if ce {
            self.ce_marked += 1;
        }
        let seq = mr.path_seq;
        if seq == 0 {
            if self.prev_seq != 0 {
                // A path that numbers its packets: 0 is never the next.
                v.path_seq_expected = Some(next_seq(self.prev_seq));
            }
            return;
        }
        // The common packet first: the next of a path in order (a wrap,
        // 65535 to 1, and a path's first packet take the longer way).
        if seq == self.last_seq.wrapping_add(1) && self.prev_seq == self.last_seq {
            self.last_seq = seq;
            self.prev_seq = seq;
            self.last_tx_ts = mr.tx_ts;
            return;
        }
        if self.last_seq == 0 {
            // With the connection start captured, every path starts at
            // path_seq 1: values below the first one seen were lost.
            if start_seen && seq > 1 && seq < 0x8000 {
                let d = u64::from(seq - 1);
                self.lost += d;
                c.path_loss += d;
                v.path_loss = Some(d as u32);
            }
            self.last_seq = seq;
            self.prev_seq = seq;
            self.last_tx_ts = mr.tx_ts;
            return;
        }
        self.on_step(seq, mr.tx_ts, c, v);
    }

    /// A packet that is not the next of its path after a packet in order:
    /// a gap (loss), a step back (reordering, or the sender's fault) or the
    /// next after such a packet.
    #[cold]
    #[inline(never)]
    fn on_step(&mut self, seq: u16, tx_ts: u32, c: &mut Counters, v: &mut Verdict) {
        let after_prev = next_seq(self.prev_seq);
        if seq != after_prev {
            v.path_seq_expected = Some(after_prev);
        }
        self.prev_seq = seq;
        let expected = next_seq(self.last_seq);
        let mut d = seq.wrapping_sub(expected) as i16;
        if d >= 0 {
            // Crossing the wrap skips 0, which senders never use.
            if d > 0 && seq < expected {
                d -= 1;
            }
            if d > 0 {
                self.lost += d as u64;
                c.path_loss += d as u64;
                v.path_loss = Some(d as u32);
            }
            self.last_seq = seq;
            self.last_tx_ts = tx_ts;
        } else {
            self.reordered += 1;
            // Sent after the packet of the highest value (serial, spec 2):
            // the sender's counter went back, whatever the way did.
            if (tx_ts.wrapping_sub(self.last_tx_ts) as i32) > 0 {
                v.path_seq_back = Some(self.last_seq);
            }
        }
    }
}

/// The path_seq after `seq` (0 is skipped when it wraps).
pub(crate) fn next_seq(seq: u16) -> u16 {
    if seq == u16::MAX { 1 } else { seq + 1 }
}

impl Direction {
    /// Every non-CTRL packet this direction sends: path_seq loss and
    /// per-path counters.
    #[inline]
    pub(crate) fn on_path_packet(&mut self, mr: &MrObs, ce: bool, cfg: &Config, v: &mut Verdict) {
        match self.paths.get_mut(mr.ev) {
            Some(path) => path.on_packet(mr, ce, self.start_seen, &mut self.c, v),
            None => self.on_new_path(mr, ce, cfg, v),
        }
    }

    /// [`Direction::on_path_packet`] for an ev not tracked yet.
    #[cold]
    pub(super) fn on_new_path(&mut self, mr: &MrObs, ce: bool, cfg: &Config, v: &mut Verdict) {
        if self.paths.len() >= cfg.max_paths {
            self.paths_overflow += 1;
            return;
        }
        let path = self.paths.insert_new(mr.ev, Path::default());
        path.on_packet(mr, ce, self.start_seen, &mut self.c, v);
    }
}
