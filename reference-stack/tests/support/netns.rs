//! Network-namespace helpers shared by the tests that run across a real
//! interface: `reference-stack/tests/netns.rs` and `tui/tests/netns.rs`
//! (which includes this file by path; it is test code only, no crate).
//!
//! - [`Veth`]: two namespaces of our own joined by a veth pair with a
//!   1500-byte MTU, IPv4 or IPv6 addresses, deleted on drop (also when an
//!   assertion fails).
//! - [`Capture`]: tcpdump on one end, with a large buffer and immediate
//!   delivery; stopping it reads tcpdump's own counters and fails loudly
//!   when the kernel dropped frames.
//! - [`workspace_bin`]: a binary of another package of the workspace.
//!
//! Missing root, `ip netns` or tcpdump make a test fail, never skip
//! (`scripts/setup.sh` installs the tools).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};
use std::time::Duration;

/// Runs a command and asserts it succeeded.
pub fn sh(args: &[&str]) -> Output {
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

/// Fails the test unless we are root and `ip netns` works.
pub fn require_netns() {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    assert!(root, "this test needs root (network namespaces)");
    let probe = Command::new("ip").args(["netns", "list"]).output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "`ip netns` is unavailable (scripts/setup.sh installs iproute2): {probe:?}"
    );
}

/// Two namespaces joined by a veth pair with a 1500-byte MTU; end `i`
/// (0 or 1) holds address `i + 1` of the network. Deleted on drop.
pub struct Veth {
    pub ns: [String; 2],
    pub dev: [String; 2],
    addr: [String; 2],
}

impl Veth {
    /// `tag` (at most 8 characters) names the namespaces and devices;
    /// `net` is an IPv4 /24 (`"10.213.10"`: addresses `.1`, `.2`) or an
    /// IPv6 /64 (`"fd00:213:10::"`: addresses `::1`, `::2`, without
    /// duplicate address detection so they work at once).
    pub fn new(tag: &str, net: &str) -> Veth {
        require_netns();
        let id = std::process::id() % 100_000;
        let ipv6 = net.contains(':');
        let v = Veth {
            ns: [format!("{tag}-a-{id}"), format!("{tag}-b-{id}")],
            dev: [format!("{tag}a{id}"), format!("{tag}b{id}")],
            addr: [1, 2].map(|k| {
                if ipv6 {
                    format!("{net}{k}")
                } else {
                    format!("{net}.{k}")
                }
            }),
        };
        for ns in &v.ns {
            sh(&["ip", "netns", "add", ns]);
        }
        sh(&[
            "ip", "link", "add", &v.dev[0], "mtu", "1500", "type", "veth", "peer", "name",
            &v.dev[1], "mtu", "1500",
        ]);
        for i in 0..2 {
            let (ns, dev) = (&v.ns[i], &v.dev[i]);
            sh(&["ip", "link", "set", dev, "netns", ns]);
            if ipv6 {
                let a = format!("{}/64", v.addr[i]);
                sh(&["ip", "-n", ns, "addr", "add", &a, "dev", dev, "nodad"]);
            } else {
                let a = format!("{}/24", v.addr[i]);
                sh(&["ip", "-n", ns, "addr", "add", &a, "dev", dev]);
            }
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        v
    }

    /// The address of end `i`.
    pub fn addr(&self, i: usize) -> &str {
        &self.addr[i]
    }

    /// The socket address of end `i` at `port` (`[addr]:port` for IPv6).
    pub fn sockaddr(&self, i: usize, port: u16) -> String {
        if self.addr[i].contains(':') {
            format!("[{}]:{port}", self.addr[i])
        } else {
            format!("{}:{port}", self.addr[i])
        }
    }

    /// A command that runs in the namespace of end `i`.
    pub fn exec(&self, i: usize) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns[i]]);
        c
    }

    /// Loads the nftables `script` in the namespace of end `i` (the tests'
    /// loss and counters); fails the test with nft's message.
    #[allow(dead_code)] // not every test file that includes this injects loss
    pub fn nft(&self, i: usize, script: &str) {
        use std::io::Write;
        let mut child = self
            .exec(i)
            .args(["nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nft (scripts/setup.sh installs nftables)");
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
}

impl Drop for Veth {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// tcpdump's own counters, printed when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CaptureCounts {
    /// Frames written to the file.
    pub captured: u64,
    /// Frames the capture socket received (taken or dropped).
    pub received: u64,
    /// Frames the kernel dropped because the capture buffer was full.
    pub dropped: u64,
}

/// tcpdump on `dev` in a namespace, writing a pcap file; stopped (and the
/// file flushed) by [`Capture::stop`].
pub struct Capture {
    child: Child,
    stderr: BufReader<ChildStderr>,
    file: PathBuf,
}

impl Capture {
    pub fn start(ns: &str, dev: &str, file: &Path) -> Capture {
        let mut child = Command::new("ip")
            .args([
                "netns", "exec", ns, "tcpdump", "-i", dev, "-n", "-U", "-Z", "root",
            ])
            // A 64 MiB buffer, and every frame handed over at once rather
            // than in blocks filled on a timer: a burst of fragments on a
            // loaded host must neither overrun the buffer nor sit in it
            // when tcpdump is stopped.
            .args(["-B", "65536", "--immediate-mode"])
            .arg("-w")
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump could not be started (scripts/setup.sh installs it)");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        // Ready once it says it listens.
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        assert!(line.contains("listening on"), "tcpdump: {line}");
        Capture {
            child,
            stderr,
            file: file.to_path_buf(),
        }
    }

    /// Stops once the file stopped growing (tcpdump stops reading at
    /// SIGINT, and on a loaded host it may still be behind the traffic),
    /// and returns tcpdump's counters. Panics when the kernel dropped
    /// frames: the capture would not hold the whole run.
    pub fn stop(mut self) -> CaptureCounts {
        let size = |p: &Path| p.metadata().map_or(0, |m| m.len());
        let mut last = size(&self.file);
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(200));
            let now = size(&self.file);
            if now == last {
                break;
            }
            last = now;
        }
        sh(&["kill", "-INT", &self.child.id().to_string()]);
        let status = self.child.wait().unwrap();
        let mut text = String::new();
        self.stderr.read_to_string(&mut text).unwrap();
        assert!(status.success(), "tcpdump: {status}: {text}");
        let counter = |what: &str| {
            text.lines()
                .find_map(|l| l.strip_suffix(what)?.trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no `{what}` in tcpdump's output: {text}"))
        };
        let counts = CaptureCounts {
            captured: counter("packets captured"),
            received: counter("packets received by filter"),
            dropped: counter("packets dropped by kernel"),
        };
        assert_eq!(
            counts.dropped, 0,
            "tcpdump: the kernel dropped frames, the capture is incomplete: {counts:?}"
        );
        counts
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary `name` of workspace package `package` (an example with
/// `example`), built next to `own_bin` (a `CARGO_BIN_EXE_*` of the calling
/// test) with the package's default features; a failed build fails the
/// test. Cargo does nothing when it is up to date.
pub fn workspace_bin(own_bin: &str, package: &str, name: &str, example: bool) -> PathBuf {
    let dir = Path::new(own_bin).parent().expect("a binary's folder");
    let (path, kind) = if example {
        (dir.join("examples").join(name), "--example")
    } else {
        (dir.join(name), "--bin")
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-q", "-p", package, kind, name])
        .status()
        .unwrap_or_else(|e| panic!("cargo build -p {package} {kind} {name}: {e}"));
    assert!(
        status.success() && path.exists(),
        "cargo build -p {package} {kind} {name} failed"
    );
    path
}
