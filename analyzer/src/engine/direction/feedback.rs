//! Feedback about the direction (ACK, NACK, CNP, probe reply, sent by
//! the reverse direction): its RTT sample, SACKs, NACKs and the
//! cumulative ack's advance, which ends a stall and completes messages.

use proto_parse::metaroce::{CnpReason, FbFlags, NackCode};

use super::Direction;
use super::messages::{op_index, op_name};
use super::stalls::OpenStall;
use crate::engine::context::PacketContext;
use crate::engine::report::StallReport;
use crate::engine::verdict::{MsgDone, MsgView, StallMark};
use crate::engine::window::{diff, lt};
use crate::observation::{FbKind, FeedbackObs};

fn nack_index(code: NackCode) -> usize {
    match u8::from(code) {
        c @ 1..=7 => usize::from(c),
        _ => 8,
    }
}

fn cnp_index(reason: CnpReason) -> usize {
    match u8::from(reason) {
        r @ 1..=4 => usize::from(r),
        _ => 0,
    }
}

impl Direction {
    /// Feedback about this direction (sent by the reverse direction).
    /// `hold_ns` is T3 - T2 converted with the feedback sender's ts_unit.
    pub(crate) fn on_feedback(
        &mut self,
        pkt: &mut PacketContext<'_>,
        cum_ack: u32,
        fb: &FeedbackObs,
        hold_ns: u64,
    ) {
        let (ts, cfg) = (pkt.ts, pkt.cfg);
        let fb_seen_before = self.fb_seen;
        self.fb_seen = true;
        // Before the SACKs and the cumulative ack take bytes out.
        self.c.max_bytes_in_flight = self.c.max_bytes_in_flight.max(self.c.bytes_in_flight);
        if fb_seen_before {
            self.check_stall(ts, cfg);
        }
        if fb.flags.contains(FbFlags::ECE) {
            self.c.ece += 1;
            pkt.v.ece = true;
        }
        match fb.kind {
            FbKind::Ack { .. } => self.c.acks += 1,
            FbKind::Nack { code, .. } => {
                self.c.nacks += 1;
                self.nacks_by_code[nack_index(code)] += 1;
                pkt.v.nack = Some(code);
            }
            FbKind::Cnp(reason) => {
                self.c.cnps += 1;
                self.cnps_by_reason[cnp_index(reason)] += 1;
                pkt.v.cnp = Some(reason);
            }
            FbKind::ProbeReply => self.c.probe_replies += 1,
        }

        // RTT: the transmission this feedback echoes (first feedback only).
        let mut sample: Option<(u64, u16)> = None;
        if matches!(fb.kind, FbKind::ProbeReply) {
            if let Some(p) = self
                .probes
                .iter_mut()
                .find(|p| p.frame != 0 && p.seq == fb.echo_psn && p.tx_ts == fb.echo_tx_ts)
            {
                pkt.v.acked_frame = Some(p.frame);
                if !p.sampled && ts >= p.ts {
                    p.sampled = true;
                    sample = Some((ts - p.ts, p.ev));
                }
            }
        } else if let Some(slot) = self.window.get_mut(fb.echo_psn)
            && slot.seen
        {
            let tx = if slot.last.tx_ts == fb.echo_tx_ts {
                Some(&mut slot.last)
            } else if slot.first.tx_ts == fb.echo_tx_ts {
                Some(&mut slot.first)
            } else {
                None
            };
            if let Some(tx) = tx {
                pkt.v.acked_frame = Some(tx.frame);
                if !tx.sampled && ts >= tx.ts {
                    tx.sampled = true;
                    sample = Some((ts - tx.ts, tx.ev));
                }
                // Keep the two copies in sync when they are one transmission.
                if slot.count == 1 {
                    slot.first = slot.last;
                }
                if fb.flags.contains(FbFlags::DUP) && slot.retx {
                    // Echoing the retransmission or the original, the DUP
                    // shows the retransmission spurious.
                    pkt.v.dup_of_frame = Some(slot.last.frame);
                    if !slot.spurious {
                        slot.spurious = true;
                        let lost_ev = slot.lost_ev.take();
                        self.mark_spurious(lost_ev);
                    }
                }
            }
        } else {
            if let Some(late) = self.late_echo(fb.echo_psn, fb.echo_tx_ts) {
                pkt.v.acked_frame = Some(late.frame);
                if !late.sampled && ts >= late.ts {
                    late.sampled = true;
                    sample = Some((ts - late.ts, late.ev));
                }
                while self.late.front().is_some_and(|l| l.sampled) {
                    self.late.pop_front();
                }
            }
            if fb.flags.contains(FbFlags::DUP)
                && let Some(p) = self
                    .pruned
                    .iter_mut()
                    .find(|p| p.valid && p.psn == fb.echo_psn && p.tx_ts == fb.echo_tx_ts)
            {
                p.valid = false;
                let (frame, lost_ev) = (p.frame, p.lost_ev);
                pkt.v.dup_of_frame = Some(frame);
                self.mark_spurious(lost_ev);
            }
        }
        if let Some((rtt, ev)) = sample {
            self.record_rtt(rtt, ev, hold_ns, pkt.v);
        }

        match fb.kind {
            FbKind::Ack {
                sack_base,
                sack_words,
                sack,
            } => {
                for (w, word) in sack.iter().take(usize::from(sack_words)).enumerate() {
                    let mut bits = *word;
                    while bits != 0 {
                        let i = bits.leading_zeros();
                        bits &= !(1u64 << (63 - i));
                        let psn = sack_base.wrapping_add(w as u32 * 64 + i);
                        if let Some(slot) = self.window.get_mut(psn) {
                            slot.sacked = true;
                            let left = u64::from(std::mem::take(&mut slot.flight));
                            self.c.bytes_in_flight = self.c.bytes_in_flight.saturating_sub(left);
                        }
                        if self.highest_sacked.is_none_or(|h| lt(h, psn)) {
                            self.highest_sacked = Some(psn);
                        }
                    }
                }
            }
            FbKind::Nack {
                code: NackCode::Gap | NackCode::Trimmed,
                nack_psn,
                ..
            } => {
                if let Some(slot) = self.window.get_mut(nack_psn) {
                    slot.nacked = true;
                }
                self.stall_event("nack", false);
            }
            FbKind::Nack { .. } => self.stall_event("nack", false),
            _ => {}
        }

        // Cumulative ack.
        let advances = self.cum.is_none_or(|c| lt(c, cum_ack));
        if advances {
            if fb.flags.contains(FbFlags::COAL) {
                self.mark_coalesced(cum_ack);
            }
            pkt.v.cum_ack_advance = Some(match self.cum {
                Some(c) => diff(c, cum_ack) as u32,
                None => 0,
            });
            self.advance(pkt, cum_ack);
        } else {
            pkt.v.stall = self.stall_mark(ts);
        }
    }

    /// A coalesced feedback moves the cumulative ack to `cum_ack`: the
    /// PSNs it newly covers were acknowledged together, named or not.
    pub(super) fn mark_coalesced(&mut self, cum_ack: u32) {
        let from = match self.cum {
            Some(c) if !lt(c, self.window.base()) => c,
            _ => self.window.base(),
        };
        let mut psn = from;
        while lt(psn, cum_ack) {
            match self.window.get_mut(psn) {
                Some(slot) => slot.coalesced = true,
                None => break,
            }
            psn = psn.wrapping_add(1);
        }
    }

    /// The cumulative ack moves to `cum_ack`: the stall it ends, the PSNs
    /// it takes out of flight and out of the window, the messages it
    /// completes.
    pub(super) fn advance(&mut self, pkt: &mut PacketContext<'_>, cum_ack: u32) {
        let (frame, ts, cfg) = (pkt.frame, pkt.ts, pkt.cfg);
        // Stall end: an open stall, or one found only now (nothing was
        // captured on the direction while it lasted).
        let late = self.outstanding() && ts.saturating_sub(self.stall_ref) > cfg.stall_threshold_ns;
        let ended = match self.stall.take() {
            Some(s) => Some(s),
            None if late => Some(OpenStall {
                start: self.stall_ref,
                first_event: None,
                paths: self.paths_in_flight(),
                outstanding: self.outstanding_packets(),
                retransmissions: 0,
            }),
            None => None,
        };
        if let Some(s) = ended {
            let duration = ts.saturating_sub(s.start);
            pkt.v.stall = Some(StallMark {
                start_ns: s.start,
                elapsed_ns: duration,
                ended: true,
            });
            let report = StallReport {
                start_ns: s.start,
                duration_ns: duration,
                open: false,
                end_cause: s.first_event.unwrap_or("ack"),
                end_frame: Some(frame),
                cum_ack: self.cum,
                outstanding_packets: s.outstanding,
                paths_in_flight: s.paths,
                retransmissions: s.retransmissions,
            };
            self.push_stall(report, cfg);
        }

        // The PSNs the ack newly passes leave the bytes in flight (those
        // below the old one already have).
        let from = match self.cum {
            Some(c) if !lt(c, self.window.base()) => c,
            _ => self.window.base(),
        };
        self.leave_flight(from, cum_ack);
        self.cum = Some(cum_ack);
        self.stall_ref = ts;
        if self.highest_sacked.is_some_and(|h| lt(h, cum_ack)) {
            self.highest_sacked = None;
        }
        // Keep a grace of acked PSNs: feedback travels back over paths of
        // different delays, so a late feedback may echo a PSN another one
        // already acked (its RTT sample must still match).
        let grace = (cfg.acked_grace.min(cfg.window / 2)) as u32;
        let below = cum_ack.wrapping_sub(grace);
        self.prune_retx(below);
        self.keep_unechoed(below, ts, cfg);
        self.window.prune_below(below);

        // Messages whose last PSN the cumulative ack now passes.
        while let Some(&(last, id, resp)) = self.pending_last.front() {
            if !lt(last, cum_ack) {
                break;
            }
            self.pending_last.pop_front();
            if let Some(m) = self.msgs.remove(&(id, resp)) {
                let Some(som) = m.som_ts else { continue };
                let latency = ts.saturating_sub(som);
                match op_index(m.op) {
                    Some(i) => self.by_op[i].record(latency),
                    None => self.acked_other_op.record(latency),
                }
                self.c.messages_completed += 1;
                pkt.v.messages_completed = pkt.v.messages_completed.saturating_add(1);
                pkt.v.message_done(
                    pkt.done,
                    MsgDone {
                        msg_id: id,
                        op: op_name(m.op),
                        view: MsgView::Acked,
                        latency_ns: latency,
                    },
                );
            }
        }
    }

    /// The PSNs from `from` up to `to` (not included) leave the bytes in
    /// flight: acked, or dropped from the window.
    #[inline]
    pub(super) fn leave_flight(&mut self, from: u32, to: u32) {
        let left = self
            .window
            .take_sum(from, to, |s| u64::from(std::mem::take(&mut s.flight)));
        self.c.bytes_in_flight = self.c.bytes_in_flight.saturating_sub(left);
    }
}
