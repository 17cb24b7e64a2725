//! Shared by the integration tests: locating the cdylib cargo built, running
//! tshark with it (as an unprivileged user when the tests run as root:
//! tshark run by root loads no personal plugins), and building fixture
//! captures with `proto_parse`'s emitters and pcap writer.
//!
//! The tshark is the host's, or, when `METAROCE_WIRESHARK_ROOT` names a
//! root file system made by `scripts/wireshark-root.sh` (the variable the
//! plugin was then also built with), that root's, run with `chroot`: the
//! test's folder is made inside the root and paths are given to tshark as
//! the root sees them.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use proto_parse::build::UdpFrameBuilder;
use proto_parse::capture::PcapWriter;
use proto_parse::metaroce::{
    AckRepr, Body, CcAlgo, CnpReason, CnpRepr, CtrlOp, CtrlRepr, DataRepr, FbFlags, Features,
    FeedbackRepr, Flags, HopTelemetry, NackCode, NackRepr, Op, PathState, PathStatusEntry, Repr,
    SackBitmap, TlvRepr, udp_source_port,
};

pub mod roce;

pub const PORT: u16 = 4794;
const LIB: &str = "libmetaroce_dissector.so";

/// The cdylib cargo built for this test run (same profile, same target
/// dir). If it is missing, `cargo build -p metaroce-dissector` is run once;
/// if it is still missing the test fails with a message saying so.
pub fn plugin_so() -> &'static Path {
    static SO: OnceLock<PathBuf> = OnceLock::new();
    SO.get_or_init(|| {
        // target/<profile>/deps/<test binary>
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary lives in target/<profile>/deps")
            .to_path_buf();
        let so = profile_dir.join(LIB);
        // `cargo test` builds the library as an rlib for the tests and may
        // leave the cdylib stale: build it (a no-op when up to date).
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "-p", "metaroce-dissector", "--lib"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if release {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("running cargo build");
        assert!(
            status.success(),
            "`cargo build -p metaroce-dissector` failed: the tests need the plugin cdylib"
        );
        assert!(
            so.exists(),
            "the plugin {} is missing: build it with `cargo build -p metaroce-dissector`",
            so.display()
        );
        so
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The root file system whose tshark the tests run (`None`: the host's).
pub fn wireshark_root() -> Option<&'static Path> {
    static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let root = PathBuf::from(std::env::var_os("METAROCE_WIRESHARK_ROOT")?);
        assert!(
            root.join("usr/bin/tshark").exists(),
            "METAROCE_WIRESHARK_ROOT={} holds no tshark: make it with scripts/wireshark-root.sh",
            root.display()
        );
        Some(root)
    })
    .as_deref()
}

/// A command run by the tshark's system: on the host, or in the root.
fn system_command(program: &str) -> Command {
    match wireshark_root() {
        Some(root) => {
            let mut c = Command::new("chroot");
            c.arg(root).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// `path` as tshark sees it (inside the root when there is one).
fn seen_by_tshark(path: &Path) -> String {
    let inner = wireshark_root()
        .and_then(|root| path.strip_prefix(root).ok())
        .map(|p| Path::new("/").join(p));
    inner.as_deref().unwrap_or(path).display().to_string()
}

/// `major.minor` of the tshark the tests run (the plugin folder name).
pub fn tshark_version() -> String {
    let out = system_command("tshark")
        .arg("--version")
        .output()
        .expect("tshark is installed (apt-get install tshark, or scripts/wireshark-root.sh)");
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    // "TShark (Wireshark) 4.0.17 (Git v4.0.17 ...)"
    let version = first
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .expect("a version in `tshark --version`");
    let mut parts = version.split('.');
    format!(
        "{}.{}",
        parts.next().unwrap_or("0"),
        parts.next().unwrap_or("0")
    )
}

/// The `metaroce-analyze` binary of this test run's profile, built without
/// its optional Parquet/plot features (`decode` needs neither).
pub fn cli() -> &'static Path {
    static CLI: OnceLock<PathBuf> = OnceLock::new();
    CLI.get_or_init(|| {
        let profile_dir = plugin_so().parent().unwrap().to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "metaroce-analyze",
            "--bin",
            "metaroce-analyze",
        ])
        .arg("--no-default-features")
        .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        assert!(
            cmd.status().expect("running cargo build").success(),
            "`cargo build -p metaroce-analyze` failed"
        );
        profile_dir.join("metaroce-analyze")
    })
}

/// A private plugin folder (`<dir>/<major.minor>/epan/`) holding a copy of
/// the plugin, an empty HOME, and the files the test writes, all readable
/// by the unprivileged user tshark runs as.
pub struct Tshark {
    pub dir: tempfile::TempDir,
    plugin_dir: PathBuf,
    home: PathBuf,
}

impl Tshark {
    pub fn new() -> Self {
        let dir = match wireshark_root() {
            Some(root) => tempfile::tempdir_in(root.join("tmp")),
            None => tempfile::tempdir(),
        }
        .expect("tempdir");
        let plugin_dir = dir.path().join("plugins");
        let epan = plugin_dir.join(tshark_version()).join("epan");
        std::fs::create_dir_all(&epan).expect("plugin dir");
        std::fs::copy(plugin_so(), epan.join(LIB)).expect("copy plugin");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        for p in [
            dir.path(),
            &plugin_dir,
            epan.parent().unwrap(),
            &epan,
            &home,
        ] {
            let mode = if p == home { 0o777 } else { 0o755 };
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::set_permissions(epan.join(LIB), std::fs::Permissions::from_mode(0o755)).unwrap();
        Tshark {
            dir,
            plugin_dir,
            home,
        }
    }

    /// The HOME tshark runs with (its `.config/wireshark` is the personal
    /// configuration folder).
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// A path inside the test's folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Makes a file the test wrote readable by the tshark user.
    pub fn share(&self, path: &Path) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    /// Runs tshark with the plugin, `WIRESHARK_ABORT_ON_DISSECTOR_BUG=1`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_env(&["WIRESHARK_ABORT_ON_DISSECTOR_BUG=1"], args)
    }

    /// Runs tshark with the plugin and these `NAME=value` variables.
    pub fn run_env(&self, vars: &[&str], args: &[&str]) -> Output {
        if let Some(root) = wireshark_root() {
            let root_text = root.display().to_string();
            let mut cmd = Command::new("chroot");
            cmd.arg("--userspec=65534:65534")
                .arg(root)
                .arg("env")
                .arg("-C")
                .arg(seen_by_tshark(self.dir.path()))
                .arg(format!("HOME={}", seen_by_tshark(&self.home)))
                .arg(format!(
                    "WIRESHARK_PLUGIN_DIR={}",
                    seen_by_tshark(&self.plugin_dir)
                ))
                .args(vars)
                .arg("tshark");
            for arg in args {
                // Paths in the root (the test's files) as the root sees them.
                match arg.strip_prefix(root_text.as_str()) {
                    Some(inner) if inner.starts_with('/') => cmd.arg(inner),
                    _ => cmd.arg(arg),
                };
            }
            return cmd.output().expect("running tshark in the root (chroot)");
        }
        let mut cmd = if is_root() {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "env"]);
            c
        } else {
            Command::new("env")
        };
        cmd.arg(format!("HOME={}", self.home.display()))
            .arg(format!(
                "WIRESHARK_PLUGIN_DIR={}",
                self.plugin_dir.display()
            ))
            .args(vars)
            .arg("tshark")
            .args(args)
            .current_dir(self.dir.path());
        cmd.output().expect("running tshark")
    }

    /// Runs tshark and fails the test unless it exits 0 without reporting a
    /// dissector bug; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "tshark {args:?} failed ({:?}):\n{stderr}\n{}",
            out.status,
            stdout.chars().take(4000).collect::<String>()
        );
        for text in [&stdout, &stderr] {
            assert!(
                !text.contains("[Dissector bug") && !text.contains("panicked"),
                "tshark {args:?} reported a dissector bug:\n{stderr}\n{stdout}"
            );
        }
        stdout
    }

    /// `-T fields` rows (tab-separated columns) of `pcap`, filtered by `filter`.
    pub fn fields(&self, pcap: &Path, fields: &[&str], filter: Option<&str>) -> Vec<Vec<String>> {
        self.fields_with(pcap, fields, filter, &[])
    }

    pub fn fields_with(
        &self,
        pcap: &Path,
        fields: &[&str],
        filter: Option<&str>,
        extra: &[&str],
    ) -> Vec<Vec<String>> {
        let pcap = pcap.to_str().unwrap();
        let mut args = vec!["-n", "-r", pcap, "-T", "fields", "-E", "separator=/t"];
        for f in fields {
            args.push("-e");
            args.push(f);
        }
        if let Some(filter) = filter {
            args.push("-Y");
            args.push(filter);
        }
        args.extend_from_slice(extra);
        let out = self.ok(&args);
        out.lines()
            .map(|l| l.split('\t').map(boolean_as_number).collect())
            .collect()
    }
}

/// A `-T fields` cell with booleans as 4.0 prints them: "1"/"0" (4.4 and
/// later print "True"/"False"), so one expectation holds for every line.
fn boolean_as_number(cell: &str) -> String {
    if !cell.contains("True") && !cell.contains("False") {
        return cell.to_owned();
    }
    cell.split(',')
        .map(|v| match v {
            "True" => "1",
            "False" => "0",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A frame carrying `payload` (a UDP payload) from `src` to `dst`.
pub fn frame(payload: &[u8], src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    UdpFrameBuilder::new(src, dst).build(payload)
}

/// A MetaRoCE frame: the UDP source port carries the entropy value.
pub fn metaroce_frame(repr: &Repr<'_>, forward: bool) -> Vec<u8> {
    udp_frame(&repr.to_vec(), udp_source_port(repr.ev), PORT, forward)
}

/// A frame of `payload` between 10.0.0.1 and 10.0.0.2 (`forward`: from .1).
pub fn udp_frame(payload: &[u8], sport: u16, dport: u16, forward: bool) -> Vec<u8> {
    let (a, b) = if forward {
        ([10, 0, 0, 1], [10, 0, 0, 2])
    } else {
        ([10, 0, 0, 2], [10, 0, 0, 1])
    };
    frame(
        payload,
        SocketAddr::from((a, sport)),
        SocketAddr::from((b, dport)),
    )
}

/// Writes frames (1 us apart) to a pcap readable by tshark's user.
pub fn write_pcap(t: &Tshark, name: &str, frames: &[Vec<u8>]) -> PathBuf {
    write_pcap_timed(t, name, frames, |i| i as u64 * 1000)
}

/// [`write_pcap`] with frame `i` captured `offset_ns(i)` after the first.
pub fn write_pcap_timed(
    t: &Tshark,
    name: &str,
    frames: &[Vec<u8>],
    offset_ns: impl Fn(usize) -> u64,
) -> PathBuf {
    let path = t.path(name);
    let mut w = PcapWriter::create(&path).expect("create pcap");
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(1_700_000_000_000_000_000 + offset_ns(i), f)
            .expect("write frame");
    }
    w.flush().expect("flush");
    drop(w);
    t.share(&path);
    path
}

pub fn base(body: Body, psn: u32, ev: u16) -> Repr<'static> {
    Repr {
        flags: Flags::empty(),
        tx_attempt: 0,
        ev,
        path_seq: 1,
        dst_conn: 0x22,
        src_conn: 0x11,
        psn,
        tx_ts: 5000,
        body,
        tlvs: Vec::new(),
        payload: &[],
        crc: false,
    }
}

pub fn data(op: Op, payload_len: u16, msg_id: u32, msg_offset: u32, msg_len: u32) -> Body {
    Body::Data(DataRepr {
        op,
        payload_len,
        msg_id,
        msg_offset,
        msg_len,
    })
}

pub fn feedback(echo_psn: u32, echo_ev: u16) -> FeedbackRepr {
    FeedbackRepr {
        flags: FbFlags::empty(),
        echo_ev,
        echo_psn,
        echo_tx_ts: 5000,
        rx_ts: 7000,
        ce_count: 2,
        rx_buf_level: 17,
        fwd_hops: 3,
        credit: u32::MAX,
    }
}

pub static PAYLOAD: [u8; 64] = {
    let mut p = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        p[i] = i as u8;
        i += 1;
    }
    p
};

/// The fixture: one packet of every kind, in this order (frame numbers
/// are 1-based):
///  1 CTRL CONNECT          2 DATA WRITE (SOM, CRC)     3 DATA WRITE trimmed
///  4 ACK with SACK + TLV   5 NACK GAP                  6 CNP ECN
///  7 PROBE                 8 PROBE_REPLY               9 DATA SEND_IMM bad CRC
/// 10 version 2 (malformed) 11 DATA retransmission+TLVs 12 DATA READ_REQ ev 3
pub fn fixture_frames() -> Vec<Vec<u8>> {
    let mut frames = Vec::new();

    let mut connect = base(
        Body::Ctrl(CtrlRepr {
            op: CtrlOp::Connect,
            cc_algo: CcAlgo::Hybrid,
            mtu: 4096,
            init_psn: 1000,
            features: Features::CRC | Features::PATH_SEQ,
            ts_unit_ps: 1000,
        }),
        0,
        0,
    );
    connect.dst_conn = 0;
    connect.path_seq = 0;
    frames.push(metaroce_frame(&connect, true));

    let mut write = base(
        data(
            Op::Write {
                remote_va: 0xdead_beef_0000,
                rkey: 0x1234,
            },
            64,
            7,
            0,
            128,
        ),
        1000,
        3,
    );
    write.flags = Flags::SOM;
    write.payload = &PAYLOAD;
    write.crc = true;
    frames.push(metaroce_frame(&write, true));

    let mut trimmed = base(
        data(
            Op::Write {
                remote_va: 0xdead_beef_0040,
                rkey: 0x1234,
            },
            64,
            7,
            64,
            128,
        ),
        1001,
        5,
    );
    trimmed.flags = Flags::EOM | Flags::AR;
    trimmed.payload = &PAYLOAD[..20];
    trimmed.crc = true;
    trimmed.path_seq = 1;
    frames.push(metaroce_frame(&trimmed, true));

    let mut fb = feedback(1000, 3);
    fb.flags = FbFlags::ECE;
    let mut ack = base(
        Body::Ack(AckRepr {
            feedback: fb,
            sack_base: 1001,
            sack: SackBitmap::from_psns(1001, [1002, 1003, 1004, 1006]),
        }),
        1001,
        3,
    );
    ack.dst_conn = 0x11;
    ack.src_conn = 0x22;
    ack.tlvs = vec![TlvRepr::HopTelemetry(vec![
        HopTelemetry {
            switch_id: 0xAA01,
            queue_depth: 12,
            hop_latency: 900,
        },
        HopTelemetry {
            switch_id: 0xAA02,
            queue_depth: 0,
            hop_latency: 450,
        },
    ])];
    frames.push(metaroce_frame(&ack, false));

    let mut nack = base(
        Body::Nack(NackRepr {
            feedback: feedback(1002, 5),
            code: NackCode::Gap,
            rnr_timer: 0,
            nack_psn: 1001,
        }),
        1001,
        5,
    );
    nack.dst_conn = 0x11;
    nack.src_conn = 0x22;
    frames.push(metaroce_frame(&nack, false));

    let mut cnp = base(
        Body::Cnp(CnpRepr {
            feedback: feedback(1000, 3),
            reason: CnpReason::Ecn,
        }),
        1001,
        3,
    );
    cnp.dst_conn = 0x11;
    cnp.src_conn = 0x22;
    frames.push(metaroce_frame(&cnp, false));

    frames.push(metaroce_frame(&base(Body::Probe, 5, 9), true));

    let mut reply = base(Body::ProbeReply(feedback(5, 9)), 1001, 9);
    reply.dst_conn = 0x11;
    reply.src_conn = 0x22;
    frames.push(metaroce_frame(&reply, false));

    let mut bad = base(
        data(Op::SendImm { imm_data: 0xCAFE }, 16, 8, 0, 16),
        1002,
        4,
    );
    bad.flags = Flags::SOM | Flags::EOM;
    bad.payload = &PAYLOAD[..16];
    bad.crc = true;
    let mut bytes = bad.to_vec();
    let n = bytes.len();
    bytes[n - 5] ^= 0xFF; // last payload byte: the CRC no longer matches
    frames.push(udp_frame(&bytes, udp_source_port(4), PORT, true));

    let mut v2 = base(data(Op::Send, 0, 9, 0, 0), 1003, 4).to_vec();
    v2[0] = 0x20; // version 2, type DATA
    frames.push(udp_frame(&v2, udp_source_port(4), PORT, true));

    let mut retx = base(
        data(
            Op::Write {
                remote_va: 0xdead_beef_0040,
                rkey: 0x1234,
            },
            64,
            7,
            64,
            128,
        ),
        1001,
        6,
    );
    retx.flags = Flags::EOM;
    retx.tx_attempt = 2;
    retx.payload = &PAYLOAD;
    retx.tlvs = vec![
        TlvRepr::Ts64(1_700_000_000_123_456_789),
        TlvRepr::PathStatus(vec![
            PathStatusEntry {
                ev: 5,
                state: PathState::Retired,
            },
            PathStatusEntry {
                ev: 6,
                state: PathState::Active,
            },
        ]),
    ];
    frames.push(metaroce_frame(&retx, true));

    let mut read = base(
        data(
            Op::ReadReq {
                remote_va: 0x1000,
                rkey: 0x99,
            },
            0,
            10,
            0,
            1 << 20,
        ),
        1004,
        3,
    );
    read.flags = Flags::SOM | Flags::EOM;
    frames.push(metaroce_frame(&read, true));

    frames
}

/// A small deterministic generator (xorshift64*), for reproducible noise.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
