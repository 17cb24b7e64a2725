//! RoCEv2 RC behaviour the real captures do not show: go-back-N after a
//! PSN sequence error NAK, RNR NAK, CNP, ECN CE, responses to another QP.
//! Expected numbers are worked out by hand from the script.

use std::net::IpAddr;

use analyzer::engine::{Config, Engine, ObsKind, Observation, RetxKind, RoceObs};
use proto_parse::rocev2::Opcode;

const A: &str = "10.9.0.1"; // requester, QP 0x30
const B: &str = "10.9.0.2"; // responder, QP 0x20

fn pkt(
    frame: u64,
    t_us: u64,
    from_a: bool,
    opcode: Opcode,
    psn: u32,
    syndrome: Option<u8>,
    ce: bool,
) -> Observation {
    let (src, dst, qp): (IpAddr, IpAddr, u32) = if from_a {
        (A.parse().unwrap(), B.parse().unwrap(), 0x20)
    } else {
        (B.parse().unwrap(), A.parse().unwrap(), 0x30)
    };
    Observation {
        frame,
        ts_ns: 1_000_000_000 + t_us * 1000,
        src,
        dst,
        src_port: 50000,
        dst_port: 4791,
        ecn: if ce { 3 } else { 2 },
        malformed: false,
        kind: ObsKind::RoceV2(RoceObs {
            opcode,
            dest_qp: qp,
            psn,
            ack_req: true,
            fecn: false,
            becn: false,
            syndrome,
            msn: 0,
            dma_len: None,
            payload_len: if from_a { 100 } else { 0 },
        }),
    }
}

/// ```text
/// f1  t0  SEND ONLY psn 10        f5  t10 ACK 10          -> msg 10 done, RTT 10 us
/// f2  t1  SEND ONLY psn 11        f6  t11 NAK seq err 11
/// f3  t2  SEND ONLY psn 12 (CE)   f7  t12 CNP to QP 0x30
/// f4  t3  SEND ONLY psn 13
/// f8  t13 psn 11 again -> fast, original f2     f9  t14 psn 12 -> fast, f3
/// f10 t15 psn 13 -> fast, f4                    f11 t20 ACK 13 -> msgs 11,12,13 done
/// f12 t30 SEND ONLY psn 14        f13 t31 RNR NAK 14
/// f14 t40 psn 14 again -> timeout (RNR retry)  f15 t41 ACK 14 -> msg 14 done (11 us)
/// ```
#[test]
fn go_back_n_rnr_cnp_ce() {
    use Opcode::{Cnp, RcAcknowledge as Ack, RcSendOnly as Send};
    let script = [
        pkt(1, 0, true, Send, 10, None, false),
        pkt(2, 1, true, Send, 11, None, false),
        pkt(3, 2, true, Send, 12, None, true),
        pkt(4, 3, true, Send, 13, None, false),
        pkt(5, 10, false, Ack, 10, Some(0x1f), false),
        pkt(6, 11, false, Ack, 11, Some(0x60), false),
        pkt(7, 12, false, Cnp, 0, None, false),
        pkt(8, 13, true, Send, 11, None, false),
        pkt(9, 14, true, Send, 12, None, false),
        pkt(10, 15, true, Send, 13, None, false),
        pkt(11, 20, false, Ack, 13, Some(0x1f), false),
        pkt(12, 30, true, Send, 14, None, false),
        pkt(13, 31, false, Ack, 14, Some(0x21), false),
        pkt(14, 40, true, Send, 14, None, false),
        pkt(15, 41, false, Ack, 14, Some(0x1f), false),
    ];
    let mut engine = Engine::new(Config::default());
    let v: Vec<_> = script.iter().map(|o| engine.ingest(o)).collect();

    assert_eq!(v[4].ack_rtt_ns, Some(10_000));
    assert_eq!(v[4].acked_frame, Some(1));
    assert_eq!(v[5].rocev2_nak, Some(0x60));
    assert!(v[6].cnp_rocev2);
    for (i, orig) in [(7, 2), (8, 3), (9, 4)] {
        let r = v[i].retransmission.unwrap();
        assert_eq!(
            (r.original_frame, r.kind),
            (Some(orig), RetxKind::Fast),
            "frame {}",
            i + 1
        );
    }
    // Karn: no RTT sample for a retransmitted PSN.
    assert_eq!(v[10].ack_rtt_ns, None);
    assert_eq!(v[10].messages_completed, 3);
    assert_eq!(v[12].rocev2_nak, Some(0x21));
    assert_eq!(v[13].retransmission.unwrap().kind, RetxKind::Timeout);
    assert_eq!(v[14].message.unwrap().latency_ns, 11_000);

    let r = engine.snapshot();
    assert_eq!(r.rocev2.len(), 1);
    let f = &r.rocev2[0];
    assert_eq!(f.dest_qp, 0x20);
    assert_eq!(f.data_packets, 9);
    assert_eq!(f.retransmissions, 4);
    // f8-f10 after the sequence-error NAK; f14 after the RNR NAK.
    assert_eq!(
        (
            f.fast_retransmissions,
            f.timeout_retransmissions,
            f.spurious_retransmissions
        ),
        (3, 1, 0)
    );
    // Requests 10..=14; the last ACK (f15) acknowledges 14.
    assert_eq!(
        (f.first_psn, f.highest_psn, f.acked_psn, f.outstanding_psns),
        (Some(10), Some(14), Some(14), 0)
    );
    assert_eq!(f.naks_by_code.get("PSN sequence error"), Some(&1));
    assert_eq!(f.naks_by_code.len(), 1);
    // Every packet of the script is ECT(0) or CE; no FECN/BECN bits.
    assert_eq!((f.ect_packets, f.fecn, f.becn), (15, 0, 0));
    assert_eq!(f.naks, 1);
    assert_eq!(f.rnr_naks, 1);
    assert_eq!(f.acks, 3);
    assert_eq!(f.cnps, 1);
    assert_eq!(f.ce_marked, 1);
    assert_eq!(f.messages_completed, 5);
    assert_eq!(f.ack_rtt_ns.count, 1);
    // 10, 19, 18, 17 and 11 us.
    assert_eq!(f.msg_completion_ns.min, 10_000);
    assert_eq!(f.msg_completion_ns.max, 19_000);
    assert_eq!(r.engine.rocev2_unmatched_responses, 0);
}

/// An RDMA READ answered by three response packets: every response is an
/// implicit ACK up to its own PSN, so nothing is left outstanding.
///
/// ```text
/// f1 t0  READ request psn 20 (3 response packets: PSNs 20..=22)
/// f2 t10 READ response FIRST psn 20  -> RTT 10 us (f1)
/// f3 t11 READ response MIDDLE psn 21
/// f4 t12 READ response LAST psn 22   -> READ done, 12 us
/// f5 t20 SEND ONLY psn 23            f6 t30 ACK 23 -> SEND done, 10 us
/// ```
#[test]
fn read_responses_acknowledge_up_to_their_psn() {
    use Opcode::{
        RcAcknowledge as Ack, RcRdmaReadRequest as Read, RcRdmaReadResponseFirst as First,
        RcRdmaReadResponseLast as Last, RcRdmaReadResponseMiddle as Middle, RcSendOnly as Send,
    };
    let script = [
        pkt(1, 0, true, Read, 20, None, false),
        pkt(2, 10, false, First, 20, Some(0x1f), false),
        pkt(3, 11, false, Middle, 21, None, false),
        pkt(4, 12, false, Last, 22, Some(0x1f), false),
        pkt(5, 20, true, Send, 23, None, false),
        pkt(6, 30, false, Ack, 23, Some(0x1f), false),
    ];
    let mut engine = Engine::new(Config::default());
    let mut v: Vec<_> = script[..4].iter().map(|o| engine.ingest(o)).collect();
    let f = &engine.snapshot().rocev2[0];
    assert_eq!(
        (f.highest_psn, f.acked_psn, f.outstanding_psns),
        (Some(22), Some(22), 0)
    );
    v.extend(script[4..].iter().map(|o| engine.ingest(o)));
    assert_eq!(v[1].ack_rtt_ns, Some(10_000));
    assert_eq!(
        v[3].message.map(|m| (m.op, m.latency_ns)),
        Some(("read", 12_000))
    );
    // The SEND after the READ is a new PSN, not a retransmission.
    assert_eq!(v[4].retransmission, None);
    assert_eq!(
        v[5].message.map(|m| (m.op, m.latency_ns)),
        Some(("send", 10_000))
    );
    let f = &engine.snapshot().rocev2[0];
    assert_eq!(f.read_requests, 1);
    assert_eq!(f.read_response_packets, 3);
    assert_eq!(f.messages_completed, 2);
    assert_eq!(
        (f.first_psn, f.highest_psn, f.acked_psn, f.outstanding_psns),
        (Some(20), Some(23), Some(23), 0)
    );
}
