//! Receiver rules: what the feedback a receiver sends about a direction
//! must say (spec sections 4, 9 and 11): the cumulative ack, SACK, the
//! echo fields, DUP, ce_count, AR and NACK GAP.
//!
//! Feedback checks get the [`Ctx`] of the direction the feedback
//! acknowledges (the DATA direction): the vantage and the finding's
//! connection are that direction's. Most rules are judged at a capture on
//! the receiver's host (`Vantage::Receiver`): there, feedback is captured
//! in the order it was sent and DATA as it arrived; at the sender, feedback
//! travelling on several paths is reordered and lost DATA is still
//! captured. The echo fields are judged at the sender, where every
//! transmission is captured. Rules that need every arrival of a PSN judge
//! only directions whose connection start (CONNECT/ACCEPT) was captured.
//!
//! "Received" means an intact (untrimmed) arrival captured at the
//! receiver; "acknowledged", that the receiver's own earlier feedback
//! carried a cumulative ack past the PSN or its SACK bit (the engine's
//! state).

use proto_parse::metaroce::{FbFlags, Flags, NackCode, psn_diff, psn_lt};

use super::captured::{Captured, Held};
use super::rule::{Protocol, Rule, RuleId, Severity, Vantage};
use super::{Ctx, Evidence};
use crate::engine::direction::Direction;
use crate::engine::verdict::Verdict;
use crate::observation::{DataObs, FbKind, FeedbackObs, MrObs, Observation};

const fn rule(
    id: &'static str,
    severity: Severity,
    vantage: Vantage,
    spec_section: &'static str,
    statement: &'static str,
    evidence: &'static str,
) -> Rule {
    Rule::new(Protocol::MetaRoce, id, spec_section, statement, evidence)
        .with_severity(severity)
        .judged_from(vantage)
}

pub(super) const RULES: &[Rule] = &[
    rule(
        "MR-RCV-001",
        Severity::Error,
        Vantage::Either,
        "2, 4",
        "The cumulative ack a receiver sends never moves backwards, from one feedback to the \
         next in the order they were sent (their tx_ts).",
        "cumulative ack {observed} in the later sent (by tx_ts) of this feedback and that of \
         frame {related}, {expected} in the earlier.",
    )
    .because(
        "the feedback's tx_ts (the receiver's clock) orders it as it was sent, so feedback \
         reordered on the way is judged at any capture point",
    ),
    rule(
        "MR-RCV-002",
        Severity::Error,
        Vantage::Either,
        "4",
        "An ACK's SACK bits name only PSNs above its own cumulative ack (sack_base >= the \
         cumulative ack, and the next expected PSN is not received).",
        "SACK bit for PSN {observed} in an ACK whose cumulative ack is {expected}.",
    )
    .because("the ACK alone"),
    rule(
        "MR-RCV-003",
        Severity::Error,
        Vantage::Endpoint,
        "4",
        "A SACK bit is set only for a PSN the receiver received.",
        "SACK bit for PSN {observed}, which had not arrived intact (cumulative ack \
         {expected}).",
    )
    .because(
        "a SACKed PSN arrived: the receiver's capture holds every arrival, the sender's every \
         transmission (a PSN never sent never arrived); a mirror may not see every path",
    ),
    rule(
        "MR-RCV-004",
        Severity::Error,
        Vantage::Endpoint,
        "4, 9",
        "A feedback's echo fields name a real transmission: echo_psn, echo_tx_ts and echo_ev \
         of one DATA packet the sender sent, or for a PROBE_REPLY of one PROBE (NACK GAP \
         excepted).",
        "echo_psn {observed} with echo_tx_ts {expected:x} and echo_ev {ev}: no transmission \
         captured at the sender carries them.",
    )
    .because(
        "the echo names a transmission that arrived: the sender's capture holds every \
         transmission, the receiver's every arrival; a mirror may not see every path",
    ),
    rule(
        "MR-RCV-005",
        Severity::Error,
        Vantage::Receiver,
        "4, 11.6",
        "DUP is set only on feedback about a PSN that had already been received.",
        "DUP on the feedback echoing PSN {observed}, whose first arrival it echoes \
         (frame {related}).",
    )
    .because(
        "whether the PSN had arrived before: only the receiver's capture holds every arrival (the \
         sender's cannot see a copy the network duplicated)",
    ),
    rule(
        "MR-RCV-006",
        Severity::Error,
        Vantage::Receiver,
        "4, 11.6",
        "The ACK of a PSN that arrived again after the receiver had acknowledged it carries \
         DUP.",
        "no DUP on the ACK echoing PSN {observed}, which arrived again (frame {related}) \
         after the receiver had acknowledged it.",
    )
    .because(
        "whether the PSN arrived again: only the receiver's capture holds every arrival (the \
         sender's holds copies lost on the way)",
    ),
    rule(
        "MR-RCV-007",
        Severity::Error,
        Vantage::Either,
        "4, 11.6",
        "ce_count never decreases (mod 2^16) from one feedback about a direction to the next, \
         in the order they were sent (their tx_ts).",
        "ce_count {observed} in the later sent (by tx_ts) of this feedback and that of frame \
         {related}, {expected} in the earlier.",
    )
    .because(
        "the feedback's tx_ts (the receiver's clock) orders it as it was sent, so feedback \
         reordered on the way is judged at any capture point",
    ),
    rule(
        "MR-RCV-008",
        Severity::Warning,
        Vantage::Receiver,
        "2",
        "A DATA packet with AR (ack requested now) is acknowledged within the ack delay \
         (--ack-delay, default 1 ms): a feedback echoes it or a later arrival.",
        "{observed} us after the AR packet of frame {related}, no feedback had echoed it \
         (ack delay {expected} us).",
    )
    .because(
        "the AR packet's arrival and the feedback's departure: both times only in the receiver's \
         capture",
    ),
    rule(
        "MR-RCV-009",
        Severity::Warning,
        Vantage::Either,
        "4",
        "A NACK GAP names a PSN at or above its own cumulative ack.",
        "NACK GAP for PSN {observed} in a feedback whose cumulative ack is {expected}.",
    )
    .because("the NACK alone"),
    rule(
        "MR-RCV-010",
        Severity::Error,
        Vantage::Endpoint,
        "4, 9",
        "A NACK GAP is sent only for a hole: a higher PSN has arrived.",
        "NACK GAP for PSN {observed} while the highest PSN received was {expected}.",
    )
    .because(
        "a higher PSN arrived before the NACK left: the receiver's capture holds every arrival, \
         the sender's every PSN sent before the NACK reached it (none sent, none arrived)",
    ),
    rule(
        "MR-RCV-011",
        Severity::Warning,
        Vantage::Receiver,
        "4, 9",
        "A NACK GAP waits for the reorder window: the PSN it names does not then arrive from \
         its first transmission.",
        "PSN {observed} arrived from its first transmission after the NACK GAP of frame \
         {related} named it: it was reordered, not lost.",
    )
    .because(
        "the PSN's arrival from its first transmission after the NACK left: only in the receiver's \
         capture",
    ),
];

const CUM_MONOTONIC: RuleId = RuleId::of("MR-RCV-001");
const SACK_ABOVE_CUM: RuleId = RuleId::of("MR-RCV-002");
const SACK_RECEIVED: RuleId = RuleId::of("MR-RCV-003");
const ECHO_REAL: RuleId = RuleId::of("MR-RCV-004");
const DUP_ONLY_DUPLICATE: RuleId = RuleId::of("MR-RCV-005");
const DUP_ON_DUPLICATE: RuleId = RuleId::of("MR-RCV-006");
const CE_COUNT: RuleId = RuleId::of("MR-RCV-007");
const AR_HONOURED: RuleId = RuleId::of("MR-RCV-008");
const GAP_ABOVE_CUM: RuleId = RuleId::of("MR-RCV-009");
const GAP_HOLE: RuleId = RuleId::of("MR-RCV-010");
const GAP_REORDER: RuleId = RuleId::of("MR-RCV-011");

/// PSNs whose arrival is remembered (MR-RCV-003, 010): a ring of bits.
const RECEIVED_BITS: u32 = 1024;
/// Duplicate arrivals awaiting their ACK (MR-RCV-006), and NACK GAPs
/// whose PSN may still arrive (MR-RCV-011).
const RING: usize = 4;

/// Per-direction state of the receiver rules.
#[derive(Debug, Default)]
pub(super) struct DirState {
    /// The intact DATA captured: at the receiver what arrived, at the
    /// sender what was sent (MR-RCV-003, 010).
    received: Received,
    /// The transmissions captured of the latest PSNs, beyond the engine's
    /// window (MR-RCV-004); made at the first DATA of a direction whose
    /// start was captured.
    captured: Option<Captured>,
    /// Echoes MR-RCV-004 could not judge: of a PSN neither the engine's
    /// window nor `captured` holds, and not known never captured.
    echoes_not_judged: u64,
    /// The feedback sent last (by its tx_ts) so far (MR-RCV-001, 007).
    last_sent: Option<SentFeedback>,
    /// The oldest AR packet not yet acknowledged: frame and time.
    ar: Option<(u64, u64)>,
    /// Arrivals of PSNs already acknowledged: frame and PSN.
    duplicates: [Option<(u64, u32)>; RING],
    /// Some of `duplicates` is set.
    duplicates_pending: bool,
    /// NACK GAPs sent: PSN and frame.
    gaps: [Option<(u32, u64)>; RING],
    /// Some of `gaps` is set.
    gaps_pending: bool,
    /// `ar` or `gaps_pending` is set: a DATA packet has something to
    /// judge ([`DirState::settle`]).
    awaiting: bool,
}

/// What MR-RCV-001 and 007 keep of a feedback: when its sender sent it
/// (tx_ts), when it was captured, and the two counters that never go
/// back.
#[derive(Debug, Clone, Copy)]
struct SentFeedback {
    tx_ts: u32,
    ts: u64,
    frame: u64,
    cum: u32,
    ce_count: u16,
}

/// Two feedback packets captured further apart than this are taken in
/// capture order: tx_ts (32 bits) compares in serial arithmetic only
/// within half its wrap (2.1 s in 1 ns units), and feedback is not
/// reordered by seconds on its way.
const ORDER_BY_TX_TS_NS: u64 = 1_000_000_000;

/// The PSNs that arrived intact, as bits of a ring covering
/// `RECEIVED_BITS` PSNs from `base` (a multiple of 64).
#[derive(Debug, Default)]
struct Received {
    words: [u64; (RECEIVED_BITS / 64) as usize],
    base: Option<u32>,
    highest: Option<u32>,
    /// The ring moved past its first base: PSNs below it are forgotten,
    /// not unseen.
    slid: bool,
}

impl Received {
    fn bit(psn: u32) -> (usize, u64) {
        let word = (psn / 64) as usize % (RECEIVED_BITS / 64) as usize;
        (word, 1 << (psn % 64))
    }

    #[inline(always)]
    fn insert(&mut self, psn: u32) {
        if let Some(base) = self.base
            && psn.wrapping_sub(base) < RECEIVED_BITS
        {
            if self.highest.is_none_or(|h| psn_lt(h, psn)) {
                self.highest = Some(psn);
            }
            let (w, m) = Self::bit(psn);
            self.words[w] |= m;
            return;
        }
        self.insert_far(psn);
    }

    #[inline(never)]
    fn insert_far(&mut self, psn: u32) {
        if self.highest.is_none_or(|h| psn_lt(h, psn)) {
            self.highest = Some(psn);
        }
        // Room below the first PSN for packets reordered before it.
        let base = *self
            .base
            .get_or_insert((psn & !63).wrapping_sub(RECEIVED_BITS / 2));
        let d = psn_diff(base, psn);
        if d < 0 {
            return;
        }
        if d as u32 >= RECEIVED_BITS {
            let new_base = (psn & !63).wrapping_sub(RECEIVED_BITS - 64);
            if (psn_diff(base, new_base) as u32) >= RECEIVED_BITS {
                self.words = Default::default();
            } else {
                let mut b = base;
                while b != new_base {
                    self.words[Self::bit(b).0] = 0;
                    b = b.wrapping_add(64);
                }
            }
            self.base = Some(new_base);
            self.slid = true;
        }
        let (w, m) = Self::bit(psn);
        self.words[w] |= m;
    }

    /// The first PSN of a SACK bitmap that did not arrive (PSNs below what
    /// is kept are not judged). Word by word while the bitmap lies inside
    /// the ring, bit by bit otherwise.
    fn first_missing(&self, sack_base: u32, words: u8, sack: &[u64; 4]) -> Option<u32> {
        let base = self.base?;
        let n = usize::from(words).min(4);
        let inside = psn_diff(base, sack_base) >= 0
            && sack_base.wrapping_sub(base) + n as u32 * 64 <= RECEIVED_BITS;
        for (i, &word) in sack.iter().enumerate().take(n) {
            if word == 0 {
                continue;
            }
            let start = sack_base.wrapping_add(i as u32 * 64);
            if inside {
                // Bit k of `got` is `start + k`; the bitmap's bit 63 - k.
                let got = self.bits_from(start).reverse_bits();
                let missing = word & !got;
                if missing != 0 {
                    return Some(start.wrapping_add(missing.leading_zeros()));
                }
            } else if let Some(psn) =
                sacked(start, 1, &[word, 0, 0, 0]).find(|&psn| self.contains(psn) == Some(false))
            {
                return Some(psn);
            }
        }
        None
    }

    /// The 64 bits of PSNs `start..start + 64`, `start + k` at bit k (the
    /// range inside the ring).
    fn bits_from(&self, start: u32) -> u64 {
        let (w, _) = Self::bit(start);
        let shift = start % 64;
        let lo = self.words[w] >> shift;
        if shift == 0 {
            return lo;
        }
        let next = (w + 1) % self.words.len();
        lo | (self.words[next] << (64 - shift))
    }

    /// Whether `psn` was never inserted, as far as the ring knows: not
    /// among its bits, or below its first base (half the ring below the
    /// first PSN: room for reordering), or anywhere else in the 32-bit
    /// space outside the ring while it never slid.
    fn never(&self, psn: u32) -> bool {
        match self.contains(psn) {
            Some(got) => !got,
            None => self.base.is_some() && !self.slid,
        }
    }

    /// Whether `psn` arrived; `None` when it lies below what is kept.
    fn contains(&self, psn: u32) -> Option<bool> {
        let base = self.base?;
        let d = psn_diff(base, psn);
        if d < 0 {
            return None;
        }
        if d as u32 >= RECEIVED_BITS {
            return Some(false);
        }
        let (w, m) = Self::bit(psn);
        Some(self.words[w] & m != 0)
    }
}

/// A DATA packet of the direction (the context is its own). The common
/// packet ([`plain_data`]) only marks its PSN received.
#[inline(never)]
pub(super) fn check_data(ctx: &mut Ctx<'_>, mr: &MrObs, d: &DataObs, state: &mut DirState) {
    if !ctx.judges(Vantage::Receiver) {
        // At the sender: what was sent (MR-RCV-003, 010).
        if ctx.judges(Vantage::Endpoint) && !d.trimmed {
            record_plain_data(state, mr, ctx.own);
        }
        return;
    }
    if plain_data(state, mr, d, ctx.verdict) {
        record_plain_data(state, mr, ctx.own);
    } else {
        check_data_slow(ctx, mr, d, state);
    }
}

/// Whether a DATA packet is the common one, with no receiver rule to
/// judge: a first arrival, intact, no AR, no AR or NACK GAP pending. Such
/// a packet only marks its PSN received ([`record_plain_data`]). Read
/// without a check context by the lint's fast path
/// (`LintState::metaroce`).
#[inline(always)]
pub(super) fn plain_data(state: &DirState, mr: &MrObs, d: &DataObs, v: &Verdict) -> bool {
    !(state.awaiting || mr.flags.contains(Flags::AR) || d.trimmed || v.retransmission.is_some())
}

/// What a [`plain_data`] packet changes: only a direction whose start was
/// captured is judged on what arrived (MR-RCV-003, 010).
#[inline(always)]
pub(super) fn record_plain_data(state: &mut DirState, mr: &MrObs, own: Option<&Direction>) {
    if own.is_some_and(|dir| dir.start_seen) {
        state.received.insert(mr.psn);
        state.record_captured(mr);
    }
}

impl DirState {
    /// A DATA packet captured on a direction whose start was captured
    /// (MR-RCV-004's record beyond the engine's window).
    #[inline(always)]
    fn record_captured(&mut self, mr: &MrObs) {
        self.captured
            .get_or_insert_with(Captured::default)
            .record(mr.psn, mr.tx_ts, mr.ev);
    }

    /// `awaiting` from what it sums up, after the checks changed them.
    fn settle(&mut self) {
        self.awaiting = self.ar.is_some() || self.gaps_pending;
    }

    /// Echoes MR-RCV-004 could not judge on this direction.
    pub(super) fn echoes_not_judged(&self) -> u64 {
        self.echoes_not_judged
    }
}

#[inline(never)]
fn check_data_slow(ctx: &mut Ctx<'_>, mr: &MrObs, d: &DataObs, state: &mut DirState) {
    let obs = ctx.obs;
    let psn = mr.psn;
    let v = ctx.verdict;
    check_ar_deadline(ctx, state);
    if mr.flags.contains(Flags::AR) && state.ar.is_none() {
        state.ar = Some((obs.frame, obs.ts_ns));
    }
    // MR-RCV-011: the first transmission of a NACKed PSN arrives.
    if state.gaps_pending && v.retransmission.is_none() && mr.tx_attempt == 0 {
        for slot in &mut state.gaps {
            if let Some((gap, frame)) = *slot
                && gap == psn
            {
                *slot = None;
                ctx.report(GAP_REORDER, Evidence::new(psn, 0u32).related(Some(frame)));
            }
        }
        state.gaps_pending = state.gaps.iter().any(Option::is_some);
    }
    state.settle();
    let start_seen = ctx.own.is_some_and(|dir| dir.start_seen);
    if d.trimmed {
        // An arrival all the same, which feedback may echo.
        if start_seen {
            state.record_captured(mr);
        }
        return;
    }
    // MR-RCV-006: an arrival of a PSN already acknowledged.
    if v.retransmission.is_some() && ctx.own.is_some_and(|dir| dir.acked(psn)) {
        state.duplicates.rotate_left(1);
        state.duplicates[RING - 1] = Some((obs.frame, psn));
        state.duplicates_pending = true;
    }
    if start_seen {
        state.received.insert(psn);
        state.record_captured(mr);
    }
}

/// MR-RCV-008 at a packet of the connection: an AR packet past its delay.
fn check_ar_deadline(ctx: &mut Ctx<'_>, state: &mut DirState) {
    if let Some((frame, ts)) = state.ar {
        let now = ctx.obs.ts_ns;
        let delay = ctx.timings().ack_delay_ns;
        if now > ts.saturating_add(delay) {
            state.ar = None;
            ctx.report(
                AR_HONOURED,
                Evidence::new((now - ts) / 1000, delay / 1000).related(Some(frame)),
            );
        }
    }
}

/// Whether a feedback about the direction is the common ACK, with no
/// receiver rule broken and nothing pending: no SACK bit and no DUP, sent
/// (its tx_ts) after the latest feedback so far with neither counter gone
/// back, at an end host echoing a transmission the engine's window holds
/// (exactly: the PSN's first or latest), at the receiver no AR, duplicate
/// or NACK GAP awaiting feedback. Such an ACK only becomes the latest sent
/// ([`record_plain_ack`]). Read without a check context by the lint's fast
/// path (`LintState::metaroce`); the full check finds the rest.
#[inline(always)]
pub(super) fn plain_ack(
    state: &DirState,
    obs: &Observation,
    mr: &MrObs,
    fb: &FeedbackObs,
    dir: Option<&Direction>,
    endpoint: bool,
    receiver: bool,
) -> bool {
    let FbKind::Ack {
        sack_words, sack, ..
    } = fb.kind
    else {
        return false;
    };
    let Some(last) = state.last_sent else {
        return false;
    };
    let now = SentFeedback::of(obs, mr, fb);
    // Sent after the latest so far (it becomes the latest), nothing back.
    let in_order = sent_order(last, now).is_some_and(|(earlier, later)| {
        later.frame == now.frame && went_back(earlier, later) == (false, false)
    });
    let plain = in_order
        && !fb.flags.contains(FbFlags::DUP)
        && sack.iter().take(usize::from(sack_words)).all(|&w| w == 0)
        && !(receiver && (state.awaiting || state.duplicates_pending));
    plain
        && (!endpoint
            || dir
                .and_then(|dir| dir.transmissions(fb.echo_psn))
                .is_some_and(|t| {
                    t.count <= 2
                        && [t.first, t.last]
                            .into_iter()
                            .any(|(tx_ts, ev)| tx_ts == fb.echo_tx_ts && ev == fb.echo_ev)
                }))
}

/// What a [`plain_ack`] changes: it is the latest feedback sent.
#[inline(always)]
pub(super) fn record_plain_ack(
    state: &mut DirState,
    obs: &Observation,
    mr: &MrObs,
    fb: &FeedbackObs,
) {
    state.last_sent = Some(SentFeedback::of(obs, mr, fb));
}

/// A feedback about the direction (the context is the direction's).
#[inline(never)]
pub(super) fn check_feedback(
    ctx: &mut Ctx<'_>,
    mr: &MrObs,
    fb: &FeedbackObs,
    state: &mut DirState,
) {
    let cum = mr.psn;
    let frame = ctx.obs.frame;
    let v = ctx.verdict;

    // MR-RCV-002 and 009: the packet against itself.
    if let FbKind::Ack {
        sack_base,
        sack_words,
        sack,
    } = fb.kind
        && let Some(lowest) = lowest_sacked(sack_base, sack_words, &sack)
        && !psn_lt(cum, lowest)
    {
        ctx.report(SACK_ABOVE_CUM, Evidence::new(lowest, cum));
    }
    if let FbKind::Nack {
        code: NackCode::Gap,
        nack_psn,
        ..
    } = fb.kind
        && psn_lt(nack_psn, cum)
    {
        ctx.report(GAP_ABOVE_CUM, Evidence::new(nack_psn, cum));
    }

    // MR-RCV-001 and 007: in the order the feedback was sent.
    check_order(ctx, mr, fb, state);

    if !ctx.judges(Vantage::Endpoint) {
        return;
    }
    let Some(dir) = ctx.own else { return };
    let complete = dir.start_seen;
    check_echo(ctx, fb, state);

    // MR-RCV-003: SACK bits for PSNs that arrived (at the sender: that
    // were sent). Without the connection's start, a PSN beyond the
    // highest sent, at the sender (at the receiver, one reordered ahead of
    // the capture's start may have arrived before it).
    if let FbKind::Ack {
        sack_base,
        sack_words,
        sack,
    } = fb.kind
    {
        let missing = if complete {
            state.received.first_missing(sack_base, sack_words, &sack)
        } else if !ctx.judges(Vantage::Receiver) {
            highest_sacked(sack_base, sack_words, &sack)
                .filter(|&p| dir.highest_psn().is_some_and(|h| psn_lt(h, p)))
        } else {
            None
        };
        if let Some(psn) = missing {
            ctx.report(SACK_RECEIVED, Evidence::new(psn, cum));
        }
    }

    // MR-RCV-010: a NACK GAP for a hole, a higher PSN arrived (at the
    // sender: was sent).
    if complete
        && let FbKind::Nack {
            code: NackCode::Gap,
            nack_psn,
            ..
        } = fb.kind
    {
        let highest = state.received.highest;
        if highest.is_none_or(|h| !psn_lt(nack_psn, h)) {
            ctx.report(
                GAP_HOLE,
                Evidence::new(nack_psn, highest.map_or(0, u64::from)),
            );
        }
    }

    if !ctx.judges(Vantage::Receiver) {
        return;
    }

    // MR-RCV-008: the AR packet is acknowledged by a feedback echoing it
    // or a later arrival.
    check_ar_deadline(ctx, state);
    if let Some((ar_frame, _)) = state.ar
        && v.acked_frame.is_some_and(|f| f >= ar_frame)
    {
        state.ar = None;
    }

    // MR-RCV-005 and 006: DUP on duplicates, and only on them.
    if let Some(echoed) = v.acked_frame {
        let dup = fb.flags.contains(FbFlags::DUP);
        if dup
            && complete
            && dir
                .transmissions(fb.echo_psn)
                // Arrived once: a network duplicate is identical to the
                // first copy, so a DUP echoing it matches the first too.
                .is_some_and(|t| t.first_frame == echoed && t.count == 1)
        {
            ctx.report(
                DUP_ONLY_DUPLICATE,
                Evidence::new(fb.echo_psn, 0u32).related(Some(echoed)),
            );
        }
        // An ACK (a CNP may leave first, before the duplicate is known).
        if state.duplicates_pending
            && matches!(fb.kind, FbKind::Ack { .. })
            && let Some(slot) = state
                .duplicates
                .iter_mut()
                .find(|s| s.is_some_and(|(f, _)| f == echoed))
        {
            *slot = None;
            state.duplicates_pending = state.duplicates.iter().any(Option::is_some);
            if !dup {
                ctx.report(
                    DUP_ON_DUPLICATE,
                    Evidence::new(fb.echo_psn, 0u32).related(Some(echoed)),
                );
            }
        }
    }

    // MR-RCV-011: the NACK GAPs whose PSN may still arrive.
    if let FbKind::Nack {
        code: NackCode::Gap,
        nack_psn,
        ..
    } = fb.kind
        && !state.gaps.iter().flatten().any(|&(p, _)| p == nack_psn)
    {
        state.gaps.rotate_left(1);
        state.gaps[RING - 1] = Some((nack_psn, frame));
        state.gaps_pending = true;
    }
    if state.gaps_pending {
        for slot in &mut state.gaps {
            if slot.is_some_and(|(p, _)| psn_lt(p, cum)) {
                *slot = None;
            }
        }
        state.gaps_pending = state.gaps.iter().any(Option::is_some);
    }
    state.settle();
}

/// MR-RCV-001 and 007: the cumulative ack and ce_count never go back
/// from one feedback about the direction to the next, in the order the
/// receiver sent them. Its tx_ts (its own clock, serial arithmetic, spec
/// section 2) gives that order at any capture point: feedback travelling
/// on several paths is captured reordered at the sender. Two packets with
/// one tx_ts are not ordered. The latest sent so far is kept: an earlier
/// one captured after it is compared with it, and a later one replaces
/// it (one finding per step back).
fn check_order(ctx: &mut Ctx<'_>, mr: &MrObs, fb: &FeedbackObs, state: &mut DirState) {
    let now = SentFeedback::of(ctx.obs, mr, fb);
    let Some(last) = state.last_sent else {
        state.last_sent = Some(now);
        return;
    };
    let Some((earlier, later)) = sent_order(last, now) else {
        return;
    };
    let (cum_back, ce_back) = went_back(earlier, later);
    if cum_back {
        ctx.report(
            CUM_MONOTONIC,
            Evidence::new(later.cum, earlier.cum).related(Some(last.frame)),
        );
    }
    if ce_back {
        ctx.report(
            CE_COUNT,
            Evidence::new(later.ce_count, earlier.ce_count).related(Some(last.frame)),
        );
    }
    if later.frame == now.frame {
        state.last_sent = Some(now);
    }
}

impl SentFeedback {
    #[inline(always)]
    fn of(obs: &Observation, mr: &MrObs, fb: &FeedbackObs) -> SentFeedback {
        SentFeedback {
            tx_ts: mr.tx_ts,
            ts: obs.ts_ns,
            frame: obs.frame,
            cum: mr.psn,
            ce_count: fb.ce_count,
        }
    }
}

/// The earlier and the later sent of the latest feedback so far and a new
/// one: by tx_ts (serial), or in capture order when captured over
/// [`ORDER_BY_TX_TS_NS`] apart; `None` for one tx_ts (not ordered).
#[inline(always)]
fn sent_order(last: SentFeedback, now: SentFeedback) -> Option<(SentFeedback, SentFeedback)> {
    if now.ts.saturating_sub(last.ts) >= ORDER_BY_TX_TS_NS {
        return Some((last, now));
    }
    match now.tx_ts.wrapping_sub(last.tx_ts) as i32 {
        0 => None,
        d if d > 0 => Some((last, now)),
        _ => Some((now, last)),
    }
}

/// Whether the cumulative ack (MR-RCV-001) and ce_count (MR-RCV-007, mod
/// 2^16) went back from the earlier sent feedback to the later.
#[inline(always)]
fn went_back(earlier: SentFeedback, later: SentFeedback) -> (bool, bool) {
    (
        psn_lt(later.cum, earlier.cum),
        (later.ce_count.wrapping_sub(earlier.ce_count) as i16) < 0,
    )
}

/// MR-RCV-004, at either end: the echoed transmission was captured (at
/// the sender sent, at the receiver arrived): in the engine's window, else
/// in the lint's record of the latest PSNs ([`Captured`]); an echo of a
/// PSN neither holds, not known never captured, is counted as not judged.
fn check_echo(ctx: &mut Ctx<'_>, fb: &FeedbackObs, state: &mut DirState) {
    if matches!(
        fb.kind,
        FbKind::Nack {
            code: NackCode::Gap,
            ..
        }
    ) {
        // A NACK GAP may name the missing PSN, which never arrived.
        return;
    }
    let Some(dir) = ctx.own else { return };
    let psn = fb.echo_psn;
    if matches!(fb.kind, FbKind::ProbeReply) {
        // A probe, with every probe of the connection captured (and kept).
        if dir.start_seen && dir.probe_sent(psn, fb.echo_tx_ts, fb.echo_ev) == Some(false) {
            ctx.report(ECHO_REAL, Evidence::new(psn, fb.echo_tx_ts).ev(fb.echo_ev));
        }
        return;
    }
    let held = match dir.transmissions(psn) {
        // The window keeps the first and the latest transmission.
        Some(t) => Some(Held {
            count: u32::from(t.count),
            first: t.first,
            last: t.last,
        }),
        None if never_captured(dir, psn, &state.received) => None,
        None => match state.captured.as_ref().and_then(|c| c.get(psn)) {
            Some(held) => Some(held),
            None => {
                state.echoes_not_judged += 1;
                return;
            }
        },
    };
    if !held.is_some_and(|h| h.names(fb.echo_tx_ts, fb.echo_ev, ctx.at_sender())) {
        ctx.report(ECHO_REAL, Evidence::new(psn, fb.echo_tx_ts).ev(fb.echo_ev));
    }
}

impl Held {
    /// Whether an echo of `tx_ts` and `ev` names one of these
    /// transmissions: the first or the latest; of a PSN captured three
    /// times or more, at a capture given as the sender's (where they are
    /// captured in the order sent) one between them too (tx_ts in serial
    /// arithmetic, spec 2), elsewhere (the way may reorder them) any.
    fn names(&self, tx_ts: u32, ev: u16, at_sender: bool) -> bool {
        if self.count <= 2 {
            return [self.first, self.last].contains(&(tx_ts, ev));
        }
        if !at_sender {
            return true;
        }
        let from_first = tx_ts.wrapping_sub(self.first.0) as i32;
        from_first >= 0 && self.last.0.wrapping_sub(tx_ts) as i32 >= 0
    }
}

/// Whether no DATA of `psn` was captured on the direction, for a PSN the
/// engine's window holds no transmission of: beyond the highest PSN; or,
/// with the connection's start captured (every transmission, or arrival,
/// in the capture), a hole of the window, nothing captured at all, or no
/// intact packet of it among what the lint keeps ([`Received`]: at the
/// sender what was sent, at the receiver what arrived intact, so only
/// while none arrived trimmed). Unknown (`false`) for a PSN pruned from
/// both.
fn never_captured(dir: &Direction, psn: u32, received: &Received) -> bool {
    let Some(highest) = dir.highest_psn() else {
        return dir.start_seen;
    };
    if psn_lt(highest, psn) {
        return true;
    }
    dir.start_seen && (dir.tracks(psn) || dir.c.trimmed == 0 && received.never(psn))
}
/// The PSNs of a SACK bitmap's set bits, lowest first.
fn sacked(base: u32, words: u8, sack: &[u64; 4]) -> impl Iterator<Item = u32> + '_ {
    sack.iter()
        .take(usize::from(words))
        .enumerate()
        .flat_map(move |(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let i = bits.leading_zeros();
                bits &= !(1u64 << (63 - i));
                Some(base.wrapping_add(w as u32 * 64 + i))
            })
        })
}

fn highest_sacked(base: u32, words: u8, sack: &[u64; 4]) -> Option<u32> {
    let n = usize::from(words).min(4);
    (0..n)
        .rev()
        .find(|&i| sack[i] != 0)
        .map(|i| base.wrapping_add(i as u32 * 64 + 63 - sack[i].trailing_zeros()))
}

fn lowest_sacked(base: u32, words: u8, sack: &[u64; 4]) -> Option<u32> {
    let n = usize::from(words).min(4);
    (0..n)
        .find(|&i| sack[i] != 0)
        .map(|i| base.wrapping_add(i as u32 * 64 + sack[i].leading_zeros()))
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The word-by-word SACK check finds the PSN a bit-by-bit walk
        /// finds, wherever the bitmap lies against the ring (PSNs near the
        /// u32 wrap too).
        #[test]
        fn first_missing_is_the_first_sacked_psn_not_received(
            start in any::<u32>(),
            arrivals in proptest::collection::vec(0u32..1400, 0..300),
            sack_from in 0u32..1500,
            words in 0u8..=4,
            sack in any::<[u64; 4]>(),
        ) {
            let mut r = Received::default();
            for a in &arrivals {
                r.insert(start.wrapping_add(*a));
            }
            let base = start.wrapping_add(sack_from);
            let naive = sacked(base, words, &sack).find(|&psn| r.contains(psn) == Some(false));
            prop_assert_eq!(r.first_missing(base, words, &sack), naive);
        }
    }

    #[test]
    fn the_ring_forgets_what_it_slides_past() {
        let mut r = Received::default();
        r.insert(1000);
        assert_eq!(r.contains(1000), Some(true));
        assert_eq!(r.contains(1001), Some(false));
        r.insert(1000 + 5 * RECEIVED_BITS);
        assert_eq!(r.contains(1000), None);
        assert_eq!(r.contains(1000 + 5 * RECEIVED_BITS), Some(true));
        assert_eq!(r.highest, Some(1000 + 5 * RECEIVED_BITS));
    }
}
