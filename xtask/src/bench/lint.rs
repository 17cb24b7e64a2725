//! `bench lint`: `metaroce-analyze lint` against `report` on the analyzer
//! benchmark's bulk capture (8-packet WRITEs over 16 evs, ACKs, losses
//! NACKed and retransmitted); the budget is lint <= 1.25 x report per
//! packet:
//! - instructions per packet of the one-thread analysis, the `walk`
//!   example with `--engine` against `--lint` (cachegrind; exact: the same
//!   decoding and engine as report and lint, without the two threads'
//!   sharing of the decoding, which moves the next figure by about 1 %
//!   between runs);
//! - instructions per packet of `report` and `lint` themselves (both
//!   threads);
//! - CPU time (perf's task-clock, every thread) over the rounds, report
//!   then lint in each round, the median of the per-round ratios.
//!
//! The bulk capture's connections start mid-stream, so the rules that need
//! a captured handshake are not judged; `--handshake` measures a capture
//! whose connections open with CONNECT and ACCEPT, where they are.

use clap::Args;

use crate::figures::Figure;
use crate::proc::{Workspace, cpu_ms, instructions, require};
use crate::stats::{median, ratios};

#[derive(Args, Debug)]
pub struct LintArgs {
    /// Frames of the capture.
    #[arg(default_value_t = 1_000_000)]
    frames: u64,
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Connections open with CONNECT and ACCEPT (`bulk --handshake`).
    #[arg(long)]
    handshake: bool,
}

pub fn run(ws: &Workspace, a: &LintArgs, command: &str) -> anyhow::Result<Vec<Figure>> {
    require("valgrind", "lint")?;
    require("perf", "lint")?;
    ws.build(&[
        "-p",
        "metaroce-analyze",
        "--no-default-features",
        "--bin",
        "metaroce-analyze",
        "--example",
        "walk",
    ])?;
    ws.build(&["-p", "fixtures-generator"])?;
    let bin = ws.release("metaroce-analyze");
    let walk = ws.example("walk");
    let n = a.frames;
    let f = if a.handshake {
        ws.bulk_capture(&format!("bench-hs-{n}.pcap"), n, &["--handshake"])?
    } else {
        ws.bulk_capture(&format!("bench-{n}.pcap"), n, &[])?
    };
    println!("capture: {}", f.display());
    let fs = f.to_string_lossy();
    let per = |i: u64| i as f64 / n as f64;

    let engine = instructions(&walk, &[&fs, "--engine"])?;
    let walk_lint = instructions(&walk, &[&fs, "--lint"])?;
    println!(
        "instructions per packet, one thread ({n} frames): analysis {:.0}, with the lint {:.0}, ratio {:.3}",
        per(engine),
        per(walk_lint),
        walk_lint as f64 / engine as f64
    );
    let report = instructions(&bin, &["report", "--json", "--no-progress", &fs])?;
    let lint = instructions(&bin, &["lint", "--json", "--no-progress", &fs])?;
    println!(
        "instructions per packet, two threads ({n} frames): report {:.0}, lint {:.0}, lint/report {:.3}",
        per(report),
        per(lint),
        lint as f64 / report as f64
    );
    let (mut report_ms, mut lint_ms) = (Vec::new(), Vec::new());
    for i in 0..a.rounds {
        let r = cpu_ms(&bin, &["report", "--json", "--no-progress", &fs])?;
        let l = cpu_ms(&bin, &["lint", "--json", "--no-progress", &fs])?;
        println!("round {}: CPU ms report {r}, lint {l}", i + 1);
        report_ms.push(r);
        lint_ms.push(l);
    }
    let cpu_ratio = median(&ratios(&lint_ms, &report_ms));
    println!(
        "CPU lint/report, median of {} rounds: {cpu_ratio:.3}",
        a.rounds
    );

    let capture = if a.handshake {
        "handshake capture"
    } else {
        "bulk capture"
    };
    let fig = |what: String, value: String| Figure {
        command: command.to_string(),
        ..Figure::new("lint", what, value)
    };
    Ok(vec![
        fig(
            format!(
                "instructions per packet, one thread, {n}-frame {capture}: analysis; with the lint; ratio"
            ),
            format!(
                "{:.0}; {:.0}; {:.3}",
                per(engine),
                per(walk_lint),
                walk_lint as f64 / engine as f64
            ),
        ),
        fig(
            format!("instructions per packet, `report`; `lint`; ratio ({n} frames; budget 1.25)"),
            format!(
                "{:.0}; {:.0}; {:.3}",
                per(report),
                per(lint),
                lint as f64 / report as f64
            ),
        ),
        fig(
            format!("CPU time `lint` / `report`, median of {} rounds", a.rounds),
            format!("{cpu_ratio:.3}"),
        ),
    ])
}
