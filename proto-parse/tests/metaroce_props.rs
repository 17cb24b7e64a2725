//! Property tests of the MetaRoCE wire module: `parse(emit(x)) == x` for
//! every packet kind, every truncation is a length error (never a panic),
//! and arbitrary bytes never panic a parser.

use proptest::prelude::*;
use proto_parse::metaroce::{
    AckRepr, Body, CcAlgo, CnpReason, CnpRepr, CtrlOp, CtrlRepr, DataRepr, FbFlags, Features,
    FeedbackRepr, Flags, HopTelemetry, NackCode, NackRepr, Op, Packet, PathState, PathStatusEntry,
    Repr, SackBitmap, TlvRepr, parse_lax,
};

fn feedback() -> impl Strategy<Value = FeedbackRepr> {
    (
        0u8..16,
        any::<u16>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        any::<u8>(),
        any::<u8>(),
        any::<u32>(),
    )
        .prop_map(
            |(
                flags,
                echo_ev,
                echo_psn,
                echo_tx_ts,
                rx_ts,
                ce_count,
                rx_buf_level,
                fwd_hops,
                credit,
            )| {
                FeedbackRepr {
                    flags: FbFlags::from_bits_retain(flags << 4),
                    echo_ev,
                    echo_psn,
                    echo_tx_ts,
                    rx_ts,
                    ce_count,
                    rx_buf_level,
                    fwd_hops,
                    credit,
                }
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Send),
        any::<u32>().prop_map(|imm_data| Op::SendImm { imm_data }),
        (any::<u64>(), any::<u32>()).prop_map(|(remote_va, rkey)| Op::Write { remote_va, rkey }),
        (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(remote_va, rkey, imm_data)| {
            Op::WriteImm {
                remote_va,
                rkey,
                imm_data,
            }
        }),
        (any::<u64>(), any::<u32>()).prop_map(|(remote_va, rkey)| Op::ReadReq { remote_va, rkey }),
        Just(Op::ReadResp),
    ]
}

fn sack() -> impl Strategy<Value = SackBitmap> {
    (0u8..=4, proptest::collection::vec(0usize..256, 0..20)).prop_map(|(words, bits)| {
        let mut bitmap = SackBitmap::with_words(words);
        for bit in bits {
            bitmap.set(bit);
        }
        bitmap
    })
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        (op(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
            |(op, msg_id, msg_offset, msg_len)| {
                Body::Data(DataRepr {
                    op,
                    payload_len: 0,
                    msg_id,
                    msg_offset,
                    msg_len,
                })
            }
        ),
        (feedback(), any::<u32>(), sack()).prop_map(|(feedback, sack_base, sack)| Body::Ack(
            AckRepr {
                feedback,
                sack_base,
                sack
            }
        )),
        (feedback(), any::<u8>(), any::<u8>(), any::<u32>()).prop_map(
            |(feedback, code, rnr_timer, nack_psn)| {
                Body::Nack(NackRepr {
                    feedback,
                    code: NackCode::from(code),
                    rnr_timer,
                    nack_psn,
                })
            }
        ),
        (feedback(), any::<u8>()).prop_map(|(feedback, reason)| Body::Cnp(CnpRepr {
            feedback,
            reason: CnpReason::from(reason)
        })),
        Just(Body::Probe),
        feedback().prop_map(Body::ProbeReply),
        (
            any::<u8>(),
            any::<u8>(),
            any::<u16>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(op, cc, mtu, init_psn, features, ts_unit_ps)| {
                Body::Ctrl(CtrlRepr {
                    op: CtrlOp::from(op),
                    cc_algo: CcAlgo::from(cc),
                    mtu,
                    init_psn,
                    features: Features::from_bits_retain(features),
                    ts_unit_ps,
                })
            }),
    ]
}

fn tlv() -> impl Strategy<Value = TlvRepr> {
    prop_oneof![
        proptest::collection::vec((any::<u32>(), any::<u16>(), any::<u16>()), 0..4).prop_map(
            |hops| {
                TlvRepr::HopTelemetry(
                    hops.into_iter()
                        .map(|(switch_id, queue_depth, hop_latency)| HopTelemetry {
                            switch_id,
                            queue_depth,
                            hop_latency,
                        })
                        .collect(),
                )
            }
        ),
        proptest::collection::vec((any::<u16>(), any::<u8>()), 0..4).prop_map(|paths| {
            TlvRepr::PathStatus(
                paths
                    .into_iter()
                    .map(|(ev, state)| PathStatusEntry {
                        ev,
                        state: PathState::from(state),
                    })
                    .collect(),
            )
        }),
        any::<u64>().prop_map(TlvRepr::Ts64),
        (4u8..=255, 0usize..3).prop_flat_map(|(tlv_type, words)| {
            proptest::collection::vec(any::<u8>(), 2 + 4 * words)
                .prop_map(move |value| TlvRepr::Unknown { tlv_type, value })
        }),
    ]
}

/// A packet and the payload it carries.
fn packet() -> impl Strategy<Value = (Repr<'static>, Vec<u8>, bool)> {
    (
        0u8..16,
        0u8..16,
        any::<(u16, u16, u32, u32, u32, u32)>(),
        body(),
        proptest::collection::vec(tlv(), 0..3),
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                flags,
                tx_attempt,
                (ev, path_seq, dst_conn, src_conn, psn, tx_ts),
                mut body,
                tlvs,
                payload,
                crc,
                trim,
            )| {
                let is_data = matches!(body, Body::Data(_));
                if let Body::Data(data) = &mut body {
                    // A trimmed packet carries fewer bytes than payload_len.
                    data.payload_len = payload.len() as u16 + u16::from(trim);
                }
                let repr = Repr {
                    flags: Flags::from_bits_retain(flags << 4),
                    tx_attempt,
                    ev,
                    path_seq,
                    dst_conn,
                    src_conn,
                    psn,
                    tx_ts,
                    body,
                    tlvs,
                    payload: &[],
                    crc,
                };
                (
                    repr,
                    if is_data { payload } else { Vec::new() },
                    is_data && trim,
                )
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parse_of_emit_is_identity((repr, payload, trimmed) in packet()) {
        let repr = Repr { payload: &payload, ..repr };
        let bytes = repr.to_vec();
        prop_assert_eq!(bytes.len(), repr.buffer_len());
        let packet = Packet::new_checked(&bytes[..]).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let layout = packet.layout(bytes.len()).unwrap();
        prop_assert_eq!(layout.trimmed, trimmed);
        // The header's fixed size, read from the bytes, is the one emitted.
        prop_assert_eq!(packet.fixed_len(), Some(repr.body.fixed_len()));
        prop_assert_eq!(Repr::parse(&packet).unwrap(), repr);
        prop_assert!(packet.tlvs().all(|t| t.is_ok()));
    }

    #[test]
    fn every_truncation_gives_a_length_error_not_a_panic((repr, payload, _) in packet()) {
        let repr = Repr { payload: &payload, ..repr };
        let bytes = repr.to_vec();
        for len in 0..bytes.len() {
            let lax = parse_lax(&bytes[..len], bytes.len());
            let stop = lax.stop.expect("a cut capture stops somewhere");
            prop_assert!(stop.is_capture_truncation(), "len {}: {}", len, stop);
            if let Some(packet) = &lax.packet {
                // Known only once the capture holds all of it.
                let fixed = repr.body.fixed_len();
                prop_assert_eq!(packet.fixed_len(), (len >= fixed).then_some(fixed), "len {}", len);
            }
            if let Ok(packet) = Packet::new_checked(&bytes[..len]) {
                // Only a DATA packet cut in its payload is still valid: trimmed.
                prop_assert!(packet.layout(len).unwrap().trimmed);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), extra in 0usize..64) {
        let lax = parse_lax(&bytes, bytes.len() + extra);
        if let Some(packet) = lax.packet {
            let _ = (packet.data().map(|d| (d.remote_va(), d.imm_data())), packet.ack().map(|a| a.sack_ranges()));
            let _ = (packet.nack().map(|n| n.nack_psn()), packet.cnp_reason(), packet.ctrl().map(|c| c.mtu()));
            let _ = packet.tlvs().count();
            // One flag per warning.
            let flags = packet.warning_flags();
            prop_assert_eq!(flags.bits().count_ones() as usize, packet.warnings().len());
            if let Some(layout) = &lax.layout {
                prop_assert_eq!(packet.warning_flags_in(layout), flags);
                let _ = (packet.payload(layout), packet.crc_status(layout));
            }
        }
        if let Ok(packet) = Packet::new_checked(&bytes[..]) {
            let _ = Repr::parse(&packet);
        }
    }
}
