//! `client`: connects, runs a workload of WRITE/READ/SEND messages, closes,
//! and reports.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use reference_stack::driver::Driver;
use reference_stack::{CompletionKind, ConnHandle, Endpoint, Event, HANDSHAKE_TIMED_OUT};

use crate::args::{Common, OpArg};
use crate::config::{Ports, client_path_mtu, core_config, driver_config, payload_mtu_of, seed_of};
use crate::report::{ConnSummary, Report, Traffic, report_of};
use crate::{MR_RKEY, MR_VA};

#[derive(Args, Debug)]
pub(crate) struct ClientArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Server address and MetaRoCE port (`10.0.0.1:4794`,
    /// `[fd00::1]:4794`).
    #[arg(long)]
    pub(crate) connect: SocketAddr,
    /// Number of paths (evs 1..=N).
    #[arg(long, default_value_t = 8)]
    pub(crate) paths: u16,
    #[arg(long, value_enum, default_value_t = OpArg::Write)]
    pub(crate) op: OpArg,
    /// Message size in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub(crate) size: u32,
    /// Number of messages (default 64 unless --duration).
    #[arg(long)]
    pub(crate) messages: Option<u64>,
    /// Run for this many seconds instead.
    #[arg(long)]
    pub(crate) duration: Option<f64>,
    /// Messages outstanding at once.
    #[arg(long, default_value_t = 8)]
    pub(crate) depth: u32,
    /// The server's region size (WRITE/READ addresses wrap inside it).
    #[arg(long, default_value_t = 64 << 20)]
    pub(crate) remote_size: u64,
    #[arg(long, default_value_t = MR_RKEY)]
    pub(crate) rkey: u32,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    pub(crate) timeout: f64,
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

pub(crate) fn run_client(a: &ClientArgs) -> anyhow::Result<Report> {
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
