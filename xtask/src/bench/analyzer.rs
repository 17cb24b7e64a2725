//! `bench analyzer`: end-to-end throughput of `metaroce-analyze report
//! --json` against tshark and against a bare walk (capture records + the
//! analysis' own decode of every frame into an observation, no engine: the
//! `walk` example of analyzer/cli), with peak RSS for a small and a large
//! capture (RSS must stay flat). The reference walk
//! (proto-parse/examples/reference_walk.rs: mmap + pcap-parser +
//! etherparse, no code of ours) runs beside them and calibrates this host.
//!
//! The analyzer runs in two builds, plain release and profile-guided
//! (`cargo xtask pgo`, trained on other captures); the PGO build must
//! print the same JSON. A round runs the builds, the bare walk, the
//! reference walk and `lint` in turn; each row is the median of its
//! program's runs and each ratio the median of the per-round ratios.
//! `--before REV` sets another version's plain build beside the current
//! one (`cargo xtask build-rev`), back to back in alternating order.
//! Instructions per packet come from cachegrind (counted, not timed: the
//! one figure this noisy machine cannot disturb). Captures are written by
//! `fixtures-generator bulk` under target/bench/: 8 connections over 16
//! evs, 0.5 % DATA loss, 158-byte frames.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::bail;
use clap::Args;

use crate::bench::plugin::PluginDirs;
use crate::builds;
use crate::figures::Figure;
use crate::proc::{self, Run, Workspace, instructions, measure, which};
use crate::stats::{median, median_ratio, rate, spread};

#[derive(Args, Debug)]
pub struct AnalyzerArgs {
    /// Packets of the small capture.
    #[arg(default_value_t = 1_000_000)]
    small: u64,
    /// Packets of the large capture.
    #[arg(default_value_t = 10_000_000)]
    large: u64,
    /// tshark runs on captures up to this many packets [default: the small
    /// one's] (tshark is slow: 10M packets take minutes).
    tshark_packets: Option<u64>,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Another version's plain build beside this one.
    #[arg(long, value_name = "REV")]
    before: Option<String>,
    /// With --before: REV with this commit's change undone.
    #[arg(long, value_name = "COMMIT", requires = "before")]
    before_revert: Option<String>,
    /// Leave the profile-guided build out (it takes two more release
    /// builds).
    #[arg(long)]
    no_pgo: bool,
}

/// The programs of a round, in the order they run.
#[derive(Default)]
struct Rounds {
    report: Vec<Run>,
    pgo: Vec<Run>,
    walk: Vec<Run>,
    reference: Vec<Run>,
    lint: Vec<Run>,
    before: Vec<Run>,
    /// The thread-stats example's line of each round.
    threads: Vec<String>,
}

fn wall(r: &[Run]) -> Vec<f64> {
    r.iter().map(|r| r.wall_s).collect()
}
fn cpu(r: &[Run]) -> Vec<f64> {
    r.iter().map(|r| r.cpu_s).collect()
}

/// Median wall and CPU time and the largest RSS of one program's runs.
fn summary(r: &[Run]) -> Run {
    Run {
        wall_s: median(&wall(r)),
        cpu_s: median(&cpu(r)),
        max_rss_kib: r.iter().map(|r| r.max_rss_kib).max().unwrap_or(0),
    }
}

fn row(what: &str, packets: u64, r: Run) {
    let n = packets as f64;
    println!(
        "{what:<46} {packets:>11} {:>9.3} {:>9.3} {:>13.0} {:>13.0} {:>8}KiB",
        r.wall_s,
        r.cpu_s,
        rate(n, r.wall_s),
        rate(n, r.cpu_s),
        r.max_rss_kib
    );
}

pub fn run(ws: &Workspace, a: &AnalyzerArgs, command: &str) -> anyhow::Result<Vec<Figure>> {
    ws.build(&[
        "-p",
        "metaroce-analyze",
        "--no-default-features",
        "--bin",
        "metaroce-analyze",
        "--example",
        "walk",
        "--example",
        "thread-stats",
    ])?;
    ws.build(&["-p", "fixtures-generator"])?;
    ws.build(&["-p", "proto-parse", "--example", "reference_walk"])?;
    let bin = ws.release("metaroce-analyze");
    let walk = ws.example("walk");
    let thread_stats = ws.example("thread-stats");
    let reference = ws.example("reference_walk");
    let pgo = if a.no_pgo {
        None
    } else {
        Some(builds::pgo(ws, &["--no-default-features".to_string()])?)
    };
    let before = match &a.before {
        Some(rev) => {
            Some(builds::build_rev(ws, rev, a.before_revert.as_deref())?.join("metaroce-analyze"))
        }
        None => None,
    };
    let tshark_max = a.tshark_packets.unwrap_or(a.small);
    let tshark = tshark_command(ws)?;

    let mut figures = Vec::new();
    let fig = |what: String, value: String| Figure {
        command: command.to_string(),
        ..Figure::new("analyzer", what, value)
    };
    println!(
        "{:<46} {:>11} {:>9} {:>9} {:>13} {:>13} {:>10}",
        "what", "packets", "wall s", "cpu s", "packets/s", "pkts/cpu-s", "max RSS"
    );
    let mut rss = Vec::new();
    for n in [a.small, a.large] {
        let f = ws.bulk_capture(&format!("bench-{n}.pcap"), n, &[])?;
        proc::warm_page_cache(&f)?;
        let fs = f.to_string_lossy().into_owned();
        let report_args = ["report", "--json", "--no-progress", fs.as_str()];
        let json = proc::stdout_of(Command::new(&bin).args(report_args))?;
        if let Some(pgo) = &pgo
            && proc::stdout_of(Command::new(pgo).args(report_args))? != json
        {
            bail!("the PGO build's report differs from the plain build's on {fs}");
        }
        if let Some(before) = &before {
            let same = proc::stdout_of(Command::new(before).args(report_args))? == json;
            let word = if same { "identical to" } else { "differs from" };
            println!("  BEFORE's report is {word} this build's on {fs}");
        }
        let programs = Programs {
            bin: &bin,
            pgo: pgo.as_deref(),
            walk: &walk,
            reference: &reference,
            before: before.as_deref(),
            thread_stats: &thread_stats,
        };
        let runs = rounds_on(a.rounds, &f, &programs)?;
        let report = summary(&runs.report);
        row("metaroce-analyze report --json", n, report);
        if !runs.pgo.is_empty() {
            row(
                "metaroce-analyze report --json (PGO build)",
                n,
                summary(&runs.pgo),
            );
        }
        let bare = summary(&runs.walk);
        row("bare walk (records + decode)", n, bare);
        let reference_run = summary(&runs.reference);
        row(
            "reference walk (mmap+pcap-parser+etherparse)",
            n,
            reference_run,
        );
        let vs_walk = median_ratio(&wall(&runs.report), &wall(&runs.walk));
        let vs_reference = median_ratio(&wall(&runs.report), &wall(&runs.reference));
        let pgo_text = if runs.pgo.is_empty() {
            String::new()
        } else {
            format!(
                " (PGO build: {:.2}x and {:.2}x)",
                median_ratio(&wall(&runs.pgo), &wall(&runs.walk)),
                median_ratio(&wall(&runs.pgo), &wall(&runs.reference))
            )
        };
        println!(
            "  ratios (wall, medians of the per-round ratios): analyzer takes {vs_walk:.2}x the bare walk time, \
             {vs_reference:.2}x the reference walk time{pgo_text}; the reference walks at {:.0}% of the 23 M/s \
             the issue measured",
            100.0 * n as f64 / reference_run.wall_s / 23e6
        );
        rss.push((n, report.max_rss_kib));
        row("metaroce-analyze lint --json", n, summary(&runs.lint));
        let lint_wall = median_ratio(&wall(&runs.lint), &wall(&runs.report));
        let lint_cpu = median_ratio(&cpu(&runs.lint), &cpu(&runs.report));
        println!(
            "  lint / report, per-round ratios over {} rounds: wall x{lint_wall:.3} (range {}), CPU x{lint_cpu:.3} \
             (range {}); the budget is x1.25",
            a.rounds,
            spread_of(&wall(&runs.lint), &wall(&runs.report)),
            spread_of(&cpu(&runs.lint), &cpu(&runs.report)),
        );
        if !runs.before.is_empty() {
            let label = format!(
                "report --json, BEFORE={}{}",
                a.before.as_deref().unwrap_or_default(),
                a.before_revert
                    .as_ref()
                    .map_or(String::new(), |r| format!(" less {r}"))
            );
            row(&label, n, summary(&runs.before));
            let rss_now: Vec<f64> = runs.report.iter().map(|r| r.max_rss_kib as f64).collect();
            let rss_before: Vec<f64> = runs.before.iter().map(|r| r.max_rss_kib as f64).collect();
            println!(
                "  this build's time / BEFORE's, per-round ratios over {} rounds: wall x{:.3} (range {}), CPU x{:.3} \
                 (range {}), peak RSS x{:.3}",
                a.rounds,
                median_ratio(&wall(&runs.report), &wall(&runs.before)),
                spread_of(&wall(&runs.report), &wall(&runs.before)),
                median_ratio(&cpu(&runs.report), &cpu(&runs.before)),
                spread_of(&cpu(&runs.report), &cpu(&runs.before)),
                median_ratio(&rss_now, &rss_before),
            );
        }
        println!(
            "  threads of the analysis, per round: {}",
            threads_line(&runs.threads)
        );
        let rate_wall = rate(n as f64, report.wall_s);
        let rate_cpu = rate(n as f64, report.cpu_s);
        figures.push(fig(
            format!("`report --json`, {n} packets: packets/s (wall; per CPU-second)"),
            format!("{rate_wall:.0} ({rate_cpu:.0})"),
        ));
        figures.push(fig(
            format!("`report` / bare walk, wall, {n} packets"),
            format!("{vs_walk:.2}"),
        ));
        if !runs.pgo.is_empty() {
            let p = summary(&runs.pgo);
            figures.push(fig(
                format!("PGO build, {n} packets: packets/s (wall; per CPU-second)"),
                format!(
                    "{:.0} ({:.0})",
                    rate(n as f64, p.wall_s),
                    rate(n as f64, p.cpu_s)
                ),
            ));
        }
        if n <= tshark_max
            && let Some(tshark) = &tshark
        {
            let mut args = tshark.args.clone();
            args.extend(["-r".to_string(), fs.clone()]);
            let (program, rest) = args.split_first().expect("a tshark command");
            let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
            let t = measure(Path::new(program), &rest)?;
            row("tshark -T fields", n, t);
            let faster = t.wall_s / report.wall_s;
            let pgo_faster = if runs.pgo.is_empty() {
                String::new()
            } else {
                format!(" (PGO build: {:.1}x)", t.wall_s / summary(&runs.pgo).wall_s)
            };
            println!("  ratios (wall): analyzer is {faster:.1}x faster than tshark{pgo_faster}");
            println!("  tshark: {}", args.join(" "));
            figures.push(fig(
                format!("`report` against `tshark -T fields`, {n} packets: times faster (wall)"),
                format!("{faster:.1}"),
            ));
        }
    }
    if let [(n1, r1), (n2, r2)] = rss[..] {
        println!(
            "peak RSS of report: {r1} KiB at {n1} packets, {r2} KiB at {n2} packets (x{:.2} for x{:.0} packets)",
            r2 as f64 / r1 as f64,
            n2 as f64 / n1 as f64
        );
        figures.push(fig(
            format!("peak RSS of `report`, {n1} and {n2} packets"),
            format!("{r1} KiB, {r2} KiB"),
        ));
    }
    figures.extend(instruction_counts(
        ws,
        a,
        &bin,
        &walk,
        pgo.as_deref(),
        before.as_deref(),
        command,
    )?);
    Ok(figures)
}

/// The programs a round runs.
struct Programs<'a> {
    bin: &'a Path,
    pgo: Option<&'a Path>,
    walk: &'a Path,
    reference: &'a Path,
    before: Option<&'a Path>,
    thread_stats: &'a Path,
}

fn rounds_on(rounds: usize, capture: &Path, p: &Programs<'_>) -> anyhow::Result<Rounds> {
    let f = capture.to_string_lossy();
    let report = ["report", "--json", "--no-progress", &f];
    let lint = ["lint", "--json", "--no-progress", &f];
    let mut r = Rounds::default();
    for i in 0..rounds {
        // With BEFORE, the two versions run back to back, the other one
        // first in every second round.
        if let Some(b) = p.before
            && i % 2 == 1
        {
            r.before.push(measure(b, &report)?);
        }
        r.report.push(measure(p.bin, &report)?);
        r.lint.push(measure(p.bin, &lint)?);
        if let Some(b) = p.before
            && i % 2 == 0
        {
            r.before.push(measure(b, &report)?);
        }
        if let Some(pgo) = p.pgo {
            r.pgo.push(measure(pgo, &report)?);
        }
        r.walk.push(measure(p.walk, &[&f])?);
        r.reference.push(measure(p.reference, &[&f])?);
        // How the two threads shared the work, from a run in the same phase
        // of the host (untimed).
        let out = proc::stdout_of(Command::new(p.thread_stats).arg(capture))?;
        r.threads
            .push(String::from_utf8_lossy(&out).trim().to_string());
    }
    Ok(r)
}

fn spread_of(a: &[f64], b: &[f64]) -> String {
    spread(&crate::stats::ratios(a, b)).map_or("-".into(), |s| s.to_string())
}

/// Which thread set the wall time, round by round: raw batches (decoded on
/// the engine thread) and each thread's waits.
fn threads_line(lines: &[String]) -> String {
    let mut raw = Vec::new();
    let mut parser = Vec::new();
    let mut engine = Vec::new();
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        let value = |key: &str| -> f64 {
            words
                .windows(2)
                .find(|w| w[0] == key)
                .and_then(|w| w[1].parse().ok())
                .unwrap_or(0.0)
        };
        let batches = value("batches").max(1.0);
        raw.push(format!("{:.0}%", 100.0 * value("raw") / batches));
        parser.push(format!("{:.2}", value("parser_wait_ns") / 1e9));
        engine.push(format!("{:.2}", value("engine_wait_ns") / 1e9));
    }
    format!(
        "raw batches {}; the parsing thread waited {} s, the engine thread {} s",
        raw.join(" "),
        parser.join(" "),
        engine.join(" ")
    )
}

/// The tshark command line without the file: the MetaRoCE plugin when it
/// is built (as uid 65534 when root: root tshark ignores
/// WIRESHARK_PLUGIN_DIR), else UDP 4794 decoded as `data`.
fn tshark_command(ws: &Workspace) -> anyhow::Result<Option<Tshark>> {
    if which("tshark").is_none() {
        return Ok(None);
    }
    let plugin = ws.release("libmetaroce_dissector.so");
    if !plugin.is_file() {
        let args = [
            "tshark",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "udp.srcport",
            "-d",
            "udp.port==4794,data",
        ];
        return Ok(Some(Tshark {
            args: args.map(String::from).to_vec(),
            _dirs: None,
        }));
    }
    let dirs = PluginDirs::new(Some(&plugin))?;
    let mut args = dirs.tshark_prefix();
    args.extend(
        [
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "udp.srcport",
            "-e",
            "metaroce.psn",
        ]
        .map(String::from),
    );
    Ok(Some(Tshark {
        args,
        _dirs: Some(dirs),
    }))
}

/// A tshark command line, and the plugin folder it reads (kept while it
/// runs).
struct Tshark {
    args: Vec<String>,
    _dirs: Option<PluginDirs>,
}

/// Instructions per packet (cachegrind) of report, the one-thread analysis
/// (`walk --engine`, exact: no sharing of the decoding between threads),
/// the PGO build and the bare walk, on the small capture.
fn instruction_counts(
    ws: &Workspace,
    a: &AnalyzerArgs,
    bin: &Path,
    walk: &Path,
    pgo: Option<&Path>,
    before: Option<&Path>,
    command: &str,
) -> anyhow::Result<Vec<Figure>> {
    if which("valgrind").is_none() {
        println!(
            "instructions per packet: skipped (valgrind is not installed: apt-get install valgrind)"
        );
        return Ok(Vec::new());
    }
    let n = a.small;
    let f: PathBuf = ws.bulk_capture(&format!("bench-{n}.pcap"), n, &[])?;
    let fs = f.to_string_lossy();
    let per = |i: u64| i as f64 / n as f64;
    let report = instructions(bin, &["report", "--json", "--no-progress", &fs])?;
    let engine = instructions(walk, &[&fs, "--engine"])?;
    let bare = instructions(walk, &[&fs])?;
    let pgo_engine = match pgo {
        Some(p) => Some(instructions(
            &p.parent().unwrap_or(p).join("examples/walk"),
            &[&fs, "--engine"],
        )?),
        None => None,
    };
    println!(
        "instructions per packet ({n} packets): report {:.0}, one-thread analysis {:.0}{}, bare walk {:.0} (report x{:.2})",
        per(report),
        per(engine),
        pgo_engine.map_or(String::new(), |p| format!(" (PGO build {:.0})", per(p))),
        per(bare),
        report as f64 / bare as f64
    );
    let mut figures = vec![Figure {
        command: command.to_string(),
        ..Figure::new(
            "analyzer",
            format!(
                "instructions per packet, {n} packets: `report`; one-thread analysis; bare walk"
            ),
            format!("{:.0}; {:.0}; {:.0}", per(report), per(engine), per(bare)),
        )
    }];
    if let Some(p) = pgo_engine {
        figures.push(Figure {
            command: command.to_string(),
            ..Figure::new(
                "analyzer",
                format!(
                    "instructions per packet of the one-thread analysis, PGO build, {n} packets"
                ),
                format!("{:.0}", per(p)),
            )
        });
    }
    if let Some(before) = before {
        let b = instructions(before, &["report", "--json", "--no-progress", &fs])?;
        println!(
            "instructions per packet of report, BEFORE: {:.0} (this build x{:.3} of it)",
            per(b),
            report as f64 / b as f64
        );
        let before_walk = before.parent().map(|d| d.join("walk"));
        if let Some(w) = before_walk.filter(|w| w.is_file()) {
            let be = instructions(&w, &[&fs, "--engine"])?;
            println!(
                "instructions per packet of the one-thread analysis (exact), BEFORE: {:.0} (this build x{:.3} of it)",
                per(be),
                engine as f64 / be as f64
            );
        }
    }
    Ok(figures)
}
