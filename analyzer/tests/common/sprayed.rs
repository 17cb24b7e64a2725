//! Bulk MetaRoCE traffic as the engine takes it (observations, no bytes):
//! for the engine's memory bounds (`tests/memory.rs`) and its ingest
//! benchmark (`benches/engine.rs`), which include this file.
//!
//! `flows` connection directions from 10.1.0.1 to 10.1.0.2; each round,
//! every flow sends one 4-packet WRITE sprayed over 16 evs (PSN 2 before
//! PSN 1: one reordered pair), then gets one coalesced ACK.

use std::net::IpAddr;
use std::ops::Range;

use analyzer::engine::{DataObs, FbKind, FeedbackObs, MrBody, MrObs, Observation};

use super::metaroce_observation;
use proto_parse::metaroce::{DataOp, FbFlags, Flags, PacketType};

pub const EVS: u16 = 16;
const PACKET: u32 = 4096;

pub struct Sprayed {
    pub flows: u32,
    /// Every `n`th flow-round sends its second packet twice (`None`:
    /// never).
    pub retransmit_every: Option<u32>,
    frame: u64,
    ts: u64,
    path_seq: Vec<u16>,
}

impl Sprayed {
    pub fn new(flows: u32, retransmit_every: Option<u32>) -> Sprayed {
        Sprayed {
            flows,
            retransmit_every,
            frame: 0,
            ts: 1_000_000,
            path_seq: vec![0; (flows * u32::from(EVS)) as usize],
        }
    }

    /// The packets of `rounds`, 25 ns apart, after those of earlier calls.
    pub fn rounds(&mut self, rounds: Range<u32>) -> Vec<Observation> {
        let a: IpAddr = "10.1.0.1".parse().unwrap();
        let b: IpAddr = "10.1.0.2".parse().unwrap();
        let mut out = Vec::new();
        for round in rounds {
            for flow in 0..self.flows {
                let psn0 = round * 4;
                let mut last_tx = 0;
                for k in [0u32, 2, 1, 3] {
                    let psn = psn0 + k;
                    let ev = ((psn + flow) % u32::from(EVS)) as u16;
                    let seq = &mut self.path_seq[(flow * u32::from(EVS) + u32::from(ev)) as usize];
                    *seq = seq.wrapping_add(1).max(1);
                    let mut flags = Flags::empty();
                    flags.set(Flags::SOM, k == 0);
                    flags.set(Flags::EOM, k == 3);
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
                        tx_ts: 0,
                        body: MrBody::Data(DataObs {
                            op: DataOp::Write,
                            payload_len: PACKET as u16,
                            actual_len: PACKET,
                            trimmed: false,
                            msg_id: round,
                            msg_offset: k * PACKET,
                            msg_len: 4 * PACKET,
                        }),
                    };
                    let retransmit = k == 1
                        && self
                            .retransmit_every
                            .is_some_and(|n| (round + flow) % n == 0);
                    for tx_attempt in 0..=u8::from(retransmit) {
                        self.frame += 1;
                        self.ts += 25;
                        last_tx = self.ts as u32;
                        let mr = MrObs {
                            tx_attempt,
                            tx_ts: last_tx,
                            ..mr
                        };
                        out.push(metaroce_observation(self.frame, self.ts, a, b, mr));
                    }
                }
                self.frame += 1;
                self.ts += 25;
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
                out.push(metaroce_observation(self.frame, self.ts, b, a, ack));
            }
        }
        out
    }
}
