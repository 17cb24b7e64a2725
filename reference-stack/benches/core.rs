//! CPU cost of the sans-IO core: both endpoints of a `Pair` moving 16 MiB
//! of 1 MiB WRITEs over 8 paths with infinitely fast links (so the time
//! measured is emit + CRC + parse + placement + acks + loss recovery, no
//! sockets). Throughput is reported in bytes of payload per second.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use reference_stack::sim::{LinkConfig, Pair, WorkOp};
use reference_stack::{Config, Mode};

fn core(c: &mut Criterion) {
    let mut g = c.benchmark_group("core");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(16 << 20));
    for (name, mode, loss) in [
        ("metaroce_lossless", Mode::MetaRoce, 0.0),
        ("metaroce_loss_1pct", Mode::MetaRoce, 0.01),
        ("gbn_lossless", Mode::GoBackN, 0.0),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let cfg = Config {
                    mode,
                    ..Config::default()
                };
                let link = LinkConfig {
                    rate_gbps: 0.0,
                    loss,
                    ..LinkConfig::default()
                };
                let mut p = Pair::new(cfg.clone(), cfg, 7, link);
                let (cl, sv) = p.connect();
                let r = p.run_workload(cl, sv, WorkOp::Write, 16, 1 << 20, 10_000_000_000);
                assert!(r.byte_exact && r.exactly_once);
                r
            });
        });
    }
    g.finish();
}

criterion_group!(benches, core);
criterion_main!(benches);
