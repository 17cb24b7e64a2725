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
        let lossy = ev >= 2;
        assert_eq!(line.contains("33.3%"), lossy, "ev {ev}: {line}");
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
    let cmd = format!(
        "METAROCE_TOP_PANIC_AFTER_DRAW=1 {BIN} -r {} 2>/tmp/mrtop-panic-{}.err",
        fixture("multipath_loss_sender.pcap").display(),
        std::process::id()
    );
    let t = Tmux::start("panic", &cmd);
    assert_eq!(t.wait_exit(Duration::from_secs(5)), "101");
    assert_eq!(
        t.var("#{alternate_on}"),
        "0",
        "still on the alternate screen"
    );
    let err_path = format!("/tmp/mrtop-panic-{}.err", std::process::id());
    let err = std::fs::read_to_string(&err_path).unwrap();
    let _ = std::fs::remove_file(&err_path);
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
