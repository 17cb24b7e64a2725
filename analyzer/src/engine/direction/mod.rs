//! Per connection-direction analysis of MetaRoCE (spec sections 9 and 11).
//!
//! A direction is `(src IP, dst IP, src_conn, dst_conn)` of the DATA it
//! carries. Its state is updated by the DATA it sends and by the feedback
//! the reverse direction sends about it. Per-PSN state lives in a sliding
//! [`Window`] pruned as the cumulative ack advances.
//!
//! A [`Direction`] owns its parts, one file each, as methods over its
//! state: `path.rs` (per-ev counters, path_seq loss), `data.rs` (a DATA
//! packet), `retransmissions.rs`, `messages.rs` (delivery, completion,
//! READs), `stalls.rs`, `rtt.rs` (echoes, late echoes, probes, batched
//! samples), `feedback.rs` (SACK, NACK, CNP, the cumulative ack),
//! `report.rs` (its `DirectionReport`), `view.rs` (what the lint reads).
//! `key.rs` names a direction; `table.rs` holds the engine's directions.

mod data;
mod feedback;
mod key;
mod messages;
mod path;
mod report;
mod retransmissions;
mod rtt;
mod stalls;
mod table;
mod view;

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

pub(crate) use key::{DirKey, PackedKey, ip_bits};
pub(crate) use path::next_seq;
pub(crate) use table::DirectionTable;

use super::Config;
use super::ev_table::EvTable;
use super::hist::LazyHist;
use super::report::StallReport;
use super::window::Window;
use messages::Msg;
use path::Path;
use retransmissions::PrunedRetx;
use rtt::{LateTx, Probe, RTT_BATCH, RttSample};
use stalls::OpenStall;

/// One captured transmission of a PSN.
#[derive(Debug, Default, Clone, Copy)]
struct Tx {
    frame: u64,
    ts: u64,
    tx_ts: u32,
    ev: u16,
    sampled: bool,
}

/// The window's state of one PSN: 64 bytes, aligned so that a slot is one
/// cache line (feedback reads a slot written many packets earlier).
#[derive(Debug, Default, Clone, Copy)]
#[repr(align(64))]
pub(crate) struct Slot {
    seen: bool,
    sacked: bool,
    nacked: bool,
    /// The last transmission was a retransmission.
    retx: bool,
    /// Already counted as spurious.
    spurious: bool,
    /// Newly covered by a coalesced (COAL) feedback that did not name it:
    /// its arrival was acknowledged without an echo of its own, so no
    /// late echo is awaited once it leaves the window.
    coalesced: bool,
    /// Transmissions captured.
    count: u8,
    /// What the PSN adds to the direction's bytes in flight: its
    /// `payload_len` while it is captured, not SACKed and not below the
    /// cumulative ack; 0 otherwise (it fits the slot's padding).
    flight: u16,
    /// The ev charged with `lost_inferred` for this PSN.
    lost_ev: Option<u16>,
    first: Tx,
    last: Tx,
}

const _: () = assert!(
    std::mem::size_of::<Slot>() == 64,
    "a slot is one cache line"
);

const RING: usize = 16;

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counters {
    pub data_packets: u64,
    pub data_bytes: u64,
    pub goodput_bytes: u64,
    /// The sum of the window's `Slot::flight`, and its largest value
    /// before the last time it went down (only feedback and the window's
    /// overflow take bytes out: the maximum is taken there, not on every
    /// DATA; with the current value it is the largest so far).
    pub bytes_in_flight: u64,
    pub max_bytes_in_flight: u64,
    pub retransmissions: u64,
    pub fast: u64,
    pub timeout: u64,
    pub spurious: u64,
    pub out_of_order: u64,
    pub trimmed: u64,
    pub ce_marked: u64,
    pub ece: u64,
    pub acks: u64,
    pub nacks: u64,
    pub cnps: u64,
    pub probes: u64,
    pub probe_replies: u64,
    pub ctrl: u64,
    pub feedback_sent: u64,
    pub path_loss: u64,
    pub messages_completed: u64,
    pub messages_delivered: u64,
}

/// One connection direction. `repr(C)` keeps the fields a DATA packet or
/// its feedback touches in its first cache lines; the default layout put
/// them on about a dozen of its 27 lines, between the cold rings
/// (cachegrind, bench capture: L1 read misses 8.50 -> 7.95 per packet).
#[repr(C, align(64))]
pub(crate) struct Direction {
    pub last_ts: u64,
    stall_ref: u64,
    last_data_ts: u64,
    first_data_ts: Option<u64>,
    highest: Option<u32>,
    cum: Option<u32>,
    highest_sacked: Option<u32>,
    window: Window<Slot>,
    paths: EvTable<Path>,
    msgs: FxHashMap<(u32, bool), Msg>,
    pending_last: VecDeque<(u32, u32, bool)>,
    /// Acked transmissions pruned from the window while still awaiting
    /// their echo, in PSN order; at most `Config::window` of them.
    late: VecDeque<LateTx>,
    /// The largest RTT sample (`late` waits `LATE_ECHO_RTTS` times this).
    max_rtt: u64,
    pub c: Counters,
    max_reorder: u32,
    fb_seen: bool,
    /// The sender's CONNECT/ACCEPT was captured (paths start at path_seq 1).
    pub start_seen: bool,
    rtt_pending_len: u8,
    stall: Option<OpenStall>,
    /// Each latency sample is recorded once, in the finest histogram it
    /// belongs to; the direction's RTT and completion histograms are sums
    /// made by `report` (`LazyHist::sum`). RTT samples on evs without a
    /// path entry (beyond `Config::max_paths`) go here; the direction's
    /// RTT is this plus every path's.
    rtt_off_path: LazyHist,
    fabric: LazyHist,
    /// Acked messages that are neither SEND nor WRITE (READ requests and
    /// responses); the direction's completion latency is this plus
    /// `by_op`'s send and write.
    acked_other_op: LazyHist,
    msg_delivered: LazyHist,
    /// send, write (acked messages), read (completed READs).
    by_op: [LazyHist; 3],
    pending_reads: FxHashMap<u32, u64>,
    /// PSNs whose window slot has `retx` set: the only slots pruning reads
    /// (for `pruned`); every other slot is dropped unread.
    retx_psns: Vec<u32>,
    pub key: DirKey,
    pub first_frame: u64,
    pub first_ts: u64,
    nacks_by_code: [u64; 9],
    cnps_by_reason: [u64; 5],
    pub messages_evicted: u64,
    /// Packets on evs beyond `Config::max_paths` (not tracked per path).
    pub paths_overflow: u64,
    stalls: Vec<StallReport>,
    stalls_dropped: u64,
    pruned: [PrunedRetx; RING],
    pruned_at: usize,
    probes: [Probe; RING],
    probes_at: usize,
    /// RTT samples not yet in `fabric` and their path's histogram:
    /// recorded [`RTT_BATCH`] at a time, one histogram after the other, so
    /// that each stays in cache for the batch. Recorded one by one, the
    /// histograms a sample goes to (among about 150) were cache misses,
    /// a large share of the analysis' time.
    /// `report` counts them too; `flush_rtt` records them.
    rtt_pending: [RttSample; RTT_BATCH],
}

/// Sizes of the per-direction state, for the bounded-memory test.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DirSize {
    pub window_slots: usize,
    pub paths: usize,
    pub messages: usize,
    pub pending_last: usize,
    pub pending_reads: usize,
    pub retx_psns: usize,
    pub stalls: usize,
    pub late_echoes: usize,
}

impl Direction {
    pub(crate) fn new(key: DirKey, frame: u64, ts: u64, cfg: &Config) -> Direction {
        Direction {
            key,
            start_seen: false,
            first_frame: frame,
            first_ts: ts,
            last_ts: ts,
            first_data_ts: None,
            last_data_ts: 0,
            c: Counters::default(),
            max_reorder: 0,
            nacks_by_code: [0; 9],
            cnps_by_reason: [0; 5],
            highest: None,
            cum: None,
            highest_sacked: None,
            fb_seen: false,
            window: Window::new(cfg.window),
            paths: EvTable::default(),
            rtt_off_path: LazyHist::default(),
            fabric: LazyHist::default(),
            acked_other_op: LazyHist::default(),
            msg_delivered: LazyHist::default(),
            by_op: Default::default(),
            msgs: FxHashMap::default(),
            pending_last: VecDeque::new(),
            late: VecDeque::new(),
            max_rtt: 0,
            pending_reads: FxHashMap::default(),
            retx_psns: Vec::new(),
            messages_evicted: 0,
            paths_overflow: 0,
            stall_ref: ts,
            stall: None,
            stalls: Vec::new(),
            stalls_dropped: 0,
            pruned: [PrunedRetx::default(); RING],
            pruned_at: 0,
            probes: [Probe::default(); RING],
            probes_at: 0,
            rtt_pending: [RttSample::default(); RTT_BATCH],
            rtt_pending_len: 0,
        }
    }

    pub(crate) fn size(&self) -> DirSize {
        DirSize {
            window_slots: self.window.len(),
            paths: self.paths.len(),
            messages: self.msgs.len(),
            pending_last: self.pending_last.len(),
            pending_reads: self.pending_reads.len(),
            retx_psns: self.retx_psns.len(),
            stalls: self.stalls.len(),
            late_echoes: self.late.len(),
        }
    }

    /// Payload bytes in flight (`DirectionReport::bytes_in_flight`).
    pub(crate) fn bytes_in_flight(&self) -> u64 {
        self.c.bytes_in_flight
    }
}
