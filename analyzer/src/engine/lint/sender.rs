//! Sender rules: what the host that sends a direction's DATA must do (spec
//! sections 2, 3, 4, 9 and 11): PSNs, tx_attempt and path_seq as it
//! numbers them, which PSNs it may send again, how it answers NACKs, credit
//! and congestion feedback.
//!
//! Every rule here is judged at a capture on the sender's host
//! (`Vantage::Sender`): there, what was captured is what was sent, in the
//! order it was sent, and feedback is captured when it reached the sender.
//! MR-SND-003 also judges, anywhere, what the tx_ts order of one sender's
//! packets proves (`Vantage::Either`); its gaps hold only at the sender
//! (findings of vantage sender, `Ctx::report_from`).
//! Checks on feedback get the [`Ctx`] of the direction the feedback
//! acknowledges (the DATA direction), so the vantage and the finding's
//! connection are that direction's.
//!
//! The state is per DATA direction and small: a few counters, the NACKs
//! awaiting an answer, one congestion measurement, and (only once a
//! feedback limited the credit) a ring of byte offsets of the latest PSNs.

use proto_parse::metaroce::{FbFlags, NackCode, psn_lt};

use super::rule::{Protocol, Rule, RuleId, Severity, Vantage};
use super::{Ctx, Evidence};
use crate::engine::direction::next_seq;
use crate::engine::verdict::{RetxKind, Verdict};
use crate::observation::{CrcCheck, DataObs, FbKind, FeedbackObs, MrObs, Observation};

const fn rule(
    id: &'static str,
    severity: Severity,
    spec_section: &'static str,
    statement: &'static str,
    evidence: &'static str,
) -> Rule {
    Rule::new(Protocol::MetaRoce, id, spec_section, statement, evidence)
        .with_severity(severity)
        .judged_from(Vantage::Sender)
}

pub(super) const RULES: &[Rule] = &[
    rule(
        "MR-SND-001",
        Severity::Error,
        "2, 9",
        "First transmissions carry contiguous PSNs: each new PSN is the one after the highest \
         already sent.",
        "first transmission of PSN {observed} where the next PSN is {expected}: the PSNs \
         between were skipped.",
    )
    .because(
        "in the sender's capture nothing is lost or reordered yet; elsewhere a lost PSN looks \
         skipped",
    ),
    rule(
        "MR-SND-002",
        Severity::Error,
        "2, 3",
        "tx_attempt counts the PSN's earlier transmissions: 0 on the first, n on the n-th \
         retransmission (saturating at 15).",
        "tx_attempt {observed} where {expected} earlier transmissions of the PSN were \
         captured (the first in frame {related}).",
    )
    .because(
        "only the sender's capture holds every earlier transmission; elsewhere a lost one is \
         missing from the count",
    ),
    Rule::new(
        Protocol::MetaRoce,
        "MR-SND-003",
        "2, 11.5",
        "path_seq grows by one with every non-CTRL packet a direction sends on an ev \
         (skipping 0 when it wraps).",
        "path_seq {observed} on ev {ev} where the next value is {expected}.",
    )
    .with_severity(Severity::Error)
    .judged_from(Vantage::Either)
    .because(
        "anywhere, a value at or below one of a packet sent before it (tx_ts) and a 0 on a \
         numbered path, which no loss or delay explains; a gap or a repeat only at the sender \
         (given or guessed), where path_seq is counted as packets leave (elsewhere a lost packet \
         is a gap, a delayed one a step back)",
    ),
    rule(
        "MR-SND-004",
        Severity::Warning,
        "9, 11.10",
        "A PSN is retransmitted only while no feedback has acknowledged it (cumulatively or \
         by SACK) for the sender's reaction time (--reaction-min, default 10 us); otherwise the \
         retransmission is spurious.",
        "retransmission of PSN {observed}, which the feedback of frame {related} had \
         already acknowledged (cumulatively or by SACK).",
    )
    .because(
        "the sender acts on the feedback it had received: only its capture shows what had arrived \
         when it sent",
    ),
    rule(
        "MR-SND-005",
        Severity::Warning,
        "4",
        "A NACK GAP or TRIMMED is answered: the named PSN is retransmitted (or acknowledged) \
         within the NACK bound: --nack-rtts RTTs of the NACK (default 8), and at least \
         --nack-min (default 2 ms).",
        "DATA {observed} us after the NACK of frame {related}, whose PSN {expected} was \
         neither retransmitted nor acknowledged since.",
    )
    .because(
        "the NACK's arrival and the retransmission's departure: both times only in the sender's \
         capture",
    ),
    rule(
        "MR-SND-006",
        Severity::Error,
        "4",
        "No new DATA goes past the credit the receiver advertised: its last byte lies at \
         most credit bytes beyond the cumulative ack of a feedback.",
        "the packet ends {observed} bytes beyond the cumulative ack of frame {related}, \
         whose credit was {expected} bytes (no feedback allowed more).",
    )
    .because("the credit the sender had received when it sent: only its capture orders the two"),
    rule(
        "MR-SND-007",
        Severity::Warning,
        "1, 4",
        "After a CNP or an ECE, the sender's DATA rate over the next window is lower than \
         before it: the window lasts --rate-window-rtts RTTs (default 4), at least \
         --rate-window-min (default 100 us), and starts one RTT, at least --reaction-min \
         (default 10 us), after the signal.",
        "{observed} bit/s sent in the window after the congestion signal of frame {related}, \
         where {expected} bit/s were sent before it.",
    )
    .because("the rate as sent, from when the signal reached the sender"),
];

const CONTIGUOUS: RuleId = RuleId::of("MR-SND-001");
const TX_ATTEMPT: RuleId = RuleId::of("MR-SND-002");
const PATH_SEQ: RuleId = RuleId::of("MR-SND-003");
const SPURIOUS: RuleId = RuleId::of("MR-SND-004");
const NACK_ANSWERED: RuleId = RuleId::of("MR-SND-005");
const CREDIT: RuleId = RuleId::of("MR-SND-006");
const CONGESTION: RuleId = RuleId::of("MR-SND-007");

/// NACKs awaiting an answer, per direction; more are not judged
/// (MR-SND-005's bound and MR-SND-007's window: `LintTimings`).
const NACKS: usize = 4;

/// MR-SND-006: byte offsets kept for the latest PSNs sent.
const OFFSETS: usize = 64;

/// MR-SND-004: the latest feedback packets that acknowledged something,
/// kept to name the one that acknowledged a PSN sent again.
const ACKS: usize = 4;

/// Per-direction state of the sender rules.
#[derive(Debug, Default)]
pub(super) struct DirState {
    /// The PSN after the highest first transmission (MR-SND-001).
    next_psn: Option<u32>,
    /// Payload bytes of every DATA transmission (MR-SND-007).
    bytes_sent: u64,
    /// The largest RTT sample of the direction.
    max_rtt_ns: u64,
    /// NACK GAP/TRIMMED awaiting a retransmission.
    nacks: [Option<PendingNack>; NACKS],
    /// Some of `nacks` is set.
    nacks_pending: bool,
    rate: Rate,
    credit: Option<Box<Credit>>,
    /// The latest feedback packets (MR-SND-004), a ring whose oldest
    /// entry is at `acks_at`.
    acks: [Option<Ack>; ACKS],
    acks_at: usize,
    /// The feedback that last moved the cumulative ack (MR-SND-004).
    cum_frame: Option<u64>,
}

/// What one feedback acknowledged: PSNs below `cum`, and those of its SACK
/// bitmap.
#[derive(Debug, Clone, Copy)]
struct Ack {
    frame: u64,
    ts: u64,
    cum: u32,
    sack_base: u32,
    sack: [u64; 4],
}

impl Ack {
    fn covers(&self, psn: u32) -> bool {
        if psn_lt(psn, self.cum) {
            return true;
        }
        let i = psn.wrapping_sub(self.sack_base) as usize;
        i < 256 && self.sack[i / 64] & (1 << (63 - i % 64)) != 0
    }
}

#[derive(Debug, Clone, Copy)]
struct PendingNack {
    psn: u32,
    frame: u64,
    ts: u64,
}

/// The DATA rate before and after a congestion signal (MR-SND-007).
#[derive(Debug, Default)]
struct Rate {
    /// Times and bytes sent before the DATA packet at that time, the
    /// latest refreshed once per window; the rate before a signal is
    /// measured from the older one (one to two windows back).
    checkpoints: [Option<(u64, u64)>; 2],
    measuring: Option<Measure>,
    /// The next time a DATA packet has something to do here (0: the
    /// first packet).
    due_ts: u64,
}

impl Rate {
    /// `due_ts` from the checkpoints and the measurement.
    fn update_due(&mut self, window: u64) {
        let checkpoint = self.checkpoints[1].map_or(0, |(at, _)| at.saturating_add(window));
        let measure = match self.measuring {
            Some(m) if m.start_bytes.is_none() => m.start_ts,
            Some(m) => m.end_ts,
            None => u64::MAX,
        };
        self.due_ts = checkpoint.min(measure);
    }
}

#[derive(Debug, Clone, Copy)]
struct Measure {
    signal_frame: u64,
    /// Bits per second before the signal.
    before_bps: u64,
    start_ts: u64,
    end_ts: u64,
    /// Bytes sent before the first DATA of the window.
    start_bytes: Option<u64>,
}

/// The credit a receiver granted (MR-SND-006), made at its first finite
/// credit.
#[derive(Debug)]
struct Credit {
    /// Bytes of first transmissions so far (stream offset of `next_psn`).
    sent: u64,
    /// Stream offset of the start of PSN `p`, at `p % OFFSETS`, for the
    /// latest `OFFSETS` PSNs below `next_psn`.
    offsets: [u64; OFFSETS],
    /// PSNs with an offset recorded below `next_psn` (at most `OFFSETS`).
    known: u32,
    /// The largest stream offset a feedback allowed, its frame and
    /// credit; `None` while the latest feedback was not credit-limited.
    allowed: Option<(u64, u64, u32)>,
}

impl Credit {
    /// An upper bound of the stream offset where PSN `psn` starts
    /// (exact while it is among the latest `OFFSETS`).
    fn start_of(&self, psn: u32, next: u32) -> u64 {
        let back = next.wrapping_sub(psn);
        if back == 0 || back > u32::MAX / 2 {
            // At or beyond the next PSN: nothing sent from there.
            return self.sent;
        }
        let back = back.min(self.known);
        if back == 0 {
            return self.sent;
        }
        self.offsets[(next.wrapping_sub(back) as usize) % OFFSETS]
    }
}

/// A DATA packet of the direction. The common packet ([`plain_data`])
/// takes the short path; the rest is out of line.
// Out of line, as every family's entry: inlined, the families' checks
// made the caller spill and keep the packet and connection checks out of
// line (more instructions per packet: docs/performance.md).
#[inline(never)]
pub(super) fn check_data(ctx: &mut Ctx<'_>, mr: &MrObs, d: &DataObs, state: &mut DirState) {
    if !ctx.judges(Vantage::Sender) {
        path_seq(ctx, mr);
        return;
    }
    if plain_data(state, ctx.obs, mr, ctx.verdict) {
        record_plain_data(state, mr, d);
        return;
    }
    check_data_slow(ctx, mr, u64::from(d.payload_len), state);
}

/// Whether a DATA packet is the common one, with no sender rule to judge:
/// the next first transmission, on a path in order, with no NACK
/// pending, no credit limit and no rate window due. Such a packet only
/// moves the next PSN and the bytes sent ([`record_plain_data`]). Read
/// without a check context by the lint's fast path
/// (`LintState::metaroce`).
#[inline(always)]
pub(super) fn plain_data(state: &DirState, obs: &Observation, mr: &MrObs, v: &Verdict) -> bool {
    path_in_order(v)
        && state.next_psn == Some(mr.psn)
        && mr.tx_attempt == 0
        && v.retransmission.is_none()
        && state.credit.is_none()
        && !state.nacks_pending
        && obs.ts_ns < state.rate.due_ts
}

/// Whether a packet's path_seq is the next of its path's previous packet,
/// or unused, as the engine found: no MR-SND-003 to judge, at any vantage.
#[inline(always)]
pub(super) fn path_in_order(v: &Verdict) -> bool {
    v.path_seq_expected.is_none() && v.path_seq_back.is_none()
}

/// What a [`plain_data`] packet changes.
#[inline(always)]
pub(super) fn record_plain_data(state: &mut DirState, mr: &MrObs, d: &DataObs) {
    state.next_psn = Some(mr.psn.wrapping_add(1));
    state.bytes_sent += u64::from(d.payload_len);
}

/// [`check_data`] for any other packet.
#[inline(never)]
fn check_data_slow(ctx: &mut Ctx<'_>, mr: &MrObs, bytes: u64, state: &mut DirState) {
    path_seq(ctx, mr);
    let psn = mr.psn;
    let ts = ctx.obs.ts_ns;
    let retx = ctx.verdict.retransmission.is_some();
    if state.next_psn == Some(psn) && state.credit.is_none() && !retx && mr.tx_attempt == 0 {
        state.next_psn = Some(psn.wrapping_add(1));
    } else {
        check_psn(ctx, mr, bytes, state);
    }
    if state.nacks_pending {
        check_nacks(ctx, psn, retx, state);
    }
    // MR-SND-007: bytes sent, and the rate's checkpoints and window.
    state.bytes_sent += bytes;
    if ts >= state.rate.due_ts {
        check_rate(ctx, ts, state.bytes_sent - bytes, state);
    }
}

/// MR-SND-001, 002, 004 and the stream offsets of 006, for a DATA packet
/// that is not the next first transmission (or under a credit limit).
#[inline(never)]
fn check_psn(ctx: &mut Ctx<'_>, mr: &MrObs, bytes: u64, state: &mut DirState) {
    let v = ctx.verdict;
    let psn = mr.psn;
    let first = mr.tx_attempt == 0 && v.retransmission.is_none();
    match state.next_psn {
        Some(next) if first && psn != next && !psn_lt(psn, next) => {
            ctx.report(CONTIGUOUS, Evidence::new(psn, next).ev(mr.ev));
        }
        _ => {}
    }
    if first || state.next_psn.is_some() {
        let next = state.next_psn.unwrap_or(psn);
        if !psn_lt(psn, next) {
            if let Some(credit) = state.credit.as_deref_mut() {
                on_new_psns(ctx, credit, next, psn, bytes);
            }
            state.next_psn = Some(psn.wrapping_add(1));
        }
    }

    check_tx_attempt(ctx, mr);

    // MR-SND-004: a retransmission of an acknowledged PSN, sent at least
    // a reaction time after the acknowledgement was captured (one sent
    // sooner left before the sender could know).
    if let Some(r) = v.retransmission
        && r.kind == RetxKind::Spurious
        && ctx.own.is_some_and(|dir| dir.acked(psn))
    {
        let (newer, older) = state.acks.split_at(state.acks_at);
        // The earliest of the latest feedback packets that covers it, else
        // the one that moved the cumulative ack where it is. Not covered
        // by any of them, it was acknowledged before the oldest.
        let mut latest = older.iter().chain(newer).flatten();
        let oldest = latest.clone().next().copied();
        let by = latest.find(|a| a.covers(psn)).copied();
        let acked_by_ts = by.or(oldest).map_or(0, |a| a.ts);
        let below_cum = ctx
            .own
            .and_then(|dir| dir.cum_ack())
            .is_some_and(|c| psn_lt(psn, c));
        let by = by
            .map(|a| a.frame)
            .or(state.cum_frame.filter(|_| below_cum));
        if ctx.obs.ts_ns >= acked_by_ts.saturating_add(ctx.timings().reaction_min_ns) {
            ctx.report(SPURIOUS, Evidence::new(psn, 0u32).ev(mr.ev).related(by));
        }
    }
}

/// MR-SND-005: the NACKs awaiting an answer, at a DATA packet.
#[inline(never)]
fn check_nacks(ctx: &mut Ctx<'_>, psn: u32, retx: bool, state: &mut DirState) {
    let ts = ctx.obs.ts_ns;
    let bound = ctx.timings().nack_bound(state.max_rtt_ns);
    for slot in &mut state.nacks {
        let Some(n) = *slot else { continue };
        let acked = ctx.own.is_some_and(|dir| dir.acked(n.psn));
        if acked || (n.psn == psn && retx) {
            *slot = None;
        } else if ts > n.ts.saturating_add(bound) {
            *slot = None;
            let us = (ts - n.ts) / 1000;
            ctx.report(
                NACK_ANSWERED,
                Evidence::new(us, n.psn).related(Some(n.frame)),
            );
        }
    }
    state.nacks_pending = state.nacks.iter().any(Option::is_some);
}

/// MR-SND-007 at a DATA packet past `Rate::due_ts`: a new checkpoint, the
/// start or the end of the window after a congestion signal. `before`:
/// the bytes sent before this packet.
#[inline(never)]
fn check_rate(ctx: &mut Ctx<'_>, ts: u64, before: u64, state: &mut DirState) {
    let window = ctx.timings().rate_window(state.max_rtt_ns);
    let rate = &mut state.rate;
    let [older, latest] = &mut rate.checkpoints;
    match latest {
        Some((at, _)) if ts.saturating_sub(*at) < window => {}
        _ => *older = latest.replace((ts, before)),
    }
    if let Some(m) = &mut rate.measuring {
        if ts >= m.start_ts && m.start_bytes.is_none() && ts < m.end_ts {
            m.start_bytes = Some(before);
        }
        if ts >= m.end_ts {
            let m = *m;
            rate.measuring = None;
            let sent = before - m.start_bytes.unwrap_or(before);
            let after_bps = bits_per_second(sent, m.end_ts - m.start_ts);
            if after_bps >= m.before_bps {
                ctx.report(
                    CONGESTION,
                    Evidence::new(after_bps, m.before_bps).related(Some(m.signal_frame)),
                );
            }
        }
    }
    rate.update_due(window);
}

fn bits_per_second(bytes: u64, ns: u64) -> u64 {
    if ns == 0 {
        return 0;
    }
    (u128::from(bytes) * 8 * 1_000_000_000 / u128::from(ns)).min(u128::from(u64::MAX)) as u64
}

/// First transmissions from `next` to `psn` (the PSNs between were
/// skipped): their stream offsets, and whether the last byte of `psn` lies
/// within the credit granted.
fn on_new_psns(ctx: &mut Ctx<'_>, credit: &mut Credit, next: u32, psn: u32, bytes: u64) {
    // Skipped PSNs start where this one does; past the ring, only this one
    // is recorded.
    let mut p = if psn.wrapping_sub(next) as usize >= OFFSETS {
        credit.known = 0;
        psn
    } else {
        next
    };
    loop {
        credit.offsets[(p as usize) % OFFSETS] = credit.sent;
        credit.known = (credit.known + 1).min(OFFSETS as u32);
        if p == psn {
            break;
        }
        p = p.wrapping_add(1);
    }
    credit.sent += bytes;
    if let Some((allowed, frame, granted)) = credit.allowed
        && credit.sent > allowed
    {
        ctx.report(
            CREDIT,
            Evidence::new(credit.sent - allowed + u64::from(granted), granted).related(Some(frame)),
        );
    }
}

/// MR-SND-002.
fn check_tx_attempt(ctx: &mut Ctx<'_>, mr: &MrObs) {
    if ctx.verdict.retransmission.is_none() {
        // The engine saw no earlier transmission and tx_attempt is 0.
        return;
    }
    let Some(dir) = ctx.own else { return };
    let Some(txs) = dir.transmissions(mr.psn) else {
        // Not in the window: below the cumulative ack, so sent (and
        // received) before.
        if mr.tx_attempt == 0 {
            let below = dir.cum_ack().is_some_and(|c| psn_lt(mr.psn, c));
            if below {
                ctx.report(TX_ATTEMPT, Evidence::new(0u8, 1u8).ev(mr.ev));
            }
        }
        return;
    };
    // `count` includes this packet.
    let earlier = txs.count.saturating_sub(1).min(15);
    let complete = dir.start_seen;
    let wrong = if complete && txs.count < u8::MAX {
        mr.tx_attempt != earlier
    } else {
        mr.tx_attempt < earlier
    };
    if wrong {
        let related = (earlier > 0).then_some(txs.first_frame);
        ctx.report(
            TX_ATTEMPT,
            Evidence::new(mr.tx_attempt, earlier)
                .ev(mr.ev)
                .related(related),
        );
    }
}

/// MR-SND-003 on any packet of the direction but DATA (the context is the
/// packet's own).
// Inline, unlike the other entries: its common path is two compares (the
// path in order), cheaper than the call (the check itself stays out of
// line in `check_path_seq`).
#[inline]
pub(super) fn check_packet(ctx: &mut Ctx<'_>, mr: &MrObs) {
    path_seq(ctx, mr);
}

#[inline]
fn path_seq(ctx: &mut Ctx<'_>, mr: &MrObs) {
    if !path_in_order(ctx.verdict) {
        check_path_seq(ctx, mr);
    }
}

/// MR-SND-003 from the engine's path state: anywhere, what no loss or
/// reordering on the way explains (a value at or below one the sender
/// sent earlier, and a 0 on a path that numbers its packets); at the
/// sender, every value that is not the next of the path's previous
/// packet. With the capture point guessed (`CapturePoint::Auto`) a value
/// only the sender can judge (a gap: elsewhere a loss) is recorded as a
/// finding of vantage sender, kept only where the host decided at the
/// end sends the direction; at a capture given as the receiver's or
/// unknown it is not judged.
#[inline(never)]
fn check_path_seq(ctx: &mut Ctx<'_>, mr: &MrObs) {
    if mr.checks.crc == CrcCheck::Bad {
        // Its header is not what was sent (MR-PKT-014 reports it).
        return;
    }
    let v = ctx.verdict;
    let seq = mr.path_seq;
    let anywhere = if seq == 0 {
        v.path_seq_expected
    } else {
        v.path_seq_back.map(next_seq)
    };
    let evidence = |expected: u16| Evidence::new(seq, expected).ev(mr.ev);
    match (ctx.at_sender(), anywhere, v.path_seq_expected) {
        (true, _, Some(expected)) => ctx.report(PATH_SEQ, evidence(expected)),
        (false, Some(expected), _) => ctx.report(PATH_SEQ, evidence(expected)),
        (false, None, Some(expected)) if ctx.side_guessed() => {
            ctx.report_from(PATH_SEQ, Vantage::Sender, evidence(expected))
        }
        _ => {}
    }
}

/// Whether a feedback about the direction is the common ACK, with nothing
/// for the sender rules but to remember it: an ACK with no congestion
/// signal (ECE) and no credit limit, to a sender never credit-limited.
/// Read without a check context by the lint's fast path
/// (`LintState::metaroce`); [`record_ack`] is what it changes.
#[inline(always)]
pub(super) fn plain_ack(state: &DirState, fb: &FeedbackObs) -> bool {
    matches!(fb.kind, FbKind::Ack { .. })
        && !fb.flags.contains(FbFlags::ECE)
        && fb.credit == u32::MAX
        && state.credit.is_none()
}

/// What every feedback about the direction changes: the largest RTT, the
/// latest feedback packets (MR-SND-004) and the one that last moved the
/// cumulative ack.
#[inline(always)]
pub(super) fn record_ack(
    state: &mut DirState,
    obs: &Observation,
    mr: &MrObs,
    fb: &FeedbackObs,
    v: &Verdict,
) {
    if let Some(rtt) = v.ack_rtt_ns {
        state.max_rtt_ns = state.max_rtt_ns.max(rtt);
    }
    let (sack_base, sack) = match fb.kind {
        // The observation's words past sack_words are 0.
        FbKind::Ack {
            sack_base, sack, ..
        } => (sack_base, sack),
        _ => (mr.psn, [0; 4]),
    };
    state.acks[state.acks_at] = Some(Ack {
        frame: obs.frame,
        ts: obs.ts_ns,
        cum: mr.psn,
        sack_base,
        sack,
    });
    state.acks_at = (state.acks_at + 1) % ACKS;
    if v.cum_ack_advance.is_some() {
        state.cum_frame = Some(obs.frame);
    }
}

/// A feedback about the direction (the context is the direction's).
#[inline(never)]
pub(super) fn check_feedback(
    ctx: &mut Ctx<'_>,
    mr: &MrObs,
    fb: &FeedbackObs,
    state: &mut DirState,
) {
    if !ctx.judges(Vantage::Sender) {
        return;
    }
    let v = ctx.verdict;
    let ts = ctx.obs.ts_ns;
    record_ack(state, ctx.obs, mr, fb, v);

    // MR-SND-005: a NACK to answer.
    if let FbKind::Nack {
        code: NackCode::Gap | NackCode::Trimmed,
        nack_psn,
        ..
    } = fb.kind
        && !ctx.own.is_some_and(|dir| dir.acked(nack_psn))
        && !state.nacks.iter().flatten().any(|n| n.psn == nack_psn)
        && let Some(slot) = state.nacks.iter_mut().find(|s| s.is_none())
    {
        *slot = Some(PendingNack {
            psn: nack_psn,
            frame: ctx.obs.frame,
            ts,
        });
        state.nacks_pending = true;
    }

    // MR-SND-006: the credit granted.
    if fb.credit == u32::MAX {
        if let Some(c) = state.credit.as_deref_mut() {
            c.allowed = None;
        }
    } else if let Some(next) = state.next_psn {
        let c = state.credit.get_or_insert_with(|| {
            Box::new(Credit {
                sent: 0,
                offsets: [0; OFFSETS],
                known: 0,
                allowed: None,
            })
        });
        let end = c.start_of(mr.psn, next) + u64::from(fb.credit);
        if c.allowed.is_none_or(|(a, _, _)| end > a) {
            c.allowed = Some((end, ctx.obs.frame, fb.credit));
        }
    }

    // MR-SND-007: a congestion signal starts a measurement.
    let signal = matches!(fb.kind, FbKind::Cnp(_)) || fb.flags.contains(FbFlags::ECE);
    if signal && state.rate.measuring.is_none() {
        let [older, latest] = state.rate.checkpoints;
        let before_bps = match older.or(latest) {
            Some((at, bytes)) if ts > at => bits_per_second(state.bytes_sent - bytes, ts - at),
            _ => 0,
        };
        if before_bps > 0 {
            let t = ctx.timings();
            let start_ts = ts.saturating_add(t.reaction_delay(state.max_rtt_ns));
            let window = t.rate_window(state.max_rtt_ns);
            state.rate.measuring = Some(Measure {
                signal_frame: ctx.obs.frame,
                before_bps,
                start_ts,
                end_ts: start_ts.saturating_add(window),
                start_bytes: None,
            });
            state.rate.update_due(window);
        }
    }
}
