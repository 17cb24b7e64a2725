//! RoCEv2 RC flows. A flow is `(src IP, dst IP, dest QP)` of the requests
//! it carries (both ends may use one QP number, so the IPs are part of the
//! key). Responses (ACK, NAK, RNR NAK, READ responses, atomic ACKs, CNPs)
//! travel to the requester's QP; they are matched to the request flow
//! going the other way between the same hosts whose outstanding PSNs the
//! response's PSN belongs to (24-bit serial arithmetic), and the match is
//! cached until a later response contradicts it. A CNP's PSN is not a
//! sequence number: a CNP never makes a match, it follows one. A CNP that
//! comes before its QP's pairing is known (ECN marks start with the first
//! requests, before the first response) is held, per response key, and
//! counted on the flow its key is first matched to ([`HeldCnps`]).
//!
//! PSNs are 24 bits; they are extended to 32 bits against the flow's
//! highest PSN so the serial arithmetic of [`super::window`] applies.

use std::collections::VecDeque;
use std::net::IpAddr;

use proto_parse::rocev2::{NakCode, PSN_MASK, RequestOp, Role, Syndrome, role, sext24};
use rustc_hash::FxHashMap;

use super::direction::ip_bits;
use super::hist::LazyHist;
use super::report::RoceFlowReport;
use super::verdict::{
    MsgDone, MsgView, ReadProgress, Retransmission, RetxKind, RoceFacts, Verdict,
};
use super::window::{Window, diff, lt};
use super::{Config, StateSize};
use crate::observation::{Observation, RoceObs};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct RoceKey {
    src: IpAddr,
    dst: IpAddr,
    qp: u32,
}

/// `RoceKey` packed for fast hashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Packed(u128, u128, u32);

impl RoceKey {
    fn packed(&self) -> Packed {
        Packed(ip_bits(self.src), ip_bits(self.dst), self.qp)
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct RSlot {
    seen: bool,
    sampled: bool,
    /// Retransmitted: no RTT sample (Karn), RoCEv2 has no echo timestamp.
    retx: bool,
    /// What the PSN adds to the flow's bytes in flight: its request's
    /// payload while captured and not acknowledged (it fits the padding).
    flight: u32,
    frame: u64,
    ts: u64,
}

/// Index of `op` in `RoceFlow::by_op`.
fn op_index(op: RequestOp) -> usize {
    match op {
        RequestOp::Send => 0,
        RequestOp::Write => 1,
        RequestOp::Read => 2,
        RequestOp::Atomic => 3,
    }
}

/// A request packet's place in its message (`Role::Request`).
#[derive(Debug, Clone, Copy)]
struct Request {
    op: RequestOp,
    first: bool,
    last: bool,
}

/// A request message not yet completed, in posting order: an RC QP
/// completes its work requests in the order they were posted.
#[derive(Debug, Clone)]
struct RMsg {
    op: RequestOp,
    /// Frame of its first request packet.
    frame: u64,
    /// Capture time of its first request packet.
    ts: u64,
    /// PSN of its first request packet.
    psn: u32,
    /// SEND/WRITE: PSN of its last request packet, once captured.
    /// READ/atomic: PSN of its last response, once captured.
    last: Option<u32>,
    /// READ/atomic: most response PSNs it can take (its RETH length at the
    /// smallest path MTU, 256 bytes; 1 for an atomic); 0 for SEND/WRITE.
    span: u32,
    /// READ/atomic: the responses accepted in order so far (the requester
    /// takes response PSNs in sequence and discards one beyond a gap).
    accepted: u32,
    /// Its own condition is met (SEND/WRITE: acknowledged through `last`;
    /// READ/atomic: every response PSN captured); it completes once every
    /// message posted before it has.
    done: bool,
}

/// Smallest RoCEv2 path MTU: a READ of `n` bytes takes at most
/// `ceil(n / 256)` response PSNs.
const MIN_PMTU: u32 = 256;

#[derive(Debug, Default, Clone, Copy)]
struct RCounters {
    data_packets: u64,
    data_bytes: u64,
    retransmissions: u64,
    fast_retransmissions: u64,
    timeout_retransmissions: u64,
    spurious_retransmissions: u64,
    naks: u64,
    rnr_naks: u64,
    acks: u64,
    cnps: u64,
    ce_marked: u64,
    read_requests: u64,
    read_response_packets: u64,
    messages_completed: u64,
    ect_packets: u64,
    fecn: u64,
    becn: u64,
    /// The sum of the window's `RSlot::flight`, and its largest value
    /// before the last time it went down (with the current value: the
    /// largest so far).
    bytes_in_flight: u64,
    max_bytes_in_flight: u64,
}

/// One RoCEv2 request flow and the responses to it: the RoCEv2
/// counterpart of a MetaRoCE [`super::direction::Direction`] (one
/// direction of data and what acknowledges it), named like its report
/// (`RoceFlowReport`, as a direction's is `DirectionReport`).
pub(crate) struct RoceFlow {
    key: RoceKey,
    pub first_frame: u64,
    last_ts: u64,
    c: RCounters,
    /// NAKs by code, by [`nak_slot`].
    naks_by_code: [u64; NAK_SLOTS],
    /// 24-bit PSN of the first request captured.
    first_psn: Option<u32>,
    /// The first request's PSN, extended (the low end of the PSNs a
    /// response may name before any is acknowledged).
    low: Option<u32>,
    highest: Option<u32>,
    acked: Option<u32>,
    nak_pending: bool,
    window: Window<RSlot>,
    /// Messages posted and not yet completed, in posting order.
    msgs: VecDeque<RMsg>,
    /// Completion latency by op (send, write, read, atomic); the flow's
    /// is their sum, made by `report` (`LazyHist::sum`).
    by_op: [LazyHist; 4],
    rtt: LazyHist,
    /// Capture time of the flow's last CNP ([`RoceFacts::cnp_interval_ns`]).
    last_cnp_ts: Option<u64>,
}

/// Slots of `RoceFlow::naks_by_code`: codes 0..=4 (IBTA table 43), then every
/// reserved code in the last one.
const NAK_SLOTS: usize = 6;

fn nak_slot(code: NakCode) -> usize {
    usize::from(u8::from(code)).min(NAK_SLOTS - 1)
}

/// Extends a 24-bit PSN to 32 bits next to `reference` (a 32-bit PSN).
fn extend(psn24: u32, reference: Option<u32>) -> u32 {
    match reference {
        None => psn24,
        Some(r) => {
            let d = sext24(psn24.wrapping_sub(r) & PSN_MASK);
            r.wrapping_add(d as u32)
        }
    }
}

impl RoceFlow {
    /// The request flow's source, destination and destination QP.
    pub fn key(&self) -> (IpAddr, IpAddr, u32) {
        (self.key.src, self.key.dst, self.key.qp)
    }

    /// The request flow's source and destination addresses.
    pub fn addresses(&self) -> (std::net::IpAddr, std::net::IpAddr) {
        (self.key.src, self.key.dst)
    }

    fn new(key: RoceKey, frame: u64, ts: u64, cfg: &Config) -> RoceFlow {
        RoceFlow {
            key,
            first_frame: frame,
            last_ts: ts,
            c: RCounters::default(),
            naks_by_code: [0; NAK_SLOTS],
            first_psn: None,
            low: None,
            highest: None,
            acked: None,
            nak_pending: false,
            window: Window::new(cfg.window),
            msgs: VecDeque::new(),
            by_op: Default::default(),
            rtt: LazyHist::default(),
            last_cnp_ts: None,
        }
    }

    fn complete(
        &mut self,
        op: RequestOp,
        msg_id: u32,
        latency: u64,
        view: MsgView,
        v: &mut Verdict,
        done: &mut Vec<MsgDone>,
    ) {
        self.by_op[op_index(op)].record(latency);
        self.c.messages_completed += 1;
        v.messages_completed = v.messages_completed.saturating_add(1);
        v.message_done(
            done,
            MsgDone {
                msg_id,
                op: op.as_str(),
                view,
                latency_ns: latency,
            },
        );
    }

    fn request(
        &mut self,
        obs: &Observation,
        r: &RoceObs,
        request: Request,
        cfg: &Config,
        v: &mut Verdict,
    ) {
        let Request { op, first, last } = request;
        let ts = obs.ts_ns;
        self.c.data_packets += 1;
        self.c.data_bytes += u64::from(r.payload_len);
        let psn = extend(r.psn, self.highest);
        let is_retx = self.highest.is_some_and(|h| !lt(h, psn));
        if is_retx {
            self.c.retransmissions += 1;
            let acked = self.acked.is_some_and(|a| !lt(a, psn));
            let original = match self.window.get_mut(psn) {
                Some(slot) if slot.seen => {
                    slot.retx = true;
                    Some(slot.frame)
                }
                Some(slot) => {
                    // The first captured transmission of a PSN whose
                    // original was not captured: it is in flight now.
                    if !acked && slot.flight == 0 {
                        slot.flight = r.payload_len;
                        self.c.bytes_in_flight += u64::from(r.payload_len);
                    }
                    None
                }
                None => None,
            };
            let kind = if self.nak_pending {
                RetxKind::Fast
            } else if acked {
                RetxKind::Spurious
            } else {
                RetxKind::Timeout
            };
            *match kind {
                RetxKind::Fast => &mut self.c.fast_retransmissions,
                RetxKind::Timeout => &mut self.c.timeout_retransmissions,
                RetxKind::Spurious => &mut self.c.spurious_retransmissions,
            } += 1;
            v.retransmission = Some(Retransmission {
                original_frame: original,
                attempt: 1,
                kind,
                shown_spurious_by: None,
            });
            return;
        }
        self.nak_pending = false;
        self.first_psn.get_or_insert(r.psn);
        self.low.get_or_insert(psn);
        self.highest = Some(psn);
        // Slots dropped on overflow leave the bytes in flight.
        let c = &mut self.c;
        let slot = self.window.entry(psn, |s| {
            c.max_bytes_in_flight = c.max_bytes_in_flight.max(c.bytes_in_flight);
            c.bytes_in_flight = c.bytes_in_flight.saturating_sub(u64::from(s.flight));
        });
        if let Some(slot) = slot {
            *slot = RSlot {
                seen: true,
                sampled: false,
                retx: false,
                flight: r.payload_len,
                frame: obs.frame,
                ts,
            };
            self.c.bytes_in_flight += u64::from(r.payload_len);
        }
        if op == RequestOp::Read {
            self.c.read_requests += 1;
        }
        let span = match op {
            RequestOp::Read => r.dma_len.unwrap_or(0).div_ceil(MIN_PMTU).max(1),
            RequestOp::Atomic => 1,
            RequestOp::Send | RequestOp::Write => 0,
        };
        if first {
            if self.msgs.len() >= cfg.max_messages {
                self.msgs.pop_front();
            }
            self.msgs.push_back(RMsg {
                op,
                frame: obs.frame,
                ts,
                psn,
                last: None,
                span,
                accepted: 0,
                done: false,
            });
        }
        if last
            && let Some(m) = self.msgs.back_mut()
            && m.op == op
        {
            m.last.get_or_insert(psn);
        }
    }

    /// The PSNs below `to` leave the bytes in flight (acknowledged, or
    /// dropped from the window): every slot from the window's base (the
    /// acknowledged ones are pruned as the acknowledgement moves).
    fn leave_flight(&mut self, to: u32) {
        self.c.max_bytes_in_flight = self.c.max_bytes_in_flight.max(self.c.bytes_in_flight);
        let base = self.window.base();
        let left = self
            .window
            .take_sum(base, to, |s| u64::from(std::mem::take(&mut s.flight)));
        self.c.bytes_in_flight = self.c.bytes_in_flight.saturating_sub(left);
    }

    /// Payload bytes in flight (`RoceFlowReport::bytes_in_flight`).
    pub fn bytes_in_flight(&self) -> u64 {
        self.c.bytes_in_flight
    }

    /// Completes the messages at the front of the queue whose condition
    /// is met (in posting order: one not yet done holds back the rest).
    fn complete_in_order(&mut self, ts: u64, v: &mut Verdict, done: &mut Vec<MsgDone>) {
        while self.msgs.front().is_some_and(|m| m.done) {
            let Some(m) = self.msgs.pop_front() else {
                break;
            };
            let (id, view) = match m.op {
                RequestOp::Send | RequestOp::Write => (m.last.unwrap_or(m.psn), MsgView::Acked),
                RequestOp::Read | RequestOp::Atomic => (m.psn, MsgView::Read),
            };
            self.complete(m.op, id, ts.saturating_sub(m.ts), view, v, done);
        }
    }

    /// Responder acknowledged every PSN up to and including `psn`.
    fn ack_through(&mut self, psn: u32, ts: u64, v: &mut Verdict, done: &mut Vec<MsgDone>) {
        if let Some(slot) = self.window.get_mut(psn)
            && slot.seen
        {
            v.acked_frame = Some(slot.frame);
            if !slot.sampled && !slot.retx && ts >= slot.ts {
                slot.sampled = true;
                let rtt = ts - slot.ts;
                self.rtt.record(rtt);
                v.ack_rtt_ns = Some(rtt);
            }
        }
        if self.acked.is_none_or(|a| lt(a, psn)) {
            v.cum_ack_advance = Some(self.acked.map_or(0, |a| diff(a, psn) as u32));
            self.acked = Some(psn);
            self.leave_flight(psn.wrapping_add(1));
            self.window.prune_below(psn.wrapping_add(1));
        }
        // SEND and WRITE are done when acknowledged; a READ or atomic
        // only by its responses (below).
        for m in self.msgs.iter_mut() {
            if lt(psn, m.psn) {
                break;
            }
            if matches!(m.op, RequestOp::Send | RequestOp::Write) {
                match m.last {
                    Some(last) if !lt(psn, last) => m.done = true,
                    _ => break,
                }
            }
        }
        self.complete_in_order(ts, v, done);
    }

    /// A READ response (or atomic ACK, `op`) with PSN `psn` (extended),
    /// `last` of its request. The request it answers is the latest one
    /// posted at or before `psn`; the requester accepts its responses in
    /// PSN order only (one beyond a missing PSN is discarded, and the
    /// missing part is read again), so the request is done when its last
    /// response is accepted: every one of its response PSNs has arrived.
    /// Returns the frame of that request and, for a READ, the response's
    /// place among its responses ([`RoceFacts`]).
    fn response(
        &mut self,
        psn: u32,
        op: RequestOp,
        last: bool,
        ts: u64,
        v: &mut Verdict,
        done: &mut Vec<MsgDone>,
    ) -> (Option<u64>, Option<ReadProgress>) {
        let mut answered = (None, None);
        if let Some(m) = self
            .msgs
            .iter_mut()
            .rev()
            .find(|m| m.op == op && !lt(psn, m.psn))
        {
            answered.0 = Some(m.frame);
            let index = diff(m.psn, psn) as u32;
            let accepted = !m.done && index == m.accepted;
            if accepted {
                m.accepted += 1;
                if last {
                    m.last = Some(psn);
                    m.done = true;
                }
            }
            if op == RequestOp::Read {
                answered.1 = Some(ReadProgress {
                    index: index.saturating_add(1),
                    span: m.span,
                    accepted,
                    complete: accepted && last,
                });
            }
        }
        if self.highest.is_none_or(|h| lt(h, psn)) {
            // The READ consumed PSNs up to its responses'.
            self.highest = Some(psn);
        }
        self.complete_in_order(ts, v, done);
        answered
    }

    /// Whether a response naming the 24-bit `psn` (an ACK, NAK, READ
    /// response or atomic ACK: a sequence number) can answer this flow:
    /// from its cumulative ack (before any, the PSN before its first
    /// request) to one past the last PSN its requests may take.
    fn answers(&self, psn: u32) -> bool {
        let Some(highest) = self.highest else {
            return false;
        };
        let reach = self
            .msgs
            .iter()
            .filter(|m| m.span > 0 && !m.done)
            .map(|m| m.psn.wrapping_add(m.span - 1))
            .fold(highest, |a, b| if lt(a, b) { b } else { a });
        let low = match (self.acked, self.low) {
            (Some(a), _) => a,
            (None, Some(l)) => l.wrapping_sub(1),
            (None, None) => return false,
        };
        let psn = extend(psn, Some(highest));
        !lt(psn, low) && !lt(reach.wrapping_add(1), psn)
    }

    fn report(&self) -> RoceFlowReport {
        RoceFlowReport {
            src: self.key.src,
            dst: self.key.dst,
            dest_qp: self.key.qp,
            first_frame: self.first_frame,
            data_packets: self.c.data_packets,
            data_bytes: self.c.data_bytes,
            retransmissions: self.c.retransmissions,
            fast_retransmissions: self.c.fast_retransmissions,
            timeout_retransmissions: self.c.timeout_retransmissions,
            spurious_retransmissions: self.c.spurious_retransmissions,
            first_psn: self.first_psn,
            highest_psn: self.highest.map(|p| p & PSN_MASK),
            acked_psn: self.acked.map(|p| p & PSN_MASK),
            outstanding_psns: match (self.highest, self.acked) {
                (Some(h), Some(a)) if lt(a, h) => diff(a, h) as u32,
                _ => 0,
            },
            bytes_in_flight: self.c.bytes_in_flight,
            max_bytes_in_flight: self.c.max_bytes_in_flight.max(self.c.bytes_in_flight),
            naks: self.c.naks,
            naks_by_code: (0u8..)
                .zip(self.naks_by_code)
                .filter(|&(_, n)| n > 0)
                .map(|(code, n)| (NakCode::from(code).name(), n))
                .collect(),
            rnr_naks: self.c.rnr_naks,
            acks: self.c.acks,
            cnps: self.c.cnps,
            ce_marked: self.c.ce_marked,
            read_requests: self.c.read_requests,
            read_response_packets: self.c.read_response_packets,
            messages_completed: self.c.messages_completed,
            ect_packets: self.c.ect_packets,
            fecn: self.c.fecn,
            becn: self.c.becn,
            msg_completion_ns: LazyHist::sum(&self.by_op).summary(),
            msg_completion_by_op_ns: [
                ("send", self.by_op[0].summary()),
                ("write", self.by_op[1].summary()),
                ("read", self.by_op[2].summary()),
                ("atomic", self.by_op[3].summary()),
            ]
            .into_iter()
            .collect(),
            ack_rtt_ns: self.rtt.summary(),
            lint: Default::default(),
        }
    }
}

/// What CNPs received before their flow was known add to it (the
/// counters `RoceFlow::on_packet` and a matched CNP change).
#[derive(Debug, Default, Clone, Copy)]
struct HeldCnps {
    cnps: u64,
    ce_marked: u64,
    ect_packets: u64,
    fecn: u64,
    becn: u64,
    last_ts: u64,
}

/// Response keys whose CNPs wait for their flow; beyond this many, the
/// held CNPs are given up (they stay counted in `unmatched`).
const MAX_HELD_CNP_KEYS: usize = 4096;

#[derive(Default)]
pub(crate) struct RoceTable {
    flows: Vec<Option<RoceFlow>>,
    free: Vec<u32>,
    index: FxHashMap<Packed, u32>,
    /// Response key (responder -> requester, requester QP) -> request flow.
    assoc: FxHashMap<Packed, u32>,
    /// CNPs of response keys not matched to a flow yet, counted in
    /// `unmatched` until their key is matched (then on that flow).
    held_cnps: FxHashMap<Packed, HeldCnps>,
    pub evicted: u64,
    /// Responses matched to no flow: responses no flow answers, and CNPs
    /// whose key no later response matched (held, or given up when
    /// [`MAX_HELD_CNP_KEYS`] keys wait).
    pub unmatched: u64,
    pub not_rc: u64,
    /// The last packet's facts ([`crate::Engine::rocev2_facts`]).
    pub facts: RoceFacts,
}

impl RoceTable {
    /// RoceFlow `i`, if live (the lint's checks read it).
    pub fn flow(&self, i: u32) -> Option<&RoceFlow> {
        self.flows.get(i as usize).and_then(Option::as_ref)
    }

    pub fn live(&self) -> usize {
        self.index.len()
    }

    pub fn add_size(&self, s: &mut StateSize) {
        s.rocev2_flows = self.index.len() + self.assoc.len() + self.held_cnps.len();
        for f in self.flows.iter().flatten() {
            s.rocev2_slots += f.window.len();
            s.rocev2_messages += f.msgs.len();
        }
    }

    fn flow_index(&mut self, key: RoceKey, frame: u64, ts: u64, cfg: &Config) -> u32 {
        let packed = key.packed();
        if let Some(&i) = self.index.get(&packed) {
            return i;
        }
        if self.index.len() >= cfg.max_flows {
            self.evict();
        }
        let flow = RoceFlow::new(key, frame, ts, cfg);
        let i = match self.free.pop() {
            Some(i) => {
                self.flows[i as usize] = Some(flow);
                i
            }
            None => {
                self.flows.push(Some(flow));
                (self.flows.len() - 1) as u32
            }
        };
        self.index.insert(packed, i);
        i
    }

    fn evict(&mut self) {
        let mut ages: Vec<(u64, u32)> = self
            .flows
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.as_ref().map(|f| (f.last_ts, i as u32)))
            .collect();
        if ages.is_empty() {
            return;
        }
        let n = (ages.len() / 16).max(1);
        ages.select_nth_unstable(n - 1);
        for &(_, i) in &ages[..n] {
            if let Some(f) = self.flows[i as usize].take() {
                self.index.remove(&f.key.packed());
                self.free.push(i);
                self.evicted += 1;
            }
        }
        let flows = &self.flows;
        self.assoc
            .retain(|_, i| flows.get(*i as usize).is_some_and(Option::is_some));
    }

    /// The request flow a response packet answers. `sequenced`: its PSN
    /// is a sequence number (not a CNP's).
    ///
    /// The flow paired with the response's QP, while its PSNs agree;
    /// otherwise the one flow between the two hosts whose PSNs the
    /// response's belongs to, which becomes the pairing. Without such a
    /// flow the response stays with its pairing, or, with none, with the
    /// only flow between the hosts (unpaired: the next response decides).
    fn responder_flow(&mut self, obs: &Observation, r: &RoceObs, sequenced: bool) -> Option<u32> {
        let rk = response_key(obs, r);
        let live = |i: &u32| {
            self.flows
                .get(*i as usize)
                .and_then(Option::as_ref)
                .filter(|f| f.key.src == obs.dst && f.key.dst == obs.src)
        };
        let paired = self.assoc.get(&rk).filter(|i| live(i).is_some()).copied();
        if let Some(i) = paired
            && (!sequenced || live(&i).is_some_and(|f| f.answers(r.psn)))
        {
            return Some(i);
        }
        let (mut candidates, mut only) = (0, None);
        let (mut answering, mut answer) = (0, None);
        for (i, f) in self.flows.iter().enumerate() {
            let Some(f) = f else { continue };
            if f.key.src != obs.dst || f.key.dst != obs.src {
                continue;
            }
            candidates += 1;
            only = Some(i as u32);
            if sequenced && f.answers(r.psn) {
                answering += 1;
                answer = Some(i as u32);
            }
        }
        if answering == 1
            && let Some(i) = answer
        {
            // Bounded: a cache, rebuilt on demand.
            if self.assoc.len() >= 4 * self.index.len().max(16) {
                self.assoc.clear();
            }
            self.assoc.insert(rk, i);
            return Some(i);
        }
        paired.or(if candidates == 1 { only } else { None })
    }

    pub fn ingest(
        &mut self,
        obs: &Observation,
        r: &RoceObs,
        cfg: &Config,
        v: &mut Verdict,
        done: &mut Vec<MsgDone>,
    ) {
        let ts = obs.ts_ns;
        let ce = obs.ce();
        v.ce_marked = ce;
        self.facts = RoceFacts::default();
        // Set at the end: the early returns below have no facts.
        let mut facts = RoceFacts::default();
        match role(r.opcode) {
            Role::NotRc => self.not_rc += 1,
            Role::Request { op, first, last } => {
                let request = Request { op, first, last };
                let key = RoceKey {
                    src: obs.src,
                    dst: obs.dst,
                    qp: r.dest_qp,
                };
                let i = self.flow_index(key, obs.frame, ts, cfg);
                v.flow = Some(i);
                if let Some(f) = self.flows[i as usize].as_mut() {
                    f.on_packet(obs, r);
                    facts.expected_psn = f.highest.map(|h| h.wrapping_add(1) & PSN_MASK);
                    f.request(obs, r, request, cfg, v);
                }
            }
            role => {
                let sequenced = role != Role::Cnp;
                let Some(i) = self.responder_flow(obs, r, sequenced) else {
                    self.unmatched += 1;
                    if role == Role::Cnp {
                        v.cnp_rocev2 = true;
                        self.hold_cnp(obs, r);
                    }
                    return;
                };
                v.flow = Some(i);
                if !self.held_cnps.is_empty() {
                    self.release_cnps(obs, r, i);
                }
                let Some(f) = self.flows[i as usize].as_mut() else {
                    return;
                };
                f.on_packet(obs, r);
                let psn = extend(r.psn, f.highest);
                match role {
                    Role::Cnp => {
                        f.c.cnps += 1;
                        v.cnp_rocev2 = true;
                        facts.cnp_interval_ns = f.last_cnp_ts.map(|t| ts.saturating_sub(t));
                        f.last_cnp_ts = Some(ts);
                    }
                    Role::Ack => match r.syndrome.map(Syndrome::from_byte) {
                        Some(Syndrome::Ack { .. }) => {
                            f.c.acks += 1;
                            f.ack_through(psn, ts, v, done);
                        }
                        Some(Syndrome::RnrNak { .. }) => {
                            f.c.rnr_naks += 1;
                            v.rocev2_nak = r.syndrome;
                            f.ack_through(psn.wrapping_sub(1), ts, v, done);
                        }
                        Some(Syndrome::Nak(code)) => {
                            f.c.naks += 1;
                            f.naks_by_code[nak_slot(code)] += 1;
                            v.rocev2_nak = r.syndrome;
                            if code == NakCode::PsnSequenceError {
                                f.nak_pending = true;
                            }
                            f.ack_through(psn.wrapping_sub(1), ts, v, done);
                        }
                        _ => {}
                    },
                    Role::ReadResponse { last } => {
                        f.c.read_response_packets += 1;
                        // A READ response acknowledges every PSN up to its
                        // own (IBTA 9.7.5.1.2: an implicit ACK); the first
                        // one names the request's PSN (the RTT sample).
                        f.ack_through(psn, ts, v, done);
                        (facts.request_frame, facts.read) =
                            f.response(psn, RequestOp::Read, last, ts, v, done);
                    }
                    Role::AtomicAck => {
                        f.c.acks += 1;
                        f.ack_through(psn, ts, v, done);
                        (facts.request_frame, _) =
                            f.response(psn, RequestOp::Atomic, true, ts, v, done);
                    }
                    _ => {}
                }
            }
        }
        self.facts = facts;
    }

    /// A CNP matched to no flow: held under its response key until a
    /// response (or CNP) of that key is matched.
    #[cold]
    fn hold_cnp(&mut self, obs: &Observation, r: &RoceObs) {
        let key = response_key(obs, r);
        if self.held_cnps.len() >= MAX_HELD_CNP_KEYS && !self.held_cnps.contains_key(&key) {
            // Given up: they stay counted in `unmatched`.
            self.held_cnps.clear();
        }
        let h = self.held_cnps.entry(key).or_default();
        h.cnps += 1;
        h.ce_marked += u64::from(obs.ce());
        h.ect_packets += u64::from(obs.ecn != 0);
        h.fecn += u64::from(r.fecn);
        h.becn += u64::from(r.becn);
        h.last_ts = obs.ts_ns;
    }

    /// The response `obs` was matched to flow `i`: the CNPs held under its
    /// key are counted there (and leave `unmatched`).
    #[cold]
    fn release_cnps(&mut self, obs: &Observation, r: &RoceObs, i: u32) {
        let Some(h) = self.held_cnps.remove(&response_key(obs, r)) else {
            return;
        };
        let Some(f) = self.flows.get_mut(i as usize).and_then(Option::as_mut) else {
            return;
        };
        self.unmatched -= h.cnps;
        f.c.cnps += h.cnps;
        f.c.ce_marked += h.ce_marked;
        f.c.ect_packets += h.ect_packets;
        f.c.fecn += h.fecn;
        f.c.becn += h.becn;
        f.last_ts = f.last_ts.max(h.last_ts);
    }

    pub fn report(&self) -> Vec<RoceFlowReport> {
        let mut flows: Vec<RoceFlowReport> =
            self.flows.iter().flatten().map(RoceFlow::report).collect();
        flows.sort_by_key(|f| (f.first_frame, f.src, f.dst, f.dest_qp));
        flows
    }
}

/// A response's key: responder -> requester, the requester's QP.
fn response_key(obs: &Observation, r: &RoceObs) -> Packed {
    RoceKey {
        src: obs.src,
        dst: obs.dst,
        qp: r.dest_qp,
    }
    .packed()
}

impl RoceFlow {
    /// Every packet of the flow, requests and responses: time and marks.
    fn on_packet(&mut self, obs: &Observation, r: &RoceObs) {
        self.last_ts = obs.ts_ns;
        self.c.ce_marked += u64::from(obs.ce());
        self.c.ect_packets += u64::from(obs.ecn != 0);
        self.c.fecn += u64::from(r.fecn);
        self.c.becn += u64::from(r.becn);
    }
}
