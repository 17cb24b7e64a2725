//! `relay`: forwards between two networks with impairment, in place of
//! netem (which this kind of host lacks).

use std::net::Ipv4Addr;
use std::time::Instant;

use clap::Args;

use crate::args::ImpairArgs;
use crate::report::impairment_summary;

#[derive(Args, Debug)]
pub(crate) struct RelayArgs {
    /// Our address on side A, and the one peer there.
    #[arg(long)]
    pub(crate) a_bind: Ipv4Addr,
    #[arg(long)]
    pub(crate) a_peer: Ipv4Addr,
    /// Our address on side B, and the one peer there.
    #[arg(long)]
    pub(crate) b_bind: Ipv4Addr,
    #[arg(long)]
    pub(crate) b_peer: Ipv4Addr,
    #[arg(long, default_value_t = 4794)]
    pub(crate) port: u16,
    /// Exit after this many seconds.
    #[arg(long)]
    pub(crate) duration: Option<f64>,
    /// Exit after this many seconds without traffic (once some was seen).
    #[arg(long)]
    pub(crate) idle_exit: Option<f64>,
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Print the counters as JSON at exit.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) imp: ImpairArgs,
}

pub(crate) fn run_relay(a: &RelayArgs) -> anyhow::Result<()> {
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
