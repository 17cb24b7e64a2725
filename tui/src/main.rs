//! `metaroce-top`: live terminal view of MetaRoCE and RoCEv2 traffic.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{ArgGroup, Parser};
use crossterm::event::{self, Event, KeyEventKind};
use metaroce_tui::app::{self, App, Effect};
use metaroce_tui::events::EventConfig;
use metaroce_tui::metrics::MetricsConfig;
use metaroce_tui::metrics::server::{self, Server};
use metaroce_tui::model::{ProcessStats, RunState, Snapshot};
use metaroce_tui::pipeline::{Pipeline, decode_config};
use metaroce_tui::source::{self, Handle, SourceKind};
use metaroce_tui::{render, term};

/// Live view of MetaRoCE (and RoCEv2) traffic: connections, paths (ev),
/// latency and events, from a live interface (libpcap) or a replayed
/// capture, through the same flow engine as metaroce-analyze.
#[derive(Debug, Parser)]
#[command(name = "metaroce-top", version, about, long_about)]
#[command(group(ArgGroup::new("source").required(true).args(["interface", "read"])))]
struct Cli {
    /// Capture live on this interface.
    #[arg(short, long, value_name = "IFACE")]
    interface: Option<String>,
    /// Replay this capture file (pcap or pcapng, plain or gzip-compressed).
    #[arg(short, long, value_name = "CAPTURE")]
    read: Option<PathBuf>,
    /// Replay speed: 1 = recorded pace, 10 = ten times faster, 0 = as fast
    /// as possible.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// BPF filter (default: the MetaRoCE and RoCEv2 ports, also in VLANs).
    #[arg(long, value_name = "BPF")]
    filter: Option<String>,
    /// UDP port of MetaRoCE (source or destination).
    #[arg(long, default_value_t = 4794)]
    port: u16,
    /// UDP destination port of RoCEv2.
    #[arg(long, default_value_t = 4791)]
    rocev2_port: u16,
    /// Bytes captured per frame. Whole frames by default: IP fragments are
    /// reassembled only from whole pieces. 256 holds every header the
    /// analysis reads and lightens the capture at high rates; fragments it
    /// cuts are counted as incomplete datagrams.
    #[arg(long, default_value_t = 65535)]
    snaplen: i32,
    /// Kernel capture buffer, MiB.
    #[arg(long, default_value_t = 64)]
    buffer_mb: i32,
    /// Do not put the interface in promiscuous mode.
    #[arg(long)]
    no_promisc: bool,
    /// Do not run the conformance lint (the Lint column and the detail
    /// pane's findings then show "-").
    #[arg(long)]
    no_lint: bool,
    /// Stall threshold, microseconds (spec 9).
    #[arg(long, default_value_t = 1000)]
    stall_us: u64,
    /// NACKs or CNPs of one direction in one tick that make an event.
    #[arg(long, default_value_t = 1)]
    burst: u64,
    /// A path silent this long (ms) while its direction sends on others is
    /// reported retired.
    #[arg(long, default_value_t = 1000)]
    path_idle_ms: u64,
    /// Snapshot interval of the capture thread, ms.
    #[arg(long, default_value_t = 100)]
    tick_ms: u64,
    /// Frames drawn per second.
    #[arg(long, default_value_t = 10)]
    fps: u32,
    /// Where `w` saves JSON snapshots.
    #[arg(long, default_value = ".")]
    save_dir: PathBuf,
    /// No terminal UI: run the same capture and engine, then write the
    /// final JSON snapshot (to --json-out, or standard output).
    #[arg(long)]
    headless: bool,
    /// Headless: stop after this many seconds (a replay also stops at its
    /// end).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Headless: write the JSON snapshot here.
    #[arg(long, value_name = "FILE")]
    json_out: Option<PathBuf>,
    /// Serve the figures on http://ADDR:PORT/metrics for Prometheus (text
    /// format, or OpenMetrics when asked). A replay with --duration keeps
    /// serving its final figures until the duration ends.
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<String>,
    /// Metrics per connection (src_conn, dst_conn; RoCEv2: qp) instead of
    /// per host pair.
    #[arg(long, requires = "metrics")]
    metrics_connections: bool,
    /// Metrics per path (ev) too.
    #[arg(long, requires = "metrics")]
    metrics_paths: bool,
    /// Label sets per table that keep their own series (first seen
    /// first); the rest fold into src="other",dst="other".
    #[arg(long, value_name = "N", default_value_t = 2048, requires = "metrics")]
    metrics_max_series: usize,
}

impl Cli {
    fn metrics_config(&self) -> Option<MetricsConfig> {
        self.metrics.as_ref().map(|_| MetricsConfig {
            per_connection: self.metrics_connections,
            paths: self.metrics_paths,
            max_series: self.metrics_max_series.max(1),
        })
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stop = match stop_on_signals(cli.headless) {
        Ok(stop) => stop,
        Err(e) => {
            eprintln!("metaroce-top: cannot handle signals: {e}");
            return ExitCode::from(1);
        }
    };
    match run(&cli, &stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("metaroce-top: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// SIGINT and SIGTERM set the returned flag: the run ends as if `q` were
/// pressed (the UI restores the terminal; `--headless` writes its JSON
/// snapshot). A second signal while the first is handled ends the process
/// at once (status 1).
///
/// SIGHUP says the terminal is gone: the UI ends at once from the signal
/// handler (status 129), restoring nothing, since its main loop may be stuck
/// in a read of the dead terminal. `--headless` has no terminal to lose and
/// treats SIGHUP like SIGTERM.
fn stop_on_signals(headless: bool) -> std::io::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use signal_hook::flag;
    let stop = Arc::new(AtomicBool::new(false));
    let stopping: &[i32] = if headless {
        &[SIGINT, SIGTERM, SIGHUP]
    } else {
        flag::register_conditional_shutdown(
            SIGHUP,
            term::HANGUP_STATUS,
            Arc::new(AtomicBool::new(true)),
        )?;
        &[SIGINT, SIGTERM]
    };
    for &sig in stopping {
        // Registered first: it sees the flag as the previous signal left it.
        flag::register_conditional_shutdown(sig, 1, stop.clone())?;
        flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

/// How often the loops look at the stop flag while waiting.
const STOP_POLL: Duration = Duration::from_millis(20);

fn start(cli: &Cli) -> anyhow::Result<Handle> {
    let kind = match (&cli.interface, &cli.read) {
        (Some(interface), _) => SourceKind::Live {
            interface: interface.clone(),
            filter: cli
                .filter
                .clone()
                .unwrap_or_else(|| source::default_filter(cli.port, cli.rocev2_port)),
            snaplen: cli.snaplen,
            buffer_bytes: cli.buffer_mb.saturating_mul(1 << 20),
            promisc: !cli.no_promisc,
        },
        (None, Some(file)) => SourceKind::Replay {
            file: file.clone(),
            speed: cli.speed,
        },
        (None, None) => anyhow::bail!("give -i IFACE or -r CAPTURE"),
    };
    let engine = analyzer::Config {
        stall_threshold_ns: cli.stall_us.saturating_mul(1000),
        lint: (!cli.no_lint).then(analyzer::lint::LintOptions::default),
        ..analyzer::Config::default()
    };
    let events = EventConfig {
        burst: cli.burst.max(1),
        path_idle_ns: cli.path_idle_ms.saturating_mul(1_000_000),
    };
    let mut pipeline = Pipeline::new(
        kind.info(),
        decode_config(cli.port, cli.rocev2_port),
        engine,
        events,
    );
    if let Some(m) = cli.metrics_config() {
        pipeline = pipeline.with_metrics(m.per_connection, m.max_series);
    }
    source::start(kind, pipeline, Duration::from_millis(cli.tick_ms.max(10)))
}

fn run(cli: &Cli, stop: &AtomicBool) -> anyhow::Result<()> {
    // The port first: a port in use fails before the capture starts.
    let listener = cli.metrics.as_deref().map(server::bind).transpose()?;
    let handle = start(cli)?;
    let server = match (listener, cli.metrics_config()) {
        (Some(l), Some(cfg)) => Some(Server::serve(l, handle.snapshots(), cfg)?),
        _ => None,
    };
    if cli.headless {
        if let Some(s) = &server {
            eprintln!(
                "metaroce-top: serving metrics on http://{}/metrics",
                s.local_addr()
            );
        }
        return headless(cli, handle, server, stop);
    }
    let mut terminal = term::init().context("cannot set up the terminal")?;
    let _guard = term::Guard;
    term::exit_when_lost().context("cannot watch the terminal")?;
    let mut app = App::new(handle.snapshot(), cli.save_dir.clone());
    let frame = Duration::from_secs(1) / cli.fps.clamp(1, 120);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if !handle.is_alive() {
            anyhow::bail!("the capture thread stopped unexpectedly");
        }
        app.update(handle.snapshot());
        // The terminal's output failed: it is gone (see term::lost).
        if terminal.draw(|f| render::app::render(f, &mut app)).is_err() {
            term::lost();
        }
        // Test hook: proves the panic hook restores the terminal.
        if std::env::var_os("METAROCE_TOP_PANIC_AFTER_DRAW").is_some() {
            panic!("METAROCE_TOP_PANIC_AFTER_DRAW is set");
        }
        // Wait for a key until the next frame is due (a signal ends the
        // wait); redraw at once after a key.
        let due = Instant::now() + frame;
        let mut ready = false;
        while !ready && !stop.load(Ordering::Relaxed) {
            let left = due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // The terminal's input failed: it is gone.
            ready = event::poll(left.min(STOP_POLL)).unwrap_or_else(|_| term::lost());
        }
        if !ready {
            continue;
        }
        if let Event::Key(key) = event::read().unwrap_or_else(|_| term::lost())
            && key.kind == KeyEventKind::Press
        {
            match app.on_key(&key) {
                Some(Effect::Quit) => {
                    drop(handle);
                    return Ok(());
                }
                Some(Effect::Reset) => handle.reset(),
                Some(Effect::Pause(p)) => handle.set_paused(p),
                None => {}
            }
        }
    }
}

/// Runs until the replay ends, `--duration` passes, a signal comes or the
/// capture thread dies; then writes the final snapshot.
/// With `--metrics` and `--duration`, a finished replay keeps serving its
/// final figures until the duration ends. The server stops first: a scrape
/// during shutdown finds the port closed.
fn headless(
    cli: &Cli,
    handle: Handle,
    server: Option<Server>,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let serve_to_the_end = server.is_some() && cli.duration.is_some();
    let started = Instant::now();
    let limit = cli.duration.map(Duration::from_secs_f64);
    let mut peak: f64 = 0.0;
    let mut died = false;
    loop {
        std::thread::sleep(STOP_POLL);
        if stop.load(Ordering::Relaxed) || limit.is_some_and(|l| started.elapsed() >= l) {
            break;
        }
        if !handle.is_alive() {
            died = true;
            break;
        }
        let snap = handle.snapshot();
        peak = peak.max(snap.stats.packets_per_s);
        match snap.state {
            RunState::Running => {}
            RunState::Finished if serve_to_the_end => {}
            RunState::Finished | RunState::Failed(_) => break,
        }
    }
    drop(server);
    let snap = handle.stop();
    let mut snap: Snapshot = (*snap).clone();
    snap.process = ProcessStats::read(started.elapsed().as_secs_f64()).map(|p| ProcessStats {
        peak_packets_per_s: peak,
        ..p
    });
    match &cli.json_out {
        Some(path) => app::write_json(&snap, path)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => println!("{}", serde_json::to_string_pretty(&snap)?),
    }
    if let RunState::Failed(e) = &snap.state {
        anyhow::bail!("{e}");
    }
    if died {
        anyhow::bail!("the capture thread stopped unexpectedly (snapshot written)");
    }
    Ok(())
}
