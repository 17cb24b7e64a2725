//! Virtual-time tests of the core through the `Pair` harness: every message
//! arrives byte-exact and exactly once under seeded loss, reordering,
//! duplication, trimming, CE marking and blackholed paths.

use reference_stack::sim::{LinkConfig, Pair, RunResult, WorkOp};
use reference_stack::{CompletionKind, Config, Event, Mode, Spray, TraceEvent, TxCause};

fn pair(cfg: Config, link: LinkConfig, seed: u64) -> Pair {
    Pair::new(cfg.clone(), cfg, seed, link)
}

fn run(
    cfg: Config,
    link: LinkConfig,
    op: WorkOp,
    n: usize,
    size: usize,
    seed: u64,
) -> (Pair, RunResult) {
    let mut p = pair(cfg, link, seed);
    let (c, s) = p.connect();
    let r = p.run_workload(c, s, op, n, size, 10_000_000_000);
    assert!(r.byte_exact, "not byte-exact: {r:?}");
    assert!(r.exactly_once, "not exactly once: {r:?}");
    (p, r)
}

#[test]
fn every_op_survives_heavy_impairment() {
    let link = LinkConfig {
        loss: 0.03,
        dup: 0.03,
        reorder: 0.05,
        reorder_delay: 30_000,
        jitter: 5_000,
        trim: 0.02,
        ce: 0.01,
        ..LinkConfig::default()
    };
    for (i, op) in [WorkOp::Write, WorkOp::WriteImm, WorkOp::Read, WorkOp::Send]
        .into_iter()
        .enumerate()
    {
        for spray in [Spray::RoundRobin, Spray::Weighted] {
            let cfg = Config {
                spray,
                ..Config::default()
            };
            let (p, r) = run(cfg, link, op, 12, 150_000, 10 + i as u64);
            assert!(
                r.retransmissions > 0,
                "{op:?}: impairment should force repairs"
            );
            assert!(p.stats.duplicated > 0 && p.stats.trimmed > 0);
        }
    }
}

#[test]
fn go_back_n_is_correct_under_loss_and_reordering() {
    let link = LinkConfig {
        loss: 0.01,
        reorder: 0.02,
        reorder_delay: 20_000,
        dup: 0.01,
        ..LinkConfig::default()
    };
    let cfg = Config {
        mode: Mode::GoBackN,
        ..Config::default()
    };
    for op in [WorkOp::Write, WorkOp::Read, WorkOp::Send] {
        let (p, _) = run(cfg.clone(), link, op, 6, 200_000, 7);
        let s = p.server.handles().next().unwrap();
        let c = p.client.handles().next().unwrap();
        // Single path only.
        assert_eq!(p.client.conn(c).path_stats().len(), 1);
        let st = if op == WorkOp::Read {
            p.client.conn(c).stats()
        } else {
            p.server.conn(s).stats()
        };
        assert!(
            st.gbn_discarded_rx > 0,
            "{op:?}: out-of-order packets must be discarded"
        );
    }
}

#[test]
fn tiny_and_zero_length_messages() {
    for size in [0usize, 1, 4095, 4096, 4097] {
        run(
            Config::default(),
            LinkConfig {
                loss: 0.05,
                ..LinkConfig::default()
            },
            WorkOp::Write,
            20,
            size,
            3,
        );
        run(
            Config::default(),
            LinkConfig::default(),
            WorkOp::Send,
            5,
            size,
            3,
        );
        run(
            Config::default(),
            LinkConfig::default(),
            WorkOp::Read,
            5,
            size,
            3,
        );
    }
}

#[test]
fn blackholed_path_is_retired_probed_and_restored() {
    let cfg = Config {
        trace: true,
        ..Config::default()
    };
    let mut p = pair(cfg, LinkConfig::default(), 21);
    let (c, s) = p.connect();
    let t0 = p.time;
    p.update_link(3, |l| l.blackhole = Some((t0, t0 + 3_000_000)));
    let r = p.run_workload(c, s, WorkOp::Write, 24, 1 << 20, 10_000_000_000);
    assert!(r.byte_exact && r.exactly_once, "{r:?}");
    // Probes continue (with backoff) until the blackhole ends.
    let t = p.time + 30_000_000;
    p.drive_until(t, |p| p.time >= t);
    let mut changes = Vec::new();
    let (mut stall_start, mut stall_end) = (0, 0);
    while let Some(rec) = p.client.poll_trace() {
        match rec.event {
            TraceEvent::PathChange { ev, to, reason, .. } => changes.push((ev, to, reason)),
            TraceEvent::StallStart { .. } => stall_start += 1,
            TraceEvent::StallEnd { duration_ns, .. } => {
                assert!(duration_ns >= 1_000_000);
                stall_end += 1;
            }
            _ => {}
        }
    }
    // Repathing is fast enough that the cumulative ack never stalls.
    assert_eq!((stall_start, stall_end), (0, 0));
    assert!(changes.contains(&(3, "retired", "loss")), "{changes:?}");
    assert!(changes.contains(&(3, "probing", "probe")), "{changes:?}");
    assert!(
        changes.contains(&(3, "active", "probe_reply")),
        "{changes:?}"
    );
    let ps = p.client.conn(c).path_stats();
    assert_eq!(ps[2].state, "active");
    assert!(ps[2].retirements >= 1);
    // Nothing else was retired.
    assert!(
        ps.iter().filter(|s| s.ev != 3).all(|s| s.retirements == 0),
        "{ps:?}"
    );
}

#[test]
fn congested_path_is_repathed_plb() {
    // ev 2 is slow (1 Gb/s, shallow ECN threshold): it marks CE constantly.
    let cfg = Config {
        trace: true,
        ..Config::default()
    };
    let mut p = pair(cfg, LinkConfig::default(), 5);
    p.update_link(2, |l| {
        l.rate_gbps = 1.0;
        l.ecn_threshold = 8_000;
    });
    let (c, s) = p.connect();
    let r = p.run_workload(c, s, WorkOp::Write, 8, 1 << 20, 10_000_000_000);
    assert!(r.byte_exact && r.exactly_once);
    let st = p.client.conn(c).stats().clone();
    assert!(st.ece_rx > 0 && st.cnp_rx > 0, "{st:?}");
    let ps = p.client.conn(c).path_stats();
    assert!(ps[1].retirements >= 1 || ps[1].cwnd < ps[0].cwnd, "{ps:?}");
}

#[test]
fn rnr_then_recv_posted_later() {
    let mut p = pair(Config::default(), LinkConfig::default(), 9);
    let (c, s) = p.connect();
    let now = p.time;
    p.client
        .conn_mut(c)
        .post_send(now, vec![7; 10_000], Some(99));
    let t = p.time + 300_000;
    p.drive_until(t, |p| p.time >= t);
    assert!(p.client.conn(c).stats().nack_rnr_rx > 0);
    p.server.conn_mut(s).post_recv(10_000);
    let t = p.time + 100_000_000;
    let ok = p.drive_until(t, |p| {
        p.server_events
            .iter()
            .any(|(_, e)| matches!(e, Event::Completion(x) if x.kind == CompletionKind::Recv))
    });
    assert!(ok);
    let got = p
        .server_events
        .iter()
        .find_map(|(_, e)| match e {
            Event::Completion(x) if x.kind == CompletionKind::Recv => Some(x.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(got.data.as_deref(), Some(&[7u8; 10_000][..]));
    assert_eq!(got.imm, Some(99));
    let t = p.time + 10_000_000;
    assert!(p.drive_until(t, |p| p.client_events.iter().any(
        |(_, e)| matches!(e, Event::Completion(x) if x.kind == CompletionKind::Send && x.ok)
    )));
}

#[test]
fn bad_rkey_is_refused_without_breaking_the_connection() {
    let mut p = pair(Config::default(), LinkConfig::default(), 11);
    let (c, s) = p.connect();
    let now = p.time;
    let rkey = p.server.memory.register(0x1000, 4096);
    // Out of bounds, and a wrong rkey.
    p.client
        .conn_mut(c)
        .post_write(now, vec![1; 8192], 0x1000, rkey, None);
    p.client
        .conn_mut(c)
        .post_write(now, vec![1; 16], 0x1000, rkey ^ 0xFFFF, None);
    p.client.conn_mut(c).post_read(now, 100, 0x0, rkey);
    let t = p.time + 50_000_000;
    p.drive_until(t, |p| {
        p.client_events
            .iter()
            .filter(|(_, e)| matches!(e, Event::Completion(_)))
            .count()
            >= 3
    });
    let done: Vec<_> = p
        .client_events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Completion(x) => Some(x.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(done.len(), 3, "{done:?}");
    assert!(done.iter().all(|x| !x.ok), "{done:?}");
    assert!(p.client.conn(c).stats().nack_remote_access_rx >= 3);
    // Nothing outside the region was touched and the connection still works.
    let r = p.run_workload(c, s, WorkOp::Write, 2, 5000, 1_000_000_000);
    assert!(r.byte_exact && r.exactly_once);
}

#[test]
fn close_handshake_and_keepalive() {
    let cfg = Config {
        keepalive: 1_000_000,
        ..Config::default()
    };
    let mut p = pair(cfg, LinkConfig::default(), 12);
    let (c, s) = p.connect();
    let t = p.time + 5_000_000;
    p.drive_until(t, |p| p.time >= t);
    assert!(p.client.conn(c).is_established() && p.server.conn(s).is_established());
    let r = p.run_workload(c, s, WorkOp::Write, 2, 10_000, 1_000_000_000);
    assert!(r.byte_exact);
    p.client.conn_mut(c).close();
    let t = p.time + 100_000_000;
    assert!(p.drive_until(t, |p| p.client.conn(c).is_closed()
        && p.server.conn(s).is_closed()));
    assert!(
        p.client_events
            .iter()
            .any(|(_, e)| *e == Event::Closed { error: None })
    );
    assert!(
        p.server_events
            .iter()
            .any(|(_, e)| *e == Event::Closed { error: None })
    );
}

#[test]
fn handshake_survives_ctrl_loss() {
    // Lose everything for the first 30 ms: CONNECT/ACCEPT are retried.
    let mut p = pair(Config::default(), LinkConfig::default(), 13);
    let t0 = p.time;
    for ev in 1..=8 {
        p.update_link(ev, |l| l.blackhole = Some((t0, t0 + 30_000_000)));
    }
    let (c, s) = p.connect();
    assert!(p.client.conn(c).is_established());
    let r = p.run_workload(c, s, WorkOp::Write, 2, 10_000, 1_000_000_000);
    assert!(r.byte_exact && r.exactly_once);
}

#[test]
fn peer_vanishing_aborts_after_idle_timeout() {
    let cfg = Config {
        idle_timeout: 20_000_000,
        ..Config::default()
    };
    let mut p = pair(cfg, LinkConfig::default(), 14);
    let (c, _s) = p.connect();
    let t0 = p.time;
    for ev in 1..=8 {
        p.update_link(ev, |l| l.blackhole = Some((t0, u64::MAX)));
    }
    let now = p.time;
    p.client
        .conn_mut(c)
        .post_write(now, vec![0; 100], 0, 1, None);
    let t = p.time + 10_000_000_000;
    assert!(p.drive_until(t, |p| p.client.conn(c).is_closed()));
    assert!(
        p.client_events
            .iter()
            .any(|(_, e)| matches!(e, Event::Closed { error: Some(_) }))
    );
}

#[test]
fn runs_are_deterministic() {
    let link = LinkConfig {
        loss: 0.02,
        jitter: 3000,
        dup: 0.01,
        ..LinkConfig::default()
    };
    let a = run(Config::default(), link, WorkOp::Write, 4, 300_000, 77).1;
    let b = run(Config::default(), link, WorkOp::Write, 4, 300_000, 77).1;
    assert_eq!(a, b);
}

#[test]
fn trace_records_every_transmission_with_its_cause() {
    let cfg = Config {
        trace: true,
        ..Config::default()
    };
    let link = LinkConfig {
        loss: 0.02,
        trim: 0.01,
        ..LinkConfig::default()
    };
    let mut p = pair(cfg, link, 15);
    let (c, s) = p.connect();
    let r = p.run_workload(c, s, WorkOp::Write, 4, 256 << 10, 1_000_000_000);
    assert!(r.byte_exact);
    let mut tx = 0;
    let mut retx = 0;
    let mut causes = std::collections::BTreeSet::new();
    let mut completions = 0;
    while let Some(rec) = p.client.poll_trace() {
        let line = serde_json::to_string(&rec).unwrap();
        assert!(line.contains("\"event\":"), "{line}");
        match rec.event {
            TraceEvent::Tx {
                retransmission,
                cause,
                ..
            } => {
                tx += 1;
                if retransmission {
                    retx += 1;
                    causes.insert(format!("{cause:?}"));
                    assert_ne!(cause, TxCause::New);
                }
            }
            TraceEvent::Completion { side: "sender", .. } => completions += 1,
            _ => {}
        }
    }
    let st = p.client.conn(c).stats();
    assert_eq!(tx, st.data_tx);
    assert_eq!(retx, st.retransmissions);
    assert_eq!(completions, 4);
    assert!(causes.contains("NackTrimmed"), "{causes:?}");
    let mut deliveries = 0;
    while let Some(rec) = p.server.poll_trace() {
        if matches!(rec.event, TraceEvent::Delivery { .. }) {
            deliveries += 1;
        }
    }
    assert_eq!(deliveries, 4 * 64, "every PSN is delivered exactly once");
}

#[test]
fn total_outage_is_logged_as_one_stall() {
    let cfg = Config {
        trace: true,
        ..Config::default()
    };
    let mut p = pair(cfg, LinkConfig::default(), 31);
    let (c, s) = p.connect();
    let t0 = p.time;
    for ev in 1..=8 {
        p.update_link(ev, |l| l.blackhole = Some((t0 + 100_000, t0 + 5_000_000)));
    }
    let r = p.run_workload(c, s, WorkOp::Write, 8, 1 << 20, 10_000_000_000);
    assert!(r.byte_exact && r.exactly_once, "{r:?}");
    let mut stalls = Vec::new();
    while let Some(rec) = p.client.poll_trace() {
        match rec.event {
            TraceEvent::StallStart { .. } => stalls.push((rec.t_ns, None)),
            TraceEvent::StallEnd { duration_ns, .. } => {
                stalls.last_mut().unwrap().1 = Some(duration_ns)
            }
            _ => {}
        }
    }
    assert_eq!(stalls.len(), 1, "{stalls:?}");
    let d = stalls[0].1.expect("the stall ended");
    assert!((4_000_000..20_000_000).contains(&d), "{d}");
    assert_eq!(p.client.conn(c).stats().stalls, 1);
}

#[test]
fn closed_connections_are_dropped_after_their_drain_period() {
    let mut p = pair(Config::default(), LinkConfig::default(), 15);
    let (c, s) = p.connect();
    let r = p.run_workload(c, s, WorkOp::Write, 2, 10_000, 1_000_000_000);
    assert!(r.byte_exact && r.exactly_once);
    p.client.conn_mut(c).close();
    let t = p.time + 100_000_000;
    assert!(
        p.drive_until(t, |p| p.client.get(c).is_some_and(|x| x.is_closed())
            && p.server.get(s).is_some_and(|x| x.is_closed()))
    );
    // Closed but draining: still held, no longer live.
    assert_eq!((p.client.conn_count(), p.server.conn_count()), (1, 1));
    assert_eq!((p.client.live_conns(), p.server.live_conns()), (0, 0));
    // Nothing is left to do once both are drained (at most 3 RTOs; the
    // RTO is at most rto_max).
    let t = p.time + 3 * Config::default().rto_max + 1;
    p.drive_until(t, |p| p.client.conn_count() + p.server.conn_count() == 0);
    assert!(p.client.get(c).is_none() && p.server.get(s).is_none());
    assert_eq!(p.client.poll_timeout(), None);
    assert_eq!(p.server.poll_timeout(), None);
    // Their events were all delivered, Closed last.
    assert!(matches!(
        p.client_events.last(),
        Some((h, Event::Closed { error: None })) if *h == c
    ));
    // The endpoint accepts a new connection afterwards, on a new handle.
    let (c2, s2) = p.connect();
    assert!(c2 != c && s2 != s);
    let r = p.run_workload(c2, s2, WorkOp::Write, 1, 10_000, 1_000_000_000);
    assert!(r.byte_exact && r.exactly_once);
}

#[test]
fn both_sides_use_the_smaller_mtu_of_the_handshake() {
    // Either side may have the smaller MTU: CONNECT carries the client's,
    // ACCEPT the server's, and both send DATA of at most the smaller.
    for (client_mtu, server_mtu) in [(4096, 1412), (1412, 4096)] {
        let cfg = |mtu| Config {
            mtu,
            trace: true,
            ..Config::default()
        };
        let mut p = Pair::new(cfg(client_mtu), cfg(server_mtu), 16, LinkConfig::default());
        let (c, s) = p.connect();
        assert_eq!(p.client.conn(c).mtu(), 1412);
        assert_eq!(p.server.conn(s).mtu(), 1412);
        // READ: the server's READ_RESP data travels the other way.
        for op in [WorkOp::Write, WorkOp::Read] {
            let r = p.run_workload(c, s, op, 2, 100_000, 1_000_000_000);
            assert!(r.byte_exact && r.exactly_once, "{op:?}: {r:?}");
        }
        let mut largest = 0;
        for ep in [&mut p.client, &mut p.server] {
            while let Some(rec) = ep.poll_trace() {
                if let TraceEvent::Tx { payload_len, .. } = rec.event {
                    largest = largest.max(payload_len);
                }
            }
        }
        assert_eq!(largest, 1412, "{client_mtu}/{server_mtu}");
    }
}
