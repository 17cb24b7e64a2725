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

/// Bytes in flight of the request flow after each packet (100-byte
/// requests): a PSN counts from its first captured request to the
/// acknowledgement passing it; go-back-N copies add nothing.
///
/// ```text
/// f1 t0  SEND psn 10                       100
/// f2 t1  SEND psn 12 (11 not captured)     200
/// f3 t2  SEND psn 13                       300
/// f4 t10 ACK 10                            200
/// f5 t11 NAK seq err 11 (acks 10 again)    200
/// f6 t12 psn 11 again: its first capture   300
/// f7 t13 psn 12 again, f8 t14 psn 13 again 300
/// f9 t20 ACK 12                            100
/// f10 t21 psn 10 again (acked already)     100
/// f11 t30 ACK 13                             0
/// ```
#[test]
fn bytes_in_flight_of_a_request_flow() {
    use Opcode::{RcAcknowledge as Ack, RcSendOnly as Send};
    let script = [
        pkt(1, 0, true, Send, 10, None, false),
        pkt(2, 1, true, Send, 12, None, false),
        pkt(3, 2, true, Send, 13, None, false),
        pkt(4, 10, false, Ack, 10, Some(0x1f), false),
        pkt(5, 11, false, Ack, 11, Some(0x60), false),
        pkt(6, 12, true, Send, 11, None, false),
        pkt(7, 13, true, Send, 12, None, false),
        pkt(8, 14, true, Send, 13, None, false),
        pkt(9, 20, false, Ack, 12, Some(0x1f), false),
        pkt(10, 21, true, Send, 10, None, false),
        pkt(11, 30, false, Ack, 13, Some(0x1f), false),
    ];
    let mut engine = Engine::new(Config::default());
    let got: Vec<Option<u64>> = script
        .iter()
        .map(|o| {
            let flow = engine.ingest(o).flow.expect("matched to the request flow");
            engine.rocev2_bytes_in_flight(flow)
        })
        .collect();
    let want = [100, 200, 300, 200, 200, 300, 300, 300, 100, 100, 0].map(Some);
    assert_eq!(got, want);
    let r = engine.snapshot();
    let f = &r.rocev2[0];
    assert_eq!((f.bytes_in_flight, f.max_bytes_in_flight), (0, 300));
    assert_eq!(f.retransmissions, 4);
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

/// A packet between A (requester) and B (responder) to `qp`: A's requests
/// carry B's QP, B's responses and CNPs carry A's. Responses carry an AETH
/// (`syndrome`).
fn to_qp(
    frame: u64,
    t_us: u64,
    from_a: bool,
    qp: u32,
    opcode: Opcode,
    psn: u32,
    syndrome: Option<u8>,
) -> Observation {
    let mut o = pkt(frame, t_us, from_a, opcode, psn, syndrome, false);
    if let ObsKind::RoceV2(r) = &mut o.kind {
        r.dest_qp = qp;
    }
    o
}

/// The request flow sent to `dest_qp`.
fn flow(r: &analyzer::engine::Report, dest_qp: u32) -> &analyzer::engine::RoceFlowReport {
    r.rocev2.iter().find(|f| f.dest_qp == dest_qp).unwrap()
}

/// Three QPs between the same two hosts, with close PSN ranges, one of
/// which wraps through 0 (requests to B's QPs 0x21, 0x22, 0x23; responses
/// to A's QPs 0x31, 0x32, 0x33). A response is paired with the request
/// flow whose outstanding PSNs its PSN (24-bit serial arithmetic) belongs
/// to, never by the PSN of a CNP (not a sequence number), and not by the
/// nearest highest PSN.
///
/// ```text
/// f1-f4   X -> QP 0x21: SEND ONLY psn FFFFFE, FFFFFF, 0, 1 (wraps)
/// f5-f8   Y -> QP 0x22: SEND ONLY psn FFFFF9..FFFFFC
/// f9-f12  Z -> QP 0x23: SEND ONLY psn 2..5
/// f13 CNP to 0x32 (no pairing yet)    -> held for A's QP 0x32
/// f14 ACK FFFFFE to 0x31 -> X only (Y's highest, FFFFFC, is nearer)
/// f15 ACK FFFFFC to 0x32 -> Y, and the CNP held for 0x32 with it
/// f16 NAK seq err 4 to 0x33 -> Z (2 and 3 acked)
/// f17 CNP to 0x32 -> Y (paired at f15)
/// f18 ACK 1 to 0x31 -> X          f19 ACK 5 to 0x33 -> Z
/// ```
#[test]
fn responses_pair_with_their_own_qp_among_close_psn_ranges() {
    use Opcode::{Cnp, RcAcknowledge as Ack, RcSendOnly as Send};
    let mut script = Vec::new();
    let mut t = 0;
    let mut add = |from_a: bool, qp: u32, op: Opcode, psn: u32, syn: Option<u8>| {
        t += 1;
        script.push(to_qp(t, t, from_a, qp, op, psn, syn));
    };
    for psn in [0xFF_FFFE, 0xFF_FFFF, 0, 1] {
        add(true, 0x21, Send, psn, None);
    }
    for psn in 0xFF_FFF9..=0xFF_FFFC {
        add(true, 0x22, Send, psn, None);
    }
    for psn in 2..=5 {
        add(true, 0x23, Send, psn, None);
    }
    add(false, 0x32, Cnp, 0, None);
    add(false, 0x31, Ack, 0xFF_FFFE, Some(0x1f));
    add(false, 0x32, Ack, 0xFF_FFFC, Some(0x1f));
    add(false, 0x33, Ack, 4, Some(0x60));
    add(false, 0x32, Cnp, 0, None);
    add(false, 0x31, Ack, 1, Some(0x1f));
    add(false, 0x33, Ack, 5, Some(0x1f));
    let mut engine = Engine::new(Config::default());
    for o in &script {
        engine.ingest(o);
    }
    let r = engine.snapshot();
    assert_eq!(r.rocev2.len(), 3);
    let (x, y, z) = (flow(&r, 0x21), flow(&r, 0x22), flow(&r, 0x23));
    assert_eq!(
        (x.acks, x.naks, x.cnps, x.acked_psn, x.messages_completed),
        (2, 0, 0, Some(1), 4)
    );
    assert_eq!(
        (y.acks, y.naks, y.cnps, y.acked_psn, y.messages_completed),
        (1, 0, 2, Some(0xFF_FFFC), 4)
    );
    assert_eq!(
        (z.acks, z.naks, z.cnps, z.acked_psn, z.messages_completed),
        (1, 1, 0, Some(5), 4)
    );
    for f in [x, y, z] {
        assert_eq!(f.outstanding_psns, 0, "QP {:#x}", f.dest_qp);
    }
    assert_eq!(r.engine.rocev2_unmatched_responses, 0);
}

/// A CNP that arrives before its flow's pairing is known (ECN marks start
/// with the first requests, before the first response pairs the QPs) is
/// counted on its request flow once a response pairs them: the flows'
/// CNP counts and the unmatched responses add up to the capture's CNPs.
/// A CNP of a QP no response ever pairs stays unmatched.
///
/// ```text
/// f1-f2 X -> QP 0x21: psn 100, 101      f3-f4 Y -> QP 0x22: psn 500, 501 (CE)
/// f5 CNP to 0x32, f6 CNP to 0x32, f7 CNP to 0x39 (no pairing yet: held)
/// f8 ACK 501 to 0x32 -> Y, with f5 and f6
/// f9 ACK 101 to 0x31 -> X                f10 CNP to 0x32 -> Y
/// ```
#[test]
fn a_cnp_before_its_flow_is_paired_is_counted_on_it() {
    use Opcode::{Cnp, RcAcknowledge as Ack, RcSendOnly as Send};
    let mut script = Vec::new();
    let mut t = 0;
    let mut add = |from_a: bool, qp: u32, op: Opcode, psn: u32, syn: Option<u8>| {
        t += 1;
        script.push(to_qp(t, t, from_a, qp, op, psn, syn));
    };
    add(true, 0x21, Send, 100, None);
    add(true, 0x21, Send, 101, None);
    add(true, 0x22, Send, 500, None);
    add(true, 0x22, Send, 501, None);
    add(false, 0x32, Cnp, 0, None);
    add(false, 0x32, Cnp, 0, None);
    add(false, 0x39, Cnp, 0, None);
    add(false, 0x32, Ack, 501, Some(0x1f));
    add(false, 0x31, Ack, 101, Some(0x1f));
    add(false, 0x32, Cnp, 0, None);
    let mut engine = Engine::new(Config::default());
    let verdicts: Vec<_> = script.iter().map(|o| engine.ingest(o)).collect();
    let cnps_captured = verdicts.iter().filter(|v| v.cnp_rocev2).count() as u64;
    assert_eq!(cnps_captured, 4);
    let r = engine.snapshot();
    let (x, y) = (flow(&r, 0x21), flow(&r, 0x22));
    assert_eq!((x.acks, x.cnps), (1, 0));
    assert_eq!((y.acks, y.cnps), (1, 3));
    // f7: no response to 0x39 ever came.
    assert_eq!(r.engine.rocev2_unmatched_responses, 1);
    assert_eq!(
        r.rocev2.iter().map(|f| f.cnps).sum::<u64>() + r.engine.rocev2_unmatched_responses,
        cnps_captured
    );
}

/// A pairing that later packets contradict is revisited. The capture
/// starts after Z's first requests: the first response to A's QP 0x33
/// (ACK 11) can only be paired with Y, the one flow there is; once Z's
/// requests are captured, an ACK to 0x33 beyond everything Y sent moves
/// the pairing to Z, where every later response of that QP is counted.
///
/// ```text
/// f1-f4 Y -> QP 0x22: psn 10..13    f5 ACK 11 to 0x33 -> Y (the only flow)
/// f6-f9 Z -> QP 0x23: psn 12..15    f10 ACK 15 to 0x33 -> not Y's: Z
/// f11 ACK 13 to 0x32 -> Y           f12 CNP to 0x33 -> Z
/// ```
#[test]
fn a_contradicted_pairing_is_revisited() {
    use Opcode::{Cnp, RcAcknowledge as Ack, RcSendOnly as Send};
    let mut script = Vec::new();
    let mut t = 0;
    let mut add = |from_a: bool, qp: u32, op: Opcode, psn: u32, syn: Option<u8>| {
        t += 1;
        script.push(to_qp(t, t, from_a, qp, op, psn, syn));
    };
    for psn in 10..=13 {
        add(true, 0x22, Send, psn, None);
    }
    add(false, 0x33, Ack, 11, Some(0x1f));
    for psn in 12..=15 {
        add(true, 0x23, Send, psn, None);
    }
    add(false, 0x33, Ack, 15, Some(0x1f));
    add(false, 0x32, Ack, 13, Some(0x1f));
    add(false, 0x33, Cnp, 0, None);
    let mut engine = Engine::new(Config::default());
    for o in &script {
        engine.ingest(o);
    }
    let r = engine.snapshot();
    let (y, z) = (flow(&r, 0x22), flow(&r, 0x23));
    assert_eq!(
        (z.acks, z.cnps, z.acked_psn, z.messages_completed),
        (1, 1, Some(15), 4)
    );
    assert_eq!(z.outstanding_psns, 0);
    assert_eq!(
        (y.acked_psn, y.messages_completed, y.cnps),
        (Some(13), 4, 0)
    );
    assert_eq!(y.outstanding_psns, 0);
}

/// An RDMA READ completes when every one of its response PSNs has been
/// captured, not at the first "READ Response Last"; and an RC QP completes
/// in order: a SEND posted after the READ completes no earlier than it.
///
/// ```text
/// f1 t0  READ request psn 20, 768 bytes (3 responses: PSNs 20..=22)
/// f2 t1  SEND ONLY psn 23
/// f3 t10 READ response FIRST psn 20   [MIDDLE psn 21 lost upstream]
/// f4 t12 READ response LAST psn 22    -> beyond the gap: discarded by the
///                                        requester, READ incomplete
/// f5 t13 ACK 23                       -> SEND acked, waits for the READ
/// f6 t20 READ request psn 21 again (re-read from the missing PSN)
/// f7 t30 READ response FIRST psn 21
/// f8 t31 READ response LAST psn 22    -> READ done (31 us), then SEND (30 us)
/// ```
#[test]
fn a_read_completes_with_all_its_responses_and_in_order() {
    use Opcode::{
        RcAcknowledge as Ack, RcRdmaReadRequest as Read, RcRdmaReadResponseFirst as First,
        RcRdmaReadResponseLast as Last, RcSendOnly as Send,
    };
    let mut read = pkt(1, 0, true, Read, 20, None, false);
    if let ObsKind::RoceV2(r) = &mut read.kind {
        (r.dma_len, r.payload_len) = (Some(768), 0);
    }
    let mut reread = pkt(6, 20, true, Read, 21, None, false);
    if let ObsKind::RoceV2(r) = &mut reread.kind {
        (r.dma_len, r.payload_len) = (Some(512), 0);
    }
    let script = [
        read,
        pkt(2, 1, true, Send, 23, None, false),
        pkt(3, 10, false, First, 20, Some(0x1f), false),
        pkt(4, 12, false, Last, 22, Some(0x1f), false),
        pkt(5, 13, false, Ack, 23, Some(0x1f), false),
        reread,
        pkt(7, 30, false, First, 21, Some(0x1f), false),
        pkt(8, 31, false, Last, 22, Some(0x1f), false),
    ];
    let mut engine = Engine::new(Config::default());
    let mut v = Vec::new();
    let mut done = Vec::new();
    for o in &script {
        v.push(engine.ingest(o));
        done.push(
            engine
                .messages_done()
                .iter()
                .map(|m| (m.op, m.latency_ns))
                .collect::<Vec<_>>(),
        );
    }
    for (i, d) in done[..7].iter().enumerate() {
        assert!(d.is_empty(), "frame {}: {d:?}", i + 1);
    }
    assert_eq!(done[7], [("read", 31_000), ("send", 30_000)]);
    assert_eq!(v[7].messages_completed, 2);
    assert!(v[5].retransmission.is_some(), "the re-read repeats PSN 21");
    let r = engine.snapshot();
    let f = &r.rocev2[0];
    assert_eq!(f.messages_completed, 2);
    assert_eq!(f.msg_completion_by_op_ns["read"].min, 31_000);
    assert_eq!(f.msg_completion_by_op_ns["send"].min, 30_000);
    assert_eq!((f.acked_psn, f.outstanding_psns), (Some(23), 0));
}

/// The per-packet facts a packet view shows (`Engine::rocev2_facts`): the
/// expected PSN of a request, the request a READ response answers and its
/// place among the READ's responses, and the time between a flow's CNPs.
#[test]
fn per_packet_facts() {
    use Opcode::{
        Cnp, RcRdmaReadRequest as Read, RcRdmaReadResponseOnly as ReadOnly, RcSendOnly as Send,
    };
    use analyzer::engine::ReadProgress;
    let script = [
        pkt(1, 0, true, Send, 10, None, false),
        pkt(2, 1, true, Send, 11, None, false),
        pkt(3, 2, false, Cnp, 0, None, false),
        pkt(4, 12, false, Cnp, 0, None, false),
        pkt(5, 13, true, Read, 12, None, false),
        pkt(6, 14, false, ReadOnly, 12, Some(0x1f), false),
    ];
    let mut engine = Engine::new(Config::default());
    let facts: Vec<_> = script
        .iter()
        .map(|o| {
            engine.ingest(o);
            engine.rocev2_facts()
        })
        .collect();
    assert_eq!(facts[0].expected_psn, None, "the flow's first request");
    assert_eq!(facts[1].expected_psn, Some(11));
    assert_eq!(facts[2].cnp_interval_ns, None);
    assert_eq!(facts[3].cnp_interval_ns, Some(10_000));
    assert_eq!(facts[4].expected_psn, Some(12));
    assert_eq!(facts[5].request_frame, Some(5));
    assert_eq!(
        facts[5].read,
        Some(ReadProgress {
            index: 1,
            span: 1,
            accepted: true,
            complete: true
        })
    );
    assert_eq!(engine.rocev2_flow_key(0).map(|k| k.2), Some(0x20));
}
