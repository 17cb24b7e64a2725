//! Connection parameters ([`Config`]) and the fixed limits of the state
//! machine, each named once.

use serde::Serialize;

/// Transport mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// Multipath spraying, out-of-order placement, SACK/NACK selective repair,
    /// delay-based congestion control.
    #[serde(rename = "metaroce")]
    MetaRoce,
    /// RoCEv2-like: one path, in-order receiver that drops out-of-order
    /// packets, go-back-N repair, ECN (DCQCN-like) congestion control.
    /// Signalled as `cc_algo = ECN` in CONNECT.
    #[serde(rename = "gbn")]
    GoBackN,
}

impl Mode {
    /// The mode as users read it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::MetaRoce => "MetaRoCE",
            Mode::GoBackN => "go-back-N",
        }
    }
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

/// Test only: a deliberate breach of the spec (the CLI's hidden
/// `--misbehave`), so that tests can check that `metaroce-analyze lint`
/// finds it in real traffic. The transfer still completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Misbehaviour {
    /// Sender: every PSN that is a multiple of 16 is sent once more after
    /// the cumulative ack passed it (a spurious retransmission, spec 9 and
    /// 11.10; lint rule MR-SND-004).
    RetransmitAcked,
    /// Receiver: every 8th ACK carries a cumulative ack one below the
    /// previous ACK's (the cumulative ack never moves backwards, spec 4;
    /// lint rule MR-RCV-001).
    AckBackwards,
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
    /// Test only: break the spec on purpose ([`Misbehaviour`]).
    pub misbehave: Option<Misbehaviour>,
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
            misbehave: None,
        }
    }
}

/// Smallest payload MTU either side may ask for: smaller CTRL values are
/// raised to it.
pub const MIN_MTU: u16 = 64;

/// The `Event::Closed` error of a handshake that got no ACCEPT.
pub const HANDSHAKE_TIMED_OUT: &str = "handshake timed out";

/// CONNECTs sent before the handshake gives up.
pub(super) const MAX_CONNECT_ATTEMPTS: u32 = 8;
/// The CONNECT interval doubles per attempt up to `handshake_timeout << 6`.
pub(super) const MAX_CONNECT_BACKOFF_SHIFT: u32 = 6;
/// CLOSEs sent before the connection closes without CLOSE_ACK.
pub(super) const MAX_CLOSE_ATTEMPTS: u32 = 5;
/// A CLOSE is resent after this many RTOs.
pub(super) const CLOSE_RESEND_RTOS: u64 = 4;
/// A closed connection stays in its endpoint for this many RTOs (its last
/// CTRL leaves; late packets of the peer meet a known, closed id).
pub(super) const DRAIN_PERIOD_RTOS: u64 = 3;

/// RTO = srtt + `RTTVAR_FACTOR` x rttvar (RFC 6298's K).
pub(super) const RTTVAR_FACTOR: u64 = 4;
/// RACK's time threshold allows at least min RTT / 4 of reordering.
pub(super) const MIN_REORDER_WINDOW_DIVISOR: u64 = 4;
/// The RTO doubles per expiry without progress, at most `1 << 16` times.
pub(super) const MAX_RTO_BACKOFF_SHIFT: u32 = 16;
/// A retired path is probed after `probe_interval << backoff`, the backoff
/// growing by one per failed probe up to this.
pub(super) const MAX_RETIRE_BACKOFF: u32 = 5;

/// NACK RNR's `rnr_timer` this receiver asks for (units of
/// [`RNR_TIMER_UNIT_NS`]: 50 us).
pub(super) const RNR_TIMER: u8 = 5;
/// Spec: `rnr_timer` counts units of 10 us.
pub(super) const RNR_TIMER_UNIT_NS: u64 = 10_000;

/// The 4-bit `tx_attempt` field saturates here.
pub(super) const MAX_TX_ATTEMPT_FIELD: u32 = 15;
/// Header and trailer bytes a DATA packet adds to its payload, as the
/// congestion controllers count them.
pub(super) const CC_PACKET_OVERHEAD: u64 = 64;
/// Header and trailer bytes assumed when checking a path's window room
/// for a new DATA packet (any TLVs included).
pub(super) const DATA_PACKET_OVERHEAD_ESTIMATE: u64 = 80;

/// PLB rounds last at least this long (ns), even on a faster path.
pub(super) const MIN_ROUND_NS: u64 = 1_000;
/// A round with fewer packets than this says nothing about congestion.
pub(super) const MIN_ROUND_PACKETS: u32 = 4;
/// Loss and CE histories move by 1/16 of the gap per congestion signal...
pub(super) const CONGESTION_EWMA_GAIN: f64 = 16.0;
/// ...and decay by 1/64 per delivered packet.
pub(super) const DELIVERY_EWMA_DECAY: f64 = 64.0;
