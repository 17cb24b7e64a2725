//! `bench stack`: the reference stack on loopback. Raw UDP through the same
//! driver (the `raw_udp` example: sendmmsg/recvmmsg over one socket per ev)
//! against one MetaRoCE connection (`metaroce-stack server` and `client`,
//! PATHS paths, 1 MiB WRITEs, depth 8), lossless and at LOSS % loss, with
//! the go-back-N (RoCEv2-like) mode beside it. Every round runs all five
//! cases back to back (a noisy neighbour weighs on all of them alike); the
//! table gives per-case medians, and each ratio is the median of the
//! per-round ratios (both figures of a ratio from the same round).

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::Value;

use crate::figures::Figure;
use crate::proc::{Workspace, load_average, stdout_of};
use crate::stats::{median, median_u64, ratios};

#[derive(Args, Debug)]
pub struct StackArgs {
    /// Seconds per case.
    #[arg(default_value_t = 3.0)]
    seconds: f64,
    /// Loss of the lossy cases, percent.
    #[arg(default_value_t = 1.0)]
    loss: f64,
    /// Rounds; each runs every case once.
    #[arg(default_value_t = 5)]
    rounds: usize,
    #[arg(long, default_value_t = 8)]
    paths: u16,
    #[arg(long, default_value_t = 4096)]
    mtu: u16,
    /// Message size in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    size: u32,
    /// Delay-based CC: target fabric delay above the smallest RTT seen.
    #[arg(long, default_value_t = 200)]
    cc_target_us: u64,
    #[arg(long, default_value_t = 4794)]
    port: u16,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// One case's figures over the rounds.
#[derive(Default)]
struct CaseRuns {
    goodput: Vec<f64>,
    retx: Vec<u64>,
    spurious: Vec<u64>,
    early: Vec<u64>,
    rto: Vec<u64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
}

impl CaseRuns {
    /// A client report's figures (`metaroce-stack client --json`).
    fn push(&mut self, r: &Value) -> anyhow::Result<()> {
        let f = |path: &str| -> anyhow::Result<f64> {
            r.pointer(path)
                .and_then(Value::as_f64)
                .with_context(|| format!("the client's report has no {path}"))
        };
        self.goodput.push(f("/goodput_gbps")?);
        self.retx.push(f("/retransmissions")? as u64);
        self.spurious.push(f("/spurious_retransmissions")? as u64);
        self.early.push(f("/conn/spurious_losses")? as u64);
        self.rto.push(f("/conn/rto_fires")? as u64);
        self.p50.push(f("/latency/p50_us")?);
        self.p99.push(f("/latency/p99_us")?);
        Ok(())
    }

    fn row(&self, case: String) -> Value {
        serde_json::json!({
            "case": case,
            "goodput_gbps": median(&self.goodput),
            "samples_gbps": self.goodput,
            "retransmissions": median_u64(&self.retx),
            "spurious_retransmissions": median_u64(&self.spurious),
            "spurious_losses": median_u64(&self.early),
            "rto_fires": median_u64(&self.rto),
            "p50_us": median(&self.p50),
            "p99_us": median(&self.p99),
        })
    }
}

/// Waits until nothing listens on the server's port any more (the previous
/// case's server has exited and the port is free).
fn wait_port_free(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), port)).is_err()
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One MetaRoCE or go-back-N case: a server process and a client process;
/// the client's JSON report.
fn case(ws: &Workspace, a: &StackArgs, mode: &str, loss: f64) -> anyhow::Result<Value> {
    let stack = ws.release("metaroce-stack");
    let port = a.port.to_string();
    let common = |cmd: &mut Command| {
        cmd.args([
            "--port",
            &port,
            "--peer-port",
            &port,
            "--mode",
            mode,
            "--spray",
            "weighted",
        ])
        .args([
            "--mtu",
            &a.mtu.to_string(),
            "--cc-target-us",
            &a.cc_target_us.to_string(),
        ])
        .args(["--seed", "1", "--json"]);
    };
    wait_port_free(a.port);
    let mut server = Command::new(&stack);
    server.args(["server", "--bind", "127.0.0.1", "--once"]);
    common(&mut server);
    // The server must outlive any client; --duration bounds a case whose
    // client failed to connect.
    server.args(["--duration", &(a.seconds + 60.0).to_string()]);
    let mut server = server
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting metaroce-stack server")?;
    std::thread::sleep(Duration::from_millis(200));
    let mut client = Command::new(&stack);
    client
        .args([
            "client",
            "--connect",
            &format!("127.0.0.1:{port}"),
            "--paths",
            &a.paths.to_string(),
        ])
        .args([
            "--op",
            "write",
            "--size",
            &a.size.to_string(),
            "--duration",
            &a.seconds.to_string(),
        ])
        .args(["--depth", "8", "--timeout", &(a.seconds + 30.0).to_string()])
        .args(["--loss", &loss.to_string()]);
    common(&mut client);
    let report = stdout_of(&mut client);
    let waited = server.wait();
    let report: Value = serde_json::from_slice(&report?).context("the client's report")?;
    waited.context("waiting for the server")?;
    if let Some(e) = report.get("closed_error").and_then(Value::as_str) {
        bail!("{e}");
    }
    Ok(report)
}

/// The raw UDP baseline: payload Gb/s.
fn raw(ws: &Workspace, a: &StackArgs) -> anyhow::Result<f64> {
    wait_port_free(a.port);
    let out = stdout_of(Command::new(ws.example("raw_udp")).args([
        a.seconds.to_string(),
        a.paths.to_string(),
        a.mtu.to_string(),
        a.port.to_string(),
    ]))?;
    let v: Value = serde_json::from_slice(&out).context("raw_udp's output")?;
    v.get("payload_gbps")
        .and_then(Value::as_f64)
        .context("raw_udp printed no payload_gbps")
}

pub fn run(ws: &Workspace, a: &StackArgs, command: &str) -> anyhow::Result<Vec<Figure>> {
    ws.build(&[
        "-p",
        "reference-stack",
        "--bin",
        "metaroce-stack",
        "--example",
        "raw_udp",
    ])?;
    let cases = [
        ("MetaRoCE lossless", "metaroce", 0.0),
        ("MetaRoCE loss", "metaroce", a.loss),
        ("go-back-N lossless", "gbn", 0.0),
        ("go-back-N loss", "gbn", a.loss),
    ];
    let rounds = a.rounds.max(1);
    let load_before = load_average();
    let mut raw_runs = CaseRuns::default();
    let mut runs: Vec<CaseRuns> = cases.iter().map(|_| CaseRuns::default()).collect();
    let mut gp: [Vec<f64>; 4] = Default::default();
    for round in 0..rounds {
        let g = raw(ws, a).context("raw UDP baseline")?;
        raw_runs.goodput.push(g);
        for v in [
            &mut raw_runs.retx,
            &mut raw_runs.spurious,
            &mut raw_runs.early,
            &mut raw_runs.rto,
        ] {
            v.push(0);
        }
        for (k, &(name, mode, loss)) in cases.iter().enumerate() {
            let r = case(ws, a, mode, loss).with_context(|| name.to_string())?;
            runs[k].push(&r)?;
            gp[k].push(runs[k].goodput[round]);
        }
        if !a.json {
            let pct = |x: f64, y: f64| 100.0 * x / y.max(1e-9);
            eprintln!(
                "round {}/{rounds}: raw {g:.3}  MR {:.3} / {:.3} ({:.0}%)  GBN {:.3} / {:.3} ({:.0}%) Gb/s",
                round + 1,
                gp[0][round],
                gp[1][round],
                pct(gp[1][round], gp[0][round]),
                gp[2][round],
                gp[3][round],
                pct(gp[3][round], gp[2][round]),
            );
        }
    }
    // Per-round ratios: both figures of a ratio come from the same round.
    let per_round = [
        ratios(&gp[0], &raw_runs.goodput),
        ratios(&gp[1], &gp[0]),
        ratios(&gp[3], &gp[2]),
    ];
    let med = |i: usize| median(&per_round[i]);
    let mut rows = vec![raw_runs.row("raw UDP (payload share)".into())];
    for (k, &(name, _, loss)) in cases.iter().enumerate() {
        let case = if loss > 0.0 {
            format!("{name} {loss}%")
        } else {
            name.to_string()
        };
        rows.push(runs[k].row(case));
    }
    if a.json {
        let summary = serde_json::json!({
            "paths": a.paths, "mtu": a.mtu, "size": a.size, "duration_s": a.seconds,
            "cc_target_us": a.cc_target_us, "loss_pct": a.loss, "rounds": rounds,
            "load_average_before": load_before, "load_average_after": load_average(),
            "rows": rows,
            "metaroce_vs_raw": med(0),
            "metaroce_loss_vs_lossless": med(1),
            "gbn_loss_vs_lossless": med(2),
            "per_round": {
                "metaroce_vs_raw": per_round[0],
                "metaroce_loss_vs_lossless": per_round[1],
                "gbn_loss_vs_lossless": per_round[2],
            },
        });
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_table(a, rounds, &load_before, &rows, &per_round);
    }
    let fig = |what: String, value: String| Figure {
        command: command.to_string(),
        ..Figure::new("stack", what, value)
    };
    let gbps = |i: usize| rows[i]["goodput_gbps"].as_f64().unwrap_or(0.0);
    Ok(vec![
        fig(
            format!(
                "loopback goodput, Gb/s: raw UDP payload; MetaRoCE lossless; MetaRoCE {}% loss (median of {rounds})",
                a.loss
            ),
            format!("{:.3}; {:.3}; {:.3}", gbps(0), gbps(1), gbps(2)),
        ),
        fig(
            "MetaRoCE / raw UDP goodput (median of per-round ratios)".into(),
            format!("{:.3}", med(0)),
        ),
        fig(
            format!(
                "goodput at {}% loss / lossless: MetaRoCE; go-back-N",
                a.loss
            ),
            format!("{:.3}; {:.3}", med(1), med(2)),
        ),
    ])
}

/// The text output: the medians per case, then each ratio's median with
/// every round's value.
fn print_table(
    a: &StackArgs,
    rounds: usize,
    load_before: &str,
    rows: &[Value],
    per_round: &[Vec<f64>; 3],
) {
    println!(
        "{rounds} rounds of {} s per case, medians; load average before: {load_before}, after: {}",
        a.seconds,
        load_average()
    );
    println!(
        "{:<28} {:>8} {:>8} {:>9} {:>6} {:>6} {:>9} {:>9}",
        "case", "Gb/s", "retx", "spurious", "early", "rto", "p50 us", "p99 us"
    );
    for r in rows {
        let u = |k: &str| r[k].as_u64().unwrap_or(0);
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        println!(
            "{:<28} {:>8.3} {:>8} {:>9} {:>6} {:>6} {:>9.1} {:>9.1}",
            r["case"].as_str().unwrap_or_default(),
            f("goodput_gbps"),
            u("retransmissions"),
            u("spurious_retransmissions"),
            u("spurious_losses"),
            u("rto_fires"),
            f("p50_us"),
            f("p99_us")
        );
    }
    let pct = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{:.0}", 100.0 * x))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "MetaRoCE / raw UDP: {:.1}% [{}]",
        100.0 * median(&per_round[0]),
        pct(&per_round[0])
    );
    println!(
        "MetaRoCE {}% loss / lossless: {:.1}% [{}]",
        a.loss,
        100.0 * median(&per_round[1]),
        pct(&per_round[1])
    );
    println!(
        "go-back-N {}% loss / lossless: {:.1}% [{}]",
        a.loss,
        100.0 * median(&per_round[2]),
        pct(&per_round[2])
    );
}
