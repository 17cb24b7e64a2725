//! The real binary on a pseudo-terminal that goes away under it (a tmux
//! pane or an SSH session closed): it must end at once, restoring nothing,
//! and not go on reading a dead terminal.

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

mod common;

use common::{BIN, fixture};

/// How long the program may take to notice that its terminal is gone.
const BOUND: Duration = Duration::from_secs(2);

/// The leave-alternate-screen sequence that restoring the terminal writes.
const LEAVE_ALTERNATE_SCREEN: &[u8] = b"\x1b[?1049l";

/// The program on the slave side of a new pseudo-terminal, in a session of
/// its own (`setsid`; with `ctty`, the pty is its controlling terminal, so
/// the kernel sends it SIGHUP when the pty hangs up). The test holds the
/// master side only.
struct OnPty {
    /// The master side; None once closed.
    master: Option<File>,
    child: Child,
    /// Everything the program wrote so far.
    output: Vec<u8>,
}

impl OnPty {
    fn start(ctty: bool) -> OnPty {
        let master =
            openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let size = Winsize {
            ws_row: 48,
            ws_col: 160,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        tcsetwinsize(&master, size).expect("set the window size");
        let slave_path = ptsname(&master, Vec::new()).expect("ptsname");
        let slave: OwnedFd = File::options()
            .read(true)
            .write(true)
            .open(slave_path.to_str().unwrap())
            .expect("open the slave side")
            .into();
        let mut cmd = Command::new("setsid");
        if ctty {
            cmd.arg("--ctty");
        }
        // A slow replay: still running when the terminal goes.
        cmd.arg(BIN)
            .arg("-r")
            .arg(fixture("multipath_loss_sender.pcap"))
            .args(["--speed", "0.001"])
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        let child = cmd.spawn().expect("run setsid (util-linux)");
        // `cmd` held the last copies of the slave side in this process.
        drop(cmd);
        OnPty {
            master: Some(File::from(master)),
            child,
            output: Vec::new(),
        }
    }

    /// Reads what the program writes until `what` appears in it.
    fn wait_for(&mut self, what: &str) {
        let start = Instant::now();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&self.output).contains(what) {
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "no {what:?} on the terminal; it shows:\n{}",
                String::from_utf8_lossy(&self.output)
            );
            let master = self.master.as_mut().expect("the terminal is open");
            let mut fds = [PollFd::new(&*master, PollFlags::IN)];
            let timeout = Timespec {
                tv_sec: 0,
                tv_nsec: 100_000_000,
            };
            if poll(&mut fds, Some(&timeout)).unwrap_or(0) == 0 {
                continue;
            }
            match master.read(&mut buf) {
                Ok(n) => self.output.extend_from_slice(&buf[..n]),
                Err(e) => panic!("reading the terminal: {e}"),
            }
        }
    }

    /// Closes the master side: the kernel hangs the slave side up.
    fn close_terminal(&mut self) {
        self.master = None;
    }

    /// The program's exit status, which must come within `BOUND`.
    fn wait_exit(&mut self, what: &str) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > BOUND {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("still running {BOUND:?} after {what}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for OnPty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pty closed under a program that gets no SIGHUP (it is not the
/// terminal's session): its input and output fail, and it ends at once.
#[test]
fn closed_terminal_without_sighup_ends_the_program() {
    let mut t = OnPty::start(false);
    t.wait_for("Connections");
    t.close_terminal();
    let status = t.wait_exit("the terminal closed");
    assert_eq!(status.code(), Some(1), "{status:?}");
}

/// The pty closed under the program whose controlling terminal it is: the
/// kernel sends SIGHUP and the terminal fails; whichever it sees first, it
/// ends at once.
#[test]
fn hangup_of_the_controlling_terminal_ends_the_program() {
    let mut t = OnPty::start(true);
    t.wait_for("Connections");
    t.close_terminal();
    let status = t.wait_exit("the terminal hung up");
    // 129 when SIGHUP came first, 1 when the failed terminal did.
    assert!(
        matches!(status.code(), Some(129 | 1)),
        "ended by {status:?}"
    );
}

/// SIGHUP alone ends the UI at once (status 129), writing nothing more to
/// the terminal: no restore, which on a dead terminal could only fail.
#[test]
fn sighup_ends_the_ui_without_restoring_the_terminal() {
    let mut t = OnPty::start(false);
    t.wait_for("Connections");
    let shown = t.output.len();
    let ok = Command::new("kill")
        .args(["-HUP", &t.child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -HUP");
    let status = t.wait_exit("SIGHUP");
    assert_eq!(status.code(), Some(129), "{status:?}");
    // What it wrote after the signal (the slave side is closed now: the
    // master reads what is left, then fails with EIO).
    let mut rest = Vec::new();
    let mut buf = [0u8; 4096];
    let master = t.master.as_mut().unwrap();
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        rest.extend_from_slice(&buf[..n]);
    }
    let after = [&t.output[shown..], &rest[..]].concat();
    assert!(
        !after
            .windows(LEAVE_ALTERNATE_SCREEN.len())
            .any(|w| w == LEAVE_ALTERNATE_SCREEN),
        "the terminal was restored after SIGHUP"
    );
}
