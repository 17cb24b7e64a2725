//! Byte fixtures for every packet kind, written from the spec by
//! `/tmp`-free hand arithmetic (each array was built field by field from
//! spec sections 2 to 7 by a script kept in `docs/fixture-bytes.py`, which
//! computes the CRC32C bit by bit, independently of this crate), in
//! parse/emit pairs.

use super::*;
use crate::error::{ErrorKind, Layer, LenSource};

// 60 bytes
pub(crate) static WRITE_CRC: [u8; 60] = [
    0x10, 0x64, 0x0d, 0x00, 0x00, 0x03, 0x00, 0x07, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x22,
    0x00, 0x00, 0x00, 0x64, 0x3b, 0x9a, 0xca, 0x00, 0x02, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x05,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00,
    0xca, 0xfe, 0xba, 0xbe, 0xde, 0xad, 0xbe, 0xef, 0x39, 0x54, 0x02, 0x52,
];
// 46 bytes
pub(crate) static SEND_IMM: [u8; 46] = [
    0x10, 0x40, 0x0b, 0x20, 0x00, 0x09, 0x00, 0x01, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x22,
    0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x03, 0xe8, 0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x06,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, 0x01, 0x02, 0x03, 0x04, 0x68, 0x69,
];
// 68 bytes
pub(crate) static ACK_SACK: [u8; 68] = [
    0x11, 0x00, 0x11, 0x00, 0x00, 0x03, 0x00, 0x08, 0x00, 0x00, 0x00, 0x22, 0x00, 0x00, 0x00, 0x11,
    0x00, 0x00, 0x00, 0xc8, 0x00, 0x00, 0x13, 0x88, 0x90, 0x02, 0x00, 0x03, 0x00, 0x00, 0x00, 0xca,
    0x00, 0x00, 0x0f, 0xa0, 0x00, 0x00, 0x11, 0x94, 0x00, 0x0c, 0x1e, 0x05, 0xff, 0xff, 0xff, 0xff,
    0x00, 0x00, 0x00, 0xc8, 0x60, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
];
// 60 bytes
pub(crate) static NACK_GAP_CRC: [u8; 60] = [
    0x12, 0x04, 0x0e, 0x00, 0x00, 0x04, 0x00, 0x09, 0x00, 0x00, 0x00, 0x22, 0x00, 0x00, 0x00, 0x11,
    0x00, 0x00, 0x00, 0xc8, 0x00, 0x00, 0x17, 0x70, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0xcd,
    0x00, 0x00, 0x10, 0x04, 0x00, 0x00, 0x11, 0xf8, 0x00, 0x0c, 0x1f, 0x00, 0x00, 0x01, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc9, 0xfc, 0x48, 0xd5, 0xf5,
];
// 52 bytes
pub(crate) static CNP_ECN: [u8; 52] = [
    0x13, 0x00, 0x0d, 0x00, 0x00, 0x05, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x22, 0x00, 0x00, 0x00, 0x11,
    0x00, 0x00, 0x00, 0xc8, 0x00, 0x00, 0x17, 0xd4, 0x80, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0xce,
    0x00, 0x00, 0x10, 0x68, 0x00, 0x00, 0x12, 0x5c, 0x00, 0x0d, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
    0x01, 0x00, 0x00, 0x00,
];
// 24 bytes
pub(crate) static PROBE: [u8; 24] = [
    0x14, 0x80, 0x06, 0x00, 0x00, 0x0c, 0x00, 0x03, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x22,
    0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x03, 0x09,
];
// 48 bytes
pub(crate) static PROBE_REPLY: [u8; 48] = [
    0x15, 0x00, 0x0c, 0x00, 0x00, 0x0c, 0x00, 0x04, 0x00, 0x00, 0x00, 0x22, 0x00, 0x00, 0x00, 0x11,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x84, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x2a,
    0x00, 0x00, 0x03, 0x09, 0x00, 0x00, 0x03, 0x52, 0x00, 0x00, 0x00, 0x03, 0xff, 0xff, 0xff, 0xff,
];
// 40 bytes
pub(crate) static CTRL_CONNECT: [u8; 40] = [
    0x16, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x22,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x10, 0x00, 0x00, 0x00, 0x03, 0xe8,
    0x00, 0x00, 0x00, 0x1b, 0x00, 0x00, 0x03, 0xe8,
];
// 67 bytes
pub(crate) static SEND_TLVS: [u8; 67] = [
    0x10, 0x68, 0x10, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x22,
    0x00, 0x00, 0x01, 0x2c, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x09,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x03, 0x03, 0x00, 0x00, 0x17, 0x97, 0x9c, 0xfe,
    0x3d, 0x85, 0xcd, 0x15, 0x02, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00,
    0x61, 0x62, 0x63,
];
// 43 bytes
pub(crate) static READ_RESP_TRIMMED: [u8; 43] = [
    0x10, 0x04, 0x0a, 0x00, 0x00, 0x02, 0x00, 0x02, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x22,
    0x00, 0x00, 0x01, 0x90, 0x00, 0x00, 0x00, 0x14, 0x05, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x04,
    0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x10, 0x78, 0x79, 0x7a,
];
// 52 bytes
pub(crate) static READ_REQ: [u8; 52] = [
    0x10, 0x60, 0x0d, 0x00, 0x00, 0x06, 0x00, 0x05, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x22,
    0x00, 0x00, 0x01, 0xf4, 0x00, 0x00, 0x00, 0x1e, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00,
    0x00, 0x00, 0x00, 0x77,
];

fn parse(bytes: &[u8]) -> (Packet<&[u8]>, Layout) {
    let packet = Packet::new_checked(bytes).expect("fixture is valid");
    let layout = packet.layout(bytes.len()).unwrap();
    (packet, layout)
}

#[allow(clippy::too_many_arguments)] // mirrors the base header field by field
fn base(
    flags: Flags,
    tx_attempt: u8,
    ev: u16,
    path_seq: u16,
    (dst_conn, src_conn): (u32, u32),
    psn: u32,
    tx_ts: u32,
    body: Body,
) -> Repr<'static> {
    Repr {
        flags,
        tx_attempt,
        ev,
        path_seq,
        dst_conn,
        src_conn,
        psn,
        tx_ts,
        body,
        tlvs: Vec::new(),
        payload: &[],
        crc: false,
    }
}

fn write_crc_repr() -> Repr<'static> {
    Repr {
        payload: &[0xde, 0xad, 0xbe, 0xef],
        crc: true,
        ..base(
            Flags::SOM | Flags::EOM,
            0,
            3,
            7,
            (0x11, 0x22),
            100,
            1_000_000_000,
            Body::Data(DataRepr {
                op: Op::Write {
                    remote_va: 0x7F00_0000_1000,
                    rkey: 0xCAFE_BABE,
                },
                payload_len: 4,
                msg_id: 5,
                msg_offset: 0,
                msg_len: 4,
            }),
        )
    }
}

#[test]
fn test_parse_write_with_crc() {
    let (packet, layout) = parse(&WRITE_CRC);
    assert_eq!(packet.version(), 1);
    assert_eq!(packet.packet_type(), PacketType::Data);
    assert_eq!(packet.flags(), Flags::SOM | Flags::EOM | Flags::CRC);
    assert_eq!((packet.hlen(), packet.header_len()), (13, 52));
    assert_eq!((packet.ev(), packet.path_seq()), (3, 7));
    assert_eq!((packet.dst_conn(), packet.src_conn()), (0x11, 0x22));
    assert_eq!((packet.psn(), packet.tx_ts()), (100, 1_000_000_000));
    let data = packet.data().unwrap();
    assert_eq!(data.op(), DataOp::Write);
    assert_eq!(
        (
            data.payload_len(),
            data.msg_id(),
            data.msg_offset(),
            data.msg_len()
        ),
        (4, 5, 0, 4)
    );
    assert_eq!(data.remote_va(), Some(0x7F00_0000_1000));
    assert_eq!(data.rkey(), Some(0xCAFE_BABE));
    assert_eq!(data.imm_data(), None);
    assert_eq!(packet.payload(&layout), &[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(layout.trailer, Some(56..60));
    assert!(!layout.trimmed);
    assert_eq!(packet.crc_status(&layout), CrcStatus::Good);
    assert!(packet.warnings().is_empty());
    assert!(packet.feedback().is_none() && packet.ack().is_none() && packet.ctrl().is_none());
}

#[test]
fn test_emit_write_with_crc() {
    assert_eq!(write_crc_repr().to_vec(), WRITE_CRC);
    assert_eq!(
        Repr::parse(&Packet::new_checked(&WRITE_CRC[..]).unwrap()).unwrap(),
        write_crc_repr()
    );
}

#[test]
fn bad_crc_is_reported_with_both_values() {
    let mut bytes = WRITE_CRC;
    bytes[53] ^= 0xFF;
    let (packet, layout) = parse(&bytes);
    assert!(matches!(
        packet.crc_status(&layout),
        CrcStatus::Bad {
            stored: 0x3954_0252,
            ..
        }
    ));
}

fn send_imm_repr() -> Repr<'static> {
    Repr {
        payload: b"hi",
        ..base(
            Flags::SOM,
            2,
            9,
            1,
            (0x11, 0x22),
            7,
            1000,
            Body::Data(DataRepr {
                op: Op::SendImm {
                    imm_data: 0x0102_0304,
                },
                payload_len: 2,
                msg_id: 6,
                msg_offset: 0,
                msg_len: 6,
            }),
        )
    }
}

#[test]
fn test_parse_send_imm() {
    let (packet, layout) = parse(&SEND_IMM);
    assert_eq!(packet.tx_attempt(), 2);
    let data = packet.data().unwrap();
    assert_eq!(data.op(), DataOp::SendImm);
    assert_eq!(data.imm_data(), Some(0x0102_0304));
    assert_eq!(data.remote_va(), None);
    assert_eq!(packet.payload(&layout), b"hi");
    assert_eq!(packet.crc_status(&layout), CrcStatus::NotPresent);
}

#[test]
fn test_emit_send_imm() {
    assert_eq!(send_imm_repr().to_vec(), SEND_IMM);
}

fn ack_repr() -> Repr<'static> {
    base(
        Flags::empty(),
        0,
        3,
        8,
        (0x22, 0x11),
        200,
        5000,
        Body::Ack(AckRepr {
            feedback: FeedbackRepr {
                flags: FbFlags::ECE | FbFlags::COAL,
                echo_ev: 3,
                echo_psn: 202,
                echo_tx_ts: 4000,
                rx_ts: 4500,
                ce_count: 12,
                rx_buf_level: 30,
                fwd_hops: 5,
                credit: u32::MAX,
            },
            sack_base: 200,
            sack: SackBitmap::from_psns(200, [201, 202, 264]),
        }),
    )
}

#[test]
fn test_parse_ack_with_sack() {
    let (packet, _) = parse(&ACK_SACK);
    let ack = packet.ack().unwrap();
    let fb = ack.feedback();
    assert_eq!(fb.flags(), FbFlags::ECE | FbFlags::COAL);
    assert_eq!(
        (fb.echo_ev(), fb.echo_psn(), fb.echo_tx_ts(), fb.rx_ts()),
        (3, 202, 4000, 4500)
    );
    assert_eq!(
        (fb.ce_count(), fb.rx_buf_level(), fb.fwd_hops(), fb.credit()),
        (12, 30, 5, u32::MAX)
    );
    assert_eq!((ack.sack_words(), ack.sack_base()), (2, 200));
    assert_eq!(ack.sacked_psns().collect::<Vec<_>>(), [201, 202, 264]);
    assert_eq!(ack.sack_ranges(), [201..203, 264..265]);
    assert!(ack.sack_bit(64) && !ack.sack_bit(0) && !ack.sack_bit(127));
}

#[test]
fn test_emit_ack_with_sack() {
    assert_eq!(ack_repr().to_vec(), ACK_SACK);
}

fn nack_repr() -> Repr<'static> {
    Repr {
        crc: true,
        ..base(
            Flags::empty(),
            0,
            4,
            9,
            (0x22, 0x11),
            200,
            6000,
            Body::Nack(NackRepr {
                feedback: FeedbackRepr {
                    echo_ev: 4,
                    echo_psn: 205,
                    echo_tx_ts: 4100,
                    rx_ts: 4600,
                    ce_count: 12,
                    rx_buf_level: 31,
                    credit: 65536,
                    ..FeedbackRepr::default()
                },
                code: NackCode::Gap,
                rnr_timer: 0,
                nack_psn: 201,
            }),
        )
    }
}

#[test]
fn test_parse_nack_with_crc() {
    let (packet, layout) = parse(&NACK_GAP_CRC);
    let nack = packet.nack().unwrap();
    assert_eq!(
        (nack.code(), nack.rnr_timer(), nack.nack_psn()),
        (NackCode::Gap, 0, 201)
    );
    assert_eq!(nack.feedback().credit(), 65536);
    assert_eq!(packet.crc_status(&layout), CrcStatus::Good);
    assert_eq!(layout.payload, 56..56);
}

#[test]
fn test_emit_nack_with_crc() {
    assert_eq!(nack_repr().to_vec(), NACK_GAP_CRC);
}

fn cnp_repr() -> Repr<'static> {
    base(
        Flags::empty(),
        0,
        5,
        10,
        (0x22, 0x11),
        200,
        6100,
        Body::Cnp(CnpRepr {
            feedback: FeedbackRepr {
                flags: FbFlags::ECE,
                echo_ev: 5,
                echo_psn: 206,
                echo_tx_ts: 4200,
                rx_ts: 4700,
                ce_count: 13,
                credit: u32::MAX,
                ..FeedbackRepr::default()
            },
            reason: CnpReason::Ecn,
        }),
    )
}

#[test]
fn test_parse_cnp() {
    let (packet, _) = parse(&CNP_ECN);
    assert_eq!(packet.cnp_reason(), Some(CnpReason::Ecn));
    assert_eq!(packet.feedback().unwrap().ce_count(), 13);
}

#[test]
fn test_emit_cnp() {
    assert_eq!(cnp_repr().to_vec(), CNP_ECN);
}

#[test]
fn test_parse_emit_probe_and_reply() {
    let (probe, _) = parse(&PROBE);
    assert_eq!(
        (probe.packet_type(), probe.psn(), probe.flags()),
        (PacketType::Probe, 42, Flags::AR)
    );
    assert!(probe.feedback().is_none());
    let probe_repr = base(Flags::AR, 0, 12, 3, (0x11, 0x22), 42, 777, Body::Probe);
    assert_eq!(probe_repr.to_vec(), PROBE);

    let (reply, _) = parse(&PROBE_REPLY);
    let fb = reply.feedback().unwrap();
    assert_eq!(
        (fb.echo_ev(), fb.echo_psn(), fb.echo_tx_ts(), fb.fwd_hops()),
        (12, 42, 777, 3)
    );
    let reply_repr = base(
        Flags::empty(),
        0,
        12,
        4,
        (0x22, 0x11),
        0,
        900,
        Body::ProbeReply(FeedbackRepr {
            echo_ev: 12,
            echo_psn: 42,
            echo_tx_ts: 777,
            rx_ts: 850,
            fwd_hops: 3,
            credit: u32::MAX,
            ..FeedbackRepr::default()
        }),
    );
    assert_eq!(reply_repr.to_vec(), PROBE_REPLY);
}

fn ctrl_repr() -> Repr<'static> {
    base(
        Flags::empty(),
        0,
        0,
        0,
        (0, 0x22),
        0,
        0,
        Body::Ctrl(CtrlRepr {
            op: CtrlOp::Connect,
            cc_algo: CcAlgo::DelayBased,
            mtu: 4096,
            init_psn: 1000,
            features: Features::CRC
                | Features::PATH_SEQ
                | Features::TRIMMING_AWARE
                | Features::CLOCKS_SYNCHRONISED,
            ts_unit_ps: 1000,
        }),
    )
}

#[test]
fn test_parse_ctrl_connect() {
    let (packet, _) = parse(&CTRL_CONNECT);
    let ctrl = packet.ctrl().unwrap();
    assert_eq!(
        (ctrl.op(), ctrl.cc_algo(), ctrl.mtu()),
        (CtrlOp::Connect, CcAlgo::DelayBased, 4096)
    );
    assert_eq!(
        (ctrl.init_psn(), ctrl.features().bits(), ctrl.ts_unit_ps()),
        (1000, 0b11011, 1000)
    );
}

#[test]
fn test_emit_ctrl_connect() {
    assert_eq!(ctrl_repr().to_vec(), CTRL_CONNECT);
}

fn send_tlvs_repr() -> Repr<'static> {
    Repr {
        tlvs: vec![
            TlvRepr::Ts64(1_700_000_000_123_456_789),
            TlvRepr::PathStatus(vec![
                PathStatusEntry {
                    ev: 1,
                    state: PathState::Active,
                },
                PathStatusEntry {
                    ev: 2,
                    state: PathState::Retired,
                },
            ]),
        ],
        payload: b"abc",
        ..base(
            Flags::SOM | Flags::EOM,
            0,
            1,
            1,
            (0x11, 0x22),
            300,
            10,
            Body::Data(DataRepr {
                op: Op::Send,
                payload_len: 3,
                msg_id: 9,
                msg_offset: 0,
                msg_len: 3,
            }),
        )
    }
}

#[test]
fn test_parse_tlvs() {
    let (packet, layout) = parse(&SEND_TLVS);
    let tlvs: Vec<_> = packet.tlvs().collect::<Result<_, _>>().unwrap();
    assert_eq!(tlvs.len(), 2);
    assert_eq!(
        (tlvs[0].tlv_type, tlvs[0].offset, tlvs[0].len_words()),
        (TlvType::Ts64, 40, 3)
    );
    assert_eq!(tlvs[0].ts64(), Some(1_700_000_000_123_456_789));
    let paths: Vec<_> = tlvs[1].path_status().unwrap().collect();
    assert_eq!(
        paths[1],
        PathStatusEntry {
            ev: 2,
            state: PathState::Retired
        }
    );
    assert_eq!(packet.payload(&layout), b"abc");
}

#[test]
fn test_emit_tlvs() {
    assert_eq!(send_tlvs_repr().to_vec(), SEND_TLVS);
}

fn read_resp_trimmed_repr() -> Repr<'static> {
    Repr {
        payload: b"xyz",
        crc: true,
        ..base(
            Flags::empty(),
            0,
            2,
            2,
            (0x11, 0x22),
            400,
            20,
            Body::Data(DataRepr {
                op: Op::ReadResp,
                payload_len: 8,
                msg_id: 4,
                msg_offset: 8,
                msg_len: 16,
            }),
        )
    }
}

#[test]
fn test_parse_trimmed() {
    let (packet, layout) = parse(&READ_RESP_TRIMMED);
    assert!(layout.trimmed);
    assert_eq!(layout.trailer, None);
    assert_eq!(packet.payload(&layout), b"xyz");
    assert_eq!(packet.data().unwrap().payload_len(), 8);
    assert_eq!(packet.crc_status(&layout), CrcStatus::NotPresent);
}

#[test]
fn test_emit_trimmed() {
    let repr = read_resp_trimmed_repr();
    assert!(repr.is_trimmed());
    assert_eq!(repr.to_vec(), READ_RESP_TRIMMED);
}

#[test]
fn test_parse_emit_read_req() {
    let (packet, layout) = parse(&READ_REQ);
    let data = packet.data().unwrap();
    assert_eq!(
        (data.op(), data.msg_len(), data.remote_va(), data.rkey()),
        (DataOp::ReadReq, 65536, Some(0x2000), Some(0x77))
    );
    assert!(packet.payload(&layout).is_empty());
    let repr = base(
        Flags::SOM | Flags::EOM,
        0,
        6,
        5,
        (0x11, 0x22),
        500,
        30,
        Body::Data(DataRepr {
            op: Op::ReadReq {
                remote_va: 0x2000,
                rkey: 0x77,
            },
            payload_len: 0,
            msg_id: 11,
            msg_offset: 0,
            msg_len: 65536,
        }),
    );
    assert_eq!(repr.to_vec(), READ_REQ);
}

/// Every fixture with its decoded form, for the property tests and the
/// fixture generator.
pub(crate) fn all_fixtures() -> Vec<&'static [u8]> {
    vec![
        &WRITE_CRC,
        &SEND_IMM,
        &ACK_SACK,
        &NACK_GAP_CRC,
        &CNP_ECN,
        &PROBE,
        &PROBE_REPLY,
        &CTRL_CONNECT,
        &SEND_TLVS,
        &READ_RESP_TRIMMED,
        &READ_REQ,
    ]
}

#[test]
fn every_truncation_of_every_fixture_is_a_length_error() {
    for fixture in all_fixtures() {
        for len in 0..fixture.len() {
            let cut = &fixture[..len];
            // As a complete packet: malformed, or (a DATA packet cut after
            // its header) trimmed; never a panic.
            match Packet::new_checked(cut) {
                Err(err) => assert!(!err.is_capture_truncation(), "{err}"),
                Ok(packet) => {
                    assert_eq!(packet.packet_type(), PacketType::Data);
                    assert!(packet.layout(len).unwrap().trimmed, "len {len}");
                }
            }
            // As a snaplen cut of the full packet: a capture truncation.
            let lax = parse_lax(cut, fixture.len());
            let stop = lax.stop.expect("a cut capture says where it stopped");
            assert!(stop.is_capture_truncation(), "len {len}: {stop}");
            assert_eq!(lax.packet.is_some(), len >= field::BASE_LEN);
        }
        let lax = parse_lax(fixture, fixture.len());
        assert_eq!(lax.stop, None);
        assert!(lax.layout.is_some());
    }
}

#[test]
fn malformed_packets_name_layer_offset_and_rule() {
    let mut bad_version = WRITE_CRC;
    bad_version[0] = 0x20;
    let err = Packet::new_checked(&bad_version[..]).unwrap_err();
    assert_eq!((err.layer, err.offset), (Layer::MetaRoceBase, 0));
    assert_eq!(
        err.to_string(),
        "metaroce at byte 0: version is 2, expected 1"
    );

    let mut short_hlen = WRITE_CRC;
    short_hlen[2] = 10; // 40 bytes < the 52 a WRITE needs
    let err = Packet::new_checked(&short_hlen[..]).unwrap_err();
    assert_eq!((err.layer, err.offset), (Layer::MetaRoceBase, 2));

    let mut too_many_words = ACK_SACK;
    too_many_words[25] = 5;
    let err = Packet::new_checked(&too_many_words[..]).unwrap_err();
    assert_eq!(
        err.kind,
        ErrorKind::BadValue {
            field: "sack_words",
            value: 5,
            expected: "0 to 4"
        }
    );

    let mut long_payload = SEND_IMM.to_vec();
    long_payload.push(0);
    let err = Packet::new_checked(&long_payload[..]).unwrap_err();
    assert_eq!((err.layer, err.offset), (Layer::MetaRoceData, 26));

    let mut tlv_past_hlen = SEND_TLVS;
    tlv_past_hlen[41] = 7; // TS64 claims 28 bytes; only 24 remain before hlen
    let err = Packet::new_checked(&tlv_past_hlen[..]).unwrap_err();
    assert_eq!((err.layer, err.offset), (Layer::MetaRoceTlv, 41));

    let mut tlv_len_zero = SEND_TLVS;
    tlv_len_zero[41] = 0;
    let err = Packet::new_checked(&tlv_len_zero[..]).unwrap_err();
    assert_eq!((err.layer, err.offset), (Layer::MetaRoceTlv, 41));

    let mut extra_after_ack = ACK_SACK.to_vec();
    extra_after_ack.extend_from_slice(&[0; 4]);
    let err = Packet::new_checked(&extra_after_ack[..]).unwrap_err();
    assert_eq!(err.layer, Layer::MetaRocePayload);
}

#[test]
fn unknown_values_decode_as_unknown_not_errors() {
    let mut unknown_op = SEND_IMM;
    unknown_op[24] = 0xF1; // vendor op: common 40-byte header, the rest is header padding
    let packet = Packet::new_checked(&unknown_op[..]).unwrap();
    assert_eq!(packet.data().unwrap().op(), DataOp::Unknown(0xF1));
    assert!(
        Repr::parse(&packet).is_err(),
        "no owned form for an unknown op"
    );

    let mut unknown_code = NACK_GAP_CRC;
    unknown_code[48] = 0x42;
    let packet = Packet::new_checked(&unknown_code[..]).unwrap();
    assert_eq!(packet.nack().unwrap().code(), NackCode::Unknown(0x42));
}

#[test]
fn reserved_bits_are_warnings() {
    let mut reserved = PROBE;
    reserved[1] |= 0x01;
    reserved[3] |= 0x01;
    let packet = Packet::new_checked(&reserved[..]).unwrap();
    let offsets: Vec<_> = packet.warnings().iter().map(|w| w.offset).collect();
    assert_eq!(offsets, [1, 3]);
    assert_eq!(
        packet.warning_flags(),
        WarningFlags::RESERVED_FLAGS | WarningFlags::RESERVED_TX_ATTEMPT
    );
    for fixture in all_fixtures() {
        let packet = Packet::new_checked(fixture).unwrap();
        let layout = packet.layout(fixture.len()).unwrap();
        assert_eq!(packet.warning_flags_in(&layout), WarningFlags::empty());
        assert_eq!(
            packet.warning_flags(),
            WarningFlags::empty(),
            "{fixture:02x?}"
        );
    }
}

/// `warning_flags_in`'s inline shortcut for a DATA packet without a
/// warning agrees with the full read for every value of each byte a DATA
/// warning can be in, and on every fixture.
#[test]
fn the_data_shortcut_agrees_with_the_full_warning_read() {
    for fixture in all_fixtures() {
        let packet = Packet::new_checked(fixture).unwrap();
        let layout = packet.layout(fixture.len()).unwrap();
        if packet.packet_type() != PacketType::Data {
            continue;
        }
        for at in [1, 2, 3, 25] {
            for value in 0..=255u8 {
                let mut bytes = fixture.to_vec();
                bytes[at] = value;
                let changed = Packet::new_unchecked(&bytes[..]);
                assert_eq!(
                    changed.warning_flags_in(&layout),
                    changed.warning_flags_fixed(Some(layout.fixed_len)),
                    "byte {at} = {value:#04x} of {fixture:02x?}"
                );
            }
        }
    }
}

#[test]
fn padding_tlv_ends_the_walk() {
    let mut padded = SEND_TLVS;
    padded[52] = 0; // PATH_STATUS becomes PAD: the rest of the header is padding
    let packet = Packet::new_checked(&padded[..]).unwrap();
    let types: Vec<_> = packet.tlvs().map(|t| t.unwrap().tlv_type).collect();
    assert_eq!(types, [TlvType::Ts64, TlvType::Pad]);
}

/// Spec 6: PAD is padding to the end of the header, so its length is what
/// it covers (docs/spec-decisions.md 5), whatever its len byte holds; also
/// when the capture cut it short.
#[test]
fn padding_tlv_covers_the_rest_of_the_header() {
    let mut padded = SEND_TLVS;
    padded[52] = 0; // PATH_STATUS (3 words, the last TLV) becomes PAD
    let header_end = Packet::new_checked(&padded[..]).unwrap().header_len();
    for len_byte in [0, 1, 3, 0xff] {
        padded[53] = len_byte;
        let packet = Packet::new_checked(&padded[..]).unwrap();
        let pad = packet.tlvs().last().unwrap().unwrap();
        assert_eq!(pad.tlv_type, TlvType::Pad);
        assert_eq!((pad.offset, pad.covers), (52, header_end - 52));
        assert_eq!(pad.len_words(), 3, "len byte {len_byte}");
        assert_eq!(pad.bytes.len(), 12);
    }
    // Cut inside the PAD: it still covers the rest of the header.
    let cut = Packet::new_unchecked(&padded[..56]);
    let pad = cut.tlvs().last().unwrap().unwrap();
    assert_eq!((pad.len_words(), pad.bytes.len()), (3, 4));
}

#[test]
fn heuristic_takes_fixtures_and_rejects_other_udp() {
    for fixture in all_fixtures() {
        assert!(looks_like(fixture), "{fixture:02x?}");
    }
    // A DNS query and a RoCEv2 RC SEND ONLY BTH are not MetaRoCE.
    let dns = [
        0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 7, b'e', b'x', b'a', b'm', b'p', b'l',
        b'e', 3, b'c', b'o', b'm', 0, 0, 1, 0, 1,
    ];
    assert!(!looks_like(&dns));
    let mut roce = [0u8; 40];
    roce[0] = 0x04;
    roce[1] = 0x40;
    assert!(!looks_like(&roce));
    let _ = LenSource::Header;
}

#[test]
fn sack_words_and_stored_crc_are_read_for_consumers() {
    let (packet, layout) = parse(&ACK_SACK);
    let sack = packet.ack().unwrap().sack();
    assert_eq!(sack.words(), [0b011 << 61, 1 << 63]);
    assert_eq!(packet.stored_crc(&layout), None);
    let (packet, layout) = parse(&WRITE_CRC);
    assert_eq!(packet.stored_crc(&layout), Some(0x3954_0252));
}
