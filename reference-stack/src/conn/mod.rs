//! One MetaRoCE connection: a deterministic state machine (no I/O, no
//! clock), split by concern as quinn-proto's `connection/`:
//!
//! | part | what |
//! |---|---|
//! | [`Connection`] (here) | the API, the handshake and close states, dispatch of inputs and timers |
//! | `sender` | posted messages, packetization under the PSN window and credit, sender completions, pending READs |
//! | `receiver` | the peer's PSN space, placement, posted receives, the feedback owed (ACK coalescing, NACK, CNP) |
//! | `recovery` | packets in flight, SACK / cumulative ack, NACK reactions, RACK loss detection, the RTO (probe) timer, retransmissions, PLB retirement |
//! | `paths` | the per-ev paths: spraying, status, per-path delivery and loss accounting |
//! | `timer` | [`TimerTable`]: every deadline; `poll_timeout` is its minimum |
//! | `feedback`, `transmit` | feedback processing and packet emission, across the parts |
//! | `config`, `events` | parameters and named limits; completions, events, counters, trace |
//!
//! Inputs: [`Connection::handle_packet`] (called by the [`Endpoint`] with a
//! parsed packet), [`Connection::handle_timeout`], and the work requests
//! (`post_write`, `post_send`, `post_read`, `post_recv`, `close`).
//! Outputs: `poll_transmit`, `poll_timeout`, `poll_event`, `poll_trace`.
//!
//! [`Endpoint`]: crate::Endpoint

mod config;
mod events;
mod feedback;
mod paths;
mod receiver;
mod recovery;
mod sender;
mod timer;
mod transmit;

use std::collections::VecDeque;
use std::net::SocketAddr;

use proto_parse::metaroce::{Body, CcAlgo, CtrlOp, CtrlRepr, Features, Op, Repr};

pub use config::{Config, HANDSHAKE_TIMED_OUT, MIN_MTU, Misbehaviour, Mode, Spray};
pub use events::{Completion, CompletionKind, ConnStats, Event, RxMeta};

use config::{
    CLOSE_RESEND_RTOS, DRAIN_PERIOD_RTOS, MAX_CLOSE_ATTEMPTS, MAX_CONNECT_ATTEMPTS,
    MAX_CONNECT_BACKOFF_SHIFT, MAX_RETIRE_BACKOFF,
};
use events::Log;
use paths::PathSet;
use receiver::{Receiver, RxCtx};
use recovery::{Ctx, Recovery};
use sender::Sender;
use timer::{Timer, TimerTable};

use crate::Time;
use crate::memory::Memory;
use crate::path::{PathStats, PathStatus};
use crate::trace::{TraceEvent, TraceRecord};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// `attempts` CONNECTs sent; `Timer::Handshake` resends.
    Connecting {
        attempts: u32,
    },
    Established,
    /// `attempts` CLOSEs sent; `Timer::Close` resends.
    Closing {
        attempts: u32,
    },
    Closed,
}

/// A CTRL packet to send.
#[derive(Debug, Clone, Copy)]
enum CtrlOut {
    Connect,
    Accept,
    Close,
    CloseAck,
    Keepalive,
    Abort,
}

/// The 32-bit timestamp field of a time (ns, wrapping).
fn ts(now: Time) -> u32 {
    now as u32
}

/// One connection.
#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    pub(crate) local_id: u32,
    pub(crate) remote_id: u32,
    pub(crate) remote: SocketAddr,
    state: State,
    /// Negotiated payload MTU (the smaller of both sides).
    mtu: u16,
    /// CRC32C trailers negotiated.
    crc: bool,
    init_psn: u32,
    sender: Sender,
    receiver: Receiver,
    recovery: Recovery,
    paths: PathSet,
    timers: TimerTable,
    log: Log,
    ctrl_out: VecDeque<CtrlOut>,
    /// Paths whose PROBE is due.
    probes_out: VecDeque<usize>,
    last_rx: Time,
    last_tx: Time,
    /// Closed and its drain period over: the endpoint may drop it.
    drained: bool,
}

impl Connection {
    fn new(
        mut cfg: Config,
        now: Time,
        local_id: u32,
        remote: SocketAddr,
        init_psn: u32,
        state: State,
    ) -> Self {
        if cfg.evs.is_empty() {
            cfg.evs.push(1);
        }
        let mtu = cfg.mtu.max(MIN_MTU);
        Connection {
            local_id,
            remote_id: 0,
            remote,
            state,
            mtu,
            crc: cfg.crc,
            init_psn,
            sender: Sender::new(),
            receiver: Receiver::new(),
            recovery: Recovery::new(now, init_psn),
            paths: PathSet::new(&cfg, mtu),
            timers: TimerTable::default(),
            log: Log::new(local_id, cfg.trace),
            ctrl_out: VecDeque::new(),
            probes_out: VecDeque::new(),
            last_rx: now,
            last_tx: now,
            drained: false,
            cfg,
        }
    }

    pub(crate) fn new_client(
        cfg: Config,
        now: Time,
        local_id: u32,
        remote: SocketAddr,
        init_psn: u32,
    ) -> Self {
        let state = State::Connecting { attempts: 0 };
        let mut c = Connection::new(cfg, now, local_id, remote, init_psn, state);
        c.ctrl_out.push_back(CtrlOut::Connect);
        // Due at once: nothing happens until the CONNECT has left.
        c.timers.set(Timer::Handshake, now);
        c.log.trace(
            now,
            TraceEvent::State {
                state: "connecting",
            },
        );
        c
    }

    pub(crate) fn new_server(
        mut cfg: Config,
        now: Time,
        local_id: u32,
        remote: SocketAddr,
        peer_id: u32,
        connect: &CtrlRepr,
        init_psn: u32,
    ) -> Self {
        cfg.mode = if connect.cc_algo == CcAlgo::Ecn {
            Mode::GoBackN
        } else {
            Mode::MetaRoce
        };
        let mut c = Connection::new(cfg, now, local_id, remote, init_psn, State::Established);
        c.remote_id = peer_id;
        c.negotiate(connect);
        c.ctrl_out.push_back(CtrlOut::Accept);
        c.enter_established(now);
        c
    }

    /// Adopts the peer's CONNECT or ACCEPT: the smaller MTU, CRC when both
    /// ask, the peer's initial PSN.
    fn negotiate(&mut self, ctrl: &CtrlRepr) {
        self.mtu = self.mtu.min(ctrl.mtu.max(MIN_MTU));
        self.crc = self.crc && ctrl.features.contains(Features::CRC);
        self.paths.rebuild(&self.cfg, self.mtu);
        self.timers.stop(Timer::Path);
        self.receiver.start(ctrl.init_psn);
    }

    fn enter_established(&mut self, now: Time) {
        self.state = State::Established;
        self.timers.stop(Timer::Handshake);
        self.timers
            .set(Timer::Idle, self.last_rx + self.cfg.idle_timeout);
        self.timers
            .set(Timer::Keepalive, self.last_tx + self.cfg.keepalive);
        self.log.events.push_back(Event::Connected);
        self.log.trace(
            now,
            TraceEvent::State {
                state: "established",
            },
        );
    }

    // ----- public API ---------------------------------------------------

    pub fn local_id(&self) -> u32 {
        self.local_id
    }

    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// The peer's connection id (0 before ACCEPT).
    pub fn remote_id(&self) -> u32 {
        self.remote_id
    }

    /// Next PSN this side will send.
    pub fn next_psn(&self) -> u32 {
        self.recovery.sent.nxt()
    }

    /// The cumulative ack this side would send (next PSN expected).
    pub fn expected_psn(&self) -> u32 {
        self.receiver.rcv_nxt
    }

    pub fn mode(&self) -> Mode {
        self.cfg.mode
    }

    /// The negotiated payload MTU.
    pub fn mtu(&self) -> u16 {
        self.mtu
    }

    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// CRC32C trailers were negotiated: packets without one are refused.
    pub fn crc_negotiated(&self) -> bool {
        self.crc
    }

    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Closed, and its drain period is over: the endpoint drops it.
    pub fn is_drained(&self) -> bool {
        self.drained
    }

    pub fn stats(&self) -> &ConnStats {
        &self.log.stats
    }

    pub fn path_stats(&self) -> Vec<PathStats> {
        self.paths.snapshot()
    }

    /// Work requests not yet completed (queued, in flight, or READs waiting).
    pub fn pending_work(&self) -> usize {
        self.sender.pending_work()
    }

    /// Bytes queued but not yet packetized.
    pub fn queued_bytes(&self) -> u64 {
        self.sender.queued_bytes()
    }

    /// RDMA WRITE (WRITE_IMM with `imm`) of `data` to `remote_va` in the
    /// peer's region `rkey`. Returns the work request id.
    pub fn post_write(
        &mut self,
        now: Time,
        data: Vec<u8>,
        remote_va: u64,
        rkey: u32,
        imm: Option<u32>,
    ) -> u64 {
        let len = data.len() as u32;
        let op = match imm {
            Some(imm_data) => Op::WriteImm {
                remote_va,
                rkey,
                imm_data,
            },
            None => Op::Write { remote_va, rkey },
        };
        self.sender
            .push(now, op, data, len, Some(CompletionKind::Write))
    }

    /// SEND (SEND_IMM with `imm`) into the peer's next posted receive.
    pub fn post_send(&mut self, now: Time, data: Vec<u8>, imm: Option<u32>) -> u64 {
        let len = data.len() as u32;
        let op = match imm {
            Some(imm_data) => Op::SendImm { imm_data },
            None => Op::Send,
        };
        self.sender
            .push(now, op, data, len, Some(CompletionKind::Send))
    }

    /// RDMA READ of `len` bytes at `remote_va` in the peer's region `rkey`;
    /// the data comes back in the completion.
    pub fn post_read(&mut self, now: Time, len: u32, remote_va: u64, rkey: u32) -> u64 {
        self.sender.post_read(now, len, remote_va, rkey)
    }

    /// Posts a receive buffer of `capacity` bytes for one incoming SEND.
    pub fn post_recv(&mut self, capacity: u32) -> u64 {
        let wr_id = self.sender.next_wr_id();
        self.receiver.post_recv(wr_id, capacity);
        wr_id
    }

    /// Graceful close once every work request has completed.
    pub fn close(&mut self) {
        self.sender.close_requested = true;
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.log.events.pop_front()
    }

    pub fn poll_trace(&mut self) -> Option<TraceRecord> {
        self.log.poll_trace()
    }

    // ----- closing ----------------------------------------------------------

    /// Starts the close handshake once the application asked for it and no
    /// work is left.
    fn close_if_done(&mut self, now: Time) {
        if self.sender.close_requested
            && self.state == State::Established
            && self.sender.pending_work() == 0
        {
            self.state = State::Closing { attempts: 0 };
            for t in [Timer::Idle, Timer::Keepalive, Timer::Stall] {
                self.timers.stop(t);
            }
            self.timers.set(Timer::Close, now);
            self.ctrl_out.push_back(CtrlOut::Close);
        }
    }

    fn abort(&mut self, now: Time, reason: String) {
        if self.state == State::Closed {
            return;
        }
        self.ctrl_out.clear();
        self.ctrl_out.push_back(CtrlOut::Abort);
        self.finish(now, Some(reason));
    }

    /// Closes: buffers are released, every timer stops but the drain timer.
    fn finish(&mut self, now: Time, error: Option<String>) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.sender.clear();
        self.recovery.clear();
        self.receiver.clear(&mut self.timers);
        self.timers.stop_all();
        let rto = self.paths.rto(&self.cfg, 0);
        self.timers.set(Timer::Drain, now + DRAIN_PERIOD_RTOS * rto);
        self.log.trace(now, TraceEvent::State { state: "closed" });
        self.log.events.push_back(Event::Closed { error });
    }

    // ----- timers -----------------------------------------------------------

    /// The earliest time `handle_timeout` has work to do.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.timers.next_timeout()
    }

    /// Handles every timer that expired by `now`, in [`Timer::ALL`] order.
    pub fn handle_timeout(&mut self, now: Time) {
        for timer in Timer::ALL {
            if !self.timers.is_expired(timer, now) {
                continue;
            }
            self.on_timer(timer, now);
            if self.state == State::Closed {
                return;
            }
        }
        self.arm_stall_timer();
    }

    fn on_timer(&mut self, timer: Timer, now: Time) {
        match timer {
            Timer::Handshake => self.on_handshake_timeout(now),
            Timer::Close => self.on_close_timeout(now),
            Timer::Ack => self.receiver.on_ack_timeout(&mut self.timers),
            Timer::NackGap => {
                let first_ev = self.paths.first_ev();
                self.receiver
                    .on_gap_timeout(now, &self.cfg, &mut self.timers, first_ev);
            }
            Timer::Rnr => self.recovery.on_rnr_timeout(now, &mut self.timers),
            Timer::Rto => {
                self.with_recovery(|r, ctx| r.on_rto(now, ctx));
            }
            Timer::LossDetection => {
                self.timers.stop(Timer::LossDetection);
                if self.cfg.mode == Mode::MetaRoce {
                    self.with_recovery(|r, ctx| r.detect_losses(now, ctx));
                }
            }
            Timer::Path => self.on_path_timeout(now),
            Timer::Idle => self.abort(now, "idle timeout".into()),
            Timer::Keepalive => {
                self.ctrl_out.push_back(CtrlOut::Keepalive);
                self.note_tx(now);
            }
            Timer::Stall => {
                self.timers.stop(Timer::Stall);
                // The timers handled before may have resolved what was
                // outstanding.
                if self.recovery.outstanding > 0 {
                    self.recovery.stall_since = Some(self.recovery.last_progress);
                    self.log.stats.stalls += 1;
                    let snd_una = self.recovery.sent.una();
                    self.log.trace(now, TraceEvent::StallStart { snd_una });
                }
            }
            Timer::Drain => {
                self.drained = true;
                self.timers.stop(Timer::Drain);
            }
        }
    }

    fn on_handshake_timeout(&mut self, now: Time) {
        let State::Connecting { attempts } = self.state else {
            return;
        };
        // Before the first CONNECT left, there is nothing to resend.
        if attempts == 0 {
            return;
        }
        if attempts >= MAX_CONNECT_ATTEMPTS {
            self.finish(now, Some(HANDSHAKE_TIMED_OUT.into()));
        } else {
            self.ctrl_out.push_back(CtrlOut::Connect);
        }
    }

    fn on_close_timeout(&mut self, now: Time) {
        let State::Closing { attempts } = self.state else {
            return;
        };
        if attempts >= MAX_CLOSE_ATTEMPTS {
            self.finish(now, None);
        } else {
            self.ctrl_out.push_back(CtrlOut::Close);
        }
    }

    /// Retired paths whose time came are probed; probes without a reply
    /// retire their path again, for twice as long.
    fn on_path_timeout(&mut self, now: Time) {
        for i in 0..self.paths.paths.len() {
            match self.paths.paths[i].status {
                PathStatus::Retired { until } if now >= until => {
                    let seq = self.paths.next_probe_seq();
                    let rto = self.paths.rto(&self.cfg, self.recovery.rto_backoff);
                    let deadline = now + rto.max(self.cfg.rto_min);
                    let mut ctx = self.ctx();
                    ctx.set_path_status(now, i, PathStatus::Probing { seq, deadline }, "probe");
                    self.paths.paths[i].stats.probes += 1;
                    self.probes_out.push_back(i);
                }
                PathStatus::Probing { deadline, .. } if now >= deadline => {
                    let p = &mut self.paths.paths[i];
                    p.retire_backoff = (p.retire_backoff + 1).min(MAX_RETIRE_BACKOFF);
                    let until = now + (self.cfg.probe_interval << p.retire_backoff);
                    let mut ctx = self.ctx();
                    ctx.set_path_status(now, i, PathStatus::Retired { until }, "probe_timeout");
                }
                _ => {}
            }
        }
    }

    /// The stall timer depends on whether data is outstanding, which most
    /// inputs change: it is re-armed once at the end of each of them.
    fn arm_stall_timer(&mut self) {
        let r = &self.recovery;
        let armed = self.state == State::Established
            && self.log.tracing()
            && r.outstanding > 0
            && r.stall_since.is_none();
        let deadline = armed.then(|| r.last_progress + self.cfg.stall_threshold);
        self.timers.set_or_stop(Timer::Stall, deadline);
    }

    /// Something was sent: the keepalive restarts.
    fn note_tx(&mut self, now: Time) {
        self.last_tx = now;
        if self.state == State::Established {
            self.timers.set(Timer::Keepalive, now + self.cfg.keepalive);
        }
    }

    fn ctx(&mut self) -> Ctx<'_> {
        Ctx {
            cfg: &self.cfg,
            paths: &mut self.paths,
            log: &mut self.log,
            timers: &mut self.timers,
        }
    }

    /// Runs `f` on the recovery part with the rest it works with.
    fn with_recovery<R>(&mut self, f: impl FnOnce(&mut Recovery, &mut Ctx<'_>) -> R) -> R {
        let mut ctx = Ctx {
            cfg: &self.cfg,
            paths: &mut self.paths,
            log: &mut self.log,
            timers: &mut self.timers,
        };
        f(&mut self.recovery, &mut ctx)
    }

    // ----- receiving --------------------------------------------------------

    /// Processes one parsed packet addressed to this connection.
    pub(crate) fn handle_packet(
        &mut self,
        now: Time,
        meta: RxMeta,
        repr: &Repr<'_>,
        trimmed: bool,
        mem: &mut Memory,
    ) {
        if self.state == State::Closed {
            return;
        }
        self.last_rx = now;
        if self.state == State::Established {
            self.timers.set(Timer::Idle, now + self.cfg.idle_timeout);
        }
        match &repr.body {
            Body::Ctrl(ctrl) => self.on_ctrl(now, repr, ctrl),
            Body::Data(data) => {
                if self.receiver.is_started() {
                    let mut ctx = RxCtx {
                        cfg: &self.cfg,
                        log: &mut self.log,
                        timers: &mut self.timers,
                        sender: &mut self.sender,
                        mem,
                    };
                    self.receiver
                        .on_data(now, meta, repr, data, trimmed, &mut ctx);
                }
            }
            Body::Ack(ack) => {
                self.on_feedback(now, repr, &ack.feedback, Some(ack), None);
            }
            Body::Nack(nack) => {
                self.on_feedback(now, repr, &nack.feedback, None, Some(nack));
            }
            Body::Cnp(cnp) => self.on_cnp(now, repr, cnp),
            Body::Probe => self.receiver.on_probe(now, repr),
            Body::ProbeReply(fb) => self.on_probe_reply(now, repr, fb),
        }
        self.arm_stall_timer();
    }

    fn on_ctrl(&mut self, now: Time, repr: &Repr<'_>, ctrl: &CtrlRepr) {
        match ctrl.op {
            CtrlOp::Accept => {
                if let State::Connecting { .. } = self.state {
                    self.remote_id = repr.src_conn;
                    self.negotiate(ctrl);
                    self.recovery.last_progress = now;
                    self.enter_established(now);
                }
            }
            CtrlOp::Connect => {
                // A repeated CONNECT: our ACCEPT was lost.
                if self.state == State::Established && repr.src_conn == self.remote_id {
                    self.ctrl_out.push_back(CtrlOut::Accept);
                }
            }
            CtrlOp::Close => {
                self.ctrl_out.push_back(CtrlOut::CloseAck);
                self.finish(now, None);
            }
            CtrlOp::CloseAck => {
                if let State::Closing { .. } = self.state {
                    self.finish(now, None);
                }
            }
            CtrlOp::Abort => self.finish(now, Some("peer aborted".into())),
            CtrlOp::Keepalive | CtrlOp::Resync | CtrlOp::Unknown(_) => {}
        }
    }

    /// A CTRL packet left: CONNECT and CLOSE arm their resend timers.
    fn on_ctrl_sent(&mut self, now: Time, c: CtrlOut) {
        match (c, self.state) {
            (CtrlOut::Connect, State::Connecting { attempts }) => {
                let backoff = attempts.min(MAX_CONNECT_BACKOFF_SHIFT);
                self.timers.set(
                    Timer::Handshake,
                    now + (self.cfg.handshake_timeout << backoff),
                );
                self.state = State::Connecting {
                    attempts: attempts + 1,
                };
            }
            (CtrlOut::Close, State::Closing { attempts }) => {
                let rto = self.paths.rto(&self.cfg, self.recovery.rto_backoff);
                self.timers.set(
                    Timer::Close,
                    now + rto.max(self.cfg.rto_min) * CLOSE_RESEND_RTOS,
                );
                self.state = State::Closing {
                    attempts: attempts + 1,
                };
            }
            _ => {}
        }
    }
}
