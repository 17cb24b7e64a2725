//! What a connection costs the engine (a training host has thousands of
//! QPs): the memory the engine holds for connections of a few packets,
//! measured as the growth of this process's resident memory (this binary's
//! only test, so nothing else allocates meanwhile).

mod common;

use common::metaroce_observation;

use std::net::IpAddr;

use analyzer::engine::{Config, DataObs, Engine, FbKind, FeedbackObs, MrBody, MrObs};
use proto_parse::metaroce::{DataOp, FbFlags, Flags, PacketType};

/// This process's resident memory, in bytes (Linux).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

const PATHS: u16 = 4;

/// Connection `conn`: two 4 KiB WRITEs from A to B in 1 KiB packets
/// sprayed over 4 paths, each packet acked at once on its path (one RTT
/// sample per packet, on every path).
fn connection(engine: &mut Engine, conn: u32, frame: &mut u64, ts: &mut u64) {
    let a: IpAddr = "10.6.0.1".parse().unwrap();
    let b: IpAddr = "10.6.0.2".parse().unwrap();
    for psn in 0..8u32 {
        let ev = (psn % u32::from(PATHS)) as u16;
        let seq = (psn / u32::from(PATHS) + 1) as u16;
        let off = (psn % 4) * 1024;
        let mut flags = Flags::empty();
        flags.set(Flags::SOM, off == 0);
        flags.set(Flags::EOM, off == 3 * 1024);
        let tx_ts = *ts as u32;
        let data = MrObs {
            checks: Default::default(),
            ptype: PacketType::Data,
            flags,
            tx_attempt: 0,
            ev,
            path_seq: seq,
            dst_conn: 1_000_000 + conn,
            src_conn: conn,
            psn,
            tx_ts,
            body: MrBody::Data(DataObs {
                op: DataOp::Write,
                payload_len: 1024,
                actual_len: 1024,
                trimmed: false,
                msg_id: psn / 4,
                msg_offset: off,
                msg_len: 4096,
            }),
        };
        *frame += 1;
        *ts += 1_000;
        engine.ingest(&metaroce_observation(*frame, *ts, a, b, data));
        let ack = MrObs {
            checks: Default::default(),
            ptype: PacketType::Ack,
            flags: Flags::empty(),
            tx_attempt: 0,
            ev,
            path_seq: seq,
            dst_conn: conn,
            src_conn: 1_000_000 + conn,
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
        *frame += 1;
        *ts += 10_000;
        engine.ingest(&metaroce_observation(*frame, *ts, b, a, ack));
    }
}

/// At most 8 KB per direction and 2 KB per path for a connection of a few
/// packets (both of its directions, each with 4 paths, every path with
/// RTT samples), the engine's maps included.
#[test]
fn a_connection_of_a_few_packets_costs_a_few_kilobytes() {
    const CONNS: u32 = 4000;
    let before = rss();
    let mut engine = Engine::new(Config::default());
    let (mut frame, mut ts) = (0, 1_000_000_000);
    for conn in 0..CONNS {
        connection(&mut engine, conn, &mut frame, &mut ts);
    }
    let held = rss().saturating_sub(before);
    let report = engine.snapshot();
    assert_eq!(report.directions.len(), 2 * CONNS as usize);
    let d = report
        .directions
        .iter()
        .find(|d| d.data_packets > 0)
        .unwrap();
    assert_eq!((d.ack_rtt_ns.count, d.paths.len()), (8, 4));
    assert_eq!(d.messages_completed, 2);
    drop(report);
    let per_conn = held as f64 / f64::from(CONNS);
    let budget = f64::from(2 * 8192 + 2 * u32::from(PATHS) * 2048);
    eprintln!("{per_conn:.0} bytes per connection (budget {budget})");
    assert!(per_conn <= budget, "{per_conn:.0} bytes per connection");
    drop(engine);
}
