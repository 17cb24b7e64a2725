//! The per-packet analysis the engine returns from `ingest`: what the
//! Wireshark plugin shows under `metaroce.analysis.*`.

use proto_parse::metaroce::{CnpReason, NackCode};

/// Why a PSN was sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum RetxKind {
    /// After a NACK for the PSN, or a SACK showing later PSNs received
    /// (MetaRoCE), or a sequence-error NAK (RoCEv2 go-back-N).
    Fast,
    /// No loss signal was captured before it.
    Timeout,
    /// The PSN was already cumulatively acked or SACKed (spec 11.10).
    Spurious,
}

impl RetxKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            RetxKind::Fast => "fast",
            RetxKind::Timeout => "timeout",
            RetxKind::Spurious => "spurious",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Retransmission {
    /// Frame number of the first captured transmission of this PSN (`None`
    /// when the original was not captured).
    pub original_frame: Option<u64>,
    /// tx_attempt, or the number of earlier captured transmissions if
    /// larger.
    pub attempt: u8,
    /// Why it was sent, as known when it was captured.
    pub kind: RetxKind,
    /// The DUP feedback frame that showed it spurious after it was
    /// captured (spec 11.10). `ingest` cannot know it (the proof comes
    /// later): a consumer that keeps verdicts fills it from the DUP's
    /// `dup_of_frame` (the plugin, for its later passes).
    pub shown_spurious_by: Option<u64>,
}

impl Retransmission {
    /// Spurious at capture, or shown spurious by a later DUP feedback:
    /// what the report counts in `spurious_retransmissions`.
    pub fn spurious(&self) -> bool {
        self.kind == RetxKind::Spurious || self.shown_spurious_by.is_some()
    }
}

/// Which message view completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum MsgView {
    /// Start of message to the first feedback whose cumulative ack passes
    /// its last PSN (spec 9, sender view).
    Acked,
    /// First captured packet to the capture of the last missing byte
    /// (receiver view).
    Delivered,
    /// RDMA READ: request to the last response byte.
    Read,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MsgDone {
    pub msg_id: u32,
    pub op: &'static str,
    pub view: MsgView,
    pub latency_ns: u64,
}

/// A stall this packet lies in (or ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StallMark {
    pub start_ns: u64,
    /// Time from the stall start to this packet.
    pub elapsed_ns: u64,
    /// This packet (a feedback advancing the cumulative ack) ended it.
    pub ended: bool,
}

/// What a per-packet view (the Wireshark plugin) shows of a RoCEv2 packet
/// beyond its [`Verdict`]: facts the engine knows at that packet and the
/// report does not need. Read with [`crate::Engine::rocev2_facts`] right
/// after the packet's `ingest`; every field is `None` when it does not
/// apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoceFacts {
    /// A request: the 24-bit PSN that continues its flow (the highest PSN
    /// before this packet, plus one); `None` for the flow's first request.
    pub expected_psn: Option<u32>,
    /// A READ response or atomic ACK: the frame of the request it answers.
    pub request_frame: Option<u64>,
    /// A READ response: where it stands among its request's responses.
    pub read: Option<ReadProgress>,
    /// A CNP: time since the previous CNP of the same flow.
    pub cnp_interval_ns: Option<u64>,
}

/// A READ response's place among the responses of the READ it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadProgress {
    /// 1 for the response naming the request's PSN, and so on.
    pub index: u32,
    /// The most responses the READ can take (its length at the smallest
    /// path MTU, 256 bytes).
    pub span: u32,
    /// Taken in order by the requester (false: beyond a missing response,
    /// discarded, or a duplicate).
    pub accepted: bool,
    /// The last response, and every response of the READ arrived in order:
    /// the READ is complete.
    pub complete: bool,
}

/// The analysis of one packet. Every field is `None`/`false` when it does
/// not apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Verdict {
    pub frame: u64,
    /// Index of the flow (MetaRoCE direction or RoCEv2 flow) in the engine;
    /// stable until the flow is evicted.
    pub flow: Option<u32>,
    pub retransmission: Option<Retransmission>,
    /// DATA below the highest PSN of its direction, not a retransmission:
    /// the distance in PSNs.
    pub out_of_order: Option<u32>,
    /// path_seq values missing on this packet's path just before it.
    pub path_loss: Option<u32>,
    /// MetaRoCE: the path_seq that follows the one of the previous packet
    /// on this packet's path (capture order, 0 skipped), when this packet
    /// carries another; also a 0 on a path that numbers its packets. None
    /// on a path's first packet. At the sender a counting fault; elsewhere
    /// also a loss or reordering on the way. For the lint (MR-SND-003).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub path_seq_expected: Option<u16>,
    /// MetaRoCE: the highest path_seq of the packet's path so far, when
    /// this packet's is at or below it yet was sent (its tx_ts, serial
    /// arithmetic) after the packet that carried it: a step back that no
    /// loss or reordering on the way explains. For the lint (MR-SND-003).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub path_seq_back: Option<u16>,
    pub trimmed: bool,
    pub ce_marked: bool,
    /// Feedback with the ECE flag.
    pub ece: bool,
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser_name"))]
    pub nack: Option<NackCode>,
    /// RoCEv2 AETH NAK / RNR NAK syndrome byte.
    pub rocev2_nak: Option<u8>,
    /// MetaRoCE CNP reason (RoCEv2 CNPs: `cnp_rocev2`).
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser_name"))]
    pub cnp: Option<CnpReason>,
    pub cnp_rocev2: bool,
    /// Feedback: capture time minus the capture time of the transmission
    /// it echoes (first feedback only, spec 11.9).
    pub ack_rtt_ns: Option<u64>,
    /// ack_rtt minus the receiver hold time T3 - T2 (may be negative when
    /// clocks or units disagree).
    pub fabric_rtt_ns: Option<i64>,
    /// Feedback: the frame of the transmission it echoes.
    pub acked_frame: Option<u64>,
    /// Feedback with DUP: the frame of the retransmission it shows was
    /// spurious (the PSN's latest retransmission, whether the DUP echoes
    /// it or the original).
    pub dup_of_frame: Option<u64>,
    /// Feedback: PSNs newly covered by the cumulative ack.
    pub cum_ack_advance: Option<u32>,
    /// A message completed at this packet (the first one, when several).
    pub message: Option<MsgDone>,
    /// Messages completed at this packet.
    pub messages_completed: u16,
    pub stall: Option<StallMark>,
    /// The lint rules this packet broke (only with `Config::lint`).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "RuleSet::is_empty"))]
    pub lint: RuleSet,
}

impl Verdict {
    /// Notes a message completed at this packet: the first one becomes the
    /// verdict's `message`, and every one goes to `done` (a cumulative ack
    /// can complete many).
    pub(crate) fn message_done(&mut self, done: &mut Vec<MsgDone>, m: MsgDone) {
        if self.message.is_none() {
            self.message = Some(m);
        }
        done.push(m);
    }
}

/// Serializes an open enum by its spec name ("GAP", "unknown (9)").
#[cfg(feature = "serde")]
fn ser_name<T: std::fmt::Display, S: serde::Serializer>(
    value: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

/// The rules a packet broke, kept inline in its `Verdict` (no allocation):
/// a bit per rule of the lint's registry, by the rule's flat index there.
/// The registry gives the bits their meaning: `insert`, `contains` and
/// `iter` by `lint::RuleId` are defined beside it (`lint/rule.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuleSet([u64; 2]);

impl RuleSet {
    /// Rules the registry may hold.
    pub const CAPACITY: usize = 128;

    pub fn is_empty(&self) -> bool {
        self.0 == [0, 0]
    }

    pub fn len(&self) -> usize {
        (self.0[0].count_ones() + self.0[1].count_ones()) as usize
    }

    /// Adds the rule of flat index `i` (below [`RuleSet::CAPACITY`]).
    #[inline]
    pub(crate) fn insert_index(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    #[inline]
    pub(crate) fn contains_index(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
}
