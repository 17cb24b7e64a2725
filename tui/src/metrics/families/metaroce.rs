//! The MetaRoCE families: one series per direction (and per path with
//! `--metrics-paths`), folded by [`Rows`], and the latency histograms.

use std::collections::BTreeMap;

use analyzer::engine::{DirectionReport, Report};
use proto_parse::metaroce::{CnpReason, NackCode};

use super::rows::{OTHER, Rows, series_labels};
use super::{Field, HistField, add_map, gauge, labelled_counter, lint_counter, sorted};
use crate::metrics::MetricsConfig;
use crate::metrics::exposition::{Kind, Writer};
use crate::metrics::latency::{Histograms, SeriesKey};

/// A MetaRoCE direction's figures, summed over what folds into its series.
#[derive(Debug, Default)]
struct DirAgg {
    directions: u64,
    packets: u64,
    data_packets: u64,
    data_bytes: u64,
    goodput_bytes: u64,
    retransmissions: u64,
    fast_retransmissions: u64,
    timeout_retransmissions: u64,
    spurious_retransmissions: u64,
    rx_lost: u64,
    tx_lost: u64,
    out_of_order: u64,
    trimmed: u64,
    ce_marked: u64,
    ece: u64,
    acks: u64,
    probes: u64,
    messages_completed: u64,
    messages_delivered: u64,
    stalls: u64,
    stall_ns: u64,
    stalls_open: u64,
    bytes_in_flight: u64,
    nacks: BTreeMap<String, u64>,
    cnps: BTreeMap<String, u64>,
    lint: BTreeMap<&'static str, u64>,
}

impl DirAgg {
    fn add(&mut self, d: &DirectionReport) {
        if self.directions == 0 {
            // Every code and reason the spec defines, at 0 until seen: a
            // rate over them exists before the first NACK or CNP.
            let zero =
                |values: &[(u8, &str)]| values.iter().map(|(_, n)| (n.to_string(), 0)).collect();
            self.nacks = zero(NackCode::VALUES);
            self.cnps = zero(CnpReason::VALUES);
        }
        self.directions += 1;
        self.packets += d.data_packets + d.feedback_sent + d.probes + d.ctrl;
        self.data_packets += d.data_packets;
        self.data_bytes += d.data_bytes;
        self.goodput_bytes += d.goodput_bytes;
        self.retransmissions += d.retransmissions;
        self.fast_retransmissions += d.fast_retransmissions;
        self.timeout_retransmissions += d.timeout_retransmissions;
        self.spurious_retransmissions += d.spurious_retransmissions;
        self.rx_lost += d.path_loss;
        self.tx_lost += d.paths.iter().map(|p| p.lost_inferred).sum::<u64>();
        self.out_of_order += d.out_of_order;
        self.trimmed += d.trimmed;
        self.ce_marked += d.ce_marked;
        self.ece += d.ece;
        self.acks += d.acks;
        self.probes += d.probes;
        self.messages_completed += d.messages_completed;
        self.messages_delivered += d.messages_delivered;
        self.stalls += d.stalls.len() as u64 + d.stalls_dropped;
        self.stall_ns += d.stalls.iter().map(|s| s.duration_ns).sum::<u64>();
        self.stalls_open += d.stalls.iter().filter(|s| s.open).count() as u64;
        self.bytes_in_flight += d.bytes_in_flight;
        add_map(
            &mut self.nacks,
            d.nacks_by_code.iter().map(|(k, v)| (k.clone(), *v)),
        );
        add_map(
            &mut self.cnps,
            d.cnps_by_reason.iter().map(|(k, v)| (k.clone(), *v)),
        );
        add_map(&mut self.lint, d.lint.iter().map(|(k, v)| (*k, *v)));
    }
}

const DIR_COUNTERS: &[(&str, &str, Field<DirAgg>)] = &[
    (
        "metaroce_packets",
        "Packets the direction sent: DATA, feedback about the reverse direction, probes, CTRL.",
        |a| a.packets,
    ),
    (
        "metaroce_data_packets",
        "DATA packets, retransmissions included.",
        |a| a.data_packets,
    ),
    (
        "metaroce_data_bytes",
        "DATA payload bytes, retransmissions included.",
        |a| a.data_bytes,
    ),
    (
        "metaroce_goodput_bytes",
        "Payload bytes of first transmissions that were not trimmed.",
        |a| a.goodput_bytes,
    ),
    (
        "metaroce_retransmissions",
        "DATA retransmissions (fast, timeout or other).",
        |a| a.retransmissions,
    ),
    (
        "metaroce_fast_retransmissions",
        "Retransmissions after a NACK or a SACK showing later PSNs.",
        |a| a.fast_retransmissions,
    ),
    (
        "metaroce_timeout_retransmissions",
        "Retransmissions with no loss signal captured before them.",
        |a| a.timeout_retransmissions,
    ),
    (
        "metaroce_spurious_retransmissions",
        "Retransmissions of a PSN already acked, or shown spurious by a DUP feedback.",
        |a| a.spurious_retransmissions,
    ),
    (
        "metaroce_rx_lost_packets",
        "path_seq values never seen: loss as a receiver-side capture measures it (spec 9).",
        |a| a.rx_lost,
    ),
    (
        "metaroce_tx_lost_packets",
        "Transmissions retransmitted before any ack covered them: loss as a sender-side capture measures it (spec 9).",
        |a| a.tx_lost,
    ),
    (
        "metaroce_out_of_order_packets",
        "DATA below the direction's highest PSN that is not a retransmission.",
        |a| a.out_of_order,
    ),
    ("metaroce_trimmed_packets", "Trimmed DATA packets.", |a| {
        a.trimmed
    }),
    (
        "metaroce_ce_marked_packets",
        "Packets with the IP ECN field CE.",
        |a| a.ce_marked,
    ),
    (
        "metaroce_ece_feedback",
        "Feedback about this direction with the ECE flag.",
        |a| a.ece,
    ),
    ("metaroce_acks", "ACKs about this direction.", |a| a.acks),
    (
        "metaroce_probes",
        "PROBE packets the direction sent.",
        |a| a.probes,
    ),
    (
        "metaroce_messages_completed",
        "Messages acked (sender view).",
        |a| a.messages_completed,
    ),
    (
        "metaroce_messages_delivered",
        "Messages whose every byte was captured (receiver view).",
        |a| a.messages_delivered,
    ),
    (
        "metaroce_stalls",
        "Stalls: no cumulative-ack progress for the stall threshold with data outstanding.",
        |a| a.stalls,
    ),
];

/// A path's (ev's) figures, summed over the connections of its series.
#[derive(Debug, Default)]
struct PathAgg {
    packets: u64,
    data_packets: u64,
    data_bytes: u64,
    retransmissions: u64,
    rx_lost: u64,
    tx_lost: u64,
    reordered: u64,
    ce_marked: u64,
    rtt_p99_ns: u64,
}

const PATH_COUNTERS: &[(&str, &str, Field<PathAgg>)] = &[
    (
        "metaroce_path_packets",
        "Non-CTRL packets the direction sent on the path.",
        |a| a.packets,
    ),
    (
        "metaroce_path_data_packets",
        "DATA packets on the path.",
        |a| a.data_packets,
    ),
    (
        "metaroce_path_data_bytes",
        "DATA payload bytes on the path.",
        |a| a.data_bytes,
    ),
    (
        "metaroce_path_retransmissions",
        "Retransmissions sent on the path.",
        |a| a.retransmissions,
    ),
    (
        "metaroce_path_rx_lost_packets",
        "path_seq values never seen on the path (receiver-side loss).",
        |a| a.rx_lost,
    ),
    (
        "metaroce_path_tx_lost_packets",
        "Transmissions on the path retransmitted before any ack (sender-side loss).",
        |a| a.tx_lost,
    ),
    (
        "metaroce_path_reordered_packets",
        "path_seq going backwards on the path.",
        |a| a.reordered,
    ),
    (
        "metaroce_path_ce_marked_packets",
        "CE-marked packets on the path.",
        |a| a.ce_marked,
    ),
];

/// Writes the MetaRoCE families; returns how many directions and paths
/// folded into `other`.
pub(super) fn write(
    w: &mut Writer,
    report: &Report,
    hists: Option<&Histograms>,
    cfg: &MetricsConfig,
) -> [u64; 2] {
    // MetaRoCE directions, folded.
    let mut dirs: Rows<SeriesKey, DirAgg> = Rows::new(cfg.max_series);
    let mut paths: Rows<(SeriesKey, u16), PathAgg> = Rows::new(cfg.max_series);
    for d in &report.directions {
        let conns = cfg.per_connection.then_some((d.src_conn, d.dst_conn));
        let key = SeriesKey::Flow {
            src: d.src,
            dst: d.dst,
            conns,
        };
        dirs.get(key, || series_labels(&key)).add(d);
        if cfg.paths {
            for p in &d.paths {
                let a = paths.get((key, p.ev), || {
                    format!("{},ev=\"{}\"", series_labels(&key), p.ev)
                });
                a.packets += p.packets;
                a.data_packets += p.data_packets;
                a.data_bytes += p.data_bytes;
                a.retransmissions += p.retransmissions;
                a.rx_lost += p.lost;
                a.tx_lost += p.lost_inferred;
                a.reordered += p.reordered;
                a.ce_marked += p.ce_marked;
                a.rtt_p99_ns = a.rtt_p99_ns.max(p.ack_rtt_ns.p99);
            }
        }
    }
    let dir_rows = dirs.all(OTHER);
    // A series that has sent no DATA (the feedback side of a transfer)
    // shows its packets, connections and lint findings only: its other
    // figures are about DATA, and would all be 0.
    let data_rows: Vec<(&str, &DirAgg)> = dir_rows
        .iter()
        .filter(|(_, a)| a.data_packets > 0)
        .copied()
        .collect();
    for &(name, help, field) in DIR_COUNTERS {
        w.family(name, Kind::Counter, help);
        let rows = if name == "metaroce_packets" {
            &dir_rows
        } else {
            &data_rows
        };
        for (l, a) in rows {
            w.sample(name, l, None, field(a));
        }
    }
    w.family(
        "metaroce_stall_seconds",
        Kind::Counter,
        "Time spent in stalls (the stalls the engine keeps; open ones up to now).",
    );
    for (l, a) in &data_rows {
        w.sample_f64("metaroce_stall_seconds", l, a.stall_ns as f64 / 1e9);
    }
    labelled_counter(
        w,
        "metaroce_nacks",
        "NACKs about the direction, by code.",
        "code",
        &data_rows,
        |a| &a.nacks,
    );
    labelled_counter(
        w,
        "metaroce_cnps",
        "CNPs about the direction, by reason.",
        "reason",
        &data_rows,
        |a| &a.cnps,
    );
    lint_counter(
        w,
        "metaroce_lint_findings",
        "Conformance lint findings on the direction's packets, by rule (docs/lint.md).",
        &dir_rows,
        |a| &a.lint,
    );
    gauge(
        w,
        "metaroce_connections",
        "Connection directions in the series.",
        &dir_rows,
        |a| a.directions,
    );
    gauge(
        w,
        "metaroce_stalls_open",
        "Stalls open now.",
        &data_rows,
        |a| a.stalls_open,
    );
    gauge(
        w,
        "metaroce_bytes_in_flight",
        "Payload bytes captured and not yet acked.",
        &data_rows,
        |a| a.bytes_in_flight,
    );

    let metaroce_hists = sorted(hists.map(|h| &h.metaroce));
    let hist_families: [(&str, &str, HistField); 4] = [
        (
            "metaroce_ack_rtt_seconds",
            "ACK RTT: feedback capture time minus the capture time of the transmission it echoes.",
            |l| &l.ack_rtt,
        ),
        (
            "metaroce_fabric_rtt_seconds",
            "Fabric RTT: the ACK RTT less the receiver's hold time (non-negative samples).",
            |l| &l.fabric_rtt,
        ),
        (
            "metaroce_message_completion_seconds",
            "Message start to the feedback acking its last PSN (READ: request to last response).",
            |l| &l.completion,
        ),
        (
            "metaroce_message_delivery_seconds",
            "Message's first captured packet to its last missing byte (receiver view).",
            |l| &l.delivery,
        ),
    ];
    for (name, help, field) in hist_families {
        w.family(name, Kind::Histogram, help);
        for (key, l) in &metaroce_hists {
            let h = field(l);
            if !h.is_empty() {
                w.histogram(name, &series_labels(key), h);
            }
        }
    }

    if cfg.paths {
        let path_rows = paths.all("src=\"other\",dst=\"other\",ev=\"other\"");
        for &(name, help, field) in PATH_COUNTERS {
            w.family(name, Kind::Counter, help);
            for (l, a) in &path_rows {
                w.sample(name, l, None, field(a));
            }
        }
        w.family("metaroce_path_ack_rtt_p99_seconds", Kind::Gauge, "99th percentile of the path's ACK RTT over the connection's life (the worst connection of the series; engine summary, 3 significant digits).");
        for (l, a) in &path_rows {
            w.sample_f64(
                "metaroce_path_ack_rtt_p99_seconds",
                l,
                a.rtt_p99_ns as f64 / 1e9,
            );
        }
    }
    [dirs.folded, paths.folded]
}
