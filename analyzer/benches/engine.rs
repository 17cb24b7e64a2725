//! Engine ingest throughput: observations built once, then fed in order.
//! Traffic: 64 connection directions, 4-packet messages sprayed over 16
//! evs each, one ACK per 4 DATA packets, one reordered pair per message,
//! 1 % retransmissions.

use std::hint::black_box;
use std::net::IpAddr;

use analyzer::engine::{
    Config, DataObs, Engine, FbKind, FeedbackObs, MrBody, MrObs, ObsKind, Observation,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use proto_parse::metaroce::{DataOp, FbFlags, Flags, PacketType};

fn traffic(rounds: u32, flows: u32) -> Vec<Observation> {
    let mut out = Vec::new();
    let a: IpAddr = "10.1.0.1".parse().unwrap();
    let b: IpAddr = "10.1.0.2".parse().unwrap();
    let mut ts = 1_000_000u64;
    let mut frame = 0u64;
    let mut path_seq = vec![0u16; (flows * 16) as usize];
    let mk = |frame, ts, src, dst, mr| Observation {
        frame,
        ts_ns: ts,
        src,
        dst,
        src_port: 0xC000,
        dst_port: 4794,
        ecn: 2,
        malformed: false,
        kind: ObsKind::MetaRoce(mr),
    };
    for round in 0..rounds {
        for flow in 0..flows {
            let psn0 = round * 4;
            let mut last_tx = 0;
            for k in [0u32, 2, 1, 3] {
                let psn = psn0 + k;
                let ev = ((psn + flow) % 16) as u16;
                let seq = &mut path_seq[(flow * 16 + u32::from(ev)) as usize];
                *seq = seq.wrapping_add(1).max(1);
                let mut flags = Flags::empty();
                flags.set(Flags::SOM, k == 0);
                flags.set(Flags::EOM, k == 3);
                frame += 1;
                ts += 25;
                last_tx = ts as u32;
                let retx = (round + flow) % 25 == 0 && k == 1;
                let mr = MrObs {
                    checks: Default::default(),
                    ptype: PacketType::Data,
                    flags,
                    tx_attempt: 0,
                    ev,
                    path_seq: *seq,
                    dst_conn: 1000 + flow,
                    src_conn: flow,
                    psn,
                    tx_ts: last_tx,
                    body: MrBody::Data(DataObs {
                        op: DataOp::Write,
                        payload_len: 4096,
                        actual_len: 4096,
                        trimmed: false,
                        msg_id: round,
                        msg_offset: k * 4096,
                        msg_len: 4 * 4096,
                    }),
                };
                out.push(mk(frame, ts, a, b, mr));
                if retx {
                    frame += 1;
                    ts += 25;
                    let mut again = mr;
                    again.tx_attempt = 1;
                    again.tx_ts = ts as u32;
                    out.push(mk(frame, ts, a, b, again));
                }
            }
            frame += 1;
            ts += 25;
            let ack = MrObs {
                checks: Default::default(),
                ptype: PacketType::Ack,
                flags: Flags::empty(),
                tx_attempt: 0,
                ev: 0,
                path_seq: 0,
                dst_conn: flow,
                src_conn: 1000 + flow,
                psn: psn0 + 4,
                tx_ts: 0,
                body: MrBody::Feedback(FeedbackObs {
                    flags: FbFlags::COAL,
                    echo_ev: 0,
                    echo_psn: psn0 + 3,
                    echo_tx_ts: last_tx,
                    rx_ts: 0,
                    ce_count: 0,
                    credit: u32::MAX,
                    kind: FbKind::Ack {
                        sack_base: psn0 + 4,
                        sack_words: 0,
                        sack: [0; 4],
                    },
                }),
            };
            out.push(mk(frame, ts, b, a, ack));
        }
    }
    out
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
