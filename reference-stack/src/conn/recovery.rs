//! The send direction's reliability: the packets in flight
//! ([`SentPackets`]), SACK and cumulative-ack processing, NACK reactions,
//! RACK-style loss detection, the retransmission (probe) timer, PLB path
//! retirement and the retransmission queue.

use std::collections::VecDeque;

use proto_parse::metaroce::{Flags, Layout, NackRepr, Packet, psn_lt};

use super::config::{
    Config, MAX_RETIRE_BACKOFF, MAX_TX_ATTEMPT_FIELD, MIN_REORDER_WINDOW_DIVISOR, Misbehaviour,
    Mode, RNR_TIMER_UNIT_NS, RTTVAR_FACTOR,
};
use super::events::Log;
use super::paths::PathSet;
use super::timer::{Timer, TimerTable};
use super::ts;
use crate::Time;
use crate::cc::Signal;
use crate::path::PathStatus;
use crate::trace::{TraceEvent, TxCause};

/// What the recovery code works with besides its own state.
pub(super) struct Ctx<'a> {
    pub(super) cfg: &'a Config,
    pub(super) paths: &'a mut PathSet,
    pub(super) log: &'a mut Log,
    pub(super) timers: &'a mut TimerTable,
}

impl Ctx<'_> {
    pub(super) fn rto(&self, backoff: u32) -> u64 {
        self.paths.rto(self.cfg, backoff)
    }

    /// Changes the status of path `i`, traces it and re-arms the path timer.
    pub(super) fn set_path_status(
        &mut self,
        now: Time,
        i: usize,
        status: PathStatus,
        reason: &'static str,
    ) {
        if let Some(event) = self.paths.set_status(i, status, reason) {
            self.log.trace(now, event);
        }
        self.timers
            .set_or_stop(Timer::Path, self.paths.next_deadline());
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SentState {
    Outstanding,
    Sacked,
    Lost,
}

/// A DATA packet of this side, from its first transmission until the
/// cumulative ack passes it.
#[derive(Debug)]
pub(super) struct Sent {
    /// The packet as last sent (retransmissions rewrite it in place).
    pub(super) bytes: Vec<u8>,
    pub(super) layout: Layout,
    pub(super) ev: u16,
    pub(super) sent_at: Time,
    pub(super) tx_ts: u32,
    /// Retransmissions so far.
    pub(super) attempts: u32,
    pub(super) state: SentState,
    /// Counted in its path's `inflight`.
    pub(super) in_flight: bool,
    /// Its RTT sample was taken (spec 11.9: from the first feedback only).
    pub(super) sampled: bool,
    /// Resend it with AR (a probe: its ACK must echo it).
    pub(super) ack_req: bool,
    pub(super) msg_id: u32,
    pub(super) msg_offset: u32,
    pub(super) payload_len: u16,
    pub(super) op: &'static str,
    pub(super) cause: TxCause,
}

/// The send window: one [`Sent`] per PSN from the cumulative ack
/// (`una`) up to the next PSN to send (`nxt`).
#[derive(Debug)]
pub(super) struct SentPackets {
    una: u32,
    nxt: u32,
    packets: VecDeque<Sent>,
}

impl SentPackets {
    fn new(init_psn: u32) -> Self {
        SentPackets {
            una: init_psn,
            nxt: init_psn,
            packets: VecDeque::new(),
        }
    }

    /// The oldest unacknowledged PSN.
    pub(super) fn una(&self) -> u32 {
        self.una
    }

    /// The next PSN to send.
    pub(super) fn nxt(&self) -> u32 {
        self.nxt
    }

    pub(super) fn get_mut(&mut self, psn: u32) -> Option<&mut Sent> {
        self.packets.get_mut(psn.wrapping_sub(self.una) as usize)
    }

    pub(super) fn in_window(&self, psn: u32) -> bool {
        !psn_lt(psn, self.una) && psn_lt(psn, self.nxt)
    }

    /// Stores the packet sent as PSN `nxt`.
    pub(super) fn push(&mut self, sent: Sent) {
        self.packets.push_back(sent);
        self.nxt = self.nxt.wrapping_add(1);
    }

    /// Advances the cumulative ack by one PSN; its packet.
    fn pop_front(&mut self) -> Option<Sent> {
        self.una = self.una.wrapping_add(1);
        self.packets.pop_front()
    }

    /// PSN and packet, oldest first.
    fn iter(&self) -> impl Iterator<Item = (u32, &Sent)> {
        let una = self.una;
        self.packets
            .iter()
            .enumerate()
            .map(move |(k, s)| (una.wrapping_add(k as u32), s))
    }

    /// PSNs of the outstanding packets sent on `ev`.
    fn outstanding_on(&self, ev: u16) -> Vec<u32> {
        self.iter()
            .filter(|(_, s)| s.state == SentState::Outstanding && s.ev == ev)
            .map(|(psn, _)| psn)
            .collect()
    }
}

/// A retransmission written to the caller's buffer.
pub(super) struct Resent {
    pub(super) psn: u32,
    pub(super) ev: u16,
    pub(super) len: usize,
    pub(super) attempts: u32,
}

#[derive(Debug)]
pub(super) struct Recovery {
    pub(super) sent: SentPackets,
    /// PSNs declared lost, to resend in this order.
    retx: VecDeque<u32>,
    /// PSNs refused with NACK RNR and when they may be resent.
    rnr_wait: Vec<(Time, u32)>,
    /// Latest send time among unambiguously delivered packets, any path
    /// (the connection-wide RACK clock: evidence the receiver is alive and
    /// got what was sent before it).
    rack_sent_at: Time,
    /// How long that packet took, send to feedback (RACK's `rtt`): it
    /// carries the queueing of the moment, which smoothed RTTs lag behind.
    rack_rtt: u64,
    pub(super) rto_backoff: u32,
    /// Packets in state `Outstanding`.
    pub(super) outstanding: usize,
    /// When the cumulative ack last advanced (or data started flowing).
    pub(super) last_progress: Time,
    /// Ground truth: the stall that began then (no progress for
    /// `stall_threshold` with data outstanding).
    pub(super) stall_since: Option<Time>,
    /// `Misbehaviour::RetransmitAcked`: an acknowledged packet (and its
    /// PSN) to send once more.
    acked_resend: Option<(u32, Sent)>,
}

impl Recovery {
    pub(super) fn new(now: Time, init_psn: u32) -> Self {
        Recovery {
            sent: SentPackets::new(init_psn),
            retx: VecDeque::new(),
            rnr_wait: Vec::new(),
            rack_sent_at: 0,
            rack_rtt: 0,
            rto_backoff: 0,
            outstanding: 0,
            last_progress: now,
            stall_since: None,
            acked_resend: None,
        }
    }

    /// Releases the stored packets (the connection closed).
    pub(super) fn clear(&mut self) {
        self.sent.packets.clear();
        self.retx.clear();
        self.rnr_wait.clear();
        self.outstanding = 0;
    }

    /// Something to send or to wait for: the RTO stays armed.
    fn has_work(&self) -> bool {
        self.outstanding > 0 || !self.retx.is_empty()
    }

    /// Per-path time threshold after which an unacknowledged packet, for
    /// which a later-sent packet was delivered, is presumed lost: two
    /// smoothed RTTs (or one plus four deviations, when the RTT jitters)
    /// plus the ACK delay and the path's reordering window.
    fn loss_threshold(cfg: &Config, p: &crate::path::Path) -> u64 {
        if !p.has_rtt {
            return cfg.rto_initial + cfg.ack_delay;
        }
        // Variance-aware: a queue that builds up quickly inflates RTTs
        // beyond twice the smoothed value.
        p.srtt + p.srtt.max(RTTVAR_FACTOR * p.rttvar) + cfg.ack_delay + p.reo_wnd
    }

    /// RACK's time threshold for a packet on path `p` once a packet sent
    /// after it (on any path) was delivered: the round trip that packet
    /// took, or this path's latest one when its queue is longer, plus the
    /// ACK delay and the path's reordering window (at least a quarter of
    /// its minimum RTT; widened when a loss turns out spurious).
    fn time_threshold(&self, cfg: &Config, p: &crate::path::Path) -> u64 {
        if !p.has_rtt {
            return Self::loss_threshold(cfg, p);
        }
        let reo = p.reo_wnd.max(p.min_rtt / MIN_REORDER_WINDOW_DIVISOR);
        self.rack_rtt.max(p.latest_rtt) + cfg.ack_delay + reo
    }

    // ----- delivery -------------------------------------------------------

    /// Moves the cumulative ack up to `cum`; whether it advanced.
    pub(super) fn on_cumulative_ack(&mut self, now: Time, cum: u32, ctx: &mut Ctx<'_>) -> bool {
        let mut progress = false;
        while psn_lt(self.sent.una, cum) {
            let psn = self.sent.una;
            if let Some(s) = self.sent.pop_front() {
                self.on_acked(now, &s, ctx);
                if ctx.cfg.misbehave == Some(Misbehaviour::RetransmitAcked)
                    && psn.is_multiple_of(16)
                {
                    self.acked_resend = Some((psn, s));
                }
            }
            progress = true;
        }
        progress
    }

    fn on_acked(&mut self, now: Time, s: &Sent, ctx: &mut Ctx<'_>) {
        if s.state == SentState::Outstanding {
            self.outstanding -= 1;
        }
        if s.state != SentState::Sacked {
            let rack = s.attempts == 0 || s.sampled;
            let len = s.bytes.len() as u64;
            self.delivered(now, s.ev, s.sent_at, len, s.in_flight, rack, ctx);
        }
    }

    /// A SACK bit or an ACK's echo covers `psn`; whether it was news.
    pub(super) fn sack(&mut self, now: Time, psn: u32, ctx: &mut Ctx<'_>) -> bool {
        let Some(s) = self.sent.get_mut(psn) else {
            return false;
        };
        if s.state == SentState::Sacked {
            return false;
        }
        let was_lost = s.state == SentState::Lost;
        let spurious_loss = was_lost && matches!(s.cause, TxCause::Sack | TxCause::NackGap);
        s.state = SentState::Sacked;
        let (ev, sent_at, len, in_flight) = (s.ev, s.sent_at, s.bytes.len() as u64, s.in_flight);
        // Which transmission arrived is ambiguous after a retransmission:
        // only unambiguous deliveries advance the path's RACK clock.
        let rack = s.attempts == 0 || s.sampled;
        s.in_flight = false;
        if !was_lost {
            self.outstanding -= 1;
        }
        if spurious_loss {
            // Declared lost too early: it was only late.
            ctx.log.stats.spurious_losses += 1;
            ctx.paths.widen_reorder_window(ev, ctx.cfg.reorder_window);
        }
        self.delivered(now, ev, sent_at, len, in_flight, rack, ctx);
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn delivered(
        &mut self,
        now: Time,
        ev: u16,
        sent_at: Time,
        len: u64,
        in_flight: bool,
        rack: bool,
        ctx: &mut Ctx<'_>,
    ) {
        let known = ctx
            .paths
            .on_delivered(now, ev, sent_at, len, in_flight, rack);
        if known && rack && sent_at >= self.rack_sent_at {
            self.rack_sent_at = sent_at;
            self.rack_rtt = now.saturating_sub(sent_at);
        }
    }

    /// The cumulative ack or a SACK made progress: the RTO restarts, a
    /// stall ends.
    pub(super) fn on_progress(&mut self, now: Time, ctx: &mut Ctx<'_>) {
        self.rto_backoff = 0;
        self.last_progress = now;
        if let Some(since) = self.stall_since.take() {
            let snd_una = self.sent.una;
            ctx.log.trace(
                now,
                TraceEvent::StallEnd {
                    snd_una,
                    duration_ns: now.saturating_sub(since),
                },
            );
        }
        let rto = (self.outstanding > 0).then(|| now + ctx.rto(self.rto_backoff));
        ctx.timers.set_or_stop(Timer::Rto, rto);
    }

    // ----- loss -------------------------------------------------------------

    pub(super) fn mark_lost(&mut self, now: Time, psn: u32, cause: TxCause, ctx: &mut Ctx<'_>) {
        if self.mark_lost_no_queue(now, psn, cause, ctx) {
            self.retx.push_back(psn);
        }
    }

    /// Marks an outstanding PSN lost; false when it was not outstanding.
    fn mark_lost_no_queue(
        &mut self,
        now: Time,
        psn: u32,
        cause: TxCause,
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let Some(s) = self.sent.get_mut(psn) else {
            return false;
        };
        if s.state != SentState::Outstanding {
            return false;
        }
        s.state = SentState::Lost;
        s.cause = cause;
        let (ev, sent_at, len, in_flight) = (s.ev, s.sent_at, s.bytes.len() as u64, s.in_flight);
        s.in_flight = false;
        let others_fine = ctx.paths.others_delivered_after(ev, sent_at);
        self.outstanding -= 1;
        ctx.log.trace(now, TraceEvent::Loss { psn, ev, cause });
        if let Some(i) = ctx.paths.index(ev) {
            if in_flight {
                ctx.paths.release(i, len);
            }
            if ctx.paths.on_lost(i, now, cause, others_fine, ctx.cfg) {
                self.retire_path(now, i, "loss", ctx);
            }
        }
        true
    }

    /// Retires path `i` (PLB) unless it is the last active one; what was in
    /// flight on it is resent elsewhere.
    pub(super) fn retire_path(
        &mut self,
        now: Time,
        i: usize,
        reason: &'static str,
        ctx: &mut Ctx<'_>,
    ) {
        if ctx.cfg.mode == Mode::GoBackN || ctx.paths.active_count() <= 1 {
            return;
        }
        ctx.log.stats.path_retirements += 1;
        let path = &mut ctx.paths.paths[i];
        path.stats.retirements += 1;
        let until = now + (ctx.cfg.probe_interval << path.retire_backoff.min(MAX_RETIRE_BACKOFF));
        let ev = path.ev;
        ctx.set_path_status(now, i, PathStatus::Retired { until }, reason);
        for psn in self.sent.outstanding_on(ev) {
            self.mark_lost(now, psn, TxCause::PathRetired, ctx);
        }
    }

    /// Loss detection from delivery evidence (MetaRoCE mode), after every
    /// feedback and when the loss timer fires. An outstanding packet is lost
    /// when
    /// - per-path RACK: a packet sent later on the *same* path (paths are
    ///   FIFO) was delivered more than the path's reordering window after
    ///   it, or
    /// - time threshold: a packet sent later on *any* path was delivered and
    ///   the packet is older than the latest delivered packet's round trip
    ///   or its own path's latest RTT, whichever is longer (a slower path's
    ///   packets wait longer; a queue that just grew delays everything
    ///   behind it), plus the ACK delay and its path's reordering window.
    ///
    /// Without such evidence nothing is declared lost: a silent receiver is
    /// as likely stalled (descheduled, a full socket buffer) as cut off,
    /// and the probe timeout (`on_probe_timeout`) finds out with one packet.
    /// The loss timer is armed for the earliest packet that has evidence but
    /// is not yet old enough.
    pub(super) fn detect_losses(&mut self, now: Time, ctx: &mut Ctx<'_>) {
        let mut lost = Vec::new();
        let mut next: Option<Time> = None;
        for (psn, s) in self.sent.iter() {
            if s.attempts == 0 && s.sent_at >= self.rack_sent_at {
                // First transmissions leave in PSN order and a resend
                // leaves after its first transmission: every later PSN
                // was sent after the latest delivered packet too.
                break;
            }
            if s.state != SentState::Outstanding || s.sent_at >= self.rack_sent_at {
                continue;
            }
            let Some(i) = ctx.paths.index(s.ev) else {
                continue;
            };
            let p = &ctx.paths.paths[i];
            let deadline = s.sent_at + self.time_threshold(ctx.cfg, p);
            if s.sent_at + p.reo_wnd < p.rack_sent_at || deadline <= now {
                lost.push(psn);
            } else {
                next = Some(next.map_or(deadline, |n: Time| n.min(deadline)));
            }
        }
        for psn in lost {
            self.mark_lost(now, psn, TxCause::Sack, ctx);
        }
        ctx.timers.set_or_stop(Timer::LossDetection, next);
    }

    /// The retransmission timer fired.
    pub(super) fn on_rto(&mut self, now: Time, ctx: &mut Ctx<'_>) {
        ctx.log.stats.rto_fires += 1;
        match ctx.cfg.mode {
            Mode::MetaRoce => self.on_probe_timeout(now, ctx),
            Mode::GoBackN => self.on_go_back_n_timeout(now, ctx),
        }
    }

    /// Go-back-N's classic RTO: everything in flight is lost.
    fn on_go_back_n_timeout(&mut self, now: Time, ctx: &mut Ctx<'_>) {
        let lost: Vec<u32> = self
            .sent
            .iter()
            .filter(|(_, s)| s.state == SentState::Outstanding)
            .map(|(psn, _)| psn)
            .collect();
        if !lost.is_empty() {
            self.rto_backoff += 1;
        }
        for psn in lost {
            self.mark_lost(now, psn, TxCause::Rto, ctx);
        }
        self.rearm_rto(now, ctx);
    }

    fn rearm_rto(&mut self, now: Time, ctx: &mut Ctx<'_>) {
        let rto = self.has_work().then(|| now + ctx.rto(self.rto_backoff));
        ctx.timers.set_or_stop(Timer::Rto, rto);
    }

    /// MetaRoCE's retransmission timer (QUIC's PTO, TCP's TLP): no feedback
    /// made progress for an RTO. That is a receiver (or a host) that
    /// stalled as often as a loss: declaring everything in flight lost would
    /// resend a whole window for nothing. One packet is resent instead, with
    /// AR so that its ACK echoes it and dates it unambiguously: the newest
    /// outstanding packet past its loss threshold (its delivery vouches for
    /// everything sent before it, which the time-threshold check then
    /// declares lost if it is still missing), else the oldest one. The timer
    /// backs off until feedback makes progress again.
    fn on_probe_timeout(&mut self, now: Time, ctx: &mut Ctx<'_>) {
        let mut newest_expired: Option<(Time, u32)> = None;
        let mut oldest: Option<u32> = None;
        for (psn, s) in self.sent.iter() {
            if s.state != SentState::Outstanding {
                continue;
            }
            oldest.get_or_insert(psn);
            let thresh = ctx.paths.index(s.ev).map_or(ctx.cfg.rto_min, |i| {
                Self::loss_threshold(ctx.cfg, &ctx.paths.paths[i])
            });
            if s.sent_at + thresh <= now && newest_expired.is_none_or(|(t, _)| s.sent_at >= t) {
                newest_expired = Some((s.sent_at, psn));
            }
        }
        if let Some(psn) = newest_expired.map(|(_, p)| p).or(oldest) {
            self.rto_backoff += 1;
            if let Some(s) = self.sent.get_mut(psn) {
                s.ack_req = true;
            }
            self.mark_lost(now, psn, TxCause::Rto, ctx);
        }
        self.rearm_rto(now, ctx);
    }

    // ----- NACKs --------------------------------------------------------------

    /// NACK GAP in go-back-N mode: rewind to the NACKed PSN, unless that
    /// rewind was already done (the PSN was resent less than an RTT ago).
    pub(super) fn on_go_back_n_nack(&mut self, now: Time, psn: u32, ctx: &mut Ctx<'_>) {
        if !self.sent.in_window(psn) {
            return;
        }
        let recent = ctx.paths.max_srtt().max(ctx.cfg.reorder_window);
        if let Some(s) = self.sent.get_mut(psn)
            && (s.state == SentState::Lost
                || now.saturating_sub(s.sent_at) < recent && s.attempts > 0)
        {
            return;
        }
        let mut p = psn;
        while psn_lt(p, self.sent.nxt) {
            self.mark_lost(now, p, TxCause::GoBackN, ctx);
            p = p.wrapping_add(1);
        }
    }

    /// NACK GAP in MetaRoCE mode. The hole may be a packet that waits in the
    /// same queue the latest delivered one did, or in its own path's (the
    /// receiver already waited `nack_gap_delay`): the PSN is lost only once
    /// it is older than both round trips. A NACK about a resent PSN may
    /// predate the resend's arrival: it waits for the slowest path's srtt
    /// too.
    pub(super) fn on_gap_nack(&mut self, now: Time, psn: u32, ctx: &mut Ctx<'_>) {
        if !self.sent.in_window(psn) {
            return;
        }
        let due = self
            .sent
            .get_mut(psn)
            .map(|s| (s.state, s.ev, s.sent_at, s.attempts));
        let Some((SentState::Outstanding, ev, sent_at, attempts)) = due else {
            return;
        };
        let resend_wait = if attempts > 0 {
            ctx.paths.max_srtt()
        } else {
            0
        };
        let wait = self
            .rack_rtt
            .max(ctx.paths.latest_rtt_or_max_srtt(ev))
            .max(resend_wait);
        if now.saturating_sub(sent_at) >= wait {
            self.mark_lost(now, psn, TxCause::NackGap, ctx);
        }
    }

    /// NACK TRIMMED: the payload of that transmission was cut.
    pub(super) fn on_trimmed_nack(&mut self, now: Time, nack: &NackRepr, ctx: &mut Ctx<'_>) {
        if let Some(i) = ctx.paths.index(nack.feedback.echo_ev) {
            let p = &mut ctx.paths.paths[i];
            p.cc.on_congestion(now, Signal::Trim);
            p.round_congested += 1;
        }
        let psn = nack.nack_psn;
        if self.sent.in_window(psn)
            && let Some(s) = self.sent.get_mut(psn)
            && s.state == SentState::Outstanding
            && s.tx_ts == nack.feedback.echo_tx_ts
        {
            self.mark_lost(now, psn, TxCause::NackTrimmed, ctx);
        }
    }

    /// NACK RNR: resend after the receiver's timer.
    pub(super) fn on_rnr_nack(&mut self, now: Time, nack: &NackRepr, ctx: &mut Ctx<'_>) {
        let psn = nack.nack_psn;
        if self.sent.in_window(psn)
            && let Some(s) = self.sent.get_mut(psn)
            && s.state == SentState::Outstanding
        {
            self.mark_lost_no_queue(now, psn, TxCause::Rnr, ctx);
            let wait = u64::from(nack.rnr_timer.max(1)) * RNR_TIMER_UNIT_NS;
            self.rnr_wait.push((now + wait, psn));
            self.arm_rnr_timer(ctx.timers);
        }
    }

    /// NACK PSN_OUT_OF_WINDOW or NO_RESOURCE: the receiver is full; treated
    /// like congestion on that path.
    pub(super) fn on_receiver_full_nack(&mut self, now: Time, nack: &NackRepr, ctx: &mut Ctx<'_>) {
        if let Some(i) = ctx.paths.index(nack.feedback.echo_ev) {
            ctx.paths.paths[i].cc.on_congestion(now, Signal::Loss);
        }
        let psn = nack.nack_psn;
        if self.sent.in_window(psn)
            && let Some(s) = self.sent.get_mut(psn)
            && s.state == SentState::Outstanding
        {
            self.mark_lost(now, psn, TxCause::NackGap, ctx);
        }
    }

    fn arm_rnr_timer(&self, timers: &mut TimerTable) {
        timers.set_or_stop(Timer::Rnr, self.rnr_wait.iter().map(|&(t, _)| t).min());
    }

    /// The RNR timer fired: the PSNs whose wait is over join the
    /// retransmission queue.
    pub(super) fn on_rnr_timeout(&mut self, now: Time, timers: &mut TimerTable) {
        let mut due = Vec::new();
        self.rnr_wait.retain(|&(t, psn)| {
            if t <= now {
                due.push(psn);
                false
            } else {
                true
            }
        });
        self.retx.extend(due);
        self.arm_rnr_timer(timers);
    }

    // ----- retransmission -----------------------------------------------------

    /// Resends the next PSN of the retransmission queue into `buf`, on
    /// another path than it was lost on when one has room.
    pub(super) fn poll_retransmit(
        &mut self,
        now: Time,
        buf: &mut Vec<u8>,
        ctx: &mut Ctx<'_>,
    ) -> Option<Resent> {
        if let Some(t) = self.resend_acked(now, buf, ctx) {
            return Some(t);
        }
        while let Some(&psn) = self.retx.front() {
            let (len, avoid) = match self.sent.get_mut(psn) {
                Some(s) if s.state == SentState::Lost => (s.bytes.len() as u64, s.ev),
                _ => {
                    self.retx.pop_front();
                    continue;
                }
            };
            let i = ctx.paths.pick(ctx.cfg.spray, len, Some(avoid))?;
            self.retx.pop_front();
            let ev = ctx.paths.paths[i].ev;
            let path_seq = ctx.paths.next_path_seq(ev);
            let s = self.sent.get_mut(psn)?;
            s.attempts += 1;
            s.ev = ev;
            s.sent_at = now;
            s.tx_ts = ts(now);
            s.state = SentState::Outstanding;
            s.in_flight = true;
            s.sampled = false;
            let ack_req = std::mem::take(&mut s.ack_req);
            let tx_attempt = s.attempts.min(MAX_TX_ATTEMPT_FIELD) as u8;
            let mut pkt = Packet::new_unchecked(&mut s.bytes[..]);
            if ack_req {
                let f = pkt.flags();
                pkt.set_flags(f | Flags::AR);
            }
            pkt.set_tx_attempt(tx_attempt);
            pkt.set_ev(ev);
            pkt.set_path_seq(path_seq);
            pkt.set_tx_ts(ts(now));
            pkt.fill_crc(&s.layout);
            let n = s.bytes.len();
            if buf.len() < n {
                buf.resize(n, 0);
            }
            buf[..n].copy_from_slice(&s.bytes);
            let event = TraceEvent::Tx {
                psn,
                ev,
                path_seq,
                tx_attempt,
                msg_id: s.msg_id,
                op: s.op,
                msg_offset: s.msg_offset,
                payload_len: s.payload_len,
                retransmission: true,
                cause: s.cause,
            };
            let attempts = s.attempts;
            self.outstanding += 1;
            ctx.log.stats.retransmissions += 1;
            ctx.log.stats.data_tx += 1;
            ctx.paths.on_sent(i, now, n as u64, true);
            self.arm_rto_if_stopped(now, ctx);
            ctx.log.trace(now, event);
            return Some(Resent {
                psn,
                ev,
                len: n,
                attempts,
            });
        }
        None
    }

    /// `Misbehaviour::RetransmitAcked`: sends the acknowledged packet kept
    /// by `on_cumulative_ack` once more, as a retransmission (tx_attempt
    /// one more, a new path_seq and tx_ts); it is not tracked again.
    fn resend_acked(&mut self, now: Time, buf: &mut Vec<u8>, ctx: &mut Ctx<'_>) -> Option<Resent> {
        let (psn, s) = self.acked_resend.as_mut()?;
        let psn = *psn;
        let i = ctx.paths.pick(ctx.cfg.spray, s.bytes.len() as u64, None)?;
        let ev = ctx.paths.paths[i].ev;
        let path_seq = ctx.paths.next_path_seq(ev);
        let attempts = s.attempts + 1;
        let mut pkt = Packet::new_unchecked(&mut s.bytes[..]);
        pkt.set_tx_attempt(attempts.min(MAX_TX_ATTEMPT_FIELD) as u8);
        pkt.set_ev(ev);
        pkt.set_path_seq(path_seq);
        pkt.set_tx_ts(ts(now));
        pkt.fill_crc(&s.layout);
        let n = s.bytes.len();
        if buf.len() < n {
            buf.resize(n, 0);
        }
        buf[..n].copy_from_slice(&s.bytes);
        self.acked_resend = None;
        // Not counted in the path's inflight: no feedback will take it out.
        Some(Resent {
            psn,
            ev,
            len: n,
            attempts,
        })
    }

    /// A DATA packet left: the RTO runs if it did not already.
    pub(super) fn arm_rto_if_stopped(&self, now: Time, ctx: &mut Ctx<'_>) {
        if ctx.timers.get(Timer::Rto).is_none() {
            ctx.timers.set(Timer::Rto, now + ctx.rto(self.rto_backoff));
        }
    }

    /// A first transmission of PSN `nxt` left.
    pub(super) fn on_new_packet(&mut self, now: Time, sent: Sent, ctx: &mut Ctx<'_>) {
        self.sent.push(sent);
        self.outstanding += 1;
        self.arm_rto_if_stopped(now, ctx);
        if self.outstanding == 1 {
            self.last_progress = self.last_progress.max(now);
        }
    }
}
