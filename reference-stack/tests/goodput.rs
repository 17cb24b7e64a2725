//! Goodput versus loss rate and path count, MetaRoCE against the RoCEv2-like
//! go-back-N mode, in virtual time (insta snapshot, like smoltcp's netsim).
//! Every path: 25 Gb/s, 10 us one way, 1 MiB queue. 16 x 1 MiB WRITEs.

use reference_stack::sim::{LinkConfig, Pair, WorkOp};
use reference_stack::{Config, Mode};

fn goodput(mode: Mode, paths: u16, loss: f64) -> f64 {
    let cfg = Config {
        mode,
        evs: (1..=paths).collect(),
        ..Config::default()
    };
    let link = LinkConfig {
        loss,
        ..LinkConfig::default()
    };
    let mut p = Pair::new(cfg.clone(), cfg, 0xBEEF, link);
    let (c, s) = p.connect();
    let r = p.run_workload(c, s, WorkOp::Write, 16, 1 << 20, 20_000_000_000);
    assert!(
        r.byte_exact && r.exactly_once,
        "{mode:?} {paths} {loss}: {r:?}"
    );
    r.goodput_gbps
}

#[test]
fn goodput_table() {
    let losses = [0.0, 0.001, 0.01, 0.05];
    let mut out =
        String::from("loss     | MR 1 path | MR 4 paths | MR 8 paths | GBN 1 path (Gb/s)\n");
    let mut mr8 = Vec::new();
    for &loss in &losses {
        let a = goodput(Mode::MetaRoce, 1, loss);
        let b = goodput(Mode::MetaRoce, 4, loss);
        let c = goodput(Mode::MetaRoce, 8, loss);
        let g = goodput(Mode::GoBackN, 1, loss);
        mr8.push(c);
        out += &format!(
            "{:<8} | {a:>9.1} | {b:>10.1} | {c:>10.1} | {g:>10.1}\n",
            format!("{}%", loss * 100.0)
        );
    }
    insta::assert_snapshot!(out);
    // MetaRoCE keeps most of its goodput at 1% loss.
    assert!(mr8[2] >= 0.5 * mr8[0], "{out}");
}

/// Longer transfers (64 MiB) dilute the one-time tail repair: at 1% loss,
/// 8 paths keep at least 90% of their lossless goodput (simulated time,
/// seeded, so the figure is the same on every run).
#[test]
fn long_run_loss_ratio() {
    let run = |loss: f64| {
        let cfg = Config::default();
        let link = LinkConfig {
            loss,
            ..LinkConfig::default()
        };
        let mut p = Pair::new(cfg.clone(), cfg, 0xBEEF, link);
        let (c, s) = p.connect();
        let r = p.run_workload(c, s, WorkOp::Write, 64, 1 << 20, 20_000_000_000);
        assert!(r.byte_exact && r.exactly_once);
        r
    };
    let a = run(0.0);
    let b = run(0.01);
    eprintln!(
        "long run: lossless {:.2} Gb/s, 1% loss {:.2} Gb/s ({:.1}%), retx {}, spurious {}",
        a.goodput_gbps,
        b.goodput_gbps,
        100.0 * b.goodput_gbps / a.goodput_gbps,
        b.retransmissions,
        b.spurious
    );
    assert!(
        b.goodput_gbps >= 0.9 * a.goodput_gbps,
        "lossless {:.1} Gb/s, 1% loss {:.1} Gb/s ({:.0}%), {b:?}",
        a.goodput_gbps,
        b.goodput_gbps,
        100.0 * b.goodput_gbps / a.goodput_gbps
    );
}
