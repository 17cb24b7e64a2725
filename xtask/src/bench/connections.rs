//! `bench connections`: how memory grows with connections and frames, for
//! `metaroce-analyze report` and for tshark with the plugin (and tshark
//! without it, the floor). Each series `CONNECTIONS:FRAMES[:stream]` is a
//! bulk capture of that many connections (5 ‰ DATA loss, 64-byte payloads);
//! `stream` pipes it through a FIFO, so the file never exists (the
//! analyzer only: tshark reads it twice). Per run: peak RSS, wall and CPU
//! time, rates, and from the report the directions and paths held, the
//! bytes per direction and per path above a one-connection capture's RSS;
//! then, per program and connection count, the RSS growth per frame between
//! two frame counts (it must be about zero: state is bounded by flows).
//! `--before REV` adds another version's analyzer and plugin.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::Value;

use crate::bench::plugin::PluginDirs;
use crate::builds;
use crate::figures::Figure;
use crate::proc::{self, Run, TempDir, Workspace, chmod, measure, measure_into};

#[derive(Args, Debug)]
pub struct ConnectionsArgs {
    /// CONNECTIONS:FRAMES[:stream] [default: 1000:10000 10000:100000
    /// 100000:1000000 1000:1000000 1000:3000000 1000:100000000:stream].
    series: Vec<String>,
    #[arg(long, value_name = "REV")]
    before: Option<String>,
    #[arg(long, value_name = "COMMIT", requires = "before")]
    before_revert: Option<String>,
}

const DEFAULT_SERIES: [&str; 6] = [
    "1000:10000",
    "10000:100000",
    "100000:1000000",
    "1000:1000000",
    "1000:3000000",
    "1000:100000000:stream",
];

enum Program {
    Analyzer(PathBuf),
    Tshark(PluginDirs, &'static str),
}

struct Series {
    spec: String,
    connections: u64,
    frames: u64,
    stream: bool,
}

fn parse_series(s: &str) -> anyhow::Result<Series> {
    let parts: Vec<&str> = s.split(':').collect();
    let num = |p: &str| {
        p.parse::<u64>()
            .with_context(|| format!("series {s}: {p} is not a number"))
    };
    match parts[..] {
        [c, f] => Ok(Series {
            spec: s.to_string(),
            connections: num(c)?,
            frames: num(f)?,
            stream: false,
        }),
        [c, f, "stream"] => Ok(Series {
            spec: s.to_string(),
            connections: num(c)?,
            frames: num(f)?,
            stream: true,
        }),
        _ => bail!("series {s}: expected CONNECTIONS:FRAMES[:stream]"),
    }
}

/// What a capture's state holds, from the report: directions, paths,
/// histograms past 128 samples (dense) and their counts' bytes, stalls.
fn held(report: &Value) -> (usize, usize, usize, f64, usize) {
    let empty = Vec::new();
    let ds = report["directions"].as_array().unwrap_or(&empty);
    let counts_bytes = |h: &Value| {
        let max = h["max"].as_u64().unwrap_or(0);
        let (mut buckets, mut untrackable) = (1u64, 2048u64);
        while untrackable <= max {
            untrackable <<= 1;
            buckets += 1;
        }
        (buckets + 1) * 1024 * 8
    };
    let mut dense = Vec::new();
    let mut paths = 0;
    let mut stalls = 0;
    for d in ds {
        let mut hists = vec![&d["fabric_rtt_ns"], &d["msg_delivery_ns"]];
        if let Some(by_op) = d["msg_completion_by_op_ns"].as_object() {
            hists.extend(by_op.values());
        }
        let ps = d["paths"].as_array().unwrap_or(&empty);
        paths += ps.len();
        hists.extend(ps.iter().map(|p| &p["ack_rtt_ns"]));
        stalls += d["stalls"].as_array().map_or(0, Vec::len);
        dense.extend(
            hists
                .into_iter()
                .filter(|h| h["count"].as_u64().unwrap_or(0) > 128)
                .map(counts_bytes),
        );
    }
    let dense_mib = dense.iter().sum::<u64>() as f64 / f64::from(1 << 20);
    (ds.len(), paths, dense.len(), dense_mib, stalls)
}

pub fn run(ws: &Workspace, a: &ConnectionsArgs, command: &str) -> anyhow::Result<Vec<Figure>> {
    proc::require("tshark", "connections")?;
    ws.build(&["-p", "fixtures-generator"])?;
    ws.build(&["-p", "metaroce-analyze", "--no-default-features"])?;
    ws.build(&["-p", "metaroce-dissector", "--lib"])?;
    let series: Vec<Series> = if a.series.is_empty() {
        DEFAULT_SERIES
            .iter()
            .map(|s| parse_series(s))
            .collect::<anyhow::Result<_>>()?
    } else {
        a.series
            .iter()
            .map(|s| parse_series(s))
            .collect::<anyhow::Result<_>>()?
    };
    let mut programs: Vec<(&'static str, Program)> =
        vec![("report", Program::Analyzer(ws.release("metaroce-analyze")))];
    let before = match &a.before {
        Some(rev) => Some(builds::build_rev(ws, rev, a.before_revert.as_deref())?),
        None => None,
    };
    if let Some(b) = &before {
        programs.push(("before", Program::Analyzer(b.join("metaroce-analyze"))));
    }
    programs.push((
        "tshark",
        Program::Tshark(
            PluginDirs::new(Some(&ws.release("libmetaroce_dissector.so")))?,
            "metaroce.analysis.flow",
        ),
    ));
    if let Some(b) = &before {
        programs.push((
            "tshark-before",
            Program::Tshark(
                PluginDirs::new(Some(&b.join("libmetaroce_dissector.so")))?,
                "metaroce.analysis.flow",
            ),
        ));
    }
    programs.push((
        "tshark-bare",
        Program::Tshark(PluginDirs::new(None)?, "frame.number"),
    ));
    for (name, p) in &programs {
        if let Program::Tshark(d, _) = p
            && d.plugin_loads()? != (*name != "tshark-bare")
        {
            bail!(
                "{name}: the plugin does{} load",
                if *name == "tshark-bare" { "" } else { " not" }
            );
        }
    }
    let work = TempDir::new(None, "connections")?;
    chmod(work.path(), 0o755)?;
    let out_json = work.path().join("out.json");
    let run = |p: &Program, capture: &Path| -> anyhow::Result<Run> {
        let c = capture.to_string_lossy();
        match p {
            Program::Analyzer(bin) => {
                // Its report is read afterwards (what the state holds).
                measure_into(bin, &["report", "--json", &c], Some(&out_json))
            }
            Program::Tshark(d, field) => {
                let prefix = d.tshark_prefix();
                let mut args: Vec<&str> = prefix[1..].iter().map(String::as_str).collect();
                args.extend(["-n", "-2", "-r", &c, "-T", "fields", "-e", field]);
                measure(Path::new(&prefix[0]), &args)
            }
        }
    };
    let generator = ws.release("fixtures-generator");
    let bulk = |path: &Path, frames: u64, conns: u64| {
        let mut cmd = Command::new(&generator);
        cmd.arg("bulk").arg(path).args([
            frames.to_string(),
            conns.to_string(),
            "5".into(),
            "64".into(),
        ]);
        cmd
    };
    // Each program's RSS on a one-connection capture: what holds no state.
    let one = work.path().join("one.pcap");
    proc::run_quiet(
        Command::new(&generator)
            .arg("bulk")
            .arg(&one)
            .args(["10", "1", "5", "64"]),
    )?;
    chmod(&one, 0o644)?;
    let mut base = BTreeMap::new();
    for (name, p) in &programs {
        base.insert(*name, run(p, &one)?.max_rss_kib);
    }
    println!(
        "{:<22} {:<13} {:>11} {:>8} {:>8} {:>11} {:>13} {:>10} {:>9} {:>12} {:>8}",
        "capture",
        "program",
        "peak RSS MB",
        "wall s",
        "CPU s",
        "frames/s",
        "frames/CPU-s",
        "directions",
        "paths",
        "B/direction",
        "B/path"
    );
    let mut rss_at: BTreeMap<(&str, u64), (u64, u64)> = BTreeMap::new();
    let mut slopes = Vec::new();
    let mut figures = Vec::new();
    for s in &series {
        let spec = s.spec.as_str();
        let pcap = work
            .path()
            .join(format!("c{}_f{}.pcap", s.connections, s.frames));
        if !s.stream {
            proc::run_quiet(&mut bulk(&pcap, s.frames, s.connections))?;
            chmod(&pcap, 0o644)?;
        }
        let (mut dirs, mut paths) = (0, 0);
        for (name, p) in &programs {
            let mut writer = None;
            if s.stream {
                if matches!(p, Program::Tshark(..)) {
                    continue;
                }
                let _ = std::fs::remove_file(&pcap);
                proc::run_quiet(Command::new("mkfifo").arg(&pcap))?;
                writer = Some(
                    bulk(&pcap, s.frames, s.connections)
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .spawn()?,
                );
            }
            let r = run(p, &pcap)?;
            if let Some(mut w) = writer
                && !w.wait()?.success()
            {
                bail!("the generator failed on {spec}");
            }
            if *name == "report" {
                let report: Value = serde_json::from_slice(&std::fs::read(&out_json)?)?;
                let (d, ps, dense, dense_mib, stalls) = held(&report);
                (dirs, paths) = (d, ps);
                print_row(spec, name, r, s.frames, dirs, paths, base[name]);
                println!(
                    "    its report: {dense} histograms past 128 samples (their counts {dense_mib:.1} MiB by their ranges), {stalls} stall records kept"
                );
                figures.push(Figure {
                    command: command.to_string(),
                    ..Figure::new(
                        "connections",
                        format!("`report`, {} connections, {} frames{}: peak RSS MB; bytes per direction", s.connections, s.frames, if s.stream { " (FIFO)" } else { "" }),
                        format!("{:.1}; {:.0}", r.max_rss_kib as f64 / 1024.0, held_bytes(r.max_rss_kib, base[name]) / dirs.max(1) as f64),
                    )
                });
            } else {
                print_row(spec, name, r, s.frames, dirs, paths, base[name]);
            }
            if let Some(&(f0, k0)) = rss_at.get(&(*name, s.connections)) {
                slopes.push((*name, s.connections, f0, s.frames, k0, r.max_rss_kib));
            }
            rss_at.insert((*name, s.connections), (s.frames, r.max_rss_kib));
        }
        let _ = std::fs::remove_file(&pcap);
    }
    for (p, c, f0, f1, k0, k1) in slopes {
        let grew_kib = k1 as f64 - k0 as f64;
        let per_frame = grew_kib * 1024.0 / (f1 as f64 - f0 as f64);
        println!(
            "{p}, {c} connections, {f0} -> {f1} frames: peak RSS +{:.1} MB, {per_frame:.0} bytes per frame",
            grew_kib / 1024.0
        );
        if p == "report" {
            figures.push(Figure {
                command: command.to_string(),
                ..Figure::new("connections", format!("`report`, {c} connections, {f0} -> {f1} frames: peak RSS growth per frame (bytes)"), format!("{per_frame:.0}"))
            });
        }
    }
    Ok(figures)
}

fn held_bytes(kib: u64, base_kib: u64) -> f64 {
    (kib.saturating_sub(base_kib) * 1024) as f64
}

fn print_row(spec: &str, p: &str, r: Run, frames: u64, dirs: usize, paths: usize, base: u64) {
    let held = held_bytes(r.max_rss_kib, base);
    let rate = |secs: f64| {
        if secs > 0.0 {
            format!("{:.0}", frames as f64 / secs)
        } else {
            "inf".into()
        }
    };
    let (per_dir, per_path) = if p == "tshark-bare" {
        ("-".to_string(), "-".to_string())
    } else {
        (
            format!("{:.0}", held / dirs.max(1) as f64),
            format!("{:.0}", held / paths.max(1) as f64),
        )
    };
    println!(
        "{spec:<22} {p:<13} {:>11.1} {:>8.2} {:>8.2} {:>11} {:>13} {dirs:>10} {paths:>9} {per_dir:>12} {per_path:>8}",
        r.max_rss_kib as f64 / 1024.0,
        r.wall_s,
        r.cpu_s,
        rate(r.wall_s),
        rate(r.cpu_s)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_parse() {
        let s = parse_series("1000:100000000:stream").unwrap();
        assert_eq!(
            (s.connections, s.frames, s.stream),
            (1000, 100_000_000, true)
        );
        assert!(!parse_series("10:20").unwrap().stream);
        assert!(parse_series("10").is_err());
        assert!(parse_series("10:x").is_err());
        assert!(parse_series("10:20:file").is_err());
    }

    #[test]
    fn held_state_is_read_from_the_report() {
        let hist = |count: u64, max: u64| serde_json::json!({"count": count, "max": max});
        let report = serde_json::json!({"directions": [{
            "fabric_rtt_ns": hist(200, 1000),
            "msg_delivery_ns": hist(5, 10),
            "msg_completion_by_op_ns": {"write": hist(129, 4096)},
            "paths": [{"ack_rtt_ns": hist(0, 0)}, {"ack_rtt_ns": hist(1000, 10)}],
            "stalls": [{}, {}],
        }]});
        let (dirs, paths, dense, _, stalls) = held(&report);
        assert_eq!((dirs, paths, dense, stalls), (1, 2, 3, 2));
    }
}
