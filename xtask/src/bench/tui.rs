//! `bench tui`: metaroce-top's capture + engine path (not a timed test).
//! Two network namespaces joined by a veth pair; in one, the tui crate's
//! `blast` example injects MetaRoCE frames (one connection per sender
//! thread, 8 paths, an ACK every 8 DATA, 0.1 % loss repaired) at stepped
//! rates; in the other, `metaroce-top -i VETH --headless` runs the TUI's
//! capture thread and engine without drawing and writes its JSON snapshot:
//! libpcap's received / kernel-drop / interface-drop counters, the frames
//! the engine took, the process's CPU time. Then a drain step (the capture
//! SIGSTOPped behind a 256 MiB buffer while the sender fills it, then
//! resumed: the peak 100 ms rate is the live path's ceiling) and the
//! offline ceiling (replay --speed 0). Needs root (ip netns).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::Value;

use crate::figures::Figure;
use crate::proc::{TempDir, Workspace, is_root, run_quiet, stdout_of};

#[derive(Args, Debug)]
pub struct TuiArgs {
    /// Target rates, thousands of packets per second [default: 50 100 200
    /// 300 500 700 1000].
    rates_kpps: Vec<u64>,
    #[arg(long, default_value_t = 3)]
    seconds_per_step: u64,
    /// Sender threads.
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// DATA payload bytes.
    #[arg(long, default_value_t = 1024)]
    payload: u32,
    /// Frames of the offline (replay) capture.
    #[arg(long, default_value_t = 1_000_000)]
    offline_frames: u64,
}

/// Two namespaces and a veth pair, removed when dropped.
struct VethPair {
    ns: [String; 2],
    dev: [String; 2],
}

impl VethPair {
    fn new() -> anyhow::Result<VethPair> {
        let id = std::process::id();
        let pair = VethPair {
            ns: [format!("mrtb-a-{id}"), format!("mrtb-b-{id}")],
            dev: [format!("mrtba{id}"), format!("mrtbb{id}")],
        };
        let ip = |args: &[&str]| run_quiet(Command::new("ip").args(args));
        for ns in &pair.ns {
            ip(&["netns", "add", ns])?;
        }
        ip(&[
            "link",
            "add",
            &pair.dev[0],
            "type",
            "veth",
            "peer",
            "name",
            &pair.dev[1],
        ])?;
        for (i, addr) in ["10.77.0.1/24", "10.77.0.2/24"].iter().enumerate() {
            ip(&["link", "set", &pair.dev[i], "netns", &pair.ns[i]])?;
            ip(&["-n", &pair.ns[i], "addr", "add", addr, "dev", &pair.dev[i]])?;
            ip(&["-n", &pair.ns[i], "link", "set", &pair.dev[i], "up"])?;
        }
        Ok(pair)
    }

    /// `program args` in namespace `i`.
    fn exec(&self, i: usize, program: &Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns[i]]).arg(program);
        cmd
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn signal(child: &Child, sig: &str) -> anyhow::Result<()> {
    run_quiet(
        Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string()),
    )
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| path.display().to_string())
}

fn num(v: &Value, path: &str) -> f64 {
    v.pointer(path).and_then(Value::as_f64).unwrap_or(0.0)
}

pub fn run(ws: &Workspace, a: &TuiArgs, command: &str) -> anyhow::Result<Vec<Figure>> {
    if !is_root() {
        bail!("bench tui needs root (ip netns)");
    }
    ws.build(&[
        "-p",
        "metaroce-tui",
        "--bin",
        "metaroce-top",
        "--example",
        "blast",
    ])?;
    let top = ws.release("metaroce-top");
    let blast = ws.example("blast");
    let rates = if a.rates_kpps.is_empty() {
        vec![50, 100, 200, 300, 500, 700, 1000]
    } else {
        a.rates_kpps.clone()
    };
    let step = a.seconds_per_step;
    let out = TempDir::new(None, "tui")?;
    let pair = VethPair::new()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "machine: {cores} cores; sender threads {}, payload {} B, {step} s per step",
        a.threads, a.payload
    );
    println!(
        "{:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>7} {:>8} {:>9}",
        "target",
        "sent_kpps",
        "recv_kpps",
        "eng_kpps",
        "kdrops",
        "ifdrops",
        "drop%",
        "cpu_s",
        "cpu%core",
        "us/pkt"
    );
    let sender = |kpps: u64| {
        let mut cmd = pair.exec(0, &blast);
        cmd.args([
            "rate",
            &pair.dev[0],
            &(kpps * 1000).to_string(),
            &step.to_string(),
            &a.payload.to_string(),
            "8",
            "1",
            &a.threads.to_string(),
        ]);
        cmd
    };
    let mut best = 0.0f64;
    for &k in &rates {
        let json = out.path().join(format!("step-{k}.json"));
        let mut capture = pair
            .exec(1, &top)
            .args([
                "-i",
                &pair.dev[1],
                "--headless",
                "--duration",
                &(step + 2).to_string(),
                "--json-out",
            ])
            .arg(&json)
            .stdout(Stdio::null())
            .spawn()?;
        std::thread::sleep(Duration::from_millis(800));
        let sent: Value = serde_json::from_slice(&stdout_of(&mut sender(k))?)?;
        capture.wait()?;
        let s = read_json(&json)?;
        let (recv, kd, ifd, frames) = (
            num(&s, "/stats/received"),
            num(&s, "/stats/kernel_drops"),
            num(&s, "/stats/interface_drops"),
            num(&s, "/stats/frames"),
        );
        let drop = 100.0 * (kd + ifd) / (recv + kd + ifd).max(1.0);
        let cpu = num(&s, "/process/cpu_user_s") + num(&s, "/process/cpu_system_s");
        let sent_kpps = num(&sent, "/sent") / num(&sent, "/seconds") / 1e3;
        let st = step as f64;
        println!(
            "{k:>8} {sent_kpps:>9.1} {:>9.1} {:>9.1} {kd:>8} {ifd:>8} {drop:>7.2} {cpu:>7.2} {:>8.1} {:>9.2}",
            recv / st / 1e3,
            frames / st / 1e3,
            100.0 * cpu / st,
            1e6 * cpu / frames.max(1.0)
        );
        if drop < 1.0 && sent_kpps > best {
            best = sent_kpps;
        }
    }
    println!(
        "highest packet rate sustained with < 1% kernel+interface drops: {best:.1} kpps (the rate the sender achieved)"
    );

    // The live path's own ceiling, independent of the sender.
    let json = out.path().join("drain.json");
    let capture = pair
        .exec(1, &top)
        .args([
            "-i",
            &pair.dev[1],
            "--headless",
            "--duration",
            &(step + 8).to_string(),
            "--buffer-mb",
            "256",
            "--json-out",
        ])
        .arg(&json)
        .stdout(Stdio::null())
        .spawn()?;
    let mut capture = capture;
    std::thread::sleep(Duration::from_secs(2));
    signal(&capture, "STOP")?;
    let sent: Value = serde_json::from_slice(&stdout_of(&mut sender(1000))?)?;
    signal(&capture, "CONT")?;
    capture.wait()?;
    let s = read_json(&json)?;
    let peak = num(&s, "/process/peak_packets_per_s");
    println!(
        "drain (capture stopped while {} packets queued, then resumed): peak {:.0} kpps per 100 ms tick; received {}, engine {}, kernel drops {}, if drops {}",
        num(&sent, "/sent"),
        peak / 1e3,
        num(&s, "/stats/received"),
        num(&s, "/stats/frames"),
        num(&s, "/stats/kernel_drops"),
        num(&s, "/stats/interface_drops")
    );

    // The same decode + engine path without libpcap.
    let offline = out.path().join("offline.pcap");
    run_quiet(Command::new(&blast).arg("write").arg(&offline).args([
        a.offline_frames.to_string(),
        a.payload.to_string(),
        "8".into(),
        "1".into(),
    ]))?;
    let offline_json = out.path().join("offline.json");
    run_quiet(
        Command::new(&top)
            .arg("-r")
            .arg(&offline)
            .args(["--speed", "0", "--headless", "--json-out"])
            .arg(&offline_json),
    )?;
    let s = read_json(&offline_json)?;
    let (f, wall) = (num(&s, "/stats/frames"), num(&s, "/process/wall_s"));
    let cpu = num(&s, "/process/cpu_user_s") + num(&s, "/process/cpu_system_s");
    println!(
        "offline ceiling (replay --speed 0, same decode + engine): {f} frames in {wall:.2} s wall = {:.0} kpps, {:.2} us CPU per packet",
        f / wall / 1e3,
        1e6 * cpu / f
    );
    let fig = |what: String, value: String| Figure {
        command: command.to_string(),
        ..Figure::new("tui", what, value)
    };
    Ok(vec![
        fig(
            "live capture on a veth: highest rate with < 1 % drops, kpps".into(),
            format!("{best:.1}"),
        ),
        fig(
            "live path's peak while draining a 256 MiB backlog, kpps".into(),
            format!("{:.0}", peak / 1e3),
        ),
        fig(
            format!(
                "replay --speed 0, {} frames: kpps; µs CPU per packet",
                a.offline_frames
            ),
            format!("{:.0}; {:.2}", f / wall / 1e3, 1e6 * cpu / f),
        ),
    ])
}
