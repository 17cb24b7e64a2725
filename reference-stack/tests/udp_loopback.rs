//! The real binary over loopback UDP with the built-in impairment layer:
//! every message completes, the pcap holds every packet (decodable by
//! proto-parse, UDP source port = 0xC000 | ev, ECN bits set) and the event
//! log accounts for every transmission.

use std::process::{Command, Stdio};
use std::time::Duration;

use proto_parse::capture::Reader;
use proto_parse::frame::{DecodeConfig, decode};
use proto_parse::link::LinkType;
use proto_parse::metaroce::udp_source_port;

const BIN: &str = env!("CARGO_BIN_EXE_metaroce-stack");

#[test]
fn write_read_send_over_loopback_with_impairment() {
    let dir = tempfile::tempdir().unwrap();
    let port = 47_941u16;
    for (i, op) in ["write", "read", "send"].iter().enumerate() {
        let (srv_ip, cli_ip) = ("127.0.0.11", "127.0.0.12");
        let srv_pcap = dir.path().join(format!("srv-{op}.pcap"));
        let cli_pcap = dir.path().join(format!("cli-{op}.pcap"));
        let cli_events = dir.path().join(format!("cli-{op}.jsonl"));
        let mut server = Command::new(BIN)
            .args(["server", "--once", "--json", "--bind", srv_ip, "--port"])
            .arg(port.to_string())
            .arg("--peer-port")
            .arg(port.to_string())
            .arg("--pcap")
            .arg(&srv_pcap)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let out = Command::new(BIN)
            .args(["client", "--json", "--bind", cli_ip, "--connect"])
            .arg(format!("{srv_ip}:{port}"))
            .args([
                "--port",
                &port.to_string(),
                "--peer-port",
                &port.to_string(),
            ])
            .args(["--paths", "4", "--op", op])
            .args(["--size", "150000", "--messages", "12", "--timeout", "30"])
            .args([
                "--loss",
                "2",
                "--dup",
                "1",
                "--reorder",
                "5",
                "--trim",
                "1",
                "--ce",
                "1",
                "--impair",
                "both",
            ])
            .args(["--seed", &(i + 3).to_string()])
            .arg("--pcap")
            .arg(&cli_pcap)
            .arg("--events")
            .arg(&cli_events)
            .output()
            .unwrap();
        let status = server.wait().unwrap();
        assert!(
            out.status.success(),
            "{op}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(status.success());
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["messages"], 12, "{r}");
        assert!(r["closed_error"].is_null(), "{r}");
        assert_eq!(r["bytes"], 12 * 150_000);
        let dropped = r["driver"]["impair_tx"]["dropped"].as_u64().unwrap()
            + r["driver"]["impair_rx"]["dropped"].as_u64().unwrap();
        assert!(dropped > 0, "{r}");
        assert!(
            r["retransmissions"].as_u64().unwrap() > 0 || *op == "read",
            "{r}"
        );

        // The capture: every frame decodes as MetaRoCE with its ev's port.
        let mut reader = Reader::open(&cli_pcap).unwrap();
        let mut frames = 0;
        let mut sent_data = 0;
        while let Some(rec) = reader.next_record() {
            let rec = rec.unwrap();
            let f = decode(
                LinkType::Ethernet,
                rec.data,
                &DecodeConfig {
                    metaroce_port: port,
                    ..DecodeConfig::default()
                },
            );
            assert!(f.error.is_none(), "{:?}", f.error);
            let p = f.metaroce().expect("MetaRoCE frame");
            let udp = f.udp.unwrap();
            let ip = f.ip.unwrap();
            if p.packet_type() != proto_parse::metaroce::PacketType::Ctrl {
                assert_eq!(udp.src_port, udp_source_port(p.ev()));
            }
            // ECT(0) or CE on every packet.
            assert_ne!(ip.ecn, proto_parse::frame::Ecn::NotEct);
            if ip.src.to_string() == cli_ip
                && p.packet_type() == proto_parse::metaroce::PacketType::Data
            {
                sent_data += 1;
            }
            frames += 1;
        }
        assert_eq!(frames, r["pcap_frames"].as_u64().unwrap());
        assert_eq!(sent_data, r["conn"]["data_tx"].as_u64().unwrap());
        assert!(srv_pcap.metadata().unwrap().len() > 24);

        // The event log: one tx record per DATA transmission.
        let log = std::fs::read_to_string(&cli_events).unwrap();
        let mut tx = 0;
        let mut retx = 0;
        for line in log.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(v["t_ns"].is_u64() && v["conn"].is_u64(), "{line}");
            if v["event"] == "tx" {
                tx += 1;
                if v["retransmission"] == true {
                    retx += 1;
                    assert_ne!(v["cause"], "new");
                }
            }
        }
        assert_eq!(tx, r["conn"]["data_tx"].as_u64().unwrap());
        assert_eq!(retx, r["retransmissions"].as_u64().unwrap());
    }
}

/// Runs `metaroce-stack server --once` on `srv_ip` with `server_args` and
/// a 2-message WRITE client with `client_args`; the client's output.
fn run_pair(srv_ip: &str, server_args: &[&str], client_args: &[&str]) -> std::process::Output {
    let mut server = Command::new(BIN)
        .args(["server", "--once", "--duration", "20", "--bind", srv_ip])
        .args(server_args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let out = Command::new(BIN)
        .args([
            "client",
            "--size",
            "10000",
            "--messages",
            "2",
            "--timeout",
            "15",
        ])
        .args(client_args)
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    out
}

/// One non-default port on both sides, without --peer-port: the server
/// answers at its own port, the client listens on the port it connects to.
#[test]
fn one_port_on_both_sides_needs_no_peer_port() {
    let (srv, cli, port) = ("127.0.0.21", "127.0.0.22", "47951");
    let connect = format!("{srv}:{port}");
    let out = run_pair(
        srv,
        &["--port", port],
        &["--bind", cli, "--port", port, "--connect", &connect],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "--port on both sides: {stderr}");
    // The report is written in words: no Rust debug formatting.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("client MetaRoCE write: 2 messages of 10000 B"),
        "{stdout}"
    );
    for debug in ["Some(", "None", "MetaRoce", "ImpairStats", "{ "] {
        assert!(!stdout.contains(debug), "{debug} in {stdout}");
    }
    // The client's --port defaults to the port of --connect.
    let out = run_pair(
        srv,
        &["--port", port],
        &["--bind", cli, "--connect", &connect],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "--connect only: {stderr}");
}

/// A client listening on another port than the server answers gets an
/// error that says what to check, in words (no Rust debug formatting).
#[test]
fn handshake_timeout_says_what_to_check() {
    let (srv, cli) = ("127.0.0.23", "127.0.0.24");
    let out = run_pair(
        srv,
        &["--port", "47953"],
        &[
            "--bind",
            cli,
            "--port",
            "47954",
            "--connect",
            &format!("{srv}:47953"),
        ],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no ACCEPT from 127.0.0.23:47953")
            && stderr.contains("answers this host at port 47954")
            && stderr.contains("--peer-port"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("Some(") && !stderr.contains("\"handshake"),
        "{stderr}"
    );
}
