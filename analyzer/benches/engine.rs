//! Engine ingest throughput: observations built once, then fed in order.
//! Traffic (`tests/common/sprayed.rs`): 4 or 64 connection directions,
//! 4-packet messages sprayed over 16 evs each, one ACK per 4 DATA packets,
//! one reordered pair per message, 1 % retransmissions.

use std::hint::black_box;

use analyzer::engine::{Config, Engine, Observation};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "../tests/common/mod.rs"]
mod common;

fn traffic(rounds: u32, flows: u32) -> Vec<Observation> {
    common::sprayed::Sprayed::new(flows, Some(25)).rounds(0..rounds)
}

fn ingest(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine");
    group.sample_size(10);
    for flows in [4u32, 64] {
        let obs = traffic(256_000 / flows, flows);
        group.throughput(Throughput::Elements(obs.len() as u64));
        group.bench_function(format!("ingest_metaroce_{flows}_directions"), |bench| {
            bench.iter(|| {
                let mut engine = Engine::new(Config::default());
                for o in &obs {
                    black_box(engine.ingest(o));
                }
                black_box(engine.state_size())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, ingest);
criterion_main!(benches);
