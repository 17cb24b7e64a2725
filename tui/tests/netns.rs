//! End to end on a real interface: two network namespaces of our own
//! joined by a veth pair (addresses only inside them), `metaroce-top -i`
//! on the veth end in one of them, driven in tmux.
//!
//! - `reference_stack_with_loss`: the reference stack (`metaroce-stack`)
//!   runs a WRITE workload across the veth with 2 % receive-side loss
//!   (its impairment layer, so every transmission crosses the veth and is
//!   captured); the screen shows the connection, its 4 paths and the
//!   loss, and the JSON snapshot (`w`) agrees with the stack's own event
//!   logs (DATA transmissions, retransmissions, ACKs, NACKs).
//! - `fixture_injected_onto_veth`: the multipath fixture's frames injected
//!   on the veth (the `blast` example, libpcap); the counts match the
//!   fixture's.
//!
//! Needs root and `ip netns`; the tests fail (they do not skip) without them. Namespaces are
//! deleted by a drop guard, also when an assertion fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use common::{BIN, Tmux, fixture, have_tmux, saved_json};

fn can_netns() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    root && have_tmux()
        && Command::new("ip")
            .args(["netns", "list"])
            .output()
            .is_ok_and(|o| o.status.success())
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two namespaces and a veth pair; deleted on drop.
struct Veth {
    ns: [String; 2],
    dev: [String; 2],
}

impl Veth {
    fn new(tag: &str, subnet: &str) -> Veth {
        let id = std::process::id() % 100_000;
        let v = Veth {
            ns: [format!("mrt{tag}-a-{id}"), format!("mrt{tag}-b-{id}")],
            dev: [format!("mrt{tag}a{id}"), format!("mrt{tag}b{id}")],
        };
        for ns in &v.ns {
            sh(&["ip", "netns", "add", ns]);
        }
        sh(&[
            "ip", "link", "add", &v.dev[0], "type", "veth", "peer", "name", &v.dev[1],
        ]);
        for i in 0..2 {
            let (ns, dev) = (&v.ns[i], &v.dev[i]);
            sh(&["ip", "link", "set", dev, "netns", ns]);
            sh(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("{subnet}.{}/24", i + 1),
                "dev",
                dev,
            ]);
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        v
    }

    fn exec(&self, i: usize) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns[i]]);
        c
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// A binary of another package of the workspace, built if missing.
fn workspace_bin(package: &str, name: &str, example: bool) -> Option<PathBuf> {
    let dir = Path::new(BIN).parent()?;
    let path = if example {
        dir.join("examples").join(name)
    } else {
        dir.join(name)
    };
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let kind = if example { "--example" } else { "--bin" };
        let _ = Command::new(cargo)
            .args(["build", "-q", "-p", package, kind, name])
            .status();
    }
    path.exists().then_some(path)
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

#[test]
fn reference_stack_with_loss() {
    assert!(
        can_netns(),
        "this test needs root, tmux and `ip netns`: run it as root with scripts/setup.sh done (CI does)"
    );
    let stack = workspace_bin("reference-stack", "metaroce-stack", false)
        .expect("metaroce-stack could not be built");
    let net = Veth::new("s", "10.78.1");
    let dir = tempfile::tempdir().unwrap();
    let (srv_log, cli_log) = (
        dir.path().join("server.jsonl"),
        dir.path().join("client.jsonl"),
    );
    let saves = dir.path().join("saves");
    std::fs::create_dir(&saves).unwrap();

    let t = Tmux::start(
        "stack",
        &format!(
            "ip netns exec {} {BIN} -i {} --save-dir {}",
            net.ns[1],
            net.dev[1],
            saves.display()
        ),
    );
    t.wait("the UI", |s| s.contains(&format!("live {}", net.dev[1])));

    // 1 KiB payload MTU: every datagram fits the veth's 1500 bytes.
    let server = net
        .exec(0)
        .arg(&stack)
        .args([
            "server",
            "--once",
            "--json",
            "--bind",
            "10.78.1.1",
            "--mtu",
            "1024",
        ])
        .args(["--impair", "rx", "--loss", "2", "--seed", "7", "--events"])
        .arg(&srv_log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let client = net
        .exec(1)
        .arg(&stack)
        .args(["client", "--json", "--bind", "10.78.1.2", "--mtu", "1024"])
        .args([
            "--connect",
            "10.78.1.1:4794",
            "--paths",
            "4",
            "--op",
            "write",
        ])
        .args([
            "--size",
            "400000",
            "--messages",
            "20",
            "--timeout",
            "20",
            "--events",
        ])
        .arg(&cli_log)
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

    // The screen: the connection, 4 paths, retransmissions and loss.
    let s = t.wait("the connection", |s| s.contains("▶10.78.1.2#"));
    let row = s
        .lines()
        .find(|l| l.contains("▶10.78.1.2#"))
        .unwrap()
        .to_string();
    let cols: Vec<&str> = row.split_whitespace().collect();
    let paths_col = cols[cols.len() - 2];
    assert_eq!(paths_col, "4", "4 paths: {row}");
    assert!(s.contains("Paths (ev) of 10.78.1.2#"), "{s}");
    // One row per ev (the stack picks its own ev numbers).
    let ev_rows = s
        .lines()
        .filter(|l| {
            l.strip_prefix('│')
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count();
    assert_eq!(ev_rows, 4, "{s}");
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["w"]);
    let v = saved_json(&saves);
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(Duration::from_secs(3)), "0");

    // Nothing dropped by the capture: the counts must agree exactly.
    assert_eq!(v["stats"]["kernel_drops"], 0, "{}", v["stats"]);
    let d = direction(&v, "10.78.1.2", true);
    let tx = count(&cli_log, |e| e["event"] == "tx");
    let retx = count(&cli_log, |e| {
        e["event"] == "tx" && e["retransmission"] == true
    });
    let lost_by_stack = count(&cli_log, |e| e["event"] == "loss");
    let acks = count(&srv_log, |e| {
        e["event"] == "tx_control" && e["kind"] == "ACK"
    });
    let nacks = count(&srv_log, |e| {
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
         engine: loss {lost}, stalls {}",
        d["stalls"].as_array().unwrap().len()
    );
}

#[test]
fn fixture_injected_onto_veth() {
    assert!(
        can_netns(),
        "this test needs root, tmux and `ip netns`: run it as root with scripts/setup.sh done (CI does)"
    );
    let blast =
        workspace_bin("metaroce-tui", "blast", true).expect("the blast example could not be built");
    let net = Veth::new("f", "10.78.2");
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
    assert!(
        can_netns(),
        "this test needs root, tmux and `ip netns`: run it as root with scripts/setup.sh done (CI does)"
    );
    let blast =
        workspace_bin("metaroce-tui", "blast", true).expect("the blast example could not be built");
    let net = Veth::new("d", "10.78.3");
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
