//! Feedback of the peer about our send direction (ACK, NACK, CNP,
//! PROBE_REPLY): RTT samples, ECN, spurious retransmissions, the
//! cumulative ack and SACK, NACK reactions, then loss detection and PLB
//! rounds.

use proto_parse::metaroce::{
    AckRepr, CnpRepr, FbFlags, FeedbackRepr, NackCode, NackRepr, Repr, psn_lt,
};

use super::config::Mode;
use super::{Connection, State, ts};
use crate::Time;
use crate::cc::Signal;
use crate::path::PathStatus;
use crate::trace::TraceEvent;

impl Connection {
    pub(super) fn on_cnp(&mut self, now: Time, repr: &Repr<'_>, cnp: &CnpRepr) {
        self.log.stats.cnp_rx += 1;
        if let Some(i) = self.paths.index(cnp.feedback.echo_ev) {
            self.paths.paths[i].cc.on_congestion(now, Signal::Cnp);
        }
        self.on_feedback(now, repr, &cnp.feedback, None, None);
    }

    /// A PROBE_REPLY for the probe in flight brings its path back with a
    /// fresh controller.
    pub(super) fn on_probe_reply(&mut self, now: Time, repr: &Repr<'_>, fb: &FeedbackRepr) {
        if let Some(i) = self.paths.index(fb.echo_ev)
            && let PathStatus::Probing { seq, .. } = self.paths.paths[i].status
            && seq == fb.echo_psn
        {
            self.paths.restore(i, &self.cfg, self.mtu);
            self.ctx()
                .set_path_status(now, i, PathStatus::Active, "probe_reply");
        }
        self.on_feedback(now, repr, fb, None, None);
    }

    /// Any feedback packet; `repr.psn` is its cumulative ack and
    /// `repr.tx_ts` its send time (T3).
    pub(super) fn on_feedback(
        &mut self,
        now: Time,
        repr: &Repr<'_>,
        fb: &FeedbackRepr,
        ack: Option<&AckRepr>,
        nack: Option<&NackRepr>,
    ) {
        if !matches!(self.state, State::Established | State::Closing { .. }) {
            return;
        }
        let cum = repr.psn;
        // A cumulative ack beyond what we sent is hostile or corrupt.
        if psn_lt(self.recovery.sent.nxt(), cum) {
            self.log.stats.invalid_rx += 1;
            return;
        }
        self.sender.set_credit(fb.credit);
        self.on_echo(now, repr.tx_ts, fb);
        // A refused PSN is marked before the cumulative ack that covers it
        // completes its message.
        if let Some(n) = nack
            && n.code == NackCode::RemoteAccess
        {
            self.sender.refuse_message_at(n.nack_psn);
        }
        let mut progress = self.with_recovery(|r, ctx| r.on_cumulative_ack(now, cum, ctx));
        if let Some(ack) = ack {
            progress |= self.on_sack(now, ack, fb);
        }
        if progress {
            self.with_recovery(|r, ctx| r.on_progress(now, ctx));
            self.sender
                .complete_acked(now, self.recovery.sent.una(), &mut self.log);
            self.close_if_done(now);
        }
        if let Some(nack) = nack {
            self.on_nack(now, nack);
        }
        if self.cfg.mode == Mode::MetaRoce {
            self.with_recovery(|r, ctx| r.detect_losses(now, ctx));
        }
        if self.cfg.plb {
            for i in self.paths.end_rounds(now, &self.cfg) {
                self.with_recovery(|r, ctx| r.retire_path(now, i, "congestion", ctx));
            }
        }
    }

    /// What the echo fields say: the RTT sample of the echoed transmission
    /// (spec 11.9: from the first feedback echoing it only), ECE, and DUP
    /// (the echoed PSN had arrived before: a spurious retransmission).
    fn on_echo(&mut self, now: Time, t3: u32, fb: &FeedbackRepr) {
        let mut rtt_sample = None;
        if let Some(s) = self.recovery.sent.get_mut(fb.echo_psn)
            && !s.sampled
            && s.tx_ts == fb.echo_tx_ts
            && s.ev == fb.echo_ev
        {
            s.sampled = true;
            // Fabric RTT: (T4 - T1) - (T3 - T2), the peer's holding time out.
            let total = ts(now).wrapping_sub(fb.echo_tx_ts);
            let hold = t3.wrapping_sub(fb.rx_ts);
            let fabric = if hold < total { total - hold } else { total };
            rtt_sample = Some(u64::from(fabric));
        }
        if let Some(i) = self.paths.index(fb.echo_ev) {
            if let Some(r) = rtt_sample {
                self.paths.paths[i].on_rtt(r);
            }
            if fb.flags.contains(FbFlags::ECE) {
                self.log.stats.ece_rx += 1;
                self.paths.on_ece(i, now);
            }
        }
        let sent = &self.recovery.sent;
        if fb.flags.contains(FbFlags::DUP)
            && (sent.in_window(fb.echo_psn) || psn_lt(fb.echo_psn, sent.una()))
        {
            self.log.stats.spurious_retransmissions += 1;
            let (psn, ev) = (fb.echo_psn, fb.echo_ev);
            self.log.trace(now, TraceEvent::Spurious { psn, ev });
            self.paths.widen_reorder_window(ev, self.cfg.reorder_window);
        }
    }

    /// The SACK bitmap (bit i = `sack_base` + i) and the ACK's own echo;
    /// whether any of it was news.
    fn on_sack(&mut self, now: Time, ack: &AckRepr, fb: &FeedbackRepr) -> bool {
        self.with_recovery(|r, ctx| {
            let mut progress = false;
            // Set bits only, most significant first.
            for (k, &word) in ack.sack.words().iter().enumerate() {
                let mut w = word;
                while w != 0 {
                    let lz = w.leading_zeros();
                    w &= !(1u64 << (u64::BITS - 1 - lz));
                    let psn = ack.sack_base.wrapping_add(k as u32 * u64::BITS + lz);
                    if r.sent.in_window(psn) {
                        progress |= r.sack(now, psn, ctx);
                    }
                }
            }
            if !fb.flags.contains(FbFlags::DUP) && r.sent.in_window(fb.echo_psn) {
                progress |= r.sack(now, fb.echo_psn, ctx);
            }
            progress
        })
    }

    fn on_nack(&mut self, now: Time, nack: &NackRepr) {
        let psn = nack.nack_psn;
        let stats = &mut self.log.stats;
        match nack.code {
            NackCode::Gap => {
                stats.nack_gap_rx += 1;
                match self.cfg.mode {
                    Mode::GoBackN => {
                        self.with_recovery(|r, ctx| r.on_go_back_n_nack(now, psn, ctx))
                    }
                    Mode::MetaRoce => self.with_recovery(|r, ctx| r.on_gap_nack(now, psn, ctx)),
                }
            }
            NackCode::Trimmed => {
                stats.nack_trimmed_rx += 1;
                self.with_recovery(|r, ctx| r.on_trimmed_nack(now, nack, ctx));
            }
            NackCode::Rnr => {
                stats.nack_rnr_rx += 1;
                self.with_recovery(|r, ctx| r.on_rnr_nack(now, nack, ctx));
            }
            NackCode::RemoteAccess => {
                // The message carrying `psn` was marked failed above; a
                // READ_REQ refused fails its READ.
                stats.nack_remote_access_rx += 1;
                self.sender.fail_reads_at(now, psn, &mut self.log);
            }
            NackCode::PsnOutOfWindow | NackCode::NoResource => {
                self.with_recovery(|r, ctx| r.on_receiver_full_nack(now, nack, ctx));
            }
            NackCode::UnknownConn => self.abort(now, "peer does not know the connection".into()),
            NackCode::Unknown(_) => {}
        }
    }
}
