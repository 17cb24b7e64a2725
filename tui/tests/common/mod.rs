//! Helpers shared by the integration tests: a detached tmux session
//! driven by send-keys and read by capture-pane.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_metaroce-top");

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/generated")
        .join(name)
}

pub fn have_tmux() -> bool {
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

pub fn saved_json(dir: &Path) -> serde_json::Value {
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
