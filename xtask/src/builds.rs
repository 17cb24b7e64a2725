//! Builds the benchmarks compare: another version of the analyzer and its
//! plugin (`build-rev`), and the profile-guided build (`pgo`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::proc::{Workspace, run_quiet, stdout_of, which};

fn git(root: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(root);
    cmd
}

/// A revision as a commit id (`:/TEXT^{commit}` would search for
/// `TEXT^{commit}`: resolve, then peel).
fn commit(root: &Path, rev: &str) -> anyhow::Result<String> {
    let sha = stdout_of(git(root).args(["rev-parse", "--verify", "--quiet", rev]))
        .with_context(|| format!("build-rev: {rev} is not a commit"))?;
    let sha = String::from_utf8_lossy(&sha).trim().to_string();
    let peeled = stdout_of(
        git(root)
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("{sha}^{{commit}}")),
    )
    .with_context(|| format!("build-rev: {rev} is not a commit"))?;
    Ok(String::from_utf8_lossy(&peeled).trim().to_string())
}

/// Removes the temporary worktree and folder of a `build-rev`, whatever
/// happened.
struct TempTree {
    root: PathBuf,
    dir: PathBuf,
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = git(&self.root)
            .args(["worktree", "remove", "--force"])
            .arg(self.dir.join("src"))
            .output();
        let _ = git(&self.root).args(["worktree", "prune"]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Builds another version's `metaroce-analyze` (release, without export
/// and plot), its Wireshark plugin, and its `walk` example when it has one,
/// for the benchmarks that set it beside the current one (`--before`).
///
/// REV is any git revision (`':/words of its message'` names the youngest
/// commit whose message holds them). With `revert`, the version built is
/// REV with that commit's change undone (`git revert --no-commit -X ours`:
/// hunks later commits changed again keep REV's text): the way to measure
/// one change alone. The version is checked out in a temporary worktree
/// and built in a temporary target dir (its dependencies may differ), both
/// removed afterwards. Returns the folder holding the three,
/// target/bench/rev-COMMIT[-revert-COMMIT], kept for the next run.
pub fn build_rev(ws: &Workspace, rev: &str, revert: Option<&str>) -> anyhow::Result<PathBuf> {
    let sha = commit(&ws.root, rev)?;
    let mut name = format!("rev-{sha}");
    let revert = match revert {
        Some(r) => {
            let r = commit(&ws.root, r)?;
            name.push_str(&format!("-revert-{r}"));
            Some(r)
        }
        None => None,
    };
    let out = ws.bench_dir()?.join(&name);
    let has_walk = git(&ws.root)
        .args(["cat-file", "-e"])
        .arg(format!("{sha}:analyzer/cli/examples/walk.rs"))
        .output()
        .is_ok_and(|o| o.status.success());
    let built = out.join("metaroce-analyze").is_file()
        && out.join("libmetaroce_dissector.so").is_file()
        && (!has_walk || out.join("walk").is_file());
    if built {
        return Ok(out);
    }

    let tmp = std::env::temp_dir().join(format!("xtask-build-rev-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let tree = TempTree {
        root: ws.root.clone(),
        dir: tmp.clone(),
    };
    let src = tmp.join("src");
    run_quiet(
        git(&ws.root)
            .args(["worktree", "add", "--detach", "--quiet"])
            .arg(&src)
            .arg(&sha),
    )?;
    if let Some(r) = &revert {
        run_quiet(git(&src).args(["revert", "--no-commit", "-X", "ours", r]))
            .with_context(|| format!("build-rev: {r} does not revert on {rev}"))?;
        // What was undone.
        let _ = git(&src).args(["diff", "--cached", "--stat"]).status();
    }
    eprintln!("build-rev: building {name}");
    let target = tmp.join("target");
    let cargo = |args: &[&str]| -> anyhow::Result<()> {
        let status = Command::new("cargo")
            .current_dir(&src)
            .env("CARGO_TARGET_DIR", &target)
            .args(["build", "--release", "--quiet"])
            .args(args)
            .status()?;
        if !status.success() {
            bail!("build-rev: building {name} failed");
        }
        Ok(())
    };
    let mut analyzer = vec![
        "-p",
        "metaroce-analyze",
        "--no-default-features",
        "--bin",
        "metaroce-analyze",
    ];
    if has_walk {
        analyzer.extend(["--example", "walk"]);
    }
    cargo(&analyzer)?;
    cargo(&["-p", "metaroce-dissector", "--lib"])?;
    std::fs::create_dir_all(&out)?;
    let release = target.join("release");
    for file in ["metaroce-analyze", "libmetaroce_dissector.so"] {
        std::fs::copy(release.join(file), out.join(file))?;
    }
    if has_walk {
        std::fs::copy(release.join("examples/walk"), out.join("walk"))?;
    }
    drop(tree);
    Ok(out)
}

/// Builds `metaroce-analyze` with profile-guided optimisation: an
/// instrumented build analyses a training set, and the release build is
/// then optimised with the branch and call counts it recorded. Same code,
/// same output. `cargo_args` go to both builds (e.g.
/// `--no-default-features`); `PGO_RUSTFLAGS` adds flags to both (e.g.
/// `-Ctarget-cpu=native`). Returns target/pgo/release/metaroce-analyze;
/// the `walk` example built with the same profile is in
/// target/pgo/release/examples/.
///
/// The training set is not the benchmark's capture: a generated capture of
/// another shape (64 connections, 2 % DATA loss, 256-byte payloads), every
/// fixture (RoCEv2 from real captures, every MetaRoCE packet type,
/// malformed and cut records) and the two-capture merge, in JSON and text.
pub fn pgo(ws: &Workspace, cargo_args: &[String]) -> anyhow::Result<PathBuf> {
    let profdata = llvm_profdata()?;
    let work = ws.target.join("pgo-profile");
    let raw = work.join("raw");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&raw)?;
    let extra = std::env::var("PGO_RUSTFLAGS").unwrap_or_default();
    let cargo = |flags: String, target_dir: &str, examples: &[&str]| -> anyhow::Result<()> {
        let status = Command::new("cargo")
            .current_dir(&ws.root)
            .env("RUSTFLAGS", flags)
            .args(["build", "--quiet", "--release", "-p", "metaroce-analyze"])
            .args(["--bin", "metaroce-analyze"])
            .args(examples)
            .args(cargo_args)
            .arg("--target-dir")
            .arg(ws.target.join(target_dir))
            .status()?;
        if !status.success() {
            bail!("pgo: the {target_dir} build failed");
        }
        Ok(())
    };
    eprintln!("pgo: instrumented build");
    cargo(
        format!("-Cprofile-generate={} {extra}", raw.display()),
        "pgo-gen",
        &[],
    )?;
    // Build scripts of the instrumented build wrote profiles too: not training.
    std::fs::remove_dir_all(&raw)?;
    std::fs::create_dir_all(&raw)?;

    eprintln!("pgo: training run");
    ws.build(&["-p", "fixtures-generator"])?;
    let train = work.join("train.pcap");
    run_quiet(
        Command::new(ws.release("fixtures-generator"))
            .arg("bulk")
            .arg(&train)
            .args(["1000000", "64", "20", "256"]),
    )?;
    let trained = ws.target.join("pgo-gen/release/metaroce-analyze");
    // Exit codes 2 and 3 on damaged fixtures are expected: not checked.
    let run = |args: &[&Path], json: bool| {
        let mut cmd = Command::new(&trained);
        cmd.arg("report").arg("--no-progress");
        if json {
            cmd.arg("--json");
        }
        let _ = cmd.args(args).output();
    };
    let mut inputs: Vec<PathBuf> = vec![train.clone()];
    for dir in ["fixtures/generated", "fixtures/real"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(ws.root.join(dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
            .collect();
        found.sort();
        inputs.extend(found);
    }
    for input in &inputs {
        run(&[input], true);
        run(&[input], false);
    }
    let gen_dir = ws.root.join("fixtures/generated");
    run(
        &[
            &gen_dir.join("multipath_loss_sender.pcap"),
            &gen_dir.join("multipath_loss_receiver.pcap"),
        ],
        true,
    );
    let profiles = std::fs::read_dir(&raw)?
        .filter_map(Result::ok)
        .any(|e| e.path().extension().is_some_and(|x| x == "profraw"));
    if !profiles {
        bail!("pgo: the training run wrote no profile");
    }
    let merged = work.join("merged.profdata");
    run_quiet(
        Command::new(profdata)
            .arg("merge")
            .arg("-o")
            .arg(&merged)
            .arg(&raw),
    )?;
    let _ = std::fs::remove_file(&train);

    eprintln!("pgo: optimised build");
    cargo(
        format!("-Cprofile-use={} {extra}", merged.display()),
        "pgo",
        &["--example", "walk"],
    )?;
    Ok(ws.target.join("pgo/release/metaroce-analyze"))
}

/// llvm-profdata of the toolchain (the llvm-tools component, added with
/// rustup when missing).
fn llvm_profdata() -> anyhow::Result<PathBuf> {
    let find = || -> Option<PathBuf> {
        let sysroot = stdout_of(Command::new("rustc").args(["--print", "sysroot"])).ok()?;
        let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot).trim());
        find_file(&sysroot, "llvm-profdata", 6)
    };
    if let Some(p) = find() {
        return Ok(p);
    }
    if which("rustup").is_some() {
        let _ = Command::new("rustup")
            .args(["component", "add", "llvm-tools"])
            .status();
    }
    find().context("pgo: llvm-profdata not found; run: rustup component add llvm-tools")
}

fn find_file(dir: &Path, name: &str, depth: u32) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut dirs = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_file() && e.file_name() == name {
            return Some(path);
        }
        if kind.is_dir() {
            dirs.push(path);
        }
    }
    if depth == 0 {
        return None;
    }
    dirs.sort();
    dirs.iter().find_map(|d| find_file(d, name, depth - 1))
}
