//! Helpers shared by the integration tests: a fixture replayed through
//! the real pipeline, and a detached tmux session driven by send-keys and
//! read by capture-pane.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use analyzer::Config;
use metaroce_tui::events::EventConfig;
use metaroce_tui::model::{CaptureStats, RunState, Snapshot, SourceInfo};
use metaroce_tui::pipeline::{Pipeline, decode_config};
use proto_parse::capture::Reader;
use proto_parse::frame::LinkType;

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

/// Frames of a RoCEv2 RC script (the analyzer's go-back-N test, framed):
/// requester A 10.9.0.1 sends to QP 0x20 on B 10.9.0.2, B answers to QP
/// 0x30; then one SEND of a second flow (A to QP 0x21).
///
/// ```text
/// t0-3   SEND ONLY psn 10, 11, 12 (CE), 13     t10 ACK 10
/// t11    NAK PSN sequence error 11             t12 CNP to QP 0x30 (BECN)
/// t13-15 psn 11, 12, 13 again (fast)           t20 ACK 13
/// t30    psn 14                                t31 RNR NAK 14 (retry after 30 us)
/// t45    psn 14 again (timeout)                t46 ACK 14
/// t50    SEND ONLY to QP 0x21 psn 500 (FECN)
/// ```
///
/// Expected: flow QP 0x20: DATA 9 (900 bytes), retx 4 (fast 3, timeout 1),
/// ACK 3, NAK 1 (PSN sequence error), RNR 1, CNP 1, CE 1, PSN 10..14 all
/// acked, 15 ECN-capable packets, BECN 1. Flow QP 0x21: DATA 1 (PSN
/// 500, FECN), never acked.
pub fn rocev2_script(base_ns: u64) -> Vec<(u64, Vec<u8>)> {
    use proto_parse::build::UdpFrameBuilder;
    use proto_parse::rocev2::{self, Opcode, aeth, bth};

    let a: std::net::SocketAddr = "10.9.0.1:50000".parse().unwrap();
    let b: std::net::SocketAddr = "10.9.0.2:50001".parse().unwrap();
    let (a4791, b4791) = (
        std::net::SocketAddr::new(a.ip(), 4791),
        std::net::SocketAddr::new(b.ip(), 4791),
    );
    // (t µs, from A, opcode, dest QP, psn, syndrome, CE, FECN, BECN)
    type Step = (u64, bool, Opcode, u32, u32, Option<u8>, bool, bool, bool);
    use Opcode::{Cnp, RcAcknowledge as Ack, RcSendOnly as Send};
    let script: [Step; 16] = [
        (0, true, Send, 0x20, 10, None, false, false, false),
        (1, true, Send, 0x20, 11, None, false, false, false),
        (2, true, Send, 0x20, 12, None, true, false, false),
        (3, true, Send, 0x20, 13, None, false, false, false),
        (10, false, Ack, 0x30, 10, Some(0x1f), false, false, false),
        (11, false, Ack, 0x30, 11, Some(0x60), false, false, false),
        (12, false, Cnp, 0x30, 0, None, false, false, true),
        (13, true, Send, 0x20, 11, None, false, false, false),
        (14, true, Send, 0x20, 12, None, false, false, false),
        (15, true, Send, 0x20, 13, None, false, false, false),
        (20, false, Ack, 0x30, 13, Some(0x1f), false, false, false),
        (30, true, Send, 0x20, 14, None, false, false, false),
        (31, false, Ack, 0x30, 14, Some(0x23), false, false, false),
        (45, true, Send, 0x20, 14, None, false, false, false),
        (46, false, Ack, 0x30, 14, Some(0x1f), false, false, false),
        (50, true, Send, 0x21, 500, None, false, true, false),
    ];
    script
        .iter()
        .map(|&(t, from_a, opcode, qp, psn, syndrome, ce, fecn, becn)| {
            let payload_len = if opcode == Send { 100 } else { 0 };
            let bth = bth::Repr {
                fecn,
                becn,
                ..bth::Repr::new(opcode, qp, psn).with_ack_req(from_a)
            };
            let bytes = rocev2::Repr {
                aeth: syndrome.map(|s| aeth::Repr {
                    syndrome: s,
                    msn: 0,
                }),
                ..rocev2::Repr::new(bth, payload_len)
            }
            .to_vec();
            let (src, dst) = if from_a { (a, b4791) } else { (b, a4791) };
            let ecn = if ce { 3 } else { 2 };
            let frame = UdpFrameBuilder::new(src, dst).with_ecn(ecn).build(&bytes);
            (base_ns + t * 1000, frame)
        })
        .collect()
}

/// Writes `frames` (timestamp ns, Ethernet frame) as a pcap file.
pub fn write_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut w = proto_parse::capture::PcapWriter::create(path).unwrap();
    for (ts, f) in frames {
        w.write_frame(*ts, f).unwrap();
    }
    w.flush().unwrap();
}

/// A capture that breaks lint rules, replayed with the lint on (as
/// `metaroce-top` runs): 10.0.0.1 sends a two-packet WRITE whose second
/// packet leaves from another ev's UDP source port (MR-PKT-002, error),
/// a one-packet WRITE without SOM (MR-PKT-003, error) and one that is not
/// ECN-capable (MR-PKT-012, warning); 10.0.0.2 acknowledges them all.
pub fn lint_capture(dir: &std::path::Path) -> PathBuf {
    use proto_parse::build::{ECN_ECT0, ECN_NOT_ECT, UdpFrameBuilder};
    use proto_parse::capture::PcapWriter;
    use proto_parse::metaroce::{
        AckRepr, Body, DataRepr, FeedbackRepr, Flags, Op, Repr, SackBitmap, udp_source_port,
    };
    static PAYLOAD: [u8; 64] = [0x5A; 64];
    let header = |from_a: bool, ev: u16, path_seq: u16, psn: u32, body| Repr {
        flags: Flags::empty(),
        tx_attempt: 0,
        ev,
        path_seq,
        dst_conn: if from_a { 0x200 } else { 0x100 },
        src_conn: if from_a { 0x100 } else { 0x200 },
        psn,
        tx_ts: 1000 + psn,
        body,
        tlvs: Vec::new(),
        payload: &[],
        crc: false,
    };
    let write = |ev, path_seq, psn, msg_id, msg_offset, msg_len, flags| {
        let mut r = header(
            true,
            ev,
            path_seq,
            psn,
            Body::Data(DataRepr {
                op: Op::Write {
                    remote_va: 0x1000 + u64::from(msg_offset),
                    rkey: 7,
                },
                payload_len: 64,
                msg_id,
                msg_offset,
                msg_len,
            }),
        );
        r.flags = flags;
        r.payload = &PAYLOAD;
        r
    };
    let ack = header(
        false,
        1,
        1,
        104,
        Body::Ack(AckRepr {
            feedback: FeedbackRepr {
                echo_ev: 1,
                echo_psn: 103,
                echo_tx_ts: 1103,
                rx_ts: 2000,
                credit: u32::MAX,
                ..FeedbackRepr::default()
            },
            sack_base: 104,
            sack: SackBitmap::default(),
        }),
    );
    // (packet, from 10.0.0.1, UDP source port, ECN)
    let script = [
        (
            write(1, 1, 100, 1, 0, 128, Flags::SOM),
            true,
            None,
            ECN_ECT0,
        ),
        (
            write(2, 1, 101, 1, 64, 128, Flags::EOM),
            true,
            Some(udp_source_port(5)),
            ECN_ECT0,
        ),
        (write(3, 1, 102, 2, 0, 64, Flags::EOM), true, None, ECN_ECT0),
        (
            write(1, 2, 103, 3, 0, 64, Flags::SOM | Flags::EOM),
            true,
            None,
            ECN_NOT_ECT,
        ),
        (ack, false, None, ECN_ECT0),
    ];
    let path = dir.join("lint.pcap");
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, (repr, from_a, port, ecn)) in script.into_iter().enumerate() {
        let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        let (src, dst) = if from_a { (a, b) } else { (b, a) };
        let sport = port.unwrap_or(udp_source_port(repr.ev));
        let frame = UdpFrameBuilder::new((src, sport).into(), (dst, 4794).into())
            .with_ecn(ecn)
            .build(&repr.to_vec());
        w.write_frame(1_700_000_000_000_000_000 + i as u64 * 10_000, &frame)
            .unwrap();
    }
    w.flush().unwrap();
    path
}

/// `n` MetaRoCE connections from 10.3.0.1 to 10.4.x.y (one peer each),
/// each a one-packet WRITE on ev 1 and its ACK, written as a pcap: a
/// snapshot whose per-connection metrics are large.
pub fn many_connections(path: &Path, n: u32) {
    use proto_parse::build::UdpFrameBuilder;
    use proto_parse::metaroce::{
        AckRepr, Body, DataRepr, FeedbackRepr, Flags, Op, Repr, SackBitmap, udp_source_port,
    };
    static PAYLOAD: [u8; 64] = [0x5A; 64];
    let mut frames = Vec::new();
    for i in 0..n {
        let a = std::net::Ipv4Addr::new(10, 3, 0, 1);
        let b = std::net::Ipv4Addr::new(10, 4, (i >> 8) as u8, i as u8);
        let repr = |from_a: bool, body| Repr {
            flags: if from_a {
                Flags::SOM | Flags::EOM | Flags::AR
            } else {
                Flags::empty()
            },
            tx_attempt: 0,
            ev: 1,
            path_seq: 1,
            dst_conn: if from_a { 0x200 + i } else { 0x100 + i },
            src_conn: if from_a { 0x100 + i } else { 0x200 + i },
            psn: if from_a { 0 } else { 1 },
            tx_ts: 1000,
            body,
            tlvs: Vec::new(),
            payload: if from_a { &PAYLOAD } else { &[] },
            crc: false,
        };
        let data = repr(
            true,
            Body::Data(DataRepr {
                op: Op::Write {
                    remote_va: 0x1000,
                    rkey: 7,
                },
                payload_len: 64,
                msg_id: 1,
                msg_offset: 0,
                msg_len: 64,
            }),
        );
        let ack = repr(
            false,
            Body::Ack(AckRepr {
                feedback: FeedbackRepr {
                    echo_ev: 1,
                    echo_psn: 0,
                    echo_tx_ts: 1000,
                    rx_ts: 2000,
                    credit: u32::MAX,
                    ..FeedbackRepr::default()
                },
                sack_base: 1,
                sack: SackBitmap::default(),
            }),
        );
        let t = 1_700_000_000_000_000_000 + u64::from(i) * 10_000;
        let port = udp_source_port(1);
        frames.push((
            t,
            UdpFrameBuilder::new((a, port).into(), (b, 4794).into()).build(&data.to_vec()),
        ));
        frames.push((
            t + 5_000,
            UdpFrameBuilder::new((b, port).into(), (a, 4794).into()).build(&ack.to_vec()),
        ));
    }
    write_pcap(path, &frames);
}

/// A capture replayed frame by frame through the real pipeline, then
/// ended; `run` returns the final snapshot.
pub struct Replay {
    path: PathBuf,
    config: Config,
    metrics: Option<(bool, usize)>,
    tick_every: Option<u64>,
    kernel_drops: u64,
}

impl Replay {
    /// A fixture of `fixtures/generated`.
    pub fn fixture(name: &str) -> Replay {
        Replay::path(&fixture(name))
    }

    pub fn path(path: &Path) -> Replay {
        Replay {
            path: path.to_path_buf(),
            config: Config::default(),
            metrics: None,
            tick_every: None,
            kernel_drops: 0,
        }
    }

    /// The engine's settings (the lint, thresholds).
    pub fn config(mut self, config: Config) -> Replay {
        self.config = config;
        self
    }

    /// Feeds the exporter's histograms (`Pipeline::with_metrics`).
    pub fn metrics(mut self, per_connection: bool, max_keys: usize) -> Replay {
        self.metrics = Some((per_connection, max_keys));
        self
    }

    /// A snapshot every `frames` frames, each frame 1 ms of wall clock
    /// (rates, events), as the capture thread ticks.
    pub fn tick_every(mut self, frames: u64) -> Replay {
        self.tick_every = Some(frames);
        self
    }

    /// libpcap's kernel drops in the final snapshot's statistics.
    pub fn kernel_drops(mut self, drops: u64) -> Replay {
        self.kernel_drops = drops;
        self
    }

    pub fn run(self) -> Snapshot {
        let source = SourceInfo::Replay {
            file: self
                .path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            speed: 1.0,
        };
        let mut p = Pipeline::new(
            source,
            decode_config(4794, 4791),
            self.config,
            EventConfig::default(),
        );
        if let Some((per_connection, max_keys)) = self.metrics {
            p = p.with_metrics(per_connection, max_keys);
        }
        let mut reader = Reader::open(&self.path).unwrap();
        let mut stats = CaptureStats::default();
        while let Some(rec) = reader.next_record() {
            let rec = rec.unwrap();
            stats.received += 1;
            p.on_frame(
                LinkType::from(u32::from(rec.linktype)),
                rec.ts_ns,
                rec.data,
                rec.orig_len,
            );
            if self.tick_every.is_some_and(|n| stats.received % n == 0) {
                p.snapshot(stats.received * 1_000_000, RunState::Running, stats);
            }
        }
        p.finish();
        stats.kernel_drops = self.kernel_drops;
        p.snapshot((stats.received + 1) * 1_000_000, RunState::Finished, stats)
    }
}

/// Replays a fixture, then ends the replay.
pub fn replay(name: &str) -> Snapshot {
    Replay::fixture(name).run()
}
