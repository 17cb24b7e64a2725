//! Violating cases of the sender rules (`lint/sender.rs`), judged at a
//! capture on host A, which sends the DATA; and what the rules say about
//! clean captures.

use analyzer::lint::{CapturePoint, LintTimings, RuleId, Severity};
use proto_parse::metaroce::NackCode;

use super::cases::*;

fn case(rule: &'static str, what: &'static str, build: fn() -> Capture) -> Case {
    Case {
        rule,
        what,
        build,
        point: CapturePoint::Host(ip(A)),
    }
}

const P0: u32 = A_INIT_PSN;

pub fn cases() -> Vec<Case> {
    vec![
        case("MR-SND-001", "PSN 1001 skipped", || {
            let [d0, mut d2] = message();
            d2.repr.psn = P0 + 2;
            whole(
                vec![d0.clone(), ack(&d0, P0 + 1), d2.clone(), ack(&d2, P0 + 1)],
                &[5],
            )
        }),
        case("MR-SND-002", "a retransmission with tx_attempt 0", || {
            let [d0] = message();
            whole(vec![d0.clone(), again(&d0, 1, 0), ack(&d0, P0 + 1)], &[4])
        }),
        case(
            "MR-SND-002",
            "tx_attempt 2 on the first retransmission (every transmission captured)",
            || {
                let [d0] = message();
                whole(
                    vec![
                        d0.clone(),
                        again(&d0, 1, 2),
                        again(&d0, 2, 2),
                        ack(&d0, P0 + 1),
                    ],
                    &[4],
                )
            },
        ),
        case("MR-SND-003", "path_seq 3 after 1 on ev 0", || {
            let [d0, d1] = message();
            let d1 = d1.with_path_seq(0, 3);
            whole(vec![d0, d1.clone(), ack(&d1, P0 + 2)], &[4])
        }),
        case("MR-SND-003", "path_seq 1 twice on ev 0", || {
            let [d0, d1] = message();
            let d1 = d1.with_path_seq(0, 1);
            whole(vec![d0, d1.clone(), ack(&d1, P0 + 2)], &[4])
        }),
        case(
            "MR-SND-004",
            "PSN 1000 retransmitted after its cumulative ack",
            || {
                let [d0] = message();
                let r0 = again(&d0, 1, 1);
                whole(
                    vec![d0.clone(), ack(&d0, P0 + 1), r0.clone(), ack(&r0, P0 + 1)],
                    &[5],
                )
            },
        ),
        case(
            "MR-SND-005",
            "new DATA 3 ms after a NACK GAP, the PSN not retransmitted",
            || {
                let [d0, d1, d2] = message();
                let r0 = again(&d0, 2, 1);
                let nacked = nack(&d1, P0, NackCode::Gap, P0);
                whole(vec![d0, d1, nacked, d2, r0.clone(), ack(&r0, P0 + 3)], &[6])
                    .delayed_from(6, 3_000_000)
            },
        ),
        case(
            "MR-SND-006",
            "a second packet past a credit of one packet",
            || {
                let [d0, d1, d2] = message();
                let a0 = ack(&d0, P0 + 1).with_fb(|f| f.credit = PAYLOAD as u32);
                whole(vec![d0, a0, d1, d2.clone(), ack(&d2, P0 + 3)], &[6])
            },
        ),
        case(
            "MR-SND-007",
            "the DATA rate doubles after a CNP",
            rate_after_cnp::<5_000>,
        ),
    ]
}

/// A CNP in a stream of DATA every 10 us: after it, DATA every `GAP_NS`.
/// Frames: 3 DATA 1000, 4 its ACK (RTT 10 us), 5..=14 DATA 1001..1010,
/// 15 the CNP, then DATA 1011.. With a gap below 10 us the rate does not
/// fall: the finding is on the first DATA at least one RTT plus the 100 us
/// window after the CNP.
fn rate_after_cnp<const GAP_NS: u64>() -> Capture {
    const AFTER: u32 = 40;
    let total = 11 + AFTER;
    let data: Vec<Pkt> = (0..total)
        .map(|i| write(true, (i % 4) as u16, P0 + i, 1, i, total))
        .collect();
    let mut middle = vec![data[0].clone(), ack(&data[0], P0 + 1)];
    middle.extend(data[1..11].iter().cloned());
    // The CNP is frame 15 (index 14); it echoes DATA 1010 (index 13).
    middle.push(cnp(&data[10], 13, P0 + 1));
    middle.extend(data[11..].iter().cloned());
    let frames_pkts = with_handshake(middle);
    let mut frames = render(&frames_pkts);
    let cnp_ts = frames[14].ts_ns;
    for (k, f) in frames[15..15 + AFTER as usize].iter_mut().enumerate() {
        f.ts_ns = cnp_ts + (k as u64 + 1) * GAP_NS;
    }
    let close = frames[15 + AFTER as usize - 1].ts_ns;
    for (k, f) in frames[15 + AFTER as usize..].iter_mut().enumerate() {
        f.ts_ns = close + (k as u64 + 1) * 10_000;
    }
    // One RTT (10 us) after the CNP, a window of 100 us.
    let end = cnp_ts + 10_000 + 100_000;
    let expect = (16..)
        .zip(&frames[15..])
        .find(|(_, f)| f.ts_ns >= end)
        .map(|(n, _)| n)
        .into_iter()
        .take(usize::from(GAP_NS < 10_000))
        .collect();
    Capture { frames, expect }
}

/// A sender that slows down after the CNP is not reported.
#[test]
fn a_rate_reduced_after_a_cnp_is_not_a_finding() {
    let capture = rate_after_cnp::<20_000>();
    assert!(capture.expect.is_empty());
    let out = run(&capture.frames, CapturePoint::Host(ip(A)));
    let rule = RuleId::find("MR-SND-007").unwrap();
    assert!(
        !out.findings.iter().any(|f| f.rule == rule),
        "{:?}",
        out.findings
    );
}

/// MR-SND-004 names the ACK that covered the PSN, and MR-SND-005 the NACK.
#[test]
fn the_evidence_names_the_feedback() {
    let f = case_of(cases(), "MR-SND-004").first_finding();
    assert_eq!((f.frame, f.related_frame, f.observed), (5, Some(4), 1000));
    assert_eq!(
        f.evidence(),
        "retransmission of PSN 1000, which the feedback of frame 4 had already \
         acknowledged (cumulatively or by SACK)."
    );

    let f = case_of(cases(), "MR-SND-005").first_finding();
    assert_eq!((f.related_frame, f.expected), (Some(5), u64::from(P0)));
}

/// Sender rules are not judged at the receiver: the cases above, captured
/// on B, give no sender finding.
#[test]
fn sender_rules_are_not_judged_at_the_receiver() {
    for case in cases() {
        let capture = (case.build)();
        let out = run(&capture.frames, CapturePoint::Host(ip(B)));
        let found: Vec<_> = out
            .findings
            .iter()
            .filter(|f| f.rule().id.starts_with("MR-SND"))
            .map(|f| (f.rule().id, f.frame))
            .collect();
        assert!(found.is_empty(), "{}: {found:?}", case.what);
    }
}

/// The generator's sender-side capture: A retransmits PSN 1005 after B's
/// ACK of frame 22 acknowledged it (the scenario's spurious
/// retransmission), and nothing else breaks a sender rule.
#[test]
fn the_multipath_sender_capture_has_its_one_spurious_retransmission() {
    let frames = read_fixture("multipath_loss_sender.pcap");
    let out = run(&frames, CapturePoint::Auto);
    let found: Vec<_> = out
        .findings
        .iter()
        .filter(|f| out.report.keeps(f) && f.rule().id.starts_with("MR-SND"))
        .map(|f| (f.rule().id, f.rule().severity, f.observed))
        .collect();
    assert_eq!(found, [("MR-SND-004", Severity::Warning, 1005)]);
}

/// The frames where `rule` fires on `capture` (taken at A) with `timings`.
fn found_with(capture: &Capture, rule: &str, timings: LintTimings) -> Vec<u64> {
    run_with(&capture.frames, CapturePoint::Host(ip(A)), timings)
        .findings
        .iter()
        .filter(|f| f.rule().id == rule)
        .map(|f| f.frame)
        .collect()
}

/// MR-SND-005's bound is an option: the NACK left 3 ms unanswered (RTT
/// 10 us) is a finding with the default 8 RTTs and 2 ms, none with a
/// 5 ms floor or with 400 RTTs (4 ms).
#[test]
fn the_nack_bound_is_an_option() {
    let capture = (case_of(cases(), "MR-SND-005").build)();
    let t = LintTimings::default();
    assert_eq!((t.nack_rtts, t.nack_min_ns), (8, 2_000_000));
    assert_eq!(found_with(&capture, "MR-SND-005", t), capture.expect);
    let floor = LintTimings {
        nack_min_ns: 5_000_000,
        ..t
    };
    assert_eq!(found_with(&capture, "MR-SND-005", floor), Vec::<u64>::new());
    let rtts = LintTimings {
        nack_rtts: 400,
        ..t
    };
    assert_eq!(found_with(&capture, "MR-SND-005", rtts), Vec::<u64>::new());
}

/// MR-SND-007's window is an option: with a window of at least 300 us the
/// faster sending after the CNP (200 us of it) does not fill a window
/// before the capture ends, and is no finding.
#[test]
fn the_rate_window_is_an_option() {
    let capture = rate_after_cnp::<5_000>();
    let t = LintTimings::default();
    assert_eq!(
        (t.rate_window_rtts, t.rate_window_min_ns, t.reaction_min_ns),
        (4, 100_000, 10_000)
    );
    assert_eq!(found_with(&capture, "MR-SND-007", t), capture.expect);
    let longer = LintTimings {
        rate_window_min_ns: 300_000,
        ..t
    };
    assert_eq!(
        found_with(&capture, "MR-SND-007", longer),
        Vec::<u64>::new()
    );
}
