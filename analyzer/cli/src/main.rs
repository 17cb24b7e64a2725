//! `metaroce-analyze`: offline analysis of MetaRoCE and RoCEv2 captures.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

use analyzer::engine::Config;
use clap::{Args, Parser, Subcommand, ValueEnum};
use metaroce_analyze::decode::{self, FrameRange};
use metaroce_analyze::pipeline::{self, CaptureResult, NoSink, Options, Progress, Sink};
use metaroce_analyze::series::Collector;
use metaroce_analyze::{html, parse_duration, text};
use proto_parse::frame::DecodeConfig;

mod lint;

/// Analyze MetaRoCE and RoCEv2 captures (pcap or pcapng).
///
/// Exit status (every subcommand):
///   0  success;
///   1  usage error, or a capture that cannot be opened or read, or an
///      output that cannot be written;
///   2  the analysis completed but the capture held malformed packets or
///      corrupt records: they are counted and reported, every other frame
///      was analysed;
///   3  (`lint`) a rule of error severity was broken; it wins over 2 (a
///      malformed MetaRoCE packet is itself an error finding, MR-PKT-001),
///      and 1 wins over both.
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
    /// Analyse captures and print what happened on every connection and
    /// path: per-direction and per-path tables, latency percentiles, the
    /// stall timeline and the worst paths; `--json` prints the engine's
    /// report (schema: analyzer/SCHEMA.md).
    ///
    /// Several captures (one per host) give one report; each capture is
    /// analysed on its own clock and its directions are listed under its
    /// name.
    Report(ReportArgs),
    /// Write per-packet, per-message and per-path tables as Parquet and/or
    /// CSV, Hive-partitioned: DIR/table=<packets|messages|paths>/host=<capture
    /// file stem>/part-0.<parquet|csv>, so many hosts' exports can be read
    /// together (polars, DuckDB, Spark).
    #[cfg(feature = "export")]
    Export(ExportArgs),
    /// Draw PNG and SVG charts into a directory: ACK-RTT histograms per
    /// path, message-latency histograms per connection direction, and a
    /// PSN-versus-time chart per direction coloured by ev (tcptrace-style).
    #[cfg(feature = "plot")]
    Plot(PlotArgs),
    /// Check captures against the MetaRoCE wire format's rules (and
    /// RoCEv2's): per rule broken, its count, first frames and evidence;
    /// `--json` one object per finding, `--junit FILE` a test case per
    /// rule, `--rules` the rules. Exit status 3 when an error-severity
    /// rule was broken (docs/lint.md).
    Lint(lint::LintArgs),
    /// Write the analysis as a Chrome trace (JSON) for Perfetto,
    /// chrome://tracing or Holistic Trace Analysis: one process per
    /// capture, a track per connection direction with its stalls and its
    /// retransmissions, NACKs, CNPs and path losses, message lifetimes on
    /// the tracks below it, and with `--counters` per-millisecond counters.
    /// Times are the capture's clock in microseconds since the epoch, each
    /// capture corrected by its clock offset (estimated between captures,
    /// or `--clock-offset`); `--merge` writes a profiler trace's events
    /// unchanged into the same file and the network's in its time base.
    ///
    /// Example: metaroce-analyze trace a.pcap b.pcap -o job.trace.json
    /// --merge rank0.pt.trace.json, then open job.trace.json in
    /// https://ui.perfetto.dev (docs/trace.md: track layout, time base).
    Trace(TraceArgs),
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

/// The captures and how to analyse them.
#[derive(Debug, Args)]
struct AnalysisArgs {
    /// Capture files (pcap or pcapng, plain or gzip-compressed; `-` reads
    /// standard input), one per host: each is analysed on its own clock.
    #[arg(required = true, value_name = "CAPTURE")]
    captures: Vec<PathBuf>,
    #[command(flatten)]
    protocol: ProtocolArgs,
    /// A stall is an interval longer than this with unacknowledged data
    /// and no cumulative-ack advance (spec 9): e.g. 1ms, 500us, 2s.
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = parse_duration)]
    stall_threshold: u64,
    /// Most live flows tracked (least recently seen evicted beyond it).
    #[arg(long, value_name = "N", default_value_t = Config::default().max_flows)]
    max_flows: usize,
    /// Never show a progress bar (it is shown on stderr for files over
    /// 64 MiB when stderr is a terminal).
    #[arg(long)]
    no_progress: bool,
    /// Read capture files with read(2) instead of a memory map: for a file
    /// that another program may truncate or rewrite while it is analysed
    /// (a mapped file that shrinks kills the process with SIGBUS).
    #[arg(long)]
    no_mmap: bool,
}

impl AnalysisArgs {
    fn options(&self) -> Options {
        let mut opts = Options::new(
            self.protocol.config(),
            Config {
                stall_threshold_ns: self.stall_threshold,
                max_flows: self.max_flows.max(1),
                ..Config::default()
            },
        );
        opts.map_files = !self.no_mmap;
        opts
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ColorWhen {
    /// Colour on a terminal, unless NO_COLOR is set.
    Auto,
    Always,
    Never,
}

#[derive(Debug, Args)]
struct ReportArgs {
    #[command(flatten)]
    analysis: AnalysisArgs,
    /// Print the engine's JSON report (analyzer/SCHEMA.md) instead of
    /// tables.
    #[arg(long)]
    json: bool,
    /// When to colour the tables.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    color: ColorWhen,
    /// Length of each top-offender list.
    #[arg(long, default_value_t = 5, value_name = "N")]
    top: usize,
    /// Also write the report as one self-contained HTML page (no network
    /// or external files): a summary of the worst findings, loss and RTT
    /// heatmaps, the stall timeline, latency percentiles and histograms,
    /// PSN versus time for the worst direction, the host-pair delay and
    /// loss matrix with several captures, and the tables. Large reports
    /// are cut to their worst rows (docs/report-html.md).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[cfg(feature = "export")]
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("format").required(true).multiple(true).args(["parquet", "csv"])))]
struct ExportArgs {
    #[command(flatten)]
    analysis: AnalysisArgs,
    /// Write Parquet files under this directory.
    #[arg(long, value_name = "DIR")]
    parquet: Option<PathBuf>,
    /// Write CSV files under this directory.
    #[arg(long, value_name = "DIR")]
    csv: Option<PathBuf>,
}

#[cfg(feature = "plot")]
#[derive(Debug, Args)]
struct PlotArgs {
    #[command(flatten)]
    analysis: AnalysisArgs,
    /// Directory to write the charts into (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

#[derive(Debug, Args)]
struct TraceArgs {
    #[command(flatten)]
    analysis: AnalysisArgs,
    #[command(flatten)]
    trace: metaroce_analyze::trace::TraceOptions,
}

#[derive(Debug, Args)]
struct DecodeArgs {
    /// The capture file (pcap or pcapng, plain or gzip-compressed; `-`
    /// reads standard input).
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap exits 2 on a usage error; 2 means "malformed capture"
            // here, so usage errors exit 1 (help and version 0).
            let _ = err.print();
            return ExitCode::from(u8::from(err.use_stderr()));
        }
    };
    match cli.command {
        Command::Decode(args) => run_decode(&args),
        Command::Report(args) => run_report(&args),
        #[cfg(feature = "export")]
        Command::Export(args) => run_export(&args),
        #[cfg(feature = "plot")]
        Command::Plot(args) => run_plot(&args),
        Command::Lint(args) => lint::run(&args),
        Command::Trace(args) => run_trace(&args),
    }
}

/// A progress bar on stderr for large files, only on a terminal.
struct TermProgress {
    enabled: bool,
    bar: Mutex<Option<indicatif::ProgressBar>>,
}

/// Files smaller than this get no progress bar.
const PROGRESS_MIN_BYTES: u64 = 64 << 20;

impl TermProgress {
    fn new(args: &AnalysisArgs) -> TermProgress {
        TermProgress {
            enabled: !args.no_progress && io::stderr().is_terminal(),
            bar: Mutex::new(None),
        }
    }
}

impl Progress for TermProgress {
    fn start(&self, path: &Path, len: Option<u64>) {
        let Some(len) = len.filter(|&l| self.enabled && l >= PROGRESS_MIN_BYTES) else {
            return;
        };
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(len),
            indicatif::ProgressDrawTarget::stderr_with_hz(10),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(path.display().to_string());
        if let Ok(mut slot) = self.bar.lock() {
            *slot = Some(bar);
        }
    }

    fn set(&self, position: u64) {
        if let Ok(slot) = self.bar.lock()
            && let Some(bar) = slot.as_ref()
        {
            bar.set_position(position);
        }
    }

    fn finish(&self) {
        if let Ok(mut slot) = self.bar.lock()
            && let Some(bar) = slot.take()
        {
            bar.finish_and_clear();
        }
    }
}

/// Runs the pipeline over every capture; `Err` is already reported (exit 1).
fn analyze<S: Sink>(args: &AnalysisArgs, sink: &mut S) -> Result<Vec<CaptureResult>, ExitCode> {
    let progress = TermProgress::new(args);
    pipeline::analyze(&args.captures, &args.options(), sink, &progress).map_err(|err| {
        eprintln!("metaroce-analyze: {err}");
        ExitCode::from(1)
    })
}

/// 2 when a capture held malformed packets or corrupt records (with a line
/// on stderr), else 0. A capture with frames but no MetaRoCE or RoCEv2
/// gets a line on stderr saying what it held (`analyzer::traffic::explain`).
fn analysis_status(results: &[CaptureResult]) -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for r in results {
        if let Some(err) = &r.read.io_error {
            eprintln!(
                "metaroce-analyze: {}: read error, the capture ends early: {err}",
                r.path.display()
            );
            status = ExitCode::from(1);
        }
    }
    // A capture with frames and none of our packets says what it held.
    if let Some(note) = pipeline::merge_reports(results).and_then(|m| m.capture.traffic.note) {
        eprintln!("metaroce-analyze: {note}");
    }
    let malformed: u64 = results.iter().map(|r| r.report.capture.malformed).sum();
    let corrupt: u64 = results.iter().map(|r| r.read.corrupt_records).sum();
    let frames: u64 = results.iter().map(|r| r.read.frames).sum();
    if status == ExitCode::SUCCESS && (malformed > 0 || corrupt > 0) {
        eprintln!(
            "metaroce-analyze: {frames} frames, {malformed} malformed packets, {corrupt} corrupt \
             capture records (every other frame was analysed)"
        );
        status = ExitCode::from(2);
    }
    status
}

fn write_out(
    f: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    color: ColorWhen,
) -> Result<(), ExitCode> {
    let choice = match color {
        ColorWhen::Auto => anstream::ColorChoice::Auto,
        ColorWhen::Always => anstream::ColorChoice::Always,
        ColorWhen::Never => anstream::ColorChoice::Never,
    };
    let stdout = anstream::AutoStream::new(io::stdout().lock(), choice);
    let mut out = BufWriter::with_capacity(1 << 16, stdout);
    match f(&mut out).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(err) => {
            eprintln!("metaroce-analyze: {err}");
            Err(ExitCode::from(1))
        }
    }
}

fn run_report(args: &ReportArgs) -> ExitCode {
    // The page's histograms and PSN chart need the verdict stream.
    let mut series = Collector::new(html::SERIES_CAPS);
    let analysed = match args.html {
        Some(_) => analyze(&args.analysis, &mut series),
        None => analyze(&args.analysis, &mut NoSink),
    };
    let results = match analysed {
        Ok(r) => r,
        Err(code) => return code,
    };
    let Some(merged) = pipeline::merge_reports(&results) else {
        return ExitCode::from(1);
    };
    if let Some(path) = &args.html {
        let page = html::render(&results, &merged, &series, args.top);
        if let Err(err) = html::write_file(path, &page) {
            eprintln!("metaroce-analyze: {err}");
            return ExitCode::from(1);
        }
    }
    let written = if args.json {
        write_out(
            |out| {
                serde_json::to_writer_pretty(&mut *out, &merged)?;
                writeln!(out)
            },
            ColorWhen::Never,
        )
    } else {
        let report = text::render(&results, &merged, args.top);
        write_out(|out| text::write(out, &report), args.color)
    };
    match written {
        Ok(()) => analysis_status(&results),
        Err(code) => code,
    }
}

#[cfg(feature = "export")]
fn run_export(args: &ExportArgs) -> ExitCode {
    use metaroce_analyze::export::{Exporter, Format};
    let mut targets = Vec::new();
    if let Some(dir) = &args.parquet {
        targets.push((Format::Parquet, dir.clone()));
    }
    if let Some(dir) = &args.csv {
        targets.push((Format::Csv, dir.clone()));
    }
    let mut exporter = Exporter::new(targets).with_decode(args.analysis.protocol.config());
    let results = match analyze(&args.analysis, &mut exporter) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let summary = exporter.summary();
    eprintln!("metaroce-analyze: {summary}");
    analysis_status(&results)
}

#[cfg(feature = "plot")]
fn run_plot(args: &PlotArgs) -> ExitCode {
    use metaroce_analyze::plot::Plotter;
    let mut plotter = Plotter::new(args.out.clone());
    let results = match analyze(&args.analysis, &mut plotter) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let files = plotter.files();
    if files.is_empty() {
        eprintln!("metaroce-analyze: nothing to plot");
    } else {
        eprintln!(
            "metaroce-analyze: {} charts in {}",
            files.len(),
            args.out.display()
        );
    }
    analysis_status(&results)
}

fn run_trace(args: &TraceArgs) -> ExitCode {
    use metaroce_analyze::trace::Tracer;
    let mut tracer = match Tracer::new(&args.trace, &args.analysis.captures) {
        Ok(tracer) => tracer,
        Err(err) => {
            eprintln!("metaroce-analyze: {err}");
            return ExitCode::from(1);
        }
    };
    let results = match analyze(&args.analysis, &mut tracer) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Err(err) = tracer.write(&results) {
        eprintln!("metaroce-analyze: {err}");
        return ExitCode::from(1);
    }
    analysis_status(&results)
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
