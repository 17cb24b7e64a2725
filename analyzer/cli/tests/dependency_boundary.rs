//! The engine library stays light: the crates of this command line (its
//! argument parser, progress bar, colours, JSON writer, export and plots)
//! must not reach the engine (`analyzer`), and so not the Wireshark plugin
//! or the TUI, which link the engine. Checked on cargo's own resolution of
//! the workspace (`cargo tree`, normal and build dependencies).

use std::path::Path;
use std::process::Command;

/// Crates that only this command line may link.
const CLI_ONLY: &[&str] = &[
    "metaroce-analyze",
    "clap",
    "indicatif",
    "anstream",
    "owo-colors",
    "serde_json",
    "anyhow",
    "polars",
    "plotters",
];

/// The names of every crate `package` links (normal and build edges, all
/// of its default features).
fn linked_crates(package: &str) -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "--prefix",
            "none",
            "-e",
            "normal,build",
            "-p",
            package,
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<String> = text
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(names.iter().any(|n| n == package), "{text}");
    names
}

fn cli_crates_in(package: &str) -> Vec<String> {
    let mut found: Vec<String> = linked_crates(package)
        .into_iter()
        .filter(|name| CLI_ONLY.contains(&name.as_str()))
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn the_engine_links_no_cli_crate() {
    assert_eq!(cli_crates_in("analyzer"), Vec::<String>::new());
}

/// The plugin does not serialise the engine's report either: the engine's
/// `serde` feature stays off there.
#[test]
fn the_wireshark_plugin_links_no_cli_crate_nor_serde() {
    assert_eq!(cli_crates_in("metaroce-dissector"), Vec::<String>::new());
    let linked = linked_crates("metaroce-dissector");
    assert!(!linked.iter().any(|n| n == "serde"), "{linked:?}");
}

/// The TUI is a command line of its own (`metaroce-top` parses arguments
/// with clap, dumps JSON snapshots and reports errors with anyhow); what it
/// must not link is the analyzer's command line: its progress bar, colour
/// writer, export and plots, or the `metaroce-analyze` crate itself.
#[test]
fn the_tui_links_no_crate_of_the_analyzer_cli() {
    let found = cli_crates_in("metaroce-tui");
    let own = ["clap", "anstream", "serde_json", "anyhow"];
    let foreign: Vec<&String> = found
        .iter()
        .filter(|n| !own.contains(&n.as_str()))
        .collect();
    assert!(foreign.is_empty(), "{foreign:?}");
}

/// The check sees what it looks for: this crate links them.
#[test]
fn the_cli_links_its_own_crates() {
    let found = cli_crates_in("metaroce-analyze");
    for name in [
        "metaroce-analyze",
        "clap",
        "indicatif",
        "owo-colors",
        "serde_json",
        "polars",
        "plotters",
    ] {
        assert!(found.iter().any(|n| n == name), "{name} not in {found:?}");
    }
}
