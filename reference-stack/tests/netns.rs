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

// ----- MTU: the stack never fragments -----------------------------------

/// Two namespaces joined by a veth pair with a 1500-byte MTU: `a` holds
/// `{net}.1` on `va`, `b` holds `{net}.2` on `vb`.
struct Veth {
    _guard: Namespaces,
    a: String,
    b: String,
    va: String,
}

fn veth_1500(tag: &str, net: &str) -> Veth {
    let probe = Command::new("ip").args(["netns", "list"]).output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "`ip netns` is unavailable (need iproute2 and root): {probe:?}"
    );
    let id = std::process::id() % 100_000;
    let (a, b) = (format!("mrs-{tag}a-{id}"), format!("mrs-{tag}b-{id}"));
    let (va, vb) = (format!("mrs{tag}a{id}"), format!("mrs{tag}b{id}"));
    let guard = Namespaces(vec![a.clone(), b.clone()]);
    sh(&["ip", "netns", "add", &a]);
    sh(&["ip", "netns", "add", &b]);
    sh(&[
        "ip", "link", "add", &va, "mtu", "1500", "type", "veth", "peer", "name", &vb, "mtu", "1500",
    ]);
    for (dev, ns, addr) in [(&va, &a, ".1/24"), (&vb, &b, ".2/24")] {
        sh(&["ip", "link", "set", dev, "netns", ns]);
        sh(&[
            "ip",
            "-n",
            ns,
            "addr",
            "add",
            &format!("{net}{addr}"),
            "dev",
            dev,
        ]);
        sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
    }
    Veth {
        _guard: guard,
        a,
        b,
        va,
    }
}

/// tcpdump on `dev` in namespace `ns`, writing `file`; stopped (and the
/// file flushed) by [`Capture::stop`].
struct Capture(std::process::Child, std::path::PathBuf);

impl Capture {
    fn start(ns: &str, dev: &str, file: &std::path::Path) -> Capture {
        use std::io::{BufRead, BufReader};
        let mut child = Command::new("ip")
            .args([
                "netns", "exec", ns, "tcpdump", "-i", dev, "-n", "-U", "-Z", "root",
            ])
            // A 64 MiB buffer: a burst of fragments must not overrun it.
            .args(["-B", "65536"])
            .arg("-w")
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump (scripts/setup.sh installs it)");
        // Ready once it says it listens.
        let mut line = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("listening on"), "tcpdump: {line}");
        Capture(child, file.to_path_buf())
    }

    /// Stops once the file stopped growing: tcpdump stops reading at
    /// SIGINT, and on a loaded host it may still be behind the traffic.
    fn stop(mut self) {
        let size = |p: &std::path::Path| p.metadata().map_or(0, |m| m.len());
        let mut last = size(&self.1);
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(200));
            let now = size(&self.1);
            if now == last {
                break;
            }
            last = now;
        }
        sh(&["kill", "-INT", &self.0.id().to_string()]);
        self.0.wait().unwrap();
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

/// What a capture of MetaRoCE traffic holds, read with proto-parse.
#[derive(Debug, Default)]
struct Wire {
    frames: u64,
    /// IPv4 fragments (proto-parse stops at them).
    fragments: u64,
    data_packets: u64,
    largest_ip_packet: usize,
}

fn read_capture(file: &std::path::Path) -> Wire {
    use proto_parse::capture::Reader;
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
        }
        if let Some(proto_parse::Error {
            kind: proto_parse::ErrorKind::Unsupported { what, .. },
            ..
        }) = f.error
            && what.starts_with("IPv4 fragment")
        {
            wire.fragments += 1;
        }
        if f.metaroce()
            .is_some_and(|p| p.packet_type() == PacketType::Data)
        {
            wire.data_packets += 1;
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

/// A WRITE transfer from `b` to the server in `a`, captured on `a`'s veth:
/// the client's and the server's JSON reports and the capture.
fn write_transfer(
    v: &Veth,
    net: &str,
    extra: &[&str],
    pcap: &std::path::Path,
    client_pcap: Option<&std::path::Path>,
) -> (serde_json::Value, serde_json::Value) {
    let capture = Capture::start(&v.a, &v.va, pcap);
    let server = Command::new("ip")
        .args([
            "netns", "exec", &v.a, BIN, "server", "--once", "--json", "--digest",
        ])
        .args(["--bind", &format!("{net}.1"), "--duration", "30"])
        .args(["--mr-size", &MR_SIZE.to_string()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("ip")
        .args(["netns", "exec", &v.b, BIN, "client", "--json"])
        .args([
            "--bind",
            &format!("{net}.2"),
            "--connect",
            &format!("{net}.1:4794"),
        ])
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
    capture.stop();
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
    (client, server)
}

/// On a 1500-byte link the stack takes its DATA size from the interface
/// MTU (no --mtu given), negotiates it in the CTRL handshake, and nothing
/// on the wire is fragmented.
#[test]
fn transfer_fits_a_1500_byte_link_without_fragments() {
    let net = "10.213.10";
    let v = veth_1500("m", net);
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("wire.pcap");
    let (client, server) = write_transfer(&v, net, &[], &pcap, None);
    // 1500 - IPv4 20 - UDP 8 - WRITE_IMM header 56 - CRC 4.
    assert_eq!(client["mtu"], 1412, "{client}");
    assert_eq!(server["mtu"], 1412, "{server}");
    assert_eq!(client["driver"]["tx_too_big"], 0, "{client}");
    let wire = read_capture(&pcap);
    assert!(wire.data_packets > 2000, "{wire:?}");
    assert_eq!(wire.fragments, 0, "{wire:?}");
    assert!(wire.largest_ip_packet <= 1500, "{wire:?}");
}

/// An --mtu whose packets do not fit the path is refused at start, on both
/// sides, with the size that would fit.
#[test]
fn mtu_above_the_path_is_refused_at_start() {
    let net = "10.213.11";
    let v = veth_1500("r", net);
    let client = Command::new("ip")
        .args(["netns", "exec", &v.b, BIN, "client", "--mtu", "4096"])
        .args([
            "--bind",
            &format!("{net}.2"),
            "--connect",
            &format!("{net}.1:4794"),
        ])
        .output()
        .unwrap();
    let server = Command::new("ip")
        .args(["netns", "exec", &v.a, BIN, "server", "--mtu", "4096"])
        .args(["--bind", &format!("{net}.1"), "--duration", "5"])
        .output()
        .unwrap();
    for (side, out) in [("client", client), ("server", server)] {
        assert!(!out.status.success(), "{side} accepted --mtu 4096");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--mtu 4096 does not fit")
                && err.contains("MTU 1500")
                && err.contains("--mtu 1412 or less"),
            "{side}: {err}"
        );
    }
}

/// The test-only switch: --mtu above the path with the don't-fragment bit
/// off, so the kernel fragments; the transfer still completes byte-exact,
/// and the capture holds the fragments.
#[test]
fn forced_fragmentation_shows_fragments_on_the_wire() {
    let net = "10.213.12";
    let v = veth_1500("f", net);
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("fragmented.pcap");
    // The client's own --pcap records its datagrams as the sockets see
    // them: the same traffic, unfragmented.
    let whole = dir.path().join("client.pcap");
    let forced = ["--mtu", "4096", "--allow-fragmentation"];
    let (client, _) = write_transfer(&v, net, &forced, &pcap, Some(&whole));
    assert_eq!(client["mtu"], 4096, "{client}");
    let wire = read_capture(&pcap);
    // A 4152-byte DATA datagram leaves as three fragments (proto-parse
    // stops at each); only the short last packet of a message fits whole.
    assert!(wire.fragments > 2000, "{wire:?}");
    assert!(wire.data_packets < wire.fragments / 10, "{wire:?}");
    assert!(wire.largest_ip_packet <= 1500, "{wire:?}");
    assert_eq!(read_capture(&whole).fragments, 0);
}
