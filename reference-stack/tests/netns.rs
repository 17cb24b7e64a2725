//! Across a real interface: two network namespaces joined by a veth pair
//! (10.213.x addresses inside our own namespaces only), random loss from
//! nftables (`numgen random mod 100 < 3 drop`) on both sides, server in one
//! namespace and client in the other. Fails loudly when `ip netns` is not
//! available; the namespaces are deleted at the end, even on failure.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_metaroce-stack");

fn sh(args: &[&str]) -> Output {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn nft(ns: &str, script: &str) {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nft");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "nft: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn dropped_by_nft(ns: &str) -> u64 {
    let out = sh(&[
        "ip", "netns", "exec", ns, "nft", "list", "table", "inet", "mrs",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split("packets ")
        .skip(1)
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn transfer_across_veth_with_nftables_loss() {
    // Loud failure, never a skip.
    let probe = Command::new("ip").args(["netns", "list"]).output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "`ip netns` is unavailable (need iproute2 and root): {probe:?}"
    );
    let id = std::process::id() % 100_000;
    let (a, b) = (format!("mrs-a-{id}"), format!("mrs-b-{id}"));
    let (va, vb) = (format!("mrsa{id}"), format!("mrsb{id}"));
    let _guard = Namespaces(vec![a.clone(), b.clone()]);
    sh(&["ip", "netns", "add", &a]);
    sh(&["ip", "netns", "add", &b]);
    sh(&[
        "ip", "link", "add", &va, "type", "veth", "peer", "name", &vb,
    ]);
    sh(&["ip", "link", "set", &va, "netns", &a]);
    sh(&["ip", "link", "set", &vb, "netns", &b]);
    sh(&["ip", "-n", &a, "addr", "add", "10.213.7.1/24", "dev", &va]);
    sh(&["ip", "-n", &b, "addr", "add", "10.213.7.2/24", "dev", &vb]);
    for (ns, dev) in [(&a, &va), (&b, &vb)] {
        sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        nft(
            ns,
            "table inet mrs {\n chain input {\n  type filter hook input priority 0; policy accept;\n  \
             udp dport 4794 numgen random mod 100 < 3 counter drop\n }\n}\n",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("client.pcap");
    let server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &a,
            BIN,
            "server",
            "--once",
            "--json",
            "--bind",
            "10.213.7.1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &b,
            BIN,
            "client",
            "--json",
            "--bind",
            "10.213.7.2",
        ])
        .args([
            "--connect",
            "10.213.7.1:4794",
            "--paths",
            "4",
            "--op",
            "write",
        ])
        .args(["--size", "400000", "--messages", "20", "--timeout", "20"])
        // Delay, jitter and reordering from the stack's impairment layer
        // (the kernel here has no netem).
        .args([
            "--delay-us",
            "100",
            "--jitter-us",
            "50",
            "--reorder",
            "2",
            "--reorder-us",
            "200",
        ])
        .arg("--pcap")
        .arg(&pcap)
        .output()
        .unwrap();
    let srv = server.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        srv.status.success(),
        "server: {}",
        String::from_utf8_lossy(&srv.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["messages"], 20, "{r}");
    assert!(r["closed_error"].is_null(), "{r}");
    let s: serde_json::Value = serde_json::from_slice(&srv.stdout).unwrap();
    assert_eq!(s["bytes"], 20 * 400_000, "{s}");
    // The loss came from the kernel, and the stack repaired it.
    let dropped = dropped_by_nft(&a) + dropped_by_nft(&b);
    assert!(dropped > 0, "nftables dropped nothing");
    assert!(r["retransmissions"].as_u64().unwrap() > 0, "{r}");
    assert!(r["pcap_frames"].as_u64().unwrap() > 0);
    assert!(pcap.metadata().unwrap().len() > 24);
}

/// server ns <-veth-> relay ns <-veth-> client ns: `metaroce-stack relay`
/// adds delay, jitter, reordering and loss between the namespaces (in place
/// of netem) while keeping the ev-derived source ports.
#[test]
fn transfer_through_relay_namespace() {
    let probe = Command::new("ip").args(["netns", "list"]).output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "`ip netns` is unavailable (need iproute2 and root): {probe:?}"
    );
    let id = std::process::id() % 100_000;
    let (s, r, c) = (
        format!("mrs-s-{id}"),
        format!("mrs-r-{id}"),
        format!("mrs-c-{id}"),
    );
    let _guard = Namespaces(vec![s.clone(), r.clone(), c.clone()]);
    for ns in [&s, &r, &c] {
        sh(&["ip", "netns", "add", ns]);
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
    }
    let (vs, vrs, vc, vrc) = (
        format!("mrss{id}"),
        format!("mrsr{id}"),
        format!("mrsc{id}"),
        format!("mrsq{id}"),
    );
    sh(&[
        "ip", "link", "add", &vs, "type", "veth", "peer", "name", &vrs,
    ]);
    sh(&[
        "ip", "link", "add", &vc, "type", "veth", "peer", "name", &vrc,
    ]);
    for (dev, ns, addr) in [
        (&vs, &s, "10.213.8.1/24"),
        (&vrs, &r, "10.213.8.2/24"),
        (&vc, &c, "10.213.9.1/24"),
        (&vrc, &r, "10.213.9.2/24"),
    ] {
        sh(&["ip", "link", "set", dev, "netns", ns]);
        sh(&["ip", "-n", ns, "addr", "add", addr, "dev", dev]);
        sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
    }
    let relay = Command::new("ip")
        .args([
            "netns",
            "exec",
            &r,
            BIN,
            "relay",
            "--json",
            "--idle-exit",
            "1",
            "--duration",
            "30",
        ])
        .args([
            "--a-bind",
            "10.213.8.2",
            "--a-peer",
            "10.213.8.1",
            "--b-bind",
            "10.213.9.2",
            "--b-peer",
            "10.213.9.1",
        ])
        .args([
            "--delay-us",
            "200",
            "--jitter-us",
            "100",
            "--reorder",
            "5",
            "--reorder-us",
            "300",
            "--loss",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &s,
            BIN,
            "server",
            "--once",
            "--json",
            "--bind",
            "10.213.8.1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &c,
            BIN,
            "client",
            "--json",
            "--bind",
            "10.213.9.1",
        ])
        .args([
            "--connect",
            "10.213.9.2:4794",
            "--paths",
            "4",
            "--op",
            "write",
        ])
        .args(["--size", "300000", "--messages", "16", "--timeout", "20"])
        .output()
        .unwrap();
    let srv = server.wait_with_output().unwrap();
    let rel = relay.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        srv.status.success(),
        "server: {}",
        String::from_utf8_lossy(&srv.stderr)
    );
    assert!(
        rel.status.success(),
        "relay: {}",
        String::from_utf8_lossy(&rel.stderr)
    );
    let cl: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cl["messages"], 16, "{cl}");
    assert!(cl["closed_error"].is_null(), "{cl}");
    let rs: serde_json::Value = serde_json::from_slice(&rel.stdout).unwrap();
    assert!(
        rs["a_to_b"].as_u64().unwrap() > 0 && rs["b_to_a"].as_u64().unwrap() > 100,
        "{rs}"
    );
    assert!(
        rs["impair_b_to_a"]["reordered"].as_u64().unwrap() > 0,
        "{rs}"
    );
    // The relay's delay shows in the RTT.
    let srtt = cl["path_stats"][0]["min_rtt_ns"].as_u64().unwrap();
    assert!(
        srtt >= 400_000,
        "min RTT {srtt} ns below the relay's 2 x 200 us"
    );
}
