//! The real binary in a detached tmux session: replay the receiver-side
//! multipath fixture, drive it with send-keys, read it with capture-pane.
//! Skipped (with a note) when tmux is not installed.

use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::{BIN, Tmux, fixture, have_tmux, saved_json};

#[test]
fn replay_shows_connection_paths_and_loss() {
    assert!(
        have_tmux(),
        "this test tmux not installed: run it as root with scripts/setup.sh done (CI does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let cmd = format!(
        "{BIN} -r {} --save-dir {}",
        fixture("multipath_loss_receiver.pcap").display(),
        dir.path().display()
    );
    let t = Tmux::start("replay", &cmd);
    let s = t.wait("the end of the replay", |s| s.contains("replay done"));

    // The connection, with its retransmissions and loss columns.
    let conn = "10.0.0.1#256→10.0.0.2#512";
    let row = s
        .lines()
        .find(|l| l.contains(&format!("▶{conn}")))
        .unwrap_or_else(|| panic!("no selected connection row:\n{s}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    // Connection Goodput(2) Pkt/s DATA Retx Retx% Loss OOO CE NACK CNP ...
    // Loss 2: the path_seq gap on ev 2 (its first packet never reached the
    // receiver) and ev 3's trimmed-then-retransmitted PSN (spec 9).
    assert_eq!(
        &cols[4..12],
        ["11", "4", "36.4%", "2", "2", "1", "2", "1"],
        "{row}"
    );
    // Its 4 paths, each a quarter of the traffic, the loss on ev 2 and 3.
    assert!(s.contains(&format!("Paths (ev) of {conn}")), "{s}");
    for ev in 0..4 {
        let line = s
            .lines()
            .find(|l| l.starts_with(&format!("│{ev}     ")))
            .unwrap_or_else(|| panic!("no row for ev {ev}:\n{s}"));
        assert!(line.contains("25%"), "{line}");
        // ev 2: 1 path_seq gap against 3 received, rx loss 1 / (3 + 1);
        // ev 3: 1 of its 3 DATA transmissions trimmed and resent, tx loss.
        let cols: Vec<&str> = line.trim_matches('│').split_whitespace().collect();
        let (rx, tx) = match ev {
            2 => ("25.0%", "0.0%"),
            3 => ("0.0%", "33.3%"),
            _ => ("0.0%", "0.0%"),
        };
        assert_eq!((cols[5], cols[7]), (rx, tx), "ev {ev}: {line}");
    }
    assert!(
        s.contains("GAP 1") && s.contains("TRIMMED 1"),
        "NACKs in the event log:\n{s}"
    );
    assert!(s.contains("drops kernel 0 if 0"), "{s}");

    // Detail view.
    t.keys(&["Enter"]);
    let s = t.wait("the detail view", |s| s.contains(&format!("Detail {conn}")));
    assert!(s.contains("retransmissions 4 (fast"), "{s}");
    assert!(s.contains("NACK            2 (GAP 1, TRIMMED 1)"), "{s}");
    t.keys(&["Escape"]);
    t.wait("the main view", |s| s.contains("Connections (1 of 3)"));

    // Help overlay.
    t.keys(&["?"]);
    t.wait("the help overlay", |s| {
        s.contains("Help (Esc or ? to close)")
    });
    t.keys(&["Escape"]);
    t.wait("no help", |s| !s.contains("Help (Esc"));

    // Save a JSON snapshot: the engine's counts for the connection.
    t.keys(&["w"]);
    t.wait("the save message", |s| s.contains("saved "));
    let v = saved_json(dir.path());
    let d = v["report"]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["src_conn"] == 256 && d["dst_conn"] == 512)
        .expect("the A→B direction");
    assert_eq!(d["data_packets"], 11);
    assert_eq!(d["retransmissions"], 4);
    assert_eq!(d["nacks"], 2);
    assert_eq!(d["cnps"], 1);
    assert_eq!(d["ce_marked"], 1);
    assert_eq!(d["paths"].as_array().unwrap().len(), 4);
    assert_eq!(v["stats"]["kernel_drops"], 0);

    // Quit: at once, status 0, the terminal back from the alternate screen.
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(Duration::from_secs(2)), "0");
    assert_eq!(t.var("#{alternate_on}"), "0");
}

#[test]
fn ctrl_c_quits_and_restores_the_terminal() {
    assert!(
        have_tmux(),
        "this test tmux not installed: run it as root with scripts/setup.sh done (CI does)"
    );
    // A slow replay (still running when Ctrl-C comes).
    let cmd = format!(
        "{BIN} -r {} --speed 0.001",
        fixture("multipath_loss_sender.pcap").display()
    );
    let t = Tmux::start("ctrlc", &cmd);
    t.wait("the UI", |s| s.contains("Connections"));
    assert_eq!(t.var("#{alternate_on}"), "1");
    let sent = Instant::now();
    t.keys(&["C-c"]);
    assert_eq!(t.wait_exit(Duration::from_secs(2)), "0");
    assert!(
        sent.elapsed() < Duration::from_secs(1),
        "quit took {:?}",
        sent.elapsed()
    );
    assert_eq!(t.var("#{alternate_on}"), "0");
}

#[test]
fn panic_restores_the_terminal() {
    assert!(
        have_tmux(),
        "this test tmux not installed: run it as root with scripts/setup.sh done (CI does)"
    );
    // The panic message goes to a file in this test's own temporary folder.
    let dir = tempfile::tempdir().unwrap();
    let err_path = dir.path().join("panic.err");
    let cmd = format!(
        "METAROCE_TOP_PANIC_AFTER_DRAW=1 {BIN} -r {} 2>{}",
        fixture("multipath_loss_sender.pcap").display(),
        err_path.display()
    );
    let t = Tmux::start("panic", &cmd);
    assert_eq!(t.wait_exit(Duration::from_secs(5)), "101");
    assert_eq!(
        t.var("#{alternate_on}"),
        "0",
        "still on the alternate screen"
    );
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(
        err.contains("METAROCE_TOP_PANIC_AFTER_DRAW is set"),
        "{err}"
    );
}

#[test]
fn missing_interface_is_a_clear_error() {
    let out = Command::new(BIN)
        .args(["-i", "nosuchif0", "--headless", "--duration", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("interface 'nosuchif0' does not exist (available: "),
        "{err}"
    );
}

#[test]
fn missing_permission_is_a_clear_error() {
    // Run as nobody (needs root and setpriv to drop privileges).
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    let setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    assert!(
        root && setpriv,
        "this test needs root and setpriv: run it as root with scripts/setup.sh done (CI does)"
    );
    // A copy nobody can execute, whatever the permissions of the checkout.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("metaroce-top");
    std::fs::copy(BIN, &bin).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&bin)
        .args(["-i", "lo", "--headless", "--duration", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no permission to capture on 'lo'"), "{err}");
    assert!(
        err.contains("setcap cap_net_raw,cap_net_admin=eip"),
        "{err}"
    );
}

/// The sender fixture, then one more frame an hour later: a replay at
/// speed 1 has analysed the fixture within milliseconds and then waits.
fn fixture_then_wait(dir: &std::path::Path) -> std::path::PathBuf {
    let mut frames = Vec::new();
    let mut reader =
        proto_parse::capture::Reader::open(fixture("multipath_loss_sender.pcap")).unwrap();
    let mut last = 0;
    while let Some(rec) = reader.next_record() {
        let rec = rec.unwrap();
        last = rec.ts_ns;
        frames.push((rec.ts_ns, rec.data.to_vec()));
    }
    let late = frames[0].1.clone();
    frames.push((last + 3_600_000_000_000, late));
    let path = dir.join("slow.pcap");
    common::write_pcap(&path, &frames);
    path
}

/// SIGINT and SIGTERM end a headless run cleanly: status 0 at once, and the
/// JSON snapshot holds what was analysed before the signal.
#[test]
fn headless_signal_writes_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = fixture_then_wait(dir.path());
    let frames = {
        let mut r = proto_parse::capture::Reader::open(&pcap).unwrap();
        let mut n = 0u64;
        while r.next_record().is_some() {
            n += 1;
        }
        n - 1
    };
    let runs: Vec<(&str, std::path::PathBuf, std::process::Child)> = ["INT", "TERM"]
        .into_iter()
        .map(|sig| {
            let out = dir.path().join(format!("{sig}.json"));
            let child = Command::new(BIN)
                .arg("-r")
                .arg(&pcap)
                .args(["--headless", "--json-out"])
                .arg(&out)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (sig, out, child)
        })
        .collect();
    // Time to start and analyse the fixture (it then waits an hour).
    std::thread::sleep(Duration::from_secs(2));
    for (sig, out, mut child) in runs {
        assert!(
            child.try_wait().unwrap().is_none(),
            "{sig}: ended before the signal"
        );
        assert!(!out.exists(), "{sig}: JSON written before the signal");
        let sent = Instant::now();
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(0), "{sig}: {status:?} {err}");
        assert!(
            sent.elapsed() < Duration::from_secs(1),
            "{sig}: took {:?}",
            sent.elapsed()
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).expect("JSON written")).unwrap();
        assert_eq!(v["state"]["state"], "running", "{sig}");
        assert_eq!(v["stats"]["frames"], frames, "{sig}");
        assert_eq!(
            v["stats"]["received"],
            frames + 1,
            "{sig}: the late record read"
        );
        let d = v["report"]["directions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["src_conn"] == 256 && d["dst_conn"] == 512)
            .expect("the A→B direction");
        // The sender-side fixture's hand-written counts
        // (fixtures/generated/multipath_loss.expected.json).
        assert_eq!(v["stats"]["frames"], 32, "{sig}");
        assert_eq!(d["data_packets"], 13, "{sig}");
        assert_eq!(d["messages_completed"], 2, "{sig}");
        assert_eq!(d["retransmissions"], 4, "{sig}");
        assert_eq!(d["nacks"], 2, "{sig}");
        assert_eq!(d["cnps"], 1, "{sig}");
        assert!(v["process"]["wall_s"].as_f64().unwrap() > 1.0, "{sig}");
    }
}

/// The pid of the program tmux runs (the child of the pane's shell).
fn program_pid(t: &Tmux) -> String {
    let shell = t.var("#{pane_pid}");
    let start = Instant::now();
    loop {
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .unwrap_or_default();
        if let Some(pid) = children.split_whitespace().next() {
            return pid.to_string();
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no child of {shell}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_quits_the_ui_and_restores_the_terminal() {
    assert!(
        have_tmux(),
        "this test tmux not installed: run it as root with scripts/setup.sh done (CI does)"
    );
    let cmd = format!(
        "{BIN} -r {} --speed 0.001 --fps 1",
        fixture("multipath_loss_sender.pcap").display()
    );
    let t = Tmux::start("sigterm", &cmd);
    t.wait("the UI", |s| s.contains("Connections"));
    assert_eq!(t.var("#{alternate_on}"), "1");
    let pid = program_pid(&t);
    let sent = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(t.wait_exit(Duration::from_secs(2)), "0");
    // Even at 1 frame per second the signal ends the wait for keys.
    assert!(
        sent.elapsed() < Duration::from_millis(500),
        "quit took {:?}",
        sent.elapsed()
    );
    assert_eq!(t.var("#{alternate_on}"), "0");
}

/// A RoCEv2-only replay in the real binary: the first flow is selected,
/// `j` moves to the second, Enter opens the RoCEv2 detail.
#[test]
fn rocev2_flow_detail_in_the_binary() {
    assert!(
        have_tmux(),
        "this test tmux not installed: run it as root with scripts/setup.sh done (CI does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("rocev2.pcap");
    common::write_pcap(&pcap, &common::rocev2_script(1_764_000_000_000_000_000));
    let t = Tmux::start("rocev2", &format!("{BIN} -r {}", pcap.display()));
    let s = t.wait("the end of the replay", |s| s.contains("replay done"));
    assert!(s.contains("RoCEv2 flows (2 of 2)"), "{s}");
    assert!(s.contains("▶10.9.0.1→10.9.0.2 QP 0x000020"), "{s}");
    t.keys(&["j"]);
    t.wait("the second flow selected", |s| {
        s.contains("▶10.9.0.1→10.9.0.2 QP 0x000021")
    });
    t.keys(&["k", "Enter"]);
    let s = t.wait("the RoCEv2 detail", |s| {
        s.contains("Detail RoCEv2 10.9.0.1→10.9.0.2 QP 0x000020")
    });
    for want in [
        "retransmissions 4 (fast 3, timeout 1, spurious 0)",
        "PSN first, high 10, 14",
        "NAK             1 (PSN sequence error 1)",
        "RNR NAK         1",
        "CE marked       1 of 15 ECN-capable pkts",
    ] {
        assert!(s.contains(want), "{want}:\n{s}");
    }
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(Duration::from_secs(2)), "0");
}
