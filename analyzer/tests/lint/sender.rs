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
            "MR-SND-003",
            "path_seq 0 after 65535 on ev 0 (the wrap skips 0)",
            || {
                let [d0, d1, d2] = message();
                let d0 = d0.with_path_seq(0, u16::MAX);
                let d1 = d1.with_path_seq(0, 0);
                let d2 = d2.with_path_seq(0, 1);
                whole(vec![d0, d1, d2.clone(), ack(&d2, P0 + 3)], &[4])
            },
        ),
        case(
            "MR-SND-003",
            "B's ACKs step back from path_seq 2 to 1 on ev 0 (seen at A, where they arrive)",
            || {
                let [d0, d1, d2] = message();
                let a0 = ack(&d0, P0 + 1).with_path_seq(0, 1);
                let a1 = ack(&d1, P0 + 2).with_path_seq(0, 2);
                let a2 = ack(&d2, P0 + 3).with_path_seq(0, 1);
                whole(vec![d0, a0, d1, a1, d2, a2], &[8])
            },
        ),
        case(
            "MR-SND-003",
            "path_seq 1 after 3 on ev 0, then counting on from 1 (one finding)",
            || {
                let [d0, d1, d2, d3, d4] = message();
                let seqs = [1, 2, 3, 1, 2];
                let mut data: Vec<Pkt> = [d0, d1, d2, d3, d4]
                    .into_iter()
                    .zip(seqs)
                    .map(|(d, seq)| d.with_path_seq(0, seq))
                    .collect();
                let last = data[4].clone();
                data.push(ack(&last, P0 + 5));
                whole(data, &[6])
            },
        ),
        Case {
            point: CapturePoint::Host(ip(B)),
            ..case(
                "MR-SND-003",
                "at the receiver: path_seq 1 twice on ev 0, the second sent later",
                step_back,
            )
        },
        Case {
            point: CapturePoint::Unknown,
            ..case(
                "MR-SND-003",
                "capture point unknown: path_seq 1 twice on ev 0, the second sent later",
                step_back,
            )
        },
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

/// A's path_seq steps back on ev 0: 1, 2, then 1 again on a packet sent
/// (tx_ts) after the 2, which no reordering on the way explains.
fn step_back() -> Capture {
    let [d0, d1, d2] = message();
    let d0 = d0.with_path_seq(0, 1);
    let d1 = d1.with_path_seq(0, 2);
    let d2 = d2.with_path_seq(0, 1);
    whole(vec![d0, d1, d2.clone(), ack(&d2, P0 + 3)], &[5])
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
/// on B, give no sender finding but MR-SND-003's on what no loss or
/// reordering explains (a step back in the order sent, a 0 on a numbered
/// path).
#[test]
fn sender_rules_are_not_judged_at_the_receiver() {
    for case in cases() {
        let capture = (case.build)();
        let out = run(&capture.frames, CapturePoint::Host(ip(B)));
        let found: Vec<_> = out
            .findings
            .iter()
            .filter(|f| f.rule().id.starts_with("MR-SND") && f.rule().id != "MR-SND-003")
            .map(|f| (f.rule().id, f.frame))
            .collect();
        assert!(found.is_empty(), "{}: {found:?}", case.what);
    }
}

/// The path_seq frames MR-SND-003 finds in `frames` captured at `host`.
fn path_seq_found(frames: &[Frame], point: CapturePoint) -> Vec<u64> {
    run(frames, point).found("MR-SND-003")
}

/// A skipped path_seq is a loss anywhere but at the sender: at B (or at a
/// point unknown) it is no finding, at A it is.
#[test]
fn a_path_seq_gap_is_judged_at_the_sender_only() {
    let [d0, d1] = message();
    let d1 = d1.with_path_seq(0, 3);
    let capture = whole(vec![d0, d1.clone(), ack(&d1, P0 + 2)], &[4]);
    assert_eq!(
        path_seq_found(&capture.frames, CapturePoint::Host(ip(A))),
        [4]
    );
    assert!(path_seq_found(&capture.frames, CapturePoint::Host(ip(B))).is_empty());
    assert!(path_seq_found(&capture.frames, CapturePoint::Unknown).is_empty());
}

/// With the capture point guessed, a step back in the order sent is found
/// and kept whatever host is decided (here none: both ends' clocks read
/// alike).
#[test]
fn with_the_capture_point_guessed_a_step_back_is_kept() {
    let capture = step_back();
    let out = run(&capture.frames, CapturePoint::Auto);
    assert_eq!(out.report.host, None);
    assert_eq!(out.kept("MR-SND-003"), capture.expect);
}

/// Spec 2, 11.5: path_seq grows by one per packet as the sender sends it,
/// so at the sender's capture a skipped value is the sender's fault,
/// whether the capture point is given or guessed (`--vantage auto`); at
/// the receiver's it is a loss, and no finding. Frames: 3 DATA on ev 0
/// with path_seq 1, 4 DATA with path_seq 3, 5 its ACK.
#[test]
fn with_the_capture_point_guessed_a_gap_holds_where_the_sender_is_decided() {
    let [d0, d1] = message();
    let d0 = d0.with_path_seq(0, 1);
    let d1 = d1.with_path_seq(0, 3);
    let pkts = with_handshake(vec![d0, d1.clone(), ack(&d1, P0 + 2)]);
    for (on_a, host, expect) in [(true, A, vec![4]), (false, B, vec![])] {
        let out = run(&render_on(&pkts, on_a), CapturePoint::Auto);
        assert_eq!(out.report.host, Some(ip(host)));
        assert_eq!(out.kept("MR-SND-003"), expect, "captured on {host:?}");
        let counted = out
            .report
            .counts
            .iter()
            .find(|c| c.rule == "MR-SND-003")
            .map_or(0, |c| c.count);
        assert_eq!(counted, expect.len() as u64, "captured on {host:?}");
        let a_to_b = out
            .full
            .directions
            .iter()
            .find(|d| d.src == ip(A) && d.dst_conn == B_CONN)
            .expect("A's direction");
        let in_direction = a_to_b.lint.get("MR-SND-003").copied().unwrap_or(0);
        assert_eq!(in_direction, expect.len() as u64, "captured on {host:?}");
    }
}

/// Packets of one path reordered on their way (path_seq 2 captured before
/// 1, each with the tx_ts it left with) are no MR-SND-003 at the receiver
/// or in the middle: the earlier sent carries the lower value.
#[test]
fn a_path_reordered_on_its_way_is_no_step_back() {
    let [d0, d1, d2] = message();
    let d0 = d0.with_path_seq(0, 1);
    let d1 = d1.with_path_seq(0, 2);
    let d2 = d2.with_path_seq(0, 3);
    let mut frames = render(&with_handshake(vec![d0, d1, d2.clone(), ack(&d2, P0 + 3)]));
    // Frames 3 and 4 (0-based 2, 3) swap their packets, not their times.
    let (first, second) = (frames[2].bytes.clone(), frames[3].bytes.clone());
    frames[2].bytes = second;
    frames[3].bytes = first;
    for point in [CapturePoint::Host(ip(B)), CapturePoint::Unknown] {
        assert!(path_seq_found(&frames, point).is_empty(), "{point:?}");
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
