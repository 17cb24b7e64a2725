//! The JSON report (`Engine::snapshot`). The schema is documented in
//! `analyzer/SCHEMA.md`; field names and their order are stable.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::hist::Summary;
pub use super::merge::BetweenReport;

#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Report {
    pub capture: CaptureReport,
    pub directions: Vec<DirectionReport>,
    pub rocev2: Vec<RoceFlowReport>,
    pub between_captures: Vec<BetweenReport>,
    pub engine: EngineReport,
    /// The conformance lint's counts, when it ran (`Config::lint`).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub lint: Option<crate::lint::LintReport>,
}

#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CaptureReport {
    pub files: u64,
    pub frames: u64,
    pub metaroce_packets: u64,
    pub rocev2_packets: u64,
    pub malformed: u64,
    /// Capture-file records that could not be read (the reader skipped
    /// them and went on), and the bytes skipped while resynchronising.
    /// Filled by whoever reads the file; the engine never sees them.
    pub corrupt_records: u64,
    pub skipped_bytes: u64,
    /// Capture time of the first and last frame (ns), 0 when empty.
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    pub duration_ns: u64,
    /// Frames whose timestamp is earlier than the previous frame's.
    pub time_went_backwards: u64,
    /// IP fragments read; datagrams reassembled from them (each analysed
    /// as one packet); datagrams that never completed and their fragments.
    /// Filled by whoever reads the file (`proto_parse::defrag`), like
    /// `corrupt_records`.
    pub ip_fragments: u64,
    pub reassembled_datagrams: u64,
    pub incomplete_datagrams: u64,
    pub incomplete_fragments: u64,
    /// Mirrored frames decapsulated and what the frames that made no
    /// packet were (`crate::traffic`). Filled by whoever decodes the
    /// frames, like `corrupt_records`.
    pub traffic: crate::traffic::TrafficReport,
}

#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DirectionReport {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_conn: u32,
    pub dst_conn: u32,
    pub first_frame: u64,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    pub data_packets: u64,
    pub data_bytes: u64,
    /// Payload bytes of first transmissions that were not trimmed.
    pub goodput_bytes: u64,
    /// goodput_bytes * 8 / (last DATA - first DATA), 0 if under 2 packets.
    pub goodput_bps: u64,
    pub retransmissions: u64,
    pub fast_retransmissions: u64,
    pub timeout_retransmissions: u64,
    pub spurious_retransmissions: u64,
    pub out_of_order: u64,
    pub max_reorder_distance: u32,
    pub trimmed: u64,
    pub ce_marked: u64,
    pub ece: u64,
    pub acks: u64,
    pub nacks: u64,
    pub nacks_by_code: BTreeMap<String, u64>,
    pub cnps: u64,
    pub cnps_by_reason: BTreeMap<String, u64>,
    pub probes: u64,
    pub probe_replies: u64,
    pub ctrl: u64,
    /// Feedback packets this direction sent (acknowledging the reverse).
    pub feedback_sent: u64,
    pub path_loss: u64,
    pub messages_completed: u64,
    pub messages_delivered: u64,
    pub cum_ack: Option<u32>,
    pub highest_psn: Option<u32>,
    pub outstanding_packets: u64,
    /// Payload bytes of the PSNs captured and neither SACKed nor below the
    /// cumulative ack, at snapshot time; the largest value it had.
    pub bytes_in_flight: u64,
    pub max_bytes_in_flight: u64,
    pub ack_rtt_ns: Summary,
    pub fabric_rtt_ns: Summary,
    pub msg_completion_ns: Summary,
    pub msg_delivery_ns: Summary,
    /// Acked (sender-view) completion by op: "send", "write", "read"
    /// (READ: request to the last response byte).
    pub msg_completion_by_op_ns: BTreeMap<&'static str, Summary>,
    pub stalls: Vec<StallReport>,
    pub stalls_dropped: u64,
    pub paths: Vec<PathReport>,
    pub window_overflow: u64,
    pub messages_evicted: u64,
    /// Lint findings on this direction's packets, per rule id (only with
    /// the lint on, only rules that fired and apply at the capture point).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "BTreeMap::is_empty"))]
    pub lint: BTreeMap<&'static str, u64>,
}

#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StallReport {
    pub start_ns: u64,
    pub duration_ns: u64,
    /// True when still open at the end of the capture (or at `now`).
    pub open: bool,
    /// What happened first during the stall: "timeout_retransmission",
    /// "fast_retransmission", "spurious_retransmission", "nack", "probe",
    /// "ack" (the ack came late with nothing in between), or "open".
    pub end_cause: &'static str,
    /// Frame that ended the stall (the advancing feedback).
    pub end_frame: Option<u64>,
    pub cum_ack: Option<u32>,
    pub outstanding_packets: u64,
    /// evs with unacked transmissions when the stall was detected.
    pub paths_in_flight: Vec<u16>,
    pub retransmissions: u64,
}

#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PathReport {
    pub ev: u16,
    /// Non-CTRL packets this direction sent on the ev.
    pub packets: u64,
    pub data_packets: u64,
    pub data_bytes: u64,
    pub retransmissions: u64,
    /// path_seq values never seen (receiver-side loss, spec 9).
    pub lost: u64,
    /// Transmissions on this ev whose PSN was retransmitted before any
    /// ack/SACK covered it (sender-side loss, spec 9), less those later
    /// shown spurious by DUP.
    pub lost_inferred: u64,
    /// path_seq going backwards on the path.
    pub reordered: u64,
    pub ce_marked: u64,
    pub ack_rtt_ns: Summary,
}

#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RoceFlowReport {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dest_qp: u32,
    pub first_frame: u64,
    pub data_packets: u64,
    pub data_bytes: u64,
    pub retransmissions: u64,
    pub fast_retransmissions: u64,
    pub timeout_retransmissions: u64,
    pub spurious_retransmissions: u64,
    /// 24-bit PSNs of the requests: the first and highest captured, and the
    /// highest the responder acknowledged (ACK, READ response, or the PSN
    /// before a NAK / RNR NAK).
    pub first_psn: Option<u32>,
    pub highest_psn: Option<u32>,
    pub acked_psn: Option<u32>,
    /// PSNs sent and not yet acknowledged (highest - acked; 0 before the
    /// first acknowledgement).
    pub outstanding_psns: u32,
    /// Payload bytes of the requests captured and not yet acknowledged, at
    /// snapshot time; the largest value it had.
    pub bytes_in_flight: u64,
    pub max_bytes_in_flight: u64,
    pub naks: u64,
    /// NAKs by code name (IBTA table 43), codes seen only.
    pub naks_by_code: BTreeMap<&'static str, u64>,
    pub rnr_naks: u64,
    pub acks: u64,
    pub cnps: u64,
    pub ce_marked: u64,
    pub read_requests: u64,
    pub read_response_packets: u64,
    pub messages_completed: u64,
    /// Packets (requests and responses) with an ECN-capable IP codepoint
    /// (ECT(0), ECT(1) or CE), and the BTH FECN / BECN bits seen.
    pub ect_packets: u64,
    pub fecn: u64,
    pub becn: u64,
    pub msg_completion_ns: Summary,
    pub msg_completion_by_op_ns: BTreeMap<&'static str, Summary>,
    pub ack_rtt_ns: Summary,
    /// Lint findings about this flow, per rule id (only with the lint on,
    /// only rules that fired and apply at the capture point).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "BTreeMap::is_empty"))]
    pub lint: BTreeMap<&'static str, u64>,
}

/// Kept for source compatibility: the between-captures entry.
pub type BetweenCaptures = BetweenReport;

#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EngineReport {
    pub stall_threshold_ns: u64,
    pub max_flows: u64,
    pub live_directions: u64,
    pub live_rocev2_flows: u64,
    pub evicted_directions: u64,
    pub evicted_rocev2_flows: u64,
    /// RoCEv2 responses (ACK/NAK/CNP/READ response) matched to no request
    /// flow.
    pub rocev2_unmatched_responses: u64,
    /// RoCEv2 packets of other services (UD, UC, ...): counted, not analysed.
    pub rocev2_not_rc: u64,
}
