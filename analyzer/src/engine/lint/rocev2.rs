//! RoCEv2 RC rules: what the InfiniBand transport's reliable connected
//! service (IBTA Vol. 1, chapter 9.7, carried over UDP by the RoCEv2
//! annex) asks of a requester and a responder, judged on the packets of
//! one request flow of the engine (`(requester, responder, dest QP)`; its
//! responses are the packets the engine matched to it).
//!
//! The engine's verdict says whether a request is a retransmission (its
//! PSN not beyond the highest of the flow); the rules keep, per flow, two
//! models of the sequence in [`FlowState`]: the PSN the requester's next
//! new request must carry, and the PSN the responder expects next (what
//! a responder-side capture shows arriving). PSNs are 24 bits and every
//! comparison is serial (`proto_parse::rocev2::sext24`).
//!
//! A READ of `len` bytes takes `ceil(len / PMTU)` PSNs (one at least).
//! The PMTU is not on the wire: it is learned from a first or middle
//! packet (of a request or a READ response), whose payload is exactly one
//! PMTU; until then every PMTU of IBTA (256 to 4096 bytes) is allowed, and
//! the PSN after a READ is exact once its last response is captured.

use std::net::IpAddr;

use proto_parse::rocev2::{
    NakCode, RequestOp as RoceOp, Role as RoceRole, Syndrome, role as roce_role, sext24,
};
use rustc_hash::FxHashMap;

use super::rule::{Protocol, Rule, RuleId, Severity, Vantage};
use super::{ConnIds, Ctx, Evidence, Side};
use crate::observation::RoceObs;

const fn rule(
    id: &'static str,
    severity: Severity,
    vantage: Vantage,
    spec_section: &'static str,
    statement: &'static str,
    evidence: &'static str,
) -> Rule {
    Rule::new(Protocol::RoceV2, id, spec_section, statement, evidence)
        .with_severity(severity)
        .judged_from(vantage)
}

pub(super) const RULES: &[Rule] = &[
    rule(
        "RC-REQ-001",
        Severity::Error,
        Vantage::Sender,
        "IBTA 9.7 (go-back-N)",
        "After a PSN sequence error NAK, the first request the requester retransmits once it \
         can react (--reaction-min, default 10 us, after the NAK) carries the NAK's PSN \
         (go-back-N restarts where the responder's sequence broke), or continues a go-back-N \
         replay begun before the NAK that has yet to reach that PSN.",
        "retransmission with PSN {observed} where the sequence error NAK of frame {related} \
         asked for PSN {expected}.",
    )
    .because(
        "what the requester sent once the NAK reached it: only its capture orders the two, without \
         loss or reordering",
    ),
    rule(
        "RC-REQ-002",
        Severity::Error,
        Vantage::Sender,
        "IBTA 9.7 (PSN)",
        "Each new request packet carries the PSN after its predecessor's, mod 2^24 (a SEND or \
         WRITE packet and an atomic take one PSN, a READ one per response packet).",
        "new request with PSN {observed} where {expected} was next.",
    )
    .because(
        "in the requester's capture nothing is lost or reordered yet; elsewhere a lost PSN looks \
         skipped",
    ),
    rule(
        "RC-REQ-003",
        Severity::Error,
        Vantage::Either,
        "IBTA 9.7 (RNR NAK timer)",
        "After an RNR NAK, the requester retries no earlier than the RNR NAK timer its \
         syndrome encodes (0.01 to 655.36 ms); requests sent before it could react \
         (--reaction-min after the NAK) were no retry.",
        "retry {observed} ns after the RNR NAK of frame {related}, whose timer asked for at \
         least {expected} ns.",
    )
    .because("the time from an RNR NAK to the retry can only grow on the way from the requester"),
    rule(
        "RC-RSP-001",
        Severity::Error,
        Vantage::Receiver,
        "IBTA C9-105 (duplicate request)",
        "A duplicate request (PSN below the expected PSN) with AckReq set, or a duplicate READ \
         or atomic, is answered again (ACK, READ responses or atomic ACK) before its PSN \
         arrives once more.",
        "duplicate PSN {observed} arrived again with no response from the responder since its \
         previous copy (frame {related}).",
    )
    .because("what arrived at the responder, and when it answered: only in its capture"),
    rule(
        "RC-RSP-002",
        Severity::Error,
        Vantage::Receiver,
        "IBTA 9.7 (PSN sequence error NAK)",
        "An out-of-sequence request (PSN beyond the expected PSN) is answered by a PSN \
         sequence error NAK carrying the expected PSN, before the expected PSN arrives.",
        "PSN {observed} where a sequence error NAK for the expected PSN {expected} was due \
         (out-of-sequence request in frame {related}).",
    )
    .because("what arrived at the responder, and when it answered: only in its capture"),
    rule(
        "RC-RSP-003",
        Severity::Error,
        Vantage::Either,
        "IBTA 9.7 (PSN sequence error NAK)",
        "A responder NAKs a sequence error once: no second PSN sequence error NAK for the same \
         PSN before a request with that PSN was captured.",
        "second sequence error NAK for PSN {observed} (the first in frame {related}) with no \
         request of that PSN in between.",
    )
    .because("two NAKs and the requests between them, in the order they pass any capture point"),
    rule(
        "RC-RSP-004",
        Severity::Error,
        Vantage::Either,
        "IBTA 9.7 (AETH syndrome)",
        "An AETH syndrome is valid: reserved bit 7 clear, not the reserved kind 0b10, NAK codes \
         0 to 4 only; READ responses and atomic ACKs carry an ACK syndrome.",
        "AETH syndrome {observed:x} on opcode {expected:x}.",
    )
    .because("the response alone"),
    rule(
        "RC-RSP-005",
        Severity::Error,
        Vantage::Either,
        "IBTA 9.7 (MSN)",
        "The MSN of a responder's AETH never moves backwards (24-bit serial arithmetic).",
        "MSN {observed} after MSN {expected} in the flow's previous response (frame {related}).",
    )
    .because(
        "the responses' MSNs: a later response passes any point on the way after an earlier one on \
         the same path",
    ),
    rule(
        "RC-RSP-006",
        Severity::Error,
        Vantage::Either,
        "IBTA 9.7 (MSN)",
        "The MSN advances by no more than the request messages that ended (last or only \
         packets, READ and atomic requests) since the capture began.",
        "MSN advanced {observed} since the flow's first response while only {expected} request \
         messages ended.",
    )
    .because("a bound from every request message captured anywhere (loose on purpose)"),
    rule(
        "RC-RSP-007",
        Severity::Error,
        Vantage::Receiver,
        "IBTA 9.7 (ACK)",
        "An ACK (or atomic ACK) acknowledges only requests that arrived: its PSN is below the \
         responder's expected PSN.",
        "ACK of PSN {observed} where PSN {expected} had not arrived.",
    )
    .because("what arrived at the responder before the ACK left: only in its capture"),
    rule(
        "RC-CNP-001",
        Severity::Warning,
        Vantage::Either,
        "DCQCN (CNP interval)",
        "A notification point sends at most one CNP per flow per CNP interval (--cnp-interval, \
         default DCQCN's 50 us; 0 turns the rule off).",
        "CNP {observed} ns after the flow's previous CNP (frame {related}); the interval is \
         {expected} ns.",
    )
    .because(
        "two CNPs of a flow can only come closer on the way from the notification point (a \
         warning)",
    ),
];

const GO_BACK_N: RuleId = RuleId::of("RC-REQ-001");
const PSN_CONTINUITY: RuleId = RuleId::of("RC-REQ-002");
const RNR_WAIT: RuleId = RuleId::of("RC-REQ-003");
const DUP_ANSWERED: RuleId = RuleId::of("RC-RSP-001");
const OOS_NAKED: RuleId = RuleId::of("RC-RSP-002");
const ONE_NAK: RuleId = RuleId::of("RC-RSP-003");
const SYNDROME: RuleId = RuleId::of("RC-RSP-004");
const MSN_MONOTONIC: RuleId = RuleId::of("RC-RSP-005");
const MSN_BOUND: RuleId = RuleId::of("RC-RSP-006");
const ACK_RECEIVED: RuleId = RuleId::of("RC-RSP-007");
const CNP_RATE: RuleId = RuleId::of("RC-CNP-001");

const PSN_MASK: u32 = 0x00FF_FFFF;

/// The path MTUs IBTA allows (bytes).
const PMTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

/// CNP senders remembered; beyond, the table starts again (as the engine's
/// per-sender maps do).
const MAX_CNP_FLOWS: usize = 1 << 16;

/// `b - a` in 24-bit serial arithmetic: positive when `b` is after `a`.
fn serial(a: u32, b: u32) -> i32 {
    sext24(b.wrapping_sub(a) & PSN_MASK)
}

fn psn_add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & PSN_MASK
}

/// PSNs a READ of `len` bytes takes at `pmtu`.
fn read_span(len: u32, pmtu: u32) -> u32 {
    len.div_ceil(pmtu).max(1)
}

/// The RNR NAK timer in ns (IBTA's 5-bit encoding: 0 is 655.36 ms, 1 to
/// 31 are 0.01 ms to 491.52 ms).
pub fn rnr_timer_ns(code: u8) -> u64 {
    const US: [u64; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    US[usize::from(code & 0x1f)] * 1_000
}

/// The PSN a sequence expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Exact(u32),
    /// After a READ at `psn` of `len` bytes, whose response count is not
    /// known yet: `psn + read_span(len, pmtu)`.
    AfterRead {
        psn: u32,
        len: u32,
    },
}

/// Where a PSN falls against what was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    InSequence,
    Duplicate,
    /// Beyond the expected PSN (carried).
    Ahead(u32),
    /// After a READ of unknown span, at none of its possible ends.
    Unsure,
}

impl Expect {
    /// The PSNs that may come next: one, or one per PMTU when it is not
    /// known.
    fn candidates(self, pmtu: Option<u32>) -> impl Iterator<Item = u32> {
        let (base, spans) = match self {
            Expect::Exact(e) => (e, [Some(0), None, None, None, None]),
            Expect::AfterRead { psn, len } => match pmtu {
                Some(p) => (psn, [Some(read_span(len, p)), None, None, None, None]),
                None => (psn, PMTUS.map(|p| Some(read_span(len, p)))),
            },
        };
        spans.into_iter().flatten().map(move |n| psn_add(base, n))
    }

    fn place(self, psn: u32, pmtu: Option<u32>) -> Place {
        if self.candidates(pmtu).any(|c| c == psn) {
            return Place::InSequence;
        }
        match self {
            Expect::Exact(e) if serial(e, psn) < 0 => Place::Duplicate,
            Expect::Exact(e) => Place::Ahead(e),
            Expect::AfterRead { psn: read, .. } => {
                let last = self
                    .candidates(pmtu)
                    .fold(read, |a, c| if serial(a, c) > 0 { c } else { a });
                if serial(read, psn) <= 0 {
                    Place::Duplicate
                } else if serial(last, psn) > 0 {
                    Place::Ahead(last)
                } else {
                    Place::Unsure
                }
            }
        }
    }

    /// The candidate nearest `psn`, to show in a finding.
    fn nearest(self, psn: u32, pmtu: Option<u32>) -> u32 {
        self.candidates(pmtu)
            .min_by_key(|&c| serial(c, psn).unsigned_abs())
            .unwrap_or(psn)
    }
}

/// What a request packet makes the next PSN.
fn after(psn: u32, op: RoceOp, dma_len: Option<u32>) -> Expect {
    match op {
        RoceOp::Read => Expect::AfterRead {
            psn,
            len: dma_len.unwrap_or(0),
        },
        RoceOp::Send | RoceOp::Write | RoceOp::Atomic => Expect::Exact(psn_add(psn, 1)),
    }
}

/// A PSN something waits for, and the frame that made it wait.
#[derive(Debug, Clone, Copy)]
struct Pending {
    psn: u32,
    frame: u64,
}

/// A sequence error NAK whose go-back-N restart is awaited (RC-REQ-001).
#[derive(Debug, Clone, Copy)]
struct GoBack {
    psn: u32,
    frame: u64,
    /// When the NAK was captured: requests sent less than the reaction
    /// time after it were on their way before the requester could react.
    ts: u64,
}

/// The requester's latest run of retransmissions in PSN order (a
/// go-back-N replay): when it started, and the PSN it sends next.
#[derive(Debug, Clone, Copy)]
struct Replay {
    since: u64,
    next: Expect,
}

#[derive(Debug, Clone, Copy)]
struct RnrWait {
    /// The PSN it NAKed: the retry's.
    psn: u32,
    frame: u64,
    ts: u64,
    wait_ns: u64,
}

/// The RC rules' state of one engine flow (made again when the engine
/// reuses the flow's slot). Fixed size: no per-packet memory.
#[derive(Debug, Default)]
pub(super) struct FlowState {
    /// The flow's destination QP (its requests'), for findings on its
    /// responses.
    qp: Option<u32>,
    pmtu: Option<u32>,
    /// Requester: what its next new request must carry.
    next_new: Option<Expect>,
    /// Responder: the PSN it expects next (from what was captured).
    expected: Option<Expect>,
    /// A sequence error NAK whose retransmission is awaited (RC-REQ-001).
    go_back: Option<GoBack>,
    /// The replay the requester's latest retransmissions make (RC-REQ-001).
    replay: Option<Replay>,
    /// An RNR NAK whose retry is awaited (RC-REQ-003).
    rnr: Option<RnrWait>,
    /// The PSN of the last sequence error NAK, until a request with it is
    /// captured (RC-RSP-003).
    naked: Option<Pending>,
    /// An out-of-sequence arrival not yet NAKed: the expected PSN
    /// (RC-RSP-002).
    unnaked: Option<Pending>,
    /// A duplicate arrival awaiting its answer (RC-RSP-001).
    duplicate: Option<Pending>,
    /// The last MSN and its frame; how far it advanced since the first.
    msn: Option<Pending>,
    msn_advance: u64,
    /// Request messages ended (RC-RSP-006).
    ended: u64,
}

/// The RC rules' state beyond flows: the last CNP per CNP flow.
#[derive(Debug)]
pub(super) struct State {
    cnp_interval_ns: u64,
    last_cnp: FxHashMap<(IpAddr, IpAddr, u32), (u64, u64)>,
}

impl State {
    pub(super) fn new(cnp_interval_ns: u64) -> State {
        State {
            cnp_interval_ns,
            last_cnp: FxHashMap::default(),
        }
    }
}

/// Checks one RoCEv2 packet. `flow`: the state of the request flow the
/// engine put it in (`None`: a response it matched to none).
pub(super) fn check_rocev2(
    ctx: &mut Ctx<'_>,
    r: &RoceObs,
    flow: Option<&mut FlowState>,
    state: &mut State,
) {
    let role = roce_role(r.opcode);
    if role == RoceRole::Cnp {
        check_cnp(ctx, r, state);
        return;
    }
    let Some(flow) = flow else {
        return;
    };
    match role {
        RoceRole::Request { op, last, .. } => request(ctx, r, flow, op, last),
        RoceRole::Ack | RoceRole::AtomicAck | RoceRole::ReadResponse { .. } => {
            as_request_flow(ctx, flow);
            response(ctx, r, flow, role);
        }
        RoceRole::Cnp | RoceRole::NotRc => {}
    }
}

/// A response's findings are about its request flow: its connection and
/// capture side are the requester's (so that a receiver-side rule applies
/// at the responder's capture).
fn as_request_flow(ctx: &mut Ctx<'_>, flow: &FlowState) {
    let (ConnIds::RoceV2 { .. }, Some(qp)) = (ctx.ids, flow.qp) else {
        return;
    };
    ctx.ids = ConnIds::RoceV2 { dest_qp: qp };
    ctx.reverse = !ctx.reverse;
    ctx.side = ctx.side.map(|s| match s {
        Side::Sender => Side::Receiver,
        Side::Receiver => Side::Sender,
        Side::Unknown => Side::Unknown,
    });
}

fn request(ctx: &mut Ctx<'_>, r: &RoceObs, flow: &mut FlowState, op: RoceOp, last: bool) {
    let psn = r.psn & PSN_MASK;
    let retransmission = ctx.verdict.retransmission.is_some();
    flow.qp = Some(r.dest_qp);
    if !last && matches!(op, RoceOp::Send | RoceOp::Write) {
        // A first or middle packet carries exactly one PMTU.
        learn_pmtu(flow, r.payload_len);
    }
    if last || matches!(op, RoceOp::Read | RoceOp::Atomic) {
        flow.ended += 1;
    }

    // Requester: go-back-N, the RNR wait, PSN continuity. A trigger (a
    // NAK) is answered by the requests sent at least a reaction time after
    // it was captured: those before left before the requester could react.
    let now = ctx.obs.ts_ns;
    let reaction = ctx.timings().reaction_min_ns;
    let replay = match flow.replay {
        Some(r) if retransmission && r.next.place(psn, flow.pmtu) == Place::InSequence => {
            Some(r.since)
        }
        _ if retransmission => Some(now),
        _ => None,
    };
    flow.replay = replay.map(|since| Replay {
        since,
        next: after(psn, op, r.dma_len),
    });
    if let Some(nak) = flow.go_back {
        if psn == nak.psn {
            flow.go_back = None;
        } else if retransmission && now >= nak.ts.saturating_add(reaction) {
            // A replay that began before the NAK and has yet to reach its
            // PSN goes back far enough: it will send it again.
            let covers = replay.is_some_and(|since| since < nak.ts) && serial(psn, nak.psn) > 0;
            if !covers {
                flow.go_back = None;
                if ctx.judges(GO_BACK_N.rule().vantage) {
                    ctx.report(
                        GO_BACK_N,
                        Evidence::new(psn, nak.psn).related(Some(nak.frame)),
                    );
                }
            }
        }
    }
    if let Some(rnr) = flow.rnr
        && (retransmission || psn == rnr.psn)
        && now >= rnr.ts.saturating_add(reaction)
    {
        flow.rnr = None;
        let waited = now.saturating_sub(rnr.ts);
        if waited < rnr.wait_ns {
            ctx.report(
                RNR_WAIT,
                Evidence::new(waited, rnr.wait_ns).related(Some(rnr.frame)),
            );
        }
    }
    if !retransmission {
        if let Some(next) = flow.next_new
            && next.place(psn, flow.pmtu) != Place::InSequence
            && ctx.judges(PSN_CONTINUITY.rule().vantage)
        {
            ctx.report(
                PSN_CONTINUITY,
                Evidence::new(psn, next.nearest(psn, flow.pmtu)),
            );
        }
        flow.next_new = Some(after(psn, op, r.dma_len));
    }

    // Responder: what it has to answer.
    if flow.naked.is_some_and(|n| n.psn == psn) {
        flow.naked = None;
    }
    let place = flow
        .expected
        .map_or(Place::Unsure, |e| e.place(psn, flow.pmtu));
    match place {
        Place::InSequence | Place::Unsure => {
            if place == Place::InSequence
                && let Some(u) = flow.unnaked.take()
                && ctx.judges(OOS_NAKED.rule().vantage)
            {
                ctx.report(OOS_NAKED, Evidence::new(psn, u.psn).related(Some(u.frame)));
            }
            flow.unnaked = None;
            flow.expected = Some(after(psn, op, r.dma_len));
        }
        Place::Duplicate => {
            let answerable = r.ack_req || matches!(op, RoceOp::Read | RoceOp::Atomic);
            match flow.duplicate {
                Some(d) if d.psn == psn => {
                    if ctx.judges(DUP_ANSWERED.rule().vantage) {
                        ctx.report(DUP_ANSWERED, Evidence::new(psn, psn).related(Some(d.frame)));
                    }
                    flow.duplicate = Some(Pending {
                        psn,
                        frame: ctx.obs.frame,
                    });
                }
                None if answerable => {
                    flow.duplicate = Some(Pending {
                        psn,
                        frame: ctx.obs.frame,
                    });
                }
                _ => {}
            }
        }
        Place::Ahead(expected) => {
            let naked = flow.naked.is_some_and(|n| n.psn == expected);
            if !naked && flow.unnaked.is_none() {
                flow.unnaked = Some(Pending {
                    psn: expected,
                    frame: ctx.obs.frame,
                });
            }
        }
    }
}

fn learn_pmtu(flow: &mut FlowState, payload_len: u32) {
    if PMTUS.contains(&payload_len) {
        flow.pmtu = Some(payload_len);
    }
}

fn response(ctx: &mut Ctx<'_>, r: &RoceObs, flow: &mut FlowState, role: RoceRole) {
    let psn = r.psn & PSN_MASK;
    let frame = ctx.obs.frame;
    flow.duplicate = None;
    if let RoceRole::ReadResponse { last } = role {
        if last {
            // The READ's span is now known: the PSN after its last response.
            for e in [&mut flow.next_new, &mut flow.expected] {
                if let Some(Expect::AfterRead { psn: read, .. }) = *e
                    && serial(read, psn) >= 0
                {
                    *e = Some(Expect::Exact(psn_add(psn, 1)));
                }
            }
        } else {
            learn_pmtu(flow, r.payload_len);
        }
    }
    let Some(byte) = r.syndrome else {
        return;
    };
    let syndrome = Syndrome::from_byte(byte);
    let valid = byte & 0x80 == 0
        && match syndrome {
            Syndrome::Ack { .. } => true,
            Syndrome::RnrNak { .. } | Syndrome::Nak(_) if role != RoceRole::Ack => false,
            Syndrome::RnrNak { .. } => true,
            Syndrome::Nak(code) => !matches!(code, NakCode::Unknown(_)),
            Syndrome::Reserved { .. } => false,
        };
    if !valid {
        ctx.report(SYNDROME, Evidence::new(byte, u8::from(r.opcode)));
    }
    check_msn(ctx, r, flow);

    // An ACK covers only what arrived: its PSN is below the expected PSN.
    if syndrome.is_ack()
        && matches!(role, RoceRole::Ack | RoceRole::AtomicAck)
        && let Some(Expect::Exact(expected)) = flow.expected
        && serial(expected, psn) >= 0
    {
        if ctx.judges(ACK_RECEIVED.rule().vantage) {
            ctx.report(ACK_RECEIVED, Evidence::new(psn, expected));
        }
        // The responder's view wins from here: one finding per hole.
        flow.expected = Some(Expect::Exact(psn_add(psn, 1)));
        flow.unnaked = None;
    }
    // An out-of-sequence arrival is NAKed with the expected PSN.
    if let Some(u) = flow.unnaked
        && !syndrome.is_ack()
    {
        flow.unnaked = None;
        if syndrome == Syndrome::Nak(NakCode::PsnSequenceError) && psn != u.psn {
            if ctx.judges(OOS_NAKED.rule().vantage) {
                ctx.report(OOS_NAKED, Evidence::new(psn, u.psn).related(Some(u.frame)));
            }
            // The responder's view wins from here.
            flow.expected = Some(Expect::Exact(psn));
        }
    }

    match syndrome {
        Syndrome::Nak(NakCode::PsnSequenceError) => {
            if let Some(n) = flow.naked
                && n.psn == psn
            {
                ctx.report(ONE_NAK, Evidence::new(psn, psn).related(Some(n.frame)));
            }
            flow.naked = Some(Pending { psn, frame });
            flow.go_back = Some(GoBack {
                psn,
                frame,
                ts: ctx.obs.ts_ns,
            });
        }
        Syndrome::RnrNak { timer } => {
            flow.rnr = Some(RnrWait {
                psn,
                frame,
                ts: ctx.obs.ts_ns,
                wait_ns: rnr_timer_ns(timer),
            });
        }
        _ => {}
    }
}

fn check_msn(ctx: &mut Ctx<'_>, r: &RoceObs, flow: &mut FlowState) {
    let msn = r.msn & PSN_MASK;
    if let Some(prev) = flow.msn {
        let d = serial(prev.psn, msn);
        if d < 0 {
            ctx.report(
                MSN_MONOTONIC,
                Evidence::new(msn, prev.psn).related(Some(prev.frame)),
            );
        } else {
            flow.msn_advance += d as u64;
            if flow.msn_advance > flow.ended {
                ctx.report(MSN_BOUND, Evidence::new(flow.msn_advance, flow.ended));
                // Once: the next finding needs as many more messages.
                flow.msn_advance = flow.ended;
            }
        }
    }
    flow.msn = Some(Pending {
        psn: msn,
        frame: ctx.obs.frame,
    });
}

fn check_cnp(ctx: &mut Ctx<'_>, r: &RoceObs, state: &mut State) {
    if state.cnp_interval_ns == 0 {
        return;
    }
    let key = (ctx.obs.src, ctx.obs.dst, r.dest_qp);
    let now = (ctx.obs.ts_ns, ctx.obs.frame);
    if state.last_cnp.len() >= MAX_CNP_FLOWS && !state.last_cnp.contains_key(&key) {
        state.last_cnp.clear();
    }
    if let Some((ts, frame)) = state.last_cnp.insert(key, now) {
        let gap = now.0.saturating_sub(ts);
        if gap < state.cnp_interval_ns {
            ctx.report(
                CNP_RATE,
                Evidence::new(gap, state.cnp_interval_ns).related(Some(frame)),
            );
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn serial_arithmetic_wraps_at_24_bits() {
        assert_eq!(serial(0xFF_FFFF, 0), 1);
        assert_eq!(serial(0, 0xFF_FFFF), -1);
        assert_eq!(psn_add(0xFF_FFFE, 3), 1);
        assert_eq!(serial(5, 0x80_0004), 0x7F_FFFF);
        assert_eq!(serial(5, 0x80_0005), -0x80_0000);
    }

    #[test]
    fn the_rnr_timer_encoding() {
        assert_eq!(rnr_timer_ns(0), 655_360_000);
        assert_eq!(rnr_timer_ns(1), 10_000);
        assert_eq!(rnr_timer_ns(14), 1_280_000);
        assert_eq!(rnr_timer_ns(31), 491_520_000);
    }

    #[test]
    fn after_a_read_every_pmtu_is_allowed_until_one_is_known() {
        let e = Expect::AfterRead {
            psn: 0xFF_FFFE,
            len: 4096,
        };
        // 4096 bytes: 16, 8, 4, 2 or 1 response PSNs.
        for n in [16, 8, 4, 2, 1] {
            assert_eq!(e.place(psn_add(0xFF_FFFE, n), None), Place::InSequence);
        }
        assert_eq!(e.place(psn_add(0xFF_FFFE, 3), None), Place::Unsure);
        assert_eq!(e.place(psn_add(0xFF_FFFE, 17), None), Place::Ahead(14));
        assert_eq!(e.place(0xFF_FFFE, None), Place::Duplicate);
        assert_eq!(
            e.place(psn_add(0xFF_FFFE, 4), Some(1024)),
            Place::InSequence
        );
        assert_eq!(e.place(psn_add(0xFF_FFFE, 8), Some(1024)), Place::Ahead(2));
        assert_eq!(e.nearest(psn_add(0xFF_FFFE, 5), Some(1024)), 2);
    }
}
