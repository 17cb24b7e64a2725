//! Across a real interface: network namespaces of our own joined by veth
//! pairs (10.213.x and fd00:213:x:: addresses, only inside them).
//!
//! - Loss: random loss from nftables (`numgen random mod 100 < 3 drop`)
//!   on both sides, and a relay namespace with the stack's impairment.
//! - MTU (issue 23): on a 1500-byte link the stack sends nothing that the
//!   kernel must fragment, over IPv4 and IPv6, and refuses a `--mtu` that
//!   does not fit; forced to fragment (a test-only switch), the analyzer
//!   reassembles the wire capture into the same connection.
//! - Over IPv6 the flow label on the wire is the packet's ev (spec 1), and
//!   the wire capture lints with no error finding.
//!
//! Fails loudly without root, `ip netns` or tcpdump; the namespaces are
//! deleted at the end, even on failure.

#[path = "support/netns.rs"]
mod netns;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use netns::{Capture, CaptureCounts, Veth, require_netns, sh, workspace_bin};

const BIN: &str = env!("CARGO_BIN_EXE_metaroce-stack");

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
    let v = Veth::new("mrsn", "10.213.7");
    for i in 0..2 {
        v.nft(
            i,
            "table inet mrs {\n chain input {\n  type filter hook input priority 0; policy accept;\n  \
             udp dport 4794 numgen random mod 100 < 3 counter drop\n }\n}\n",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("client.pcap");
    let server = v
        .exec(0)
        .args([BIN, "server", "--once", "--json", "--bind", v.addr(0)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = v
        .exec(1)
        .args([BIN, "client", "--json", "--bind", v.addr(1)])
        .args(["--connect", &v.sockaddr(0, 4794)])
        .args(["--paths", "4", "--op", "write"])
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
    let dropped = dropped_by_nft(&v.ns[0]) + dropped_by_nft(&v.ns[1]);
    assert!(dropped > 0, "nftables dropped nothing");
    assert!(r["retransmissions"].as_u64().unwrap() > 0, "{r}");
    assert!(r["pcap_frames"].as_u64().unwrap() > 0);
    assert!(pcap.metadata().unwrap().len() > 24);
}

/// Namespaces deleted on drop (the relay test's three).
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// server ns <-veth-> relay ns <-veth-> client ns: `metaroce-stack relay`
/// adds delay, jitter, reordering and loss between the namespaces (in place
/// of netem) while keeping the ev-derived source ports.
#[test]
fn transfer_through_relay_namespace() {
    require_netns();
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

// ----- MTU: the stack never fragments -----------------------------------

/// What a capture of MetaRoCE traffic holds, read with proto-parse.
#[derive(Debug, Default)]
struct Wire {
    frames: u64,
    /// IP fragments, IPv4 or IPv6 (proto-parse stops at them).
    fragments: u64,
    /// Whole MetaRoCE DATA packets.
    data_packets: u64,
    largest_ip_packet: usize,
    /// IP packets above the veth's 1500 bytes: in the stack's own --pcap,
    /// the datagrams the kernel had to fragment.
    above_1500: u64,
    /// Whole MetaRoCE packets over IPv6, and their distinct flow labels.
    ipv6_packets: u64,
    flow_labels: std::collections::BTreeSet<u32>,
    /// IPv6 MetaRoCE packets whose flow label is not their ev.
    flow_label_not_ev: u64,
}

fn read_capture(file: &Path) -> Wire {
    use proto_parse::capture::Reader;
    use proto_parse::defrag::is_fragment;
    use proto_parse::frame::{DecodeConfig, decode};
    use proto_parse::link::LinkType;
    use proto_parse::metaroce::PacketType;
    let mut wire = Wire::default();
    let mut reader = Reader::open(file).unwrap();
    while let Some(rec) = reader.next_record() {
        let rec = rec.unwrap();
        let f = decode(LinkType::Ethernet, rec.data, &DecodeConfig::default());
        wire.frames += 1;
        if let Some(ip) = f.ip {
            wire.largest_ip_packet = wire.largest_ip_packet.max(ip.wire_len);
            wire.above_1500 += u64::from(ip.wire_len > 1500);
        }
        wire.fragments += u64::from(is_fragment(LinkType::Ethernet, rec.data));
        let packet = f.metaroce();
        if packet
            .as_ref()
            .is_some_and(|p| p.packet_type() == PacketType::Data)
        {
            wire.data_packets += 1;
        }
        if let (Some(p), Some(label)) = (&packet, f.ip.as_ref().and_then(|ip| ip.flow_label)) {
            wire.ipv6_packets += 1;
            wire.flow_labels.insert(label);
            wire.flow_label_not_ev += u64::from(label != u32::from(p.ev()));
        }
    }
    wire
}

const MR_SIZE: usize = 4 << 20;
const MSG_SIZE: usize = 300_000;
const MESSAGES: usize = 10;

/// The FNV-1a 64 digest the server reports after the client's WRITEs:
/// message k at offset k x size of the region (the client's payload
/// pattern), zeros elsewhere.
fn expected_digest() -> String {
    let mut region = vec![0u8; MR_SIZE];
    let payload: Vec<u8> = (0..MSG_SIZE as u32).map(|i| (i * 7 + 3) as u8).collect();
    for k in 0..MESSAGES {
        region[k * MSG_SIZE..(k + 1) * MSG_SIZE].copy_from_slice(&payload);
    }
    let h = region.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{h:016x}")
}

/// A WRITE transfer (10 x 300 kB: a few thousand frames, which the
/// capture's 64 MiB buffer holds many times over) from end 1 to the server
/// on end 0, captured on end 0's veth: the client's and the server's JSON
/// reports and tcpdump's counters. `client_pcap`: the client's own --pcap.
fn write_transfer(
    v: &Veth,
    extra: &[&str],
    pcap: &Path,
    client_pcap: Option<&Path>,
) -> (serde_json::Value, serde_json::Value, CaptureCounts) {
    let capture = Capture::start(&v.ns[0], &v.dev[0], pcap);
    let server = v
        .exec(0)
        .args([BIN, "server", "--once", "--json", "--digest"])
        .args(["--bind", v.addr(0), "--duration", "30"])
        .args(["--mr-size", &MR_SIZE.to_string()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = v
        .exec(1)
        .args([BIN, "client", "--json", "--bind", v.addr(1)])
        .args(["--connect", &v.sockaddr(0, 4794)])
        .args(["--paths", "4", "--op", "write", "--timeout", "20"])
        .args([
            "--size",
            &MSG_SIZE.to_string(),
            "--messages",
            &MESSAGES.to_string(),
        ])
        .args(["--remote-size", &MR_SIZE.to_string()])
        .args(extra)
        .args(
            client_pcap
                .map(|p| ["--pcap".as_ref(), p.as_os_str()])
                .into_iter()
                .flatten(),
        )
        .output()
        .unwrap();
    let srv = server.wait_with_output().unwrap();
    let counts = capture.stop();
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
    let client: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let server: serde_json::Value = serde_json::from_slice(&srv.stdout).unwrap();
    assert_eq!(client["messages"], MESSAGES, "{client}");
    assert!(client["closed_error"].is_null(), "{client}");
    // Byte-exact: the server's memory holds exactly what was written.
    assert_eq!(
        server["region_digest"],
        expected_digest().as_str(),
        "{server}"
    );
    (client, server, counts)
}

/// Without --mtu, both sides take the largest payload MTU that fits the
/// 1500-byte link (`payload_mtu`), negotiate it in the CTRL handshake, and
/// nothing on the wire is fragmented; the wire capture (at the server)
/// lints with no error finding. Returns what the wire held and what the
/// client's own --pcap recorded.
fn transfer_fits_without_fragments(v: &Veth, payload_mtu: u64) -> (Wire, Wire) {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("wire.pcap");
    let own = dir.path().join("client.pcap");
    let (client, server, counts) = write_transfer(v, &[], &pcap, Some(&own));
    assert_eq!(client["mtu"], payload_mtu, "{client}");
    assert_eq!(server["mtu"], payload_mtu, "{server}");
    assert_eq!(client["driver"]["tx_too_big"], 0, "{client}");
    let wire = read_capture(&pcap);
    assert_eq!(wire.frames, counts.captured, "{wire:?} {counts:?}");
    assert!(wire.data_packets > 2000, "{wire:?}");
    assert_eq!(wire.fragments, 0, "{wire:?}");
    assert!(wire.largest_ip_packet <= 1500, "{wire:?}");
    let findings = lint(&pcap, v.addr(0));
    assert!(
        findings.iter().all(|f| f["severity"] != "error"),
        "{findings:#?}"
    );
    assert!(
        findings.iter().all(|f| f["rule"] != "MR-PKT-015"),
        "{findings:#?}"
    );
    (wire, read_capture(&own))
}

#[test]
fn transfer_fits_a_1500_byte_link_without_fragments() {
    // 1500 - IPv4 20 - UDP 8 - WRITE_IMM header 56 - CRC 4.
    transfer_fits_without_fragments(&Veth::new("mrsm", "10.213.10"), 1412);
}

/// IPv6: DF is IPV6_DONTFRAG with IPV6_MTU_DISCOVER = IPV6_PMTUDISC_DO,
/// the route's MTU is IPV6_MTU; no fragment header on the wire.
#[test]
fn ipv6_transfer_fits_a_1500_byte_link_without_fragments() {
    // 1500 - IPv6 40 - UDP 8 - WRITE_IMM header 56 - CRC 4.
    let (wire, own) = transfer_fits_without_fragments(&Veth::new("mrs6", "fd00:213:10::"), 1392);
    // Spec 1: every packet's flow label is its ev, the client's DATA and
    // the server's feedback (not a hash the kernel chose), on each of the
    // client's 4 paths; the client's --pcap records the labels it sent
    // and received.
    for (what, w) in [("wire", &wire), ("client --pcap", &own)] {
        assert!(w.ipv6_packets > w.data_packets, "{what}: {w:?}");
        assert_eq!(w.flow_label_not_ev, 0, "{what}: {w:?}");
        assert!(w.flow_labels.len() >= 4, "{what}: {w:?}");
    }
}

/// An --mtu whose packets do not fit the path is refused at start, on both
/// sides, with the size that would fit.
fn mtu_above_the_path_is_refused(v: &Veth, fits: u16) {
    let client = v
        .exec(1)
        .args([BIN, "client", "--mtu", "4096", "--bind", v.addr(1)])
        .args(["--connect", &v.sockaddr(0, 4794)])
        .output()
        .unwrap();
    let server = v
        .exec(0)
        .args([BIN, "server", "--mtu", "4096", "--bind", v.addr(0)])
        .args(["--duration", "5"])
        .output()
        .unwrap();
    for (side, out) in [("client", client), ("server", server)] {
        assert!(!out.status.success(), "{side} accepted --mtu 4096");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--mtu 4096 does not fit")
                && err.contains("MTU 1500")
                && err.contains(&format!("--mtu {fits} or less")),
            "{side}: {err}"
        );
    }
}

#[test]
fn mtu_above_the_path_is_refused_at_start() {
    mtu_above_the_path_is_refused(&Veth::new("mrsr", "10.213.11"), 1412);
}

#[test]
fn ipv6_mtu_above_the_path_is_refused_at_start() {
    mtu_above_the_path_is_refused(&Veth::new("mrsq", "fd00:213:11::"), 1392);
}

/// The findings of `metaroce-analyze lint --json` on a capture taken on
/// `host` (exit status 0: no error finding; 3: some, which the caller
/// names).
fn lint(capture: &Path, host: &str) -> Vec<serde_json::Value> {
    let bin = workspace_bin(BIN, "metaroce-analyze", "metaroce-analyze", false);
    let out = Command::new(bin)
        .args(["lint", "--json", "--vantage", host])
        .arg(capture)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "metaroce-analyze lint {}: {:?} {}",
        capture.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect()
}

/// `metaroce-analyze report --json` of a capture.
fn analyze(capture: &Path) -> serde_json::Value {
    let bin = workspace_bin(BIN, "metaroce-analyze", "metaroce-analyze", false);
    let out = Command::new(bin)
        .args(["report", "--json"])
        .arg(capture)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "metaroce-analyze report {}: {}",
        capture.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The test-only switch: --mtu above the path with the don't-fragment bit
/// off, so that the kernel fragments every full DATA datagram. The
/// transfer still completes byte-exact; the wire capture holds the
/// fragments, and the analyzer reassembles them into the same connection
/// as its report of the client's own --pcap (the same datagrams, recorded
/// whole as the sockets saw them), with nothing left incomplete.
fn forced_fragmentation_is_reassembled(v: &Veth) {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("fragmented.pcap");
    let whole = dir.path().join("client.pcap");
    let forced = ["--mtu", "4096", "--allow-fragmentation"];
    let (client, _, counts) = write_transfer(v, &forced, &pcap, Some(&whole));
    assert_eq!(client["mtu"], 4096, "{client}");

    let wire = read_capture(&pcap);
    assert_eq!(wire.frames, counts.captured, "{wire:?} {counts:?}");
    // A full DATA datagram (4152 bytes over IPv4) leaves as three
    // fragments; only the short last packet of a message fits whole.
    assert!(wire.fragments > 2000, "{wire:?}");
    assert!(wire.data_packets < wire.fragments / 10, "{wire:?}");
    assert!(wire.largest_ip_packet <= 1500, "{wire:?}");
    let sent = read_capture(&whole);
    assert_eq!(sent.fragments, 0, "{sent:?}");
    assert!(sent.above_1500 > 500, "{sent:?}");

    let fragmented = analyze(&pcap);
    let truth = analyze(&whole);
    let cap = &fragmented["capture"];
    assert_eq!(cap["ip_fragments"], wire.fragments, "{cap}");
    assert_eq!(cap["reassembled_datagrams"], sent.above_1500, "{cap}");
    assert_eq!(cap["incomplete_datagrams"], 0, "{cap}");
    assert_eq!(cap["incomplete_fragments"], 0, "{cap}");
    assert_eq!(
        cap["metaroce_packets"], truth["capture"]["metaroce_packets"],
        "{cap}"
    );

    // The same connection, both directions: what was sent and delivered.
    let directions = |r: &serde_json::Value| r["directions"].as_array().unwrap().clone();
    let (f, t) = (directions(&fragmented), directions(&truth));
    let names = |d: &[serde_json::Value]| -> Vec<String> {
        d.iter()
            .map(|d| {
                format!(
                    "{}#{}->{}#{}",
                    d["src"], d["src_conn"], d["dst"], d["dst_conn"]
                )
            })
            .collect()
    };
    // The connection both ways, and its CONNECT (to connection 0).
    assert_eq!(names(&f).len(), 3, "{:?}", names(&f));
    assert_eq!(
        names(&f).len(),
        names(&t).len(),
        "{:?} {:?}",
        names(&f),
        names(&t)
    );
    for t in &t {
        let key = ["src", "dst", "src_conn", "dst_conn"];
        let f = f
            .iter()
            .find(|f| key.iter().all(|k| f[k] == t[k]))
            .unwrap_or_else(|| {
                panic!("no direction {} -> {} after reassembly", t["src"], t["dst"])
            });
        for field in [
            "data_packets",
            "data_bytes",
            "goodput_bytes",
            "retransmissions",
            "messages_completed",
            "messages_delivered",
            "acks",
            "nacks",
        ] {
            assert_eq!(f[field], t[field], "{} -> {}: {field}", t["src"], t["dst"]);
        }
        assert_eq!(
            f["paths"].as_array().unwrap().len(),
            t["paths"].as_array().unwrap().len(),
            "paths"
        );
    }
    // And the stack's own account of the run.
    let data = f
        .iter()
        .find(|d| d["src"] == v.addr(1) && d["dst_conn"] != 0)
        .unwrap();
    assert_eq!(data["messages_completed"], MESSAGES, "{data}");
    assert_eq!(data["goodput_bytes"], MESSAGES * MSG_SIZE, "{data}");
    assert_eq!(data["paths"].as_array().unwrap().len(), 4, "{data}");
    eprintln!(
        "wire: {} frames, {} fragments, {} reassembled; DATA {} ({} retransmissions)",
        wire.frames,
        wire.fragments,
        cap["reassembled_datagrams"],
        data["data_packets"],
        data["retransmissions"]
    );
}

#[test]
fn forced_fragmentation_is_reassembled_into_the_same_connection() {
    forced_fragmentation_is_reassembled(&Veth::new("mrsf", "10.213.12"));
}

/// IPv6: without IPV6_DONTFRAG the sending host fragments (IPv6 routers
/// never do), and the fragment headers reassemble as IPv4's fragments do.
#[test]
fn ipv6_forced_fragmentation_is_reassembled_into_the_same_connection() {
    forced_fragmentation_is_reassembled(&Veth::new("mrsg", "fd00:213:12::"));
}
