//! One MetaRoCE connection: a deterministic state machine (no I/O, no
//! clock). Both directions live here: the sender of this side's PSN space
//! and the receiver of the peer's.
//!
//! Inputs: [`Connection::handle_packet`] (called by the [`Endpoint`] with a
//! parsed packet), [`Connection::handle_timeout`], and the work requests
//! (`post_write`, `post_send`, `post_read`, `post_recv`, `close`).
//! Outputs: `poll_transmit`, `poll_timeout`, `poll_event`, `poll_trace`.
//!
//! [`Endpoint`]: crate::Endpoint

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

use proto_parse::metaroce::{
    AckRepr, Body, CcAlgo, CnpReason, CnpRepr, CtrlOp, CtrlRepr, DataRepr, FbFlags, Features,
    FeedbackRepr, Flags, Layout, NackCode, NackRepr, Op, Packet, PacketType, Repr, SackBitmap,
    psn_diff, psn_lt, udp_source_port,
};
use serde::Serialize;

use crate::cc::{CcParams, CongestionController, DelayCc, EcnCc, Signal};
use crate::memory::Memory;
use crate::path::{Path, PathStats, PathStatus};
use crate::trace::{TraceEvent, TraceRecord, TxCause};
use crate::{Ecn, Time, Transmit};

/// Transport mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Multipath spraying, out-of-order placement, SACK/NACK selective repair,
    /// delay-based congestion control.
    MetaRoce,
    /// RoCEv2-like: one path, in-order receiver that drops out-of-order
    /// packets, go-back-N repair, ECN (DCQCN-like) congestion control.
    /// Signalled as `cc_algo = ECN` in CONNECT.
    GoBackN,
}

/// Spraying policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Spray {
    /// Next active path with window room, in turn.
    RoundRobin,
    /// Smooth weighted round-robin, weights from RTT, loss and CE history.
    Weighted,
}

/// Connection parameters. Times in nanoseconds.
#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    /// Entropy values (paths) this side sprays over.
    pub evs: Vec<u16>,
    /// Payload MTU (CTRL `mtu`); the smaller of both sides is used.
    pub mtu: u16,
    pub spray: Spray,
    /// PLB-like repathing: retire paths after repeated loss/congestion.
    pub plb: bool,
    /// Consecutive losses on a path (no delivery in between) that retire it.
    pub plb_losses: u32,
    /// Consecutive congested rounds (>= half the packets CE-marked) that retire it.
    pub plb_rounds: u32,
    /// First retired period before a PROBE (doubles on failure).
    pub probe_interval: u64,
    pub crc: bool,
    /// ACK after this many DATA packets...
    pub ack_every: u32,
    /// ...or this long after the first unacknowledged one.
    pub ack_delay: u64,
    /// Receiver: a hole older than this is reported with NACK GAP.
    pub nack_gap_delay: u64,
    /// Initial per-path RACK reordering window.
    pub reorder_window: u64,
    pub rto_min: u64,
    pub rto_initial: u64,
    pub rto_max: u64,
    /// Retransmissions of one PSN before the connection is aborted.
    pub max_retries: u32,
    /// Packets the receiver buffers beyond its cumulative ack (and the sender
    /// keeps in flight at most).
    pub window_packets: u32,
    pub initial_cwnd_packets: u32,
    pub handshake_timeout: u64,
    pub keepalive: u64,
    pub idle_timeout: u64,
    pub stall_threshold: u64,
    /// Record ground-truth trace events (`poll_trace`).
    pub trace: bool,
    /// Target fabric delay headroom of the delay-based controller.
    pub cc_target_headroom: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::MetaRoce,
            evs: (1..=8).collect(),
            mtu: 4096,
            spray: Spray::Weighted,
            plb: true,
            plb_losses: 4,
            plb_rounds: 3,
            probe_interval: 2_000_000,
            crc: true,
            ack_every: 4,
            ack_delay: 20_000,
            nack_gap_delay: 200_000,
            reorder_window: 20_000,
            rto_min: 1_000_000,
            rto_initial: 2_000_000,
            rto_max: 200_000_000,
            max_retries: 64,
            window_packets: 1024,
            initial_cwnd_packets: 16,
            handshake_timeout: 20_000_000,
            keepalive: 500_000_000,
            idle_timeout: 5_000_000_000,
            stall_threshold: 1_000_000,
            trace: false,
            cc_target_headroom: 25_000,
        }
    }
}

/// The kind of a completed work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionKind {
    /// Sender: a SEND/SEND_IMM was acknowledged.
    Send,
    /// Sender: a WRITE/WRITE_IMM was acknowledged.
    Write,
    /// Requester: READ data arrived.
    Read,
    /// Receiver: a SEND filled a posted receive.
    Recv,
    /// Receiver: a WRITE_IMM was placed (consumes no receive buffer here).
    RecvWriteImm,
    /// Receiver: a plain WRITE was placed (no RDMA completion; reported for
    /// observability).
    RemoteWrite,
}

impl CompletionKind {
    pub fn name(self) -> &'static str {
        match self {
            CompletionKind::Send => "send",
            CompletionKind::Write => "write",
            CompletionKind::Read => "read",
            CompletionKind::Recv => "recv",
            CompletionKind::RecvWriteImm => "recv_write_imm",
            CompletionKind::RemoteWrite => "remote_write",
        }
    }
}

/// A completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub kind: CompletionKind,
    pub wr_id: u64,
    pub msg_id: u32,
    pub len: u32,
    /// false: NACK REMOTE_ACCESS (bad rkey/va) or a receive too small.
    pub ok: bool,
    pub imm: Option<u32>,
    /// READ data or SEND payload.
    pub data: Option<Vec<u8>>,
    /// From posting (sender) or first byte (receiver) to completion.
    pub latency: u64,
}

/// Application events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Connected,
    Completion(Completion),
    /// The connection ended; `error` is set for ABORT, idle timeout or too
    /// many retransmissions.
    Closed {
        error: Option<String>,
    },
}

/// Counters of one connection.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ConnStats {
    pub data_tx: u64,
    pub data_tx_bytes: u64,
    pub retransmissions: u64,
    pub spurious_retransmissions: u64,
    /// Packets declared lost that were acknowledged before their resend left
    /// (the resend is cancelled; the path's reordering window widens).
    pub spurious_losses: u64,
    pub rto_fires: u64,
    pub nack_gap_rx: u64,
    pub nack_trimmed_rx: u64,
    pub nack_rnr_rx: u64,
    pub nack_remote_access_rx: u64,
    pub cnp_rx: u64,
    pub ece_rx: u64,
    pub acks_tx: u64,
    pub nacks_tx: u64,
    pub cnps_tx: u64,
    pub data_rx: u64,
    pub data_rx_bytes: u64,
    pub dup_rx: u64,
    pub trimmed_rx: u64,
    pub ooo_rx: u64,
    pub out_of_window_rx: u64,
    pub gbn_discarded_rx: u64,
    pub invalid_rx: u64,
    pub ce_rx: u64,
    pub messages_completed_tx: u64,
    pub messages_completed_rx: u64,
    pub stalls: u64,
    pub path_retirements: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Connecting { attempts: u32, next: Time },
    Established,
    Closing { attempts: u32, next: Time },
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SentState {
    Outstanding,
    Sacked,
    Lost,
}

#[derive(Debug)]
struct Sent {
    bytes: Vec<u8>,
    layout: Layout,
    ev: u16,
    sent_at: Time,
    tx_ts: u32,
    attempts: u32,
    state: SentState,
    /// Counted in its path's `inflight`.
    in_flight: bool,
    sampled: bool,
    /// Resend it with AR (a probe: its ACK must echo it).
    ack_req: bool,
    msg_id: u32,
    msg_offset: u32,
    payload_len: u16,
    op: &'static str,
    cause: TxCause,
}

#[derive(Debug)]
struct OutMsg {
    wr_id: u64,
    msg_id: u32,
    op: Op,
    data: Vec<u8>,
    len: u32,
    next_off: u32,
    posted: Time,
    /// Sender completion tracked (SEND/WRITE).
    track: Option<CompletionKind>,
    started: bool,
}

#[derive(Debug)]
struct SenderMsg {
    wr_id: u64,
    msg_id: u32,
    kind: CompletionKind,
    len: u32,
    first_psn: u32,
    last_psn: u32,
    done_packetizing: bool,
    ok: bool,
    posted: Time,
}

#[derive(Debug)]
struct PendingRead {
    wr_id: u64,
    len: u32,
    buf: Vec<u8>,
    got: u32,
    req_psn: Option<u32>,
    posted: Time,
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

#[derive(Debug)]
struct RxMsg {
    target: RxTarget,
    len: u32,
    got: u32,
    ok: bool,
    first_rx: Time,
}

#[derive(Debug, Clone, Copy)]
struct Trigger {
    ev: u16,
    psn: u32,
    tx_ts: u32,
    rx_ts: u32,
    flags: FbFlags,
}

#[derive(Debug, Clone, Copy)]
enum FbOut {
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

#[derive(Debug, Clone, Copy)]
enum CtrlOut {
    Connect,
    Accept,
    Close,
    CloseAck,
    Keepalive,
    Abort,
}

/// What arrived with a datagram besides its bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RxMeta {
    /// The IP header carried CE.
    pub ce: bool,
}

/// One connection.
#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    pub(crate) local_id: u32,
    pub(crate) remote_id: u32,
    pub(crate) remote: SocketAddr,
    state: State,
    mode: Mode,
    mtu: u16,
    crc: bool,
    // Send direction.
    snd_una: u32,
    snd_nxt: u32,
    sent: VecDeque<Option<Sent>>,
    retx: VecDeque<u32>,
    rnr_wait: Vec<(Time, u32)>,
    queue: VecDeque<OutMsg>,
    next_msg_id: u32,
    sender_msgs: VecDeque<SenderMsg>,
    reads: BTreeMap<u32, PendingRead>,
    paths: Vec<Path>,
    rr: usize,
    credit: u64,
    rto_at: Option<Time>,
    /// Time-threshold loss timer: the earliest moment an outstanding packet
    /// that a later-sent, delivered packet already vouches for exceeds its
    /// path's loss threshold.
    loss_at: Option<Time>,
    /// Latest send time among unambiguously delivered packets, any path
    /// (the connection-wide RACK clock: evidence the receiver is alive and
    /// got what was sent before it).
    rack_sent_at: Time,
    /// How long that packet took, send to feedback (RACK's `rtt`): it
    /// carries the queueing of the moment, which smoothed RTTs lag behind.
    rack_rtt: u64,
    rto_backoff: u32,
    outstanding: usize,
    last_progress: Time,
    stall_since: Option<Time>,
    // Receive direction.
    rcv_init: bool,
    rcv_nxt: u32,
    rcv_bits: VecDeque<bool>,
    rx_msgs: BTreeMap<(u32, bool), RxMsg>,
    recv_queue: VecDeque<(u64, u32)>,
    ce_count: u16,
    ack_pending: Option<(Trigger, u32, Time)>,
    gap_since: Option<Time>,
    last_gap_nack: Option<(u32, Time)>,
    gbn_nacked: Option<u32>,
    last_rx_ev: Option<u16>,
    // Output.
    ctrl_out: VecDeque<CtrlOut>,
    fb_out: VecDeque<FbOut>,
    probes_out: VecDeque<usize>,
    tx_path_seq: BTreeMap<u16, u16>,
    events: VecDeque<Event>,
    trace: VecDeque<TraceRecord>,
    stats: ConnStats,
    next_wr_id: u64,
    probe_seq: u32,
    last_rx: Time,
    last_tx: Time,
    close_requested: bool,
    abort_reason: Option<String>,
    peer_init_psn: u32,
    init_psn: u32,
}

fn ts(now: Time) -> u32 {
    now as u32
}

fn make_cc(mode: Mode, p: CcParams) -> Box<dyn CongestionController> {
    match mode {
        Mode::MetaRoce => Box::new(DelayCc::new(p)),
        Mode::GoBackN => Box::new(EcnCc::new(p)),
    }
}

impl Connection {
    fn new(
        cfg: Config,
        now: Time,
        local_id: u32,
        remote: SocketAddr,
        init_psn: u32,
        state: State,
    ) -> Self {
        let mut cfg = cfg;
        if cfg.evs.is_empty() {
            cfg.evs.push(1);
        }
        let mode = cfg.mode;
        let mut c = Connection {
            mode,
            mtu: cfg.mtu.max(64),
            crc: cfg.crc,
            local_id,
            remote_id: 0,
            remote,
            state,
            snd_una: init_psn,
            snd_nxt: init_psn,
            sent: VecDeque::new(),
            retx: VecDeque::new(),
            rnr_wait: Vec::new(),
            queue: VecDeque::new(),
            next_msg_id: 0,
            sender_msgs: VecDeque::new(),
            reads: BTreeMap::new(),
            paths: Vec::new(),
            rr: 0,
            credit: u64::MAX,
            rto_at: None,
            loss_at: None,
            rack_sent_at: 0,
            rack_rtt: 0,
            rto_backoff: 0,
            outstanding: 0,
            last_progress: now,
            stall_since: None,
            rcv_init: false,
            rcv_nxt: 0,
            rcv_bits: VecDeque::new(),
            rx_msgs: BTreeMap::new(),
            recv_queue: VecDeque::new(),
            ce_count: 0,
            ack_pending: None,
            gap_since: None,
            last_gap_nack: None,
            gbn_nacked: None,
            last_rx_ev: None,
            ctrl_out: VecDeque::new(),
            fb_out: VecDeque::new(),
            probes_out: VecDeque::new(),
            tx_path_seq: BTreeMap::new(),
            events: VecDeque::new(),
            trace: VecDeque::new(),
            stats: ConnStats::default(),
            next_wr_id: 1,
            probe_seq: 1,
            last_rx: now,
            last_tx: now,
            close_requested: false,
            abort_reason: None,
            peer_init_psn: 0,
            init_psn,
            cfg,
        };
        c.build_paths();
        c
    }

    fn build_paths(&mut self) {
        let mss = u64::from(self.mtu) + 64;
        let mut p = CcParams::new(mss);
        p.initial_window = u64::from(self.cfg.initial_cwnd_packets.max(1)) * mss;
        p.max_window = u64::from(self.cfg.window_packets) * mss;
        p.target_headroom = self.cfg.cc_target_headroom;
        let evs: Vec<u16> = match self.mode {
            Mode::MetaRoce => self.cfg.evs.clone(),
            Mode::GoBackN => vec![self.cfg.evs[0]],
        };
        let mode = self.mode;
        let reo = self.cfg.reorder_window;
        self.paths = evs
            .into_iter()
            .map(|ev| Path::new(ev, make_cc(mode, p), reo))
            .collect();
    }

    pub(crate) fn new_client(
        cfg: Config,
        now: Time,
        local_id: u32,
        remote: SocketAddr,
        init_psn: u32,
    ) -> Self {
        let mut c = Connection::new(
            cfg,
            now,
            local_id,
            remote,
            init_psn,
            State::Connecting {
                attempts: 0,
                next: now,
            },
        );
        c.ctrl_out.push_back(CtrlOut::Connect);
        c.trace_ev(
            now,
            TraceEvent::State {
                state: "connecting",
            },
        );
        c
    }

    pub(crate) fn new_server(
        cfg: Config,
        now: Time,
        local_id: u32,
        remote: SocketAddr,
        peer_id: u32,
        connect: &CtrlRepr,
        init_psn: u32,
    ) -> Self {
        let mut cfg = cfg;
        cfg.mode = if connect.cc_algo == CcAlgo::Ecn {
            Mode::GoBackN
        } else {
            Mode::MetaRoce
        };
        let mut c = Connection::new(cfg, now, local_id, remote, init_psn, State::Established);
        c.remote_id = peer_id;
        c.mtu = c.mtu.min(connect.mtu.max(64));
        c.crc = c.crc && connect.features.contains(Features::CRC);
        c.build_paths();
        c.start_receive(connect.init_psn);
        c.ctrl_out.push_back(CtrlOut::Accept);
        c.events.push_back(Event::Connected);
        c.trace_ev(
            now,
            TraceEvent::State {
                state: "established",
            },
        );
        c
    }

    fn start_receive(&mut self, peer_init: u32) {
        self.rcv_init = true;
        self.rcv_nxt = peer_init;
        self.peer_init_psn = peer_init;
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
        self.snd_nxt
    }

    /// The cumulative ack this side would send (next PSN expected).
    pub fn expected_psn(&self) -> u32 {
        self.rcv_nxt
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

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

    pub fn stats(&self) -> &ConnStats {
        &self.stats
    }

    pub fn path_stats(&self) -> Vec<PathStats> {
        self.paths.iter().map(Path::snapshot).collect()
    }

    /// Work requests not yet completed (queued, in flight, or READs waiting).
    pub fn pending_work(&self) -> usize {
        self.queue.len() + self.sender_msgs.len() + self.reads.len()
    }

    /// Bytes queued but not yet packetized.
    pub fn queued_bytes(&self) -> u64 {
        self.queue
            .iter()
            .map(|m| u64::from(m.len - m.next_off))
            .sum()
    }

    fn wr(&mut self) -> u64 {
        let id = self.next_wr_id;
        self.next_wr_id += 1;
        id
    }

    fn push_msg(
        &mut self,
        now: Time,
        op: Op,
        data: Vec<u8>,
        len: u32,
        track: Option<CompletionKind>,
    ) -> u64 {
        let wr_id = self.wr();
        let msg_id = self.next_msg_id;
        self.next_msg_id = self.next_msg_id.wrapping_add(1);
        self.queue.push_back(OutMsg {
            wr_id,
            msg_id,
            op,
            data,
            len,
            next_off: 0,
            posted: now,
            track,
            started: false,
        });
        wr_id
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
        self.push_msg(now, op, data, len, Some(CompletionKind::Write))
    }

    /// SEND (SEND_IMM with `imm`) into the peer's next posted receive.
    pub fn post_send(&mut self, now: Time, data: Vec<u8>, imm: Option<u32>) -> u64 {
        let len = data.len() as u32;
        let op = match imm {
            Some(imm_data) => Op::SendImm { imm_data },
            None => Op::Send,
        };
        self.push_msg(now, op, data, len, Some(CompletionKind::Send))
    }

    /// RDMA READ of `len` bytes at `remote_va` in the peer's region `rkey`;
    /// the data comes back in the completion.
    pub fn post_read(&mut self, now: Time, len: u32, remote_va: u64, rkey: u32) -> u64 {
        let wr_id = self.push_msg(now, Op::ReadReq { remote_va, rkey }, Vec::new(), len, None);
        let msg_id = self.next_msg_id.wrapping_sub(1);
        self.reads.insert(
            msg_id,
            PendingRead {
                wr_id,
                len,
                buf: vec![0; len as usize],
                got: 0,
                req_psn: None,
                posted: now,
            },
        );
        wr_id
    }

    /// Posts a receive buffer of `capacity` bytes for one incoming SEND.
    pub fn post_recv(&mut self, capacity: u32) -> u64 {
        let wr_id = self.wr();
        self.recv_queue.push_back((wr_id, capacity));
        wr_id
    }

    /// Graceful close once every work request has completed.
    pub fn close(&mut self) {
        self.close_requested = true;
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    pub fn poll_trace(&mut self) -> Option<TraceRecord> {
        self.trace.pop_front()
    }

    fn trace_ev(&mut self, now: Time, event: TraceEvent) {
        if self.cfg.trace {
            self.trace.push_back(TraceRecord {
                t_ns: now,
                conn: self.local_id,
                event,
            });
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

    fn finish(&mut self, now: Time, error: Option<String>) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.abort_reason = error.clone();
        // Release the buffers: stored packets, queued and partial messages.
        self.sent.clear();
        self.retx.clear();
        self.rnr_wait.clear();
        self.queue.clear();
        self.rx_msgs.clear();
        self.rcv_bits.clear();
        self.outstanding = 0;
        self.rto_at = None;
        self.loss_at = None;
        self.ack_pending = None;
        self.gap_since = None;
        self.trace_ev(now, TraceEvent::State { state: "closed" });
        self.events.push_back(Event::Closed { error });
    }

    // ----- timers ---------------------------------------------------------

    fn rto(&self) -> u64 {
        let base = self
            .paths
            .iter()
            .filter(|p| p.has_rtt)
            .map(|p| p.srtt + 4 * p.rttvar)
            .max()
            .map_or(self.cfg.rto_initial, |r| r.max(self.cfg.rto_min));
        (base << self.rto_backoff.min(16)).min(self.cfg.rto_max)
    }

    fn max_srtt(&self) -> u64 {
        self.paths
            .iter()
            .filter(|p| p.has_rtt)
            .map(|p| p.srtt)
            .max()
            .unwrap_or(0)
    }

    /// The earliest time `handle_timeout` has work to do.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut t: Option<Time> = None;
        let mut at = |x: Time| t = Some(t.map_or(x, |t: Time| t.min(x)));
        match self.state {
            State::Closed => return None,
            State::Connecting { next, .. } => at(next),
            State::Closing { next, .. } => at(next),
            State::Established => {}
        }
        if let Some((_, _, deadline)) = self.ack_pending {
            at(deadline);
        }
        if let Some(r) = self.rto_at {
            at(r);
        }
        if let Some(r) = self.loss_at {
            at(r);
        }
        if let Some(since) = self.gap_since {
            at(self.gap_deadline(since));
        }
        for (t, _) in &self.rnr_wait {
            at(*t);
        }
        for p in &self.paths {
            match p.status {
                PathStatus::Retired { until } => at(until),
                PathStatus::Probing { deadline, .. } => at(deadline),
                PathStatus::Active => {}
            }
        }
        if self.state == State::Established {
            at(self.last_tx + self.cfg.keepalive);
            at(self.last_rx + self.cfg.idle_timeout);
            if self.cfg.trace && self.outstanding > 0 && self.stall_since.is_none() {
                at(self.last_progress + self.cfg.stall_threshold);
            }
        }
        t
    }

    fn gap_deadline(&self, since: Time) -> Time {
        match self.last_gap_nack {
            Some((psn, at)) if psn == self.rcv_nxt => at + self.cfg.nack_gap_delay,
            _ => since + self.cfg.nack_gap_delay,
        }
    }

    pub fn handle_timeout(&mut self, now: Time) {
        match self.state {
            State::Closed => return,
            State::Connecting { attempts, next } if now >= next && attempts > 0 => {
                if attempts >= 8 {
                    self.finish(now, Some("handshake timed out".into()));
                    return;
                }
                self.ctrl_out.push_back(CtrlOut::Connect);
            }
            State::Closing { attempts, next } if now >= next => {
                if attempts >= 5 {
                    self.finish(now, None);
                    return;
                }
                self.ctrl_out.push_back(CtrlOut::Close);
            }
            _ => {}
        }
        if let Some((trig, _, deadline)) = self.ack_pending
            && now >= deadline
        {
            self.ack_pending = None;
            self.fb_out.push_back(FbOut::Ack(trig));
        }
        if let Some(since) = self.gap_since
            && now >= self.gap_deadline(since)
        {
            self.send_gap_nack(now);
        }
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
        if let Some(r) = self.rto_at
            && now >= r
        {
            self.on_rto(now);
        }
        if let Some(r) = self.loss_at
            && now >= r
        {
            self.loss_at = None;
            if self.mode == Mode::MetaRoce {
                self.detect_losses(now);
            }
        }
        for i in 0..self.paths.len() {
            match self.paths[i].status {
                PathStatus::Retired { until } if now >= until => {
                    let seq = self.probe_seq;
                    self.probe_seq = self.probe_seq.wrapping_add(1);
                    let deadline = now + self.rto().max(self.cfg.rto_min);
                    self.set_path_status(now, i, PathStatus::Probing { seq, deadline }, "probe");
                    self.paths[i].stats.probes += 1;
                    self.probes_out.push_back(i);
                }
                PathStatus::Probing { deadline, .. } if now >= deadline => {
                    let b = (self.paths[i].retire_backoff + 1).min(5);
                    self.paths[i].retire_backoff = b;
                    let until = now + (self.cfg.probe_interval << b);
                    self.set_path_status(now, i, PathStatus::Retired { until }, "probe_timeout");
                }
                _ => {}
            }
        }
        if self.state == State::Established {
            if now >= self.last_rx + self.cfg.idle_timeout {
                self.abort(now, "idle timeout".into());
                return;
            }
            if now >= self.last_tx + self.cfg.keepalive {
                self.ctrl_out.push_back(CtrlOut::Keepalive);
                self.last_tx = now;
            }
            if self.cfg.trace
                && self.outstanding > 0
                && self.stall_since.is_none()
                && now >= self.last_progress + self.cfg.stall_threshold
            {
                self.stall_since = Some(self.last_progress);
                self.stats.stalls += 1;
                let snd_una = self.snd_una;
                self.trace_ev(now, TraceEvent::StallStart { snd_una });
            }
        }
    }

    fn send_gap_nack(&mut self, now: Time) {
        let psn = self.rcv_nxt;
        self.last_gap_nack = Some((psn, now));
        let trig = Trigger {
            // The ev the peer used last: known to work right now.
            ev: self
                .last_rx_ev
                .unwrap_or_else(|| self.paths.first().map_or(0, |p| p.ev)),
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
    }

    fn on_rto(&mut self, now: Time) {
        self.stats.rto_fires += 1;
        if self.mode == Mode::MetaRoce {
            self.on_probe_timeout(now);
            return;
        }
        let rto = self.rto();
        let mut earliest: Option<Time> = None;
        let mut lost = Vec::new();
        for (i, s) in self.sent.iter().enumerate() {
            if let Some(s) = s
                && s.state == SentState::Outstanding
            {
                if s.sent_at + rto <= now || self.mode == Mode::GoBackN {
                    lost.push(self.snd_una.wrapping_add(i as u32));
                } else {
                    earliest = Some(earliest.map_or(s.sent_at, |e: Time| e.min(s.sent_at)));
                }
            }
        }
        if !lost.is_empty() {
            self.rto_backoff += 1;
        }
        for psn in lost {
            self.mark_lost(now, psn, TxCause::Rto);
        }
        self.rto_at = earliest.map(|e| e + self.rto());
        if self.rto_at.is_none() && (self.outstanding > 0 || !self.retx.is_empty()) {
            self.rto_at = Some(now + self.rto());
        }
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
    fn on_probe_timeout(&mut self, now: Time) {
        let mut newest_expired: Option<(Time, u32)> = None;
        let mut oldest: Option<u32> = None;
        for (k, s) in self.sent.iter().enumerate() {
            let Some(s) = s else { continue };
            if s.state != SentState::Outstanding {
                continue;
            }
            let psn = self.snd_una.wrapping_add(k as u32);
            oldest.get_or_insert(psn);
            let thresh = self
                .path_index(s.ev)
                .map_or(self.cfg.rto_min, |i| self.loss_threshold(&self.paths[i]));
            if s.sent_at + thresh <= now && newest_expired.is_none_or(|(t, _)| s.sent_at >= t) {
                newest_expired = Some((s.sent_at, psn));
            }
        }
        if let Some(psn) = newest_expired.map(|(_, p)| p).or(oldest) {
            self.rto_backoff += 1;
            if let Some(s) = self.sent_mut(psn) {
                s.ack_req = true;
            }
            self.mark_lost(now, psn, TxCause::Rto);
        }
        self.rto_at = (self.outstanding > 0 || !self.retx.is_empty()).then(|| now + self.rto());
    }

    /// Per-path time threshold after which an unacknowledged packet, for
    /// which a later-sent packet was delivered, is presumed lost: two
    /// smoothed RTTs (or one plus four deviations, when the RTT jitters)
    /// plus the ACK delay and the path's reordering window.
    fn loss_threshold(&self, p: &Path) -> u64 {
        if !p.has_rtt {
            return self.cfg.rto_initial + self.cfg.ack_delay;
        }
        // Variance-aware: a queue that builds up quickly inflates RTTs
        // beyond twice the smoothed value.
        p.srtt + p.srtt.max(4 * p.rttvar) + self.cfg.ack_delay + p.reo_wnd
    }

    /// RACK's time threshold for a packet on path `p` once a packet sent
    /// after it (on any path) was delivered: the round trip that packet
    /// took, or this path's latest one when its queue is longer, plus the
    /// ACK delay and the path's reordering window (at least a quarter of
    /// its minimum RTT; widened when a loss turns out spurious).
    fn time_threshold(&self, p: &Path) -> u64 {
        if !p.has_rtt {
            return self.loss_threshold(p);
        }
        let reo = p.reo_wnd.max(p.min_rtt / 4);
        self.rack_rtt.max(p.latest_rtt) + self.cfg.ack_delay + reo
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
        match &repr.body {
            Body::Ctrl(ctrl) => self.on_ctrl(now, repr, ctrl),
            Body::Data(data) => {
                if self.rcv_init {
                    self.on_data(now, meta, repr, data, trimmed, mem);
                }
            }
            Body::Ack(ack) => {
                self.on_feedback(now, repr.tx_ts, repr.psn, &ack.feedback, Some(ack), None)
            }
            Body::Nack(nack) => {
                self.on_feedback(now, repr.tx_ts, repr.psn, &nack.feedback, None, Some(nack))
            }
            Body::Cnp(cnp) => {
                self.stats.cnp_rx += 1;
                if let Some(i) = self.path_index(cnp.feedback.echo_ev) {
                    self.paths[i].cc.on_congestion(now, Signal::Cnp);
                }
                self.on_feedback(now, repr.tx_ts, repr.psn, &cnp.feedback, None, None);
            }
            Body::Probe => {
                let trig = Trigger {
                    ev: repr.ev,
                    psn: repr.psn,
                    tx_ts: repr.tx_ts,
                    rx_ts: ts(now),
                    flags: FbFlags::empty(),
                };
                self.fb_out.push_back(FbOut::ProbeReply(trig));
            }
            Body::ProbeReply(fb) => {
                if let Some(i) = self.path_index(fb.echo_ev)
                    && let PathStatus::Probing { seq, .. } = self.paths[i].status
                    && seq == fb.echo_psn
                {
                    let mss = u64::from(self.mtu) + 64;
                    let mut p = CcParams::new(mss);
                    p.initial_window = u64::from(self.cfg.initial_cwnd_packets.max(1)) * mss;
                    p.max_window = u64::from(self.cfg.window_packets) * mss;
                    p.target_headroom = self.cfg.cc_target_headroom;
                    let path = &mut self.paths[i];
                    path.cc = make_cc(self.mode, p);
                    path.consecutive_losses = 0;
                    path.bad_rounds = 0;
                    path.loss_ewma = 0.0;
                    path.ce_ewma = 0.0;
                    path.retire_backoff = 0;
                    self.set_path_status(now, i, PathStatus::Active, "probe_reply");
                }
                self.on_feedback(now, repr.tx_ts, repr.psn, fb, None, None);
            }
        }
    }

    fn on_ctrl(&mut self, now: Time, repr: &Repr<'_>, ctrl: &CtrlRepr) {
        match ctrl.op {
            CtrlOp::Accept => {
                if let State::Connecting { .. } = self.state {
                    self.remote_id = repr.src_conn;
                    self.mtu = self.mtu.min(ctrl.mtu.max(64));
                    self.crc = self.crc && ctrl.features.contains(Features::CRC);
                    self.build_paths();
                    self.start_receive(ctrl.init_psn);
                    self.state = State::Established;
                    self.last_progress = now;
                    self.events.push_back(Event::Connected);
                    self.trace_ev(
                        now,
                        TraceEvent::State {
                            state: "established",
                        },
                    );
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

    fn path_index(&self, ev: u16) -> Option<usize> {
        self.paths.iter().position(|p| p.ev == ev)
    }

    fn rx_buf_level(&self) -> u8 {
        let occ = self.rcv_bits.len() as u64;
        (occ * 255 / u64::from(self.cfg.window_packets.max(1))).min(255) as u8
    }

    fn credit_bytes(&self) -> u32 {
        let free = u64::from(self.cfg.window_packets).saturating_sub(self.rcv_bits.len() as u64);
        (free * u64::from(self.mtu)).min(u64::from(u32::MAX - 1)) as u32
    }

    fn on_data(
        &mut self,
        now: Time,
        meta: RxMeta,
        repr: &Repr<'_>,
        data: &DataRepr,
        trimmed: bool,
        mem: &mut Memory,
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
            trig.flags |= FbFlags::ECE;
            self.ce_count = self.ce_count.wrapping_add(1);
            self.stats.ce_rx += 1;
            self.stats.cnps_tx += 1;
            self.fb_out.push_back(FbOut::Cnp {
                trig,
                reason: CnpReason::Ecn,
            });
        }
        if trimmed {
            self.stats.trimmed_rx += 1;
            self.trace_ev(now, TraceEvent::Trimmed { psn, ev: repr.ev });
            trig.flags |= FbFlags::TRIM;
            self.push_nack(trig, NackCode::Trimmed, psn, 0);
            return;
        }
        let off = psn_diff(self.rcv_nxt, psn);
        if off < 0 || self.rcv_bits.get(off as usize).copied().unwrap_or(false) {
            self.stats.dup_rx += 1;
            self.trace_ev(now, TraceEvent::Duplicate { psn, ev: repr.ev });
            trig.flags |= FbFlags::DUP;
            self.flush_pending_ack();
            self.fb_out.push_back(FbOut::Ack(trig));
            return;
        }
        let off = off as usize;
        if off >= self.cfg.window_packets as usize {
            self.stats.out_of_window_rx += 1;
            self.push_nack(trig, NackCode::PsnOutOfWindow, psn, 0);
            return;
        }
        if self.mode == Mode::GoBackN && off != 0 {
            // RoCEv2 receiver: out-of-sequence packets are discarded and one
            // sequence-error NACK is sent per expected PSN.
            self.stats.gbn_discarded_rx += 1;
            if self.gbn_nacked != Some(self.rcv_nxt) {
                self.gbn_nacked = Some(self.rcv_nxt);
                let expected = self.rcv_nxt;
                self.push_nack(trig, NackCode::Gap, expected, 0);
            }
            return;
        }
        // Consistency of the message fields (a hostile packet must not make
        // us index outside a buffer).
        let plen = repr.payload.len() as u64;
        if u64::from(data.msg_offset) + plen > u64::from(data.msg_len)
            || (data.op.code() == proto_parse::metaroce::DataOp::ReadReq && plen != 0)
        {
            self.stats.invalid_rx += 1;
            return;
        }
        // Placement.
        let mut nack: Option<NackCode> = None;
        let key_resp = matches!(data.op, Op::ReadResp);
        match data.op {
            Op::Write { remote_va, rkey }
            | Op::WriteImm {
                remote_va, rkey, ..
            } => {
                let imm = match data.op {
                    Op::WriteImm { imm_data, .. } => Some(imm_data),
                    _ => None,
                };
                let va = remote_va.wrapping_add(u64::from(data.msg_offset));
                let ok = remote_va.checked_add(u64::from(data.msg_offset)).is_some()
                    && mem.write(rkey, va, repr.payload);
                let m = self.rx_msgs.entry((data.msg_id, false)).or_insert(RxMsg {
                    target: RxTarget::Write { imm },
                    len: data.msg_len,
                    got: 0,
                    ok: true,
                    first_rx: now,
                });
                if !ok {
                    m.ok = false;
                    nack = Some(NackCode::RemoteAccess);
                }
            }
            Op::Send | Op::SendImm { .. } => {
                let imm = match data.op {
                    Op::SendImm { imm_data } => Some(imm_data),
                    _ => None,
                };
                let key = (data.msg_id, false);
                if !self.rx_msgs.contains_key(&key) {
                    let Some((wr_id, cap)) = self.recv_queue.pop_front() else {
                        self.stats.invalid_rx += 0;
                        self.push_nack(trig, NackCode::Rnr, psn, 5);
                        return;
                    };
                    let ok = data.msg_len <= cap;
                    self.rx_msgs.insert(
                        key,
                        RxMsg {
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
                        },
                    );
                }
                if let Some(m) = self.rx_msgs.get_mut(&key) {
                    if m.len != data.msg_len {
                        self.stats.invalid_rx += 1;
                        return;
                    }
                    if let RxTarget::Send { buf, .. } = &mut m.target
                        && m.ok
                    {
                        let start = data.msg_offset as usize;
                        buf[start..start + repr.payload.len()].copy_from_slice(repr.payload);
                    }
                    if !m.ok {
                        nack = Some(NackCode::RemoteAccess);
                    }
                }
            }
            Op::ReadReq { remote_va, rkey } => {
                let bytes = mem
                    .read(rkey, remote_va, u64::from(data.msg_len))
                    .map(<[u8]>::to_vec);
                match bytes {
                    Some(bytes) => {
                        self.queue.push_back(OutMsg {
                            wr_id: 0,
                            msg_id: data.msg_id,
                            op: Op::ReadResp,
                            len: data.msg_len,
                            data: bytes,
                            next_off: 0,
                            posted: now,
                            track: None,
                            started: false,
                        });
                    }
                    None => nack = Some(NackCode::RemoteAccess),
                }
            }
            Op::ReadResp => {
                let Some(r) = self.reads.get_mut(&data.msg_id) else {
                    self.stats.invalid_rx += 1;
                    return;
                };
                if r.len != data.msg_len {
                    self.stats.invalid_rx += 1;
                    return;
                }
                let start = data.msg_offset as usize;
                r.buf[start..start + repr.payload.len()].copy_from_slice(repr.payload);
            }
        }
        // Accepted: mark received.
        if off > 0 {
            self.stats.ooo_rx += 1;
        }
        while self.rcv_bits.len() <= off {
            self.rcv_bits.push_back(false);
        }
        self.rcv_bits[off] = true;
        let mut advanced = false;
        while self.rcv_bits.front() == Some(&true) {
            self.rcv_bits.pop_front();
            self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
            advanced = true;
        }
        if advanced {
            self.gbn_nacked = None;
        }
        if self.rcv_bits.is_empty() {
            self.gap_since = None;
        } else if advanced || self.gap_since.is_none() {
            self.gap_since = Some(now);
        }
        self.stats.data_rx += 1;
        self.stats.data_rx_bytes += plen;
        self.trace_ev(
            now,
            TraceEvent::Delivery {
                psn,
                ev: repr.ev,
                msg_id: data.msg_id,
                msg_offset: data.msg_offset,
                len: repr.payload.len() as u16,
                read_resp: key_resp,
            },
        );
        self.account_rx_message(now, data, plen as u32);
        if let Some(code) = nack {
            self.push_nack(trig, code, psn, 0);
            return;
        }
        // ACK policy: at once on AR, CE or trimming; else coalesce.
        // A packet beyond the SACK bitmap's reach is acknowledged at once:
        // only the echo can tell the sender it arrived.
        let immediate = repr.flags.contains(Flags::AR)
            || meta.ce
            || off >= SackBitmap::MAX_BITS
            || self.mode == Mode::GoBackN && off != 0;
        let count = self.ack_pending.map_or(0, |(_, c, _)| c) + 1;
        let deadline = self
            .ack_pending
            .map_or(now + self.cfg.ack_delay, |(_, _, d)| d);
        if immediate || count >= self.cfg.ack_every {
            let mut t = trig;
            if count > 1 {
                t.flags |= FbFlags::COAL;
            }
            self.ack_pending = None;
            self.fb_out.push_back(FbOut::Ack(t));
        } else {
            self.ack_pending = Some((trig, count, deadline));
        }
    }

    fn flush_pending_ack(&mut self) {
        if let Some((mut t, c, _)) = self.ack_pending.take() {
            if c > 1 {
                t.flags |= FbFlags::COAL;
            }
            self.fb_out.push_back(FbOut::Ack(t));
        }
    }

    fn push_nack(&mut self, trig: Trigger, code: NackCode, psn: u32, rnr: u8) {
        self.stats.nacks_tx += 1;
        self.fb_out.push_back(FbOut::Nack {
            trig,
            code,
            psn,
            rnr,
        });
    }

    fn account_rx_message(&mut self, now: Time, data: &DataRepr, plen: u32) {
        match data.op {
            Op::ReadReq { .. } => {}
            Op::ReadResp => {
                let done = match self.reads.get_mut(&data.msg_id) {
                    Some(r) => {
                        r.got += plen;
                        r.got >= r.len
                    }
                    None => false,
                };
                if done && let Some(r) = self.reads.remove(&data.msg_id) {
                    self.complete_sender(
                        now,
                        Completion {
                            kind: CompletionKind::Read,
                            wr_id: r.wr_id,
                            msg_id: data.msg_id,
                            len: r.len,
                            ok: true,
                            imm: None,
                            data: Some(r.buf),
                            latency: now.saturating_sub(r.posted),
                        },
                    );
                }
            }
            _ => {
                let key = (data.msg_id, false);
                let done = match self.rx_msgs.get_mut(&key) {
                    Some(m) => {
                        m.got += plen;
                        m.got >= m.len
                    }
                    None => false,
                };
                if done && let Some(m) = self.rx_msgs.remove(&key) {
                    let (kind, wr_id, imm, bytes) = match m.target {
                        RxTarget::Write { imm: Some(imm) } => {
                            (CompletionKind::RecvWriteImm, 0, Some(imm), None)
                        }
                        RxTarget::Write { imm: None } => {
                            (CompletionKind::RemoteWrite, 0, None, None)
                        }
                        RxTarget::Send { wr_id, buf, imm } => {
                            (CompletionKind::Recv, wr_id, imm, Some(buf))
                        }
                    };
                    self.stats.messages_completed_rx += 1;
                    let latency = now.saturating_sub(m.first_rx);
                    self.trace_ev(
                        now,
                        TraceEvent::Completion {
                            side: "receiver",
                            kind: kind.name(),
                            msg_id: data.msg_id,
                            wr_id,
                            len: m.len,
                            ok: m.ok,
                            latency_ns: latency,
                        },
                    );
                    self.events.push_back(Event::Completion(Completion {
                        kind,
                        wr_id,
                        msg_id: data.msg_id,
                        len: m.len,
                        ok: m.ok,
                        imm,
                        data: if m.ok { bytes } else { None },
                        latency,
                    }));
                }
            }
        }
    }

    fn complete_sender(&mut self, now: Time, c: Completion) {
        self.stats.messages_completed_tx += 1;
        self.trace_ev(
            now,
            TraceEvent::Completion {
                side: "sender",
                kind: c.kind.name(),
                msg_id: c.msg_id,
                wr_id: c.wr_id,
                len: c.len,
                ok: c.ok,
                latency_ns: c.latency,
            },
        );
        self.events.push_back(Event::Completion(c));
    }

    // ----- feedback (our send direction) -------------------------------------

    fn sent_mut(&mut self, psn: u32) -> Option<&mut Sent> {
        let i = psn.wrapping_sub(self.snd_una) as usize;
        self.sent.get_mut(i).and_then(Option::as_mut)
    }

    fn in_send_window(&self, psn: u32) -> bool {
        !psn_lt(psn, self.snd_una) && psn_lt(psn, self.snd_nxt)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_feedback(
        &mut self,
        now: Time,
        t3: u32,
        cum: u32,
        fb: &FeedbackRepr,
        ack: Option<&AckRepr>,
        nack: Option<&NackRepr>,
    ) {
        if !matches!(self.state, State::Established | State::Closing { .. }) {
            return;
        }
        // A cumulative ack beyond what we sent is hostile or corrupt.
        if psn_lt(self.snd_nxt, cum) {
            self.stats.invalid_rx += 1;
            return;
        }
        if fb.credit != u32::MAX {
            self.credit = u64::from(fb.credit);
        } else {
            self.credit = u64::MAX;
        }
        // RTT sample from the echoed transmission (spec 11.9: first feedback only).
        let mut rtt_sample = None;
        let t4 = ts(now);
        if let Some(s) = self.sent_mut(fb.echo_psn)
            && !s.sampled
            && s.tx_ts == fb.echo_tx_ts
            && s.ev == fb.echo_ev
        {
            s.sampled = true;
            let total = t4.wrapping_sub(fb.echo_tx_ts);
            let hold = t3.wrapping_sub(fb.rx_ts);
            let fabric = if hold < total { total - hold } else { total };
            rtt_sample = Some(u64::from(fabric));
        }
        if let Some(i) = self.path_index(fb.echo_ev) {
            if let Some(r) = rtt_sample {
                self.paths[i].on_rtt(r);
            }
            if fb.flags.contains(FbFlags::ECE) {
                self.stats.ece_rx += 1;
                self.paths[i].stats.ce_marks += 1;
                self.paths[i].cc.on_congestion(now, Signal::Ece);
                self.paths[i].round_congested += 1;
                self.paths[i].ce_ewma += (1.0 - self.paths[i].ce_ewma) / 16.0;
            }
        }
        if fb.flags.contains(FbFlags::DUP) && self.in_send_window(fb.echo_psn)
            || fb.flags.contains(FbFlags::DUP) && psn_lt(fb.echo_psn, self.snd_una)
        {
            self.stats.spurious_retransmissions += 1;
            let ev = fb.echo_ev;
            self.trace_ev(
                now,
                TraceEvent::Spurious {
                    psn: fb.echo_psn,
                    ev,
                },
            );
            self.widen_reorder_window(ev);
        }
        // A refused PSN is marked before the cumulative ack that covers it
        // completes its message.
        if let Some(n) = nack
            && n.code == NackCode::RemoteAccess
        {
            let psn = n.nack_psn;
            for m in self.sender_msgs.iter_mut() {
                if !psn_lt(psn, m.first_psn) && !psn_lt(m.last_psn, psn) {
                    m.ok = false;
                }
            }
        }
        // Cumulative ack.
        let mut progress = false;
        while psn_lt(self.snd_una, cum) {
            let s = self.sent.pop_front().flatten();
            self.snd_una = self.snd_una.wrapping_add(1);
            if let Some(s) = s {
                self.on_delivered(now, s, rtt_sample.filter(|_| false));
            }
            progress = true;
        }
        // SACK.
        if let Some(ack) = ack {
            // Set bits only, most significant first (bit i = sack_base + i).
            for (k, &word) in ack.sack.words().iter().enumerate() {
                let mut w = word;
                while w != 0 {
                    let lz = w.leading_zeros();
                    w &= !(1u64 << (63 - lz));
                    let psn = ack.sack_base.wrapping_add(k as u32 * 64 + lz);
                    if self.in_send_window(psn) {
                        progress |= self.sack(now, psn);
                    }
                }
            }
            if !fb.flags.contains(FbFlags::DUP) && self.in_send_window(fb.echo_psn) {
                progress |= self.sack(now, fb.echo_psn);
            }
        }
        if progress {
            self.rto_backoff = 0;
            self.last_progress = now;
            if let Some(since) = self.stall_since.take() {
                let snd_una = self.snd_una;
                self.trace_ev(
                    now,
                    TraceEvent::StallEnd {
                        snd_una,
                        duration_ns: now.saturating_sub(since),
                    },
                );
            }
            self.rto_at = if self.outstanding > 0 {
                Some(now + self.rto())
            } else {
                None
            };
            self.complete_acked(now);
        }
        if let Some(nack) = nack {
            self.on_nack(now, nack);
        }
        if self.mode == Mode::MetaRoce {
            self.detect_losses(now);
        }
        self.check_rounds(now);
    }

    /// A loss on path `ev` was spurious: double its reordering window (up
    /// to its smoothed RTT). It is not shrunk back: resetting it after a
    /// number of losses (RFC 8985's reo_wnd_persist) cost 10% of the
    /// simulated long-run goodput at 1% loss.
    fn widen_reorder_window(&mut self, ev: u16) {
        let min = self.cfg.reorder_window;
        if let Some(i) = self.path_index(ev) {
            let p = &mut self.paths[i];
            p.reo_wnd = (p.reo_wnd * 2).min(p.srtt.max(min)).max(min);
        }
    }

    fn sack(&mut self, now: Time, psn: u32) -> bool {
        let Some(s) = self.sent_mut(psn) else {
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
            self.stats.spurious_losses += 1;
            self.widen_reorder_window(ev);
        }
        self.delivered_on_path(now, ev, sent_at, len, in_flight, rack);
        true
    }

    fn on_delivered(&mut self, now: Time, s: Sent, _rtt: Option<u64>) {
        if s.state == SentState::Outstanding {
            self.outstanding -= 1;
        }
        if s.state != SentState::Sacked {
            let rack = s.attempts == 0 || s.sampled;
            self.delivered_on_path(
                now,
                s.ev,
                s.sent_at,
                s.bytes.len() as u64,
                s.in_flight,
                rack,
            );
        }
    }

    fn delivered_on_path(
        &mut self,
        now: Time,
        ev: u16,
        sent_at: Time,
        len: u64,
        in_flight: bool,
        rack: bool,
    ) {
        if let Some(i) = self.path_index(ev) {
            let p = &mut self.paths[i];
            if in_flight {
                p.inflight = p.inflight.saturating_sub(len);
            }
            if rack {
                p.rack_sent_at = p.rack_sent_at.max(sent_at);
                if sent_at >= self.rack_sent_at {
                    self.rack_sent_at = sent_at;
                    self.rack_rtt = now.saturating_sub(sent_at);
                }
            }
            p.consecutive_losses = 0;
            p.round_delivered += 1;
            p.stats.delivered += 1;
            p.loss_ewma -= p.loss_ewma / 64.0;
            p.ce_ewma -= p.ce_ewma / 64.0;
            p.cc.on_ack(now, len, p.has_rtt.then_some(p.srtt));
        }
    }

    fn complete_acked(&mut self, now: Time) {
        while let Some(m) = self.sender_msgs.front() {
            if !m.done_packetizing || !psn_lt(m.last_psn, self.snd_una) {
                break;
            }
            let Some(m) = self.sender_msgs.pop_front() else {
                break;
            };
            self.complete_sender(
                now,
                Completion {
                    kind: m.kind,
                    wr_id: m.wr_id,
                    msg_id: m.msg_id,
                    len: m.len,
                    ok: m.ok,
                    imm: None,
                    data: None,
                    latency: now.saturating_sub(m.posted),
                },
            );
        }
        if self.close_requested && self.state == State::Established && self.pending_work() == 0 {
            self.state = State::Closing {
                attempts: 0,
                next: now,
            };
            self.ctrl_out.push_back(CtrlOut::Close);
        }
    }

    fn on_nack(&mut self, now: Time, nack: &NackRepr) {
        let psn = nack.nack_psn;
        match nack.code {
            NackCode::Gap => {
                self.stats.nack_gap_rx += 1;
                if self.mode == Mode::GoBackN {
                    if !self.in_send_window(psn) {
                        return;
                    }
                    // Ignore a NACK for a rewind already done (the PSN was
                    // resent less than an RTT ago).
                    let recent = self.max_srtt().max(self.cfg.reorder_window);
                    if let Some(s) = self.sent_mut(psn)
                        && (s.state == SentState::Lost
                            || now.saturating_sub(s.sent_at) < recent && s.attempts > 0)
                    {
                        return;
                    }
                    let mut p = psn;
                    while psn_lt(p, self.snd_nxt) {
                        self.mark_lost(now, p, TxCause::GoBackN);
                        p = p.wrapping_add(1);
                    }
                } else if self.in_send_window(psn) {
                    // The hole may be a packet that waits in the same queue
                    // the latest delivered one did, or in its own path's
                    // (the receiver already waited `nack_gap_delay`).
                    let rack_rtt = self.rack_rtt;
                    let path_rtt = |c: &Self, ev: u16| {
                        c.path_index(ev).map_or(c.max_srtt(), |i| {
                            let p = &c.paths[i];
                            if p.has_rtt {
                                p.latest_rtt
                            } else {
                                c.max_srtt()
                            }
                        })
                    };
                    // A NACK about a resent PSN may predate the resend's
                    // arrival: it waits for the slowest path's srtt too.
                    let due = self
                        .sent_mut(psn)
                        .map(|s| (s.state, s.ev, s.sent_at, s.attempts));
                    if let Some((SentState::Outstanding, ev, sent_at, attempts)) = due
                        && now.saturating_sub(sent_at)
                            >= rack_rtt.max(path_rtt(self, ev)).max(if attempts > 0 {
                                self.max_srtt()
                            } else {
                                0
                            })
                    {
                        self.mark_lost(now, psn, TxCause::NackGap);
                    }
                }
            }
            NackCode::Trimmed => {
                self.stats.nack_trimmed_rx += 1;
                if let Some(i) = self.path_index(nack.feedback.echo_ev) {
                    self.paths[i].cc.on_congestion(now, Signal::Trim);
                    self.paths[i].round_congested += 1;
                }
                if self.in_send_window(psn)
                    && let Some(s) = self.sent_mut(psn)
                    && s.state == SentState::Outstanding
                    && s.tx_ts == nack.feedback.echo_tx_ts
                {
                    self.mark_lost(now, psn, TxCause::NackTrimmed);
                }
            }
            NackCode::Rnr => {
                self.stats.nack_rnr_rx += 1;
                if self.in_send_window(psn)
                    && let Some(s) = self.sent_mut(psn)
                    && s.state == SentState::Outstanding
                {
                    // Back off: retransmit after the receiver's timer.
                    self.mark_lost_no_queue(now, psn, TxCause::Rnr);
                    let wait = u64::from(nack.rnr_timer.max(1)) * 10_000;
                    self.rnr_wait.push((now + wait, psn));
                }
            }
            NackCode::RemoteAccess => {
                self.stats.nack_remote_access_rx += 1;
                for m in self.sender_msgs.iter_mut() {
                    if !psn_lt(psn, m.first_psn) && !psn_lt(m.last_psn, psn) {
                        m.ok = false;
                    }
                }
                let failed: Vec<u32> = self
                    .reads
                    .iter()
                    .filter(|(_, r)| r.req_psn == Some(psn))
                    .map(|(k, _)| *k)
                    .collect();
                for k in failed {
                    if let Some(r) = self.reads.remove(&k) {
                        self.complete_sender(
                            now,
                            Completion {
                                kind: CompletionKind::Read,
                                wr_id: r.wr_id,
                                msg_id: k,
                                len: r.len,
                                ok: false,
                                imm: None,
                                data: None,
                                latency: now.saturating_sub(r.posted),
                            },
                        );
                    }
                }
            }
            NackCode::PsnOutOfWindow | NackCode::NoResource => {
                // The receiver is full: treat like congestion on that path.
                if let Some(i) = self.path_index(nack.feedback.echo_ev) {
                    self.paths[i].cc.on_congestion(now, Signal::Loss);
                }
                if self.in_send_window(psn)
                    && let Some(s) = self.sent_mut(psn)
                    && s.state == SentState::Outstanding
                {
                    self.mark_lost(now, psn, TxCause::NackGap);
                }
            }
            NackCode::UnknownConn => self.abort(now, "peer does not know the connection".into()),
            NackCode::Unknown(_) => {}
        }
    }

    fn mark_lost(&mut self, now: Time, psn: u32, cause: TxCause) {
        if self.mark_lost_no_queue(now, psn, cause) {
            self.retx.push_back(psn);
        }
    }

    /// Marks an outstanding PSN lost; false when it was not outstanding.
    fn mark_lost_no_queue(&mut self, now: Time, psn: u32, cause: TxCause) -> bool {
        let Some(s) = self.sent_mut(psn) else {
            return false;
        };
        if s.state != SentState::Outstanding {
            return false;
        }
        s.state = SentState::Lost;
        s.cause = cause;
        let lost_sent_at = s.sent_at;
        let (ev, len, in_flight) = (s.ev, s.bytes.len() as u64, s.in_flight);
        s.in_flight = false;
        // Evidence that the fabric works elsewhere: another active path
        // delivered a packet sent after this one.
        let others_fine = self
            .paths
            .iter()
            .any(|q| q.ev != ev && q.is_active() && q.rack_sent_at > lost_sent_at);
        self.outstanding -= 1;
        self.trace_ev(now, TraceEvent::Loss { psn, ev, cause });
        if let Some(i) = self.path_index(ev) {
            let retire = {
                let p = &mut self.paths[i];
                if in_flight {
                    p.inflight = p.inflight.saturating_sub(len);
                }
                p.stats.lost += 1;
                p.consecutive_losses += 1;
                p.round_congested += 1;
                p.loss_ewma += (1.0 - p.loss_ewma) / 16.0;
                if cause != TxCause::Rnr && cause != TxCause::PathRetired {
                    p.cc.on_congestion(now, Signal::Loss);
                }
                self.cfg.plb
                    && p.is_active()
                    && p.consecutive_losses >= self.cfg.plb_losses
                    && others_fine
                    && cause != TxCause::Rnr
            };
            if retire {
                self.retire_path(now, i, "loss");
            }
        }
        true
    }

    fn retire_path(&mut self, now: Time, i: usize, reason: &'static str) {
        if self.mode == Mode::GoBackN || self.paths.iter().filter(|p| p.is_active()).count() <= 1 {
            return;
        }
        self.stats.path_retirements += 1;
        self.paths[i].stats.retirements += 1;
        let b = self.paths[i].retire_backoff;
        let until = now + (self.cfg.probe_interval << b.min(5));
        self.set_path_status(now, i, PathStatus::Retired { until }, reason);
        // Everything in flight on it is resent elsewhere.
        let ev = self.paths[i].ev;
        let lost: Vec<u32> = self
            .sent
            .iter()
            .enumerate()
            .filter_map(|(k, s)| match s {
                Some(s) if s.state == SentState::Outstanding && s.ev == ev => {
                    Some(self.snd_una.wrapping_add(k as u32))
                }
                _ => None,
            })
            .collect();
        for psn in lost {
            self.mark_lost(now, psn, TxCause::PathRetired);
        }
    }

    fn set_path_status(&mut self, now: Time, i: usize, status: PathStatus, reason: &'static str) {
        let from = self.paths[i].status.name();
        self.paths[i].status = status;
        let to = status.name();
        let ev = self.paths[i].ev;
        if from != to {
            self.trace_ev(
                now,
                TraceEvent::PathChange {
                    ev,
                    from,
                    to,
                    reason,
                },
            );
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
    fn detect_losses(&mut self, now: Time) {
        let mut lost = Vec::new();
        let mut next: Option<Time> = None;
        for (k, s) in self.sent.iter().enumerate() {
            let Some(s) = s else { continue };
            if s.attempts == 0 && s.sent_at >= self.rack_sent_at {
                // First transmissions leave in PSN order and a resend
                // leaves after its first transmission: every later PSN
                // was sent after the latest delivered packet too.
                break;
            }
            if s.state != SentState::Outstanding || s.sent_at >= self.rack_sent_at {
                continue;
            }
            let Some(i) = self.path_index(s.ev) else {
                continue;
            };
            let p = &self.paths[i];
            let deadline = s.sent_at + self.time_threshold(p);
            if s.sent_at + p.reo_wnd < p.rack_sent_at || deadline <= now {
                lost.push(self.snd_una.wrapping_add(k as u32));
            } else {
                next = Some(next.map_or(deadline, |n: Time| n.min(deadline)));
            }
        }
        for psn in lost {
            self.mark_lost(now, psn, TxCause::Sack);
        }
        self.loss_at = next;
    }

    /// PLB-like rounds: a path whose packets were mostly congested (CE,
    /// trimmed or lost) for `plb_rounds` consecutive RTTs is retired.
    fn check_rounds(&mut self, now: Time) {
        if !self.cfg.plb {
            return;
        }
        for i in 0..self.paths.len() {
            let p = &mut self.paths[i];
            let rtt = if p.has_rtt {
                p.srtt.max(1000)
            } else {
                continue;
            };
            if now < p.round_start + rtt {
                continue;
            }
            let total = p.round_delivered + p.round_congested;
            if total >= 4 && p.round_congested * 2 >= total {
                p.bad_rounds += 1;
            } else if total >= 4 {
                p.bad_rounds = 0;
            }
            p.round_start = now;
            p.round_delivered = 0;
            p.round_congested = 0;
            if p.bad_rounds >= self.cfg.plb_rounds && p.is_active() {
                p.bad_rounds = 0;
                self.retire_path(now, i, "congestion");
            }
        }
    }

    // ----- transmitting -----------------------------------------------------

    fn next_path_seq(&mut self, ev: u16) -> u16 {
        let c = self.tx_path_seq.entry(ev).or_insert(0);
        *c = c.wrapping_add(1);
        if *c == 0 {
            *c = 1;
        }
        *c
    }

    fn header(&self, ev: u16, path_seq: u16, psn: u32, now: Time, body: Body) -> Repr<'static> {
        Repr {
            flags: Flags::empty(),
            tx_attempt: 0,
            ev,
            path_seq,
            dst_conn: self.remote_id,
            src_conn: self.local_id,
            psn,
            tx_ts: ts(now),
            body,
            tlvs: Vec::new(),
            payload: &[],
            crc: self.crc,
        }
    }

    fn emit_repr(&mut self, repr: &Repr<'_>, buf: &mut Vec<u8>) -> usize {
        let len = repr.buffer_len();
        if buf.len() < len {
            buf.resize(len, 0);
        }
        repr.emit(&mut buf[..len])
    }

    fn transmit(&self, ev: u16, len: usize, kind: PacketType) -> Transmit {
        Transmit {
            remote: self.remote,
            ev,
            src_port: udp_source_port(ev),
            len,
            ecn: Ecn::Ect0,
            kind,
            conn: self.local_id,
        }
    }

    fn feedback_repr(&self, trig: &Trigger) -> FeedbackRepr {
        FeedbackRepr {
            flags: trig.flags,
            echo_ev: trig.ev,
            echo_psn: trig.psn,
            echo_tx_ts: trig.tx_ts,
            rx_ts: trig.rx_ts,
            ce_count: self.ce_count,
            rx_buf_level: self.rx_buf_level(),
            fwd_hops: 0,
            credit: self.credit_bytes(),
        }
    }

    fn sack_bitmap(&self) -> SackBitmap {
        let n = self.rcv_bits.len().min(SackBitmap::MAX_BITS);
        if self.mode == Mode::GoBackN || n == 0 {
            return SackBitmap::with_words(0);
        }
        let words = n.div_ceil(64) as u8;
        let mut b = SackBitmap::with_words(words);
        for (i, &got) in self.rcv_bits.iter().take(n).enumerate() {
            if got {
                b.set(i);
            }
        }
        b
    }

    /// Fills `buf` with the next datagram to send, if any. Call until it
    /// returns `None`, after every input.
    pub fn poll_transmit(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        if self.close_requested && self.state == State::Established && self.pending_work() == 0 {
            self.state = State::Closing {
                attempts: 0,
                next: now,
            };
            self.ctrl_out.push_back(CtrlOut::Close);
        }
        if let Some(c) = self.ctrl_out.pop_front() {
            return Some(self.emit_ctrl(now, c, buf));
        }
        if self.state == State::Closed {
            return None;
        }
        if let Some((_, _, deadline)) = self.ack_pending
            && now >= deadline
        {
            self.flush_pending_ack();
        }
        if let Some(f) = self.fb_out.pop_front() {
            return Some(self.emit_feedback(now, f, buf));
        }
        if let Some(i) = self.probes_out.pop_front() {
            let ev = self.paths[i].ev;
            let seq = match self.paths[i].status {
                PathStatus::Probing { seq, .. } => seq,
                _ => 0,
            };
            let ps = self.next_path_seq(ev);
            let repr = self.header(ev, ps, seq, now, Body::Probe);
            let len = self.emit_repr(&repr, buf);
            self.trace_ev(
                now,
                TraceEvent::TxControl {
                    kind: "PROBE",
                    psn: seq,
                    ev,
                    path_seq: ps,
                    detail: String::new(),
                },
            );
            self.last_tx = now;
            return Some(self.transmit(ev, len, PacketType::Probe));
        }
        if self.state != State::Established && !matches!(self.state, State::Closing { .. }) {
            return None;
        }
        if let Some(t) = self.poll_retransmit(now, buf) {
            return Some(t);
        }
        self.poll_new_data(now, buf)
    }

    fn emit_ctrl(&mut self, now: Time, c: CtrlOut, buf: &mut Vec<u8>) -> Transmit {
        let (op, init_psn) = match c {
            CtrlOut::Connect => {
                if let State::Connecting { attempts, .. } = self.state {
                    let next = now + (self.cfg.handshake_timeout << attempts.min(6));
                    self.state = State::Connecting {
                        attempts: attempts + 1,
                        next,
                    };
                }
                (CtrlOp::Connect, self.init_psn)
            }
            CtrlOut::Accept => (CtrlOp::Accept, self.init_psn),
            CtrlOut::Close => {
                if let State::Closing { attempts, .. } = self.state {
                    self.state = State::Closing {
                        attempts: attempts + 1,
                        next: now + self.rto().max(self.cfg.rto_min) * 4,
                    };
                }
                (CtrlOp::Close, 0)
            }
            CtrlOut::CloseAck => (CtrlOp::CloseAck, 0),
            CtrlOut::Keepalive => (CtrlOp::Keepalive, 0),
            CtrlOut::Abort => (CtrlOp::Abort, 0),
        };
        let mut features = Features::PATH_SEQ | Features::TRIMMING_AWARE;
        if self.crc {
            features |= Features::CRC;
        }
        let cc_algo = match self.mode {
            Mode::MetaRoce => CcAlgo::DelayBased,
            Mode::GoBackN => CcAlgo::Ecn,
        };
        let ev = self.paths[0].ev;
        let body = Body::Ctrl(CtrlRepr {
            op,
            cc_algo,
            mtu: self.mtu,
            init_psn,
            features,
            ts_unit_ps: proto_parse::metaroce::DEFAULT_TS_UNIT_PS,
        });
        let mut repr = self.header(ev, 0, 0, now, body);
        if op == CtrlOp::Connect {
            repr.dst_conn = 0;
        }
        let len = self.emit_repr(&repr, buf);
        self.trace_ev(
            now,
            TraceEvent::TxControl {
                kind: "CTRL",
                psn: 0,
                ev,
                path_seq: 0,
                detail: op.name().to_string(),
            },
        );
        self.last_tx = now;
        self.transmit(ev, len, PacketType::Ctrl)
    }

    fn emit_feedback(&mut self, now: Time, f: FbOut, buf: &mut Vec<u8>) -> Transmit {
        let (ev, body, kind, detail) = match f {
            FbOut::Ack(trig) => {
                self.stats.acks_tx += 1;
                let sack = self.sack_bitmap();
                (
                    trig.ev,
                    Body::Ack(AckRepr {
                        feedback: self.feedback_repr(&trig),
                        sack_base: self.rcv_nxt,
                        sack,
                    }),
                    PacketType::Ack,
                    String::new(),
                )
            }
            FbOut::Nack {
                trig,
                code,
                psn,
                rnr,
            } => (
                trig.ev,
                Body::Nack(NackRepr {
                    feedback: self.feedback_repr(&trig),
                    code,
                    rnr_timer: rnr,
                    nack_psn: psn,
                }),
                PacketType::Nack,
                format!("{} {}", code.name(), psn),
            ),
            FbOut::Cnp { trig, reason } => (
                trig.ev,
                Body::Cnp(CnpRepr {
                    feedback: self.feedback_repr(&trig),
                    reason,
                }),
                PacketType::Cnp,
                reason.name().to_string(),
            ),
            FbOut::ProbeReply(trig) => (
                trig.ev,
                Body::ProbeReply(self.feedback_repr(&trig)),
                PacketType::ProbeReply,
                String::new(),
            ),
        };
        let ps = self.next_path_seq(ev);
        let repr = self.header(ev, ps, self.rcv_nxt, now, body);
        let len = self.emit_repr(&repr, buf);
        if self.cfg.trace {
            let psn = self.rcv_nxt;
            self.trace_ev(
                now,
                TraceEvent::TxControl {
                    kind: kind.name(),
                    psn,
                    ev,
                    path_seq: ps,
                    detail,
                },
            );
        }
        self.last_tx = now;
        self.transmit(ev, len, kind)
    }

    /// Chooses a path for a packet of `len` bytes; `avoid` is the ev a lost
    /// packet went on (a retransmission prefers another path).
    fn pick_path(&mut self, len: u64, avoid: Option<u16>) -> Option<usize> {
        let n = self.paths.len();
        let room: Vec<bool> = self
            .paths
            .iter()
            .map(|p| p.is_active() && p.has_room(len))
            .collect();
        let any_other =
            avoid.is_some_and(|ev| self.paths.iter().zip(&room).any(|(p, &r)| r && p.ev != ev));
        let ok = |i: usize, paths: &[Path]| room[i] && !(any_other && Some(paths[i].ev) == avoid);
        match self.cfg.spray {
            Spray::RoundRobin => {
                for k in 0..n {
                    let i = (self.rr + k) % n;
                    if ok(i, &self.paths) {
                        self.rr = i + 1;
                        return Some(i);
                    }
                }
                None
            }
            Spray::Weighted => {
                let mut total = 0.0;
                let mut best: Option<usize> = None;
                for i in 0..n {
                    if !ok(i, &self.paths) {
                        continue;
                    }
                    let w = self.paths[i].weight();
                    total += w;
                    self.paths[i].swrr += w;
                    if best.is_none_or(|b| self.paths[i].swrr > self.paths[b].swrr) {
                        best = Some(i);
                    }
                }
                if let Some(b) = best {
                    self.paths[b].swrr -= total;
                }
                best
            }
        }
    }

    fn poll_retransmit(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        while let Some(&psn) = self.retx.front() {
            let (len, avoid) = match self.sent_mut(psn) {
                Some(s) if s.state == SentState::Lost => (s.bytes.len() as u64, s.ev),
                _ => {
                    self.retx.pop_front();
                    continue;
                }
            };
            let i = self.pick_path(len, Some(avoid))?;
            self.retx.pop_front();
            let ev = self.paths[i].ev;
            let ps = self.next_path_seq(ev);
            let max_retries = self.cfg.max_retries;
            let s = self.sent_mut(psn)?;
            s.attempts += 1;
            let attempts = s.attempts;
            s.ev = ev;
            s.sent_at = now;
            s.tx_ts = ts(now);
            s.state = SentState::Outstanding;
            s.in_flight = true;
            s.sampled = false;
            let ack_req = std::mem::take(&mut s.ack_req);
            let mut pkt = Packet::new_unchecked(&mut s.bytes[..]);
            if ack_req {
                let f = pkt.flags();
                pkt.set_flags(f | Flags::AR);
            }
            pkt.set_tx_attempt(attempts.min(15) as u8);
            pkt.set_ev(ev);
            pkt.set_path_seq(ps);
            pkt.set_tx_ts(ts(now));
            pkt.fill_crc(&s.layout);
            let n = s.bytes.len();
            if buf.len() < n {
                buf.resize(n, 0);
            }
            buf[..n].copy_from_slice(&s.bytes);
            let (msg_id, msg_offset, payload_len, op, cause) =
                (s.msg_id, s.msg_offset, s.payload_len, s.op, s.cause);
            self.outstanding += 1;
            self.stats.retransmissions += 1;
            self.stats.data_tx += 1;
            let p = &mut self.paths[i];
            p.inflight += n as u64;
            p.stats.tx_packets += 1;
            p.stats.tx_bytes += n as u64;
            p.stats.retransmissions += 1;
            p.cc.on_sent(now, n as u64);
            if self.rto_at.is_none() {
                self.rto_at = Some(now + self.rto());
            }
            self.trace_ev(
                now,
                TraceEvent::Tx {
                    psn,
                    ev,
                    path_seq: ps,
                    tx_attempt: attempts.min(15) as u8,
                    msg_id,
                    op,
                    msg_offset,
                    payload_len,
                    retransmission: true,
                    cause,
                },
            );
            self.last_tx = now;
            if attempts > max_retries {
                self.abort(now, format!("PSN {psn} retransmitted {attempts} times"));
            }
            return Some(self.transmit(ev, n, PacketType::Data));
        }
        None
    }

    fn poll_new_data(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        let m = self.queue.front()?;
        // Flow control: PSN window and the receiver's credit.
        let inflight_psns = psn_diff(self.snd_una, self.snd_nxt) as u64;
        if inflight_psns >= u64::from(self.cfg.window_packets) {
            return None;
        }
        if self.credit != u64::MAX
            && inflight_psns > 0
            && (inflight_psns + 1) * u64::from(self.mtu)
                > self.credit + inflight_psns * u64::from(self.mtu)
        {
            // The credit counts bytes beyond the cumulative ack at the time
            // the feedback left; what we sent since is already inside it.
            return None;
        }
        let chunk = match m.op {
            Op::ReadReq { .. } => 0,
            _ => (m.len - m.next_off).min(u32::from(self.mtu)),
        };
        let est = u64::from(chunk) + 80;
        let i = self.pick_path(est, None)?;
        let ev = self.paths[i].ev;
        let ps = self.next_path_seq(ev);
        let psn = self.snd_nxt;
        let more_queued = self.queue.len() > 1;
        let m = self.queue.front_mut()?;
        let off = m.next_off;
        let end = off + chunk;
        let mut flags = Flags::empty();
        if off == 0 {
            flags |= Flags::SOM;
        }
        let last = end >= m.len || matches!(m.op, Op::ReadReq { .. });
        if last {
            flags |= Flags::EOM;
            if !more_queued {
                flags |= Flags::AR;
            }
        }
        let data = DataRepr {
            op: m.op,
            payload_len: chunk as u16,
            msg_id: m.msg_id,
            msg_offset: off,
            msg_len: m.len,
        };
        let payload_range = off as usize..end as usize;
        let op_name = m.op.code().name();
        let msg_id = m.msg_id;
        let first = !m.started;
        m.started = true;
        m.next_off = end;
        let track = m.track.map(|k| (k, m.wr_id, m.len, m.posted));
        let is_read = matches!(m.op, Op::ReadReq { .. });
        let repr = Repr {
            flags,
            tx_attempt: 0,
            ev,
            path_seq: ps,
            dst_conn: self.remote_id,
            src_conn: self.local_id,
            psn,
            tx_ts: ts(now),
            body: Body::Data(data),
            tlvs: Vec::new(),
            payload: &m.data[payload_range],
            crc: self.crc,
        };
        let len = repr.buffer_len();
        if buf.len() < len {
            buf.resize(len, 0);
        }
        repr.emit(&mut buf[..len]);
        if last {
            self.queue.pop_front();
        }
        if is_read && let Some(r) = self.reads.get_mut(&msg_id) {
            r.req_psn = Some(psn);
        }
        if let Some((kind, wr_id, mlen, posted)) = track {
            if first {
                self.sender_msgs.push_back(SenderMsg {
                    wr_id,
                    msg_id,
                    kind,
                    len: mlen,
                    first_psn: psn,
                    last_psn: psn,
                    done_packetizing: false,
                    ok: true,
                    posted,
                });
            }
            if let Some(sm) = self.sender_msgs.back_mut() {
                sm.last_psn = psn;
                sm.done_packetizing = last;
            }
        }
        let bytes = buf[..len].to_vec();
        let layout = match Packet::new_checked(&bytes[..]).and_then(|p| p.layout(len)) {
            Ok(l) => l,
            Err(_) => Layout {
                header_len: 0,
                fixed_len: 0,
                payload: 0..0,
                trailer: None,
                trimmed: false,
                wire_len: len,
            },
        };
        self.sent.push_back(Some(Sent {
            bytes,
            layout,
            ev,
            sent_at: now,
            tx_ts: ts(now),
            attempts: 0,
            state: SentState::Outstanding,
            in_flight: true,
            sampled: false,
            ack_req: false,
            msg_id,
            msg_offset: off,
            payload_len: chunk as u16,
            op: op_name,
            cause: TxCause::New,
        }));
        self.snd_nxt = self.snd_nxt.wrapping_add(1);
        self.outstanding += 1;
        self.stats.data_tx += 1;
        self.stats.data_tx_bytes += u64::from(chunk);
        let p = &mut self.paths[i];
        p.inflight += len as u64;
        p.stats.tx_packets += 1;
        p.stats.tx_bytes += len as u64;
        p.cc.on_sent(now, len as u64);
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rto());
        }
        if self.outstanding == 1 {
            self.last_progress = self.last_progress.max(now);
        }
        self.trace_ev(
            now,
            TraceEvent::Tx {
                psn,
                ev,
                path_seq: ps,
                tx_attempt: 0,
                msg_id,
                op: op_name,
                msg_offset: off,
                payload_len: chunk as u16,
                retransmission: false,
                cause: TxCause::New,
            },
        );
        self.last_tx = now;
        Some(self.transmit(ev, len, PacketType::Data))
    }
}
