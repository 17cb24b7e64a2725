//! The reference stack lints clean: the real binary over loopback UDP,
//! under every impairment it supports (loss, reordering, duplication,
//! trimming, CE marking, a blackholed path), with both spraying policies
//! and in go-back-N mode, captured at both hosts (`--pcap`); the analyzer's
//! flow engine with its conformance lint on (what `metaroce-analyze lint`
//! runs), told which host each capture was taken on, finds no
//! error-severity rule broken.
//!
//! And the lint finds a breach when there is one: the stack's test-only
//! `--misbehave` modes resend PSNs already acknowledged (MR-SND-004, at the
//! sender) and send ACKs whose cumulative ack goes back (MR-RCV-001, at
//! the receiver), and the lint names exactly those packets.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use analyzer::engine::{Config, Engine, Observation};
use analyzer::lint::{CapturePoint, Finding, LintOptions, LintReport, Severity};
use proto_parse::capture::Reader;
use proto_parse::frame::{DecodeConfig, LinkType, decode};
use proto_parse::metaroce::PacketType;

const BIN: &str = env!("CARGO_BIN_EXE_metaroce-stack");

/// One transfer: what both hosts captured and what the client reported.
struct Run {
    /// (host address, its capture)
    captures: [(IpAddr, PathBuf); 2],
    client: serde_json::Value,
    port: u16,
}

/// Runs `server --once` on `srv` and a client on `cli` (both with `args`,
/// the server also with `server_args`, the client with `client_args`;
/// arguments separated by spaces), each writing its own capture.
fn transfer(
    dir: &Path,
    name: &str,
    (srv, cli, port): (&str, &str, u16),
    args: &str,
    server_args: &str,
    client_args: &str,
) -> Run {
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let (args, server_args, client_args) = (words(args), words(server_args), words(client_args));
    let srv_pcap = dir.join(format!("{name}-server.pcap"));
    let cli_pcap = dir.join(format!("{name}-client.pcap"));
    let port_s = port.to_string();
    let mut server = Command::new(BIN)
        .args(["server", "--once", "--json", "--duration", "60"])
        .args(["--bind", srv, "--port", &port_s])
        .args(&args)
        .args(&server_args)
        .arg("--pcap")
        .arg(&srv_pcap)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let out = Command::new(BIN)
        .args(["client", "--json", "--bind", cli, "--connect"])
        .arg(format!("{srv}:{port}"))
        .args(["--timeout", "40"])
        .args(&args)
        .args(&client_args)
        .arg("--pcap")
        .arg(&cli_pcap)
        .output()
        .unwrap();
    let status = server.wait().unwrap();
    assert!(
        out.status.success(),
        "{name}: client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(status.success(), "{name}: server failed");
    let client: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(client["closed_error"].is_null(), "{name}: {client}");
    Run {
        captures: [
            (srv.parse().unwrap(), srv_pcap),
            (cli.parse().unwrap(), cli_pcap),
        ],
        client,
        port,
    }
}

/// What the lint found in one capture.
struct Linted {
    findings: Vec<Finding>,
    report: LintReport,
    /// Per frame (1-based, index 0 unused): the MetaRoCE packet's type and
    /// PSN, and whether `host` sent it.
    frames: Vec<Option<(PacketType, u32, bool)>>,
    metaroce_packets: u64,
}

/// Lints `pcap`, taken on `host`, as `metaroce-analyze lint --vantage
/// HOST` does: the engine with the lint on, findings drained per packet.
fn lint(pcap: &Path, host: IpAddr, port: u16) -> Linted {
    lint_at(pcap, host, CapturePoint::Host(host), port)
}

/// [`lint`] with the capture point given as `point` (`Auto`: decided from
/// the traffic, the CLI's default); either way it must come out as `host`.
fn lint_at(pcap: &Path, host: IpAddr, point: CapturePoint, port: u16) -> Linted {
    let mut engine = Engine::new(Config {
        lint: Some(LintOptions {
            point,
            ..LintOptions::default()
        }),
        ..Config::default()
    });
    let cfg = DecodeConfig {
        metaroce_port: port,
        ..DecodeConfig::default()
    };
    let mut reader = Reader::open(pcap).unwrap();
    let mut findings = Vec::new();
    let mut frames = vec![None];
    let mut n = 0u64;
    let mut last = 0;
    while let Some(rec) = reader.next_record() {
        let rec = rec.unwrap();
        n += 1;
        last = rec.ts_ns;
        let link = LinkType::from(u32::from(rec.linktype));
        let f = decode(link, rec.data, &cfg);
        frames.push(f.metaroce().map(|p| {
            let sent = f.ip.as_ref().is_some_and(|ip| ip.src == host);
            (p.packet_type(), p.psn(), sent)
        }));
        match Observation::decode(n, rec.ts_ns, link, rec.data, &cfg) {
            Some(obs) => {
                engine.ingest(&obs);
            }
            None => engine.ingest_other(rec.ts_ns),
        }
        findings.extend_from_slice(engine.findings());
        engine.clear_findings();
    }
    engine.finish(last);
    let full = engine.snapshot();
    let report = full.lint.expect("the lint ran");
    assert_eq!(report.host, Some(host), "{point:?}: {}", pcap.display());
    Linted {
        findings: findings.into_iter().filter(|f| report.keeps(f)).collect(),
        report,
        frames,
        metaroce_packets: full.capture.metaroce_packets,
    }
}

/// The error-severity findings, one line each (rule, frame, connection,
/// evidence), for a failure message.
fn errors(l: &Linted) -> Vec<String> {
    l.findings
        .iter()
        .filter(|f| f.rule().severity == Severity::Error)
        .map(|f| {
            format!(
                "{} frame {} {} ev {:?}: {}",
                f.rule().id,
                f.frame,
                f.conn,
                f.ev,
                f.evidence()
            )
        })
        .collect()
}

/// Both captures of `run` lint without an error-severity finding, told
/// the host or left to decide it (`--vantage auto`).
fn assert_clean(name: &str, run: &Run) {
    let points = |host| [CapturePoint::Host(host), CapturePoint::Auto];
    for (host, pcap, point) in run
        .captures
        .iter()
        .flat_map(|(h, p)| points(*h).map(|point| (*h, p, point)))
    {
        let l = lint_at(pcap, host, point, run.port);
        assert!(l.metaroce_packets > 100, "{name}: {}", pcap.display());
        let e = errors(&l);
        assert!(
            e.is_empty(),
            "{name}, capture on {host}: {} error findings ({:?}), first:\n{}",
            e.len(),
            l.report.counts,
            e.iter().take(12).cloned().collect::<Vec<_>>().join("\n")
        );
        let warnings: Vec<(&str, u64)> =
            l.report.counts.iter().map(|c| (c.rule, c.count)).collect();
        println!(
            "{name} on {host} ({point:?}): {} packets, no error; warnings {warnings:?}",
            l.metaroce_packets
        );
    }
}

/// Every impairment but the blackhole, on transmit and on receive.
const LOSSY: &str = "--loss 2 --path-loss 3=4 --dup 1 --reorder 5 --reorder-us 100 \
    --delay-us 10 --jitter-us 20 --trim 1 --ce 1 --impair both";

/// With receive impairment, a host's capture holds what reached it
/// through the impairment (the network), not what its socket read: every
/// datagram released (`passed`, and each `duplicated` a second time), none
/// of those dropped.
fn assert_capture_after_rx_impairment(name: &str, run: &Run) {
    let (host, pcap) = &run.captures[1];
    let l = lint(pcap, *host, run.port);
    let received = l
        .frames
        .iter()
        .flatten()
        .filter(|(_, _, sent)| !sent)
        .count() as u64;
    let rx = &run.client["driver"]["impair_rx"];
    let n = |k: &str| rx[k].as_u64().unwrap();
    // The impairment dropped or duplicated some: the capture is not what
    // the socket read.
    assert!(n("dropped") + n("duplicated") > 0, "{name}: {rx}");
    assert_eq!(received, n("passed") + n("duplicated"), "{name}: {rx}");
}

#[test]
fn metaroce_under_impairment_lints_clean_with_both_spraying_policies() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "weighted-write",
            ("127.0.0.61", "127.0.0.62", 47_961),
            "weighted",
            "write",
        ),
        (
            "rr-read",
            ("127.0.0.63", "127.0.0.64", 47_963),
            "rr",
            "read",
        ),
        (
            "rr-send",
            ("127.0.0.65", "127.0.0.66", 47_965),
            "rr",
            "send",
        ),
    ];
    for (i, (name, addrs, spray, op)) in cases.into_iter().enumerate() {
        let args = format!("--spray {spray} --seed {} {LOSSY}", i + 11);
        let client = format!("--paths 4 --op {op} --size 150000 --messages 16");
        let run = transfer(dir.path(), name, addrs, &args, "", &client);
        assert_eq!(run.client["messages"], 16, "{name}: {}", run.client);
        let r = &run.client;
        assert!(
            r["retransmissions"].as_u64().unwrap() > 0 || op == "read",
            "{name}: the impairment forced repairs: {r}"
        );
        assert_capture_after_rx_impairment(name, &run);
        assert_clean(name, &run);
    }
}

#[test]
fn a_blackholed_path_lints_clean() {
    let dir = tempfile::tempdir().unwrap();
    // ev 2 drops everything from 5 ms for 40 ms, on both hosts' transmits.
    let run = transfer(
        dir.path(),
        "blackhole",
        ("127.0.0.67", "127.0.0.68", 47_967),
        "--seed 5 --blackhole 2:5:40 --loss 0.5 --impair tx",
        "",
        "--paths 4 --op write --size 200000 --messages 20",
    );
    assert_eq!(run.client["messages"], 20, "{}", run.client);
    assert_clean("blackhole", &run);
}

#[test]
fn go_back_n_under_impairment_lints_clean() {
    let dir = tempfile::tempdir().unwrap();
    let run = transfer(
        dir.path(),
        "gbn",
        ("127.0.0.69", "127.0.0.70", 47_969),
        &format!("--mode gbn --seed 9 {LOSSY}"),
        "",
        "--op write --size 100000 --messages 10",
    );
    assert_eq!(run.client["messages"], 10, "{}", run.client);
    assert_clean("gbn", &run);
}

/// `--misbehave retransmit-acked` at the client (the WRITE's sender):
/// without impairment no retransmission is needed, and the lint of the
/// client's capture names as spurious retransmissions DATA the client
/// resent with a PSN that is a multiple of 16 (what the mode resends, one
/// PSN in 16); a well-behaved run shows at most one such (a spurious RTO
/// probe while a loaded host descheduled the peer may land on one).
#[test]
fn lint_finds_retransmissions_of_acknowledged_psns() {
    let dir = tempfile::tempdir().unwrap();
    let addrs = ("127.0.0.71", "127.0.0.72", 47_971);
    let client = "--paths 4 --op write --size 100000 --messages 20";
    // Findings of MR-SND-004 on PSNs that are multiples of 16, and others;
    // every one on DATA the client sent.
    let spurious = |run: &Run| {
        let (host, pcap) = &run.captures[1];
        let l = lint(pcap, *host, run.port);
        let mut counts = (0, 0);
        for f in l.findings.iter().filter(|f| f.rule().id == "MR-SND-004") {
            let (kind, psn, sent) = l.frames[f.frame as usize].expect("a MetaRoCE frame");
            assert!(kind == PacketType::Data && sent, "frame {}", f.frame);
            if psn.is_multiple_of(16) {
                counts.0 += 1;
            } else {
                counts.1 += 1;
            }
        }
        counts
    };
    let good = transfer(dir.path(), "good", addrs, "--seed 3", "", client);
    let (good16, good_other) = spurious(&good);
    assert!(good16 <= 1, "{good16} {good_other}");

    let bad_client = format!("{client} --misbehave retransmit-acked");
    let bad = transfer(dir.path(), "bad", addrs, "--seed 3", "", &bad_client);
    assert_eq!(bad.client["messages"], 20, "{}", bad.client);
    let (bad16, bad_other) = spurious(&bad);
    assert!(bad16 >= 3, "{bad16} {bad_other}");
}

/// `--misbehave ack-backwards` at the server (the WRITE's receiver): the
/// lint of the server's capture finds MR-RCV-001 (an error) on ACKs the
/// server sent, and only there; the transfer still completes.
#[test]
fn lint_finds_a_cumulative_ack_that_goes_back() {
    let dir = tempfile::tempdir().unwrap();
    let run = transfer(
        dir.path(),
        "ack-backwards",
        ("127.0.0.73", "127.0.0.74", 47_973),
        "--seed 4",
        "--misbehave ack-backwards --ack-every 2",
        "--paths 4 --op write --size 100000 --messages 10",
    );
    assert_eq!(run.client["messages"], 10, "{}", run.client);
    let (host, pcap) = &run.captures[0];
    let l = lint(pcap, *host, run.port);
    let found: Vec<&Finding> = l
        .findings
        .iter()
        .filter(|f| f.rule().id == "MR-RCV-001")
        .collect();
    assert!(!found.is_empty(), "{:?}", l.report.counts);
    assert!(found.iter().all(|f| f.rule().severity == Severity::Error));
    for f in &found {
        let (kind, _, sent) = l.frames[f.frame as usize].expect("a MetaRoCE frame");
        assert!(
            kind == PacketType::Ack && sent,
            "frame {}: {kind:?}",
            f.frame
        );
    }
}
