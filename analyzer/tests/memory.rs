//! The engine's state is bounded by the live flows, never by the number of
//! packets: ingesting 10x more packets of the same flows must not grow any
//! map or window. Also: the flow cap evicts and counts.

mod common;

use common::metaroce_observation;

use common::sprayed::Sprayed;

use std::net::IpAddr;

use analyzer::engine::{Config, Engine, FbKind, FeedbackObs, MrBody, MrObs, StateSize};
use proto_parse::metaroce::{FbFlags, Flags, PacketType};

const FLOWS: u32 = 8;

/// `rounds` of [`Sprayed`] traffic: every flow sends 4 DATA packets (one
/// message sprayed over 16 evs, with one reordered pair) and gets one
/// coalesced ACK.
fn feed(engine: &mut Engine, traffic: &mut Sprayed, rounds: std::ops::Range<u32>) {
    for o in traffic.rounds(rounds) {
        engine.ingest(&o);
    }
}

#[test]
fn ten_times_more_packets_same_state() {
    let mut engine = Engine::new(Config::default());
    let mut traffic = Sprayed::new(FLOWS, None);
    feed(&mut engine, &mut traffic, 0..200);
    let small: StateSize = engine.state_size();
    feed(&mut engine, &mut traffic, 200..2000);
    let large = engine.state_size();
    assert_eq!(small, large);
    // 8 data directions + 8 ack directions; 16 evs per data direction plus
    // ev 0 of each ack direction.
    assert_eq!(large.directions, 16);
    assert_eq!(large.paths, 8 * 16 + 8);
    assert_eq!(large.messages, 0);
    // Up to 128 acked PSNs kept per data direction for late feedback.
    assert!(large.window_slots <= 8 * 128, "{large:?}");
    let report = engine.snapshot();
    let d = common::data_direction(&report);
    assert_eq!(d.data_packets, 8000);
    assert_eq!(d.messages_completed, 2000);
    // One reordered packet per message (PSN 1 after PSN 2).
    assert_eq!(d.out_of_order, 2000);
}

#[test]
fn flow_cap_evicts_and_counts() {
    let mut engine = Engine::new(Config {
        max_flows: 4,
        ..Config::default()
    });
    feed(&mut engine, &mut Sprayed::new(FLOWS, None), 0..10);
    let size = engine.state_size();
    assert!(size.directions <= 4, "{size:?}");
    let report = engine.snapshot();
    assert!(report.engine.evicted_directions >= 12);
    assert_eq!(report.engine.live_directions as usize, size.directions);
}

#[test]
fn no_feedback_capture_stays_bounded() {
    // DATA only (a one-way capture), every PSN sent twice: windows,
    // message maps and the retransmissions kept for pruning stop at their
    // caps.
    let cfg = Config {
        window: 64,
        max_messages: 32,
        ..Config::default()
    };
    let mut engine = Engine::new(cfg);
    let a: IpAddr = "10.2.0.1".parse().unwrap();
    let b: IpAddr = "10.2.0.2".parse().unwrap();
    let mut sizes = Vec::new();
    for n in [1_000u32, 10_000] {
        let mut e = Engine::new(cfg);
        for psn in 0..n {
            let mut mr =
                common::one_packet_send(1, 2, psn, (psn % 4) as u16, (psn / 4 + 1) as u16, psn);
            let frame = u64::from(psn) * 2 + 1;
            e.ingest(&metaroce_observation(frame, u64::from(psn) * 10, a, b, mr));
            mr.tx_attempt = 1;
            e.ingest(&metaroce_observation(
                frame + 1,
                u64::from(psn) * 10 + 5,
                a,
                b,
                mr,
            ));
        }
        sizes.push(e.state_size());
    }
    assert_eq!(sizes[0], sizes[1]);
    assert!(sizes[1].window_slots <= 64);
    assert!(sizes[1].messages <= 32);
    assert!(sizes[1].pending <= 32 + 64 + 1, "{:?}", sizes[1]);
    engine.finish(0);
}

/// A direction evicted under the flow cap, then seen again, starts anew:
/// its packets never land in the direction that took its slot (the
/// engine's direction cache must forget evicted directions).
#[test]
fn an_evicted_direction_comes_back_as_new() {
    let mut engine = Engine::new(Config {
        max_flows: 2,
        ..Config::default()
    });
    let a: IpAddr = "10.1.0.1".parse().unwrap();
    let b: IpAddr = "10.1.0.2".parse().unwrap();
    let mut frame = 0;
    let mut send = |engine: &mut Engine, conn: u32, psn: u32| {
        frame += 1;
        let mr = common::one_packet_send(conn, 1000 + conn, psn, 1, 0, 0);
        engine.ingest(&metaroce_observation(
            frame,
            1_000_000 + frame * 100,
            a,
            b,
            mr,
        ));
    };
    // Directions 1 and 2; 3 evicts 1 (the least recently seen) and takes
    // its slot; 1 comes back and evicts 2.
    for (conn, packets) in [(1, 5), (2, 3), (3, 7), (1, 2)] {
        for psn in 0..packets {
            send(&mut engine, conn, psn);
        }
    }
    let report = engine.snapshot();
    let count = |conn: u32| {
        report
            .directions
            .iter()
            .find(|d| d.src_conn == conn)
            .map(|d| d.data_packets)
    };
    assert_eq!(count(3), Some(7), "{:?}", report.directions);
    assert_eq!(count(1), Some(2), "{:?}", report.directions);
    assert_eq!(count(2), None, "{:?}", report.directions);
    assert_eq!(report.engine.evicted_directions, 2);
}

/// Feedback that acknowledges four DATA packets at a time without the
/// COAL flag, echoing the latest: the three it does not name are never
/// echoed. They are awaited for a few round trips only (4 times the
/// largest RTT sample), so what is kept for a late echo stays bounded by
/// what was sent in that time, not by the window.
#[test]
fn unechoed_transmissions_are_awaited_for_a_few_round_trips() {
    let mut engine = Engine::new(Config::default());
    let a: IpAddr = "10.7.0.1".parse().unwrap();
    let b: IpAddr = "10.7.0.2".parse().unwrap();
    let (mut frame, mut ts) = (0u64, 1_000_000u64);
    for round in 0..5_000u32 {
        let mut last = (0, 0, 0);
        for k in 0..4 {
            let psn = round * 4 + k;
            let ev = (psn % 4) as u16;
            frame += 1;
            ts += 100;
            let mr = common::one_packet_send(1, 2, psn, ev, 0, ts as u32);
            engine.ingest(&metaroce_observation(frame, ts, a, b, mr));
            last = (psn, ev, ts as u32);
        }
        let (psn, ev, tx_ts) = last;
        let ack = MrObs {
            checks: Default::default(),
            ptype: PacketType::Ack,
            flags: Flags::empty(),
            tx_attempt: 0,
            ev,
            path_seq: 0,
            dst_conn: 1,
            src_conn: 2,
            psn: psn + 1,
            tx_ts: 0,
            body: MrBody::Feedback(FeedbackObs {
                flags: FbFlags::empty(),
                echo_ev: ev,
                echo_psn: psn,
                echo_tx_ts: tx_ts,
                rx_ts: 0,
                ce_count: 0,
                credit: u32::MAX,
                kind: FbKind::Ack {
                    sack_base: psn + 1,
                    sack_words: 0,
                    sack: [0; 4],
                },
            }),
        };
        frame += 1;
        ts += 100;
        engine.ingest(&metaroce_observation(frame, ts, b, a, ack));
    }
    let size = engine.state_size();
    assert!(size.late_echoes <= 16, "{size:?}");
    let report = engine.snapshot();
    assert_eq!(common::data_direction(&report).ack_rtt_ns.count, 5_000);
}
