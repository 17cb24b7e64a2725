//! `metaroce-analyze`: offline analysis of MetaRoCE and RoCEv2 captures.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use analyzer::decode::{self, FrameRange};
use clap::{Args, Parser, Subcommand};
use proto_parse::frame::DecodeConfig;

/// Analyze MetaRoCE and RoCEv2 captures (pcap or pcapng).
///
/// Exit status: 0 when every frame decoded, 1 on a usage or I/O error,
/// 2 when the capture held malformed packets or corrupt records (the
/// analysis still covers every other frame).
#[derive(Debug, Parser)]
#[command(name = "metaroce-analyze", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print one summary line per frame, like tshark, or JSON Lines with
    /// `--json` (field names of the MetaRoCE spec, section 10, and tshark's
    /// InfiniBand names for RoCEv2).
    Decode(DecodeArgs),
}

/// How to recognise the protocols.
#[derive(Debug, Args)]
struct ProtocolArgs {
    /// UDP port of MetaRoCE (source or destination).
    #[arg(long, default_value_t = 4794, value_name = "PORT")]
    port: u16,
    /// UDP destination port of RoCEv2.
    #[arg(long, default_value_t = 4791, value_name = "PORT")]
    rocev2_port: u16,
    /// Also recognise MetaRoCE on other UDP ports by its header (only
    /// complete, valid packets are taken).
    #[arg(long)]
    heuristic: bool,
}

impl ProtocolArgs {
    fn config(&self) -> DecodeConfig {
        DecodeConfig {
            metaroce_port: self.port,
            rocev2_port: self.rocev2_port,
            heuristic: self.heuristic,
            ..DecodeConfig::default()
        }
    }
}

#[derive(Debug, Args)]
struct DecodeArgs {
    /// The capture file (pcap or pcapng).
    capture: PathBuf,
    /// Print JSON Lines: {"frame", "ts_ns", "proto", "error", "crc", "fields"}.
    #[arg(long)]
    json: bool,
    /// Frames to print, numbered from 1 like tshark: N, N-M, N- or -M.
    #[arg(long, value_name = "RANGE", default_value = "1-")]
    frames: FrameRange,
    #[command(flatten)]
    protocol: ProtocolArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode(args) => run_decode(&args),
    }
}

fn run_decode(args: &DecodeArgs) -> ExitCode {
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut stderr = io::stderr();
    let result = decode::run(
        &args.capture,
        &args.protocol.config(),
        &args.frames,
        args.json,
        &mut out,
        &mut stderr,
    );
    let result = result.and_then(|stats| out.flush().map(|()| stats));
    match result {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("metaroce-analyze: {err}");
            ExitCode::from(1)
        }
        Ok(stats) if stats.malformed > 0 || stats.capture_errors > 0 => {
            eprintln!(
                "metaroce-analyze: {} frames, {} malformed packets, {} corrupt capture records \
                 (every other frame was decoded)",
                stats.frames, stats.malformed, stats.capture_errors
            );
            ExitCode::from(2)
        }
        Ok(stats) => {
            if stats.unsupported > 0 {
                eprintln!(
                    "metaroce-analyze: {} of {} frames are of a link type or protocol this tool does not decode",
                    stats.unsupported, stats.frames
                );
            }
            ExitCode::SUCCESS
        }
    }
}
