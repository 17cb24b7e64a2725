//! RoCEv2 RC flow counts on the real captures (fixtures/real, see
//! PROVENANCE.md there). The expected numbers were read off tshark 4.0.17:
//!
//! ```text
//! tshark -r F -d udp.port==69,infiniband -Y infiniband -T fields \
//!   -e frame.number -e ip.src -e ip.dst -e ip.dsfield.ecn \
//!   -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn \
//!   -e infiniband.aeth.syndrome -e infiniband.reth.dmalen
//! ```
//!
//! and written down here by hand.

use std::path::{Path, PathBuf};

use analyzer::engine::{Config, Engine, MsgView, Observation, Report};
use proto_parse::capture::Reader;
use proto_parse::frame::{self, DecodeConfig, LinkType};

fn capture(name: &str) -> PathBuf {
    let local = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/real")
        .join(name);
    if local.exists() {
        return local;
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/captures/real")
        .join(name)
}

fn analyse(name: &str) -> (Report, Vec<analyzer::engine::Verdict>) {
    let mut reader = Reader::open(capture(name)).expect("capture opens");
    let mut engine = Engine::new(Config::default());
    let cfg = DecodeConfig::default();
    let mut verdicts = Vec::new();
    let mut last = 0;
    while let Some(rec) = reader.next_record() {
        let rec = rec.expect("record");
        last = last.max(rec.ts_ns);
        let f = frame::decode(LinkType::from(u32::from(rec.linktype)), rec.data, &cfg);
        match Observation::from_frame(rec.index, rec.ts_ns, &f) {
            Some(obs) => verdicts.push(engine.ingest(&obs)),
            None => engine.ingest_other(rec.ts_ns),
        }
    }
    engine.finish(last);
    (engine.snapshot(), verdicts)
}

#[test]
fn oferby_send_with_immediate() {
    let (r, verdicts) = analyse("oferby_proxy_roce.pcap");
    assert_eq!(r.capture.frames, 123);
    assert_eq!(r.capture.rocev2_packets, 105);
    assert_eq!(r.capture.malformed, 0);
    assert_eq!(r.capture.metaroce_packets, 0);
    assert!(r.directions.is_empty());
    assert_eq!(r.rocev2.len(), 2);
    assert_eq!(r.engine.rocev2_unmatched_responses, 0);

    // 192.168.70.4 -> .6, QP 0x48: one Send Only with Immediate (frame 15),
    // acked by frame 16 (.6 -> .4 on QP 0x45).
    let small = &r.rocev2[0];
    assert_eq!(
        (small.src.to_string(), small.dst.to_string()),
        ("192.168.70.4".into(), "192.168.70.6".into())
    );
    assert_eq!(small.dest_qp, 0x48);
    assert_eq!(small.data_packets, 1);
    assert_eq!(small.acks, 1);
    assert_eq!(small.messages_completed, 1);
    assert_eq!(small.retransmissions, 0);

    // .6 -> .4, QP 0x45: 33 x (Send First + Send Last with Immediate), PSN
    // 0..65, then one Send Only with Immediate (PSN 66, frame 122); 36 ACKs
    // from .4 on QP 0x48 (syndromes 5 and 6).
    let big = &r.rocev2[1];
    assert_eq!(
        (big.src.to_string(), big.dst.to_string()),
        ("192.168.70.6".into(), "192.168.70.4".into())
    );
    assert_eq!(big.dest_qp, 0x45);
    assert_eq!(big.data_packets, 67);
    assert_eq!(big.acks, 36);
    assert_eq!(big.messages_completed, 34);
    assert_eq!(big.msg_completion_by_op_ns["send"].count, 34);
    assert_eq!(big.retransmissions, 0);
    assert_eq!((big.naks, big.rnr_naks, big.cnps), (0, 0, 0));
    // All frames are ECT(0), none CE.
    assert_eq!(big.ce_marked + small.ce_marked, 0);

    // 33 + 2 messages, 37 ACKs in all.
    assert_eq!(big.messages_completed + small.messages_completed, 35);
    assert_eq!(big.acks + small.acks, 37);
    // Frame 16 (ACK of frame 15): 21 us after it.
    let v16 = verdicts.iter().find(|v| v.frame == 16).unwrap();
    assert_eq!(v16.acked_frame, Some(15));
    assert_eq!(v16.ack_rtt_ns, Some(21_000));
    assert_eq!(
        v16.message.map(|m| (m.view, m.latency_ns)),
        Some((MsgView::Acked, 21_000))
    );
}

/// RDMA WRITE then READ on QP 0x11; the responder answers to QP `resp_qp`.
fn check_write_read(name: &str, frames: u64, resp_qp_note: &str) {
    let (r, verdicts) = analyse(name);
    assert_eq!(r.capture.frames, frames, "{resp_qp_note}");
    assert_eq!(r.capture.rocev2_packets, 12);
    // 5 RDMA CM MADs on UD QP 1.
    assert_eq!(r.engine.rocev2_not_rc, 5);
    assert_eq!(r.rocev2.len(), 1);
    let f = &r.rocev2[0];
    assert_eq!(f.dest_qp, 0x11);
    // RDMA Write Only (frame 4) + Read Request (frame 6).
    assert_eq!(f.data_packets, 2);
    assert_eq!(f.read_requests, 1);
    // Read Response First, Middle x2, Last (frames 7-10).
    assert_eq!(f.read_response_packets, 4);
    // One ACK (frame 5), syndrome 0x1f.
    assert_eq!(f.acks, 1);
    assert_eq!(
        (f.naks, f.rnr_naks, f.cnps, f.retransmissions),
        (0, 0, 0, 0)
    );
    assert_eq!(f.messages_completed, 2);
    assert_eq!(f.msg_completion_by_op_ns["write"].count, 1);
    assert_eq!(f.msg_completion_by_op_ns["read"].count, 1);
    let v5 = verdicts.iter().find(|v| v.frame == 5).unwrap();
    assert_eq!(v5.acked_frame, Some(4));
    let v10 = verdicts.iter().find(|v| v.frame == 10).unwrap();
    assert_eq!(v10.message.map(|m| m.view), Some(MsgView::Read));
}

#[test]
fn montybeatnik_write_read_same_qp_both_ways() {
    check_write_read(
        "montybeatnik_roce_capture_read-write-ecn.pcap",
        12,
        "responses to QP 0x11",
    );
    let (r, verdicts) = analyse("montybeatnik_roce_capture_read-write-ecn.pcap");
    // Write Only frame 4 at .558857, ACK frame 5 at .558877: 20 us.
    assert_eq!(
        verdicts.iter().find(|v| v.frame == 5).unwrap().ack_rtt_ns,
        Some(20_000)
    );
    // Read Request frame 6 at .559491, Read Response Last frame 10 at .559540.
    let read = r.rocev2[0].msg_completion_by_op_ns["read"];
    assert_eq!((read.min, read.max), (49_000, 49_000));
}

#[test]
fn montybeatnik_write_read_with_arp() {
    // 16 frames: 12 RoCEv2 + 4 ARP; responses go to QP 0x17.
    check_write_read("montybeatnik_test.pcap", 16, "responses to QP 0x17");
}

#[test]
fn infiniband_erf_capture_does_not_panic() {
    let (r, _) = analyse("srinivaskoritala_infiniband.pcap");
    assert_eq!(r.capture.frames, 43);
    assert_eq!(r.capture.rocev2_packets, 0);
}
