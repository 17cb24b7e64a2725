//! Violating cases of the receiver rules (`lint/receiver.rs`), judged at a
//! capture on host B, which receives A's DATA (MR-RCV-004: on A, where
//! every transmission is captured); and what the rules say about clean
//! captures.

use analyzer::lint::{CapturePoint, LintTimings, Severity};
use proto_parse::metaroce::{Body, FbFlags, FeedbackRepr, Flags, NackCode};

use super::cases::*;

fn at(host: [u8; 4], rule: &'static str, what: &'static str, build: fn() -> Capture) -> Case {
    Case {
        rule,
        what,
        build,
        point: CapturePoint::Host(ip(host)),
    }
}

fn case(rule: &'static str, what: &'static str, build: fn() -> Capture) -> Case {
    at(B, rule, what, build)
}

const P0: u32 = A_INIT_PSN;

pub fn cases() -> Vec<Case> {
    vec![
        case("MR-RCV-001", "cumulative ack 1001, then 1000", || {
            let [d0, d1] = message();
            whole(
                vec![d0.clone(), ack(&d0, P0 + 1), d1.clone(), ack(&d1, P0)],
                &[6],
            )
        }),
        case(
            "MR-RCV-002",
            "a SACK bit for the cumulative ack itself",
            || {
                let [d0, d1] = message();
                let a = ack(&d0, P0 + 1).with_sack(P0 + 1, &[P0 + 1]);
                whole(vec![d0, d1.clone(), a, ack(&d1, P0 + 2)], &[5])
            },
        ),
        case(
            "MR-RCV-003",
            "a SACK bit for PSN 1003, never sent",
            sack_never_sent,
        ),
        at(
            A,
            "MR-RCV-003",
            "at the sender: a SACK bit for PSN 1003, never sent",
            sack_never_sent,
        ),
        at(
            A,
            "MR-RCV-003",
            "at the sender, the connection's start not captured: a SACK bit beyond every PSN \
             sent",
            || {
                let [d0, d1] = message();
                let a = ack(&d0, P0 + 1).with_sack(P0 + 1, &[P0 + 3]);
                Capture {
                    frames: render(&[d0, a, d1.clone(), ack(&d1, P0 + 2)]),
                    expect: vec![2],
                }
            },
        ),
        at(
            A,
            "MR-RCV-004",
            "an ACK echoing ev 5, where the DATA went on ev 0",
            || one_echo(|f| f.echo_ev = 5),
        ),
        at(
            A,
            "MR-RCV-004",
            "an ACK echoing PSN 1007, never sent",
            || one_echo(|f| f.echo_psn = P0 + 7),
        ),
        at(
            A,
            "MR-RCV-004",
            "an ACK echoing PSN 999, below the first PSN sent",
            || one_echo(|f| f.echo_psn = P0 - 1),
        ),
        at(
            A,
            "MR-RCV-004",
            "an ACK echoing a PSN 2^31 + 5 beyond the first sent (behind it, serially)",
            || one_echo(|f| f.echo_psn = P0.wrapping_add(0x8000_0005)),
        ),
        at(
            A,
            "MR-RCV-004",
            "an ACK echoing PSN 1000 before any DATA was sent",
            || {
                let [d0] = message();
                whole(vec![ack(&d0, P0)], &[3])
            },
        ),
        at(
            A,
            "MR-RCV-004",
            "a CNP echoing PSN 1000, sent three times, with the CONNECT's tx_ts",
            || {
                let [d0] = message();
                let (r1, r2) = (again(&d0, 1, 1), again(&d0, 2, 2));
                let c = cnp(&d0, 0, P0);
                whole(vec![d0, r1, r2.clone(), c, ack(&r2, P0 + 1)], &[6])
            },
        ),
        case(
            "MR-RCV-004",
            "at the receiver: an ACK echoing PSN 999, below the first PSN arrived",
            || one_echo(|f| f.echo_psn = P0 - 1),
        ),
        at(
            A,
            "MR-RCV-004",
            "the second ACK echoing ev 5, where the DATA went on ev 1",
            second_echo_on_ev_5,
        ),
        at(
            A,
            "MR-RCV-004",
            "a PROBE_REPLY echoing probe 8, where probe 7 was sent",
            || {
                let probe = Pkt::new(true, header(true, 2, 7, Body::Probe));
                let mut reply = ack(&probe, P0);
                reply.repr.body = Body::ProbeReply(FeedbackRepr {
                    echo_psn: 8,
                    // The probe's tx_ts: it is frame 3 of the render.
                    echo_tx_ts: render_ts(2) as u32,
                    ..*fb_mut(&mut reply)
                });
                whole(vec![probe, reply], &[4])
            },
        ),
        case(
            "MR-RCV-004",
            "at the receiver: the second ACK echoing ev 5, where the DATA arrived on ev 1",
            second_echo_on_ev_5,
        ),
        case(
            "MR-RCV-004",
            "at the receiver: an ACK echoing ev 5, where the DATA arrived on ev 0",
            || one_echo(|f| f.echo_ev = 5),
        ),
        case("MR-RCV-005", "DUP on the first arrival", || {
            one_echo(|f| f.flags = FbFlags::DUP)
        }),
        case(
            "MR-RCV-006",
            "no DUP on the ACK of a PSN already acknowledged",
            || {
                let [d0] = message();
                let r0 = again(&d0, 1, 1);
                whole(
                    vec![d0.clone(), ack(&d0, P0 + 1), r0.clone(), ack(&r0, P0 + 1)],
                    &[6],
                )
            },
        ),
        at(
            A,
            "MR-RCV-007",
            "at the sender: ce_count 3, then 2, captured in the other order",
            || {
                let [d0, d1] = message();
                let a0 = ack(&d0, P0 + 1).with_fb(|f| f.ce_count = 3);
                let a1 = ack(&d1, P0 + 2).with_fb(|f| f.ce_count = 2);
                let mut capture = whole(vec![d0, d1, a0, a1], &[6]);
                swap_frames(&mut capture.frames, 5, 6);
                capture
            },
        ),
        at(
            A,
            "MR-RCV-007",
            "at the sender: ce_count 3, then 2",
            ce_count_back,
        ),
        case("MR-RCV-007", "ce_count 3, then 2", ce_count_back),
        case(
            "MR-RCV-008",
            "an AR packet not acknowledged 2 ms later",
            || {
                let [mut d0, d1] = message();
                d0.repr.flags.insert(Flags::AR);
                whole(vec![d0, d1.clone(), ack(&d1, P0 + 2)], &[4]).delayed_from(4, 2_000_000)
            },
        ),
        case(
            "MR-RCV-009",
            "a NACK GAP for PSN 1000 below its cumulative ack 1001",
            || {
                let [d0] = message();
                let stale = nack(&d0, P0 + 1, NackCode::Gap, P0);
                whole(vec![d0.clone(), stale, ack(&d0, P0 + 1)], &[4])
            },
        ),
        case(
            "MR-RCV-010",
            "a NACK GAP for PSN 1001 when 1000 is the highest received",
            || {
                let [d0, d1] = message();
                let no_hole = nack(&d0, P0 + 1, NackCode::Gap, P0 + 1);
                whole(
                    vec![
                        d0.clone(),
                        ack(&d0, P0 + 1),
                        no_hole,
                        d1.clone(),
                        ack(&d1, P0 + 2),
                    ],
                    &[5],
                )
            },
        ),
        case(
            "MR-RCV-011",
            "PSN 1001 arrives from its first transmission after a NACK GAP",
            || {
                let [d0, d1, d2] = message();
                let a2 = ack(&d2, P0 + 1).with_sack(P0 + 1, &[P0 + 2]);
                let early = nack(&d2, P0 + 1, NackCode::Gap, P0 + 1);
                whole(vec![d0, d2, a2, early, d1.clone(), ack(&d1, P0 + 3)], &[7])
            },
        ),
    ]
}

/// A's DATA 1000 (frame 3) and B's ACK of it changed by `edit` (frame 4).
fn one_echo(edit: impl FnOnce(&mut FeedbackRepr)) -> Capture {
    let [d0] = message();
    let a = ack(&d0, P0 + 1).with_fb(edit);
    whole(vec![d0, a], &[4])
}

/// A's DATA 1000 and 1001 (frames 3, 5), each ACKed, the second ACK
/// (frame 6) echoing ev 5 where 1001 went on ev 1.
fn second_echo_on_ev_5() -> Capture {
    let [d0, d1] = message();
    let a = ack(&d1, P0 + 2).with_fb(|f| f.echo_ev = 5);
    whole(vec![d0.clone(), ack(&d0, P0 + 1), d1, a], &[6])
}

/// B's first ACK (frame 4) SACKs PSN 1003, which A never sends.
fn sack_never_sent() -> Capture {
    let [d0, d1] = message();
    let a = ack(&d0, P0 + 1).with_sack(P0 + 1, &[P0 + 3]);
    whole(vec![d0, a, d1.clone(), ack(&d1, P0 + 2)], &[4])
}

/// B's ACKs carry ce_count 3, then 2 (frame 6).
fn ce_count_back() -> Capture {
    let [d0, d1] = message();
    let a0 = ack(&d0, P0 + 1).with_fb(|f| f.ce_count = 3);
    let a1 = ack(&d1, P0 + 2).with_fb(|f| f.ce_count = 2);
    whole(vec![d0, a0, d1, a1], &[6])
}

/// Swaps the packets of frames `a` and `b` (1-based), leaving the capture
/// times in place: the two were captured in the other order.
fn swap_frames(frames: &mut [Frame], a: u64, b: u64) {
    let (a, b) = (a as usize - 1, b as usize - 1);
    let bytes = std::mem::take(&mut frames[a].bytes);
    frames[a].bytes = std::mem::replace(&mut frames[b].bytes, bytes);
}

/// Spec 4 and 2 (MR-RCV-001, 007): feedback travelling on several paths
/// is captured reordered at the sender; ordered by its tx_ts (the
/// receiver's clock) the cumulative ack and ce_count still never go back,
/// so no capture point finds anything.
#[test]
fn feedback_reordered_on_its_way_is_judged_in_the_order_it_was_sent() {
    let [d0, d1] = message();
    let a0 = ack(&d0, P0 + 1).with_fb(|f| f.ce_count = 1);
    let a1 = ack(&d1, P0 + 2).with_fb(|f| f.ce_count = 2);
    let mut frames = render(&with_handshake(vec![d0, d1, a0, a1]));
    swap_frames(&mut frames, 5, 6);
    for point in [
        CapturePoint::Host(ip(A)),
        CapturePoint::Auto,
        CapturePoint::Unknown,
    ] {
        let out = run(&frames, point);
        let found: Vec<_> = out
            .findings
            .iter()
            .filter(|f| matches!(f.rule().id, "MR-RCV-001" | "MR-RCV-007"))
            .map(|f| (f.rule().id, f.frame))
            .collect();
        assert!(found.is_empty(), "{point:?}: {found:?}");
    }
}

/// Spec 2: tx_ts wraps every 4.3 s (32 bits of 1 ns); feedback across the
/// wrap is ordered in serial arithmetic: a ce_count that goes back across
/// it is found, one that grows is not.
#[test]
fn feedback_order_by_tx_ts_crosses_its_wrap() {
    let build = |ce: [u16; 2]| {
        let [d0, d1] = message();
        let mut a0 = ack(&d0, P0 + 1).with_fb(|f| f.ce_count = ce[0]);
        let mut a1 = ack(&d1, P0 + 2).with_fb(|f| f.ce_count = ce[1]);
        // B's clock: 16 ns before the wrap at frame 5, 10 us later (past
        // the wrap) at frame 6; captured in the other order.
        a0.after_emit = Some(|p| p.set_tx_ts(0xFFFF_FFF0));
        a1.after_emit = Some(|p| p.set_tx_ts(0xFFFF_FFF0u32.wrapping_add(10_000)));
        let mut frames = render(&with_handshake(vec![d0, d1, a0, a1]));
        swap_frames(&mut frames, 5, 6);
        frames
    };
    let rules = |out: &Outcome| -> Vec<(&'static str, u64)> {
        out.findings
            .iter()
            .filter(|f| matches!(f.rule().id, "MR-RCV-001" | "MR-RCV-007"))
            .map(|f| (f.rule().id, f.frame))
            .collect()
    };
    let out = run(&build([1, 2]), CapturePoint::Host(ip(A)));
    assert_eq!(rules(&out), []);
    let out = run(&build([2, 1]), CapturePoint::Host(ip(A)));
    assert_eq!(rules(&out), [("MR-RCV-007", 6)]);
}

/// Receiver rules judged at the receiver are not judged at the sender
/// (feedback reordered on its way, DATA lost after the capture).
#[test]
fn receiver_rules_are_judged_only_where_they_are_sound() {
    for case in cases() {
        let rule = analyzer::lint::RuleId::find(case.rule).unwrap().rule();
        let other = match rule.vantage {
            analyzer::lint::Vantage::Receiver => A,
            analyzer::lint::Vantage::Sender => B,
            _ => continue,
        };
        let capture = (case.build)();
        let out = run(&capture.frames, CapturePoint::Host(ip(other)));
        let found: Vec<_> = out
            .findings
            .iter()
            .filter(|f| f.rule().id == case.rule)
            .map(|f| f.frame)
            .collect();
        assert!(found.is_empty(), "{}: {found:?}", case.what);
    }
}

/// A finding about a feedback packet names the direction it acknowledges
/// (A's DATA), whose receiver side the rule is judged from.
#[test]
fn a_feedback_finding_is_about_the_acknowledged_direction() {
    let capture = (cases()[0].build)();
    let out = run(&capture.frames, CapturePoint::Auto);
    let f = out
        .findings
        .iter()
        .find(|f| f.rule().id == "MR-RCV-001")
        .expect("a finding");
    assert_eq!((f.conn.src(), f.conn.dst()), (ip(A), ip(B)));
    assert_eq!(f.related_frame, Some(4));
    assert_eq!(
        f.evidence(),
        "cumulative ack 1000 in the later sent (by tx_ts) of this feedback and that of frame 4, \
         1001 in the earlier."
    );
}

/// The receiver-side capture of the generator's scenario breaks no
/// receiver rule, and the sender-side one only where it is not judged.
#[test]
fn the_multipath_captures_break_no_receiver_rule() {
    for name in ["multipath_loss_receiver", "multipath_loss_sender"] {
        let frames = read_fixture(&format!("{name}.pcap"));
        let out = run(&frames, CapturePoint::Auto);
        let found: Vec<_> = out
            .findings
            .iter()
            .filter(|f| out.report.keeps(f) && f.rule().id.starts_with("MR-RCV"))
            .map(|f| (f.rule().id, f.frame, f.evidence()))
            .collect();
        assert!(found.is_empty(), "{name}: {found:?}");
    }
}

/// The other generated captures give no error-severity finding at any
/// capture point: the IP fragments scenario, a conversation, none at all;
/// the `all_types` catalogue (one packet of each kind, all on one
/// direction: not a conversation) none of the sender and receiver rules
/// (its CTRL packets are numbered like the rest and its CONNECT names a
/// peer: MR-PKT-009 and MR-CONN-001 find them, as `fixtures/README.md`
/// says).
#[test]
fn the_other_generated_captures_give_no_error_finding() {
    for (name, only_sender_and_receiver) in [
        ("all_types", true),
        ("ip_fragments", false),
        ("ip_fragments_unfragmented", false),
    ] {
        let frames = read_fixture(&format!("{name}.pcap"));
        for point in [CapturePoint::Auto, CapturePoint::Unknown] {
            let out = run(&frames, point);
            let errors: Vec<_> = out
                .findings
                .iter()
                .filter(|f| out.report.keeps(f) && f.rule().severity == Severity::Error)
                .filter(|f| {
                    !only_sender_and_receiver
                        || f.rule().id.starts_with("MR-SND")
                        || f.rule().id.starts_with("MR-RCV")
                })
                .map(|f| (f.rule().id, f.frame, f.evidence()))
                .collect();
            assert!(errors.is_empty(), "{name} {point:?}: {errors:?}");
        }
    }
}

/// MR-RCV-008 judges against the ack delay it is given: the AR packet
/// left unacknowledged 2 ms is a finding at the default 1 ms, none with a
/// 3 ms ack delay.
#[test]
fn the_ack_delay_is_an_option() {
    let case = case_of(cases(), "MR-RCV-008");
    let capture = (case.build)();
    let found = |ack_delay_ns| {
        let timings = LintTimings {
            ack_delay_ns,
            ..LintTimings::default()
        };
        run_with(&capture.frames, case.point, timings)
            .findings
            .iter()
            .filter(|f| f.rule().id == "MR-RCV-008")
            .map(|f| (f.frame, f.expected))
            .collect::<Vec<_>>()
    };
    assert_eq!(LintTimings::default().ack_delay_ns, 1_000_000);
    assert_eq!(found(1_000_000), [(capture.expect[0], 1_000)]);
    assert_eq!(found(1_500_000), [(capture.expect[0], 1_500)]);
    assert!(found(3_000_000).is_empty());
}

/// At the receiver the way may reorder a PSN's transmissions: PSN 1000
/// sent three times, the third captured before the second, and an ACK
/// echoing the third (the latest sent, not the latest captured) is no
/// MR-RCV-004 finding.
#[test]
fn an_echo_of_a_transmission_reordered_on_its_way_is_real() {
    let [d0] = message();
    let (r1, r2) = (again(&d0, 1, 1), again(&d0, 2, 2));
    let mut frames = render(&with_handshake(vec![d0, r1, r2.clone(), ack(&r2, P0 + 1)]));
    // Frames 4 and 5 (0-based 3, 4) swap their packets, not their times.
    let (second, third) = (frames[3].bytes.clone(), frames[4].bytes.clone());
    frames[3].bytes = third;
    frames[4].bytes = second;
    let found = run(&frames, CapturePoint::Host(ip(B))).found("MR-RCV-004");
    assert!(found.is_empty(), "{found:?}");
}

/// A's one-packet WRITEs of PSN 1000 to 1000 + `n` - 1 on evs 0 to 3, each
/// acknowledged by B, then one more ACK from B echoing PSN 1005 with
/// `echo_tx_ts` (0: the tx_ts it was sent with). Frames: 1 CONNECT, 2
/// ACCEPT, DATA `3 + 2i` and its ACK, the last ACK `3 + 2n`.
fn long_then_echo_of_1005(n: u32, echo_tx_ts: u32) -> Vec<Frame> {
    let mut middle = Vec::new();
    for i in 0..n {
        let d = write(true, (i % 4) as u16, P0 + i, i + 1, 0, 1);
        middle.push(ack(&d, P0 + i + 1));
        middle.insert(middle.len() - 1, d);
    }
    let last = middle[middle.len() - 2].clone();
    middle.push(ack(&last, P0 + n).with_fb(|f| {
        f.echo_psn = P0 + 5;
        f.echo_ev = 1;
        f.echo_tx_ts = echo_tx_ts;
    }));
    render(&with_handshake(middle))
}

/// Spec 4, 9 (MR-RCV-004): an echo names a transmission that was sent
/// (at the sender) or arrived (at the receiver), however old its PSN. PSN
/// 1005 (frame 13, on ev 1), echoed once 200 PSNs have been acknowledged
/// since (the engine's window has pruned it), with a tx_ts no transmission
/// carried: found at either end; with its own tx_ts: not. 1,100 PSNs on,
/// beyond the lint's record of the latest 1,024, the echo is not judged,
/// and counted as such in the report.
#[test]
fn an_echo_of_a_psn_pruned_from_the_window_is_judged_against_what_was_captured() {
    let sent_at = render_ts(12) as u32;
    let echo_findings = |frames: &[Frame], host| {
        let out = run(frames, CapturePoint::Host(ip(host)));
        (out.found("MR-RCV-004"), out.report.not_judged)
    };
    for host in [A, B] {
        let wrong = long_then_echo_of_1005(200, sent_at + 1);
        assert_eq!(echo_findings(&wrong, host), (vec![403], vec![]), "{host:?}");
        let right = long_then_echo_of_1005(200, sent_at);
        assert_eq!(echo_findings(&right, host), (vec![], vec![]), "{host:?}");
        let beyond = long_then_echo_of_1005(1_100, sent_at + 1);
        let not_judged = vec![analyzer::lint::NotJudged {
            rule: "MR-RCV-004",
            count: 1,
        }];
        assert_eq!(
            echo_findings(&beyond, host),
            (vec![], not_judged),
            "{host:?}"
        );
    }
}
