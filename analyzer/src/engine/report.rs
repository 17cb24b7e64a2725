//! The parts of the JSON report (`Engine::snapshot`, whose `Report` holds
//! them): the capture's, each direction's and RoCEv2 flow's, the
//! between-captures results and the engine's. The schema is documented in
//! `analyzer/SCHEMA.md`; field names and their order are stable.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::hist::Summary;

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

/// Between-captures result for one path.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BetweenPath {
    /// `"metaroce"`, or `"rocev2"`: then `dst_conn` is the destination QP,
    /// `src_conn` 0 and `ev` the UDP source port.
    pub proto: &'static str,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_conn: u32,
    pub dst_conn: u32,
    pub ev: u16,
    /// The capture that sees the path's packets first.
    pub upstream: u64,
    pub downstream: u64,
    /// Transmissions captured at both points.
    pub matched: u64,
    /// Transmissions captured upstream and never downstream (within the
    /// window, while both captures ran).
    pub lost_between: u64,
    /// Transmissions captured upstream and not downstream whose fate the
    /// captures cannot tell: sent less than `end_margin_ns` (offset
    /// corrected) before the downstream capture ended, or after it ended.
    /// Neither lost nor delivered.
    pub unknown: u64,
    /// How long the downstream capture must run on after a transmission
    /// for a missing copy to count as lost: `END_MARGIN_DELAYS` (`MultiEngine`'s) times the
    /// largest one-way delay measured on the path (on the capture pair
    /// when the path has none).
    pub end_margin_ns: u64,
    /// One-way delay upstream -> downstream, offset-corrected (samples).
    pub one_way_delay_ns: Summary,
}

#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BetweenReport {
    pub capture_a: u64,
    pub capture_b: u64,
    /// Clock of b minus clock of a, estimated from the traffic; 0 when no
    /// direction and its reverse were both matched.
    pub clock_offset_ns: i64,
    pub offset_estimated: bool,
    pub matched_packets: u64,
    pub paths: Vec<BetweenPath>,
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

impl CaptureReport {
    /// Adds another capture's counters; the first and last timestamps
    /// become the extremes of both (each on its own clock), the duration
    /// the span between them. `files` stays: the reports of one
    /// `MultiEngine` each say how many files were analysed together.
    pub fn merge(&mut self, other: &CaptureReport) {
        let CaptureReport {
            files: _,
            frames,
            metaroce_packets,
            rocev2_packets,
            malformed,
            corrupt_records,
            skipped_bytes,
            first_ts_ns,
            last_ts_ns,
            duration_ns: _,
            time_went_backwards,
            ip_fragments,
            reassembled_datagrams,
            incomplete_datagrams,
            incomplete_fragments,
            ref traffic,
        } = *other;
        if frames > 0 {
            self.first_ts_ns = if self.frames == 0 {
                first_ts_ns
            } else {
                self.first_ts_ns.min(first_ts_ns)
            };
            self.last_ts_ns = self.last_ts_ns.max(last_ts_ns);
        }
        self.frames += frames;
        self.metaroce_packets += metaroce_packets;
        self.rocev2_packets += rocev2_packets;
        self.malformed += malformed;
        self.corrupt_records += corrupt_records;
        self.skipped_bytes += skipped_bytes;
        self.time_went_backwards += time_went_backwards;
        self.ip_fragments += ip_fragments;
        self.reassembled_datagrams += reassembled_datagrams;
        self.incomplete_datagrams += incomplete_datagrams;
        self.incomplete_fragments += incomplete_fragments;
        self.traffic.merge(traffic);
        self.duration_ns = self.last_ts_ns.saturating_sub(self.first_ts_ns);
    }
}

impl EngineReport {
    /// Adds another engine's counters; the settings (`stall_threshold_ns`,
    /// `max_flows`) are this one's (the engines of one `MultiEngine`
    /// share them).
    pub fn merge(&mut self, other: &EngineReport) {
        let EngineReport {
            stall_threshold_ns: _,
            max_flows: _,
            live_directions,
            live_rocev2_flows,
            evicted_directions,
            evicted_rocev2_flows,
            rocev2_unmatched_responses,
            rocev2_not_rc,
        } = *other;
        self.live_directions += live_directions;
        self.live_rocev2_flows += live_rocev2_flows;
        self.evicted_directions += evicted_directions;
        self.evicted_rocev2_flows += evicted_rocev2_flows;
        self.rocev2_unmatched_responses += rocev2_unmatched_responses;
        self.rocev2_not_rc += rocev2_not_rc;
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::engine::Report;

    /// A capture's counters, each a different multiple of `k` (struct
    /// literals without `..`: a new field must be given here too).
    fn capture(k: u64) -> CaptureReport {
        CaptureReport {
            files: 2,
            frames: k,
            metaroce_packets: 2 * k,
            rocev2_packets: 3 * k,
            malformed: 4 * k,
            corrupt_records: 5 * k,
            skipped_bytes: 6 * k,
            first_ts_ns: 1000 * k,
            last_ts_ns: 5000 * k,
            duration_ns: 4000 * k,
            time_went_backwards: 7 * k,
            ip_fragments: 8 * k,
            reassembled_datagrams: 9 * k,
            incomplete_datagrams: 10 * k,
            incomplete_fragments: 11 * k,
            traffic: crate::traffic::TrafficReport {
                mirror_truncated: 12 * k,
                ..Default::default()
            },
        }
    }

    fn engine(k: u64) -> EngineReport {
        EngineReport {
            stall_threshold_ns: 1_000_000,
            max_flows: 16,
            live_directions: k,
            live_rocev2_flows: 2 * k,
            evicted_directions: 3 * k,
            evicted_rocev2_flows: 4 * k,
            rocev2_unmatched_responses: 5 * k,
            rocev2_not_rc: 6 * k,
        }
    }

    fn report(k: u64) -> Report {
        Report {
            capture: capture(k),
            directions: Vec::new(),
            rocev2: Vec::new(),
            between_captures: Vec::new(),
            engine: engine(k),
            lint: None,
        }
    }

    #[test]
    fn merged_reports_sum_every_counter() {
        let mut merged = report(1);
        merged.merge(&report(10));
        let c = &merged.capture;
        assert_eq!(c.files, 2, "the MultiEngine's count, not a sum");
        let summed = [
            (c.frames, 1),
            (c.metaroce_packets, 2),
            (c.rocev2_packets, 3),
            (c.malformed, 4),
            (c.corrupt_records, 5),
            (c.skipped_bytes, 6),
            (c.time_went_backwards, 7),
            (c.ip_fragments, 8),
            (c.reassembled_datagrams, 9),
            (c.incomplete_datagrams, 10),
            (c.incomplete_fragments, 11),
        ];
        for (i, (got, k)) in summed.into_iter().enumerate() {
            assert_eq!(got, 11 * k, "capture counter {i}");
        }
        assert_eq!(c.traffic.mirror_truncated, 11 * 12, "the traffic account");
        assert_eq!((c.first_ts_ns, c.last_ts_ns), (1000, 50_000));
        assert_eq!(c.duration_ns, 49_000);
        let e = &merged.engine;
        assert_eq!((e.stall_threshold_ns, e.max_flows), (1_000_000, 16));
        let summed = [
            e.live_directions,
            e.live_rocev2_flows,
            e.evicted_directions,
            e.evicted_rocev2_flows,
            e.rocev2_unmatched_responses,
            e.rocev2_not_rc,
        ];
        assert_eq!(summed, [11, 22, 33, 44, 55, 66]);
    }

    #[test]
    fn an_empty_capture_leaves_the_time_span_alone() {
        let mut merged = report(0);
        merged.merge(&report(3));
        assert_eq!(
            (merged.capture.first_ts_ns, merged.capture.last_ts_ns),
            (3000, 15_000),
            "the first report had no frame: the second's span"
        );
        merged.merge(&report(0));
        assert_eq!(merged.capture.duration_ns, 12_000);
        assert_eq!(merged.capture.frames, 3);
    }
}
