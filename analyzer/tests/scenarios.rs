//! Scripted MetaRoCE scenarios. Every expected number below is worked out
//! by hand from the script (see the comments), never computed by the
//! engine.

mod common;

use analyzer::engine::{Config, Engine, MsgView, RetxKind, Verdict};
use common::*;
use proto_parse::metaroce::{FbFlags, NackCode, Op};

/// The scenario (times in us after T0; A = 10.0.0.1 conn 0x11 sends DATA to
/// B = 10.0.0.2 conn 0x22 over ev 1 and ev 2; the capture point sees both
/// directions; B's timestamp unit is 2 ns and it holds each packet 500
/// units = 1 us before its feedback):
///
/// ```text
/// f1  t0     CONNECT A->B            f2  t0    ACCEPT B->A (ts_unit 2000 ps)
/// f3  t0     D psn100 ev1 seq1 SOM   msg0 SEND 4000 B, off 0
/// f4  t1     D psn102 ev1 seq2       msg0 off 2000
/// f5  t2     D psn101 ev2 seq1       msg0 off 1000      -> out of order, distance 1
/// f6  t3     D psn103 ev2 seq2 EOM   msg0 off 3000, CE  -> msg0 delivered (3 us)
///            [psn104 ev2 seq3 WRITE msg1 off 0 lost before the capture point]
/// f7  t4     D psn105 ev2 seq4 EOM   msg1 WRITE off 1000, trimmed to 200 B
///                                    -> path loss 1 on ev2 (seq 3 missing)
/// f8  t10    ACK cum101 echo100      -> RTT 10 us (f3)
/// f9  t11    ACK cum101 echo102 SACK{102}       -> RTT 10 us (f4)
/// f10 t12    ACK cum103 echo101      -> RTT 10 us (f5)
/// f11 t13    ACK cum104 echo103 ECE  -> RTT 10 us (f6); msg0 acked: 13 us
/// f12 t14    NACK TRIMMED 105 cum104 echo105 TRIM -> RTT 10 us (f7)
/// f13 t15    NACK GAP 104 cum104 echo105  -> same transmission: no sample
/// f14 t16    CNP ECN cum104 echo103 ECE   -> already sampled: no sample
/// f15 t20    D psn104 att1 ev1 seq3 SOM msg1 off 0   -> retx fast (NACKed), original not captured
/// f16 t21    D psn105 att1 ev1 seq4 EOM msg1 off 1000 -> retx fast of f7; ev2 charged lost_inferred;
///                                                       msg1 delivered (17 us after f7)
/// f17 t22    D psn103 att1 ev2 seq5      -> below cum ack: spurious
/// f18 t30    ACK cum105 echo104 (f15)    -> RTT 10 us
/// f19 t31    ACK cum106 echo105 (f16)    -> RTT 10 us; msg1 acked: 11 us (SOM f15)
/// f20 t32    ACK cum106 echo103 (f17) DUP -> RTT 10 us (first feedback echoing
///                                           f17); f17 already counted spurious
/// f21 t100   D psn106 ev1 seq5 SOM EOM msg2 -> outstanding from t100; delivered at once
/// f22 t2100  D psn106 att1 ev2 seq6      -> stall detected (start t100), retx timeout,
///                                           ev1 charged lost_inferred
/// f23 t2110  ACK cum107 echo106 (f22)    -> RTT 10 us; stall ends: 2010 us,
///                                           cause timeout_retransmission; msg2 acked 2010 us
/// f24 t3000  D psn107 ev1 seq6 SOM EOM msg3 -> outstanding from t3000; delivered at once
/// finish(t5000)                          -> open stall from t3000, 2000 us
/// ```
fn scenario() -> Script {
    let mut s = Script::default();
    s.ctrl(0, true, 1000);
    s.ctrl(0, false, 2000);
    s.data(
        0,
        Data::send(SendPacket {
            psn: 100,
            msg_len: 4000,
            ..SendPacket::default()
        }),
    );
    s.data(
        1,
        Data::send(SendPacket {
            psn: 102,
            path_seq: 2,
            msg_offset: 2000,
            msg_len: 4000,
            ..SendPacket::default()
        }),
    );
    s.data(
        2,
        Data::send(SendPacket {
            psn: 101,
            ev: 2,
            msg_offset: 1000,
            msg_len: 4000,
            ..SendPacket::default()
        }),
    );
    s.data(
        3,
        Data {
            ce: true,
            ..Data::send(SendPacket {
                psn: 103,
                ev: 2,
                path_seq: 2,
                msg_offset: 3000,
                msg_len: 4000,
                ..SendPacket::default()
            })
        },
    );
    let write = Op::Write {
        remote_va: 0x1000,
        rkey: 7,
    };
    s.data(
        4,
        Data {
            op: write,
            carried: 200,
            ..Data::send(SendPacket {
                psn: 105,
                ev: 2,
                path_seq: 4,
                msg_id: 1,
                msg_offset: 1000,
                msg_len: 2000,
            })
        },
    );
    s.ack(10, 101, 100, 0, FbFlags::empty(), &[]);
    s.ack(11, 101, 102, 1, FbFlags::empty(), &[102]);
    s.ack(12, 103, 101, 2, FbFlags::empty(), &[]);
    s.ack(13, 104, 103, 3, FbFlags::ECE, &[]);
    s.nack(14, 104, 105, 4, FbFlags::TRIM, NackCode::Trimmed, 105);
    s.nack(15, 104, 105, 4, FbFlags::empty(), NackCode::Gap, 104);
    s.cnp(16, 104, 103, 3);
    s.data(
        20,
        Data {
            op: write,
            tx_attempt: 1,
            ..Data::send(SendPacket {
                psn: 104,
                path_seq: 3,
                msg_id: 1,
                msg_len: 2000,
                ..SendPacket::default()
            })
        },
    );
    s.data(
        21,
        Data {
            op: write,
            tx_attempt: 1,
            ..Data::send(SendPacket {
                psn: 105,
                path_seq: 4,
                msg_id: 1,
                msg_offset: 1000,
                msg_len: 2000,
                ..SendPacket::default()
            })
        },
    );
    s.data(
        22,
        Data {
            tx_attempt: 1,
            ..Data::send(SendPacket {
                psn: 103,
                ev: 2,
                path_seq: 5,
                msg_offset: 3000,
                msg_len: 4000,
                ..SendPacket::default()
            })
        },
    );
    s.ack(30, 105, 104, 20, FbFlags::empty(), &[]);
    s.ack(31, 106, 105, 21, FbFlags::empty(), &[]);
    s.ack(32, 106, 103, 22, FbFlags::DUP, &[]);
    s.data(
        100,
        Data::send(SendPacket {
            psn: 106,
            path_seq: 5,
            msg_id: 2,
            ..SendPacket::default()
        }),
    );
    s.data(
        2100,
        Data {
            tx_attempt: 1,
            ..Data::send(SendPacket {
                psn: 106,
                ev: 2,
                path_seq: 6,
                msg_id: 2,
                ..SendPacket::default()
            })
        },
    );
    s.ack(2110, 107, 106, 2100, FbFlags::empty(), &[]);
    s.data(
        3000,
        Data::send(SendPacket {
            psn: 107,
            path_seq: 6,
            msg_id: 3,
            ..SendPacket::default()
        }),
    );
    s
}

fn run() -> (Engine, Vec<analyzer::engine::Verdict>) {
    let mut engine = Engine::new(Config::default());
    let verdicts = scenario().run(&mut engine);
    engine.finish(us(5000));
    (engine, verdicts)
}

/// One verdict reused for every packet (`ingest_into`, as the CLI's loop
/// does) carries nothing over from the packet before: every verdict equals
/// the fresh one `ingest` returns, and so do the completed messages.
#[test]
fn a_reused_verdict_equals_fresh_ones() {
    let observations = scenario().observations();
    let mut fresh = Engine::new(Config::default());
    let mut reused = Engine::new(Config::default());
    let mut verdict = Verdict::default();
    let mut differ_from_previous = 0;
    let mut previous = Verdict::default();
    for obs in &observations {
        let expected = fresh.ingest(obs);
        reused.ingest_into(obs, &mut verdict);
        assert_eq!(verdict, expected, "frame {}", obs.frame);
        assert_eq!(reused.messages_done(), fresh.messages_done());
        let previous_but_frame = Verdict {
            frame: verdict.frame,
            ..previous
        };
        if verdict != previous_but_frame {
            differ_from_previous += 1;
        }
        previous = verdict;
    }
    // The scenario's verdicts vary (retransmissions, RTTs, NACKs, CE, ...),
    // so a stale field would have shown.
    assert!(differ_from_previous > observations.len() / 2);
}

#[test]
fn per_packet_verdicts() {
    let (_, v) = run();
    let f = |n: usize| &v[n - 1];
    assert_eq!(v.len(), 24);

    assert_eq!(f(5).out_of_order, Some(1));
    assert_eq!(f(4).out_of_order, None);
    assert!(f(6).ce_marked);
    assert_eq!(
        f(6).message.map(|m| (m.view, m.latency_ns)),
        Some((MsgView::Delivered, 3_000))
    );
    assert_eq!(f(7).path_loss, Some(1));
    assert!(f(7).trimmed);

    assert_eq!(f(8).ack_rtt_ns, Some(10_000));
    assert_eq!(f(8).acked_frame, Some(3));
    // Hold 500 units of 2 ns = 1 us.
    assert_eq!(f(8).fabric_rtt_ns, Some(9_000));
    assert_eq!(f(9).acked_frame, Some(4));
    assert_eq!(f(10).acked_frame, Some(5));
    assert_eq!(f(10).cum_ack_advance, Some(2));
    assert!(f(11).ece);
    assert_eq!(
        f(11).message.map(|m| (m.view, m.latency_ns)),
        Some((MsgView::Acked, 13_000))
    );
    assert_eq!(f(12).nack, Some(NackCode::Trimmed));
    assert_eq!(f(12).ack_rtt_ns, Some(10_000));
    assert_eq!(f(12).acked_frame, Some(7));
    // Second feedback echoing the same transmission: no sample (11.9).
    assert_eq!(f(13).nack, Some(NackCode::Gap));
    assert_eq!(f(13).ack_rtt_ns, None);
    assert_eq!(f(13).acked_frame, Some(7));
    assert!(f(14).cnp.is_some());
    assert_eq!(f(14).ack_rtt_ns, None);

    let r15 = f(15).retransmission.unwrap();
    assert_eq!(
        (r15.original_frame, r15.attempt, r15.kind),
        (None, 1, RetxKind::Fast)
    );
    let r16 = f(16).retransmission.unwrap();
    assert_eq!(
        (r16.original_frame, r16.attempt, r16.kind),
        (Some(7), 1, RetxKind::Fast)
    );
    assert_eq!(
        f(16).message.map(|m| (m.view, m.latency_ns)),
        Some((MsgView::Delivered, 17_000))
    );
    assert_eq!(f(17).retransmission.unwrap().kind, RetxKind::Spurious);
    assert_eq!(f(18).ack_rtt_ns, Some(10_000));
    assert_eq!(f(18).acked_frame, Some(15));
    assert_eq!(
        f(19).message.map(|m| (m.view, m.latency_ns)),
        Some((MsgView::Acked, 11_000))
    );

    let r22 = f(22).retransmission.unwrap();
    assert_eq!(
        (r22.original_frame, r22.kind),
        (Some(21), RetxKind::Timeout)
    );
    let stall = f(22).stall.unwrap();
    assert_eq!(
        (stall.start_ns, stall.elapsed_ns, stall.ended),
        (us(100), 2_000_000, false)
    );
    let end = f(23).stall.unwrap();
    assert_eq!(
        (end.start_ns, end.elapsed_ns, end.ended),
        (us(100), 2_010_000, true)
    );
    assert_eq!(f(23).ack_rtt_ns, Some(10_000));
    assert_eq!(
        f(23).message.map(|m| (m.view, m.latency_ns)),
        Some((MsgView::Acked, 2_010_000))
    );
    assert_eq!(f(24).retransmission, None);
}

#[test]
fn direction_counts() {
    let (engine, _) = run();
    let report = engine.snapshot();
    assert_eq!(report.capture.frames, 24);
    assert_eq!(report.capture.metaroce_packets, 24);
    assert_eq!(report.capture.malformed, 0);
    // CONNECT (A->B, dst_conn 0), B->A (ACCEPT and feedback), A->B data.
    assert_eq!(report.directions.len(), 3);
    let d = report
        .directions
        .iter()
        .find(|d| d.src_conn == CONN_A && d.dst_conn == CONN_B)
        .unwrap();
    assert_eq!(d.data_packets, 11);
    // 4 x 1000 + 200 (trimmed) + 6 x 1000.
    assert_eq!(d.data_bytes, 10_200);
    // First transmissions, not trimmed: f3-f6, f21, f24.
    assert_eq!(d.goodput_bytes, 6_000);
    assert_eq!(d.retransmissions, 4);
    assert_eq!(d.fast_retransmissions, 2);
    assert_eq!(d.timeout_retransmissions, 1);
    assert_eq!(d.spurious_retransmissions, 1);
    assert_eq!(d.out_of_order, 1);
    assert_eq!(d.max_reorder_distance, 1);
    assert_eq!(d.trimmed, 1);
    assert_eq!(d.ce_marked, 1);
    // f11 and the CNP f14.
    assert_eq!(d.ece, 2);
    assert_eq!(d.acks, 8);
    assert_eq!(d.nacks, 2);
    assert_eq!(d.nacks_by_code.get("GAP"), Some(&1));
    assert_eq!(d.nacks_by_code.get("TRIMMED"), Some(&1));
    assert_eq!(d.cnps, 1);
    assert_eq!(d.path_loss, 1);
    assert_eq!(d.messages_completed, 3);
    assert_eq!(d.messages_delivered, 4);
    assert_eq!(d.cum_ack, Some(107));
    assert_eq!(d.outstanding_packets, 1);

    // f8 f9 f10 f11 f12 f18 f19 f20 f23, all 10 us.
    assert_eq!(d.ack_rtt_ns.count, 9);
    assert_eq!((d.ack_rtt_ns.min, d.ack_rtt_ns.max), (10_000, 10_000));
    assert_eq!(d.fabric_rtt_ns.count, 9);
    assert_eq!((d.fabric_rtt_ns.min, d.fabric_rtt_ns.max), (9_000, 9_000));
    // msg0 13 us, msg1 11 us, msg2 2010 us (HdrHistogram, 3 digits).
    assert_eq!(d.msg_completion_ns.count, 3);
    assert_eq!(d.msg_completion_ns.min, 11_000);
    assert!((2_009_000..=2_011_000).contains(&d.msg_completion_ns.max));
    assert_eq!(d.msg_completion_by_op_ns["send"].count, 2);
    assert_eq!(d.msg_completion_by_op_ns["write"].count, 1);
    assert_eq!(d.msg_delivery_ns.count, 4);

    // Stalls: one closed, one open at the end.
    assert_eq!(d.stalls.len(), 2);
    let s = &d.stalls[0];
    assert_eq!(
        (s.start_ns, s.duration_ns, s.open),
        (us(100), 2_010_000, false)
    );
    assert_eq!(s.end_cause, "timeout_retransmission");
    assert_eq!(s.end_frame, Some(23));
    assert_eq!(s.paths_in_flight, vec![1]);
    assert_eq!(s.retransmissions, 1);
    let s = &d.stalls[1];
    assert_eq!(
        (s.start_ns, s.duration_ns, s.open),
        (us(3000), 2_000_000, true)
    );
    assert_eq!(s.paths_in_flight, vec![1]);

    // Paths.
    assert_eq!(d.paths.len(), 2);
    let ev1 = &d.paths[0];
    assert_eq!(ev1.ev, 1);
    assert_eq!(ev1.packets, 6);
    assert_eq!(ev1.data_packets, 6);
    assert_eq!(ev1.retransmissions, 2);
    assert_eq!(ev1.lost, 0);
    assert_eq!(ev1.lost_inferred, 1);
    assert_eq!(ev1.ce_marked, 0);
    assert_eq!(ev1.ack_rtt_ns.count, 4);
    let ev2 = &d.paths[1];
    assert_eq!(ev2.ev, 2);
    assert_eq!(ev2.packets, 5);
    assert_eq!(ev2.retransmissions, 2);
    assert_eq!(ev2.lost, 1);
    assert_eq!(ev2.lost_inferred, 1);
    assert_eq!(ev2.ce_marked, 1);
    // f10 (f5), f11 (f6), f12 (f7), f20 (f17), f23 (f22).
    assert_eq!(ev2.ack_rtt_ns.count, 5);

    // The feedback direction.
    let b = report
        .directions
        .iter()
        .find(|d| d.src_conn == CONN_B)
        .unwrap();
    assert_eq!(b.feedback_sent, 11);
    assert_eq!(b.ctrl, 1);
    assert_eq!(b.data_packets, 0);
}

#[test]
fn live_stall_is_visible_before_it_ends() {
    let script = scenario();
    let obs = script.observations();
    let mut engine = Engine::new(Config::default());
    // Up to f21 (t100): nothing stalled yet.
    for o in &obs[..21] {
        engine.ingest(o);
    }
    let open = |e: &Engine| {
        e.snapshot()
            .directions
            .iter()
            .flat_map(|d| d.stalls.clone())
            .filter(|s| s.open)
            .count()
    };
    engine.advance_time(us(900));
    assert_eq!(open(&engine), 0);
    engine.advance_time(us(1200));
    assert_eq!(open(&engine), 1);
    // A stricter threshold sees it earlier.
    let mut strict = Engine::new(Config {
        stall_threshold_ns: 100_000,
        ..Config::default()
    });
    for o in &obs[..21] {
        strict.ingest(o);
    }
    strict.advance_time(us(250));
    assert_eq!(open(&strict), 1);
}

#[test]
fn report_json_snapshot() {
    let (engine, _) = run();
    // Serialised as the report is (keys in the schema's order), not
    // through a `serde_json::Value`, whose map sorts them.
    insta::assert_json_snapshot!("scenario_report", engine.snapshot());
}

#[test]
fn malformed_frames_are_counted_not_analysed() {
    use proto_parse::frame::{self, DecodeConfig, LinkType};
    let mut s = Script::default();
    s.data(
        0,
        Data::send(SendPacket {
            psn: 1,
            ..SendPacket::default()
        }),
    );
    s.data(
        1,
        Data::send(SendPacket {
            psn: 2,
            path_seq: 2,
            msg_id: 1,
            ..SendPacket::default()
        }),
    );
    // Frame 2: version 2 (spec 8: malformed). The MetaRoCE base header
    // starts after Ethernet (14) + IPv4 (20) + UDP (8).
    s.frames[1].1[42] = 0x20;
    // Frame 3: cut inside the base header (a snaplen of 50 bytes).
    s.data(
        2,
        Data::send(SendPacket {
            psn: 3,
            path_seq: 3,
            msg_id: 2,
            ..SendPacket::default()
        }),
    );
    s.frames[2].1.truncate(50);
    let cfg = DecodeConfig::default();
    let mut engine = Engine::new(Config::default());
    for (i, (ts, bytes)) in s.frames.iter().enumerate() {
        let f = frame::decode(LinkType::Ethernet, bytes, &cfg);
        let obs = analyzer::engine::Observation::from_frame(i as u64 + 1, *ts, &f).unwrap();
        assert_eq!(obs.malformed, i > 0, "frame {}", i + 1);
        engine.ingest(&obs);
    }
    let r = engine.snapshot();
    assert_eq!(r.capture.metaroce_packets, 3);
    assert_eq!(r.capture.malformed, 2);
    assert_eq!(r.directions.len(), 1);
    assert_eq!(r.directions[0].data_packets, 1);
}

/// One cumulative ACK completing three messages at once: the verdict
/// details the first, `messages_done` lists all three (what the export's
/// messages table writes, one row each).
///
/// ```text
/// f1 t0  D psn100 ev1 seq1 SOM EOM msg0 (1000 B)
/// f2 t1  D psn101 ev1 seq2 SOM EOM msg1
/// f3 t2  D psn102 ev1 seq3 SOM EOM msg2
/// f4 t10 ACK cum103 echo102 (f3)  -> msg0 10 us, msg1 9 us, msg2 8 us
/// ```
#[test]
fn one_ack_completing_several_messages_reports_each() {
    let mut s = Script::default();
    s.data(
        0,
        Data::send(SendPacket {
            psn: 100,
            ..SendPacket::default()
        }),
    );
    s.data(
        1,
        Data::send(SendPacket {
            psn: 101,
            path_seq: 2,
            msg_id: 1,
            ..SendPacket::default()
        }),
    );
    s.data(
        2,
        Data::send(SendPacket {
            psn: 102,
            path_seq: 3,
            msg_id: 2,
            ..SendPacket::default()
        }),
    );
    s.ack(10, 103, 102, 2, FbFlags::empty(), &[]);
    let mut engine = Engine::new(Config::default());
    let mut done_at = Vec::new();
    let mut verdicts = Vec::new();
    for obs in s.observations() {
        verdicts.push(engine.ingest(&obs));
        done_at.push(
            engine
                .messages_done()
                .iter()
                .map(|m| (m.msg_id, m.view, m.latency_ns))
                .collect::<Vec<_>>(),
        );
    }
    // Each DATA is a whole message: delivered on arrival (receiver view).
    for (i, done) in done_at[..3].iter().enumerate() {
        assert_eq!(done, &[(i as u32, MsgView::Delivered, 0)]);
    }
    assert_eq!(
        done_at[3],
        [
            (0, MsgView::Acked, 10_000),
            (1, MsgView::Acked, 9_000),
            (2, MsgView::Acked, 8_000),
        ]
    );
    assert_eq!(verdicts[3].messages_completed, 3);
    assert_eq!(verdicts[3].message.map(|m| m.msg_id), Some(0));
}

/// A DUP feedback for a retransmission whose PSN the cumulative ack has
/// already pruned from the window (past the acked grace) still marks it
/// spurious: pruning keeps the retransmissions aside.
///
/// ```text
/// acked grace 2 PSNs
/// f1 t0    D psn100 ev1 seq1
/// f2 t1    D psn101 ev1 seq2
/// f3 t2000 D psn100 att1 ev2 seq1   -> timeout retransmission, ev1 charged lost_inferred
/// f4..f7   D psn102..105 ev1 seq3..6
/// f8 t2010 ACK cum106 echo105 (f7)  -> window pruned below 104: psn 100 leaves
/// f9 t2011 ACK cum106 echo100 (f3) DUP -> f3 was spurious; ev1's charge taken back
/// ```
#[test]
fn a_dup_for_a_pruned_retransmission_marks_it_spurious() {
    let mut s = Script::default();
    s.data(
        0,
        Data::send(SendPacket {
            psn: 100,
            ..SendPacket::default()
        }),
    );
    s.data(
        1,
        Data::send(SendPacket {
            psn: 101,
            path_seq: 2,
            msg_id: 1,
            ..SendPacket::default()
        }),
    );
    let retx = s.data(
        2000,
        Data {
            tx_attempt: 1,
            ..Data::send(SendPacket {
                psn: 100,
                ev: 2,
                ..SendPacket::default()
            })
        },
    );
    for (i, psn) in (102..=105).enumerate() {
        let i = i as u64;
        s.data(
            2001 + i,
            Data::send(SendPacket {
                psn,
                path_seq: 3 + i as u16,
                msg_id: psn,
                ..SendPacket::default()
            }),
        );
    }
    s.ack(2010, 106, 105, 2004, FbFlags::empty(), &[]);
    s.ack(2011, 106, 100, 2000, FbFlags::DUP, &[]);

    let mut engine = Engine::new(Config {
        acked_grace: 2,
        ..Config::default()
    });
    let v = s.run(&mut engine);
    let kind = v[retx as usize - 1].retransmission.map(|r| r.kind);
    assert_eq!(kind, Some(RetxKind::Timeout));
    assert_eq!(
        v[8].dup_of_frame,
        Some(retx),
        "the DUP names the pruned retransmission"
    );
    let r = engine.snapshot();
    let d = data_direction(&r);
    assert_eq!(d.retransmissions, 1);
    assert_eq!(d.spurious_retransmissions, 1);
    let ev1 = d.paths.iter().find(|p| p.ev == 1).unwrap();
    assert_eq!(
        ev1.lost_inferred, 0,
        "the charge for the spurious retransmission is taken back"
    );
}

/// RTT samples are recorded into the histograms in batches: a report taken
/// between batches counts the samples not yet recorded, and says what it
/// says once they are.
#[test]
fn rtt_histograms_count_every_sample_between_batches() {
    let mut s = Script::default();
    // 70 DATA, each acked 10 us later: 70 RTT samples over 2 evs (two
    // batches of 32 and 6 still pending).
    for i in 0..70u32 {
        let t = u64::from(i) * 100;
        s.data(
            t,
            Data::send(SendPacket {
                psn: 100 + i,
                ev: 1 + (i % 2) as u16,
                path_seq: 1 + (i / 2) as u16,
                msg_id: i,
                ..SendPacket::default()
            }),
        );
        s.ack(
            t + 10 + u64::from(i % 7),
            101 + i,
            100 + i,
            t,
            FbFlags::empty(),
            &[],
        );
    }
    let mut engine = Engine::new(Config::default());
    s.run(&mut engine);
    let before = engine.snapshot();
    engine.finish(70 * 100 * 1000 + 1_000_000_000);
    let after = engine.snapshot();
    let (b, a) = (data_direction(&before), data_direction(&after));
    assert_eq!(b.ack_rtt_ns.count, 70);
    assert_eq!(b.ack_rtt_ns, a.ack_rtt_ns);
    assert_eq!(b.fabric_rtt_ns, a.fabric_rtt_ns);
    assert_eq!(b.ack_rtt_ns.min, 10_000);
    assert_eq!(b.ack_rtt_ns.max, 16_000);
    let per_path: Vec<u64> = b.paths.iter().map(|p| p.ack_rtt_ns.count).collect();
    assert_eq!(per_path, [35, 35]);
    for (pb, pa) in b.paths.iter().zip(&a.paths) {
        assert_eq!(pb.ack_rtt_ns, pa.ack_rtt_ns, "ev {}", pb.ev);
    }
}

/// A direction's RTT histogram is the sum of its paths' (each sample is
/// recorded once, in its path's): samples on evs beyond `max_paths`, which
/// have no path entry, must still count for the direction.
#[test]
fn rtt_samples_on_evs_beyond_max_paths_count_for_the_direction() {
    let mut s = Script::default();
    // 60 DATA over evs 1, 2, 3 in turn, each acked 10 + (i % 5) us later:
    // 12 samples each of 10, 11, 12, 13 and 14 us; 20 per ev.
    for i in 0..60u32 {
        let t = u64::from(i) * 100;
        let ev = 1 + (i % 3) as u16;
        s.data(
            t,
            Data::send(SendPacket {
                psn: 100 + i,
                ev,
                path_seq: 1 + (i / 3) as u16,
                msg_id: i,
                ..SendPacket::default()
            }),
        );
        s.ack(
            t + 10 + u64::from(i % 5),
            101 + i,
            100 + i,
            t,
            FbFlags::empty(),
            &[],
        );
    }
    let mut engine = Engine::new(Config {
        max_paths: 1,
        ..Config::default()
    });
    s.run(&mut engine);
    engine.finish(60 * 100 * 1000 + 1_000_000_000);
    let report = engine.snapshot();
    let d = data_direction(&report);
    assert_eq!(d.ack_rtt_ns.count, 60);
    assert_eq!((d.ack_rtt_ns.min, d.ack_rtt_ns.max), (10_000, 14_000));
    // The 30th of the 60 sorted samples is 12 us.
    assert_eq!(d.ack_rtt_ns.p50, 12_000);
    let paths: Vec<(u16, u64)> = d.paths.iter().map(|p| (p.ev, p.ack_rtt_ns.count)).collect();
    assert_eq!(paths, [(1, 20)], "only ev 1 has a path entry");
}

/// A direction's completion latency is the sum of its per-op histograms and
/// the one of acked messages of no op histogram (READ requests): each
/// latency is recorded once.
#[test]
fn acked_read_requests_count_in_the_completion_latency() {
    let mut s = Script::default();
    // t0: SEND msg 1 (psn 100), acked at t12: 12 us.
    // t1: READ request msg 2 (psn 101), acked at t21: 20 us. No response
    //     is captured, so no READ completes.
    s.data(
        0,
        Data::send(SendPacket {
            psn: 100,
            msg_id: 1,
            ..SendPacket::default()
        }),
    );
    s.data(
        1,
        Data {
            op: Op::ReadReq {
                remote_va: 0x1000,
                rkey: 7,
            },
            ..Data::send(SendPacket {
                psn: 101,
                path_seq: 2,
                msg_id: 2,
                ..SendPacket::default()
            })
        },
    );
    s.ack(12, 101, 100, 0, FbFlags::empty(), &[]);
    s.ack(21, 102, 101, 1, FbFlags::empty(), &[]);
    let mut engine = Engine::new(Config::default());
    s.run(&mut engine);
    let report = engine.snapshot();
    let d = data_direction(&report);
    assert_eq!(d.messages_completed, 2);
    let c = d.msg_completion_ns;
    assert_eq!((c.count, c.min, c.max), (2, 12_000, 20_000));
    let by_op = &d.msg_completion_by_op_ns;
    assert_eq!(by_op["send"].count, 1);
    assert_eq!((by_op["write"].count, by_op["read"].count), (0, 0));
}

/// A READ is one message of the requester's direction (spec 11.4): its
/// completion is counted once in `messages_completed`, which then equals
/// the count of its completion latencies (sender view, spec 9). The READ's
/// request-to-last-response time goes to `msg_completion_by_op_ns.read`
/// without being counted a second time, and the verdicts' counts add up to
/// the report's.
///
/// ```text
/// f1 t0  A READ_REQ psn100 msg0 (2000 B requested) SOM EOM
/// f2 t5  B ACK cum101 echo100          -> A's msg0 acked: 5 us (1 completion)
/// f3 t6  B READ_RESP psn500 msg0 off0 SOM
/// f4 t7  B READ_RESP psn501 msg0 off1000 EOM -> READ done 7 us (no new completion)
/// f5 t10 A ACK cum502 echo501          -> B's READ_RESP message acked: 4 us
/// ```
#[test]
fn a_read_is_completed_once_on_the_requesters_direction() {
    let mut s = Script::default();
    s.data(
        0,
        Data {
            op: Op::ReadReq {
                remote_va: 0x1000,
                rkey: 7,
            },
            len: 0,
            carried: 0,
            som: true,
            eom: true,
            ..Data::send(SendPacket {
                psn: 100,
                msg_len: 2000,
                ..SendPacket::default()
            })
        },
    );
    s.ack(5, 101, 100, 0, FbFlags::empty(), &[]);
    for (i, t) in [6, 7].into_iter().enumerate() {
        let off = i as u32 * 1000;
        s.data_b(
            t,
            Data {
                op: Op::ReadResp,
                ..Data::send(SendPacket {
                    psn: 500 + i as u32,
                    ev: 3,
                    path_seq: 1 + i as u16,
                    msg_offset: off,
                    msg_len: 2000,
                    ..SendPacket::default()
                })
            },
        );
    }
    s.ack_from_a(10, 502, 501, 7);
    let mut engine = Engine::new(Config::default());
    let verdicts = s.run(&mut engine);
    let report = engine.snapshot();
    let requester = report
        .directions
        .iter()
        .find(|d| d.src_conn == CONN_A)
        .unwrap();
    assert_eq!(requester.messages_completed, 1, "the READ counts once");
    assert_eq!(
        requester.messages_completed, requester.msg_completion_ns.count,
        "completions and their latencies agree"
    );
    assert_eq!(requester.msg_completion_ns.min, 5_000);
    assert_eq!(requester.msg_completion_by_op_ns["read"].count, 1);
    assert_eq!(requester.msg_completion_by_op_ns["read"].min, 7_000);
    let responder = report
        .directions
        .iter()
        .find(|d| d.src_conn == CONN_B)
        .unwrap();
    assert_eq!(responder.messages_completed, 1);
    assert_eq!(responder.msg_completion_ns.count, 1);
    assert_eq!(responder.msg_completion_ns.min, 4_000);
    // The READ response's verdict names the READ; the plugin's message
    // counter (the verdicts' sum) agrees with the report.
    let read = verdicts[3].message.unwrap();
    assert_eq!((read.view, read.latency_ns), (MsgView::Read, 7_000));
    let by_verdicts: u64 = verdicts
        .iter()
        .map(|v| u64::from(v.messages_completed))
        .sum();
    let by_report: u64 = report.directions.iter().map(|d| d.messages_completed).sum();
    assert_eq!(by_verdicts, by_report);
    assert_eq!(by_report, 2);
}

/// Spec 11.9: the first feedback of any type that echoes a transmission
/// gives its RTT sample, however far the cumulative ack has moved since.
/// Here a retransmission fills the cumulative-ack hole at PSN 100 while
/// PSNs 101..=399 are already at the receiver; the feedback it triggers
/// travels back on a slow path and is overtaken by the one triggered by
/// PSN 400, which moves the cumulative ack from 100 to 401 (300 PSNs, more
/// than the acked PSNs a distance-based grace would keep).
///
/// ```text
/// f1..f300  t0..t299  D psn100..399 ev1 (psn100 lost downstream)
/// f301 t1000 D psn100 att1 ev2             -> timeout retransmission
/// f302 t1001 D psn400 ev1
/// f303 t1020 ACK cum401 echo400 (f302)     -> RTT 19 us
/// f304 t1030 ACK cum401 echo100 (f301)     -> RTT 30 us, its first echo
/// ```
#[test]
fn a_late_echo_of_the_hole_filling_retransmission_gives_its_rtt_sample() {
    let mut s = Script::default();
    for i in 0..300u32 {
        s.data(
            u64::from(i),
            Data::send(SendPacket {
                psn: 100 + i,
                path_seq: 1 + i as u16,
                msg_id: 100 + i,
                ..SendPacket::default()
            }),
        );
    }
    let retx = s.data(
        1000,
        Data {
            tx_attempt: 1,
            ..Data::send(SendPacket {
                psn: 100,
                ev: 2,
                msg_id: 100,
                ..SendPacket::default()
            })
        },
    );
    s.data(
        1001,
        Data::send(SendPacket {
            psn: 400,
            path_seq: 301,
            msg_id: 400,
            ..SendPacket::default()
        }),
    );
    s.ack(1020, 401, 400, 1001, FbFlags::empty(), &[]);
    let late = s.ack(1030, 401, 100, 1000, FbFlags::empty(), &[]);
    let mut engine = Engine::new(Config::default());
    let v = s.run(&mut engine);
    let late = &v[late as usize - 1];
    assert_eq!(late.acked_frame, Some(retx));
    assert_eq!(late.ack_rtt_ns, Some(30_000));
    let report = engine.snapshot();
    let d = data_direction(&report);
    assert_eq!(d.ack_rtt_ns.count, 2);
    assert_eq!((d.ack_rtt_ns.min, d.ack_rtt_ns.max), (19_000, 30_000));
    let ev2 = d.paths.iter().find(|p| p.ev == 2).unwrap();
    assert_eq!(ev2.ack_rtt_ns.count, 1);
}

/// Spec 11.10: a DUP feedback shows the retransmission spurious whether it
/// echoes the retransmission or the original; either way the verdict names
/// the retransmission's frame (the one to mark spurious), and the report
/// counts it once.
///
/// ```text
/// f1 t0   D psn100 ev1
/// f2 t100 D psn100 att1 ev2          -> timeout retransmission
/// f3 t110 ACK cum101 echo100 (f2)    -> RTT 10 us
/// f4 t130 ACK cum101 echo100 (f1) DUP -> the original arrived late: f2 was spurious
/// ```
#[test]
fn a_dup_echoing_the_original_names_the_retransmission() {
    let mut s = Script::default();
    s.data(
        0,
        Data::send(SendPacket {
            psn: 100,
            ..SendPacket::default()
        }),
    );
    let retx = s.data(
        100,
        Data {
            tx_attempt: 1,
            ..Data::send(SendPacket {
                psn: 100,
                ev: 2,
                ..SendPacket::default()
            })
        },
    );
    s.ack(110, 101, 100, 100, FbFlags::empty(), &[]);
    let dup = s.ack(130, 101, 100, 0, FbFlags::DUP, &[]);
    let mut engine = Engine::new(Config::default());
    let v = s.run(&mut engine);
    let kind = v[retx as usize - 1].retransmission.map(|r| r.kind);
    assert_eq!(kind, Some(RetxKind::Timeout));
    let dup = &v[dup as usize - 1];
    assert_eq!(dup.acked_frame, Some(1), "it echoes the original");
    assert_eq!(dup.dup_of_frame, Some(retx));
    let r = engine.snapshot();
    assert_eq!(data_direction(&r).spurious_retransmissions, 1);
}

/// Bytes in flight of A -> B after each packet of the scenario (every
/// DATA carries `payload_len` 1000; f7 is trimmed to 200 bytes but counts
/// the 1000 it was sent with):
///
/// ```text
/// f1 f2 CTRL (other directions)      0
/// f3 psn100 +1000                 1000    f12-f14 NACK, NACK, CNP      1000
/// f4 psn102 +1000                 2000    f15 psn104 retx, original not
/// f5 psn101 +1000 (out of order)  3000        captured: its first +1000 2000
/// f6 psn103 +1000                 4000    f16 psn105 retx: counted     2000
/// f7 psn105 +1000 (trimmed)       5000    f17 psn103 below the ack     2000
/// f8 ACK cum101: 100 acked        4000    f18 ACK cum105: 104          1000
/// f9 SACK{102}                    3000    f19 ACK cum106: 105             0
/// f10 ACK cum103: 101             2000    f20 ACK DUP                     0
///     (102 already SACKed)                f21 psn106 +1000             1000
/// f11 ACK cum104: 103             1000    f22 psn106 retx              1000
///                                         f23 ACK cum107                  0
///                                         f24 psn107 +1000             1000
/// ```
#[test]
fn bytes_in_flight_follow_sends_sacks_and_cumulative_acks() {
    let want: [u64; 24] = [
        0, 0, 1000, 2000, 3000, 4000, 5000, 4000, 3000, 2000, 1000, 1000, 1000, 1000, 2000, 2000,
        2000, 1000, 0, 0, 1000, 1000, 0, 1000,
    ];
    let mut engine = Engine::new(Config::default());
    let mut flows = Vec::new();
    for (i, (o, want)) in scenario().observations().iter().zip(want).enumerate() {
        let flow = engine.ingest(o).flow.expect("every packet names its flow");
        assert_eq!(engine.bytes_in_flight(flow), Some(want), "after f{}", i + 1);
        flows.push(flow);
    }
    // From f3 on, every packet is about A -> B: DATA names its own
    // direction, feedback the one it acknowledges.
    assert!(flows[2..].iter().all(|&f| f == flows[2]));
    let report = engine.snapshot();
    let d = data_direction(&report);
    assert_eq!((d.bytes_in_flight, d.max_bytes_in_flight), (1000, 5000));
    let b = report.directions.iter().find(|d| d.src_conn == CONN_B);
    assert_eq!(b.map(|b| b.max_bytes_in_flight), Some(0));
}

/// A PSN SACKed before its DATA is captured never counts, and PSNs the
/// window drops on overflow leave the count (a window of 4 PSNs):
///
/// ```text
/// f1 t0  D psn10                                1000
/// f2 t1  D psn13 (slots 11, 12 made empty)      2000
/// f3 t10 ACK cum10 SACK{12}                     2000
/// f4 t11 D psn11                                3000
/// f5 t12 D psn12, already SACKed: nothing       3000
/// f6 t13 D psn14 att1, the window drops psn10; the original
///        of 14 was not captured: its first    3000 - 1000 + 1000 = 3000
/// f7 t14 D psn15, the window drops psn11        3000 - 1000 + 1000 = 3000
/// f8 t20 ACK cum16: 13, 14, 15 acked              0
/// ```
#[test]
fn bytes_in_flight_skip_sacked_psns_and_leave_with_the_window_overflow() {
    let mut s = Script::default();
    s.data(
        0,
        Data::send(SendPacket {
            psn: 10,
            msg_id: 10,
            ..SendPacket::default()
        }),
    );
    s.data(
        1,
        Data::send(SendPacket {
            psn: 13,
            path_seq: 2,
            msg_id: 13,
            ..SendPacket::default()
        }),
    );
    s.ack(10, 10, 10, 0, FbFlags::empty(), &[12]);
    s.data(
        11,
        Data::send(SendPacket {
            psn: 11,
            path_seq: 3,
            msg_id: 11,
            ..SendPacket::default()
        }),
    );
    s.data(
        12,
        Data::send(SendPacket {
            psn: 12,
            path_seq: 4,
            msg_id: 12,
            ..SendPacket::default()
        }),
    );
    s.data(
        13,
        Data {
            tx_attempt: 1,
            ..Data::send(SendPacket {
                psn: 14,
                path_seq: 5,
                msg_id: 14,
                ..SendPacket::default()
            })
        },
    );
    s.data(
        14,
        Data::send(SendPacket {
            psn: 15,
            path_seq: 6,
            msg_id: 15,
            ..SendPacket::default()
        }),
    );
    s.ack(20, 16, 15, 14, FbFlags::empty(), &[]);
    let mut engine = Engine::new(Config {
        window: 4,
        ..Config::default()
    });
    let got: Vec<Option<u64>> = s
        .observations()
        .iter()
        .map(|o| {
            let v = engine.ingest(o);
            engine.bytes_in_flight(v.flow.unwrap())
        })
        .collect();
    let want = [1000, 2000, 2000, 3000, 3000, 3000, 3000, 0].map(Some);
    assert_eq!(got, want);
    let report = engine.snapshot();
    let d = data_direction(&report);
    assert_eq!(d.window_overflow, 2);
    assert_eq!((d.bytes_in_flight, d.max_bytes_in_flight), (0, 3000));
}
