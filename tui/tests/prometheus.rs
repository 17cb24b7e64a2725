//! A real Prometheus scraping two `metaroce-top --metrics` exporters.
//!
//! Two network namespaces of our own joined by a veth pair (addresses only
//! inside them): the reference stack's server in one, its client in the
//! other, 6 s of WRITEs over 4 paths, with 10 % loss on one path (ev 3:
//! nftables drops its datagrams at the client's veth egress, before either
//! capture sees them). An exporter captures on each veth end
//! (`-i --headless --metrics --metrics-paths`); the multipath fixture, the
//! scripted RoCEv2 exchange and a lint-breaking capture are injected on
//! the veth too (CE, CNPs, NACKs, RoCEv2 NAKs, lint findings). Debian's
//! `prometheus` runs in the client's namespace on 127.0.0.1, scraping both
//! every second into a temporary directory.
//!
//! Through its HTTP API: the figures equal each exporter's `--json-out`
//! for the same run, the lossy path stands out, and every query of the
//! fleet dashboard (`tui/dashboards/metaroce-fleet.json`) returns data.
//! With `METAROCE_SCREENSHOT=FILE.png`, headless Chromium also takes the
//! README's screenshot of Prometheus' graph of the lossy path
//! (`scripts/screenshot-metrics.sh`).
//!
//! Fails loudly without root, `ip netns`, nftables, prometheus or curl;
//! every process it started is killed and the namespaces deleted, also
//! when an assertion fails.

#[path = "../../reference-stack/tests/support/netns.rs"]
mod netns;

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{BIN, fixture, lint_capture, rocev2_script, write_pcap};
use netns::{Veth, sh, workspace_bin};
use serde_json::Value;

const PROMETHEUS: &str = "127.0.0.1:9090";
const CLIENT_EXPORTER: &str = "127.0.0.1:9101";
/// The lossy path: its datagrams leave from UDP port 0xC000 | ev.
const LOSSY_EV: u16 = 3;

/// Processes killed (and reaped) on drop, the last started first.
#[derive(Default)]
struct Procs(Vec<(&'static str, Child)>);

impl Procs {
    fn spawn(&mut self, name: &'static str, cmd: &mut Command) {
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        self.0.push((name, child));
    }

    /// Ends `name` with SIGTERM and checks it ended well.
    fn terminate(&mut self, name: &str) {
        let i = self.0.iter().position(|(n, _)| *n == name).unwrap();
        let (_, mut child) = self.0.remove(i);
        sh(&["kill", "-TERM", &child.id().to_string()]);
        let end = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < end, "{name} did not end after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{name}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, child) in self.0.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn require(tool: &str, arg: &str) {
    let ok = Command::new(tool)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{tool} is missing: run scripts/setup.sh (it installs it)"
    );
}

/// Prometheus' HTTP API, from inside the namespace it listens in.
struct Api<'a> {
    v: &'a Veth,
}

impl Api<'_> {
    fn get(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let mut cmd = self.v.exec(1);
        cmd.args(["curl", "-sS", "--max-time", "5", "--get"]);
        for (k, val) in params {
            cmd.args(["--data-urlencode", &format!("{k}={val}")]);
        }
        let out = cmd
            .arg(format!("http://{PROMETHEUS}{path}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "curl {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{path}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(v["status"], "success", "{path} {params:?}: {v}");
        v["data"].clone()
    }

    /// An instant query: each series' labels and value.
    fn query(&self, q: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        self.get("/api/v1/query", &[("query", q)])["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let labels = s["metric"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect();
                let value = s["value"][1].as_str().unwrap().parse().unwrap();
                (labels, value)
            })
            .collect()
    }

    /// The one value of a query that sums to one series (0 when none).
    fn value(&self, q: &str) -> f64 {
        let r = self.query(q);
        assert!(r.len() <= 1, "{q}: {r:?}");
        r.first().map_or(0.0, |s| s.1)
    }
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn wait_for(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The JSON snapshot's directions from `src` to `dst`, summed (as the
/// exporter folds connections into their host pair): `field` of each.
fn folded(snap: &Value, src: &str, dst: &str, field: impl Fn(&Value) -> u64) -> u64 {
    snap["report"]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["src"] == src && d["dst"] == dst)
        .map(field)
        .sum()
}

#[test]
fn prometheus_scrapes_two_exporters_and_the_lossy_path_stands_out() {
    require("prometheus", "--version");
    require("curl", "--version");
    let stack = workspace_bin(BIN, "reference-stack", "metaroce-stack", false);
    let blast = workspace_bin(BIN, "metaroce-tui", "blast", true);
    let v = Veth::new("mrpm", "10.213.34");
    // Declared after the namespaces: dropped (killed) before they go.
    let mut procs = Procs::default();
    let dir = tempfile::tempdir().unwrap();
    let (client, server) = (v.addr(1).to_string(), v.addr(0).to_string());
    let server_exporter = v.sockaddr(0, 9102);

    // The netdev egress hook runs before the packet taps: neither capture
    // sees what it drops, as with loss in the fabric (and the stack's UDP
    // socket sees no error). Only the stack's datagrams: a packet socket
    // (the injected captures) would see ENOBUFS.
    v.nft(
        1,
        &format!(
            "table netdev mrpm {{\n chain egress {{\n  type filter hook egress device {} priority 0; policy accept;\n  \
             ip saddr {client} udp sport {} udp dport 4794 numgen random mod 100 < 10 counter drop\n }}\n}}\n",
            v.dev[1],
            proto_parse::metaroce::udp_source_port(LOSSY_EV)
        ),
    );

    let client_json = dir.path().join("client.json");
    let server_json = dir.path().join("server.json");
    for (name, i, addr, out) in [
        ("client exporter", 1, CLIENT_EXPORTER, &client_json),
        ("server exporter", 0, server_exporter.as_str(), &server_json),
    ] {
        procs.spawn(
            name,
            v.exec(i)
                .args([BIN, "-i", &v.dev[i], "--headless", "--metrics", addr])
                .args(["--metrics-paths", "--json-out"])
                .arg(out),
        );
    }

    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
             - job_name: metaroce\n    static_configs:\n      \
             - targets: ['{CLIENT_EXPORTER}']\n        labels: {{host: client}}\n      \
             - targets: ['{server_exporter}']\n        labels: {{host: server}}\n"
        ),
    )
    .unwrap();
    procs.spawn(
        "prometheus",
        v.exec(1)
            .arg("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={PROMETHEUS}"))
            .arg("--log.level=warn"),
    );
    let api = Api { v: &v };
    wait_for("Prometheus to be ready", Duration::from_secs(30), || {
        v.exec(1)
            .args(["curl", "-sf", &format!("http://{PROMETHEUS}/-/ready")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    wait_for("both exporters up", Duration::from_secs(20), || {
        api.value("sum(up{job=\"metaroce\"})") == 2.0
    });
    let started = now_s();

    // The traffic: the stack's WRITE workload, then the injected captures.
    let mut srv = v.exec(0);
    srv.arg(&stack)
        .args(["server", "--once", "--json", "--bind", &server]);
    procs.spawn("stack server", &mut srv);
    std::thread::sleep(Duration::from_millis(300));
    let out = v
        .exec(1)
        .arg(&stack)
        .args(["client", "--json", "--bind", &client])
        .args(["--connect", &v.sockaddr(0, 4794)])
        .args(["--paths", "4", "--op", "write", "--timeout", "20"])
        // Six seconds of 64 KiB WRITEs one at a time, 2 ms apart (the
        // stack's own delay): a rate the debug-built exporters capture
        // whole, long enough to draw over several scrapes.
        .args([
            "--size",
            "65536",
            "--depth",
            "1",
            "--delay-us",
            "2000",
            "--duration",
            "6",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["messages"].as_u64().unwrap() > 100, "{report}");
    let rocev2 = dir.path().join("rocev2.pcap");
    write_pcap(&rocev2, &rocev2_script(1_000_000_000));
    for capture in [
        fixture("multipath_loss_receiver.pcap"),
        rocev2,
        lint_capture(dir.path()),
    ] {
        let out = v
            .exec(1)
            .arg(&blast)
            .args(["replay", &v.dev[1]])
            .arg(&capture)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "blast: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Settled: Prometheus has scraped the final figures of both exporters
    // (the same in two scrapes, RoCEv2 and the fixture included).
    let settled = "sum(metaroce_data_packets_total) + sum(metaroce_rocev2_data_packets_total)";
    let mut last = -1.0;
    wait_for(
        "the final figures in Prometheus",
        Duration::from_secs(20),
        || {
            std::thread::sleep(Duration::from_millis(1200));
            let now = api.value(settled);
            let same = now == last && now > 0.0;
            last = now;
            same
        },
    );

    // What Prometheus holds, per exporter and host pair, before the
    // exporters stop.
    let families = [
        "metaroce_data_packets_total",
        "metaroce_retransmissions_total",
        "metaroce_rx_lost_packets_total",
        "metaroce_tx_lost_packets_total",
        "metaroce_nacks_total",
        "metaroce_ack_rtt_seconds_count",
        "metaroce_message_completion_seconds_count",
    ];
    let mut seen = BTreeMap::new();
    for host in ["client", "server"] {
        for (src, dst) in [(&client, &server), (&server, &client)] {
            for f in families {
                let q = format!("sum({f}{{host=\"{host}\",src=\"{src}\",dst=\"{dst}\"}})");
                seen.insert((host, src.clone(), f), api.value(&q));
            }
        }
    }
    let by_ev = |host: &str| -> BTreeMap<u16, f64> {
        api.query(&format!(
            "sum by (ev) (metaroce_path_rx_lost_packets_total{{host=\"{host}\",src=\"{client}\"}})"
        ))
        .into_iter()
        .map(|(l, v)| (l["ev"].parse().unwrap(), v))
        .collect()
    };
    let lost_by_ev = [by_ev("client"), by_ev("server")];
    let worst = api.query(&format!(
        "topk(1, sum by (ev) (metaroce_path_rx_lost_packets_total{{src=\"{client}\"}}))"
    ));
    let range: Vec<(String, Value)> = dashboard_queries()
        .into_iter()
        .map(|(title, expr)| {
            // Grafana's $__rate_interval is 4 scrape intervals here.
            let q = expr.replace("$__rate_interval", "4s");
            let (start, end) = (format!("{:.3}", started - 2.0), format!("{:.3}", now_s()));
            let data = api.get(
                "/api/v1/query_range",
                &[
                    ("query", q.as_str()),
                    ("start", start.as_str()),
                    ("end", end.as_str()),
                    ("step", "1"),
                ],
            );
            (format!("{title}: {expr}"), data)
        })
        .collect();
    if let Some(png) = std::env::var_os("METAROCE_SCREENSHOT") {
        screenshot(&v, &client, Path::new(&png), now_s() - started);
    }

    procs.terminate("client exporter");
    procs.terminate("server exporter");
    let snaps = [json(&client_json), json(&server_json)];

    // 1. Prometheus holds what --json-out says.
    for (host, snap) in ["client", "server"].into_iter().zip(&snaps) {
        assert_eq!(
            snap["stats"]["kernel_drops"], 0,
            "{host}: {}",
            snap["stats"]
        );
        for (src, dst) in [(&client, &server), (&server, &client)] {
            let want = |f: &str| -> u64 {
                let u = |d: &Value, k: &str| d[k].as_u64().unwrap();
                match f {
                    "metaroce_data_packets_total" => {
                        folded(snap, src, dst, |d| u(d, "data_packets"))
                    }
                    "metaroce_retransmissions_total" => {
                        folded(snap, src, dst, |d| u(d, "retransmissions"))
                    }
                    "metaroce_rx_lost_packets_total" => {
                        folded(snap, src, dst, |d| u(d, "path_loss"))
                    }
                    "metaroce_tx_lost_packets_total" => folded(snap, src, dst, |d| {
                        d["paths"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|p| u(p, "lost_inferred"))
                            .sum()
                    }),
                    "metaroce_nacks_total" => folded(snap, src, dst, |d| u(d, "nacks")),
                    "metaroce_ack_rtt_seconds_count" => folded(snap, src, dst, |d| {
                        d["ack_rtt_ns"]["count"].as_u64().unwrap()
                    }),
                    "metaroce_message_completion_seconds_count" => folded(snap, src, dst, |d| {
                        d["msg_completion_ns"]["count"].as_u64().unwrap()
                    }),
                    _ => unreachable!(),
                }
            };
            for f in families {
                let got = seen[&(host, src.clone(), f)];
                assert_eq!(got as u64, want(f), "{host} {src}→{dst} {f}");
            }
        }
        // The client's DATA crossed: both captures saw it.
        assert!(
            folded(snap, &client, &server, |d| d["data_packets"]
                .as_u64()
                .unwrap())
                > 1000
        );
    }

    // 2. The lossy path stands out, in both exporters' views.
    for (host, lost) in ["client", "server"].iter().zip(&lost_by_ev) {
        let lossy = lost.get(&LOSSY_EV).copied().unwrap_or(0.0);
        assert!(lossy > 0.0, "{host}: no loss on ev {LOSSY_EV}: {lost:?}");
        for (ev, n) in lost {
            if *ev != LOSSY_EV {
                assert!(
                    *n < lossy / 4.0,
                    "{host}: ev {ev} lost {n}, the lossy ev {lossy}: {lost:?}"
                );
            }
        }
    }
    assert_eq!(worst.len(), 1, "{worst:?}");
    assert_eq!(worst[0].0["ev"], LOSSY_EV.to_string(), "{worst:?}");

    // 3. Every dashboard query returns data over the run.
    for (what, data) in &range {
        let series = data["result"].as_array().unwrap();
        assert!(!series.is_empty(), "no data for {what}");
        assert!(
            series
                .iter()
                .any(|s| !s["values"].as_array().unwrap().is_empty()),
            "no samples for {what}"
        );
    }
}

/// Every query of every panel of the fleet dashboard: (panel title, expr).
fn dashboard_queries() -> Vec<(String, String)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("dashboards/metaroce-fleet.json");
    let d: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            out.push((
                p["title"].as_str().unwrap().to_string(),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    assert!(out.len() >= 10, "{path:?}");
    out
}

/// Prometheus' graph of the lossy path (the client's DATA lost per ev, as
/// its exporter counts it), in headless Chromium, written to `png`.
fn screenshot(v: &Veth, client: &str, png: &Path, span_s: f64) {
    let expr = format!(
        "sum by (ev) (metaroce_path_rx_lost_packets_total{{host=\"client\",src=\"{client}\"}})"
    );
    let enc: String = expr
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect();
    let range = format!("{}s", (span_s.ceil() as u64 + 10).max(30));
    let url = format!(
        "http://{PROMETHEUS}/graph?g0.expr={enc}&g0.tab=0&g0.stacked=0&g0.show_exemplars=0&g0.range_input={range}"
    );
    let home = tempfile::tempdir().unwrap();
    let png = std::path::absolute(png).unwrap();
    let out = v
        .exec(1)
        .env("HOME", home.path())
        .args([
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--hide-scrollbars",
            "--window-size=1280,860",
            "--virtual-time-budget=8000",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .expect("chromium (scripts/setup.sh installs it)");
    assert!(
        out.status.success() && png.exists(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
