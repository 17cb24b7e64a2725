//! Violating cases of the per-packet rules (`lint/packet.rs`).

use analyzer::lint::CapturePoint;
use proto_parse::build::{ECN_CE, ECN_NOT_ECT};
use proto_parse::metaroce::{Body, Flags, Op};

use super::cases::*;

fn case(rule: &'static str, what: &'static str, build: fn() -> Capture) -> Case {
    Case {
        rule,
        what,
        build,
        point: CapturePoint::Auto,
    }
}

fn data_mut(p: &mut Pkt) -> &mut proto_parse::metaroce::DataRepr {
    match &mut p.repr.body {
        Body::Data(d) => d,
        _ => panic!("not DATA"),
    }
}

pub fn cases() -> Vec<Case> {
    vec![
        case(
            "MR-PKT-001",
            "each rule of section 8 broken once (the generator's malformed.pcap)",
            || Capture {
                frames: read_fixture("malformed.pcap"),
                expect: malformed_frames(),
            },
        ),
        case("MR-PKT-002", "a DATA sent from UDP port 4794", || {
            edited(DATA_1, |p| at(p, DATA_1).src_port = Some(4794))
        }),
        case(
            "MR-PKT-003",
            "SOM on the second packet of a message",
            || edited(DATA_1, |p| at(p, DATA_1).repr.flags.insert(Flags::SOM)),
        ),
        case("MR-PKT-003", "no SOM on msg_offset 0", || {
            edited(DATA_0, |p| at(p, DATA_0).repr.flags.remove(Flags::SOM))
        }),
        case(
            "MR-PKT-004",
            "no EOM on the packet that ends the message",
            || edited(DATA_1, |p| at(p, DATA_1).repr.flags.remove(Flags::EOM)),
        ),
        case("MR-PKT-004", "EOM in the middle of a message", || {
            edited(DATA_0, |p| at(p, DATA_0).repr.flags.insert(Flags::EOM))
        }),
        case("MR-PKT-005", "payload beyond msg_len", || {
            edited(DATA_1, |p| data_mut(at(p, DATA_1)).msg_offset += 8)
        }),
        case(
            "MR-PKT-016",
            "the middle packet of a message starts 100 bytes late: a gap before it, an \
             overlap after it",
            || {
                let [d0, mut d1, d2] = message();
                data_mut(&mut d1).msg_offset += 100;
                whole(vec![d0, d1, d2], &[4, 5])
            },
        ),
        case(
            "MR-PKT-016",
            "an overlap, the later PSN captured first (reordered on its way to the receiver)",
            || {
                let [d0, d1, mut d2] = message();
                data_mut(&mut d2).msg_offset -= 8;
                whole(vec![d0, d2, d1], &[5])
            },
        ),
        case("MR-PKT-006", "a READ_REQ without EOM", || {
            edited(DATA_0, |p| {
                let pkt = at(p, DATA_0);
                pkt.repr.payload = &[];
                pkt.repr.flags = Flags::SOM;
                let d = data_mut(pkt);
                d.op = Op::ReadReq {
                    remote_va: 0x2000,
                    rkey: 7,
                };
                d.payload_len = 0;
                d.msg_offset = 0;
                d.msg_len = 4096;
            })
        }),
        case("MR-PKT-007", "no CRC after both ends asked for it", || {
            edited(DATA_1, |p| at(p, DATA_1).repr.crc = false)
        }),
        case("MR-PKT-008", "payload_len above the announced mtu", || {
            edited_many(&[DATA_0, DATA_1], |p| {
                if let Body::Ctrl(c) = &mut at(p, CONNECT).repr.body {
                    c.mtu = 256;
                }
            })
        }),
        case("MR-PKT-009", "a CLOSE with path_seq 3", || {
            edited(CLOSE, |p| {
                let close = at(p, CLOSE);
                close.auto_path_seq = false;
                close.repr.path_seq = 3;
            })
        }),
        case(
            "MR-PKT-010",
            "path_seq 0 on DATA after announcing path_seq",
            || {
                edited(DATA_1, |p| {
                    let d = at(p, DATA_1);
                    d.auto_path_seq = false;
                    d.repr.path_seq = 0;
                })
            },
        ),
        case(
            "MR-PKT-011",
            "an ACK whose sack_base is not its cumulative ack",
            || {
                edited(ACK_0, |p| {
                    if let Body::Ack(a) = &mut at(p, ACK_0).repr.body {
                        a.sack_base = A_INIT_PSN + 2;
                        a.sack = proto_parse::metaroce::SackBitmap::from_psns(
                            A_INIT_PSN + 2,
                            [A_INIT_PSN + 3],
                        );
                    }
                })
            },
        ),
        case("MR-PKT-012", "DATA sent Not-ECT", || {
            edited(DATA_0, |p| at(p, DATA_0).ecn = ECN_NOT_ECT)
        }),
        case(
            "MR-PKT-013",
            "a reserved flag bit set (CRC recomputed)",
            || {
                edited(ACK_0, |p| {
                    at(p, ACK_0).after_emit = Some(|packet| {
                        let flags = Flags::from_bits_retain(packet.flags().bits() | 0x01);
                        packet.set_flags(flags);
                        let len = packet.as_bytes().len();
                        let layout = packet.layout(len).expect("a valid packet");
                        packet.fill_crc(&layout);
                    })
                })
            },
        ),
        case(
            "MR-PKT-014",
            "tx_ts changed after the CRC was computed",
            || {
                edited(DATA_1, |p| {
                    at(p, DATA_1).after_emit = Some(|packet| {
                        let tx_ts = packet.tx_ts();
                        packet.set_tx_ts(tx_ts ^ 1);
                    })
                })
            },
        ),
        case(
            "MR-PKT-015",
            "an IPv6 DATA whose flow label is its ev plus bit 16",
            || {
                let mut pkts = conversation();
                at(&mut pkts, DATA_1).flow_label = Some(0x1_0001);
                Capture {
                    frames: render_ipv6(&pkts),
                    expect: vec![DATA_1],
                }
            },
        ),
    ]
}

/// The frames `malformed.expected.jsonl` says are malformed MetaRoCE.
fn malformed_frames() -> Vec<u64> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/generated/malformed.expected.jsonl");
    let text = std::fs::read_to_string(&path).expect("malformed.expected.jsonl");
    text.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON"))
        .filter(|v| v["proto"] == "metaroce" && !v["error"].is_null())
        .map(|v| v["frame"].as_u64().expect("a frame number"))
        .collect()
}

/// CE is what a switch sets: not a finding.
#[test]
fn ce_marked_packets_are_not_an_ecn_finding() {
    let mut pkts = conversation();
    at(&mut pkts, DATA_0).ecn = ECN_CE;
    let out = run(&render(&pkts), CapturePoint::Auto);
    assert!(out.findings.is_empty(), "{:?}", out.findings);
}

/// Over IPv6, the clean conversation (every flow label its packet's ev)
/// gives no finding; the flow label rule names the label and the ev.
#[test]
fn the_flow_label_rule_judges_ipv6_packets_against_their_ev() {
    let clean = run(&render_ipv6(&conversation()), CapturePoint::Auto);
    assert!(clean.findings.is_empty(), "{:?}", clean.findings);
    assert_eq!(clean.verdicts.len(), 8, "every frame analysed");

    let mut pkts = conversation();
    at(&mut pkts, DATA_0).flow_label = Some(0xABCDE);
    let finding = run(&render_ipv6(&pkts), CapturePoint::Auto)
        .findings
        .into_iter()
        .find(|f| f.rule().id == "MR-PKT-015")
        .expect("a flow label finding");
    assert_eq!(finding.frame, DATA_0);
    assert_eq!(
        finding.evidence(),
        "IPv6 flow label 0xabcde where the ev is 0 (0x0)."
    );
}
