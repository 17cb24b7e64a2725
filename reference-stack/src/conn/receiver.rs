//! The receive direction: the peer's PSN space (cumulative ack and the
//! bitmap beyond it), placement of DATA into registered memory, posted
//! receives and READ requests, and the feedback it owes the peer (ACK
//! coalescing, NACKs, CNPs, PROBE_REPLYs).

use std::collections::{BTreeMap, VecDeque};

use proto_parse::metaroce::{
    CnpReason, DataOp, DataRepr, FbFlags, Flags, NackCode, Op, Repr, SackBitmap, psn_diff, psn_lt,
};

use super::config::{Config, Mode, RNR_TIMER};
use super::events::{Completion, CompletionKind, Log, RxMeta};
use super::sender::Sender;
use super::timer::{Timer, TimerTable};
use super::ts;
use crate::Time;
use crate::memory::Memory;
use crate::trace::TraceEvent;

/// The packet a feedback answers (its echo fields).
#[derive(Debug, Clone, Copy)]
pub(super) struct Trigger {
    pub(super) ev: u16,
    pub(super) psn: u32,
    pub(super) tx_ts: u32,
    pub(super) rx_ts: u32,
    pub(super) flags: FbFlags,
}

/// A feedback packet to send.
#[derive(Debug, Clone, Copy)]
pub(super) enum FbOut {
    Ack(Trigger),
    Nack {
        trig: Trigger,
        code: NackCode,
        psn: u32,
        rnr: u8,
    },
    Cnp {
        trig: Trigger,
        reason: CnpReason,
    },
    ProbeReply(Trigger),
}

#[derive(Debug)]
enum RxTarget {
    Write {
        imm: Option<u32>,
    },
    Send {
        wr_id: u64,
        buf: Vec<u8>,
        imm: Option<u32>,
    },
}

/// A WRITE or SEND message being received.
#[derive(Debug)]
struct RxMsg {
    target: RxTarget,
    len: u32,
    got: u32,
    ok: bool,
    first_rx: Time,
}

/// An ACK being coalesced: the latest trigger, the packets it covers, and
/// when it is due.
#[derive(Debug, Clone, Copy)]
struct PendingAck {
    trig: Trigger,
    count: u32,
    deadline: Time,
}

/// What the receive direction works with besides its own state.
pub(super) struct RxCtx<'a> {
    pub(super) cfg: &'a Config,
    pub(super) log: &'a mut Log,
    pub(super) timers: &'a mut TimerTable,
    /// READ requests queue their response, READ responses fill pending READs.
    pub(super) sender: &'a mut Sender,
    pub(super) mem: &'a mut Memory,
}

/// Why a DATA packet was not placed.
enum Refused {
    /// Inconsistent with what arrived before (`invalid_rx`), or a READ
    /// response for no READ: dropped without an answer.
    Invalid,
    /// No posted receive for a new SEND: answered with NACK RNR.
    NoReceive,
}

#[derive(Debug)]
pub(super) struct Receiver {
    /// The peer's initial PSN is known (CONNECT or ACCEPT seen).
    started: bool,
    /// The cumulative ack: next PSN expected.
    pub(super) rcv_nxt: u32,
    /// PSNs received beyond `rcv_nxt` (index 0 = `rcv_nxt`).
    bits: VecDeque<bool>,
    /// Messages being received, by msg_id.
    rx_msgs: BTreeMap<u32, RxMsg>,
    /// Posted receives: work request id and capacity.
    recv_queue: VecDeque<(u64, u32)>,
    ce_count: u16,
    ack_pending: Option<PendingAck>,
    /// Since when a hole sits at the cumulative ack.
    gap_since: Option<Time>,
    /// The last NACK GAP: its PSN and when it left.
    last_gap_nack: Option<(u32, Time)>,
    /// Go-back-N: the expected PSN already NACKed.
    gbn_nacked: Option<u32>,
    /// The ev the peer used last.
    last_rx_ev: Option<u16>,
    pub(super) fb_out: VecDeque<FbOut>,
    /// The cumulative ack of the last ACK sent (for
    /// `Misbehaviour::AckBackwards`).
    pub(super) last_ack_cum: Option<u32>,
}

impl Receiver {
    pub(super) fn new() -> Self {
        Receiver {
            started: false,
            rcv_nxt: 0,
            bits: VecDeque::new(),
            rx_msgs: BTreeMap::new(),
            recv_queue: VecDeque::new(),
            ce_count: 0,
            ack_pending: None,
            gap_since: None,
            last_gap_nack: None,
            gbn_nacked: None,
            last_rx_ev: None,
            fb_out: VecDeque::new(),
            last_ack_cum: None,
        }
    }

    pub(super) fn start(&mut self, peer_init_psn: u32) {
        self.started = true;
        self.rcv_nxt = peer_init_psn;
    }

    pub(super) fn is_started(&self) -> bool {
        self.started
    }

    /// Releases partial messages and the bitmap (the connection closed).
    pub(super) fn clear(&mut self, timers: &mut TimerTable) {
        self.rx_msgs.clear();
        self.bits.clear();
        self.ack_pending = None;
        self.gap_since = None;
        timers.stop(Timer::Ack);
        timers.stop(Timer::NackGap);
    }

    pub(super) fn post_recv(&mut self, wr_id: u64, capacity: u32) {
        self.recv_queue.push_back((wr_id, capacity));
    }

    pub(super) fn ce_count(&self) -> u16 {
        self.ce_count
    }

    /// Receive-buffer occupancy, 0..=255 of `window_packets`.
    pub(super) fn buf_level(&self, cfg: &Config) -> u8 {
        let occ = self.bits.len() as u64;
        let full = u64::from(u8::MAX);
        (occ * full / u64::from(cfg.window_packets.max(1))).min(full) as u8
    }

    /// Bytes the peer may still send beyond the cumulative ack.
    pub(super) fn credit_bytes(&self, cfg: &Config, mtu: u16) -> u32 {
        let free = u64::from(cfg.window_packets).saturating_sub(self.bits.len() as u64);
        (free * u64::from(mtu)).min(u64::from(u32::MAX - 1)) as u32
    }

    pub(super) fn sack_bitmap(&self, mode: Mode) -> SackBitmap {
        let n = self.bits.len().min(SackBitmap::MAX_BITS);
        if mode == Mode::GoBackN || n == 0 {
            return SackBitmap::with_words(0);
        }
        let mut b = SackBitmap::with_words(n.div_ceil(u64::BITS as usize) as u8);
        for (i, &got) in self.bits.iter().take(n).enumerate() {
            if got {
                b.set(i);
            }
        }
        b
    }

    /// Re-arms the ACK and NACK GAP timers from the receiver's state.
    fn arm_timers(&self, cfg: &Config, timers: &mut TimerTable) {
        timers.set_or_stop(Timer::Ack, self.ack_pending.map(|a| a.deadline));
        let gap = self.gap_since.map(|since| match self.last_gap_nack {
            Some((psn, at)) if psn == self.rcv_nxt => at + cfg.nack_gap_delay,
            _ => since + cfg.nack_gap_delay,
        });
        timers.set_or_stop(Timer::NackGap, gap);
    }

    /// Sends the coalesced ACK now (COAL when it covers several packets).
    pub(super) fn flush_pending_ack(&mut self, timers: &mut TimerTable) {
        if let Some(PendingAck {
            mut trig, count, ..
        }) = self.ack_pending.take()
        {
            if count > 1 {
                trig.flags |= FbFlags::COAL;
            }
            self.fb_out.push_back(FbOut::Ack(trig));
            timers.stop(Timer::Ack);
        }
    }

    /// The ACK timer fired: the coalesced ACK leaves as it stands.
    pub(super) fn on_ack_timeout(&mut self, timers: &mut TimerTable) {
        if let Some(PendingAck { trig, .. }) = self.ack_pending.take() {
            self.fb_out.push_back(FbOut::Ack(trig));
        }
        timers.stop(Timer::Ack);
    }

    /// The NACK GAP timer fired: the hole at the cumulative ack is reported
    /// (again, per `nack_gap_delay`), echoing `nack_psn` and no timestamp.
    pub(super) fn on_gap_timeout(
        &mut self,
        now: Time,
        cfg: &Config,
        timers: &mut TimerTable,
        first_ev: u16,
    ) {
        let psn = self.rcv_nxt;
        self.last_gap_nack = Some((psn, now));
        let trig = Trigger {
            // The ev the peer used last: known to work right now.
            ev: self.last_rx_ev.unwrap_or(first_ev),
            psn,
            tx_ts: 0,
            rx_ts: ts(now),
            flags: FbFlags::empty(),
        };
        self.fb_out.push_back(FbOut::Nack {
            trig,
            code: NackCode::Gap,
            psn,
            rnr: 0,
        });
        self.arm_timers(cfg, timers);
    }

    /// A PROBE arrived: answer on its ev.
    pub(super) fn on_probe(&mut self, now: Time, repr: &Repr<'_>) {
        let trig = Trigger {
            ev: repr.ev,
            psn: repr.psn,
            tx_ts: repr.tx_ts,
            rx_ts: ts(now),
            flags: FbFlags::empty(),
        };
        self.fb_out.push_back(FbOut::ProbeReply(trig));
    }

    /// The next feedback to send. A NACK GAP whose PSN arrived after it
    /// was queued (the driver hands the core a batch of datagrams before
    /// it polls transmits) is left out: it would name a PSN below the
    /// cumulative ack it carries, and ask for a repair nobody needs.
    pub(super) fn next_feedback(&mut self, log: &mut Log) -> Option<FbOut> {
        while let Some(f) = self.fb_out.pop_front() {
            if let FbOut::Nack {
                code: NackCode::Gap,
                psn,
                ..
            } = f
                && psn_lt(psn, self.rcv_nxt)
            {
                log.stats.nacks_tx = log.stats.nacks_tx.saturating_sub(1);
                continue;
            }
            return Some(f);
        }
        None
    }

    fn push_nack(&mut self, log: &mut Log, trig: Trigger, code: NackCode, psn: u32, rnr: u8) {
        log.stats.nacks_tx += 1;
        self.fb_out.push_back(FbOut::Nack {
            trig,
            code,
            psn,
            rnr,
        });
    }

    /// A DATA packet of the peer arrived.
    pub(super) fn on_data(
        &mut self,
        now: Time,
        meta: RxMeta,
        repr: &Repr<'_>,
        data: &DataRepr,
        trimmed: bool,
        ctx: &mut RxCtx<'_>,
    ) {
        self.on_data_inner(now, meta, repr, data, trimmed, ctx);
        self.arm_timers(ctx.cfg, ctx.timers);
    }

    fn on_data_inner(
        &mut self,
        now: Time,
        meta: RxMeta,
        repr: &Repr<'_>,
        data: &DataRepr,
        trimmed: bool,
        ctx: &mut RxCtx<'_>,
    ) {
        let psn = repr.psn;
        self.last_rx_ev = Some(repr.ev);
        let mut trig = Trigger {
            ev: repr.ev,
            psn,
            tx_ts: repr.tx_ts,
            rx_ts: ts(now),
            flags: FbFlags::empty(),
        };
        if meta.ce {
            self.on_ce(&mut trig, ctx.log);
        }
        if trimmed {
            ctx.log.stats.trimmed_rx += 1;
            ctx.log.trace(now, TraceEvent::Trimmed { psn, ev: repr.ev });
            trig.flags |= FbFlags::TRIM;
            self.push_nack(ctx.log, trig, NackCode::Trimmed, psn, 0);
            return;
        }
        let Some(off) = self.window_offset(now, psn, &mut trig, ctx) else {
            return;
        };
        // Consistency of the message fields (a hostile packet must not make
        // us index outside a buffer).
        let plen = repr.payload.len() as u64;
        if u64::from(data.msg_offset) + plen > u64::from(data.msg_len)
            || (data.op.code() == DataOp::ReadReq && plen != 0)
        {
            ctx.log.stats.invalid_rx += 1;
            return;
        }
        let nack = match self.place(now, data, repr.payload, ctx) {
            Ok(nack) => nack,
            Err(Refused::Invalid) => {
                ctx.log.stats.invalid_rx += 1;
                return;
            }
            Err(Refused::NoReceive) => {
                self.push_nack(ctx.log, trig, NackCode::Rnr, psn, RNR_TIMER);
                return;
            }
        };
        if off > 0 {
            ctx.log.stats.ooo_rx += 1;
        }
        self.mark_received(now, off);
        ctx.log.stats.data_rx += 1;
        ctx.log.stats.data_rx_bytes += plen;
        ctx.log.trace(
            now,
            TraceEvent::Delivery {
                psn,
                ev: repr.ev,
                msg_id: data.msg_id,
                msg_offset: data.msg_offset,
                len: repr.payload.len() as u16,
                read_resp: matches!(data.op, Op::ReadResp),
            },
        );
        self.account_message(now, data, plen as u32, ctx);
        if let Some(code) = nack {
            self.push_nack(ctx.log, trig, code, psn, 0);
            return;
        }
        // A packet beyond the SACK bitmap's reach is acknowledged at once:
        // only the echo can tell the sender it arrived.
        let immediate = repr.flags.contains(Flags::AR)
            || meta.ce
            || off >= SackBitmap::MAX_BITS
            || ctx.cfg.mode == Mode::GoBackN && off != 0;
        self.acknowledge(now, trig, immediate, ctx.cfg);
    }

    /// The packet arrived CE-marked: a CNP at once, ECE on its feedback.
    fn on_ce(&mut self, trig: &mut Trigger, log: &mut Log) {
        trig.flags |= FbFlags::ECE;
        self.ce_count = self.ce_count.wrapping_add(1);
        log.stats.ce_rx += 1;
        log.stats.cnps_tx += 1;
        self.fb_out.push_back(FbOut::Cnp {
            trig: *trig,
            reason: CnpReason::Ecn,
        });
    }

    /// Where `psn` falls beyond the cumulative ack, if it is new and inside
    /// the window; duplicates are answered with DUP, PSNs beyond the window
    /// with NACK PSN_OUT_OF_WINDOW, and (go-back-N) out-of-sequence PSNs
    /// are discarded with one sequence-error NACK per expected PSN.
    fn window_offset(
        &mut self,
        now: Time,
        psn: u32,
        trig: &mut Trigger,
        ctx: &mut RxCtx<'_>,
    ) -> Option<usize> {
        let off = psn_diff(self.rcv_nxt, psn);
        if off < 0 || self.bits.get(off as usize).copied().unwrap_or(false) {
            ctx.log.stats.dup_rx += 1;
            ctx.log
                .trace(now, TraceEvent::Duplicate { psn, ev: trig.ev });
            trig.flags |= FbFlags::DUP;
            self.flush_pending_ack(ctx.timers);
            self.fb_out.push_back(FbOut::Ack(*trig));
            return None;
        }
        let off = off as usize;
        if off >= ctx.cfg.window_packets as usize {
            ctx.log.stats.out_of_window_rx += 1;
            self.push_nack(ctx.log, *trig, NackCode::PsnOutOfWindow, psn, 0);
            return None;
        }
        if ctx.cfg.mode == Mode::GoBackN && off != 0 {
            ctx.log.stats.gbn_discarded_rx += 1;
            if self.gbn_nacked != Some(self.rcv_nxt) {
                self.gbn_nacked = Some(self.rcv_nxt);
                let expected = self.rcv_nxt;
                self.push_nack(ctx.log, *trig, NackCode::Gap, expected, 0);
            }
            return None;
        }
        Some(off)
    }

    /// Places the payload; the NACK it calls for (REMOTE_ACCESS) if any.
    fn place(
        &mut self,
        now: Time,
        data: &DataRepr,
        payload: &[u8],
        ctx: &mut RxCtx<'_>,
    ) -> Result<Option<NackCode>, Refused> {
        match data.op {
            Op::Write { remote_va, rkey } => {
                Ok(self.place_write(now, data, remote_va, rkey, None, payload, ctx.mem))
            }
            Op::WriteImm {
                remote_va,
                rkey,
                imm_data,
            } => Ok(self.place_write(now, data, remote_va, rkey, Some(imm_data), payload, ctx.mem)),
            Op::Send => self.place_send(now, data, None, payload),
            Op::SendImm { imm_data } => self.place_send(now, data, Some(imm_data), payload),
            Op::ReadReq { remote_va, rkey } => {
                match ctx.mem.read(rkey, remote_va, u64::from(data.msg_len)) {
                    Some(bytes) => {
                        let bytes = bytes.to_vec();
                        ctx.sender
                            .push_read_response(now, data.msg_id, data.msg_len, bytes);
                        Ok(None)
                    }
                    None => Ok(Some(NackCode::RemoteAccess)),
                }
            }
            Op::ReadResp => {
                let placed = ctx.sender.place_read_response(
                    data.msg_id,
                    data.msg_len,
                    data.msg_offset,
                    payload,
                );
                if placed {
                    Ok(None)
                } else {
                    Err(Refused::Invalid)
                }
            }
        }
    }

    /// WRITE / WRITE_IMM: placed at `remote_va + msg_offset` in region `rkey`.
    #[allow(clippy::too_many_arguments)]
    fn place_write(
        &mut self,
        now: Time,
        data: &DataRepr,
        remote_va: u64,
        rkey: u32,
        imm: Option<u32>,
        payload: &[u8],
        mem: &mut Memory,
    ) -> Option<NackCode> {
        let va = remote_va.wrapping_add(u64::from(data.msg_offset));
        let ok = remote_va.checked_add(u64::from(data.msg_offset)).is_some()
            && mem.write(rkey, va, payload);
        let m = self.rx_msgs.entry(data.msg_id).or_insert(RxMsg {
            target: RxTarget::Write { imm },
            len: data.msg_len,
            got: 0,
            ok: true,
            first_rx: now,
        });
        if ok {
            None
        } else {
            m.ok = false;
            Some(NackCode::RemoteAccess)
        }
    }

    /// SEND / SEND_IMM: the first packet of a message to arrive claims the
    /// next posted receive.
    fn place_send(
        &mut self,
        now: Time,
        data: &DataRepr,
        imm: Option<u32>,
        payload: &[u8],
    ) -> Result<Option<NackCode>, Refused> {
        let m = match self.rx_msgs.entry(data.msg_id) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let Some((wr_id, cap)) = self.recv_queue.pop_front() else {
                    return Err(Refused::NoReceive);
                };
                let ok = data.msg_len <= cap;
                e.insert(RxMsg {
                    target: RxTarget::Send {
                        wr_id,
                        buf: if ok {
                            vec![0; data.msg_len as usize]
                        } else {
                            Vec::new()
                        },
                        imm,
                    },
                    len: data.msg_len,
                    got: 0,
                    ok,
                    first_rx: now,
                })
            }
        };
        if m.len != data.msg_len {
            return Err(Refused::Invalid);
        }
        if let RxTarget::Send { buf, .. } = &mut m.target
            && m.ok
        {
            let start = data.msg_offset as usize;
            buf[start..start + payload.len()].copy_from_slice(payload);
        }
        Ok((!m.ok).then_some(NackCode::RemoteAccess))
    }

    /// Marks the PSN at `off` received and advances the cumulative ack.
    fn mark_received(&mut self, now: Time, off: usize) {
        while self.bits.len() <= off {
            self.bits.push_back(false);
        }
        self.bits[off] = true;
        let mut advanced = false;
        while self.bits.front() == Some(&true) {
            self.bits.pop_front();
            self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
            advanced = true;
        }
        if advanced {
            self.gbn_nacked = None;
        }
        if self.bits.is_empty() {
            self.gap_since = None;
        } else if advanced || self.gap_since.is_none() {
            self.gap_since = Some(now);
        }
    }

    /// ACK policy: at once when `immediate` (AR, CE, beyond the bitmap, a
    /// go-back-N gap) or every `ack_every` packets; else coalesced until
    /// `ack_delay` after the first unacknowledged packet.
    fn acknowledge(&mut self, now: Time, trig: Trigger, immediate: bool, cfg: &Config) {
        let count = self.ack_pending.map_or(0, |a| a.count) + 1;
        let deadline = self.ack_pending.map_or(now + cfg.ack_delay, |a| a.deadline);
        if immediate || count >= cfg.ack_every {
            let mut t = trig;
            if count > 1 {
                t.flags |= FbFlags::COAL;
            }
            self.ack_pending = None;
            self.fb_out.push_back(FbOut::Ack(t));
        } else {
            self.ack_pending = Some(PendingAck {
                trig,
                count,
                deadline,
            });
        }
    }

    /// Counts the placed bytes; a message complete on this side is reported.
    fn account_message(&mut self, now: Time, data: &DataRepr, plen: u32, ctx: &mut RxCtx<'_>) {
        match data.op {
            Op::ReadReq { .. } => {}
            Op::ReadResp => ctx
                .sender
                .account_read_response(now, data.msg_id, plen, ctx.log),
            _ => {
                let done = self.rx_msgs.get_mut(&data.msg_id).is_some_and(|m| {
                    m.got += plen;
                    m.got >= m.len
                });
                if done && let Some(m) = self.rx_msgs.remove(&data.msg_id) {
                    complete_receiver(now, data.msg_id, m, ctx.log);
                }
            }
        }
    }
}

fn complete_receiver(now: Time, msg_id: u32, m: RxMsg, log: &mut Log) {
    let (kind, wr_id, imm, bytes) = match m.target {
        RxTarget::Write { imm: Some(imm) } => (CompletionKind::RecvWriteImm, 0, Some(imm), None),
        RxTarget::Write { imm: None } => (CompletionKind::RemoteWrite, 0, None, None),
        RxTarget::Send { wr_id, buf, imm } => (CompletionKind::Recv, wr_id, imm, Some(buf)),
    };
    log.stats.messages_completed_rx += 1;
    let latency = now.saturating_sub(m.first_rx);
    log.trace(
        now,
        TraceEvent::Completion {
            side: "receiver",
            kind: kind.name(),
            msg_id,
            wr_id,
            len: m.len,
            ok: m.ok,
            latency_ns: latency,
        },
    );
    log.events.push_back(crate::Event::Completion(Completion {
        kind,
        wr_id,
        msg_id,
        len: m.len,
        ok: m.ok,
        imm,
        data: if m.ok { bytes } else { None },
        latency,
    }));
}

#[cfg(test)]
mod test {
    use super::*;

    fn gap(psn: u32) -> FbOut {
        FbOut::Nack {
            trig: Trigger {
                ev: 1,
                psn: psn + 1,
                tx_ts: 0,
                rx_ts: 0,
                flags: FbFlags::empty(),
            },
            code: NackCode::Gap,
            psn,
            rnr: 0,
        }
    }

    /// A NACK GAP queued for PSN 100, then PSN 100 arrives (the cumulative
    /// ack moves to 102) before the next transmit: the NACK is not sent,
    /// nor counted; one for a PSN still missing is.
    #[test]
    fn a_gap_nack_filled_before_it_leaves_is_not_sent() {
        let mut log = Log::new(1, false);
        let mut r = Receiver::new();
        r.start(100);
        log.stats.nacks_tx = 2;
        r.fb_out.push_back(gap(100));
        r.fb_out.push_back(gap(103));
        r.rcv_nxt = 102;
        match r.next_feedback(&mut log) {
            Some(FbOut::Nack { psn, .. }) => assert_eq!(psn, 103),
            other => panic!("{other:?}"),
        }
        assert!(r.next_feedback(&mut log).is_none());
        assert_eq!(log.stats.nacks_tx, 1);
    }
}
