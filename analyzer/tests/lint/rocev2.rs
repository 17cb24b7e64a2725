//! Violating cases of the RoCEv2 RC rules (`lint/rocev2.rs`), clean RC
//! traffic (with loss recovered as the rules want it), and the public
//! RoCEv2 captures of `fixtures/real/`, whose findings are pinned.
//!
//! RoCEv2 frames are built with proto-parse's `rocev2::Repr::emit` and
//! `UdpFrameBuilder`: A (10.9.0.1, QP 0x11) is the requester, B (10.9.0.2,
//! QP 0x22) the responder. The ICRC is left zero: no rule reads it.

use std::net::SocketAddr;

use analyzer::lint::CapturePoint;
use proto_parse::build::{ECN_ECT0, UdpFrameBuilder};
use proto_parse::rocev2::{self, AtomicEthRepr, Opcode, aeth, bth, reth};

use super::cases::*;

/// Requests go to B's QP, responses and CNPs to A's.
const QP_A: u32 = 0x11;
const QP_B: u32 = 0x22;
const PMTU: usize = 1024;
/// AETH syndrome of an ACK without a credit count.
const ACK: u8 = 0x1f;
/// PSN sequence error NAK.
const NAK_SEQ: u8 = 0x60;

/// One packet of a scripted RC conversation.
#[derive(Clone, Copy)]
struct Rc {
    /// Capture time, us from the start.
    t_us: u64,
    from_a: bool,
    opcode: Opcode,
    psn: u32,
    ack_req: bool,
    /// AETH (syndrome, MSN) when the opcode carries one.
    aeth: Option<(u8, u32)>,
    dma_len: Option<u32>,
    payload: usize,
}

fn req(t_us: u64, opcode: Opcode, psn: u32, payload: usize) -> Rc {
    let ack_req = matches!(
        opcode,
        Opcode::RcSendLast
            | Opcode::RcSendOnly
            | Opcode::RcRdmaWriteLast
            | Opcode::RcRdmaWriteOnly
            | Opcode::RcRdmaReadRequest
    );
    let dma_len = match opcode {
        Opcode::RcRdmaWriteFirst | Opcode::RcRdmaWriteOnly => Some(payload as u32),
        _ => None,
    };
    Rc {
        t_us,
        from_a: true,
        opcode,
        psn,
        ack_req,
        aeth: None,
        dma_len,
        payload,
    }
}

/// A SEND of 64 bytes in one packet (AckReq set).
fn send(t_us: u64, psn: u32) -> Rc {
    req(t_us, Opcode::RcSendOnly, psn, 64)
}

/// A WRITE of three packets, PSNs 100 to 102 at 0, 1 and 2 us: two of a
/// PMTU, the last of 100 bytes.
fn write3() -> [Rc; 3] {
    [
        req(0, Opcode::RcRdmaWriteFirst, 100, PMTU),
        req(1, Opcode::RcRdmaWriteMiddle, 101, PMTU),
        req(2, Opcode::RcRdmaWriteLast, 102, 100),
    ]
}

fn read(t_us: u64, psn: u32, len: u32) -> Rc {
    Rc {
        dma_len: Some(len),
        ..req(t_us, Opcode::RcRdmaReadRequest, psn, 0)
    }
}

/// An RC Acknowledge (ACK or NAK, by `syndrome`) from B.
fn ack(t_us: u64, psn: u32, syndrome: u8, msn: u32) -> Rc {
    Rc {
        t_us,
        from_a: false,
        opcode: Opcode::RcAcknowledge,
        psn,
        ack_req: false,
        aeth: Some((syndrome, msn)),
        dma_len: None,
        payload: 0,
    }
}

fn read_response(t_us: u64, opcode: Opcode, psn: u32, msn: u32, payload: usize) -> Rc {
    let aeth = match opcode {
        Opcode::RcRdmaReadResponseMiddle => None,
        _ => Some((ACK, msn)),
    };
    Rc {
        aeth,
        payload,
        ..ack(t_us, psn, ACK, msn)
    }
    .with_opcode(opcode)
}

fn cnp(t_us: u64) -> Rc {
    Rc {
        aeth: None,
        ..ack(t_us, 0, ACK, 0)
    }
    .with_opcode(Opcode::Cnp)
}

impl Rc {
    fn with_opcode(self, opcode: Opcode) -> Rc {
        Rc { opcode, ..self }
    }

    /// The same packet captured at `t_us` (sent again).
    fn at(self, t_us: u64) -> Rc {
        Rc { t_us, ..self }
    }
}

const START_NS: u64 = 1_764_000_000_000_000_000;

fn render_rc(script: &[Rc]) -> Vec<Frame> {
    let (a, b) = (ip(A), ip(B));
    script
        .iter()
        .map(|p| {
            let repr = rocev2::Repr {
                bth: bth::Repr::new(
                    p.opcode,
                    if p.from_a { QP_B } else { QP_A },
                    p.psn & 0xFF_FFFF,
                )
                .with_pad_count(((4 - p.payload % 4) % 4) as u8)
                .with_ack_req(p.ack_req),
                deth: None,
                reth: p.dma_len.map(|dma_len| reth::Repr {
                    va: 0x10_0000,
                    r_key: 0x42,
                    dma_len,
                }),
                atomic_eth: matches!(p.opcode, Opcode::RcFetchAdd | Opcode::RcCompareSwap)
                    .then_some(AtomicEthRepr {
                        va: 0x10_0000,
                        r_key: 0x42,
                        swap_add: 1,
                        compare: 0,
                    }),
                aeth: p.aeth.map(|(syndrome, msn)| aeth::Repr { syndrome, msn }),
                atomic_ack_eth: (p.opcode == Opcode::RcAtomicAcknowledge).then_some(7),
                imm_dt: None,
                ieth: None,
                payload_len: p.payload.div_ceil(4) * 4,
            };
            assert!(repr.is_consistent(), "{:?}", p.opcode);
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut rocev2::Packet::new_unchecked(&mut bytes[..]));
            let (src, dst) = if p.from_a { (a, b) } else { (b, a) };
            let frame = UdpFrameBuilder::new(
                SocketAddr::new(src, 49152),
                SocketAddr::new(dst, rocev2::UDP_PORT),
            )
            .with_ecn(ECN_ECT0)
            .build(&bytes);
            Frame {
                ts_ns: START_NS + p.t_us * 1_000,
                bytes: frame,
            }
        })
        .collect()
}

/// Clean RC traffic starting at `psn`: a three-packet WRITE, a READ of two
/// PMTUs, a SEND, a two-packet SEND, a Fetch & Add, each acknowledged (MSN
/// 1 to 5), and two CNPs 60 us apart.
fn clean(psn: u32) -> Vec<Rc> {
    let p = |n: u32| (psn + n) & 0xFF_FFFF;
    vec![
        req(0, Opcode::RcRdmaWriteFirst, p(0), PMTU),
        req(1, Opcode::RcRdmaWriteMiddle, p(1), PMTU),
        req(2, Opcode::RcRdmaWriteLast, p(2), 500),
        ack(10, p(2), ACK, 1),
        read(20, p(3), 2 * PMTU as u32),
        read_response(30, Opcode::RcRdmaReadResponseFirst, p(3), 2, PMTU),
        read_response(31, Opcode::RcRdmaReadResponseLast, p(4), 2, PMTU),
        req(40, Opcode::RcSendOnly, p(5), 64),
        ack(50, p(5), ACK, 3),
        req(60, Opcode::RcSendFirst, p(6), PMTU),
        req(61, Opcode::RcSendLast, p(7), 100),
        ack(70, p(7), ACK, 4),
        req(71, Opcode::RcFetchAdd, p(8), 0),
        ack(75, p(8), ACK, 5).with_opcode(Opcode::RcAtomicAcknowledge),
        cnp(80),
        cnp(140),
    ]
}

/// The points a capture of A and B can be taken at (on A, on B, between).
fn points() -> [CapturePoint; 4] {
    [
        CapturePoint::Auto,
        CapturePoint::Host(ip(A)),
        CapturePoint::Host(ip(B)),
        CapturePoint::Unknown,
    ]
}

fn case(
    rule: &'static str,
    what: &'static str,
    point: CapturePoint,
    build: fn() -> Capture,
) -> Case {
    Case {
        rule,
        what,
        build,
        point,
    }
}

fn capture(script: &[Rc], expect: &[u64]) -> Capture {
    Capture {
        frames: render_rc(script),
        expect: expect.to_vec(),
    }
}

pub fn cases() -> Vec<Case> {
    let at_a = CapturePoint::Host(ip(A));
    let at_b = CapturePoint::Host(ip(B));
    let auto = CapturePoint::Auto;
    vec![
        case(
            "RC-REQ-001",
            "go-back-N restarts after the NAK's PSN",
            at_a,
            || {
                let [first, middle, last] = write3();
                let nak = ack(10, 101, NAK_SEQ, 0);
                capture(&[first, middle, last, nak, last.at(25)], &[5])
            },
        ),
        case(
            "RC-REQ-001",
            "a replay that passed the second NAK's PSN goes on after the requester could react",
            at_a,
            || capture(&replay_past_second_nak(true), &[15]),
        ),
        case(
            "RC-REQ-001",
            "go-back-N restarts before the NAK's PSN",
            at_a,
            || {
                let [first, middle, last] = write3();
                let nak = ack(10, 101, NAK_SEQ, 0);
                capture(&[first, middle, last, nak, first.at(25)], &[5])
            },
        ),
        case("RC-REQ-002", "a new PSN skipped", at_a, || {
            let [first, middle, last] = write3();
            capture(&[first, middle, Rc { psn: 103, ..last }], &[3])
        }),
        case(
            "RC-REQ-002",
            "after a READ of 2 PMTUs (1024 learned), a SEND one PSN too far",
            at_a,
            || {
                capture(
                    &[
                        req(0, Opcode::RcSendFirst, 0xFF_FFFE, PMTU),
                        req(1, Opcode::RcSendLast, 0xFF_FFFF, 10),
                        read(2, 0, 2 * PMTU as u32),
                        req(3, Opcode::RcSendOnly, 3, 10),
                    ],
                    &[4],
                )
            },
        ),
        case(
            "RC-REQ-003",
            "a retry 500 us after an RNR NAK asking for 1.28 ms",
            auto,
            || {
                let rnr_nak = ack(10, 100, 0x20 | 14, 0);
                capture(&[send(0, 100), rnr_nak, send(510, 100)], &[3])
            },
        ),
        case(
            "RC-RSP-001",
            "a duplicate SEND twice with no ACK in between",
            at_b,
            || {
                let s = send(0, 100);
                capture(&[s, ack(5, 100, ACK, 1), s.at(1000), s.at(2000)], &[4])
            },
        ),
        case(
            "RC-RSP-007",
            "an ACK covering a PSN that never arrived, after an out-of-sequence one",
            at_b,
            || {
                let [first, _, last] = write3();
                capture(&[first, last, ack(10, 102, ACK, 1)], &[3])
            },
        ),
        case(
            "RC-RSP-002",
            "the expected PSN retransmitted, no NAK sent for the sequence error",
            at_b,
            || {
                let [first, middle, last] = write3();
                capture(&[first, last, middle.at(1000)], &[3])
            },
        ),
        case(
            "RC-RSP-002",
            "a sequence error NAK naming another PSN",
            at_b,
            || {
                let [first, _, last] = write3();
                capture(&[first, last, ack(10, 102, NAK_SEQ, 0)], &[3])
            },
        ),
        case("RC-RSP-007", "an ACK of a PSN never sent", at_b, || {
            capture(&[send(0, 100), ack(5, 101, ACK, 1)], &[2])
        }),
        case(
            "RC-RSP-003",
            "the same sequence error NAKed twice",
            auto,
            || {
                let [first, middle, last] = write3();
                let nak = ack(10, 101, NAK_SEQ, 0);
                capture(&[first, middle, last, nak, nak.at(11)], &[5])
            },
        ),
        case(
            "RC-RSP-004",
            "the reserved syndrome kind 0b10",
            auto,
            || capture(&[send(0, 100), ack(5, 100, 0x41, 1)], &[2]),
        ),
        case("RC-RSP-004", "a reserved NAK code (7)", auto, || {
            capture(&[send(0, 100), ack(5, 100, 0x67, 0)], &[2])
        }),
        case("RC-RSP-004", "the reserved bit 7 set", auto, || {
            capture(&[send(0, 100), ack(5, 100, 0x9f, 1)], &[2])
        }),
        case(
            "RC-RSP-004",
            "a READ response with a NAK syndrome",
            auto,
            || {
                let mut response = read_response(5, Opcode::RcRdmaReadResponseOnly, 100, 1, 64);
                response.aeth = Some((NAK_SEQ | 1, 1));
                capture(&[read(0, 100, 64), response], &[2])
            },
        ),
        case("RC-RSP-005", "MSN 2, then MSN 1", auto, || {
            capture(
                &[
                    send(0, 100),
                    send(1, 101),
                    ack(5, 101, ACK, 2),
                    ack(6, 101, ACK, 1),
                ],
                &[4],
            )
        }),
        case(
            "RC-RSP-005",
            "MSN 0x000001 after 0xFFFFFF is progress, 0xFFFFFE after it is not",
            auto,
            || {
                capture(
                    &[
                        send(0, 100),
                        ack(5, 100, ACK, 0xFF_FFFF),
                        send(6, 101),
                        send(7, 102),
                        ack(8, 102, ACK, 1),
                        ack(9, 102, ACK, 0xFF_FFFE),
                    ],
                    &[6],
                )
            },
        ),
        case("RC-RSP-006", "MSN up by 3 after two messages", auto, || {
            capture(
                &[
                    send(0, 100),
                    ack(5, 100, ACK, 5),
                    send(6, 101),
                    ack(10, 101, ACK, 8),
                ],
                &[4],
            )
        }),
        case("RC-CNP-001", "two CNPs 20 us apart", auto, || {
            capture(&[send(0, 100), cnp(10), cnp(30), cnp(90)], &[3])
        }),
    ]
}

/// SENDs 100 to 105 at 0 to 5 us; 101 lost: B NAKs it at 10 us and A
/// replays from 101, one PSN every 10 us; the replayed 103 lost: B NAKs
/// 103 (frame 12), captured at 41 us, the instant A sends 105 (frame 13,
/// sent before A could react). Conformant, A then goes back to 103 at 55
/// us; `broken`, it sends the new 106, then 104 again, a retransmission
/// past the NAK's PSN (frame 15).
fn replay_past_second_nak(broken: bool) -> Vec<Rc> {
    let mut script: Vec<Rc> = (0..6).map(|i| send(i, 100 + i as u32)).collect();
    script.push(ack(10, 101, NAK_SEQ, 0));
    script.extend((0..3).map(|i| send(11 + 10 * i, 101 + i as u32)));
    // 104 at 41 us, then the second NAK, then 105 in the same microsecond.
    script.push(send(41, 104));
    script.push(ack(41, 103, NAK_SEQ, 1));
    script.push(send(41, 105));
    if broken {
        script.push(send(55, 106));
        script.push(send(56, 104));
    } else {
        script.extend((0..3).map(|i| send(55 + i, 103 + i as u32)));
    }
    script
}

/// IBTA 9.7 (go-back-N), RC-REQ-001: a requester reacts to a sequence
/// error NAK with the first request it sends once it can (the lint's
/// reaction time after the NAK was captured). A requester mid-replay when
/// a second NAK arrives, whose next packet (sent before it could react)
/// continues the replay, and which then goes back to the NAK's PSN, is
/// conformant.
#[test]
fn a_requester_mid_replay_when_a_second_nak_arrives_is_conformant() {
    let frames = render_rc(&replay_past_second_nak(false));
    for point in [CapturePoint::Host(ip(A)), CapturePoint::Auto] {
        let out = run(&frames, point);
        let found: Vec<_> = out
            .findings
            .iter()
            .filter(|f| out.report.keeps(f))
            .map(|f| (f.rule().id, f.frame, f.evidence()))
            .collect();
        assert!(found.is_empty(), "{point:?}: {found:?}");
    }
}

/// A replay that began before the NAK (a timeout) and has yet to reach
/// the NAK's PSN goes back far enough: continuing it is conformant, and
/// so is a request sent before the requester could react; jumping past
/// the NAK's PSN once it could is not.
#[test]
fn a_replay_begun_before_the_nak_that_covers_its_psn_is_go_back_n() {
    // 100 to 104 sent; no answer: A times out and replays from 101 at
    // 100 us, one PSN every 10 us. B's NAK of 103 (the originals 101 and
    // 102 arrived, 103 lost) reaches A at 105 us, when the replay is at
    // 101: it goes on with 102 at 115 us and reaches 103 at 125 us.
    let mut script: Vec<Rc> = (0..5).map(|i| send(i, 100 + i as u32)).collect();
    script.push(send(100, 101));
    script.push(ack(105, 103, NAK_SEQ, 2));
    script.extend((0..3).map(|i| send(115 + 10 * i, 102 + i as u32)));
    let out = run(&render_rc(&script), CapturePoint::Host(ip(A)));
    let found: Vec<_> = out
        .findings
        .iter()
        .map(|f| (f.rule().id, f.frame))
        .collect();
    assert!(found.is_empty(), "{found:?}");
    // A replay from 104, past the NAK's PSN, once A could react.
    script.truncate(7);
    script.push(send(115, 104));
    let out = run(&render_rc(&script), CapturePoint::Host(ip(A)));
    let found: Vec<_> = out
        .findings
        .iter()
        .map(|f| (f.rule().id, f.frame))
        .collect();
    assert_eq!(found, [("RC-REQ-001", 8)]);
}

/// IBTA 9.7 (RNR NAK timer), RC-REQ-003: a request sent before the
/// requester could react to the RNR NAK (a retransmission already on its
/// way) is no retry; the retry after it is judged.
#[test]
fn a_request_sent_before_the_requester_could_react_to_an_rnr_nak_is_no_retry() {
    // RNR NAK of 100 asking for 1.28 ms at 10 us; a timeout retransmission
    // of 100 leaves at 11 us; the retry at 1.4 ms waited long enough.
    let rnr_nak = ack(10, 100, 0x20 | 14, 0);
    let found = |retry_us: u64| {
        let frames = render_rc(&[send(0, 100), rnr_nak, send(11, 100), send(retry_us, 100)]);
        let out = run(&frames, CapturePoint::Auto);
        out.findings
            .iter()
            .filter(|f| f.rule().id == "RC-REQ-003")
            .map(|f| f.frame)
            .collect::<Vec<_>>()
    };
    assert_eq!(found(1400), Vec::<u64>::new());
    // A retry at 500 us is still too early.
    assert_eq!(found(500), [4]);
}

/// Clean traffic, across the 24-bit wrap, gives no finding at any point.
#[test]
fn clean_rc_traffic_gives_no_finding() {
    for start in [100, 0xFF_FFFD] {
        let frames = render_rc(&clean(start));
        for point in points() {
            let out = run(&frames, point);
            let found: Vec<_> = out
                .findings
                .iter()
                .filter(|f| out.report.keeps(f))
                .map(|f| (f.rule().id, f.frame, f.evidence()))
                .collect();
            assert!(found.is_empty(), "start {start:#x}, {point:?}: {found:?}");
            assert_eq!(out.full.rocev2.len(), 1, "one request flow");
            assert_eq!(
                out.full.rocev2[0].messages_completed, 5,
                "every message done"
            );
        }
    }
}

/// Loss recovered as the rules want it gives no finding: a sequence error
/// NAKed once and go-back-N from its PSN, a duplicate ACKed again, an RNR
/// NAK waited out.
#[test]
fn recovery_by_the_rules_gives_no_finding() {
    let mut script = vec![
        // 101 lost before B: B NAKs 101 once, A goes back to 101.
        req(0, Opcode::RcRdmaWriteFirst, 100, PMTU),
        req(2, Opcode::RcRdmaWriteLast, 102, 100),
        ack(10, 101, NAK_SEQ, 0),
        req(11, Opcode::RcRdmaWriteMiddle, 101, PMTU),
        req(12, Opcode::RcRdmaWriteLast, 102, 100),
        ack(20, 102, ACK, 1),
        // The ACK lost before A: A times out, B ACKs the duplicate again.
        req(1000, Opcode::RcRdmaWriteLast, 102, 100),
        ack(1005, 102, ACK, 1),
        // RNR: A retries after the 0.64 ms the NAK asked for.
        req(1100, Opcode::RcSendOnly, 103, 64),
        ack(1110, 103, 0x20 | 12, 1),
        req(1760, Opcode::RcSendOnly, 103, 64),
        ack(1770, 103, ACK, 2),
        // A READ whose responses are lost: B answers its duplicate again.
        read(1800, 104, 64),
        read_response(1810, Opcode::RcRdmaReadResponseOnly, 104, 3, 64),
        read(3000, 104, 64),
        read_response(3010, Opcode::RcRdmaReadResponseOnly, 104, 3, 64),
        req(3020, Opcode::RcSendOnly, 105, 64),
        ack(3030, 105, ACK, 4),
    ];
    // B's capture (and a point between them after the loss) lacks the
    // first 101; A's has it.
    let at_b = render_rc(&script);
    script.insert(1, req(1, Opcode::RcRdmaWriteMiddle, 101, PMTU));
    let at_a = render_rc(&script);
    for (point, frames) in [
        (CapturePoint::Host(ip(A)), &at_a),
        (CapturePoint::Host(ip(B)), &at_b),
        (CapturePoint::Auto, &at_a),
        (CapturePoint::Auto, &at_b),
        (CapturePoint::Unknown, &at_b),
    ] {
        let out = run(frames, point);
        let found: Vec<_> = out
            .findings
            .iter()
            .filter(|f| out.report.keeps(f))
            .map(|f| (f.rule().id, f.frame, f.evidence()))
            .collect();
        assert!(found.is_empty(), "{point:?}: {found:?}");
    }
}

/// Findings on a response are about its request flow: a receiver-side
/// rule found on B's ACK is kept at B's capture, named A -> B.
#[test]
fn a_responder_finding_names_the_request_flow() {
    let [first, _, last] = write3();
    let frames = render_rc(&[first, last, ack(10, 102, ACK, 1)]);
    let out = run(&frames, CapturePoint::Host(ip(B)));
    let f = out.findings.first().expect("RC-RSP-007 on the ACK");
    assert_eq!((f.rule().id, f.frame), ("RC-RSP-007", 3));
    assert_eq!(f.conn.to_string(), "10.9.0.1 -> 10.9.0.2 qp 34");
    assert!(out.report.keeps(f));
    let counted: Vec<_> = out
        .report
        .counts
        .iter()
        .map(|c| (c.rule, c.count))
        .collect();
    assert_eq!(counted, [("RC-RSP-007", 1)]);
    // At A the rule is not judged (A cannot tell a loss before B); there,
    // the capture says A skipped PSN 101.
    let out = run(&frames, CapturePoint::Host(ip(A)));
    let counted: Vec<_> = out
        .report
        .counts
        .iter()
        .map(|c| (c.rule, c.count))
        .collect();
    assert_eq!(counted, [("RC-REQ-002", 1)]);
}

/// The CNP interval comes from the engine's Config: 0 switches it off.
#[test]
fn the_cnp_interval_is_configurable() {
    let frames = render_rc(&[req(0, Opcode::RcSendOnly, 100, 64), cnp(10), cnp(30)]);
    let count = |interval: u64| {
        let mut engine = analyzer::engine::Engine::new(analyzer::engine::Config {
            lint: Some(analyzer::lint::LintOptions {
                cnp_interval_ns: interval,
                ..Default::default()
            }),
            ..analyzer::engine::Config::default()
        });
        let decode = proto_parse::frame::DecodeConfig::default();
        let mut n = 0;
        for (i, f) in frames.iter().enumerate() {
            let obs = analyzer::engine::Observation::decode(
                i as u64 + 1,
                f.ts_ns,
                proto_parse::frame::LinkType::Ethernet,
                &f.bytes,
                &decode,
            )
            .expect("RoCEv2");
            engine.ingest(&obs);
            n += engine.findings().len();
            engine.clear_findings();
        }
        n
    };
    assert_eq!(count(50_000), 1);
    assert_eq!(count(10_000), 0);
    assert_eq!(count(0), 0);
}

/// A capture of `fixtures/real` (Ethernet).
fn read_real(name: &str) -> Vec<Frame> {
    read_fixture(&format!("../real/{name}"))
}

/// The real captures' findings, pinned (rule, frame) per capture point:
/// `fixtures/README.md` explains them (none: each capture keeps every RC
/// rule). The lint saw the traffic: every response found its request flow.
#[test]
fn the_real_captures_findings_are_pinned() {
    type Pinned = &'static [(&'static str, u64)];
    let captures: [(&str, [&str; 2], usize, Pinned); 3] = [
        (
            "montybeatnik_roce_capture_read-write-ecn.pcap",
            ["192.168.65.5", "192.168.65.4"],
            1,
            &[],
        ),
        (
            "montybeatnik_test.pcap",
            ["192.168.2.25", "192.168.2.24"],
            1,
            &[],
        ),
        (
            "oferby_proxy_roce.pcap",
            ["192.168.70.4", "192.168.70.6"],
            2,
            &[],
        ),
    ];
    for (name, hosts, flows, pinned) in captures {
        let frames = read_real(name);
        let mut points = vec![CapturePoint::Auto, CapturePoint::Unknown];
        points.extend(hosts.map(|h| CapturePoint::Host(h.parse().unwrap())));
        for point in points {
            let out = run(&frames, point);
            let found: Vec<(&str, u64)> = out
                .findings
                .iter()
                .filter(|f| out.report.keeps(f))
                .map(|f| (f.rule().id, f.frame))
                .collect();
            assert_eq!(found, pinned, "{name} at {point:?}");
            assert_eq!(out.full.rocev2.len(), flows, "{name}: RC flows");
            assert_eq!(out.full.engine.rocev2_unmatched_responses, 0, "{name}");
        }
    }
}

/// The lint finds a request removed from a real capture: oferby's SEND
/// LAST with PSN 1 (frame 18) taken out, the frames after it move up one.
/// On the requester's host (.6) the capture says it skipped PSN 1; on the
/// responder's (.4) the ACK of PSN 1 (now frame 19) acknowledges what never
/// arrived; at both, its MSN 1 counts a message no capture holds.
#[test]
fn a_request_removed_from_a_real_capture_is_found() {
    let mut frames = read_real("oferby_proxy_roce.pcap");
    frames.remove(17);
    let want: [(&str, &[(&str, u64)]); 2] = [
        ("192.168.70.6", &[("RC-RSP-006", 19), ("RC-REQ-002", 20)]),
        ("192.168.70.4", &[("RC-RSP-006", 19), ("RC-RSP-007", 19)]),
    ];
    for (host, want) in want {
        let out = run(&frames, CapturePoint::Host(host.parse().unwrap()));
        let found: Vec<(&str, u64)> = out
            .findings
            .iter()
            .filter(|f| out.report.keeps(f))
            .map(|f| (f.rule().id, f.frame))
            .collect();
        assert_eq!(found, want, "at {host}");
    }
}

/// Each RoCEv2 flow's report counts the findings about it, per rule, and
/// the flows' counts add up to the capture's.
#[test]
fn flow_reports_count_their_findings() {
    let frames = render_rc(&[
        req(0, Opcode::RcSendOnly, 100, 64),
        cnp(10),
        cnp(30),
        cnp(40),
        ack(50, 100, ACK, 1),
    ]);
    for point in points() {
        let out = run(&frames, point);
        // The CNPs are about the flow of the requests they slow down.
        let linted: Vec<_> = out
            .full
            .rocev2
            .iter()
            .filter(|f| !f.lint.is_empty())
            .map(|f| (f.src, f.dest_qp, f.lint.clone()))
            .collect();
        let want = std::collections::BTreeMap::from([("RC-CNP-001", 2)]);
        assert_eq!(linted, [(ip(A), QP_B, want)], "{point:?}");
        let mut summed = std::collections::BTreeMap::new();
        for flow in &out.full.rocev2 {
            for (rule, n) in &flow.lint {
                *summed.entry(*rule).or_insert(0) += n;
            }
        }
        let counts: std::collections::BTreeMap<_, _> = out
            .report
            .counts
            .iter()
            .map(|c| (c.rule, c.count))
            .collect();
        assert_eq!(summed, counts, "{point:?}");
    }
}
