//! The real binary in a detached tmux session: replay the receiver-side
//! multipath fixture, drive it with send-keys, read it with capture-pane.
//! Skipped (with a note) when tmux is not installed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_metaroce-top");

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/generated")
        .join(name)
}

fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A detached tmux session, killed on drop (also when a test fails).
pub struct Tmux {
    pub name: String,
    /// The program's exit status is written here when it ends.
    status: PathBuf,
}

impl Tmux {
    pub fn start(tag: &str, cmd: &str) -> Tmux {
        let name = format!("mrtop-{tag}-{}", std::process::id());
        let status = std::env::temp_dir().join(format!("{name}.status"));
        let _ = std::fs::remove_file(&status);
        let cmd = format!("{cmd}; echo $? > {}", status.display());
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                "160",
                "-y",
                "48",
                &cmd,
            ])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux new-session failed");
        let t = Tmux { name, status };
        t.tmux(&["set-option", "-t", &t.name, "remain-on-exit", "on"]);
        t
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.name])
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.name];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    pub fn var(&self, v: &str) -> String {
        self.tmux(&["display-message", "-p", "-t", &self.name, v])
            .trim()
            .to_string()
    }

    /// Waits until the screen satisfies `ok`; panics with the screen.
    pub fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            if start.elapsed() > Duration::from_secs(15) {
                panic!("timed out waiting for {what}; screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the program to exit; returns its exit status.
    pub fn wait_exit(&self, within: Duration) -> String {
        let start = Instant::now();
        loop {
            if let Ok(s) = std::fs::read_to_string(&self.status)
                && s.ends_with('\n')
            {
                return s.trim().to_string();
            }
            assert!(start.elapsed() < within, "still running after {within:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
        let _ = std::fs::remove_file(&self.status);
    }
}

fn saved_json(dir: &Path) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .collect();
        if let Some(f) = files.first()
            && let Ok(text) = std::fs::read_to_string(f.path())
            && let Ok(v) = serde_json::from_str(&text)
        {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no snapshot saved"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn replay_shows_connection_paths_and_loss() {
    if !have_tmux() {
        eprintln!("SKIPPED: tmux not installed");
        return;
    }
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
    assert_eq!(
        &cols[4..12],
        ["11", "4", "36.4%", "1", "2", "1", "2", "1"],
        "{row}"
    );
    // Its 4 paths, each a quarter of the traffic, the loss on ev 3.
    assert!(s.contains(&format!("Paths (ev) of {conn}")), "{s}");
    for ev in 0..4 {
        let line = s
            .lines()
            .find(|l| l.starts_with(&format!("│{ev}     ")))
            .unwrap_or_else(|| panic!("no row for ev {ev}:\n{s}"));
        assert!(line.contains("25%"), "{line}");
        if ev == 3 {
            assert!(line.contains("33.3%"), "ev 3 lost 1 of 3: {line}");
        }
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
    if !have_tmux() {
        eprintln!("SKIPPED: tmux not installed");
        return;
    }
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
    if !root || !setpriv {
        eprintln!("SKIPPED: needs root and setpriv");
        return;
    }
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            BIN,
        ])
        .args(["-i", "lo", "--headless", "--duration", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("Permission denied") && err.contains("os error") {
        eprintln!("SKIPPED: nobody cannot execute {BIN}: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no permission to capture on 'lo'"), "{err}");
    assert!(
        err.contains("setcap cap_net_raw,cap_net_admin=eip"),
        "{err}"
    );
}
