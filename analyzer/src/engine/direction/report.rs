//! The direction's part of the report (`DirectionReport`).

use std::collections::BTreeMap;

use proto_parse::metaroce::{CnpReason, NackCode};

use super::Direction;
use super::rtt::RttSample;
use crate::engine::Config;
use crate::engine::hist::{LazyHist, Summary};
use crate::engine::report::{DirectionReport, PathReport, StallReport};

impl Direction {
    /// Every RTT sample of the direction, the `pending` ones included: the
    /// sum of its paths' histograms and `rtt_off_path`.
    pub(super) fn ack_rtt_summary(&self, pending: &[RttSample]) -> Summary {
        let paths = self.paths.iter().map(|(_, p)| &p.rtt);
        let mut all = LazyHist::sum(paths.chain([&self.rtt_off_path]));
        for s in pending {
            all.record(s.rtt);
        }
        all.summary()
    }

    /// The direction's report; `now` decides which stalls are open.
    pub(crate) fn report(&self, now: u64, cfg: &Config) -> DirectionReport {
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
