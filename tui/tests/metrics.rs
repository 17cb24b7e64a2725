//! The `/metrics` exposition, rendered from snapshots of real replays
//! (the multipath fixtures, a real RoCEv2 capture, the scripted RoCEv2
//! exchange): every figure is the report's, every histogram's `_count` is
//! the report summary's `count`, buckets are cumulative, `promtool check
//! metrics` accepts the text (Prometheus' own naming lint), and folding
//! keeps the totals.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

mod common;

use analyzer::Config;
use common::{Replay, fixture, rocev2_script, write_pcap};
use metaroce_tui::metrics::MetricsConfig;
use metaroce_tui::metrics::exposition::Format;
use metaroce_tui::metrics::families::{ProcessHealth, render};
use metaroce_tui::model::Snapshot;

/// Replays `path` with the lint on and the exporter's histograms fed, a
/// snapshot every 7 frames.
fn replay(path: &Path, cfg: MetricsConfig) -> Snapshot {
    let engine = Config {
        lint: Some(Default::default()),
        ..Config::default()
    };
    Replay::path(path)
        .config(engine)
        .metrics(cfg.per_connection, cfg.max_series)
        .tick_every(7)
        .run()
}

/// Samples by `name{labels}` as written (labels in their order).
fn parse(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            let v = match v {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|e| panic!("{l}: {e}")),
            };
            (k.to_string(), v)
        })
        .collect()
}

fn get(m: &BTreeMap<String, f64>, key: &str) -> f64 {
    *m.get(key).unwrap_or_else(|| {
        panic!(
            "no sample {key} in {:#?}",
            m.keys().take(400).collect::<Vec<_>>()
        )
    })
}

fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is missing: run scripts/setup.sh (Debian's prometheus package)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn all_on() -> MetricsConfig {
    MetricsConfig {
        per_connection: true,
        paths: true,
        max_series: 1000,
    }
}

#[test]
fn metaroce_figures_are_the_reports() {
    for name in ["multipath_loss_receiver.pcap", "multipath_loss_sender.pcap"] {
        let snap = replay(&fixture(name), all_on());
        let text = render(&snap, &all_on(), Format::Prometheus, ProcessHealth::read());
        promtool_check(&text);
        let m = parse(&text);
        assert!(!snap.report.directions.is_empty());
        let mut rtt_samples = 0;
        for d in &snap.report.directions {
            let l = format!(
                "src=\"{}\",dst=\"{}\",src_conn=\"{}\",dst_conn=\"{}\"",
                d.src, d.dst, d.src_conn, d.dst_conn
            );
            // A direction without DATA shows its packets only.
            let packets = get(&m, &format!("metaroce_packets_total{{{l}}}")) as u64;
            assert_eq!(
                packets,
                d.data_packets + d.feedback_sent + d.probes + d.ctrl
            );
            if d.data_packets == 0 {
                assert!(!m.contains_key(&format!("metaroce_data_packets_total{{{l}}}")));
            } else {
                let c = |n: &str| get(&m, &format!("{n}_total{{{l}}}")) as u64;
                assert_eq!(c("metaroce_data_packets"), d.data_packets, "{name} {l}");
                assert_eq!(c("metaroce_retransmissions"), d.retransmissions);
                assert_eq!(c("metaroce_rx_lost_packets"), d.path_loss);
                let tx_lost: u64 = d.paths.iter().map(|p| p.lost_inferred).sum();
                assert_eq!(c("metaroce_tx_lost_packets"), tx_lost);
                assert_eq!(c("metaroce_ce_marked_packets"), d.ce_marked);
                assert_eq!(c("metaroce_out_of_order_packets"), d.out_of_order);
                for (code, n) in &d.nacks_by_code {
                    let k = format!("metaroce_nacks_total{{{l},code=\"{code}\"}}");
                    assert_eq!(get(&m, &k) as u64, *n);
                }
                for p in &d.paths {
                    let k = format!("metaroce_path_rx_lost_packets_total{{{l},ev=\"{}\"}}", p.ev);
                    assert_eq!(get(&m, &k) as u64, p.lost);
                }
            }
            // Each histogram counts the samples the engine's summary counts.
            for (hist, summary) in [
                ("metaroce_ack_rtt_seconds", d.ack_rtt_ns),
                ("metaroce_fabric_rtt_seconds", d.fabric_rtt_ns),
                ("metaroce_message_completion_seconds", d.msg_completion_ns),
                ("metaroce_message_delivery_seconds", d.msg_delivery_ns),
            ] {
                let count = m
                    .get(&format!("{hist}_count{{{l}}}"))
                    .copied()
                    .unwrap_or(0.0);
                assert_eq!(count as u64, summary.count, "{name} {hist} {l}");
                if summary.count == 0 {
                    continue;
                }
                let inf = get(&m, &format!("{hist}_bucket{{{l},le=\"+Inf\"}}"));
                assert_eq!(inf as u64, summary.count);
                // Cumulative: never decreasing; the max sample's bucket
                // holds everything.
                let buckets: Vec<(f64, f64)> = m
                    .iter()
                    .filter_map(|(k, v)| {
                        let le = k.strip_prefix(&format!("{hist}_bucket{{{l},le=\""))?;
                        let le = le.trim_end_matches("\"}");
                        Some((
                            if le == "+Inf" {
                                f64::INFINITY
                            } else {
                                le.parse().unwrap()
                            },
                            *v,
                        ))
                    })
                    .collect();
                let mut sorted = buckets.clone();
                sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
                assert!(
                    sorted.windows(2).all(|w| w[0].1 <= w[1].1),
                    "{hist}: {sorted:?}"
                );
                let max_s = summary.max as f64 / 1e9;
                let at_max = sorted.iter().find(|(le, _)| *le >= max_s).unwrap().1;
                assert_eq!(at_max as u64, summary.count, "{hist}: max {max_s}");
                let min_s = summary.min as f64 / 1e9;
                let below_min = sorted
                    .iter()
                    .rev()
                    .find(|(le, _)| *le < min_s)
                    .map_or(0.0, |b| b.1);
                assert_eq!(below_min, 0.0, "{hist}: min {min_s}: {sorted:?}");
            }
            rtt_samples += d.ack_rtt_ns.count;
        }
        assert!(rtt_samples > 0, "{name}: the fixture has RTT samples");
        // Health.
        assert_eq!(get(&m, "metaroce_frames_total") as u64, snap.stats.frames);
        assert_eq!(
            get(&m, "metaroce_parsed_packets_total{protocol=\"metaroce\"}") as u64,
            snap.report.capture.metaroce_packets
        );
        assert_eq!(get(&m, "metaroce_capture_running"), 0.0);
        assert_eq!(get(&m, "metaroce_build_info{version=\"0.1.0\"}"), 1.0);
    }
}

#[test]
fn rocev2_figures_are_the_reports() {
    let dir = tempfile::tempdir().unwrap();
    let scripted = dir.path().join("rocev2.pcap");
    write_pcap(&scripted, &rocev2_script(1_000_000_000));
    let real = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/real/montybeatnik_roce_capture_read-write-ecn.pcap");
    for path in [scripted, real] {
        let cfg = MetricsConfig::default();
        let snap = replay(&path, cfg);
        assert!(!snap.report.rocev2.is_empty(), "{}", path.display());
        let text = render(&snap, &cfg, Format::Prometheus, ProcessHealth::read());
        promtool_check(&text);
        let m = parse(&text);
        // Folded by host pair: the sums of the flows.
        let mut pairs: BTreeMap<(String, String), Vec<_>> = BTreeMap::new();
        for f in &snap.report.rocev2 {
            pairs
                .entry((f.src.to_string(), f.dst.to_string()))
                .or_default()
                .push(f);
        }
        for ((src, dst), flows) in pairs {
            let l = format!("src=\"{src}\",dst=\"{dst}\"");
            let sum = |f: fn(&analyzer::engine::RoceFlowReport) -> u64| -> u64 {
                flows.iter().map(|x| f(x)).sum()
            };
            let c = |n: &str| get(&m, &format!("{n}_total{{{l}}}")) as u64;
            assert_eq!(c("metaroce_rocev2_data_packets"), sum(|f| f.data_packets));
            assert_eq!(
                c("metaroce_rocev2_retransmissions"),
                sum(|f| f.retransmissions)
            );
            assert_eq!(c("metaroce_rocev2_rnr_naks"), sum(|f| f.rnr_naks));
            assert_eq!(c("metaroce_rocev2_cnps"), sum(|f| f.cnps));
            assert_eq!(
                get(&m, &format!("metaroce_rocev2_flows{{{l}}}")) as usize,
                flows.len()
            );
            for (hist, count) in [
                (
                    "metaroce_rocev2_ack_rtt_seconds",
                    sum(|f| f.ack_rtt_ns.count),
                ),
                (
                    "metaroce_rocev2_message_completion_seconds",
                    sum(|f| f.msg_completion_ns.count),
                ),
            ] {
                let got = m
                    .get(&format!("{hist}_count{{{l}}}"))
                    .copied()
                    .unwrap_or(0.0);
                assert_eq!(got as u64, count, "{} {hist} {l}", path.display());
            }
        }
    }
}

#[test]
fn the_scripted_rocev2_exchange_shows_its_naks_and_cnps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rocev2.pcap");
    write_pcap(&path, &rocev2_script(1_000_000_000));
    let cfg = MetricsConfig {
        per_connection: true,
        ..MetricsConfig::default()
    };
    let m = parse(&render(
        &replay(&path, cfg),
        &cfg,
        Format::Prometheus,
        ProcessHealth::default(),
    ));
    let l = "src=\"10.9.0.1\",dst=\"10.9.0.2\",qp=\"32\"";
    assert_eq!(
        get(&m, &format!("metaroce_rocev2_data_packets_total{{{l}}}")),
        9.0
    );
    assert_eq!(
        get(&m, &format!("metaroce_rocev2_retransmissions_total{{{l}}}")),
        4.0
    );
    assert_eq!(
        get(&m, &format!("metaroce_rocev2_rnr_naks_total{{{l}}}")),
        1.0
    );
    assert_eq!(get(&m, &format!("metaroce_rocev2_cnps_total{{{l}}}")), 1.0);
    let naks: f64 = m
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("metaroce_rocev2_naks_total{{{l},code=")))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(naks, 1.0);
}

#[test]
fn folding_keeps_the_totals_and_counts_what_it_folded() {
    let path = fixture("multipath_loss_receiver.pcap");
    let open = all_on();
    let folded = MetricsConfig {
        max_series: 1,
        ..open
    };
    let snap_open = replay(&path, open);
    let snap_folded = replay(&path, folded);
    let (a, b) = (
        parse(&render(
            &snap_open,
            &open,
            Format::Prometheus,
            ProcessHealth::default(),
        )),
        parse(&render(
            &snap_folded,
            &folded,
            Format::Prometheus,
            ProcessHealth::default(),
        )),
    );
    let total = |m: &BTreeMap<String, f64>, name: &str| -> f64 {
        m.iter()
            .filter(|(k, _)| k.starts_with(&format!("{name}{{")))
            .map(|(_, v)| v)
            .sum()
    };
    let dirs = snap_open.report.directions.len();
    assert!(dirs >= 2, "the fixture has both directions");
    for name in [
        "metaroce_packets_total",
        "metaroce_data_packets_total",
        "metaroce_retransmissions_total",
        "metaroce_rx_lost_packets_total",
        "metaroce_ack_rtt_seconds_count",
        "metaroce_path_packets_total",
    ] {
        assert_eq!(total(&a, name), total(&b, name), "{name}");
    }
    assert_eq!(
        get(&b, "metaroce_exporter_folded_flows{table=\"directions\"}") as usize,
        dirs - 1
    );
    assert!(b.contains_key("metaroce_packets_total{src=\"other\",dst=\"other\"}"));
    assert_eq!(
        get(&a, "metaroce_exporter_folded_flows{table=\"directions\"}"),
        0.0
    );
}

#[test]
fn openmetrics_when_asked() {
    let cfg = MetricsConfig::default();
    let snap = replay(&fixture("multipath_loss_receiver.pcap"), cfg);
    let om = render(&snap, &cfg, Format::OpenMetrics, ProcessHealth::default());
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE metaroce_data_packets counter\n"));
    assert!(om.contains(
        "# TYPE metaroce_ack_rtt_seconds histogram\n# UNIT metaroce_ack_rtt_seconds seconds\n"
    ));
    assert!(om.contains("# TYPE metaroce_build info\n"));
    // The same samples as the Prometheus text.
    let prom = render(&snap, &cfg, Format::Prometheus, ProcessHealth::default());
    assert_eq!(parse(&om), parse(&prom));
}
