//! What a connection reports: completions, application events, counters,
//! and the metadata of a received datagram.

use std::collections::VecDeque;

use serde::Serialize;

use crate::Time;
use crate::trace::{TraceEvent, TraceRecord};

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

/// What arrived with a datagram besides its bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RxMeta {
    /// The IP header carried CE.
    pub ce: bool,
}

/// Where a connection's parts report to: the counters, the application's
/// events and the ground-truth trace (kept only when `Config::trace`).
#[derive(Debug)]
pub(super) struct Log {
    pub(super) stats: ConnStats,
    pub(super) events: VecDeque<Event>,
    trace: VecDeque<TraceRecord>,
    tracing: bool,
    /// The local connection id the trace records carry.
    conn: u32,
}

impl Log {
    pub(super) fn new(conn: u32, tracing: bool) -> Self {
        Log {
            stats: ConnStats::default(),
            events: VecDeque::new(),
            trace: VecDeque::new(),
            tracing,
            conn,
        }
    }

    pub(super) fn tracing(&self) -> bool {
        self.tracing
    }

    pub(super) fn trace(&mut self, now: Time, event: TraceEvent) {
        if self.tracing {
            self.trace.push_back(TraceRecord {
                t_ns: now,
                conn: self.conn,
                event,
            });
        }
    }

    pub(super) fn poll_trace(&mut self) -> Option<TraceRecord> {
        self.trace.pop_front()
    }

    /// Counts, traces and reports a completion of this side's work request.
    pub(super) fn complete_sender(&mut self, now: Time, c: Completion) {
        self.stats.messages_completed_tx += 1;
        self.trace(
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
}
