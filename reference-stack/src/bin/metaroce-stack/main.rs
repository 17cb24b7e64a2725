//! `metaroce-stack`: the reference MetaRoCE stack over UDP.
//!
//! - `server` (`server.rs`): accepts connections, exposes one registered
//!   region (rkey 0x101 at va 0x10000000) and keeps receives posted.
//! - `client` (`client.rs`): connects, runs WRITE/READ/SEND messages and
//!   prints goodput, latency percentiles, retransmissions and per-path
//!   stats (`--json`).
//! - `relay` (`relay.rs`): forwards between two networks with impairment.
//!
//! `args.rs` holds the options the subcommands share, `config.rs` turns them
//! into the core's and the driver's configuration, `report.rs` is a
//! connection's report. The loopback benchmark against raw UDP is not part
//! of this binary: `cargo xtask bench stack` (docs/performance.md).

mod args;
mod client;
mod config;
mod relay;
mod report;
mod server;

use anyhow::bail;
use clap::{Parser, Subcommand};

use client::{ClientArgs, run_client};
use relay::{RelayArgs, run_relay};
use report::print_report;
use server::{ServerArgs, run_server};

/// The registered region the server exposes.
const MR_VA: u64 = 0x1000_0000;
const MR_RKEY: u32 = 0x101;

#[derive(Parser)]
#[command(
    name = "metaroce-stack",
    version,
    about = "Reference MetaRoCE transport over UDP"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Accept connections and serve WRITE/READ/SEND.
    Server(ServerArgs),
    /// Connect and run a workload.
    Client(ClientArgs),
    /// Forward between two networks with impairment (delay, jitter,
    /// reordering, loss...), in place of netem.
    Relay(RelayArgs),
}

fn main() -> std::process::ExitCode {
    // Errors are printed as sentences with their causes (`{:#}`), never as
    // a Debug dump or a backtrace.
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("metaroce-stack: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.cmd {
        Cmd::Server(a) => run_server(a),
        Cmd::Client(a) => {
            let r = run_client(&a)?;
            print_report(&r, a.common.json)?;
            if let Some(e) = &r.closed_error {
                bail!("{e}");
            }
            Ok(())
        }
        Cmd::Relay(a) => run_relay(&a),
    }
}
