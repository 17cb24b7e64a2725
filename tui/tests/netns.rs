//! End to end on a real interface: two network namespaces of our own
//! joined by a veth pair with a 1500-byte MTU (addresses only inside
//! them), `metaroce-top -i` on the veth end in one of them, driven in tmux.
//!
//! - `reference_stack_with_loss`: the reference stack (`metaroce-stack`)
//!   runs a WRITE workload across the veth at its default MTU (negotiated
//!   from the 1500-byte link: nothing is fragmented) with 2 % receive-side
//!   loss (its impairment layer, so every transmission crosses the veth
//!   and is captured); the screen shows the connection, its 4 paths and
//!   the loss, and the JSON snapshot (`w`) agrees with the stack's own
//!   event logs (DATA transmissions, retransmissions, ACKs, NACKs).
//! - `reference_stack_forced_to_fragment`: the same with the stack's
//!   test-only switch (`--mtu 4096 --allow-fragmentation`: DF off, so the
//!   kernel fragments every full DATA datagram): after reassembly the
//!   screen shows the same connection and paths, the status line counts
//!   the datagrams rebuilt and none incomplete, and the snapshot agrees
//!   with the event logs as before.
//! - `fixture_injected_onto_veth`: the multipath fixture's frames injected
//!   on the veth (the `blast` example, libpcap); the counts match the
//!   fixture's.
//! - `kernel_drops_are_reported`: a stopped capture's kernel drops show.
//!
//! Needs root, tmux and `ip netns`; the tests fail (they do not skip)
//! without them. Namespaces are deleted by a drop guard, also when an
//! assertion fails.

#[path = "../../reference-stack/tests/support/netns.rs"]
mod netns;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

mod common;

use common::{BIN, Tmux, fixture, have_tmux, saved_json};
use netns::{Veth, sh, workspace_bin};

fn require_tmux() {
    assert!(
        have_tmux(),
        "this test needs tmux: run scripts/setup.sh (CI does)"
    );
}

fn direction<'a>(v: &'a serde_json::Value, src: &str, data: bool) -> &'a serde_json::Value {
    v["report"]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["src"] == src && (d["data_packets"].as_u64().unwrap() > 0) == data)
        .unwrap_or_else(|| panic!("no direction from {src} in {v}"))
}

fn count(log: &Path, f: impl Fn(&serde_json::Value) -> bool) -> u64 {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| f(e))
        .count() as u64
}

/// What one run of the stack under `metaroce-top` showed.
struct StackRun {
    /// The screen once the connection and its paths showed.
    screen: String,
    /// The snapshot saved with `w`.
    snapshot: serde_json::Value,
    /// The client's JSON report.
    client: serde_json::Value,
    /// The client's address.
    client_addr: String,
    /// The stack's event logs (JSON Lines).
    client_log: std::path::PathBuf,
    server_log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// A 20 x 400 kB WRITE workload over 4 paths from end 1 to the server on
/// end 0, with 2 % loss at the server's receive side, watched by
/// `metaroce-top -i` on end 1's veth; `stack_args` go to both sides.
fn stack_under_top(tag: &str, net: &str, stack_args: &[&str]) -> StackRun {
    require_tmux();
    let stack = workspace_bin(BIN, "reference-stack", "metaroce-stack", false);
    let v = Veth::new(tag, net);
    let dir = tempfile::tempdir().unwrap();
    let (server_log, client_log) = (
        dir.path().join("server.jsonl"),
        dir.path().join("client.jsonl"),
    );
    let saves = dir.path().join("saves");
    std::fs::create_dir(&saves).unwrap();

    let t = Tmux::start(
        tag,
        &format!(
            "ip netns exec {} {BIN} -i {} --save-dir {}",
            v.ns[1],
            v.dev[1],
            saves.display()
        ),
    );
    t.wait("the UI", |s| s.contains(&format!("live {}", v.dev[1])));

    let server = v
        .exec(0)
        .arg(&stack)
        .args(["server", "--once", "--json", "--bind", v.addr(0)])
        .args(stack_args)
        .args(["--impair", "rx", "--loss", "2", "--seed", "7", "--events"])
        .arg(&server_log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let client = v
        .exec(1)
        .arg(&stack)
        .args(["client", "--json", "--bind", v.addr(1)])
        .args(["--connect", &v.sockaddr(0, 4794)])
        .args(["--paths", "4", "--op", "write"])
        .args(["--size", "400000", "--messages", "20", "--timeout", "20"])
        .args(stack_args)
        .arg("--events")
        .arg(&client_log)
        .output()
        .unwrap();
    let srv = server.wait_with_output().unwrap();
    assert!(
        client.status.success(),
        "client: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(
        srv.status.success(),
        "server: {}",
        String::from_utf8_lossy(&srv.stderr)
    );
    let client: serde_json::Value = serde_json::from_slice(&client.stdout).unwrap();
    assert_eq!(client["messages"], 20, "{client}");

    // The connection, then its 4 paths (one row per ev; the stack picks
    // its own ev numbers).
    let conn = format!("▶{}#", v.addr(1));
    t.wait("the connection", |s| s.contains(&conn));
    let ev_rows = |s: &str| {
        s.lines()
            .filter(|l| {
                l.strip_prefix('│')
                    .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
            })
            .count()
    };
    t.wait("4 paths", |s| ev_rows(s) == 4);
    let screen = settled(&t);
    assert_eq!(
        column(&screen, &conn, "Paths").as_deref(),
        Some("4"),
        "4 paths:\n{screen}"
    );
    assert!(
        screen.contains(&format!("Paths (ev) of {}#", v.addr(1))),
        "{screen}"
    );
    t.keys(&["w"]);
    let snapshot = saved_json(&saves);
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(Duration::from_secs(3)), "0");
    // Nothing dropped by the capture: the counts must agree exactly.
    assert_eq!(
        snapshot["stats"]["kernel_drops"], 0,
        "{}",
        snapshot["stats"]
    );
    StackRun {
        screen,
        snapshot,
        client,
        client_addr: v.addr(1).to_string(),
        client_log,
        server_log,
        _dir: dir,
    }
}

/// The cell of the connections table's column `header` in the row that
/// contains `row`: the word of the row under the header's name.
fn column(screen: &str, row: &str, header: &str) -> Option<String> {
    let head = screen
        .lines()
        .find(|l| l.contains("Stalls") && l.contains(header))?;
    let at = head.split(header).next()?.chars().count();
    let at = at..at + header.chars().count();
    let line: Vec<char> = screen.lines().find(|l| l.contains(row))?.chars().collect();
    let mut start = None;
    for (i, c) in line.iter().chain([&' ']).enumerate() {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                if s < at.end && at.start < i {
                    return Some(line[s..i].iter().collect());
                }
                start = None;
            }
            _ => {}
        }
    }
    None
}

/// The screen once the status line shows no traffic and its frame count
/// stopped moving (the capture has caught up with a run that ended).
fn settled(t: &Tmux) -> String {
    let frames = |s: &str| {
        s.split("frames ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .map(str::to_string)
    };
    let mut last = t.screen();
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(300));
        let now = t.screen();
        if now.contains(" 0 pkt/s") && frames(&now).is_some() && frames(&now) == frames(&last) {
            return now;
        }
        last = now;
    }
    panic!("the frame count never settled:\n{last}");
}

/// The snapshot's data direction agrees with the stack's event logs:
/// every DATA transmission, retransmission, ACK and NACK, on 4 paths,
/// and the loss the server's impairment caused is seen.
fn snapshot_agrees_with_the_stack(r: &StackRun) {
    let d = direction(&r.snapshot, &r.client_addr, true);
    let tx = count(&r.client_log, |e| e["event"] == "tx");
    let retx = count(&r.client_log, |e| {
        e["event"] == "tx" && e["retransmission"] == true
    });
    let lost_by_stack = count(&r.client_log, |e| e["event"] == "loss");
    let acks = count(&r.server_log, |e| {
        e["event"] == "tx_control" && e["kind"] == "ACK"
    });
    let nacks = count(&r.server_log, |e| {
        e["event"] == "tx_control" && e["kind"] == "NACK"
    });
    assert!(
        retx > 0 && lost_by_stack > 0,
        "the impairment caused no loss"
    );
    assert_eq!(d["data_packets"], tx, "DATA transmissions");
    assert_eq!(d["retransmissions"], retx, "retransmissions");
    assert_eq!(d["acks"], acks, "ACKs");
    assert_eq!(d["nacks"], nacks, "NACKs");
    assert_eq!(d["messages_completed"], 20, "messages");
    assert_eq!(d["paths"].as_array().unwrap().len(), 4);
    // Loss as the engine infers it from a sender-side capture (spec 9).
    let lost: u64 = d["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["lost_inferred"].as_u64().unwrap() + p["lost"].as_u64().unwrap())
        .sum();
    assert!(lost > 0, "no loss seen: {d}");
    eprintln!(
        "stack: {tx} DATA tx, {retx} retx, {lost_by_stack} declared lost, {acks} ACK, {nacks} NACK; \
         engine: loss {lost}, stalls {}; capture: {}",
        d["stalls"].as_array().unwrap().len(),
        r.snapshot["report"]["capture"]
    );
}

#[test]
fn reference_stack_with_loss() {
    let r = stack_under_top("mrts", "10.78.1", &[]);
    // The default MTU fits the link: 1500 - IPv4 20 - UDP 8 - WRITE_IMM
    // header 56 - CRC 4.
    assert_eq!(r.client["mtu"], 1412, "{}", r.client);
    let capture = &r.snapshot["report"]["capture"];
    assert_eq!(capture["ip_fragments"], 0, "{capture}");
    assert!(!r.screen.contains("IP frags"), "{}", r.screen);
    snapshot_agrees_with_the_stack(&r);
}

#[test]
fn reference_stack_forced_to_fragment() {
    shows_the_reassembled_connection("mrtg", "10.78.4");
}

/// The same over IPv6 (fragment headers, which the default filter takes
/// too).
#[test]
fn reference_stack_forced_to_fragment_over_ipv6() {
    shows_the_reassembled_connection("mrt6", "fd00:78:6::");
}

/// The stack forced to fragment (DF off, --mtu 4096 on a 1500-byte link)
/// under metaroce-top: the connection after reassembly.
fn shows_the_reassembled_connection(tag: &str, net: &str) {
    let r = stack_under_top(tag, net, &["--mtu", "4096", "--allow-fragmentation"]);
    assert_eq!(r.client["mtu"], 4096, "{}", r.client);
    let capture = &r.snapshot["report"]["capture"];
    let rebuilt = capture["reassembled_datagrams"].as_u64().unwrap();
    // Every DATA datagram crossed the link in fragments: 3 for a full one
    // (4152 bytes over IPv4), 2 for the last of a message (2776 bytes).
    assert!(rebuilt > 1900, "{capture}");
    let fragments = capture["ip_fragments"].as_u64().unwrap();
    assert!(
        (2 * rebuilt..=3 * rebuilt).contains(&fragments),
        "{capture}"
    );
    assert_eq!(capture["incomplete_datagrams"], 0, "{capture}");
    assert_eq!(capture["incomplete_fragments"], 0, "{capture}");
    // The status line says so.
    let status = format!(
        "IP frags {}: {} rebuilt, 0 incomplete (0 frags)",
        capture["ip_fragments"], rebuilt
    );
    assert!(r.screen.contains(&status), "{status}:\n{}", r.screen);
    snapshot_agrees_with_the_stack(&r);
}

#[test]
fn fixture_injected_onto_veth() {
    require_tmux();
    let blast = workspace_bin(BIN, "metaroce-tui", "blast", true);
    let net = Veth::new("mrtf", "10.78.2");
    let dir = tempfile::tempdir().unwrap();
    let t = Tmux::start(
        "inject",
        &format!(
            "ip netns exec {} {BIN} -i {} --save-dir {}",
            net.ns[1],
            net.dev[1],
            dir.path().display()
        ),
    );
    t.wait("the UI", |s| s.contains(&format!("live {}", net.dev[1])));
    let out = net
        .exec(0)
        .arg(&blast)
        .args(["replay", &net.dev[0]])
        .arg(fixture("multipath_loss_receiver.pcap"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = t.wait("the connection", |s| {
        s.contains("▶10.0.0.1#256→10.0.0.2#512")
    });
    assert!(s.contains("Paths (ev) of 10.0.0.1#256→10.0.0.2#512"), "{s}");
    std::thread::sleep(Duration::from_millis(400));
    t.keys(&["w"]);
    let v = saved_json(dir.path());
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(Duration::from_secs(3)), "0");
    assert_eq!(v["stats"]["received"], 30);
    assert_eq!(v["stats"]["kernel_drops"], 0);
    let d = direction(&v, "10.0.0.1", true);
    assert_eq!(d["data_packets"], 11);
    assert_eq!(d["retransmissions"], 4);
    assert_eq!(d["nacks"], 2);
    assert_eq!(d["cnps"], 1);
    assert_eq!(d["ce_marked"], 1);
    assert_eq!(d["paths"].as_array().unwrap().len(), 4);
}

#[test]
fn kernel_drops_are_reported() {
    let blast = workspace_bin(BIN, "metaroce-tui", "blast", true);
    let net = Veth::new("mrtd", "10.78.3");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("drops.json");
    // A 1 MiB kernel buffer, and the capture stopped (SIGSTOP) for a
    // second while 40k packets/s arrive: the kernel must drop, and the
    // snapshot must say so.
    let mut top = net
        .exec(1)
        .arg(BIN)
        .args([
            "-i",
            &net.dev[1],
            "--headless",
            "--duration",
            "4",
            "--buffer-mb",
            "1",
            "--json-out",
        ])
        .arg(&json)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let sender = net
        .exec(0)
        .arg(&blast)
        .args(["rate", &net.dev[0], "40000", "2", "1024", "8", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // `ip netns exec` execs the binary: the child's pid is metaroce-top's.
    let pid = top.id().to_string();
    sh(&["kill", "-STOP", &pid]);
    std::thread::sleep(Duration::from_millis(1000));
    sh(&["kill", "-CONT", &pid]);
    let sent = sender.wait_with_output().unwrap();
    assert!(top.wait().unwrap().success());
    let sent: serde_json::Value = serde_json::from_slice(&sent.stdout).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let st = &v["stats"];
    let drops = st["kernel_drops"].as_u64().unwrap();
    let received = st["received"].as_u64().unwrap();
    assert!(drops > 0, "no kernel drops reported: {st}");
    // libpcap's received counts what reached the socket (taken or dropped).
    assert!(
        received + drops >= sent["sent"].as_u64().unwrap() * 9 / 10,
        "{st} vs {sent}"
    );
    assert_eq!(st["frames"].as_u64().unwrap() + drops, received, "{st}");
}
