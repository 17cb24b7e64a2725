//! `bench plugin`: tshark with the MetaRoCE plugin against tshark's
//! built-in InfiniBand (RoCEv2) dissector, on captures with the same number
//! of frames and frame sizes (the `bench_captures` example), all with `-T
//! fields` and five fields. The RoCEv2 twin carries what the MetaRoCE
//! packets carry (a DATA WRITE names its remote address and key in every
//! packet: RDMA WRITE Only with a RETH); the BTH-only twin (Write/Send
//! Middle) is the InfiniBand dissector's cheapest case. Also timed: the
//! MetaRoCE capture with the lint off (the default run) and on, with the
//! sequence analysis off, and as plain data (the floor). The InfiniBand
//! rows run with `--disable-protocol rocev2` (the InfiniBand dissector
//! alone); the RoCEv2 row `ib_an` times the same WRITE Only twin with the
//! plugin's RoCEv2 analysis at its defaults (analysis and RC-* lint on), and
//! its ratio to the InfiniBand dissector alone is printed per line.
//!
//! `--wireshark LINE` is `host` (the installed Wireshark) or 4.4 / 4.6: the
//! plugin is then built against that line's Debian root
//! (scripts/wireshark-root.sh, which drives debootstrap and chroot) and
//! timed against that root's tshark. Runs are interleaved and the best of
//! `--repeat` rounds is kept, for wall and CPU time. `--instructions` also
//! counts instructions per packet (cachegrind): the difference between runs
//! over 12,000 and 2,000 packets divided by 10,000, so tshark's start-up
//! cancels out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use clap::Args;

use crate::figures::Figure;
use crate::proc::{self, TempDir, Workspace, chmod, is_root, run_quiet, stdout_of};
use crate::stats::{self, spread};

#[derive(Args, Debug)]
pub struct PluginArgs {
    /// host, 4.4 or 4.6 (repeatable; default host).
    #[arg(long = "wireshark", value_name = "LINE")]
    lines: Vec<String>,
    #[arg(default_value_t = 200_000)]
    packets: u64,
    /// DATA payload bytes.
    #[arg(default_value_t = 256)]
    payload: u32,
    /// Rounds; the best is kept.
    #[arg(default_value_t = 3)]
    repeat: usize,
    /// Count instructions per packet too (valgrind).
    #[arg(long)]
    instructions: bool,
}

/// A plugin folder and a home for tshark, readable by uid 65534.
pub struct PluginDirs {
    dir: TempDir,
    /// The folder as tshark sees it (inside a chroot: its path there).
    inner: PathBuf,
    /// The command that runs tshark (without arguments).
    prefix: Vec<String>,
}

impl PluginDirs {
    /// The host's tshark with `plugin` (none: no plugin of ours).
    pub fn new(plugin: Option<&Path>) -> anyhow::Result<PluginDirs> {
        let dir = TempDir::new(None, "tshark")?;
        let inner = dir.path().to_path_buf();
        let home = inner.join("home");
        let plugins = inner.join("plugins");
        let mut prefix: Vec<String> = Vec::new();
        if is_root() {
            prefix.extend(
                [
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                ]
                .map(String::from),
            );
        }
        prefix.extend([
            "env".to_string(),
            format!("HOME={}", home.display()),
            format!("WIRESHARK_PLUGIN_DIR={}", plugins.display()),
            "tshark".to_string(),
        ]);
        let d = PluginDirs { dir, inner, prefix };
        d.install(&major_minor(&tshark_version(&d)?), plugin)?;
        Ok(d)
    }

    /// Writes the plugin folder for Wireshark `mm` (X.Y).
    fn install(&self, mm: &str, plugin: Option<&Path>) -> anyhow::Result<()> {
        let root = self.dir.path();
        chmod(root, 0o755)?;
        let epan = root.join("plugins").join(mm).join("epan");
        std::fs::create_dir_all(&epan)?;
        std::fs::create_dir_all(root.join("home"))?;
        chmod(&root.join("home"), 0o777)?;
        for d in [
            root.join("plugins"),
            root.join("plugins").join(mm),
            epan.clone(),
        ] {
            chmod(&d, 0o755)?;
        }
        if let Some(p) = plugin {
            let to = epan.join("libmetaroce_dissector.so");
            std::fs::copy(p, &to).with_context(|| format!("copying {}", p.display()))?;
            chmod(&to, 0o755)?;
        }
        Ok(())
    }

    pub fn tshark_prefix(&self) -> Vec<String> {
        self.prefix.clone()
    }

    /// Whether our plugin loads in this tshark.
    pub fn plugin_loads(&self) -> anyhow::Result<bool> {
        let out = stdout_of(self.tshark().args(["-G", "plugins"]))?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .any(|l| l.starts_with("libmetaroce_dissector.so")))
    }

    pub fn tshark(&self) -> Command {
        let mut cmd = Command::new(&self.prefix[0]);
        cmd.args(&self.prefix[1..]);
        cmd
    }
}

fn tshark_version(d: &PluginDirs) -> anyhow::Result<String> {
    let out = stdout_of(d.tshark().arg("--version"))?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// `4.4` of `TShark (Wireshark) 4.4.19 (...)`.
fn major_minor(version_line: &str) -> String {
    let v = version_line
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .unwrap_or_default();
    v.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// The runs, in the order of a round.
const RUNS: [(&str, &str); 7] = [
    ("mr", "MetaRoCE plugin (decode + analysis)"),
    ("mr_lint", "MetaRoCE plugin (decode + analysis + lint)"),
    ("mr_noan", "MetaRoCE plugin (decode only)"),
    ("ib", "InfiniBand built-in, twin (WRITE Only+RETH)"),
    ("ib_an", "InfiniBand + plugin's RoCEv2 analysis, twin"),
    ("ib_bth", "InfiniBand built-in, BTH-only twin"),
    ("data", "MetaRoCE capture as plain data (floor)"),
];

fn run_args(run: &str, inner: &Path) -> Vec<String> {
    let f = |name: &str| inner.join(name).to_string_lossy().into_owned();
    let mr_fields = [
        "-e",
        "frame.number",
        "-e",
        "metaroce.type",
        "-e",
        "metaroce.psn",
        "-e",
        "metaroce.ev",
        "-e",
        "metaroce.data.msg_id",
    ];
    let ib_fields = [
        "-e",
        "frame.number",
        "-e",
        "infiniband.bth.opcode",
        "-e",
        "infiniband.bth.psn",
        "-e",
        "infiniband.bth.destqp",
        "-e",
        "udp.srcport",
    ];
    let mut a: Vec<String> = vec!["-n".into(), "-r".into()];
    match run {
        "mr" => a.extend([
            f("metaroce.pcap"),
            "-o".into(),
            "metaroce.lint:FALSE".into(),
        ]),
        "mr_lint" => a.push(f("metaroce.pcap")),
        "mr_noan" => a.extend([
            f("metaroce.pcap"),
            "-o".into(),
            "metaroce.analyze:FALSE".into(),
        ]),
        // The InfiniBand dissector alone: the plugin's RoCEv2 analysis
        // (a post-dissector, on by default) disabled.
        "ib" => a.extend([
            f("rocev2.pcap"),
            "--disable-protocol".into(),
            "rocev2".into(),
        ]),
        "ib_an" => a.push(f("rocev2.pcap")),
        "ib_bth" => a.extend([
            f("rocev2-bth-only.pcap"),
            "--disable-protocol".into(),
            "rocev2".into(),
        ]),
        _ => a.extend([
            f("metaroce.pcap"),
            "--disable-protocol".into(),
            "metaroce".into(),
        ]),
    }
    a.extend(["-T".into(), "fields".into()]);
    match run {
        "ib" | "ib_an" | "ib_bth" => a.extend(ib_fields.map(String::from)),
        "data" => a.extend(
            ["-e", "frame.number", "-e", "udp.srcport", "-e", "data.len"].map(String::from),
        ),
        _ => a.extend(mr_fields.map(String::from)),
    }
    a
}

/// One Wireshark line's setup: where tshark runs and sees the files.
fn setup_line(ws: &Workspace, line: &str) -> anyhow::Result<(PluginDirs, PathBuf)> {
    let root_script = ws.root.join("scripts/wireshark-root.sh");
    if line == "host" {
        ws.build(&[
            "-p",
            "metaroce-dissector",
            "--lib",
            "--example",
            "bench_captures",
        ])?;
        let d = PluginDirs::new(Some(&ws.release("libmetaroce_dissector.so")))?;
        return Ok((d, ws.target.join("release")));
    }
    let status = Command::new(&root_script)
        .arg(line)
        .args([
            "cargo",
            "build",
            "--release",
            "--quiet",
            "-p",
            "metaroce-dissector",
            "--lib",
            "--example",
            "bench_captures",
        ])
        .status()?;
    if !status.success() {
        bail!("building the plugin for Wireshark {line} failed");
    }
    let release = ws.root.join(format!("target/wireshark-{line}/release"));
    let ws_root = PathBuf::from(
        String::from_utf8_lossy(&stdout_of(Command::new(&root_script).arg(line))?).trim(),
    );
    let dir = TempDir::new(Some(&ws_root.join("tmp")), "bench")?;
    let inner = Path::new("/tmp").join(dir.path().file_name().context("a temporary folder")?);
    // /proc mounted in the root (valgrind needs it), in a mount namespace
    // of the command's own.
    let mut prefix: Vec<String> = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount -t proc proc \"$1/proc\" && exec chroot --userspec=65534:65534 \"$@\"",
        "sh",
    ]
    .map(String::from)
    .to_vec();
    prefix.push(ws_root.to_string_lossy().into_owned());
    prefix.extend([
        "env".to_string(),
        format!("HOME={}", inner.join("home").display()),
        format!("WIRESHARK_PLUGIN_DIR={}", inner.join("plugins").display()),
        "tshark".to_string(),
    ]);
    let d = PluginDirs { dir, inner, prefix };
    d.install(line, Some(&release.join("libmetaroce_dissector.so")))?;
    Ok((d, release))
}

pub fn run(ws: &Workspace, a: &PluginArgs, command: &str) -> anyhow::Result<Vec<Figure>> {
    let lines = if a.lines.is_empty() {
        vec!["host".to_string()]
    } else {
        a.lines.clone()
    };
    let mut figures = Vec::new();
    let mut summary = Vec::new();
    let mut isummary = Vec::new();
    if a.instructions && a.packets < u64::from(INSTRUCTIONS_TO) {
        bail!(
            "--instructions counts packets {INSTRUCTIONS_FROM}..{INSTRUCTIONS_TO}: it needs at least {INSTRUCTIONS_TO} packets"
        );
    }
    for line in &lines {
        if !["host", "4.4", "4.6"].contains(&line.as_str()) {
            bail!("--wireshark takes host, 4.4 or 4.6");
        }
        let (d, release) = setup_line(ws, line)?;
        let work = d.dir.path();
        run_quiet(
            Command::new(release.join("examples/bench_captures"))
                .arg(work)
                .arg(a.packets.to_string())
                .arg(a.payload.to_string()),
        )?;
        for name in ["metaroce.pcap", "rocev2.pcap", "rocev2-bth-only.pcap"] {
            chmod(&work.join(name), 0o644)?;
        }
        let version = tshark_version(&d)?;
        println!(
            "== Wireshark {} ({line})",
            version
                .split_whitespace()
                .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
                .unwrap_or("?")
        );
        if !d.plugin_loads()? {
            bail!("the plugin does not load");
        }
        // The captures are what they claim to be.
        let count = |file: &str, filter: &str| -> anyhow::Result<usize> {
            let out = stdout_of(d.tshark().args(["-n", "-r"]).arg(d.inner.join(file)).args([
                "-c",
                "1000",
                "-Y",
                filter,
                "-T",
                "fields",
                "-e",
                "frame.number",
            ]))?;
            Ok(String::from_utf8_lossy(&out).lines().count())
        };
        let (n_mr, n_ib) = (
            count("metaroce.pcap", "metaroce")?,
            count(
                "rocev2.pcap",
                "infiniband.reth || infiniband.bth.opcode == 1",
            )?,
        );
        // The RoCEv2 row really runs the plugin's RoCEv2 analysis.
        let n_an = count("rocev2.pcap", "rocev2")?;
        if n_mr != 1000 || n_ib != 1000 || n_an != 1000 {
            bail!("captures not decoded as expected ({n_mr}, {n_ib}, {n_an})");
        }
        let mut wall: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut cpu: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for _ in 0..a.repeat.max(1) {
            for (run, _) in RUNS {
                let args = run_args(run, &d.inner);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let prefix: Vec<&str> = d.prefix[1..].iter().map(String::as_str).collect();
                let all: Vec<&str> = prefix.into_iter().chain(args).collect();
                let r = proc::measure(Path::new(&d.prefix[0]), &all)?;
                wall.entry(run).or_default().push(r.wall_s);
                cpu.entry(run).or_default().push(r.cpu_s);
            }
        }
        let best = |m: &BTreeMap<&str, Vec<f64>>, run: &str| spread(&m[run]).map_or(0.0, |s| s.min);
        let us = |t: f64| t * 1e6 / a.packets as f64;
        println!(
            "{:<44} {:>8} {:>10} {:>8} {:>10}",
            format!("run ({} packets, best of {})", a.packets, a.repeat),
            "wall s",
            "us/packet",
            "CPU s",
            "us/packet"
        );
        for (run, label) in RUNS {
            let (w, c) = (best(&wall, run), best(&cpu, run));
            println!(
                "{label:<44} {w:>8.3} {:>10.3} {c:>8.3} {:>10.3}",
                us(w),
                us(c)
            );
        }
        let ratio =
            |m: &BTreeMap<&str, Vec<f64>>, x: &str, y: &str| stats::ratio_of_lowest(&m[x], &m[y]);
        println!(
            "ratio MetaRoCE / RoCEv2 twin per packet: {:.2} (decode only: {:.2})",
            ratio(&wall, "mr", "ib"),
            ratio(&wall, "mr_noan", "ib")
        );
        println!(
            "same, CPU time: {:.2} (decode only: {:.2})",
            ratio(&cpu, "mr", "ib"),
            ratio(&cpu, "mr_noan", "ib")
        );
        println!(
            "against the BTH-only twin: wall {:.2}, CPU {:.2}",
            ratio(&wall, "mr", "ib_bth"),
            ratio(&cpu, "mr", "ib_bth")
        );
        println!(
            "RoCEv2: InfiniBand + analysis / InfiniBand alone per packet: wall {:.2}, CPU {:.2}",
            ratio(&wall, "ib_an", "ib"),
            ratio(&cpu, "ib_an", "ib")
        );
        println!(
            "load average: {} on {} CPUs",
            proc::load_average(),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        let mm = major_minor(&version);
        summary.push(format!(
            "{line:<8} {mm:<8} {:>10.2} {:>10.2} {:>18.2} {:>16.2}",
            ratio(&wall, "mr", "ib"),
            ratio(&cpu, "mr", "ib"),
            ratio(&wall, "mr_noan", "ib"),
            ratio(&cpu, "ib_an", "ib")
        ));
        let fig = |what: String, value: String| Figure {
            command: command.to_string(),
            ..Figure::new("plugin", what, value)
        };
        figures.push(fig(
            format!("Wireshark {line}: MetaRoCE plugin / InfiniBand twin, time per packet (wall; CPU), best of {}", a.repeat),
            format!("{:.2}; {:.2}", ratio(&wall, "mr", "ib"), ratio(&cpu, "mr", "ib")),
        ));
        figures.push(fig(
            format!("Wireshark {line}: RoCEv2, InfiniBand + plugin's analysis / InfiniBand alone, time per packet (wall; CPU), best of {}", a.repeat),
            format!("{:.2}; {:.2}", ratio(&wall, "ib_an", "ib"), ratio(&cpu, "ib_an", "ib")),
        ));
        figures.push(fig(
            format!(
                "Wireshark {line}: plugin, µs per packet (wall), {} packets",
                a.packets
            ),
            format!("{:.3}", us(best(&wall, "mr"))),
        ));
        if a.instructions {
            if line != "host" {
                let status = Command::new(ws.root.join("scripts/wireshark-root.sh"))
                    .args([line, "install", "valgrind"])
                    .status()?;
                if !status.success() {
                    bail!("installing valgrind in the {line} root failed");
                }
            } else {
                proc::require("valgrind", "plugin")?;
            }
            let mut ipp = BTreeMap::new();
            for (run, _) in RUNS {
                let lo = tshark_instructions(&d, INSTRUCTIONS_FROM, run)?;
                let hi = tshark_instructions(&d, INSTRUCTIONS_TO, run)?;
                ipp.insert(
                    run,
                    stats::per_unit_between(lo, hi, u64::from(INSTRUCTIONS_TO - INSTRUCTIONS_FROM)),
                );
            }
            println!(
                "instructions per packet (cachegrind, packets {}..{INSTRUCTIONS_TO}):",
                INSTRUCTIONS_FROM + 1
            );
            for (run, _) in RUNS {
                println!("  {run:<10} {:>8}", ipp[run]);
            }
            let r = |x: &str, y: &str| stats::ratio(ipp[x] as f64, ipp[y] as f64);
            println!(
                "ratio MetaRoCE / RoCEv2 twin in instructions: {:.2} (decode only: {:.2}); BTH-only twin: {:.2}",
                r("mr", "ib"),
                r("mr_noan", "ib"),
                r("mr", "ib_bth")
            );
            println!(
                "lint: analysis + lint / analysis alone in instructions: {:.2}",
                r("mr_lint", "mr")
            );
            println!(
                "RoCEv2: InfiniBand + analysis / InfiniBand alone in instructions: {:.2}",
                r("ib_an", "ib")
            );
            isummary.push(format!(
                "{line:<8} {mm:<8} {:>10.2} {:>12.2} {:>18.2} {:>16.2}",
                r("mr", "ib"),
                r("mr_noan", "ib"),
                r("mr", "ib_bth"),
                r("ib_an", "ib")
            ));
            figures.push(fig(
                format!("Wireshark {line}: instructions per packet, plugin; InfiniBand twin; plugin with lint"),
                format!("{}; {}; {}", ipp["mr"], ipp["ib"], ipp["mr_lint"]),
            ));
            figures.push(fig(
                format!("Wireshark {line}: RoCEv2 instructions per packet, InfiniBand alone; with the plugin's analysis; ratio"),
                format!("{}; {}; {:.2}", ipp["ib"], ipp["ib_an"], r("ib_an", "ib")),
            ));
        }
    }
    if lines.len() > 1 {
        println!(
            "\nMetaRoCE / RoCEv2 twin per packet, each line against its own InfiniBand dissector:"
        );
        println!(
            "{:<8} {:<8} {:>10} {:>10} {:>18} {:>16}",
            "line", "version", "wall", "CPU", "wall, no analysis", "RoCEv2 an. CPU"
        );
        for s in summary {
            println!("{s}");
        }
        if !isummary.is_empty() {
            println!("in instructions (cachegrind):");
            println!(
                "{:<8} {:<8} {:>10} {:>12} {:>18} {:>16}",
                "line", "version", "analysis", "decode only", "vs BTH-only twin", "RoCEv2 an./IB"
            );
            for s in isummary {
                println!("{s}");
            }
        }
    }
    Ok(figures)
}

/// Instructions per packet are counted between these packet counts, so
/// tshark's start-up cancels out.
const INSTRUCTIONS_FROM: u32 = 2000;
const INSTRUCTIONS_TO: u32 = 12000;

/// Instructions of one tshark run over the first `packets` packets.
fn tshark_instructions(d: &PluginDirs, packets: u32, run: &str) -> anyhow::Result<u64> {
    let out_inner = d.inner.join("home/cg.out");
    let out = d.dir.path().join("home/cg.out");
    let _ = std::fs::remove_file(&out);
    // The prefix without `tshark`, then valgrind running tshark.
    let prefix = &d.prefix[..d.prefix.len() - 1];
    let mut cmd = Command::new(&prefix[0]);
    cmd.args(&prefix[1..])
        .args(["valgrind", "--tool=cachegrind", "--cache-sim=no"])
        .arg(format!("--cachegrind-out-file={}", out_inner.display()))
        .args(["tshark", "-c", &packets.to_string()])
        .args(run_args(run, &d.inner));
    run_quiet(&mut cmd)?;
    let text =
        std::fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?;
    stats::cachegrind_file_summary(&text)
        .with_context(|| format!("no summary in {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_cut_to_their_line() {
        assert_eq!(
            major_minor("TShark (Wireshark) 4.4.19 (Git v4.4.19 packaged as 4.4.19-1)"),
            "4.4"
        );
        assert_eq!(major_minor("TShark (Wireshark) 4.6.9."), "4.6");
    }
}
