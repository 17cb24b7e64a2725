//! The ground-truth event log (`--events FILE`, JSON Lines). One record per
//! line: `{"t_ns": .., "conn": .., "event": "<name>", ...fields}`. The
//! schema is documented in `reference-stack/README.md`; the analyzer's tests
//! compare their derived values with these records.

use serde::Serialize;

/// Why a DATA packet (or a probe) was transmitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TxCause {
    /// First transmission.
    New,
    /// Retransmission after the retransmission timer fired.
    Rto,
    /// The receiver sent NACK GAP.
    NackGap,
    /// The receiver sent NACK TRIMMED.
    NackTrimmed,
    /// Per-path SACK/RACK loss detection.
    Sack,
    /// The path it was in flight on was retired.
    PathRetired,
    /// The receiver refused it with NACK RNR.
    Rnr,
    /// Go-back-N rewind.
    GoBackN,
}

/// One ground-truth event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TraceEvent {
    /// A DATA packet left (first transmission or retransmission).
    Tx {
        psn: u32,
        ev: u16,
        path_seq: u16,
        tx_attempt: u8,
        msg_id: u32,
        op: &'static str,
        msg_offset: u32,
        payload_len: u16,
        retransmission: bool,
        cause: TxCause,
    },
    /// A non-DATA packet left (ACK, NACK, CNP, PROBE, PROBE_REPLY, CTRL).
    TxControl {
        kind: &'static str,
        psn: u32,
        ev: u16,
        path_seq: u16,
        detail: String,
    },
    /// The sender declared a DATA packet lost.
    Loss { psn: u32, ev: u16, cause: TxCause },
    /// DUP feedback: a retransmission turned out spurious.
    Spurious { psn: u32, ev: u16 },
    /// A DATA packet was accepted and its payload placed (receiver).
    Delivery {
        psn: u32,
        ev: u16,
        msg_id: u32,
        msg_offset: u32,
        len: u16,
        read_resp: bool,
    },
    /// A DATA packet arrived again (receiver; answered with DUP).
    Duplicate { psn: u32, ev: u16 },
    /// A DATA packet arrived trimmed (receiver).
    Trimmed { psn: u32, ev: u16 },
    /// A message completed: `side` is "sender" (acknowledged or READ data
    /// arrived) or "receiver" (every byte placed).
    Completion {
        side: &'static str,
        kind: &'static str,
        msg_id: u32,
        wr_id: u64,
        len: u32,
        ok: bool,
        latency_ns: u64,
    },
    /// A path changed state (active, probing, retired).
    PathChange {
        ev: u16,
        from: &'static str,
        to: &'static str,
        reason: &'static str,
    },
    /// Data outstanding and no cumulative-ack advance for the threshold.
    StallStart { snd_una: u32 },
    /// The cumulative ack advanced again.
    StallEnd { snd_una: u32, duration_ns: u64 },
    /// Connection state change.
    State { state: &'static str },
}

/// A timestamped event of one connection (its local connection id).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceRecord {
    pub t_ns: u64,
    pub conn: u32,
    #[serde(flatten)]
    pub event: TraceEvent,
}
