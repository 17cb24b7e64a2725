//! The RoCEv2 families: one series per host pair (per destination QP with
//! `--metrics-connections`), folded by [`Rows`], and the latency histograms.

use std::collections::BTreeMap;
use std::net::IpAddr;

use analyzer::engine::{Report, RoceFlowReport};

use super::rows::{OTHER, Rows, flow_labels};
use super::{Field, HistField, add_map, gauge, labelled_counter, lint_counter, sorted};
use crate::metrics::MetricsConfig;
use crate::metrics::exposition::{Kind, Writer, labels};
use crate::metrics::latency::{Histograms, SeriesKey};

/// A RoCEv2 flow's figures, summed over the QPs of its series.
#[derive(Debug, Default)]
struct RoceAgg {
    flows: u64,
    data_packets: u64,
    data_bytes: u64,
    retransmissions: u64,
    fast_retransmissions: u64,
    timeout_retransmissions: u64,
    spurious_retransmissions: u64,
    acks: u64,
    rnr_naks: u64,
    cnps: u64,
    ce_marked: u64,
    ect_packets: u64,
    fecn: u64,
    becn: u64,
    read_requests: u64,
    messages_completed: u64,
    bytes_in_flight: u64,
    naks: BTreeMap<&'static str, u64>,
    lint: BTreeMap<&'static str, u64>,
}

impl RoceAgg {
    fn add(&mut self, f: &RoceFlowReport) {
        self.flows += 1;
        self.data_packets += f.data_packets;
        self.data_bytes += f.data_bytes;
        self.retransmissions += f.retransmissions;
        self.fast_retransmissions += f.fast_retransmissions;
        self.timeout_retransmissions += f.timeout_retransmissions;
        self.spurious_retransmissions += f.spurious_retransmissions;
        self.acks += f.acks;
        self.rnr_naks += f.rnr_naks;
        self.cnps += f.cnps;
        self.ce_marked += f.ce_marked;
        self.ect_packets += f.ect_packets;
        self.fecn += f.fecn;
        self.becn += f.becn;
        self.read_requests += f.read_requests;
        self.messages_completed += f.messages_completed;
        self.bytes_in_flight += f.bytes_in_flight;
        add_map(&mut self.naks, f.naks_by_code.iter().map(|(k, v)| (*k, *v)));
        add_map(&mut self.lint, f.lint.iter().map(|(k, v)| (*k, *v)));
    }
}

const ROCE_COUNTERS: &[(&str, &str, Field<RoceAgg>)] = &[
    (
        "metaroce_rocev2_data_packets",
        "RoCEv2 request packets, retransmissions included.",
        |a| a.data_packets,
    ),
    (
        "metaroce_rocev2_data_bytes",
        "RoCEv2 request payload bytes, retransmissions included.",
        |a| a.data_bytes,
    ),
    (
        "metaroce_rocev2_retransmissions",
        "RoCEv2 request retransmissions.",
        |a| a.retransmissions,
    ),
    (
        "metaroce_rocev2_fast_retransmissions",
        "RoCEv2 retransmissions after a sequence-error NAK (go-back-N).",
        |a| a.fast_retransmissions,
    ),
    (
        "metaroce_rocev2_timeout_retransmissions",
        "RoCEv2 retransmissions with no NAK captured before them.",
        |a| a.timeout_retransmissions,
    ),
    (
        "metaroce_rocev2_spurious_retransmissions",
        "RoCEv2 retransmissions of PSNs already acknowledged.",
        |a| a.spurious_retransmissions,
    ),
    ("metaroce_rocev2_acks", "RoCEv2 ACKs.", |a| a.acks),
    ("metaroce_rocev2_rnr_naks", "RoCEv2 RNR NAKs.", |a| {
        a.rnr_naks
    }),
    ("metaroce_rocev2_cnps", "RoCEv2 CNPs about the flow.", |a| {
        a.cnps
    }),
    (
        "metaroce_rocev2_ce_marked_packets",
        "RoCEv2 packets with the IP ECN field CE.",
        |a| a.ce_marked,
    ),
    (
        "metaroce_rocev2_ecn_capable_packets",
        "RoCEv2 packets with an ECN-capable codepoint (ECT(0), ECT(1) or CE).",
        |a| a.ect_packets,
    ),
    (
        "metaroce_rocev2_fecn_packets",
        "RoCEv2 packets with the BTH FECN bit.",
        |a| a.fecn,
    ),
    (
        "metaroce_rocev2_becn_packets",
        "RoCEv2 packets with the BTH BECN bit.",
        |a| a.becn,
    ),
    (
        "metaroce_rocev2_read_requests",
        "RoCEv2 RDMA READ requests.",
        |a| a.read_requests,
    ),
    (
        "metaroce_rocev2_messages_completed",
        "RoCEv2 messages acknowledged (READs: answered).",
        |a| a.messages_completed,
    ),
];

/// Writes the RoCEv2 families; returns how many flows folded into `other`.
pub(super) fn write(
    w: &mut Writer,
    report: &Report,
    hists: Option<&Histograms>,
    cfg: &MetricsConfig,
) -> u64 {
    // RoCEv2 flows, folded.
    let mut roce: Rows<(IpAddr, IpAddr, Option<u32>), RoceAgg> = Rows::new(cfg.max_series);
    for f in &report.rocev2 {
        let qp = cfg.per_connection.then_some(f.dest_qp);
        roce.get((f.src, f.dst, qp), || {
            let (s, d) = (f.src.to_string(), f.dst.to_string());
            match qp {
                None => labels(&[("src", &s), ("dst", &d)]),
                Some(qp) => labels(&[("src", &s), ("dst", &d), ("qp", &qp.to_string())]),
            }
        })
        .add(f);
    }
    let roce_rows = roce.all(OTHER);
    for &(name, help, field) in ROCE_COUNTERS {
        w.family(name, Kind::Counter, help);
        for (l, a) in &roce_rows {
            w.sample(name, l, None, field(a));
        }
    }
    labelled_counter(
        w,
        "metaroce_rocev2_naks",
        "RoCEv2 NAKs, by code (IBTA table 43).",
        "code",
        &roce_rows,
        |a| &a.naks,
    );
    lint_counter(
        w,
        "metaroce_rocev2_lint_findings",
        "Conformance lint findings about the RoCEv2 flow, by rule.",
        &roce_rows,
        |a| &a.lint,
    );
    gauge(
        w,
        "metaroce_rocev2_flows",
        "RoCEv2 RC flows (destination QPs) in the series.",
        &roce_rows,
        |a| a.flows,
    );
    gauge(
        w,
        "metaroce_rocev2_bytes_in_flight",
        "RoCEv2 request payload bytes not yet acknowledged.",
        &roce_rows,
        |a| a.bytes_in_flight,
    );
    let roce_hists = sorted(hists.map(|h| &h.rocev2));
    let roce_hist_families: [(&str, &str, HistField); 2] = [
        (
            "metaroce_rocev2_ack_rtt_seconds",
            "RoCEv2 request to its ACK/NAK/READ response.",
            |l| &l.ack_rtt,
        ),
        (
            "metaroce_rocev2_message_completion_seconds",
            "RoCEv2 message start to its acknowledgement (READ: last response).",
            |l| &l.completion,
        ),
    ];
    for (name, help, field) in roce_hist_families {
        w.family(name, Kind::Histogram, help);
        for (key, l) in &roce_hists {
            let h = field(l);
            if !h.is_empty() {
                let labels = match key {
                    SeriesKey::Flow { src, dst, .. } => flow_labels(*src, *dst, None),
                    SeriesKey::Other => OTHER.to_string(),
                };
                w.histogram(name, &labels, h);
            }
        }
    }
    roce.folded
}
