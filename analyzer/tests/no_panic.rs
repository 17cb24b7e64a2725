//! Arbitrary observation sequences (colliding PSNs, wrapping counters,
//! time going backwards, every type) never panic the engine, and its
//! state stays within the configured caps.

use std::net::IpAddr;

use analyzer::engine::{
    Config, CtrlObs, DataObs, Engine, FbKind, FeedbackObs, MergeConfig, MrBody, MrObs, MultiEngine,
    ObsKind, Observation, RoceObs,
};
use proptest::prelude::*;
use proto_parse::metaroce::{CnpReason, CtrlOp, DataOp, FbFlags, Flags, NackCode, PacketType};
use proto_parse::rocev2::Opcode;

fn mr_body() -> impl Strategy<Value = (PacketType, MrBody)> {
    prop_oneof![
        (
            any::<u8>(),
            any::<u16>(),
            0u32..5000,
            0u32..5000,
            0u32..6000,
            any::<bool>()
        )
            .prop_map(|(op, len, msg_id, off, msg_len, trimmed)| (
                PacketType::Data,
                MrBody::Data(DataObs {
                    op: DataOp::from(op % 8),
                    payload_len: len % 2000,
                    actual_len: u32::from(len % 2000),
                    trimmed,
                    msg_id: msg_id % 8,
                    msg_offset: off,
                    msg_len,
                })
            )),
        (
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
            0u8..6,
            any::<[u64; 4]>(),
            0u8..4
        )
            .prop_map(|(flags, echo_psn, echo_tx_ts, words, sack, kind)| {
                let kind = match kind {
                    0 => FbKind::Ack {
                        sack_base: echo_psn % 64,
                        sack_words: words,
                        sack,
                    },
                    1 => FbKind::Nack {
                        code: NackCode::from(words),
                        rnr_timer: 0,
                        nack_psn: echo_psn % 64,
                    },
                    2 => FbKind::Cnp(CnpReason::from(words)),
                    _ => FbKind::ProbeReply,
                };
                (
                    PacketType::Ack,
                    MrBody::Feedback(FeedbackObs {
                        flags: FbFlags::from_bits_retain(flags),
                        echo_ev: 0,
                        echo_psn: echo_psn % 64,
                        echo_tx_ts: echo_tx_ts % 16,
                        rx_ts: echo_tx_ts,
                        ce_count: 0,
                        credit: 0,
                        kind,
                    }),
                )
            }),
        any::<u32>().prop_map(|unit| (
            PacketType::Ctrl,
            MrBody::Ctrl(CtrlObs {
                op: CtrlOp::from((unit % 8) as u8),
                mtu: 4096,
                init_psn: unit,
                features: unit,
                ts_unit_ps: unit % 3000,
            })
        )),
        Just((PacketType::Probe, MrBody::Probe)),
        Just((PacketType::Unknown(9), MrBody::Other)),
        Just((PacketType::Data, MrBody::Malformed)),
    ]
}

fn observation() -> impl Strategy<Value = (u64, bool, u8, Observation)> {
    (
        0u64..3_000_000,
        any::<bool>(),
        0u8..2,
        mr_body(),
        (
            any::<u8>(),
            0u8..16,
            0u16..4,
            any::<u16>(),
            0u32..3,
            0u32..3,
        ),
        (
            prop_oneof![0u32..64, Just(u32::MAX - 2), any::<u32>()],
            0u32..16,
            any::<u8>(),
            any::<bool>(),
        ),
        (any::<u8>(), 0u32..4, 0u32..1 << 24, any::<Option<u8>>()),
    )
        .prop_map(
            |(
                dt,
                back,
                capture,
                (ptype, body),
                (flags, attempt, ev, seq, sc, dc),
                (psn, tx_ts, ecn, roce),
                (op, qp, rpsn, syn),
            )| {
                let a: IpAddr = "10.0.0.1".parse().unwrap();
                let b: IpAddr = "10.0.0.2".parse().unwrap();
                let from_a = sc <= dc;
                let kind = if roce {
                    ObsKind::RoceV2(RoceObs {
                        opcode: Opcode::from(op),
                        dest_qp: qp,
                        psn: rpsn,
                        ack_req: true,
                        fecn: false,
                        becn: false,
                        syndrome: syn,
                        msn: 0,
                        dma_len: Some(4096),
                        payload_len: 100,
                    })
                } else {
                    ObsKind::MetaRoce(MrObs {
                        checks: Default::default(),
                        ptype,
                        flags: Flags::from_bits_retain(flags),
                        tx_attempt: attempt,
                        ev,
                        path_seq: seq,
                        dst_conn: dc,
                        src_conn: sc,
                        psn,
                        tx_ts,
                        body,
                    })
                };
                let obs = Observation {
                    frame: 0,
                    ts_ns: 0,
                    src: if from_a { a } else { b },
                    dst: if from_a { b } else { a },
                    src_port: 1,
                    dst_port: 4794,
                    ecn: ecn & 3,
                    malformed: false,
                    kind,
                };
                (dt, back, capture, obs)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn arbitrary_sequences_do_not_panic(seq in proptest::collection::vec(observation(), 1..300)) {
        // With the lint on: its checks see the same arbitrary packets.
        let cfg = Config {
            max_flows: 3,
            window: 32,
            max_messages: 4,
            max_stalls: 2,
            stall_threshold_ns: 50_000,
            max_paths: 2,
            acked_grace: 8,
            lint: Some(analyzer::lint::LintOptions {
                point: analyzer::lint::CapturePoint::Auto,
                cnp_interval_ns: 50_000,
                timings: analyzer::lint::LintTimings::default(),
            }),
        };
        let mut engine = Engine::new(cfg);
        let mut multi = MultiEngine::new(2, cfg, MergeConfig { window_ns: 100_000, max_pending: 16, samples: 8 });
        let mut ts = 1_000_000_000u64;
        for (i, (dt, back, capture, mut obs)) in seq.into_iter().enumerate() {
            ts = if back { ts.saturating_sub(dt / 4) } else { ts + dt };
            obs.ts_ns = ts;
            obs.frame = i as u64 + 1;
            engine.ingest(&obs);
            multi.ingest(usize::from(capture), &obs);
            if i % 50 == 0 {
                engine.advance_time(ts + 10_000);
                let _ = engine.snapshot();
                for f in engine.findings() {
                    let _ = f.evidence();
                }
                engine.clear_findings();
            }
        }
        engine.finish(ts);
        let size = engine.state_size();
        prop_assert!(size.directions <= 3);
        // Live flows plus the response-to-flow cache (at most 4 x max(flows, 16)).
        prop_assert!(size.rocev2_flows <= 3 + 4 * 16);
        prop_assert!(size.window_slots <= 3 * 32);
        prop_assert!(size.messages <= 3 * 4);
        let json = serde_json::to_string(&engine.snapshot()).unwrap();
        prop_assert!(json.starts_with("{\"capture\""), "report JSON");
        let _ = multi.snapshots();
    }
}
