//! Two captures of one connection with different clocks: capture 0 next
//! to A (the sender), capture 1 next to B, whose clock reads 5 ms ahead.
//! A->B DATA takes 20 us on ev 1 and 30 us on ev 2; B->A ACKs take 20 us
//! (on ev 7). One DATA on ev 2 is lost between the two capture points.
//! Expected values are worked out by hand.

mod common;

use std::net::IpAddr;

use analyzer::engine::{
    Config, FbKind, FeedbackObs, MergeConfig, MrBody, MrObs, MultiEngine, ObsKind, Observation,
};
use proto_parse::metaroce::{FbFlags, Flags, PacketType};

const OFFSET: u64 = 5_000_000;

fn data(psn: u32, ev: u16, seq: u16, tx_ts: u32) -> MrObs {
    common::one_packet_send(1, 2, psn, ev, seq, tx_ts)
}

fn ack(cum: u32, seq: u16, tx_ts: u32) -> MrObs {
    MrObs {
        checks: Default::default(),
        ptype: PacketType::Ack,
        flags: Flags::empty(),
        tx_attempt: 0,
        ev: 7,
        path_seq: seq,
        dst_conn: 1,
        src_conn: 2,
        psn: cum,
        tx_ts,
        body: MrBody::Feedback(FeedbackObs {
            flags: FbFlags::empty(),
            echo_ev: 1,
            echo_psn: cum - 1,
            echo_tx_ts: 0,
            rx_ts: 0,
            ce_count: 0,
            credit: u32::MAX,
            kind: FbKind::Ack {
                sack_base: cum,
                sack_words: 0,
                sack: [0; 4],
            },
        }),
    }
}

/// The engine of two capture points, matching within 20 ms.
fn two_captures() -> MultiEngine {
    MultiEngine::new(
        2,
        Config::default(),
        MergeConfig {
            window_ns: 20_000_000,
            ..MergeConfig::default()
        },
    )
}

#[test]
fn offset_one_way_delay_and_loss_between_captures() {
    let a: IpAddr = "10.3.0.1".parse().unwrap();
    let b: IpAddr = "10.3.0.2".parse().unwrap();
    // (capture, raw ts, from A?, packet)
    let mut events: Vec<(usize, u64, bool, MrObs)> = Vec::new();
    let t0 = 1_000_000_000u64;
    for i in 0..40u32 {
        let t = t0 + u64::from(i) * 1_000_000; // one DATA per ms
        let ev = 1 + (i % 2) as u16;
        let owd = if ev == 1 { 20_000 } else { 30_000 };
        let d = data(100 + i, ev, (i / 2 + 1) as u16, i);
        events.push((0, t, true, d));
        // DATA psn 120 (ev 1? no: i = 20 -> ev 1); lose i = 21 (ev 2).
        if i != 21 {
            events.push((1, t + owd + OFFSET, true, d));
        }
        // B acks 100 us after receiving; 20 us back to A.
        let k = ack(101 + i, i as u16 + 1, 1000 + i);
        events.push((1, t + owd + 100_000 + OFFSET, false, k));
        events.push((0, t + owd + 100_000 + 20_000, false, k));
    }
    events.sort_by_key(|e| e.1);
    let mut m = two_captures();
    for (n, (c, ts, from_a, mr)) in events.iter().enumerate() {
        let (src, dst) = if *from_a { (a, b) } else { (b, a) };
        let obs = common::metaroce_observation(n as u64 + 1, *ts, src, dst, *mr);
        m.ingest(*c, &obs);
    }
    let between = m.between();
    assert_eq!(between.len(), 1);
    let p = &between[0];
    assert_eq!((p.capture_a, p.capture_b), (0, 1));
    assert!(p.offset_estimated);
    // min(A->B) = 5.020 ms, max(B->A) = 4.980 ms.
    assert_eq!(p.clock_offset_ns, OFFSET as i64);
    // 39 DATA + 40 ACKs matched.
    assert_eq!(p.matched_packets, 79);
    let path = |src: IpAddr, ev: u16| p.paths.iter().find(|x| x.src == src && x.ev == ev).unwrap();
    let ev1 = path(a, 1);
    assert_eq!((ev1.upstream, ev1.downstream, ev1.matched), (0, 1, 20));
    assert_eq!(
        (ev1.one_way_delay_ns.min, ev1.one_way_delay_ns.max),
        (20_000, 20_000)
    );
    assert_eq!(ev1.lost_between, 0);
    let ev2 = path(a, 2);
    assert_eq!(ev2.matched, 19);
    assert_eq!(
        (ev2.one_way_delay_ns.min, ev2.one_way_delay_ns.max),
        (30_000, 30_000)
    );
    assert_eq!(ev2.lost_between, 1);
    let back = path(b, 7);
    assert_eq!((back.upstream, back.downstream, back.matched), (1, 0, 40));
    assert_eq!(back.one_way_delay_ns.max, 20_000);
    let reports = m.snapshots();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].capture.files, 2);
    assert_eq!(reports[0].between_captures.len(), 1);
    // Each capture's own engine saw its own packets only.
    assert_eq!(reports[0].capture.metaroce_packets, 80);
    assert_eq!(reports[1].capture.metaroce_packets, 79);
}

/// The same shape for RoCEv2 RC: A (QP 0x30) sends SEND ONLY requests to B
/// (QP 0x20) on UDP source port 0xD001, one per ms; capture 1 next to B
/// reads 5 ms ahead; requests take 20 us, ACKs 20 us back (from port
/// 0xD002). PSN 110 is lost between the capture points and retransmitted
/// 2 ms later (a go-back-N retransmission carries the same PSN and opcode):
/// the original counts as lost between the captures, the retransmission
/// matches with the true 20 us, not with the original's time.
#[test]
fn rocev2_flows_are_matched_between_captures() {
    use analyzer::engine::RoceObs;
    use proto_parse::rocev2::Opcode;
    let a: IpAddr = "10.4.0.1".parse().unwrap();
    let b: IpAddr = "10.4.0.2".parse().unwrap();
    let roce = |from_a: bool, opcode: Opcode, psn: u32| RoceObs {
        opcode,
        dest_qp: if from_a { 0x20 } else { 0x30 },
        psn,
        ack_req: true,
        fecn: false,
        becn: false,
        syndrome: (!from_a).then_some(0x1f),
        msn: 0,
        dma_len: None,
        payload_len: if from_a { 100 } else { 0 },
    };
    // (capture, raw ts, from A?, packet)
    let mut events: Vec<(usize, u64, bool, RoceObs)> = Vec::new();
    let t0 = 1_000_000_000u64;
    for i in 0..20u32 {
        let t = t0 + u64::from(i) * 1_000_000;
        let psn = 100 + i;
        let req = roce(true, Opcode::RcSendOnly, psn);
        events.push((0, t, true, req));
        let t_rx = if psn == 110 {
            // Lost; the retransmission leaves A 2 ms later.
            let retx = t + 2_000_000 + 500_000;
            events.push((0, retx, true, req));
            retx + 20_000
        } else {
            t + 20_000
        };
        events.push((1, t_rx + OFFSET, true, req));
        let ack = roce(false, Opcode::RcAcknowledge, psn);
        events.push((1, t_rx + 10_000 + OFFSET, false, ack));
        events.push((0, t_rx + 10_000 + 20_000, false, ack));
    }
    events.sort_by_key(|e| e.1);
    let mut m = two_captures();
    for (n, (c, ts, from_a, r)) in events.iter().enumerate() {
        let (src, dst, port) = if *from_a {
            (a, b, 0xD001)
        } else {
            (b, a, 0xD002)
        };
        let obs = Observation {
            frame: n as u64 + 1,
            ts_ns: *ts,
            src,
            dst,
            src_port: port,
            dst_port: 4791,
            ecn: 2,
            malformed: false,
            kind: ObsKind::RoceV2(*r),
        };
        m.ingest(*c, &obs);
    }
    m.finish(&[t0 + 30_000_000, t0 + 30_000_000 + OFFSET]);
    let between = m.between();
    assert_eq!(between.len(), 1);
    let p = &between[0];
    assert!(p.offset_estimated);
    // min(A->B) = 5.020 ms, max(B->A) = 4.980 ms.
    assert_eq!(p.clock_offset_ns, OFFSET as i64);
    // 20 requests (the retransmission of 110 in place of its original) and
    // 20 ACKs.
    assert_eq!(p.matched_packets, 40);
    assert_eq!(p.paths.len(), 2);
    let req = p.paths.iter().find(|x| x.src == a).unwrap();
    assert_eq!(req.proto, "rocev2");
    assert_eq!((req.dst_conn, req.ev), (0x20, 0xD001));
    assert_eq!((req.upstream, req.downstream, req.matched), (0, 1, 20));
    assert_eq!(
        (req.one_way_delay_ns.min, req.one_way_delay_ns.max),
        (20_000, 20_000)
    );
    assert_eq!(req.lost_between, 1);
    let back = p.paths.iter().find(|x| x.src == b).unwrap();
    assert_eq!((back.dst_conn, back.ev), (0x30, 0xD002));
    assert_eq!((back.upstream, back.downstream, back.matched), (1, 0, 20));
    assert_eq!(back.lost_between, 0);
}

/// Loss between the capture points at the end of the common window: a
/// transmission captured upstream and never downstream is lost when the
/// downstream capture ran on long enough after it for its copy to arrive,
/// judged from the one-way delays measured on that path (4 times the
/// largest: here 4 x 20 us = 80 us), not from a fixed margin. Those closer
/// to the downstream capture's end than that are "unknown", not delivered.
///
/// A (capture 0) sends one DATA every 100 us on ev 1 (20 us to B), B
/// (capture 1, clock 5 ms ahead) acks each 10 us after it arrives (20 us
/// back on ev 7). DATA 90, 93, 96 (sent 9.0, 9.3, 9.6 ms) and 99 (9.9 ms)
/// are lost between the capture points; capture 1 ends with the ACK of
/// DATA 98 (9.83 ms in A's clock); capture 0 runs on to DATA 104.
///
/// - lost: sent at most 9.83 - 0.08 = 9.75 ms: DATA 90, 93, 96;
/// - unknown: DATA 99 (9.9 ms) and DATA 100..=104 (after capture 1 ended).
#[test]
fn loss_at_the_end_of_the_common_window_uses_the_measured_delays() {
    end_of_the_common_window(false);
}

/// The same, merged with a third capture that saw none of A and B's traffic
/// (another pair of hosts): it is not downstream of A, so it neither
/// confirms nor hides a loss between A and B.
#[test]
fn a_capture_off_the_path_does_not_turn_losses_into_unknowns() {
    end_of_the_common_window(true);
}

fn end_of_the_common_window(bystander: bool) {
    let a: IpAddr = "10.5.0.1".parse().unwrap();
    let b: IpAddr = "10.5.0.2".parse().unwrap();
    let t0 = 1_000_000_000u64;
    // (capture, ts, src, dst, packet)
    let mut events: Vec<(usize, u64, IpAddr, IpAddr, MrObs)> = Vec::new();
    for i in 0..=104u32 {
        let t = t0 + u64::from(i) * 100_000;
        let d = data(1000 + i, 1, i as u16 + 1, i);
        events.push((0, t, a, b, d));
        let captured_at_b = i <= 98 && ![90, 93, 96].contains(&i);
        if captured_at_b {
            events.push((1, t + 20_000 + OFFSET, a, b, d));
            let k = ack(1001 + i, i as u16 + 1, 7000 + i);
            events.push((1, t + 30_000 + OFFSET, b, a, k));
            events.push((0, t + 50_000, b, a, k));
        }
    }
    let mut m = if bystander {
        let (c, d): (IpAddr, IpAddr) = ("10.5.0.3".parse().unwrap(), "10.5.0.4".parse().unwrap());
        for i in 0..=130u32 {
            let t = t0 - 1_000_000 + u64::from(i) * 100_000;
            events.push((2, t, c, d, data(5000 + i, 1, i as u16 + 1, i)));
        }
        MultiEngine::new(
            3,
            Config::default(),
            MergeConfig {
                window_ns: 20_000_000,
                ..MergeConfig::default()
            },
        )
    } else {
        two_captures()
    };
    events.sort_by_key(|e| e.1);
    for (n, (capture, ts, src, dst, mr)) in events.iter().enumerate() {
        let obs = Observation {
            frame: n as u64 + 1,
            ts_ns: *ts,
            src: *src,
            dst: *dst,
            src_port: 0xC000,
            dst_port: 4794,
            ecn: 2,
            malformed: false,
            kind: ObsKind::MetaRoce(*mr),
        };
        m.ingest(*capture, &obs);
    }
    let end_a = t0 + 104 * 100_000;
    let end_b = t0 + 98 * 100_000 + 30_000 + OFFSET;
    let end_c = t0 + 12 * 1_000_000;
    m.finish(&[end_a, end_b, end_c][..if bystander { 3 } else { 2 }]);
    let between = m.between();
    let p = &between[0];
    assert_eq!((p.capture_a, p.capture_b), (0, 1));
    assert_eq!(p.clock_offset_ns, OFFSET as i64);
    let ev1 = p.paths.iter().find(|x| x.src == a && x.ev == 1).unwrap();
    assert_eq!((ev1.upstream, ev1.downstream), (0, 1));
    assert_eq!(ev1.matched, 96);
    assert_eq!(ev1.one_way_delay_ns.max, 20_000);
    assert_eq!(ev1.end_margin_ns, 80_000);
    assert_eq!(ev1.lost_between, 3);
    assert_eq!(ev1.unknown, 6);
    let back = p.paths.iter().find(|x| x.src == b).unwrap();
    assert_eq!((back.matched, back.lost_between, back.unknown), (96, 0, 0));
    let json = serde_json::to_value(&m.snapshots()[0]).unwrap();
    let paths = json["between_captures"][0]["paths"].as_array().unwrap();
    let path = paths.iter().find(|x| x["src"] == "10.5.0.1").unwrap();
    assert_eq!((&path["ev"], &path["unknown"]), (&1.into(), &6.into()));
}
