//! `cargo xtask`: the project's benchmarks and build tasks as code.
//!
//! - `bench analyzer|lint|mirror|connections|plugin|tui|html|stack`: runs a
//!   benchmark, prints its table, and writes its figures, each with the
//!   command that measured it, into the table of `docs/performance.md`
//!   (`--no-doc`: print only).
//! - `build-rev REV [--revert COMMIT]`: another version's analyzer and
//!   plugin, for `--before`.
//! - `pgo [CARGO_ARGS]`: the profile-guided build of `metaroce-analyze`.
//!
//! Statistics live in `stats.rs` (unit-tested); shell stays where it
//! drives the OS (scripts/setup.sh, wireshark-root.sh, screenshots,
//! install-plugin.sh).

mod bench;
mod builds;
mod figures;
mod proc;
mod stats;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Benchmarks and build tasks of the MetaRoCE toolkit"
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Run a benchmark and write its figures into docs/performance.md.
    Bench {
        #[command(subcommand)]
        bench: Bench,
        /// Print the figures only; leave the doc as it is.
        #[arg(long, global = true)]
        no_doc: bool,
        /// The doc holding the figures table.
        #[arg(long, global = true, value_name = "FILE")]
        doc: Option<PathBuf>,
    },
    /// Build another version's metaroce-analyze and plugin; prints their folder.
    BuildRev {
        rev: String,
        /// Build REV with this commit's change undone.
        #[arg(long, value_name = "COMMIT")]
        revert: Option<String>,
    },
    /// Build metaroce-analyze with profile-guided optimisation; prints its path.
    Pgo {
        /// Passed to both builds (e.g. --no-default-features).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        cargo_args: Vec<String>,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// metaroce-analyze report against tshark and a bare walk, with RSS and instructions.
    Analyzer(bench::analyzer::AnalyzerArgs),
    /// metaroce-analyze lint against report (the lint's budget).
    Lint(bench::lint::LintArgs),
    /// metaroce-analyze report on an ERSPAN III copy of the bench capture against the capture.
    Mirror(bench::mirror::MirrorArgs),
    /// Memory against connections and frames: the analyzer and tshark with the plugin.
    Connections(bench::connections::ConnectionsArgs),
    /// tshark with the plugin against the built-in InfiniBand dissector.
    Plugin(bench::plugin::PluginArgs),
    /// metaroce-top's capture and engine path on a veth (root).
    Tui(bench::tui::TuiArgs),
    /// report --html pages in headless Chromium.
    Html(bench::html::HtmlArgs),
    /// The reference stack on loopback against raw UDP, lossless and lossy.
    Stack(bench::stack::StackArgs),
}

impl Bench {
    fn name(&self) -> &'static str {
        match self {
            Bench::Analyzer(_) => "analyzer",
            Bench::Lint(_) => "lint",
            Bench::Mirror(_) => "mirror",
            Bench::Connections(_) => "connections",
            Bench::Plugin(_) => "plugin",
            Bench::Tui(_) => "tui",
            Bench::Html(_) => "html",
            Bench::Stack(_) => "stack",
        }
    }
}

/// The command line as a user would type it, for the doc.
fn command_line() -> String {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--no-doc")
        .collect();
    let mut line = String::from("cargo xtask");
    for a in args {
        line.push(' ');
        line.push_str(&a);
    }
    line
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let ws = proc::Workspace::find()?;
    match cli.task {
        Task::Bench { bench, no_doc, doc } => {
            let command = command_line();
            let figures = match &bench {
                Bench::Analyzer(a) => bench::analyzer::run(&ws, a, &command)?,
                Bench::Lint(a) => bench::lint::run(&ws, a, &command)?,
                Bench::Mirror(a) => bench::mirror::run(&ws, a, &command)?,
                Bench::Connections(a) => bench::connections::run(&ws, a, &command)?,
                Bench::Plugin(a) => bench::plugin::run(&ws, a, &command)?,
                Bench::Tui(a) => bench::tui::run(&ws, a, &command)?,
                Bench::Html(a) => bench::html::run(&ws, a, &command)?,
                Bench::Stack(a) => bench::stack::run(&ws, a, &command)?,
            };
            if no_doc {
                return Ok(());
            }
            let doc = doc.unwrap_or_else(|| ws.root.join("docs/performance.md"));
            figures::write(&doc, bench.name(), &figures)
        }
        Task::BuildRev { rev, revert } => {
            println!(
                "{}",
                builds::build_rev(&ws, &rev, revert.as_deref())?.display()
            );
            Ok(())
        }
        Task::Pgo { cargo_args } => {
            println!("{}", builds::pgo(&ws, &cargo_args)?.display());
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
