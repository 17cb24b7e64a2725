//! The baseline of `cargo xtask bench stack`: raw UDP on loopback through
//! the stack's own driver (sendmmsg over one socket per ev, recvmmsg), no
//! transport. A sender thread sends datagrams of a full WRITE packet's size
//! for `SECONDS`; the receiver counts what arrives. Prints one JSON object:
//! the received rate and the payload share of it, the figure to compare
//! with a MetaRoCE connection's goodput.
//!
//!   cargo run --release -p reference-stack --example raw_udp -- [SECONDS] [PATHS] [MTU] [PORT]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use reference_stack::driver::{Driver, DriverConfig};
use reference_stack::{Config, Endpoint};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    let seconds: f64 = arg(0, "3").parse().context("SECONDS")?;
    let paths: u16 = arg(1, "8").parse().context("PATHS")?;
    let mtu: u16 = arg(2, "4096").parse().context("MTU")?;
    let port: u16 = arg(3, "4794").parse().context("PORT")?;

    let stop = Arc::new(AtomicBool::new(false));
    let cfg = Config::default();
    let srv_cfg = DriverConfig {
        bind: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
        port,
        ..DriverConfig::default()
    };
    let mut srv = Driver::new(srv_cfg, Endpoint::new(cfg.clone(), 1, true))?;
    let receiving = stop.clone();
    let receiver = std::thread::spawn(move || -> anyhow::Result<f64> {
        let mut total = 0u64;
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        while !receiving.load(Ordering::Relaxed) {
            srv.wait(1_000_000)?;
            let n = srv.recv_raw()?;
            if n > 0 {
                first.get_or_insert_with(Instant::now);
                last = Instant::now();
                total += n;
            }
        }
        let t = first.map_or(seconds, |f| last.duration_since(f).as_secs_f64());
        Ok(total as f64 * 8.0 / t.max(1e-9) / 1e9)
    });
    let cli_cfg = DriverConfig {
        bind: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        port,
        ..DriverConfig::default()
    };
    let evs: Vec<u16> = (1..=paths).collect();
    let endpoint = Endpoint::new(
        Config {
            evs: evs.clone(),
            ..cfg
        },
        2,
        false,
    );
    let mut cli = Driver::new(cli_cfg, endpoint)?;
    // The size of a full WRITE packet: 52-byte header, MTU, CRC.
    let dgram = vec![0xABu8; usize::from(mtu) + 56];
    let batch: Vec<&[u8]> = (0..64).map(|_| &dgram[..]).collect();
    let remote = SocketAddr::from(([127, 0, 0, 1], port));
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds {
        cli.send_raw(remote, &evs, &batch)?;
    }
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let wire_gbps = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("receiver thread panicked"))??;
    let payload_gbps = wire_gbps * f64::from(mtu) / dgram.len() as f64;
    println!(
        "{}",
        serde_json::json!({ "wire_gbps": wire_gbps, "payload_gbps": payload_gbps })
    );
    Ok(())
}
