//! `server`: accepts connections, serves WRITE/READ/SEND into one
//! registered region, and reports each connection when it closes.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use clap::Args;
use reference_stack::driver::Driver;
use reference_stack::{CompletionKind, ConnHandle, Endpoint, Event};

use crate::args::Common;
use crate::config::{Ports, core_config, driver_config, payload_mtu_of, seed_of, server_path_mtu};
use crate::report::{ConnSummary, Traffic, print_report, report_of};
use crate::{MR_RKEY, MR_VA};

#[derive(Args, Debug)]
pub(crate) struct ServerArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Size of the registered region (rkey 0x101, va 0x10000000).
    #[arg(long, default_value_t = 64 << 20)]
    pub(crate) mr_size: usize,
    /// Receives kept posted per connection.
    #[arg(long, default_value_t = 64)]
    pub(crate) recv_depth: u32,
    /// Exit after the first connection closes.
    #[arg(long)]
    pub(crate) once: bool,
    /// Exit after this many seconds.
    #[arg(long)]
    pub(crate) duration: Option<f64>,
    /// Report a digest (FNV-1a 64) of the registered region when a
    /// connection closes, to check a transfer end to end.
    #[arg(long)]
    pub(crate) digest: bool,
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

pub(crate) fn run_server(a: ServerArgs) -> anyhow::Result<()> {
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
    print_report(&r, a.common.json)?;
    Ok(())
}

/// FNV-1a, 64 bits: a digest to compare memory contents end to end.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
