//! `metaroce-stack`: the reference MetaRoCE stack over UDP.
//!
//! - `server`: accepts connections, exposes one registered region (rkey
//!   0x101 at va 0x10000000) and keeps receives posted.
//! - `client`: connects, runs WRITE/READ/SEND messages and prints goodput,
//!   latency percentiles, retransmissions and per-path stats (`--json`).
//! - `bench`: in-process server and client on loopback: raw UDP through
//!   the same driver against MetaRoCE and the go-back-N mode, lossless and
//!   lossy.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use proto_parse::metaroce::DEFAULT_PORT;
use reference_stack::driver::{
    Driver, DriverConfig, DriverStats, MAX_DEFAULT_MTU, interface_mtu, payload_mtu, route_mtu,
};
use reference_stack::impair::{Blackhole, ImpairStats, Impairment};
use reference_stack::{
    CompletionKind, Config, ConnHandle, ConnStats, Connection, Endpoint, EndpointStats, Event,
    HANDSHAKE_TIMED_OUT, MIN_MTU, Misbehaviour, Mode, PathStats, Spray,
};
use serde::Serialize;

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
    /// Loopback benchmark: raw UDP vs MetaRoCE vs go-back-N, lossless and lossy.
    Bench(BenchArgs),
    /// Forward between two networks with impairment (delay, jitter,
    /// reordering, loss...), in place of netem.
    Relay(RelayArgs),
}

#[derive(Args, Debug)]
struct RelayArgs {
    /// Our address on side A, and the one peer there.
    #[arg(long)]
    a_bind: Ipv4Addr,
    #[arg(long)]
    a_peer: Ipv4Addr,
    /// Our address on side B, and the one peer there.
    #[arg(long)]
    b_bind: Ipv4Addr,
    #[arg(long)]
    b_peer: Ipv4Addr,
    #[arg(long, default_value_t = 4794)]
    port: u16,
    /// Exit after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Exit after this many seconds without traffic (once some was seen).
    #[arg(long)]
    idle_exit: Option<f64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the counters as JSON at exit.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    imp: ImpairArgs,
}

fn run_relay(a: &RelayArgs) -> anyhow::Result<()> {
    use reference_stack::driver::relay::{Relay, RelayConfig};
    let mut r = Relay::new(RelayConfig {
        a_bind: a.a_bind,
        a_peer: a.a_peer,
        b_bind: a.b_bind,
        b_peer: a.b_peer,
        port: a.port,
        impair: a.imp.impairment(),
        seed: a.seed,
    })?;
    let start = Instant::now();
    let (limit, idle) = (a.duration, a.idle_exit);
    let mut last = (0u64, Instant::now());
    r.run(|s| {
        let moved = s.a_to_b + s.b_to_a;
        if moved != last.0 {
            last = (moved, Instant::now());
        }
        limit.is_some_and(|t| start.elapsed().as_secs_f64() >= t)
            || idle.is_some_and(|t| moved > 0 && last.1.elapsed().as_secs_f64() >= t)
    })?;
    let s = &r.stats;
    if a.json {
        println!("{}", serde_json::to_string_pretty(s)?);
    } else {
        println!(
            "relay: A to B {} datagrams, B to A {}, ignored {}\nimpairment A to B: {}\nimpairment B to A: {}",
            s.a_to_b,
            s.b_to_a,
            s.ignored,
            impairment_summary(&s.impair_a_to_b),
            impairment_summary(&s.impair_b_to_a)
        );
    }
    Ok(())
}

#[derive(Clone, Copy, ValueEnum, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum OpArg {
    Write,
    Read,
    Send,
}

#[derive(Clone, Copy, ValueEnum, Debug)]
enum ModeArg {
    Metaroce,
    Gbn,
}

#[derive(Clone, Copy, ValueEnum, Debug)]
enum MisbehaveArg {
    RetransmitAcked,
    AckBackwards,
}

#[derive(Clone, Copy, ValueEnum, Debug)]
enum SprayArg {
    Rr,
    Weighted,
}

#[derive(Clone, Copy, ValueEnum, Debug, PartialEq, Eq, Default)]
enum ImpairWhere {
    #[default]
    Tx,
    Rx,
    Both,
}

#[derive(Args, Clone, Debug)]
struct Common {
    /// Local address, IPv4 or IPv6 (server default 127.0.0.1, client
    /// 127.0.0.2; an IPv6 client gives its own).
    #[arg(long)]
    bind: Option<IpAddr>,
    /// Our MetaRoCE UDP port [server default: 4794; client default: the
    /// port of --connect].
    #[arg(long)]
    port: Option<u16>,
    /// The port peers listen on [default: our own --port; client: the port
    /// of --connect].
    #[arg(long)]
    peer_port: Option<u16>,
    #[arg(long, value_enum, default_value_t = ModeArg::Metaroce)]
    mode: ModeArg,
    #[arg(long, value_enum, default_value_t = SprayArg::Weighted)]
    spray: SprayArg,
    /// Payload MTU (CTRL mtu; both sides use the smaller) [default: the
    /// largest whose packets fit the MTU of the interface toward the peer,
    /// at most 4096]. A value whose packets do not fit is an error: the
    /// stack sends with the don't-fragment bit and never fragments.
    #[arg(long)]
    mtu: Option<u16>,
    /// Test only: accept an --mtu above the path MTU and send without the
    /// don't-fragment bit, so that the kernel fragments.
    #[arg(long, hide = true)]
    allow_fragmentation: bool,
    /// Test only: break the spec on purpose, so that tests can check that
    /// `metaroce-analyze lint` finds it (retransmit-acked: resend PSNs
    /// already acknowledged; ack-backwards: ACKs whose cumulative ack goes
    /// back).
    #[arg(long, hide = true, value_enum)]
    misbehave: Option<MisbehaveArg>,
    #[arg(long)]
    no_crc: bool,
    /// Disable PLB-like path retirement.
    #[arg(long)]
    no_plb: bool,
    #[arg(long, default_value_t = 1000)]
    rto_min_us: u64,
    /// Receiver: ACK after this many DATA packets (or --ack-delay-us).
    #[arg(long, default_value_t = 16)]
    ack_every: u32,
    #[arg(long, default_value_t = 50)]
    ack_delay_us: u64,
    /// Delay-based CC: target fabric delay above the smallest RTT seen.
    #[arg(long, default_value_t = 200)]
    cc_target_us: u64,
    /// Seed of connection ids, initial PSNs and the impairment RNG
    /// (default: from the clock; give one to reproduce a run).
    #[arg(long)]
    seed: Option<u64>,
    /// Write every packet sent and received to this pcap file.
    #[arg(long)]
    pcap: Option<std::path::PathBuf>,
    /// Write the ground-truth event log (JSON Lines) to this file.
    #[arg(long)]
    events: Option<std::path::PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    imp: ImpairArgs,
}

#[derive(Args, Clone, Debug, Default)]
struct ImpairArgs {
    /// Random loss, percent.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Loss of one ev, `EV=PERCENT` (repeatable).
    #[arg(long, value_parser = parse_path_loss)]
    path_loss: Vec<(u16, f64)>,
    #[arg(long, default_value_t = 0)]
    delay_us: u64,
    #[arg(long, default_value_t = 0)]
    jitter_us: u64,
    /// Percent of packets held back by --reorder-us.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    #[arg(long, default_value_t = 50)]
    reorder_us: u64,
    /// Duplication, percent.
    #[arg(long, default_value_t = 0.0)]
    dup: f64,
    /// Trimming of DATA payloads, percent.
    #[arg(long, default_value_t = 0.0)]
    trim: f64,
    /// CE marking, percent.
    #[arg(long, default_value_t = 0.0)]
    ce: f64,
    /// Blackhole `EV:START_MS:DURATION_MS` (repeatable).
    #[arg(long, value_parser = parse_blackhole)]
    blackhole: Vec<Blackhole>,
    /// Where impairments apply.
    #[arg(long, value_enum, default_value_t = ImpairWhere::Tx)]
    impair: ImpairWhere,
}

fn parse_path_loss(s: &str) -> Result<(u16, f64), String> {
    let (ev, p) = s.split_once('=').ok_or("expected EV=PERCENT")?;
    Ok((
        ev.parse().map_err(|e| format!("{e}"))?,
        p.parse().map_err(|e| format!("{e}"))?,
    ))
}

fn parse_blackhole(s: &str) -> Result<Blackhole, String> {
    let v: Vec<&str> = s.split(':').collect();
    if v.len() != 3 {
        return Err("expected EV:START_MS:DURATION_MS".into());
    }
    let n = |x: &str| x.parse::<u64>().map_err(|e| format!("{e}"));
    Ok(Blackhole {
        ev: n(v[0])? as u16,
        start: n(v[1])? * 1_000_000,
        duration: n(v[2])? * 1_000_000,
    })
}

impl ImpairArgs {
    fn impairment(&self) -> Impairment {
        Impairment {
            loss: self.loss / 100.0,
            per_ev_loss: self
                .path_loss
                .iter()
                .map(|&(e, p)| (e, p / 100.0))
                .collect(),
            delay: self.delay_us * 1000,
            jitter: self.jitter_us * 1000,
            reorder: self.reorder / 100.0,
            reorder_delay: self.reorder_us * 1000,
            dup: self.dup / 100.0,
            trim: self.trim / 100.0,
            ce: self.ce / 100.0,
            blackholes: self.blackhole.clone(),
        }
    }
}

#[derive(Args, Debug)]
struct ServerArgs {
    #[command(flatten)]
    common: Common,
    /// Size of the registered region (rkey 0x101, va 0x10000000).
    #[arg(long, default_value_t = 64 << 20)]
    mr_size: usize,
    /// Receives kept posted per connection.
    #[arg(long, default_value_t = 64)]
    recv_depth: u32,
    /// Exit after the first connection closes.
    #[arg(long)]
    once: bool,
    /// Exit after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Report a digest (FNV-1a 64) of the registered region when a
    /// connection closes, to check a transfer end to end.
    #[arg(long)]
    digest: bool,
    /// No per-connection report (the in-process server of `bench`).
    #[arg(skip)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct ClientArgs {
    #[command(flatten)]
    common: Common,
    /// Server address and MetaRoCE port (`10.0.0.1:4794`,
    /// `[fd00::1]:4794`).
    #[arg(long)]
    connect: SocketAddr,
    /// Number of paths (evs 1..=N).
    #[arg(long, default_value_t = 8)]
    paths: u16,
    #[arg(long, value_enum, default_value_t = OpArg::Write)]
    op: OpArg,
    /// Message size in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    size: u32,
    /// Number of messages (default 64 unless --duration).
    #[arg(long)]
    messages: Option<u64>,
    /// Run for this many seconds instead.
    #[arg(long)]
    duration: Option<f64>,
    /// Messages outstanding at once.
    #[arg(long, default_value_t = 8)]
    depth: u32,
    /// The server's region size (WRITE/READ addresses wrap inside it).
    #[arg(long, default_value_t = 64 << 20)]
    remote_size: u64,
    #[arg(long, default_value_t = MR_RKEY)]
    rkey: u32,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    timeout: f64,
}

#[derive(Args, Debug)]
struct BenchArgs {
    #[arg(long, default_value_t = 8)]
    paths: u16,
    #[arg(long, default_value_t = 1 << 20)]
    size: u32,
    /// Seconds per case.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Loss of the lossy cases, percent.
    #[arg(long, default_value_t = 1.0)]
    loss: f64,
    #[arg(long, default_value_t = 4096)]
    mtu: u16,
    /// Rounds; each runs every case once (interleaved, so that a noisy
    /// neighbour weighs on all cases alike). Medians are reported.
    #[arg(long, default_value_t = 5)]
    reps: u32,
    /// Delay-based CC: target fabric delay above the smallest RTT seen.
    #[arg(long, default_value_t = 200)]
    cc_target_us: u64,
    #[arg(long)]
    json: bool,
}

/// The IP MTU toward the peer and where it was read, for messages.
struct PathMtu {
    ip_mtu: u32,
    source: String,
}

/// The payload MTU of one side: `--mtu`, refused when its packets do not
/// fit `path`, or else the largest that fits (at most 4096).
fn payload_mtu_of(c: &Common, ip: IpAddr, path: Option<&PathMtu>) -> anyhow::Result<u16> {
    let fits = path.map(|p| payload_mtu(p.ip_mtu, ip, !c.no_crc));
    match (c.mtu, path, fits) {
        (Some(mtu), Some(p), Some(fits)) if u32::from(mtu) > fits && !c.allow_fragmentation => {
            bail!(
                "--mtu {mtu} does not fit {}: its DATA packets would need {} bytes of IP MTU, \
                 and the stack sends with the don't-fragment bit (it never fragments). Use \
                 --mtu {fits} or less, or leave --mtu out for the largest that fits",
                p.source,
                u32::from(mtu) + p.ip_mtu - fits
            )
        }
        (Some(mtu), ..) => Ok(mtu),
        (None, Some(p), Some(fits)) if fits < u32::from(MIN_MTU) => {
            bail!("{} is too small for MetaRoCE DATA packets", p.source)
        }
        (None, _, fits) => Ok(fits.map_or(MAX_DEFAULT_MTU, |f| {
            f.min(u32::from(MAX_DEFAULT_MTU)) as u16
        })),
    }
}

/// A server's path MTU: that of the interface holding its address.
fn server_path_mtu(bind: IpAddr) -> anyhow::Result<Option<PathMtu>> {
    let found = interface_mtu(bind).with_context(|| format!("reading the MTU of {bind}"))?;
    Ok(found.map(|(name, mtu)| PathMtu {
        ip_mtu: mtu,
        source: format!("the MTU {mtu} of {name}, the interface of {bind}"),
    }))
}

/// A client's path MTU: that of the route to the server.
fn client_path_mtu(bind: IpAddr, server: SocketAddr) -> anyhow::Result<PathMtu> {
    let mtu =
        route_mtu(bind, server).with_context(|| format!("no route from {bind} to {server}"))?;
    Ok(PathMtu {
        ip_mtu: mtu,
        source: format!("the MTU {mtu} of the route from {bind} to {}", server.ip()),
    })
}

fn core_config(c: &Common, evs: Vec<u16>, trace: bool, mtu: u16) -> Config {
    Config {
        mode: match c.mode {
            ModeArg::Metaroce => Mode::MetaRoce,
            ModeArg::Gbn => Mode::GoBackN,
        },
        spray: match c.spray {
            SprayArg::Rr => Spray::RoundRobin,
            SprayArg::Weighted => Spray::Weighted,
        },
        evs,
        mtu,
        crc: !c.no_crc,
        plb: !c.no_plb,
        rto_min: c.rto_min_us * 1000,
        rto_initial: (c.rto_min_us * 2000).max(2_000_000),
        cc_target_headroom: c.cc_target_us * 1000,
        ack_every: c.ack_every.max(1),
        ack_delay: c.ack_delay_us * 1000,
        trace,
        misbehave: c.misbehave.map(|m| match m {
            MisbehaveArg::RetransmitAcked => Misbehaviour::RetransmitAcked,
            MisbehaveArg::AckBackwards => Misbehaviour::AckBackwards,
        }),
        ..Config::default()
    }
}

fn seed_of(c: &Common) -> u64 {
    c.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // One value per process: the clock read once.
        static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        *SEED.get_or_init(|| t ^ u64::from(std::process::id()).rotate_left(32))
    })
}

/// The MetaRoCE ports of one side: ours (where we receive) and the peers'.
/// One port for everyone is the common case: a server's peers listen on
/// the server's own port unless `--peer-port` says otherwise, and a client
/// listens on the port it connects to unless `--port` says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ports {
    ours: u16,
    peers: u16,
}

impl Ports {
    fn server(c: &Common) -> Ports {
        let ours = c.port.unwrap_or(DEFAULT_PORT);
        Ports {
            ours,
            peers: c.peer_port.unwrap_or(ours),
        }
    }

    fn client(c: &Common, connect: SocketAddr) -> Ports {
        Ports {
            ours: c.port.unwrap_or(connect.port()),
            peers: c.peer_port.unwrap_or(connect.port()),
        }
    }
}

fn driver_config(c: &Common, bind: IpAddr, ports: Ports) -> DriverConfig {
    let imp = c.imp.impairment();
    DriverConfig {
        bind,
        port: ports.ours,
        peer_port: ports.peers,
        impair_tx: if c.imp.impair != ImpairWhere::Rx {
            imp.clone()
        } else {
            Impairment::default()
        },
        impair_rx: if c.imp.impair != ImpairWhere::Tx {
            imp
        } else {
            Impairment::default()
        },
        seed: seed_of(c),
        pcap: c.pcap.clone(),
        events: c.events.clone(),
        dont_fragment: !c.allow_fragmentation,
        ..DriverConfig::default()
    }
}

#[derive(Debug, Serialize)]
struct Latency {
    count: usize,
    mean_us: f64,
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    max_us: f64,
}

fn latency(mut v: Vec<u64>) -> Latency {
    v.sort_unstable();
    let pct = |p: f64| {
        if v.is_empty() {
            0.0
        } else {
            v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0
        }
    };
    Latency {
        count: v.len(),
        mean_us: if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<u64>() as f64 / v.len() as f64 / 1000.0
        },
        p50_us: pct(0.5),
        p90_us: pct(0.9),
        p99_us: pct(0.99),
        max_us: pct(1.0),
    }
}

#[derive(Debug, Serialize)]
struct Report {
    role: &'static str,
    op: Option<OpArg>,
    mode: Mode,
    paths: usize,
    size: u32,
    /// The negotiated payload MTU.
    mtu: u16,
    messages: u64,
    bytes: u64,
    elapsed_s: f64,
    goodput_gbps: f64,
    latency: Latency,
    retransmissions: u64,
    spurious_retransmissions: u64,
    closed_error: Option<String>,
    conn: ConnStats,
    path_stats: Vec<PathStats>,
    endpoint: EndpointStats,
    driver: DriverStats,
    pcap_frames: u64,
    /// Server with `--digest`: FNV-1a 64 of the registered region, in hex.
    region_digest: Option<String>,
}

impl OpArg {
    fn name(self) -> &'static str {
        match self {
            OpArg::Write => "write",
            OpArg::Read => "read",
            OpArg::Send => "send",
        }
    }
}

/// The impairment counters as words.
fn impairment_summary(s: &ImpairStats) -> String {
    format!(
        "passed {} dropped {} blackholed {} duplicated {} trimmed {} CE-marked {} reordered {}",
        s.passed, s.dropped, s.blackholed, s.duplicated, s.trimmed, s.ce_marked, s.reordered
    )
}

/// FNV-1a, 64 bits: a digest to compare memory contents end to end.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn print_report(r: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    let op = r.op.map_or(String::new(), |op| format!(" {}", op.name()));
    println!(
        "{} {}{op}: {} messages of {} B, {} B in {:.3} s: goodput {:.3} Gb/s (MTU {})",
        r.role,
        r.mode.name(),
        r.messages,
        r.size,
        r.bytes,
        r.elapsed_s,
        r.goodput_gbps,
        r.mtu
    );
    let l = &r.latency;
    println!(
        "message latency (us): mean {:.1} p50 {:.1} p90 {:.1} p99 {:.1} max {:.1} (n={})",
        l.mean_us, l.p50_us, l.p90_us, l.p99_us, l.max_us, l.count
    );
    println!(
        "retransmissions {} (spurious {}), early losses {}, rto {}, nack gap/trim/rnr {}/{}/{}, cnp {}, ece {}, dup rx {}, trimmed rx {}",
        r.retransmissions,
        r.spurious_retransmissions,
        r.conn.spurious_losses,
        r.conn.rto_fires,
        r.conn.nack_gap_rx,
        r.conn.nack_trimmed_rx,
        r.conn.nack_rnr_rx,
        r.conn.cnp_rx,
        r.conn.ece_rx,
        r.conn.dup_rx,
        r.conn.trimmed_rx
    );
    println!("  ev state    tx_pkts   retx   lost  delivered  ce  retired  srtt_us  cwnd");
    for p in &r.path_stats {
        println!(
            "  {:>2} {:<8} {:>8} {:>6} {:>6} {:>10} {:>3} {:>8} {:>8.1} {:>6}",
            p.ev,
            p.state,
            p.tx_packets,
            p.retransmissions,
            p.lost,
            p.delivered,
            p.ce_marks,
            p.retirements,
            p.srtt_ns as f64 / 1000.0,
            p.cwnd
        );
    }
    let e = &r.endpoint;
    println!(
        "refused datagrams: malformed {} bad CRC {} unknown connection {} unsupported {}; impairment on transmit: {}",
        e.malformed,
        e.bad_crc,
        e.unknown_conn,
        e.unsupported,
        impairment_summary(&r.driver.impair_tx)
    );
    if let Some(d) = &r.region_digest {
        println!("registered region digest (FNV-1a 64): {d}");
    }
    Ok(())
}

/// What one connection moved, for its report.
struct Traffic {
    messages: u64,
    bytes: u64,
    elapsed_s: f64,
    latencies: Vec<u64>,
    /// Messages that completed with an error.
    failed: u64,
    /// Why the connection closed, if not by a graceful close.
    closed_error: Option<String>,
}

/// What a report takes from a connection.
struct ConnSummary {
    mode: Mode,
    mtu: u16,
    stats: ConnStats,
    path_stats: Vec<PathStats>,
}

impl ConnSummary {
    fn of(conn: &Connection) -> ConnSummary {
        ConnSummary {
            mode: conn.mode(),
            mtu: conn.mtu(),
            stats: conn.stats().clone(),
            path_stats: conn.path_stats(),
        }
    }
}

/// The report of a connection of `d`'s endpoint.
fn report_of(
    role: &'static str,
    op: Option<OpArg>,
    size: u32,
    conn: ConnSummary,
    d: &mut Driver,
    t: Traffic,
) -> Report {
    Report {
        role,
        op,
        mode: conn.mode,
        paths: conn.path_stats.len(),
        size,
        mtu: conn.mtu,
        messages: t.messages,
        bytes: t.bytes,
        elapsed_s: t.elapsed_s,
        goodput_gbps: if t.elapsed_s > 0.0 {
            t.bytes as f64 * 8.0 / t.elapsed_s / 1e9
        } else {
            0.0
        },
        latency: latency(t.latencies),
        retransmissions: conn.stats.retransmissions,
        spurious_retransmissions: conn.stats.spurious_retransmissions,
        closed_error: t
            .closed_error
            .or_else(|| (t.failed > 0).then(|| format!("{} messages failed", t.failed))),
        conn: conn.stats,
        path_stats: conn.path_stats,
        endpoint: d.endpoint.stats().clone(),
        driver: d.impair_stats(),
        pcap_frames: d.pcap_frames(),
        region_digest: None,
    }
}

/// What the server tracks per connection until it closes.
#[derive(Default)]
struct ServerConn {
    started: Option<Instant>,
    bytes: u64,
    latencies: Vec<u64>,
}

/// Receive buffers the server posts: any SEND fits.
const SERVER_RECV_CAPACITY: u32 = 1 << 30;

fn run_server(a: ServerArgs, stop: Option<Arc<AtomicBool>>) -> anyhow::Result<()> {
    let c = &a.common;
    let bind = c.bind.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let mtu = payload_mtu_of(c, bind, server_path_mtu(bind)?.as_ref())?;
    let cfg = core_config(c, vec![1], c.events.is_some(), mtu);
    let mut ep = Endpoint::new(cfg, seed_of(c) ^ 0x5E, true);
    let rkey = ep.memory.register(MR_VA, a.mr_size);
    debug_assert_eq!(rkey, MR_RKEY);
    let ports = Ports::server(c);
    let mut d = Driver::new(driver_config(c, bind, ports), ep)?;
    if !c.json {
        eprintln!(
            "metaroce-stack server on {}, answering peers at port {} (rkey {rkey:#x} va {MR_VA:#x} size {})",
            d.local_addr(),
            ports.peers,
            a.mr_size
        );
    }
    let start = Instant::now();
    let mut conns: BTreeMap<ConnHandle, ServerConn> = BTreeMap::new();
    loop {
        d.turn(1_000_000)?;
        while let Some((h, e)) = d.endpoint.poll_event() {
            let closed = match e {
                Event::Connected => {
                    conns.entry(h).or_default().started = Some(Instant::now());
                    for _ in 0..a.recv_depth {
                        d.endpoint.conn_mut(h).post_recv(SERVER_RECV_CAPACITY);
                    }
                    continue;
                }
                Event::Completion(x) => {
                    if x.kind == CompletionKind::Recv {
                        d.endpoint.conn_mut(h).post_recv(SERVER_RECV_CAPACITY);
                    }
                    if matches!(
                        x.kind,
                        CompletionKind::Recv
                            | CompletionKind::RemoteWrite
                            | CompletionKind::RecvWriteImm
                    ) {
                        let sc = conns.entry(h).or_default();
                        sc.bytes += u64::from(x.len);
                        sc.latencies.push(x.latency);
                    }
                    continue;
                }
                Event::Closed { error } => error,
            };
            let sc = conns.remove(&h).unwrap_or_default();
            server_closed(&a, &mut d, h, rkey, sc, closed)?;
            if a.once {
                // Let the CLOSE_ACK leave.
                for _ in 0..10 {
                    d.turn(100_000)?;
                }
                d.finish()?;
                return Ok(());
            }
        }
        if stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            break;
        }
        if a.duration
            .is_some_and(|t| start.elapsed().as_secs_f64() >= t)
        {
            break;
        }
    }
    d.finish()?;
    Ok(())
}

/// A server connection closed: its report.
fn server_closed(
    a: &ServerArgs,
    d: &mut Driver,
    h: ConnHandle,
    rkey: u32,
    sc: ServerConn,
    error: Option<String>,
) -> anyhow::Result<()> {
    // Its events are read before it is dropped (drain period).
    let Some(conn) = d.endpoint.get(h).map(ConnSummary::of) else {
        return Ok(());
    };
    let traffic = Traffic {
        messages: sc.latencies.len() as u64,
        bytes: sc.bytes,
        elapsed_s: sc.started.map_or(0.0, |t| t.elapsed().as_secs_f64()),
        latencies: sc.latencies,
        failed: 0,
        closed_error: error,
    };
    let mut r = report_of("server", None, 0, conn, d, traffic);
    if a.digest {
        let region = d.endpoint.memory.region(rkey);
        r.region_digest = Some(format!(
            "{:016x}",
            fnv1a64(region.map_or(&[], |m| &m.data[..]))
        ));
    }
    d.finish()?;
    if !a.quiet {
        print_report(&r, a.common.json)?;
    }
    Ok(())
}
/// Why the handshake with `connect` failed, and what to check.
fn handshake_failure(connect: SocketAddr, ports: Ports, error: Option<&str>) -> anyhow::Error {
    match error {
        None | Some(HANDSHAKE_TIMED_OUT) => anyhow::anyhow!(
            "no ACCEPT from {connect}: the handshake timed out. Check that `metaroce-stack server` \
             runs there with --port {}, that it answers this host at port {} (the server's \
             --peer-port, which defaults to its own --port), and that no firewall drops UDP \
             on either port",
            connect.port(),
            ports.ours
        ),
        Some(reason) => {
            anyhow::anyhow!("the connection to {connect} closed during the handshake: {reason}")
        }
    }
}

/// The client's address: `--bind`, of the family of the server's address;
/// 127.0.0.2 by default for an IPv4 server (127.0.0.1 is the server's
/// default). IPv6 loopback has one address, so an IPv6 client names its own.
fn client_bind(bind: Option<IpAddr>, connect: SocketAddr) -> anyhow::Result<IpAddr> {
    match bind {
        Some(b) if b.is_ipv6() != connect.is_ipv6() => bail!(
            "--bind {b} and --connect {connect} are of different IP versions: give an address \
             of the server's version"
        ),
        Some(b) => Ok(b),
        None if connect.is_ipv6() => bail!(
            "--connect {connect} is IPv6: give --bind with this host's IPv6 address toward it"
        ),
        None => Ok(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))),
    }
}

fn run_client(a: &ClientArgs) -> anyhow::Result<Report> {
    let c = &a.common;
    if a.paths == 0 {
        bail!("--paths must be at least 1");
    }
    let evs: Vec<u16> = (1..=a.paths).collect();
    let bind = client_bind(c.bind, a.connect)?;
    let mtu = payload_mtu_of(c, bind, Some(&client_path_mtu(bind, a.connect)?))?;
    let cfg = core_config(c, evs, c.events.is_some(), mtu);
    let ep = Endpoint::new(cfg, seed_of(c) ^ 0xC1, false);
    let ports = Ports::client(c, a.connect);
    let mut d = Driver::new(driver_config(c, bind, ports), ep)?;
    let now = d.now();
    let h = d.endpoint.connect(now, a.connect);
    let deadline = Instant::now() + Duration::from_secs_f64(a.timeout);
    handshake(&mut d, h, a.connect, ports, deadline)?;
    let traffic = client_workload(&mut d, h, a, deadline)?;
    if traffic.closed_error.is_none() {
        close_gracefully(&mut d, h)?;
    }
    d.finish()?;
    // The close stops as soon as the connection is closed, long before the
    // drain period that drops it from the endpoint ends.
    let conn = d
        .endpoint
        .get(h)
        .map(ConnSummary::of)
        .context("the connection was dropped before its report was read")?;
    Ok(report_of(
        "client",
        Some(a.op),
        a.size,
        conn,
        &mut d,
        traffic,
    ))
}

/// Drives the handshake until the connection is established.
fn handshake(
    d: &mut Driver,
    h: ConnHandle,
    connect: SocketAddr,
    ports: Ports,
    deadline: Instant,
) -> anyhow::Result<()> {
    loop {
        d.turn(1_000_000)?;
        let mut closed = None;
        while let Some((_, e)) = d.endpoint.poll_event() {
            if let Event::Closed { error } = e {
                closed = Some(error);
            }
        }
        if let Some(error) = closed {
            return Err(handshake_failure(connect, ports, error.as_deref()));
        }
        if d.endpoint.conn(h).is_established() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(handshake_failure(connect, ports, None));
        }
    }
}

/// Posts the client's messages (`--depth` at a time) until `--messages`
/// or `--duration`, and collects their completions.
fn client_workload(
    d: &mut Driver,
    h: ConnHandle,
    a: &ClientArgs,
    deadline: Instant,
) -> anyhow::Result<Traffic> {
    let size = a.size;
    let slots = (a.remote_size / u64::from(size.max(1))).max(1);
    let limit = a
        .messages
        .unwrap_or(if a.duration.is_some() { u64::MAX } else { 64 });
    let run_for = a.duration.map(Duration::from_secs_f64);
    let payload: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
    let want = match a.op {
        OpArg::Write => CompletionKind::Write,
        OpArg::Read => CompletionKind::Read,
        OpArg::Send => CompletionKind::Send,
    };
    let start = Instant::now();
    let (mut posted, mut done, mut failed) = (0u64, 0u64, 0u64);
    let mut lats = Vec::new();
    let mut closed_error = None;
    let mut last_done = start;
    loop {
        let stop_posting = posted >= limit || run_for.is_some_and(|t| start.elapsed() >= t);
        while !stop_posting && posted - done < u64::from(a.depth) && posted < limit {
            let now = d.now();
            let va = MR_VA + (posted % slots) * u64::from(size);
            let conn = d.endpoint.conn_mut(h);
            match a.op {
                OpArg::Write => conn.post_write(now, payload.clone(), va, a.rkey, None),
                OpArg::Read => conn.post_read(now, size, va, a.rkey),
                OpArg::Send => conn.post_send(now, payload.clone(), None),
            };
            posted += 1;
        }
        d.turn(1_000_000)?;
        while let Some((_, e)) = d.endpoint.poll_event() {
            match e {
                Event::Completion(x) if x.kind == want => {
                    done += 1;
                    if !x.ok {
                        failed += 1;
                    }
                    lats.push(x.latency);
                    last_done = Instant::now();
                }
                Event::Closed { error } => {
                    closed_error = Some(error.unwrap_or_else(|| "closed by peer".into()))
                }
                _ => {}
            }
        }
        if closed_error.is_some() || done >= posted && stop_posting {
            break;
        }
        if Instant::now() > deadline {
            closed_error = Some("client timeout".into());
            break;
        }
    }
    Ok(Traffic {
        messages: done,
        bytes: (done - failed) * u64::from(size),
        elapsed_s: last_done.duration_since(start).as_secs_f64().max(1e-9),
        latencies: lats,
        failed,
        closed_error,
    })
}

/// CLOSE once all work completed; waits up to 2 s for CLOSE_ACK.
fn close_gracefully(d: &mut Driver, h: ConnHandle) -> anyhow::Result<()> {
    d.endpoint.conn_mut(h).close();
    let until = Instant::now() + Duration::from_secs(2);
    while !d.endpoint.conn(h).is_closed() && Instant::now() < until {
        d.turn(200_000)?;
        while d.endpoint.poll_event().is_some() {}
    }
    Ok(())
}

#[derive(Debug, Serialize)]
struct BenchRow {
    case: String,
    /// Median over the rounds.
    goodput_gbps: f64,
    /// Every round's figure, in order.
    samples_gbps: Vec<f64>,
    retransmissions: u64,
    spurious_retransmissions: u64,
    /// Losses declared that were acknowledged before their resend left.
    spurious_losses: u64,
    rto_fires: u64,
    p50_us: f64,
    p99_us: f64,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn median_u64(v: &[u64]) -> u64 {
    let f: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    median(&f).round() as u64
}

fn bench_common(b: &BenchArgs, mode: ModeArg, loss: f64, port: u16) -> Common {
    Common {
        bind: None,
        port: Some(port),
        peer_port: Some(port),
        mode,
        spray: SprayArg::Weighted,
        mtu: Some(b.mtu),
        allow_fragmentation: false,
        misbehave: None,
        no_crc: false,
        no_plb: false,
        rto_min_us: 1000,
        cc_target_us: b.cc_target_us,
        ack_every: 16,
        ack_delay_us: 50,
        seed: Some(1),
        pcap: None,
        events: None,
        json: true,
        imp: ImpairArgs {
            loss,
            reorder_us: 50,
            ..ImpairArgs::default()
        },
    }
}

fn bench_raw(b: &BenchArgs, port: u16) -> anyhow::Result<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let cfg = Config::default();
    let srv_cfg = DriverConfig {
        bind: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
        port,
        ..DriverConfig::default()
    };
    let mut srv = Driver::new(srv_cfg, Endpoint::new(cfg.clone(), 1, true))?;
    let stop2 = stop.clone();
    let dur = b.duration;
    let h = std::thread::spawn(move || -> anyhow::Result<f64> {
        let mut total = 0u64;
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        while !stop2.load(Ordering::Relaxed) {
            srv.wait(1_000_000)?;
            let n = srv.recv_raw()?;
            if n > 0 {
                first.get_or_insert_with(Instant::now);
                last = Instant::now();
                total += n;
            }
        }
        let t = first.map_or(dur, |f| last.duration_since(f).as_secs_f64());
        Ok(total as f64 * 8.0 / t.max(1e-9) / 1e9)
    });
    let cli_cfg = DriverConfig {
        bind: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        port,
        ..DriverConfig::default()
    };
    let evs: Vec<u16> = (1..=b.paths).collect();
    let mut cli = Driver::new(
        cli_cfg,
        Endpoint::new(
            Config {
                evs: evs.clone(),
                ..cfg
            },
            2,
            false,
        ),
    )?;
    // Same datagram size as a full WRITE packet: 52 B header, MTU, CRC.
    let dgram = vec![0xABu8; usize::from(b.mtu) + 56];
    let batch: Vec<&[u8]> = (0..64).map(|_| &dgram[..]).collect();
    let remote = SocketAddr::from(([127, 0, 0, 1], port));
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < b.duration {
        cli.send_raw(remote, &evs, &batch)?;
    }
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    // Payload share of the datagram, to compare with MetaRoCE goodput.
    let wire = h
        .join()
        .map_err(|_| anyhow::anyhow!("receiver thread panicked"))??;
    Ok(wire * f64::from(b.mtu) / dgram.len() as f64)
}

fn bench_case(b: &BenchArgs, mode: ModeArg, loss: f64, port: u16) -> anyhow::Result<Report> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut srv_common = bench_common(b, mode, 0.0, port);
    srv_common.bind = Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)));
    let sa = ServerArgs {
        common: srv_common,
        mr_size: 64 << 20,
        recv_depth: 64,
        once: false,
        duration: None,
        digest: false,
        quiet: true,
    };
    let stop2 = stop.clone();
    let h = std::thread::spawn(move || run_server(sa, Some(stop2)));
    std::thread::sleep(Duration::from_millis(50));
    let ca = ClientArgs {
        common: bench_common(b, mode, loss, port),
        connect: SocketAddr::from(([127, 0, 0, 1], port)),
        paths: b.paths,
        op: OpArg::Write,
        size: b.size,
        messages: None,
        duration: Some(b.duration),
        depth: 8,
        remote_size: 64 << 20,
        rkey: MR_RKEY,
        timeout: b.duration + 30.0,
    };
    let r = run_client(&ca);
    stop.store(true, Ordering::Relaxed);
    h.join()
        .map_err(|_| anyhow::anyhow!("server thread panicked"))??;
    r
}

/// One case's figures over the rounds.
#[derive(Default)]
struct CaseRuns {
    goodput: Vec<f64>,
    retx: Vec<u64>,
    spurious: Vec<u64>,
    early: Vec<u64>,
    rto: Vec<u64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
}

impl CaseRuns {
    fn push(&mut self, r: &Report) {
        self.goodput.push(r.goodput_gbps);
        self.retx.push(r.retransmissions);
        self.spurious.push(r.spurious_retransmissions);
        self.early.push(r.conn.spurious_losses);
        self.rto.push(r.conn.rto_fires);
        self.p50.push(r.latency.p50_us);
        self.p99.push(r.latency.p99_us);
    }

    fn row(&self, case: String) -> BenchRow {
        BenchRow {
            case,
            goodput_gbps: median(&self.goodput),
            samples_gbps: self.goodput.clone(),
            retransmissions: median_u64(&self.retx),
            spurious_retransmissions: median_u64(&self.spurious),
            spurious_losses: median_u64(&self.early),
            rto_fires: median_u64(&self.rto),
            p50_us: median(&self.p50),
            p99_us: median(&self.p99),
        }
    }
}

fn run_bench(b: &BenchArgs) -> anyhow::Result<()> {
    let cases = [
        ("MetaRoCE lossless", ModeArg::Metaroce, 0.0),
        ("MetaRoCE loss", ModeArg::Metaroce, b.loss),
        ("go-back-N lossless", ModeArg::Gbn, 0.0),
        ("go-back-N loss", ModeArg::Gbn, b.loss),
    ];
    let reps = b.reps.max(1) as usize;
    let load_before = load_average();
    let mut raw = CaseRuns::default();
    let mut runs: Vec<CaseRuns> = cases.iter().map(|_| CaseRuns::default()).collect();
    // Per-round ratios: both figures of a ratio come from the same round.
    let mut ratios: [Vec<f64>; 3] = Default::default();
    for round in 0..reps {
        let g = bench_raw(b, 4794).context("raw UDP baseline")?;
        raw.goodput.push(g);
        raw.retx.push(0);
        raw.spurious.push(0);
        raw.early.push(0);
        raw.rto.push(0);
        let mut gp = [0.0; 4];
        for (k, &(name, mode, loss)) in cases.iter().enumerate() {
            let r = bench_case(b, mode, loss, 4794).with_context(|| name.to_string())?;
            if let Some(e) = &r.closed_error {
                bail!("{name}: {e}");
            }
            gp[k] = r.goodput_gbps;
            runs[k].push(&r);
        }
        ratios[0].push(gp[0] / g.max(1e-9));
        ratios[1].push(gp[1] / gp[0].max(1e-9));
        ratios[2].push(gp[3] / gp[2].max(1e-9));
        if !b.json {
            eprintln!(
                "round {}/{reps}: raw {g:.3}  MR {:.3} / {:.3} ({:.0}%)  GBN {:.3} / {:.3} ({:.0}%) Gb/s",
                round + 1,
                gp[0],
                gp[1],
                100.0 * gp[1] / gp[0].max(1e-9),
                gp[2],
                gp[3],
                100.0 * gp[3] / gp[2].max(1e-9),
            );
        }
    }
    let mut rows = vec![raw.row("raw UDP (payload share)".into())];
    for (k, &(name, _, loss)) in cases.iter().enumerate() {
        let case = if loss > 0.0 {
            format!("{name} {loss}%")
        } else {
            name.to_string()
        };
        rows.push(runs[k].row(case));
    }
    let med = |i: usize| median(&ratios[i]);
    let summary = serde_json::json!({
        "paths": b.paths, "mtu": b.mtu, "size": b.size, "duration_s": b.duration,
        "cc_target_us": b.cc_target_us,
        "loss_pct": b.loss, "rounds": reps,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "rows": rows,
        // Medians of the per-round ratios.
        "metaroce_vs_raw": med(0),
        "metaroce_loss_vs_lossless": med(1),
        "gbn_loss_vs_lossless": med(2),
        "per_round": {
            "metaroce_vs_raw": ratios[0],
            "metaroce_loss_vs_lossless": ratios[1],
            "gbn_loss_vs_lossless": ratios[2],
        },
    });
    if b.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_bench_table(b, reps, load_before.as_deref(), &rows, &ratios);
    }
    Ok(())
}

/// The bench's text output: the medians per case, then each ratio's
/// median with every round's value.
fn print_bench_table(
    b: &BenchArgs,
    reps: usize,
    load_before: Option<&str>,
    rows: &[BenchRow],
    ratios: &[Vec<f64>; 3],
) {
    let med = |i: usize| median(&ratios[i]);
    println!(
        "{reps} rounds of {} s per case, medians; load average before: {}, after: {}",
        b.duration,
        load_before.unwrap_or_default(),
        load_average().unwrap_or_default()
    );
    println!(
        "{:<28} {:>8} {:>8} {:>9} {:>6} {:>6} {:>9} {:>9}",
        "case", "Gb/s", "retx", "spurious", "early", "rto", "p50 us", "p99 us"
    );
    for r in rows {
        println!(
            "{:<28} {:>8.3} {:>8} {:>9} {:>6} {:>6} {:>9.1} {:>9.1}",
            r.case,
            r.goodput_gbps,
            r.retransmissions,
            r.spurious_retransmissions,
            r.spurious_losses,
            r.rto_fires,
            r.p50_us,
            r.p99_us
        );
    }
    let pct = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{:.0}", 100.0 * x))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "MetaRoCE / raw UDP: {:.1}% [{}]",
        100.0 * med(0),
        pct(&ratios[0])
    );
    println!(
        "MetaRoCE {}% loss / lossless: {:.1}% [{}]",
        b.loss,
        100.0 * med(1),
        pct(&ratios[1])
    );
    println!(
        "go-back-N {}% loss / lossless: {:.1}% [{}]",
        b.loss,
        100.0 * med(2),
        pct(&ratios[2])
    );
}

/// The 1-minute load average (Linux), to report the conditions.
fn load_average() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
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
        Cmd::Server(a) => run_server(a, None),
        Cmd::Client(a) => {
            let r = run_client(&a)?;
            print_report(&r, a.common.json)?;
            if let Some(e) = &r.closed_error {
                bail!("{e}");
            }
            Ok(())
        }
        Cmd::Bench(b) => run_bench(&b),
        Cmd::Relay(a) => run_relay(&a),
    }
}
