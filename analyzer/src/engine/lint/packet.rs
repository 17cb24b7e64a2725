//! Per-packet rules: what one MetaRoCE packet must be on its own (spec
//! sections 1, 3, 5, 8 and 11), and against what its connection's CTRL
//! packets announced (`connection::Announced`).

use proto_parse::frame::Ecn;
use proto_parse::metaroce::{DataOp, Flags, WarningFlags, udp_source_port};

use super::connection::Announced;
use super::rule::{Protocol, Rule, RuleId, Severity};
use super::{Ctx, Evidence};
use crate::engine::verdict::Verdict;
use crate::observation::{
    CrcCheck, DataObs, FbKind, FeedbackObs, FlowLabel, MrBody, MrObs, Observation,
};

const fn rule(
    id: &'static str,
    severity: Severity,
    spec_section: &'static str,
    statement: &'static str,
    evidence: &'static str,
) -> Rule {
    Rule::new(Protocol::MetaRoce, id, spec_section, statement, evidence).with_severity(severity)
}

pub(super) const RULES: &[Rule] = &[
    rule(
        "MR-PKT-001",
        Severity::Error,
        "8, 11.1",
        "A packet is well-formed: version 1, hlen covering the fixed header and inside the \
         packet, sack_words at most 4, TLVs inside the header, no payload beyond payload_len.",
        "the packet breaks a rule of spec section 8 (`metaroce-analyze decode --frames N` \
         names the field and its offset).",
    )
    .because("the packet's own bytes, the same wherever it is captured"),
    rule(
        "MR-PKT-002",
        Severity::Error,
        "1",
        "The UDP source port is 0xC000 | (ev & 0x3FFF), so that ECMP spreads the paths.",
        "UDP source port {observed} (ev {ev}) where 0xC000 | (ev & 0x3FFF) is {expected}.",
    )
    .because("the packet alone: switches keep the UDP ports"),
    rule(
        "MR-PKT-003",
        Severity::Error,
        "3",
        "SOM is set on a message's packet with msg_offset 0, and on no other.",
        "msg_offset {observed} with SOM {expected} (1: set, 0: clear): SOM must be set \
         exactly when msg_offset is 0.",
    )
    .because("the packet alone: no switch changes the header"),
    rule(
        "MR-PKT-004",
        Severity::Error,
        "3",
        "EOM is set on the packet whose payload ends at msg_len, and on no other.",
        "the payload ends at byte {observed} of a {expected}-byte message, and EOM says \
         otherwise.",
    )
    .because("the packet alone: no switch changes the header"),
    rule(
        "MR-PKT-005",
        Severity::Error,
        "3",
        "A DATA packet's payload lies inside its message: msg_offset + payload_len <= msg_len.",
        "the payload ends at byte {observed} of a message of msg_len {expected}.",
    )
    .because("the packet alone: no switch changes the header"),
    rule(
        "MR-PKT-006",
        Severity::Error,
        "3, 11.3",
        "A READ_REQ is a one-packet message: SOM and EOM set, msg_offset 0, payload_len 0.",
        "READ_REQ with flags {observed:x} (SOM 0x40 and EOM 0x20 both needed) and \
         msg_offset + payload_len {expected} (must be 0).",
    )
    .because("the packet alone: no switch changes the header"),
    rule(
        "MR-PKT-007",
        Severity::Error,
        "5, 7",
        "flags.CRC agrees with the CRC feature both ends announced in CONNECT and ACCEPT: \
         every packet after the handshake carries the trailer when both did, none otherwise.",
        "flags.CRC is {observed} where the handshake negotiated {expected} (1: CRC on).",
    )
    .because("the packet against its connection's CTRL packets, which pass every capture point"),
    rule(
        "MR-PKT-008",
        Severity::Error,
        "5, 11.13",
        "A DATA packet's payload_len is at most the mtu its sender announced in its CTRL.",
        "payload_len {observed} above the sender's announced mtu {expected}.",
    )
    .because("the packet against its sender's CTRL packet, which passes every capture point"),
    rule(
        "MR-PKT-009",
        Severity::Error,
        "2, 11.5",
        "A CTRL packet carries path_seq 0 and psn 0.",
        "CTRL with path_seq {observed} and psn {expected} (both must be 0).",
    )
    .because("the packet alone: no switch changes the header"),
    rule(
        "MR-PKT-010",
        Severity::Error,
        "2, 5",
        "A sender that announced the path_seq feature never sends path_seq 0 on a non-CTRL \
         packet.",
        "path_seq 0 on ev {ev} from a sender whose CTRL announced the path_seq feature.",
    )
    .because("the packet against its sender's CTRL packet, which passes every capture point"),
    rule(
        "MR-PKT-011",
        Severity::Warning,
        "4, 11.7",
        "An ACK with a SACK bitmap has sack_base equal to its cumulative ack.",
        "sack_base {observed} where the cumulative ack (psn) is {expected}.",
    )
    .because("the ACK alone"),
    rule(
        "MR-PKT-012",
        Severity::Warning,
        "1",
        "Packets are sent ECN-capable with ECT(0); only a switch sets CE.",
        "IP ECN codepoint {observed} (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE) where ECT(0) \
         or CE is expected.",
    )
    .because(
        "the ECN field as captured: a switch may set CE, never Not-ECT (a field cleared on the way \
         is MR-NET-001's)",
    ),
    rule(
        "MR-PKT-013",
        Severity::Warning,
        "2, 11.2, 11.7",
        "Reserved fields are sent as zero, sack_words is 0 on every type but ACK, and the \
         header has no padding without flags.EXT.",
        "the parser warns {observed:x} (0x1 reserved flags, 0x2 the nibble after \
         tx_attempt, 0x4 DATA byte 25, 0x8 reserved fb_flags, 0x10 NACK bytes 50-51, 0x20 \
         CNP bytes 49-51, 0x40 sack_words off ACK, 0x100 header padding without EXT).",
    )
    .because("the packet alone: no switch changes the header"),
    rule(
        "MR-PKT-014",
        Severity::Error,
        "7",
        "A packet with flags.CRC that was not trimmed carries the CRC32C of its header and \
         payload.",
        "the CRC32C trailer does not match the packet.",
    )
    .because("the packet's bytes: no switch rewrites them (a trimmed packet is not checked)"),
    rule(
        "MR-PKT-015",
        Severity::Warning,
        "1",
        "On IPv6 the flow label equals the ev, so that switches hashing on the flow label \
         spread the paths too.",
        "IPv6 flow label {observed:x} where the ev is {expected} ({expected:x}).",
    )
    .because("the IPv6 header as captured: routers keep the flow label"),
    rule(
        "MR-PKT-016",
        Severity::Error,
        "3",
        "A message's packets of consecutive PSNs carry consecutive bytes: the later one's \
         msg_offset is where the earlier one's payload ends (msg_offset + payload_len), no gap \
         and no overlap.",
        "the message's packets of consecutive PSNs (this one and frame {related}) leave a gap \
         or an overlap: the later starts at byte {observed}, the earlier ends at byte \
         {expected}.",
    )
    .because(
        "two captured packets of one message one PSN apart, in either capture order: a \
         retransmission repeats msg_offset, so any copy of each will do",
    ),
];

const MALFORMED: RuleId = RuleId::of("MR-PKT-001");
const SOURCE_PORT: RuleId = RuleId::of("MR-PKT-002");
const SOM: RuleId = RuleId::of("MR-PKT-003");
const EOM: RuleId = RuleId::of("MR-PKT-004");
const INSIDE_MESSAGE: RuleId = RuleId::of("MR-PKT-005");
const READ_REQ_ONE_PACKET: RuleId = RuleId::of("MR-PKT-006");
const CRC_NEGOTIATED: RuleId = RuleId::of("MR-PKT-007");
const MTU: RuleId = RuleId::of("MR-PKT-008");
const CTRL_ZEROS: RuleId = RuleId::of("MR-PKT-009");
const PATH_SEQ_USED: RuleId = RuleId::of("MR-PKT-010");
const SACK_BASE: RuleId = RuleId::of("MR-PKT-011");
const ECN: RuleId = RuleId::of("MR-PKT-012");
const PARSER_WARNINGS: RuleId = RuleId::of("MR-PKT-013");
const CRC_GOOD: RuleId = RuleId::of("MR-PKT-014");
const FLOW_LABEL: RuleId = RuleId::of("MR-PKT-015");
const CONTIGUOUS_BYTES: RuleId = RuleId::of("MR-PKT-016");

/// The parser's warnings MR-PKT-013 reports (sack_base is MR-PKT-011's).
const WARNINGS: WarningFlags = WarningFlags::RESERVED
    .union(WarningFlags::SACK_WORDS_NOT_ACK)
    .union(WarningFlags::HEADER_PADDING);

/// MR-PKT-016: DATA packets remembered per direction, by PSN modulo this
/// (packets reordered by up to this many PSNs are compared too).
const PIECES: usize = 8;

/// Per-direction state of the packet rules: the latest DATA packets'
/// bytes in their messages (MR-PKT-016); every other rule here judges one
/// packet alone or against what CTRL announced.
#[derive(Debug)]
pub(super) struct DirState {
    /// The latest DATA packet of each PSN modulo [`PIECES`], at index
    /// `psn % PIECES`.
    pieces: [Piece; PIECES],
}

impl Default for DirState {
    /// No packet kept: each slot holds the key of a PSN that the slot
    /// never holds (`i + 1` at index `i`), so no lookup matches it without
    /// a flag to test.
    fn default() -> Self {
        DirState {
            pieces: std::array::from_fn(|i| Piece {
                key: Piece::key(i as u32 + 1, 0),
                ..Piece::default()
            }),
        }
    }
}

/// Where a DATA packet's payload lies in its message.
#[derive(Debug, Default, Clone, Copy)]
struct Piece {
    /// The packet's PSN and msg_id ([`Piece::key`]): one compare finds
    /// the piece of a PSN's message.
    key: u64,
    frame: u64,
    start: u32,
    end: u32,
    /// A READ_RESP (its msg_id is the peer's READ_REQ's: spec 11.4).
    response: bool,
}

impl Piece {
    #[inline(always)]
    fn of(frame: u64, psn: u32, d: &DataObs) -> Piece {
        Piece {
            key: Piece::key(psn, d.msg_id),
            frame,
            start: d.msg_offset,
            end: d.msg_offset.wrapping_add(u32::from(d.payload_len)),
            response: matches!(d.op, DataOp::ReadResp),
        }
    }

    #[inline(always)]
    const fn key(psn: u32, msg_id: u32) -> u64 {
        ((psn as u64) << 32) | msg_id as u64
    }

    /// The key of the piece `by` PSNs from this one, in its message.
    #[inline(always)]
    const fn key_by(&self, by: i32) -> u64 {
        self.key.wrapping_add_signed((by as i64) << 32)
    }

    /// This is the piece of `new`'s message `by` PSNs from it.
    #[inline(always)]
    fn of_message(&self, by: i32, new: &Piece) -> bool {
        self.key == new.key_by(by) && self.response == new.response
    }
}

impl DirState {
    /// MR-PKT-016: the kept packet of the PSN before or after `new`'s, of
    /// its message, whose bytes do not join `new`'s: (later start,
    /// earlier end, the kept packet's frame).
    #[inline(always)]
    fn gap(&self, psn: u32, new: &Piece) -> Option<(u32, u32, u64)> {
        let before_psn = psn.wrapping_sub(1);
        let after_psn = psn.wrapping_add(1);
        let before = &self.pieces[before_psn as usize % PIECES];
        let after = &self.pieces[after_psn as usize % PIECES];
        if before.of_message(-1, new) && before.end != new.start {
            return Some((new.start, before.end, before.frame));
        }
        if after.of_message(1, new) && new.end != after.start {
            return Some((after.start, new.end, after.frame));
        }
        None
    }

    #[inline(always)]
    fn record(&mut self, psn: u32, new: Piece) {
        self.pieces[psn as usize % PIECES] = new;
    }
}

/// The lint's fast path for MR-PKT-016: keeps a DATA packet's piece and
/// says whether it joins the kept packets of its message (`false`: the
/// full check, [`check_metaroce`], finds which). A new highest PSN
/// (neither out of order nor a retransmission) has no packet of the next
/// PSN captured before it: only the one before is compared.
#[inline(always)]
pub(super) fn joins_message(
    state: &mut DirState,
    frame: u64,
    mr: &MrObs,
    d: &DataObs,
    v: &Verdict,
) -> bool {
    let psn = mr.psn;
    let new = Piece::of(frame, psn, d);
    let joins = if v.out_of_order.is_none() && v.retransmission.is_none() {
        let before_psn = psn.wrapping_sub(1);
        let before = &state.pieces[before_psn as usize % PIECES];
        !(before.of_message(-1, &new) && before.end != new.start)
    } else {
        state.gap(psn, &new).is_none()
    };
    // Its own slot, which neither comparison reads.
    state.record(psn, new);
    joins
}

/// A packet the engine did not analyse because it is malformed.
pub(super) fn check_malformed(ctx: &mut Ctx<'_>) {
    if matches!(ctx.obs.kind, crate::engine::ObsKind::MetaRoce(_)) {
        ctx.report(MALFORMED, Evidence::default());
    }
}

/// Every MetaRoCE packet the engine analysed. Inline: its checks are a
/// few comparisons each, fewer than a call's register saves.
#[inline(always)]
pub(super) fn check_metaroce(
    ctx: &mut Ctx<'_>,
    mr: &MrObs,
    state: &mut DirState,
    announced: Announced,
) {
    if breaks_alone(ctx.obs, mr) {
        report_alone(ctx, mr);
    }
    if breaks_announced(mr, announced) {
        report_announced(ctx, mr, announced);
    }
    if let MrBody::Data(d) = &mr.body {
        let new = Piece::of(ctx.obs.frame, mr.psn, d);
        if let Some((later, earlier, frame)) = state.gap(mr.psn, &new) {
            ctx.report(
                CONTIGUOUS_BYTES,
                Evidence::new(later, earlier).related(Some(frame)),
            );
        }
        state.record(mr.psn, new);
    }
}

/// Whether a packet breaks a rule against what its connection's CTRL
/// packets announced ([`report_announced`] says which): the lint's fast
/// path asks this as it asks [`breaks_alone`].
#[inline(always)]
pub(super) fn breaks_announced(mr: &MrObs, announced: Announced) -> bool {
    crc_not_negotiated(mr, announced).is_some()
        || above_mtu(mr, announced).is_some()
        || path_seq_unused(mr, announced)
}

/// Reports the rules a packet breaks against what its connection
/// announced ([`breaks_announced`]), with their evidence.
#[cold]
#[inline(never)]
fn report_announced(ctx: &mut Ctx<'_>, mr: &MrObs, announced: Announced) {
    if let Some(crc) = crc_not_negotiated(mr, announced) {
        ctx.report(
            CRC_NEGOTIATED,
            Evidence::new(mr.flags.contains(Flags::CRC), crc).related(announced.frame),
        );
    }
    if let Some((len, mtu)) = above_mtu(mr, announced) {
        ctx.report(MTU, Evidence::new(len, mtu).related(announced.frame));
    }
    if path_seq_unused(mr, announced) {
        ctx.report(PATH_SEQ_USED, Evidence::default().ev(mr.ev));
    }
}

/// MR-PKT-007: the CRC flag of a packet other than CTRL against what both
/// ends announced (the negotiated value, when they differ).
fn crc_not_negotiated(mr: &MrObs, announced: Announced) -> Option<bool> {
    announced
        .crc
        .filter(|&crc| !matches!(mr.body, MrBody::Ctrl(_)) && mr.flags.contains(Flags::CRC) != crc)
}

/// MR-PKT-008: a DATA payload longer than its sender's mtu (the length
/// and the mtu, when it is).
fn above_mtu(mr: &MrObs, announced: Announced) -> Option<(u16, u16)> {
    match (&mr.body, announced.mtu) {
        (MrBody::Data(d), Some(mtu)) if d.payload_len > mtu => Some((d.payload_len, mtu)),
        _ => None,
    }
}

/// MR-PKT-010: path_seq 0 on a packet that numbers its path once the
/// sender announced the feature.
fn path_seq_unused(mr: &MrObs, announced: Announced) -> bool {
    let numbered = matches!(
        mr.body,
        MrBody::Data(_) | MrBody::Feedback(_) | MrBody::Probe
    );
    numbered && announced.path_seq && mr.path_seq == 0
}

/// Whether a packet breaks a rule of its own, whatever its connection
/// announced. Nearly never, so the lint's fast path
/// (`LintState::metaroce`) only asks this, with one compare per rule, and
/// [`report_alone`] works out which rules and their evidence for the rare
/// packet that does.
#[inline(always)]
pub(super) fn breaks_alone(obs: &Observation, mr: &MrObs) -> bool {
    wrong_source_port(obs, mr)
        || !warnings(mr).is_empty()
        || mr.checks.crc == CrcCheck::Bad
        || wrong_ecn(obs)
        || wrong_flow_label(mr).is_some()
        || match &mr.body {
            MrBody::Data(d) if matches!(d.op, DataOp::ReadReq) => read_req_not_alone(mr, d),
            MrBody::Data(d) => wrong_som(mr, d) || outside_message(d) || wrong_eom(mr, d),
            MrBody::Ctrl(_) => ctrl_not_zero(mr),
            MrBody::Feedback(fb) => wrong_sack_base(mr, fb).is_some(),
            MrBody::Probe | MrBody::Other | MrBody::Malformed => false,
        }
}

/// Reports the rules a packet breaks on its own ([`breaks_alone`]), with
/// their evidence.
#[cold]
#[inline(never)]
fn report_alone(ctx: &mut Ctx<'_>, mr: &MrObs) {
    let obs = ctx.obs;
    if wrong_source_port(obs, mr) {
        let port = udp_source_port(mr.ev);
        ctx.report(SOURCE_PORT, Evidence::new(obs.src_port, port).ev(mr.ev));
    }
    let warnings = warnings(mr);
    if !warnings.is_empty() {
        ctx.report(
            PARSER_WARNINGS,
            Evidence::new(warnings.bits(), 0u8).ev(mr.ev),
        );
    }
    if mr.checks.crc == CrcCheck::Bad {
        ctx.report(CRC_GOOD, Evidence::default().ev(mr.ev));
    }
    if wrong_ecn(obs) {
        ctx.report(ECN, Evidence::new(obs.ecn, 2u8).ev(mr.ev));
    }
    if let Some(label) = wrong_flow_label(mr) {
        ctx.report(FLOW_LABEL, Evidence::new(label, mr.ev).ev(mr.ev));
    }
    match &mr.body {
        MrBody::Data(d) if matches!(d.op, DataOp::ReadReq) => {
            if read_req_not_alone(mr, d) {
                let flags = mr.flags & (Flags::SOM | Flags::EOM);
                ctx.report(
                    READ_REQ_ONE_PACKET,
                    Evidence::new(flags.bits(), message_end(d)),
                );
            }
        }
        MrBody::Data(d) => {
            if wrong_som(mr, d) {
                let som = mr.flags.contains(Flags::SOM);
                ctx.report(SOM, Evidence::new(d.msg_offset, som));
            }
            if outside_message(d) {
                ctx.report(INSIDE_MESSAGE, Evidence::new(message_end(d), d.msg_len));
            }
            if wrong_eom(mr, d) {
                ctx.report(EOM, Evidence::new(message_end(d), d.msg_len));
            }
        }
        MrBody::Ctrl(_) => {
            if ctrl_not_zero(mr) {
                ctx.report(CTRL_ZEROS, Evidence::new(mr.path_seq, mr.psn));
            }
        }
        MrBody::Feedback(fb) => {
            if let Some(sack_base) = wrong_sack_base(mr, fb) {
                ctx.report(SACK_BASE, Evidence::new(sack_base, mr.psn));
            }
        }
        MrBody::Probe | MrBody::Other | MrBody::Malformed => {}
    }
}

/// MR-PKT-002.
fn wrong_source_port(obs: &Observation, mr: &MrObs) -> bool {
    obs.src_port != udp_source_port(mr.ev)
}

/// MR-PKT-013: the parser's warnings this rule is about.
fn warnings(mr: &MrObs) -> WarningFlags {
    mr.checks.warnings & WARNINGS
}

/// MR-PKT-012.
fn wrong_ecn(obs: &Observation) -> bool {
    // ECT(0) is 0b10 and CE 0b11: the high bit tells them from Not-ECT
    // and ECT(1) in one test.
    const _: () = assert!(Ecn::Ect0 as u8 == 0b10 && Ecn::Ce as u8 == 0b11);
    obs.ecn & 0b10 == 0
}

/// MR-PKT-015: the IPv6 flow label, when it is not the ev (the parser's
/// fact, `MrChecks::flow_label_not_ev`).
fn wrong_flow_label(mr: &MrObs) -> Option<u32> {
    mr.checks.flow_label_not_ev.map(FlowLabel::value)
}

/// Where a DATA packet's payload ends in its message.
fn message_end(d: &DataObs) -> u64 {
    u64::from(d.msg_offset) + u64::from(d.payload_len)
}

/// MR-PKT-006: a READ_REQ is a one-packet message without payload.
fn read_req_not_alone(mr: &MrObs, d: &DataObs) -> bool {
    !mr.flags.contains(Flags::SOM | Flags::EOM) || message_end(d) != 0
}

/// MR-PKT-003.
fn wrong_som(mr: &MrObs, d: &DataObs) -> bool {
    mr.flags.contains(Flags::SOM) != (d.msg_offset == 0)
}

/// MR-PKT-005.
fn outside_message(d: &DataObs) -> bool {
    message_end(d) > u64::from(d.msg_len)
}

/// MR-PKT-004 (judged inside the message only: MR-PKT-005 covers the rest).
fn wrong_eom(mr: &MrObs, d: &DataObs) -> bool {
    let end = message_end(d);
    end <= u64::from(d.msg_len) && mr.flags.contains(Flags::EOM) != (end == u64::from(d.msg_len))
}

/// MR-PKT-009.
fn ctrl_not_zero(mr: &MrObs) -> bool {
    mr.path_seq != 0 || mr.psn != 0
}

/// MR-PKT-011: an ACK with SACK words whose sack_base is not its
/// cumulative ack (the sack_base).
fn wrong_sack_base(mr: &MrObs, fb: &FeedbackObs) -> Option<u32> {
    match fb.kind {
        FbKind::Ack {
            sack_base,
            sack_words,
            ..
        } if sack_words > 0 && sack_base != mr.psn => Some(sack_base),
        _ => None,
    }
}
