use reference_stack::sim::{LinkConfig, Pair, WorkOp};
use reference_stack::{Config, Mode};

fn run(cfg: Config, link: LinkConfig, op: WorkOp, n: usize, size: usize, seed: u64) {
    let mut pair = Pair::new(cfg.clone(), cfg, seed, link);
    let (c, s) = pair.connect();
    let r = pair.run_workload(c, s, op, n, size, 5_000_000_000);
    eprintln!(
        "{op:?} {r:?}\nclient {:?}\nserver {:?}\nsim {:?}",
        pair.client.conn(c).stats(),
        pair.server.conn(s).stats(),
        pair.stats
    );
    for p in pair.client.conn(c).path_stats() {
        eprintln!("{p:?}");
    }
    assert!(r.byte_exact && r.exactly_once, "{r:?}");
}

#[test]
fn write_lossless() {
    run(
        Config::default(),
        LinkConfig::default(),
        WorkOp::Write,
        8,
        1 << 20,
        1,
    );
}

#[test]
fn write_lossy() {
    let link = LinkConfig {
        loss: 0.01,
        ..LinkConfig::default()
    };
    run(Config::default(), link, WorkOp::Write, 8, 1 << 20, 2);
}

#[test]
fn gbn_lossy() {
    let link = LinkConfig {
        loss: 0.01,
        ..LinkConfig::default()
    };
    let cfg = Config {
        mode: Mode::GoBackN,
        ..Config::default()
    };
    run(cfg, link, WorkOp::Write, 8, 1 << 20, 3);
}

#[test]
fn read_and_send() {
    let link = LinkConfig {
        loss: 0.02,
        ..LinkConfig::default()
    };
    run(Config::default(), link, WorkOp::Read, 16, 100_000, 4);
    run(Config::default(), link, WorkOp::Send, 16, 100_000, 5);
}
