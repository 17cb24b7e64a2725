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
//!
//! Last, the cost of `--metrics` (`--only-metrics`: that alone): the drain
//! peak and the offline ceiling again, each without and with `--metrics
//! 127.0.0.1:9794 --metrics-paths` and a curl scrape of /metrics every
//! second (as Prometheus would), alternated over `--rounds` rounds in this
//! one run; the ratio with/without of the best of each (issue #34's bound:
//! at least 0.95). Both run in the receiving namespace, so the port is
//! theirs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::Value;

use crate::figures::Figure;
use crate::proc::{TempDir, Workspace, is_root, require, run_quiet, shown, stdout_of};
use crate::stats::{ratio, ratio_of_highest, spread};

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
    /// Only the cost of `--metrics` (no stepped rates, drain or ceiling of
    /// their own).
    #[arg(long)]
    only_metrics: bool,
    /// Rounds of the `--metrics` comparison (each: without, then with).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// Where the `--metrics` comparison serves and scrapes, in the receiving
/// namespace.
const METRICS_ADDR: &str = "127.0.0.1:9794";

/// Issue #34's bound on the cost of `--metrics`: with it, at least this
/// share of the packet rate without it.
const METRICS_BOUND: f64 = 0.95;

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
        // The receiving side's loopback, for its metrics endpoint.
        ip(&["-n", &pair.ns[1], "link", "set", "lo", "up"])?;
        Ok(pair)
    }

    /// `program` in namespace `i`.
    fn exec(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
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

/// The programs, the namespaces and the settings every step shares.
struct Setup<'a> {
    a: &'a TuiArgs,
    pair: VethPair,
    top: PathBuf,
    blast: PathBuf,
    out: TempDir,
    /// The capture the offline ceiling replays.
    offline_pcap: PathBuf,
}

/// metaroce-top's standard error but its "serving metrics" line, passed on.
fn pass_stderr(out: &Output) {
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        if !line.contains("serving metrics") {
            eprintln!("{line}");
        }
    }
}

fn check(out: Output, what: &str) -> anyhow::Result<()> {
    pass_stderr(&out);
    if !out.status.success() {
        bail!("{what} failed ({})", out.status);
    }
    Ok(())
}

impl Setup<'_> {
    fn step(&self) -> u64 {
        self.a.seconds_per_step
    }

    /// The sender at `kpps` for one step; prints its JSON summary.
    fn sender(&self, kpps: u64) -> Command {
        let mut cmd = self.pair.exec(0, &self.blast);
        cmd.args([
            "rate",
            &self.pair.dev[0],
            &(kpps * 1000).to_string(),
            &self.step().to_string(),
            &self.a.payload.to_string(),
            "8",
            "1",
            &self.a.threads.to_string(),
        ]);
        cmd
    }

    /// The drain step: the capture stopped (SIGSTOP) behind a 256 MiB
    /// kernel buffer while the sender fills it, then resumed; the fastest
    /// 100 ms tick while it drains the backlog (libpcap read + decode +
    /// engine) is the live path's peak. Returns metaroce-top's snapshot
    /// and the sender's summary.
    fn drain(&self, tag: &str, extra: &[&str]) -> anyhow::Result<(Value, Value)> {
        let json = self.out.path().join(format!("drain-{tag}.json"));
        let mut cmd = self.pair.exec(1, &self.top);
        cmd.args([
            "-i",
            &self.pair.dev[1],
            "--headless",
            "--duration",
            &(self.step() + 8).to_string(),
            "--buffer-mb",
            "256",
            "--json-out",
        ])
        .arg(&json)
        .args(extra);
        let what = shown(&cmd);
        let capture = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("running {what}"))?;
        std::thread::sleep(Duration::from_secs(2));
        signal(&capture, "STOP")?;
        let sent = stdout_of(&mut self.sender(1000));
        signal(&capture, "CONT")?;
        check(capture.wait_with_output()?, &what)?;
        let sent: Value = serde_json::from_slice(&sent?).context("the sender's summary")?;
        Ok((read_json(&json)?, sent))
    }

    /// The offline ceiling: the generated capture replayed as fast as
    /// possible, in the receiving namespace (so a metrics port is its own).
    fn offline(&self, tag: &str, extra: &[&str]) -> anyhow::Result<Value> {
        let json = self.out.path().join(format!("offline-{tag}.json"));
        let mut cmd = self.pair.exec(1, &self.top);
        cmd.arg("-r")
            .arg(&self.offline_pcap)
            .args(["--speed", "0", "--headless", "--json-out"])
            .arg(&json)
            .args(extra);
        let what = shown(&cmd);
        let out = cmd
            .stdout(Stdio::null())
            .output()
            .with_context(|| format!("running {what}"))?;
        check(out, &what)?;
        read_json(&json)
    }
}

/// The offline ceiling of a replay's snapshot: frames per second of wall
/// time (0 for a snapshot without a time).
fn offline_pps(s: &Value) -> f64 {
    ratio(num(s, "/stats/frames"), num(s, "/process/wall_s"))
}

pub fn run(ws: &Workspace, a: &TuiArgs, command: &str) -> anyhow::Result<Vec<Figure>> {
    if !is_root() {
        bail!("bench tui needs root (ip netns)");
    }
    require("curl", "tui")?;
    ws.build(&[
        "-p",
        "metaroce-tui",
        "--bin",
        "metaroce-top",
        "--example",
        "blast",
    ])?;
    let out = TempDir::new(None, "tui")?;
    let setup = Setup {
        a,
        pair: VethPair::new()?,
        top: ws.release("metaroce-top"),
        blast: ws.example("blast"),
        offline_pcap: out.path().join("offline.pcap"),
        out,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "machine: {cores} cores; sender threads {}, payload {} B, {} s per step",
        a.threads,
        a.payload,
        setup.step()
    );
    run_quiet(
        Command::new(&setup.blast)
            .arg("write")
            .arg(&setup.offline_pcap)
            .args([
                a.offline_frames.to_string(),
                a.payload.to_string(),
                "8".into(),
                "1".into(),
            ]),
    )?;
    let fig = |bench: &'static str, what: String, value: String| Figure {
        command: command.to_string(),
        ..Figure::new(bench, what, value)
    };
    let mut figures = Vec::new();
    if !a.only_metrics {
        figures.extend(
            rates_drain_and_ceiling(&setup)?
                .into_iter()
                .map(|(w, v)| fig("tui", w, v)),
        );
    }
    figures.extend(
        metrics_cost(&setup)?
            .into_iter()
            .map(|(w, v)| fig("tui --metrics", w, v)),
    );
    Ok(figures)
}

/// The stepped rates, the drain peak and the offline ceiling; their
/// figures (what, value).
fn rates_drain_and_ceiling(setup: &Setup<'_>) -> anyhow::Result<Vec<(String, String)>> {
    let a = setup.a;
    let step = setup.step();
    let rates = if a.rates_kpps.is_empty() {
        vec![50, 100, 200, 300, 500, 700, 1000]
    } else {
        a.rates_kpps.clone()
    };
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
    let mut best = 0.0f64;
    for &k in &rates {
        let json = setup.out.path().join(format!("step-{k}.json"));
        let mut cmd = setup.pair.exec(1, &setup.top);
        cmd.args([
            "-i",
            &setup.pair.dev[1],
            "--headless",
            "--duration",
            &(step + 2).to_string(),
            "--json-out",
        ])
        .arg(&json);
        let what = shown(&cmd);
        let capture = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
        std::thread::sleep(Duration::from_millis(800));
        let sent = stdout_of(&mut setup.sender(k));
        check(capture.wait_with_output()?, &what)?;
        let sent: Value = serde_json::from_slice(&sent?).context("the sender's summary")?;
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
    let (s, sent) = setup.drain("plain", &[])?;
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
    let s = setup.offline("plain", &[])?;
    let (f, wall) = (num(&s, "/stats/frames"), num(&s, "/process/wall_s"));
    let cpu = num(&s, "/process/cpu_user_s") + num(&s, "/process/cpu_system_s");
    println!(
        "offline ceiling (replay --speed 0, same decode + engine): {f} frames in {wall:.2} s wall = {:.0} kpps, {:.2} us CPU per packet",
        offline_pps(&s) / 1e3,
        1e6 * cpu / f
    );
    Ok(vec![
        (
            "live capture on a veth: highest rate with < 1 % drops, kpps".into(),
            format!("{best:.1}"),
        ),
        (
            "live path's peak while draining a 256 MiB backlog, kpps".into(),
            format!("{:.0}", peak / 1e3),
        ),
        (
            format!(
                "replay --speed 0, {} frames: kpps; µs CPU per packet",
                a.offline_frames
            ),
            format!("{:.0}; {:.2}", offline_pps(&s) / 1e3, 1e6 * cpu / f),
        ),
    ])
}

/// A curl scrape of metaroce-top's /metrics every second in the receiving
/// namespace, as Prometheus would, until stopped.
struct Scraper {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Scrapes>,
}

/// Scrapes answered (HTTP 2xx within a second) and tried.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Scrapes {
    answered: u32,
    tried: u32,
}

impl Scraper {
    fn start(ns: &str) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, ns) = (stop.clone(), ns.to_string());
        let thread = std::thread::spawn(move || {
            let mut n = Scrapes::default();
            'scrape: loop {
                for _ in 0..10 {
                    std::thread::sleep(Duration::from_millis(100));
                    if flag.load(Ordering::Relaxed) {
                        break 'scrape;
                    }
                }
                n.tried += 1;
                let ok = Command::new("ip")
                    .args(["netns", "exec", &ns, "curl", "-sf", "-o", "/dev/null"])
                    .args(["--max-time", "1"])
                    .arg(format!("http://{METRICS_ADDR}/metrics"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                n.answered += u32::from(ok);
            }
            n
        });
        Scraper { stop, thread }
    }

    fn finish(self) -> Scrapes {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// The best of each side's rounds and their ratio (with / without).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cost {
    with: f64,
    without: f64,
    ratio: f64,
}

impl Cost {
    fn of(with: &[f64], without: &[f64]) -> Cost {
        let best = |v: &[f64]| spread(v).map_or(0.0, |s| s.max);
        Cost {
            with: best(with),
            without: best(without),
            ratio: ratio_of_highest(with, without),
        }
    }

    fn within_bound(&self) -> bool {
        self.ratio >= METRICS_BOUND
    }
}

/// `--metrics` and a scrape every second against none, alternated over
/// the rounds: the drain peak and the offline ceiling of each; their
/// figures (what, value).
fn metrics_cost(setup: &Setup<'_>) -> anyhow::Result<Vec<(String, String)>> {
    let rounds = setup.a.rounds.max(1);
    println!(
        "--metrics {METRICS_ADDR} --metrics-paths with a scrape every second, against none ({rounds} rounds, alternated):"
    );
    println!(
        "{:>6} {:>9} {:>22} {:>22} {:>16}",
        "round", "metrics", "drain_peak_kpps", "offline_kpps", "scrapes answered"
    );
    // [off, on] per measure.
    let mut drain: [Vec<f64>; 2] = Default::default();
    let mut offline: [Vec<f64>; 2] = Default::default();
    for r in 1..=rounds {
        for (i, on) in [false, true].into_iter().enumerate() {
            let extra: &[&str] = if on {
                &["--metrics", METRICS_ADDR, "--metrics-paths"]
            } else {
                &[]
            };
            let word = if on { "on" } else { "off" };
            let scraper = on.then(|| Scraper::start(&setup.pair.ns[1]));
            let tag = format!("{word}-{r}");
            let measured = setup
                .drain(&tag, extra)
                .and_then(|(d, _)| Ok((d, setup.offline(&tag, extra)?)));
            let scrapes = scraper.map(Scraper::finish);
            let (d, o) = measured?;
            let (peak, pps) = (num(&d, "/process/peak_packets_per_s"), offline_pps(&o));
            drain[i].push(peak / 1e3);
            offline[i].push(pps / 1e3);
            let scrapes = scrapes.map_or("-".into(), |s| format!("{}/{}", s.answered, s.tried));
            println!(
                "{r:>6} {word:>9} {:>22.0} {:>22.0} {scrapes:>16}",
                peak / 1e3,
                pps / 1e3
            );
        }
    }
    let mut figures = Vec::new();
    for (name, sides) in [("drain peak", &drain), ("offline ceiling", &offline)] {
        let c = Cost::of(&sides[1], &sides[0]);
        println!(
            "{name}: best with --metrics {:.0} kpps / without {:.0} kpps = {:.3} (issue #34's bound: at least {METRICS_BOUND}{})",
            c.with,
            c.without,
            c.ratio,
            if c.within_bound() { "" } else { "; NOT MET" }
        );
        let what = match name {
            "drain peak" => "drain peak (live capture, 100 ms tick)".to_string(),
            _ => format!(
                "offline ceiling (replay --speed 0, {} frames)",
                setup.a.offline_frames
            ),
        };
        figures.push((
            format!(
                "{what}, best of {rounds} alternated rounds: with `--metrics --metrics-paths` scraped every second; without, kpps; ratio (bound {METRICS_BOUND})"
            ),
            format!("{:.0}; {:.0}; {:.3}", c.with, c.without, c.ratio),
        ));
    }
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_of_metrics_compares_the_best_rounds() {
        // kpps with --metrics, then without, over 3 rounds.
        let c = Cost::of(&[1100.0, 1195.0, 800.0], &[976.0, 900.0, 950.0]);
        assert_eq!((c.with, c.without), (1195.0, 976.0));
        assert!((c.ratio - 1195.0 / 976.0).abs() < 1e-12);
        assert!(c.within_bound());
        let c = Cost::of(&[930.0], &[1000.0]);
        assert!((c.ratio - 0.93).abs() < 1e-12);
        assert!(!c.within_bound());
        assert!(Cost::of(&[950.0], &[1000.0]).within_bound());
    }

    #[test]
    fn offline_ceilings_are_frames_per_wall_second() {
        let s: Value = serde_json::json!({
            "stats": { "frames": 20000 },
            "process": { "wall_s": 0.02 }
        });
        assert!((offline_pps(&s) - 1e6).abs() < 1e-6);
        assert_eq!(offline_pps(&serde_json::json!({})), 0.0);
    }
}
