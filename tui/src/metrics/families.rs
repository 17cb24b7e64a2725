//! The metrics: one [`Snapshot`] (what the TUI renders) in, the exposition
//! out. Every figure is the engine report's, the capture statistics' or
//! the verdict-fed histograms' ([`super::latency`]); nothing is analysed
//! here.
//!
//! Series are keyed per DATA direction by `src` and `dst` host: a host's
//! connections to one peer fold into one series, unless
//! `--metrics-connections` adds `src_conn` and `dst_conn` (RoCEv2: `qp`).
//! At most `--metrics-max-series` label sets per table keep their own
//! series, the first seen first; the rest fold into `src="other",
//! dst="other"` and `metaroce_exporter_folded_flows` says how many.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use analyzer::engine::{DirectionReport, RoceFlowReport};
use proto_parse::metaroce::{CnpReason, NackCode};

use super::MetricsConfig;
use super::exposition::{Format, Kind, Writer, labels};
use super::latency::{Hist, Latencies, SeriesKey, SeriesTable};
use crate::model::{RunState, Snapshot, severity};

/// What a scrape reads of the process itself (`/proc/self`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessHealth {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
}

impl ProcessHealth {
    pub fn read() -> ProcessHealth {
        let cpu_seconds =
            crate::model::ProcessStats::read(0.0).map_or(0.0, |p| p.cpu_user_s + p.cpu_system_s);
        // statm: size resident ... in pages.
        let resident_bytes = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map_or(0, |pages| pages * page_size());
        ProcessHealth {
            cpu_seconds,
            resident_bytes,
        }
    }
}

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

/// One field of an aggregate, for the tables of counters below.
type Field<A> = fn(&A) -> u64;
/// One histogram of a direction's or flow's latencies.
type HistField = fn(&Latencies) -> &Hist;

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

fn add_map<K: Ord>(into: &mut BTreeMap<K, u64>, from: impl Iterator<Item = (K, u64)>) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}

/// Rows of one table: label sets in first-seen order, each with its
/// aggregate; keys past the limit go to one `other` row.
struct Rows<K, A> {
    index: HashMap<K, usize>,
    rows: Vec<(String, A)>,
    other: Option<A>,
    folded: u64,
    max: usize,
}

impl<K: std::hash::Hash + Eq, A: Default> Rows<K, A> {
    fn new(max: usize) -> Self {
        Rows {
            index: HashMap::new(),
            rows: Vec::new(),
            other: None,
            folded: 0,
            max: max.max(1),
        }
    }

    /// The aggregate of `key` (labels made by `labels` when it is new).
    fn get(&mut self, key: K, labels: impl FnOnce() -> String) -> &mut A {
        if let Some(&i) = self.index.get(&key) {
            return &mut self.rows[i].1;
        }
        if self.rows.len() < self.max {
            self.index.insert(key, self.rows.len());
            self.rows.push((labels(), A::default()));
            let last = self.rows.len() - 1;
            return &mut self.rows[last].1;
        }
        self.folded += 1;
        self.other.get_or_insert_with(A::default)
    }

    /// Every row, `other` last.
    fn all<'a>(&'a self, other_labels: &'a str) -> Vec<(&'a str, &'a A)> {
        let mut all: Vec<(&'a str, &'a A)> =
            self.rows.iter().map(|(l, a)| (l.as_str(), a)).collect();
        if let Some(o) = &self.other {
            all.push((other_labels, o));
        }
        all
    }
}

const OTHER: &str = "src=\"other\",dst=\"other\"";

fn flow_labels(src: IpAddr, dst: IpAddr, conns: Option<(&str, u32, &str, u32)>) -> String {
    let (s, d) = (src.to_string(), dst.to_string());
    match conns {
        None => labels(&[("src", &s), ("dst", &d)]),
        Some((a, x, b, y)) => labels(&[
            ("src", &s),
            ("dst", &d),
            (a, &x.to_string()),
            (b, &y.to_string()),
        ]),
    }
}

fn series_labels(key: &SeriesKey) -> String {
    match *key {
        SeriesKey::Flow { src, dst, conns } => {
            flow_labels(src, dst, conns.map(|(a, b)| ("src_conn", a, "dst_conn", b)))
        }
        SeriesKey::Other => OTHER.to_string(),
    }
}

/// Renders the snapshot in `format`.
pub fn render(
    snap: &Snapshot,
    cfg: &MetricsConfig,
    format: Format,
    health: ProcessHealth,
) -> String {
    let report = &snap.report;
    let mut w = Writer::new(
        format,
        4096 + 4096 * (report.directions.len() + report.rocev2.len()).min(cfg.max_series),
    );

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
        &mut w,
        "metaroce_nacks",
        "NACKs about the direction, by code.",
        "code",
        &data_rows,
        |a| &a.nacks,
    );
    labelled_counter(
        &mut w,
        "metaroce_cnps",
        "CNPs about the direction, by reason.",
        "reason",
        &data_rows,
        |a| &a.cnps,
    );
    lint_counter(
        &mut w,
        "metaroce_lint_findings",
        "Conformance lint findings on the direction's packets, by rule (docs/lint.md).",
        &dir_rows,
        |a| &a.lint,
    );
    gauge(
        &mut w,
        "metaroce_connections",
        "Connection directions in the series.",
        &dir_rows,
        |a| a.directions,
    );
    gauge(
        &mut w,
        "metaroce_stalls_open",
        "Stalls open now.",
        &data_rows,
        |a| a.stalls_open,
    );
    gauge(
        &mut w,
        "metaroce_bytes_in_flight",
        "Payload bytes captured and not yet acked.",
        &data_rows,
        |a| a.bytes_in_flight,
    );

    let hists = snap.histograms.as_deref();
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
        &mut w,
        "metaroce_rocev2_naks",
        "RoCEv2 NAKs, by code (IBTA table 43).",
        "code",
        &roce_rows,
        |a| &a.naks,
    );
    lint_counter(
        &mut w,
        "metaroce_rocev2_lint_findings",
        "Conformance lint findings about the RoCEv2 flow, by rule.",
        &roce_rows,
        |a| &a.lint,
    );
    gauge(
        &mut w,
        "metaroce_rocev2_flows",
        "RoCEv2 RC flows (destination QPs) in the series.",
        &roce_rows,
        |a| a.flows,
    );
    gauge(
        &mut w,
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

    health_families(
        &mut w,
        snap,
        health,
        [dirs.folded, paths.folded, roce.folded],
    );
    w.finish()
}

/// Histogram rows in a stable order (`other` last).
fn sorted(table: Option<&SeriesTable>) -> Vec<(&SeriesKey, &Latencies)> {
    let mut rows: Vec<_> = table.into_iter().flatten().collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    rows
}

fn gauge<A>(w: &mut Writer, name: &str, help: &str, rows: &[(&str, &A)], field: Field<A>) {
    w.family(name, Kind::Gauge, help);
    for (l, a) in rows {
        w.sample(name, l, None, field(a));
    }
}

fn labelled_counter<A, K: AsRef<str>>(
    w: &mut Writer,
    name: &str,
    help: &str,
    label: &str,
    rows: &[(&str, &A)],
    map: fn(&A) -> &BTreeMap<K, u64>,
) {
    w.family(name, Kind::Counter, help);
    for (l, a) in rows {
        for (k, v) in map(a) {
            w.sample(name, l, Some((label, k.as_ref())), *v);
        }
    }
}

fn lint_counter<A>(
    w: &mut Writer,
    name: &str,
    help: &str,
    rows: &[(&str, &A)],
    map: fn(&A) -> &BTreeMap<&'static str, u64>,
) {
    w.family(name, Kind::Counter, help);
    for (l, a) in rows {
        for (rule, n) in map(a) {
            let sev = match severity(rule) {
                analyzer::lint::Severity::Error => "error",
                analyzer::lint::Severity::Warning => "warning",
            };
            let l = format!("{l},rule=\"{rule}\"");
            w.sample(name, &l, Some(("severity", sev)), *n);
        }
    }
}

/// The process's and the capture's own health.
fn health_families(w: &mut Writer, snap: &Snapshot, health: ProcessHealth, folded: [u64; 3]) {
    let st = &snap.stats;
    let cap = &snap.report.capture;
    let eng = &snap.report.engine;
    let one = |w: &mut Writer, name: &str, kind: Kind, help: &str, v: u64| {
        w.family(name, kind, help);
        w.sample(name, "", None, v);
    };
    one(
        w,
        "metaroce_capture_received_packets",
        Kind::Counter,
        "Packets libpcap received (ps_recv); a replay: records read.",
        st.received,
    );
    w.family("metaroce_capture_drops", Kind::Counter, "Packets dropped before the analysis: by the kernel (ps_drop, capture buffer full) or the interface (ps_ifdrop). The capture thread feeds the engine directly: it has no queue of its own to drop from.");
    w.sample(
        "metaroce_capture_drops",
        "",
        Some(("where", "kernel")),
        st.kernel_drops,
    );
    w.sample(
        "metaroce_capture_drops",
        "",
        Some(("where", "interface")),
        st.interface_drops,
    );
    one(
        w,
        "metaroce_capture_errors",
        Kind::Counter,
        "Capture-file records that could not be read (replay).",
        st.capture_errors,
    );
    one(
        w,
        "metaroce_frames",
        Kind::Counter,
        "Frames handed to the engine.",
        st.frames,
    );
    one(
        w,
        "metaroce_frame_bytes",
        Kind::Counter,
        "Wire bytes of the frames handed to the engine.",
        st.bytes,
    );
    w.family(
        "metaroce_parsed_packets",
        Kind::Counter,
        "Packets parsed, by protocol (malformed ones included).",
    );
    w.sample(
        "metaroce_parsed_packets",
        "",
        Some(("protocol", "metaroce")),
        cap.metaroce_packets,
    );
    w.sample(
        "metaroce_parsed_packets",
        "",
        Some(("protocol", "rocev2")),
        cap.rocev2_packets,
    );
    one(
        w,
        "metaroce_parse_errors",
        Kind::Counter,
        "Packets of our ports that could not be decoded as their protocol (counted, not analysed).",
        cap.malformed,
    );
    one(
        w,
        "metaroce_ip_fragments",
        Kind::Counter,
        "IP fragments captured.",
        cap.ip_fragments,
    );
    one(
        w,
        "metaroce_reassembled_datagrams",
        Kind::Counter,
        "Datagrams rebuilt from IP fragments.",
        cap.reassembled_datagrams,
    );
    one(
        w,
        "metaroce_incomplete_datagrams",
        Kind::Counter,
        "Datagrams whose fragments never all came (given up after 30 s).",
        cap.incomplete_datagrams,
    );
    w.family(
        "metaroce_engine_flows",
        Kind::Gauge,
        "Flows the engine holds.",
    );
    w.sample(
        "metaroce_engine_flows",
        "",
        Some(("protocol", "metaroce")),
        eng.live_directions,
    );
    w.sample(
        "metaroce_engine_flows",
        "",
        Some(("protocol", "rocev2")),
        eng.live_rocev2_flows,
    );
    w.family(
        "metaroce_engine_evicted_flows",
        Kind::Counter,
        "Flows the engine evicted at its flow limit.",
    );
    w.sample(
        "metaroce_engine_evicted_flows",
        "",
        Some(("protocol", "metaroce")),
        eng.evicted_directions,
    );
    w.sample(
        "metaroce_engine_evicted_flows",
        "",
        Some(("protocol", "rocev2")),
        eng.evicted_rocev2_flows,
    );
    if let Some(s) = &snap.engine_state {
        w.family(
            "metaroce_engine_state_entries",
            Kind::Gauge,
            "Entries of the engine's state (its memory is bounded by them).",
        );
        for (kind, n) in [
            ("directions", s.directions),
            ("rocev2_flows", s.rocev2_flows),
            ("window_slots", s.window_slots),
            ("paths", s.paths),
            ("messages", s.messages),
            ("pending", s.pending),
            ("stalls", s.stalls),
            ("late_echoes", s.late_echoes),
            ("rocev2_slots", s.rocev2_slots),
            ("rocev2_messages", s.rocev2_messages),
        ] {
            w.sample(
                "metaroce_engine_state_entries",
                "",
                Some(("kind", kind)),
                n as u64,
            );
        }
    }
    one(
        w,
        "metaroce_rocev2_unmatched_responses",
        Kind::Counter,
        "RoCEv2 responses matched to no request flow.",
        eng.rocev2_unmatched_responses,
    );
    one(
        w,
        "metaroce_rocev2_not_rc_packets",
        Kind::Counter,
        "RoCEv2 packets of other services (UD, UC...): counted, not analysed.",
        eng.rocev2_not_rc,
    );
    w.family(
        "metaroce_exporter_folded_flows",
        Kind::Gauge,
        "Flows folded into the src=\"other\" series by --metrics-max-series, by table.",
    );
    for (table, n) in ["directions", "paths", "rocev2"].into_iter().zip(folded) {
        w.sample(
            "metaroce_exporter_folded_flows",
            "",
            Some(("table", table)),
            n,
        );
    }
    let running = matches!(snap.state, RunState::Running);
    one(
        w,
        "metaroce_capture_running",
        Kind::Gauge,
        "1 while capturing; 0 once a replay ended or the capture failed.",
        u64::from(running),
    );
    w.family(
        "metaroce_capture_time_seconds",
        Kind::Gauge,
        "The capture clock: the latest packet's timestamp (Unix seconds).",
    );
    w.sample_f64(
        "metaroce_capture_time_seconds",
        "",
        snap.report.capture.last_ts_ns as f64 / 1e9,
    );
    w.family(
        "process_cpu_seconds",
        Kind::Counter,
        "CPU time of the process (user and system).",
    );
    w.sample_f64("process_cpu_seconds", "", health.cpu_seconds);
    one(
        w,
        "process_resident_memory_bytes",
        Kind::Gauge,
        "Resident memory of the process.",
        health.resident_bytes,
    );
    w.family(
        "metaroce_build",
        Kind::Info,
        "Build: version of metaroce-top.",
    );
    w.sample(
        "metaroce_build",
        "",
        Some(("version", env!("CARGO_PKG_VERSION"))),
        1,
    );
}
