//! Running things: cargo builds, and the measured runs of a benchmark
//! (wall and CPU time and peak RSS through GNU time, instructions through
//! cachegrind, CPU time through perf).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::stats;

/// The workspace: its root and its target dir.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
    pub target: PathBuf,
}

impl Workspace {
    /// The workspace xtask belongs to; the target dir as cargo sets it.
    pub fn find() -> anyhow::Result<Workspace> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("xtask has no parent folder")?
            .to_path_buf();
        let target = match std::env::var_os("CARGO_TARGET_DIR") {
            Some(dir) => root.join(dir),
            None => root.join("target"),
        };
        Ok(Workspace { root, target })
    }

    pub fn release(&self, name: &str) -> PathBuf {
        self.target.join("release").join(name)
    }

    pub fn example(&self, name: &str) -> PathBuf {
        self.target.join("release/examples").join(name)
    }

    /// A folder for the benchmarks' inputs (not in git).
    pub fn bench_dir(&self) -> anyhow::Result<PathBuf> {
        let dir = self.target.join("bench");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(dir)
    }

    /// `cargo build --release --quiet ARGS` in the workspace.
    pub fn build(&self, args: &[&str]) -> anyhow::Result<()> {
        let status = Command::new(cargo())
            .current_dir(&self.root)
            .args(["build", "--release", "--quiet"])
            .args(args)
            .status()
            .context("running cargo")?;
        if !status.success() {
            bail!("cargo build --release {} failed", args.join(" "));
        }
        Ok(())
    }

    /// The bulk capture of `fixtures-generator bulk` with `args` after the
    /// packet count, written once under target/bench/ as `name`.
    pub fn bulk_capture(&self, name: &str, packets: u64, args: &[&str]) -> anyhow::Result<PathBuf> {
        let path = self.bench_dir()?.join(name);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
            return Ok(path);
        }
        let mut cmd = Command::new(self.release("fixtures-generator"));
        cmd.arg("bulk")
            .arg(&path)
            .arg(packets.to_string())
            .args(args);
        run_quiet(&mut cmd)?;
        Ok(path)
    }
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Fails with what to install when `tool` is not on the PATH.
pub fn require(tool: &str, bench: &str) -> anyhow::Result<()> {
    if which(tool).is_none() {
        bail!("bench {bench}: {tool} is needed (scripts/setup.sh installs it)");
    }
    Ok(())
}

pub fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

/// How `cmd` is shown in the output.
pub fn shown(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` with standard output discarded; its standard error is given
/// in the error if it fails.
pub fn run_quiet(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {}", shown(cmd)))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            shown(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Runs `cmd` and returns its standard output.
pub fn stdout_of(cmd: &mut Command) -> anyhow::Result<Vec<u8>> {
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {}", shown(cmd)))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            shown(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

/// One measured run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    pub wall_s: f64,
    pub cpu_s: f64,
    pub max_rss_kib: u64,
}

/// Runs `program args` under GNU time with standard output discarded. The
/// wall time is this process's nanosecond clock around it (time(1) rounds
/// it to 10 ms).
pub fn measure(program: &Path, args: &[&str]) -> anyhow::Result<Run> {
    measure_into(program, args, None)
}

/// [`measure`], with standard output written to `stdout` if given.
pub fn measure_into(program: &Path, args: &[&str], stdout: Option<&Path>) -> anyhow::Result<Run> {
    let mut cmd = Command::new("/usr/bin/time");
    cmd.arg("-v").arg(program).args(args);
    let out_file = match stdout {
        Some(p) => Stdio::from(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        ),
        None => Stdio::null(),
    };
    let start = Instant::now();
    let out = cmd
        .stdout(out_file)
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {}", shown(&cmd)))?;
    let wall_s = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("{} failed ({}): {stderr}", shown(&cmd), out.status);
    }
    let t = stats::time_verbose(&stderr)
        .with_context(|| format!("no GNU time report from {}", shown(&cmd)))?;
    Ok(Run {
        wall_s,
        cpu_s: t.cpu_s,
        max_rss_kib: t.max_rss_kib,
    })
}

/// Instructions `program args` executes (cachegrind, no cache simulation;
/// standard output discarded).
pub fn instructions(program: &Path, args: &[&str]) -> anyhow::Result<u64> {
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
    ])
    .arg(program)
    .args(args);
    let out = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {}", shown(&cmd)))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    stats::cachegrind_instructions(&stderr)
        .with_context(|| format!("no instruction count from {}: {stderr}", shown(&cmd)))
}

/// CPU milliseconds of `program args`, every thread (perf's task-clock).
pub fn cpu_ms(program: &Path, args: &[&str]) -> anyhow::Result<f64> {
    let mut cmd = Command::new("perf");
    cmd.args(["stat", "-x,", "-e", "task-clock"])
        .arg(program)
        .args(args);
    let out = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {}", shown(&cmd)))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    stats::perf_task_clock_ms(&stderr)
        .with_context(|| format!("no task-clock from {}: {stderr}", shown(&cmd)))
}

/// Drops the file's cached pages and reads it back, so readahead caches it
/// in large folios as reading from disk leaves it (docs/performance.md);
/// every program then reads the same cached file.
pub fn warm_page_cache(f: &Path) -> anyhow::Result<()> {
    run_quiet(Command::new("dd").arg(format!("if={}", f.display())).args([
        "iflag=nocache",
        "count=0",
        "status=none",
    ]))?;
    std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
    Ok(())
}

/// The load average (1, 5, 15 minutes), to report the conditions.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A folder removed when dropped.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new folder under `parent` (the system's temporary folder if
    /// `None`), named after `what` and this process.
    pub fn new(parent: Option<&Path>, what: &str) -> anyhow::Result<TempDir> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        for i in 0..1000 {
            let dir = parent.join(format!("xtask-{what}-{}-{i}", std::process::id()));
            if std::fs::create_dir(&dir).is_ok() {
                return Ok(TempDir(dir));
            }
        }
        bail!("cannot create a temporary folder in {}", parent.display())
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Makes `path` readable (and its folders enterable) by every user: tshark
/// runs as uid 65534 when the benchmark runs as root.
pub fn chmod(path: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {mode:o} {}", path.display()))
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
