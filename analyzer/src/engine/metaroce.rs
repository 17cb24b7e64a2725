//! Per connection-direction analysis of MetaRoCE (spec sections 9 and 11).
//!
//! A direction is `(src IP, dst IP, src_conn, dst_conn)` of the DATA it
//! carries. Its state is updated by the DATA it sends and by the feedback
//! the reverse direction sends about it. Per-PSN state lives in a sliding
//! [`Window`] pruned as the cumulative ack advances.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

use proto_parse::metaroce::{CnpReason, DataOp, FbFlags, Flags, NackCode};
use rustc_hash::FxHashMap;

use super::Config;
use super::ev_table::EvTable;
use super::hist::{LazyHist, Summary};
use super::interval::IntervalSet;
use super::observation::{DataObs, FbKind, FeedbackObs, MrBody, MrObs};
use super::report::{DirectionReport, PathReport, StallReport};
use super::verdict::{MsgDone, MsgView, Retransmission, RetxKind, StallMark, Verdict};
use super::window::{Window, diff, lt};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct DirKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_conn: u32,
    pub dst_conn: u32,
}

/// `DirKey` packed for fast hashing (IPv4 as IPv4-mapped IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PackedKey {
    src: u128,
    dst: u128,
    conns: u64,
}

pub(crate) fn ip_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().to_bits(),
        IpAddr::V6(v6) => v6.to_bits(),
    }
}

impl DirKey {
    #[inline]
    pub fn packed(&self) -> PackedKey {
        PackedKey {
            src: ip_bits(self.src),
            dst: ip_bits(self.dst),
            conns: (u64::from(self.src_conn) << 32) | u64::from(self.dst_conn),
        }
    }

    pub fn reverse(&self) -> DirKey {
        DirKey {
            src: self.dst,
            dst: self.src,
            src_conn: self.dst_conn,
            dst_conn: self.src_conn,
        }
    }
}

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

/// Per-path state of one direction. `repr(C)` keeps the fields every
/// packet touches in the first 32 bytes, so they share a cache line (the
/// default layout put `last_seq` after the histogram, on another line).
#[derive(Debug, Default, Clone)]
#[repr(C)]
struct Path {
    last_seq: u16,
    packets: u64,
    data_packets: u64,
    data_bytes: u64,
    ce_marked: u64,
    retransmissions: u64,
    lost: u64,
    lost_inferred: u64,
    reordered: u64,
    rtt: LazyHist,
}

impl Path {
    /// One non-CTRL packet sent on this path: its counters and the
    /// path_seq loss (also added to the direction's `path_loss`).
    #[inline]
    fn on_packet(
        &mut self,
        mr: &MrObs,
        ce: bool,
        start_seen: bool,
        c: &mut Counters,
        v: &mut Verdict,
    ) {
        self.packets += 1;
        if let MrBody::Data(d) = &mr.body {
            self.data_packets += 1;
            self.data_bytes += u64::from(d.actual_len);
        }
        if ce {
            self.ce_marked += 1;
        }
        let seq = mr.path_seq;
        if seq == 0 {
            return;
        }
        if self.last_seq == 0 {
            // With the connection start captured, every path starts at
            // path_seq 1: values below the first one seen were lost.
            if start_seen && seq > 1 && seq < 0x8000 {
                let d = u64::from(seq - 1);
                self.lost += d;
                c.path_loss += d;
                v.path_loss = Some(d as u32);
            }
            self.last_seq = seq;
            return;
        }
        let expected = if self.last_seq == u16::MAX {
            1
        } else {
            self.last_seq + 1
        };
        let mut d = seq.wrapping_sub(expected) as i16;
        if d > 0 {
            // Crossing the wrap skips 0, which senders never use.
            if seq < expected {
                d -= 1;
            }
            if d > 0 {
                self.lost += d as u64;
                c.path_loss += d as u64;
                v.path_loss = Some(d as u32);
            }
            self.last_seq = seq;
        } else if d == 0 {
            self.last_seq = seq;
        } else {
            self.reordered += 1;
            c.path_reordered += 1;
        }
    }
}

#[derive(Debug, Clone)]
struct Msg {
    op: DataOp,
    first_ts: u64,
    som_ts: Option<u64>,
    msg_len: u32,
    last_psn: Option<u32>,
    bytes: IntervalSet,
    delivered: bool,
}

#[derive(Debug, Clone)]
struct OpenStall {
    start: u64,
    first_event: Option<&'static str>,
    paths: Vec<u16>,
    outstanding: u64,
    retransmissions: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Probe {
    seq: u32,
    tx_ts: u32,
    ts: u64,
    frame: u64,
    ev: u16,
    sampled: bool,
}

/// An acked transmission that left the window before any feedback echoed
/// it: the feedback it triggered may still come back on a slower path
/// (spec 11.9: its first echo gives its RTT sample).
#[derive(Debug, Clone, Copy)]
struct LateTx {
    psn: u32,
    tx_ts: u32,
    ev: u16,
    sampled: bool,
    ts: u64,
    frame: u64,
}

/// A retransmission pruned by a cumulative ack before any DUP feedback
/// could show it spurious.
#[derive(Debug, Default, Clone, Copy)]
struct PrunedRetx {
    psn: u32,
    tx_ts: u32,
    frame: u64,
    lost_ev: Option<u16>,
    valid: bool,
}

const RING: usize = 16;

/// An acked transmission waits for its late echo this many times the
/// direction's largest RTT sample after it was captured.
const LATE_ECHO_RTTS: u64 = 4;

/// RTT samples recorded into the histograms this many at a time (see
/// `Dir::rtt_pending`).
const RTT_BATCH: usize = 32;

/// One RTT sample waiting for the histograms.
#[derive(Debug, Default, Clone, Copy)]
struct RttSample {
    rtt: u64,
    /// RTT less the receiver's hold time; negative ones are not recorded.
    fabric: i64,
    ev: u16,
}

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
    /// Packets whose path_seq was at or below their path's latest (every
    /// path): the lint's MR-SND-003 looks up the path only when it moved.
    pub path_reordered: u64,
    pub messages_completed: u64,
    pub messages_delivered: u64,
}

/// One connection direction. `repr(C)` keeps the fields a DATA packet or
/// its feedback touches in its first cache lines; the default layout put
/// them on about a dozen of its 27 lines, between the cold rings (more L1
/// read misses per packet, by cachegrind: docs/performance.md).
#[repr(C, align(64))]
pub(crate) struct Dir {
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
    /// histograms a sample goes to were cache misses.
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

fn op_index(op: DataOp) -> Option<usize> {
    match op {
        DataOp::Send | DataOp::SendImm => Some(0),
        DataOp::Write | DataOp::WriteImm => Some(1),
        _ => None,
    }
}

/// Op name as the verdict and report show it.
pub(crate) fn op_name(op: DataOp) -> &'static str {
    match op {
        DataOp::Send | DataOp::SendImm => "send",
        DataOp::Write | DataOp::WriteImm => "write",
        DataOp::ReadReq | DataOp::ReadResp => "read",
        DataOp::Unknown(_) => "unknown",
    }
}

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

impl Dir {
    pub fn new(key: DirKey, frame: u64, ts: u64, cfg: &Config) -> Dir {
        Dir {
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

    pub fn size(&self) -> DirSize {
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

    /// Unacked DATA outstanding (highest PSN sent >= cumulative ack).
    fn outstanding(&self) -> bool {
        match (self.highest, self.cum) {
            (Some(_), None) => true,
            (Some(h), Some(c)) => !lt(h, c),
            _ => false,
        }
    }

    fn outstanding_packets(&self) -> u64 {
        match (self.highest, self.cum) {
            (Some(h), Some(c)) => diff(c, h.wrapping_add(1)).max(0) as u64,
            (Some(_), None) => self.window.iter().filter(|(_, s)| s.seen).count() as u64,
            _ => 0,
        }
    }

    fn paths_in_flight(&self) -> Vec<u16> {
        let mut evs: Vec<u16> = Vec::new();
        for (psn, slot) in self.window.iter() {
            if !slot.seen || slot.sacked || self.cum.is_some_and(|c| lt(psn, c)) {
                continue;
            }
            if !evs.contains(&slot.last.ev) {
                evs.push(slot.last.ev);
                if evs.len() >= 64 {
                    break;
                }
            }
        }
        evs.sort_unstable();
        evs
    }

    /// Opens a stall when the direction has had unacked data outstanding
    /// for longer than the threshold.
    #[inline]
    pub fn check_stall(&mut self, now: u64, cfg: &Config) {
        // The time test first: it is false for almost every packet.
        if now.saturating_sub(self.stall_ref) > cfg.stall_threshold_ns
            && self.stall.is_none()
            && self.fb_seen
            && self.outstanding()
        {
            self.open_stall();
        }
    }

    #[cold]
    fn open_stall(&mut self) {
        self.stall = Some(OpenStall {
            start: self.stall_ref,
            first_event: None,
            paths: self.paths_in_flight(),
            outstanding: self.outstanding_packets(),
            retransmissions: 0,
        });
    }

    fn stall_mark(&self, now: u64) -> Option<StallMark> {
        self.stall.as_ref().map(|s| StallMark {
            start_ns: s.start,
            elapsed_ns: now.saturating_sub(s.start),
            ended: false,
        })
    }

    fn stall_event(&mut self, what: &'static str, retx: bool) {
        if let Some(s) = &mut self.stall {
            if s.first_event.is_none() {
                s.first_event = Some(what);
            }
            if retx {
                s.retransmissions += 1;
            }
        }
    }

    fn push_stall(&mut self, stall: StallReport, cfg: &Config) {
        if self.stalls.len() < cfg.max_stalls {
            self.stalls.push(stall);
        } else {
            self.stalls_dropped += 1;
        }
    }

    /// Every non-CTRL packet this direction sends: path_seq loss and
    /// per-path counters.
    #[inline]
    pub fn on_path_packet(&mut self, mr: &MrObs, ce: bool, cfg: &Config, v: &mut Verdict) {
        match self.paths.get_mut(mr.ev) {
            Some(path) => path.on_packet(mr, ce, self.start_seen, &mut self.c, v),
            None => self.on_new_path(mr, ce, cfg, v),
        }
    }

    /// [`Dir::on_path_packet`] for an ev not tracked yet.
    #[cold]
    fn on_new_path(&mut self, mr: &MrObs, ce: bool, cfg: &Config, v: &mut Verdict) {
        if self.paths.len() >= cfg.max_paths {
            self.paths_overflow += 1;
            return;
        }
        let path = self.paths.insert_new(mr.ev, Path::default());
        path.on_packet(mr, ce, self.start_seen, &mut self.c, v);
    }

    /// A DATA packet of this direction. Returns the msg_id of a READ_RESP
    /// message whose last byte arrived (the engine then completes the READ
    /// on the reverse direction).
    #[allow(clippy::too_many_arguments)]
    pub fn on_data(
        &mut self,
        frame: u64,
        ts: u64,
        mr: &MrObs,
        d: &DataObs,
        ce: bool,
        cfg: &Config,
        v: &mut Verdict,
        done: &mut Vec<MsgDone>,
    ) -> Option<u32> {
        let psn = mr.psn;
        self.c.data_packets += 1;
        self.c.data_bytes += u64::from(d.actual_len);
        self.first_data_ts.get_or_insert(ts);
        self.last_data_ts = ts;
        if d.trimmed {
            self.c.trimmed += 1;
            v.trimmed = true;
        }
        if ce {
            self.c.ce_marked += 1;
            v.ce_marked = true;
        }
        self.check_stall(ts, cfg);
        let was_outstanding = self.outstanding();

        let below_cum = self.cum.is_some_and(|c| lt(psn, c));
        let tx = Tx {
            frame,
            ts,
            tx_ts: mr.tx_ts,
            ev: mr.ev,
            sampled: false,
        };
        let slot = if below_cum {
            self.window.get_mut(psn)
        } else {
            // Slots dropped on overflow leave the bytes in flight (cold:
            // the closure runs on the out-of-line path only).
            let c = &mut self.c;
            self.window.entry(psn, |s| {
                c.max_bytes_in_flight = c.max_bytes_in_flight.max(c.bytes_in_flight);
                c.bytes_in_flight = c.bytes_in_flight.saturating_sub(u64::from(s.flight));
            })
        };
        let seen_before = slot.as_ref().is_some_and(|s| s.seen);
        let is_retx = mr.tx_attempt > 0 || seen_before || below_cum;

        if is_retx {
            self.on_retransmission(psn, tx, mr, d.payload_len, below_cum, cfg, v);
        } else {
            if let Some(slot) = slot {
                slot.seen = true;
                slot.first = tx;
                slot.last = tx;
                slot.count = 1;
                if !slot.sacked {
                    slot.flight = d.payload_len;
                    self.c.bytes_in_flight += u64::from(d.payload_len);
                }
            }
            if !d.trimmed {
                self.c.goodput_bytes += u64::from(d.payload_len);
            }
            if let Some(h) = self.highest
                && lt(psn, h)
            {
                let dist = diff(psn, h) as u32;
                self.c.out_of_order += 1;
                self.max_reorder = self.max_reorder.max(dist);
                v.out_of_order = Some(dist);
            }
        }
        if self.highest.is_none_or(|h| lt(h, psn)) && !below_cum {
            self.highest = Some(psn);
        }
        if !was_outstanding && self.outstanding() {
            self.stall_ref = ts;
        }
        v.stall = self.stall_mark(ts);

        if below_cum {
            return None;
        }
        self.on_message(ts, psn, mr.flags, d, cfg, v, done)
    }

    /// [`Dir::on_data`] for a retransmission (rare: out of line, so that
    /// the first transmission's path stays short). `psn`'s slot, if the
    /// window holds it, was made by the caller. It adds to the bytes in
    /// flight only when it is the PSN's first captured transmission.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn on_retransmission(
        &mut self,
        psn: u32,
        tx: Tx,
        mr: &MrObs,
        payload_len: u16,
        below_cum: bool,
        cfg: &Config,
        v: &mut Verdict,
    ) {
        let highest_sacked = self.highest_sacked;
        let slot = self.window.get_mut(psn);
        self.c.retransmissions += 1;
        let mut newly_retx = false;
        let (original_frame, count, kind, charge) = match slot {
            Some(slot) => {
                let original = slot.seen.then_some(slot.first.frame);
                let count = slot.count;
                let kind = if below_cum || slot.sacked {
                    RetxKind::Spurious
                } else if slot.nacked || highest_sacked.is_some_and(|h| lt(psn, h)) {
                    RetxKind::Fast
                } else {
                    RetxKind::Timeout
                };
                // Sender-side loss: the previous transmission was never
                // acked or SACKed.
                let charge = (kind != RetxKind::Spurious && slot.seen).then_some(slot.last.ev);
                if !slot.seen {
                    slot.first = tx;
                    slot.seen = true;
                    if !below_cum && !slot.sacked {
                        slot.flight = payload_len;
                        self.c.bytes_in_flight += u64::from(payload_len);
                    }
                }
                slot.last = tx;
                if !slot.retx {
                    slot.retx = true;
                    newly_retx = true;
                }
                slot.count = slot.count.saturating_add(1);
                if kind == RetxKind::Spurious {
                    slot.spurious = true;
                } else if charge.is_some() {
                    slot.lost_ev = charge;
                }
                (original, count, kind, charge)
            }
            None => (None, 0, RetxKind::Spurious, None),
        };
        if newly_retx {
            self.track_retx(psn, cfg);
        }
        match kind {
            RetxKind::Fast => self.c.fast += 1,
            RetxKind::Timeout => self.c.timeout += 1,
            RetxKind::Spurious => self.c.spurious += 1,
        }
        if let Some(ev) = charge
            && let Some(p) = self.paths.get_mut(ev)
        {
            p.lost_inferred += 1;
        }
        if let Some(p) = self.paths.get_mut(mr.ev) {
            p.retransmissions += 1;
        }
        v.retransmission = Some(Retransmission {
            original_frame,
            attempt: mr.tx_attempt.max(count),
            kind,
            shown_spurious_by: None,
        });
        self.stall_event(
            match kind {
                RetxKind::Fast => "fast_retransmission",
                RetxKind::Timeout => "timeout_retransmission",
                RetxKind::Spurious => "spurious_retransmission",
            },
            true,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn on_message(
        &mut self,
        ts: u64,
        psn: u32,
        flags: Flags,
        d: &DataObs,
        cfg: &Config,
        v: &mut Verdict,
        done: &mut Vec<MsgDone>,
    ) -> Option<u32> {
        let key = (d.msg_id, d.op == DataOp::ReadResp);
        if self.msgs.len() >= cfg.max_messages && !self.msgs.contains_key(&key) {
            self.evict_messages();
        }
        let msg = self.msgs.entry(key).or_insert_with(|| Msg {
            op: d.op,
            first_ts: ts,
            som_ts: None,
            msg_len: d.msg_len,
            last_psn: None,
            bytes: IntervalSet::default(),
            delivered: false,
        });
        if d.msg_offset == 0 && msg.som_ts.is_none() {
            msg.som_ts = Some(ts);
        }
        if flags.contains(Flags::EOM) && msg.last_psn.is_none() {
            msg.last_psn = Some(psn);
            // Keep pending_last sorted by PSN (EOMs arrive nearly in order).
            let mut at = self.pending_last.len();
            while at > 0 && lt(psn, self.pending_last[at - 1].0) {
                at -= 1;
            }
            if self.pending_last.len() >= cfg.max_messages {
                self.pending_last.pop_front();
            }
            let at = at.min(self.pending_last.len());
            // `insert` stays a call even at the end, the usual place.
            if at == self.pending_last.len() {
                self.pending_last.push_back((psn, key.0, key.1));
            } else {
                self.pending_last.insert(at, (psn, key.0, key.1));
            }
        }
        if !d.trimmed {
            let end = d.msg_offset.saturating_add(d.actual_len);
            msg.bytes.insert(d.msg_offset, end);
        }
        let mut read_done = None;
        if !msg.delivered
            && (msg.op == DataOp::ReadReq || msg.msg_len == 0 || msg.bytes.covers(msg.msg_len))
        {
            msg.delivered = true;
            let latency = ts.saturating_sub(msg.first_ts);
            let op = msg.op;
            let som = msg.som_ts.unwrap_or(msg.first_ts);
            self.c.messages_delivered += 1;
            self.msg_delivered.record(latency);
            v.message_done(
                done,
                MsgDone {
                    msg_id: d.msg_id,
                    op: op_name(op),
                    view: MsgView::Delivered,
                    latency_ns: latency,
                },
            );
            match op {
                DataOp::ReadReq => {
                    if self.pending_reads.len() >= cfg.max_messages {
                        self.pending_reads.clear();
                        self.messages_evicted += 1;
                    }
                    self.pending_reads.insert(d.msg_id, som);
                }
                DataOp::ReadResp => read_done = Some(d.msg_id),
                _ => {}
            }
        }
        read_done
    }

    fn evict_messages(&mut self) {
        // Delivered messages go first (a capture without feedback never
        // acks them); then the oldest. Only undelivered ones are counted.
        let mut ages: Vec<(bool, u64, (u32, bool))> = self
            .msgs
            .iter()
            .map(|(k, m)| (!m.delivered, m.first_ts, *k))
            .collect();
        let n = (ages.len() / 4).max(1).min(ages.len());
        if n == 0 {
            return;
        }
        ages.select_nth_unstable(n - 1);
        for (undelivered, _, k) in &ages[..n] {
            self.msgs.remove(k);
            if *undelivered {
                self.messages_evicted += 1;
            }
        }
    }

    /// The READ request `msg_id` of this direction got its last response
    /// byte at `ts`: the READ's response time. The READ_REQ is one message
    /// of this direction (spec 11.4), completed once, when the cumulative
    /// ack passes it (`advance`, spec 9): this is not a second completion
    /// and adds nothing to `messages_completed`.
    pub fn complete_read(
        &mut self,
        msg_id: u32,
        ts: u64,
        v: &mut Verdict,
        done: &mut Vec<MsgDone>,
    ) {
        if let Some(start) = self.pending_reads.remove(&msg_id) {
            let latency = ts.saturating_sub(start);
            self.by_op[2].record(latency);
            let read = MsgDone {
                msg_id,
                op: "read",
                view: MsgView::Read,
                latency_ns: latency,
            };
            // The READ's completion is what this packet means to the
            // requester: it wins over the response's own delivery.
            v.message = Some(read);
            done.push(read);
        }
    }

    /// A PROBE this direction sent.
    pub fn on_probe(&mut self, frame: u64, ts: u64, mr: &MrObs) {
        self.c.probes += 1;
        self.probes[self.probes_at] = Probe {
            seq: mr.psn,
            tx_ts: mr.tx_ts,
            ts,
            frame,
            ev: mr.ev,
            sampled: false,
        };
        self.probes_at = (self.probes_at + 1) % RING;
        self.stall_event("probe", false);
    }

    /// Feedback about this direction (sent by the reverse direction).
    /// `hold_ns` is T3 - T2 converted with the feedback sender's ts_unit.
    #[allow(clippy::too_many_arguments)]
    pub fn on_feedback(
        &mut self,
        frame: u64,
        ts: u64,
        cum_ack: u32,
        fb: &FeedbackObs,
        hold_ns: u64,
        cfg: &Config,
        v: &mut Verdict,
        done: &mut Vec<MsgDone>,
    ) {
        let _ = frame;
        let fb_seen_before = self.fb_seen;
        self.fb_seen = true;
        // Before the SACKs and the cumulative ack take bytes out.
        self.c.max_bytes_in_flight = self.c.max_bytes_in_flight.max(self.c.bytes_in_flight);
        if fb_seen_before {
            self.check_stall(ts, cfg);
        }
        if fb.flags.contains(FbFlags::ECE) {
            self.c.ece += 1;
            v.ece = true;
        }
        match fb.kind {
            FbKind::Ack { .. } => self.c.acks += 1,
            FbKind::Nack { code, .. } => {
                self.c.nacks += 1;
                self.nacks_by_code[nack_index(code)] += 1;
                v.nack = Some(code);
            }
            FbKind::Cnp(reason) => {
                self.c.cnps += 1;
                self.cnps_by_reason[cnp_index(reason)] += 1;
                v.cnp = Some(reason);
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
                v.acked_frame = Some(p.frame);
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
                v.acked_frame = Some(tx.frame);
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
                    v.dup_of_frame = Some(slot.last.frame);
                    if !slot.spurious {
                        slot.spurious = true;
                        let lost_ev = slot.lost_ev.take();
                        self.mark_spurious(lost_ev);
                    }
                }
            }
        } else {
            if let Some(late) = self.late_echo(fb.echo_psn, fb.echo_tx_ts) {
                v.acked_frame = Some(late.frame);
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
                v.dup_of_frame = Some(frame);
                self.mark_spurious(lost_ev);
            }
        }
        if let Some((rtt, ev)) = sample {
            self.max_rtt = self.max_rtt.max(rtt);
            v.ack_rtt_ns = Some(rtt);
            let fabric = (rtt.min(i64::MAX as u64) as i64)
                .saturating_sub(hold_ns.min(i64::MAX as u64) as i64);
            v.fabric_rtt_ns = Some(fabric);
            self.rtt_pending[usize::from(self.rtt_pending_len)] = RttSample { rtt, fabric, ev };
            self.rtt_pending_len += 1;
            if usize::from(self.rtt_pending_len) == RTT_BATCH {
                self.flush_rtt();
            }
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
            v.cum_ack_advance = Some(match self.cum {
                Some(c) => diff(c, cum_ack) as u32,
                None => 0,
            });
            self.advance(frame, ts, cum_ack, fb_seen_before, cfg, v, done);
        } else {
            v.stall = self.stall_mark(ts);
        }
    }

    /// A coalesced feedback moves the cumulative ack to `cum_ack`: the
    /// PSNs it newly covers were acknowledged together, named or not.
    fn mark_coalesced(&mut self, cum_ack: u32) {
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

    /// Before the window drops every slot below `below`: the transmissions
    /// no feedback has echoed yet go to `late`, so that the first echo
    /// still gives their sample however far the cumulative ack moved (a
    /// retransmission that fills the hole and the ack then jumps ahead).
    fn keep_unechoed(&mut self, below: u32, now: u64, cfg: &Config) {
        // Feedback comes back within a few round trips or not at all: an
        // echo later than `LATE_ECHO_RTTS` times the direction's largest
        // RTT sample is not awaited (before any sample: no limit).
        let max_rtt = self.max_rtt;
        let expired = |tx_ts: u64| {
            max_rtt > 0 && tx_ts.saturating_add(max_rtt.saturating_mul(LATE_ECHO_RTTS)) < now
        };
        let late = &mut self.late;
        while late.front().is_some_and(|l| expired(l.ts)) {
            late.pop_front();
        }
        for (psn, slot) in self.window.iter() {
            if !lt(psn, below) {
                break;
            }
            if !slot.seen || slot.last.sampled || slot.coalesced || expired(slot.last.ts) {
                continue;
            }
            if late.len() >= cfg.window {
                late.pop_front();
            }
            late.push_back(LateTx {
                psn,
                tx_ts: slot.last.tx_ts,
                ev: slot.last.ev,
                sampled: false,
                ts: slot.last.ts,
                frame: slot.last.frame,
            });
        }
    }

    /// The transmission (`psn`, `tx_ts`) among those kept for a late echo.
    fn late_echo(&mut self, psn: u32, tx_ts: u32) -> Option<&mut LateTx> {
        let at = self.late.partition_point(|l| lt(l.psn, psn));
        self.late
            .range_mut(at..)
            .take_while(|l| l.psn == psn)
            .find(|l| l.tx_ts == tx_ts)
    }

    /// `psn`'s slot has just got `retx` set.
    fn track_retx(&mut self, psn: u32, cfg: &Config) {
        if self.retx_psns.len() >= cfg.window {
            self.forget_dropped_retx();
        }
        self.retx_psns.push(psn);
    }

    /// Forgets the PSNs whose slot the window dropped on overflow.
    fn forget_dropped_retx(&mut self) {
        let window = &self.window;
        self.retx_psns.retain(|&psn| window.get(psn).is_some());
    }

    /// Before the window drops every slot below `below`: the retransmitted
    /// ones not known to be spurious go to `pruned`, for a late DUP.
    fn prune_retx(&mut self, below: u32) {
        if !self.retx_psns.iter().any(|&psn| lt(psn, below)) {
            return;
        }
        self.forget_dropped_retx();
        // In PSN order, as the window holds them.
        let window = &self.window;
        self.retx_psns
            .sort_unstable_by_key(|&psn| diff(window.base(), psn));
        // A PSN twice: its slot was dropped and made again.
        self.retx_psns.dedup();
        let gone = self.retx_psns.partition_point(|&psn| lt(psn, below));
        for psn in self.retx_psns.drain(..gone) {
            let Some(slot) = window.get(psn) else {
                continue;
            };
            if slot.retx && !slot.spurious {
                self.pruned[self.pruned_at] = PrunedRetx {
                    psn,
                    tx_ts: slot.last.tx_ts,
                    frame: slot.last.frame,
                    lost_ev: slot.lost_ev,
                    valid: true,
                };
                self.pruned_at = (self.pruned_at + 1) % RING;
            }
        }
    }

    /// Records the pending RTT samples (`rtt_pending`).
    #[inline(never)]
    pub fn flush_rtt(&mut self) {
        let pending = &self.rtt_pending[..usize::from(self.rtt_pending_len)];
        for s in pending.iter().filter(|s| s.fabric >= 0) {
            self.fabric.record(s.fabric as u64);
        }
        for s in pending {
            match self.paths.get_mut(s.ev) {
                Some(p) => p.rtt.record(s.rtt),
                None => self.rtt_off_path.record(s.rtt),
            }
        }
        self.rtt_pending_len = 0;
    }

    fn mark_spurious(&mut self, lost_ev: Option<u16>) {
        self.c.spurious += 1;
        if let Some(ev) = lost_ev
            && let Some(p) = self.paths.get_mut(ev)
        {
            p.lost_inferred = p.lost_inferred.saturating_sub(1);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn advance(
        &mut self,
        frame: u64,
        ts: u64,
        cum_ack: u32,
        fb_seen_before: bool,
        cfg: &Config,
        v: &mut Verdict,
        done: &mut Vec<MsgDone>,
    ) {
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
        let _ = fb_seen_before;
        if let Some(s) = ended {
            let duration = ts.saturating_sub(s.start);
            v.stall = Some(StallMark {
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
                v.messages_completed = v.messages_completed.saturating_add(1);
                v.message_done(
                    done,
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
    fn leave_flight(&mut self, from: u32, to: u32) {
        let left = self
            .window
            .take_sum(from, to, |s| u64::from(std::mem::take(&mut s.flight)));
        self.c.bytes_in_flight = self.c.bytes_in_flight.saturating_sub(left);
    }

    /// Payload bytes in flight (`DirectionReport::bytes_in_flight`).
    pub fn bytes_in_flight(&self) -> u64 {
        self.c.bytes_in_flight
    }

    /// Every RTT sample of the direction, the `pending` ones included: the
    /// sum of its paths' histograms and `rtt_off_path`.
    fn ack_rtt_summary(&self, pending: &[RttSample]) -> Summary {
        let paths = self.paths.iter().map(|(_, p)| &p.rtt);
        let mut all = LazyHist::sum(paths.chain([&self.rtt_off_path]));
        for s in pending {
            all.record(s.rtt);
        }
        all.summary()
    }

    /// The direction's report; `now` decides which stalls are open.
    pub fn report(&self, now: u64, cfg: &Config) -> DirectionReport {
        // RTT samples not yet recorded count as if they were.
        let pending = &self.rtt_pending[..usize::from(self.rtt_pending_len)];
        let mut stalls = self.stalls.clone();
        let open = match &self.stall {
            Some(s) => Some(StallReport {
                start_ns: s.start,
                duration_ns: now.saturating_sub(s.start),
                open: true,
                end_cause: s.first_event.unwrap_or("open"),
                end_frame: None,
                cum_ack: self.cum,
                outstanding_packets: s.outstanding,
                paths_in_flight: s.paths.clone(),
                retransmissions: s.retransmissions,
            }),
            None if self.fb_seen
                && self.outstanding()
                && now.saturating_sub(self.stall_ref) > cfg.stall_threshold_ns =>
            {
                Some(StallReport {
                    start_ns: self.stall_ref,
                    duration_ns: now.saturating_sub(self.stall_ref),
                    open: true,
                    end_cause: "open",
                    end_frame: None,
                    cum_ack: self.cum,
                    outstanding_packets: self.outstanding_packets(),
                    paths_in_flight: self.paths_in_flight(),
                    retransmissions: 0,
                })
            }
            None => None,
        };
        stalls.extend(open);

        let mut paths: Vec<PathReport> = self
            .paths
            .iter()
            .map(|(ev, p)| PathReport {
                ev,
                packets: p.packets,
                data_packets: p.data_packets,
                data_bytes: p.data_bytes,
                retransmissions: p.retransmissions,
                lost: p.lost,
                lost_inferred: p.lost_inferred,
                reordered: p.reordered,
                ce_marked: p.ce_marked,
                ack_rtt_ns: p
                    .rtt
                    .summary_with(pending.iter().filter(|s| s.ev == ev).map(|s| s.rtt)),
            })
            .collect();
        paths.sort_by_key(|p| p.ev);

        // The counters are indexed by code (`nack_index`, `cnp_index`); the
        // names are the spec's, from proto-parse (an undefined value's slot
        // is "unknown").
        let nacks_by_code = (0..=u8::MAX)
            .zip(self.nacks_by_code)
            .filter(|(_, n)| *n > 0)
            .map(|(code, n)| (NackCode::from_raw(code).name().to_owned(), n))
            .collect();
        let cnps_by_reason = (0..=u8::MAX)
            .zip(self.cnps_by_reason)
            .filter(|(_, n)| *n > 0)
            .map(|(reason, n)| (CnpReason::from_raw(reason).name().to_owned(), n))
            .collect();
        let goodput_bps = match self.first_data_ts {
            Some(first) if self.last_data_ts > first => {
                (u128::from(self.c.goodput_bytes) * 8 * 1_000_000_000
                    / u128::from(self.last_data_ts - first)) as u64
            }
            _ => 0,
        };
        let c = &self.c;
        DirectionReport {
            src: self.key.src,
            dst: self.key.dst,
            src_conn: self.key.src_conn,
            dst_conn: self.key.dst_conn,
            first_frame: self.first_frame,
            first_ts_ns: self.first_ts,
            last_ts_ns: self.last_ts,
            data_packets: c.data_packets,
            data_bytes: c.data_bytes,
            goodput_bytes: c.goodput_bytes,
            goodput_bps,
            retransmissions: c.retransmissions,
            fast_retransmissions: c.fast,
            timeout_retransmissions: c.timeout,
            spurious_retransmissions: c.spurious,
            out_of_order: c.out_of_order,
            max_reorder_distance: self.max_reorder,
            trimmed: c.trimmed,
            ce_marked: c.ce_marked,
            ece: c.ece,
            acks: c.acks,
            nacks: c.nacks,
            nacks_by_code,
            cnps: c.cnps,
            cnps_by_reason,
            probes: c.probes,
            probe_replies: c.probe_replies,
            ctrl: c.ctrl,
            feedback_sent: c.feedback_sent,
            path_loss: c.path_loss,
            messages_completed: c.messages_completed,
            messages_delivered: c.messages_delivered,
            cum_ack: self.cum,
            highest_psn: self.highest,
            outstanding_packets: self.outstanding_packets(),
            bytes_in_flight: c.bytes_in_flight,
            max_bytes_in_flight: c.max_bytes_in_flight.max(c.bytes_in_flight),
            ack_rtt_ns: self.ack_rtt_summary(pending),
            fabric_rtt_ns: self.fabric.summary_with(
                pending
                    .iter()
                    .filter(|s| s.fabric >= 0)
                    .map(|s| s.fabric as u64),
            ),
            msg_completion_ns: LazyHist::sum([
                &self.by_op[0],
                &self.by_op[1],
                &self.acked_other_op,
            ])
            .summary(),
            msg_delivery_ns: self.msg_delivered.summary(),
            msg_completion_by_op_ns: [
                ("send", self.by_op[0].summary()),
                ("write", self.by_op[1].summary()),
                ("read", self.by_op[2].summary()),
            ]
            .into_iter()
            .collect(),
            stalls,
            stalls_dropped: self.stalls_dropped,
            paths,
            window_overflow: self.window.overflow,
            messages_evicted: self.messages_evicted,
            lint: BTreeMap::new(),
        }
    }
}

/// The captured transmissions of one PSN, as the window holds them (the
/// first and the latest).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PsnTxs {
    /// Transmissions captured (saturating).
    pub count: u8,
    pub first_frame: u64,
    /// tx_ts and ev of the first and of the latest transmission.
    pub first: (u32, u16),
    pub last: (u32, u16),
}

/// What the conformance lint (`crate::lint`) reads of a direction: the
/// engine's state after the packet being judged.
impl Dir {
    /// The cumulative ack (the highest any feedback carried).
    pub(crate) fn cum_ack(&self) -> Option<u32> {
        self.cum
    }

    /// The highest PSN captured on the direction.
    pub(crate) fn highest_psn(&self) -> Option<u32> {
        self.highest
    }

    /// `psn` is below the cumulative ack or SACKed.
    pub(crate) fn acked(&self, psn: u32) -> bool {
        self.cum.is_some_and(|c| lt(psn, c)) || self.window.get(psn).is_some_and(|s| s.sacked)
    }

    /// Path `ev`'s latest path_seq in order and its packets, if tracked.
    pub(crate) fn path_seq(&self, ev: u16) -> Option<(u16, u64)> {
        self.paths.get(ev).map(|p| (p.last_seq, p.packets))
    }

    /// Whether the window holds a slot for `psn` (captured or not).
    pub(crate) fn tracks(&self, psn: u32) -> bool {
        self.window.get(psn).is_some()
    }

    /// The transmissions of `psn` captured, while the window holds it.
    pub(crate) fn transmissions(&self, psn: u32) -> Option<PsnTxs> {
        let s = self.window.get(psn)?;
        s.seen.then_some(PsnTxs {
            count: s.count,
            first_frame: s.first.frame,
            first: (s.first.tx_ts, s.first.ev),
            last: (s.last.tx_ts, s.last.ev),
        })
    }
}
