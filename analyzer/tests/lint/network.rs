//! Violating cases of the two-capture rules (`lint/network.rs`): the
//! clean conversation captured at two points, one copy changed on the way.

use analyzer::lint::{RuleId, Vantage};
use proto_parse::build::{ECN_CE, ECN_NOT_ECT};

use super::cases::*;

const ECN_KEPT: &str = "MR-NET-001";

/// How much later the second capture's clock reads than the first's for
/// the same packet (a capture downstream; negative: its clock is behind,
/// so its copies are ingested first).
const LATER_NS: i64 = 3_000;

/// The conversation captured at two points: the first capture's packets
/// changed by `first`, the second's by `second`, its clock `shift_ns`
/// off the first's.
fn two_points(
    shift_ns: i64,
    first: impl FnOnce(&mut Vec<Pkt>),
    second: impl FnOnce(&mut Vec<Pkt>),
) -> [Vec<Frame>; 2] {
    let mut a = conversation();
    first(&mut a);
    let mut b = conversation();
    second(&mut b);
    let mut b = render(&b);
    for f in &mut b {
        f.ts_ns = f
            .ts_ns
            .checked_add_signed(shift_ns)
            .expect("a capture time");
    }
    [render(&a), b]
}

fn ecn(frame: u64, codepoint: u8) -> impl FnOnce(&mut Vec<Pkt>) {
    move |pkts| at(pkts, frame).ecn = codepoint
}

fn unchanged(_: &mut Vec<Pkt>) {}

fn expect(frames: [Vec<Frame>; 2], first: &[u64], second: &[u64]) -> [Capture; 2] {
    let [a, b] = frames;
    [
        Capture {
            frames: a,
            expect: first.to_vec(),
        },
        Capture {
            frames: b,
            expect: second.to_vec(),
        },
    ]
}

pub fn two_capture_cases() -> Vec<TwoCaptureCase> {
    vec![
        TwoCaptureCase {
            rule: ECN_KEPT,
            what: "a DATA ECT(0) upstream, Not-ECT downstream",
            build: || {
                let frames = two_points(LATER_NS, unchanged, ecn(DATA_0, ECN_NOT_ECT));
                expect(frames, &[], &[DATA_0])
            },
        },
        TwoCaptureCase {
            rule: ECN_KEPT,
            what: "the Not-ECT copy ingested first (its capture's clock behind)",
            build: || {
                let frames = two_points(-LATER_NS, unchanged, ecn(DATA_1, ECN_NOT_ECT));
                expect(frames, &[], &[DATA_1])
            },
        },
        TwoCaptureCase {
            rule: ECN_KEPT,
            what: "an ACK Not-ECT in the first capture, CE in the second",
            build: || {
                let frames = two_points(LATER_NS, ecn(ACK_0, ECN_NOT_ECT), ecn(ACK_0, ECN_CE));
                expect(frames, &[ACK_0], &[])
            },
        },
    ]
}

fn network_frames(findings: &[analyzer::lint::Finding]) -> Vec<u64> {
    let rule = RuleId::of(ECN_KEPT);
    findings
        .iter()
        .filter(|f| f.rule == rule)
        .map(|f| f.frame)
        .collect()
}

#[test]
fn a_bleached_copy_is_found_in_its_capture_against_the_other_copy() {
    let [a, b] = two_points(LATER_NS, unchanged, ecn(DATA_0, ECN_NOT_ECT));
    let out = run_two([&a, &b]);
    let rule = RuleId::of(ECN_KEPT);
    let found: Vec<_> = out.findings[1].iter().filter(|f| f.rule == rule).collect();
    assert_eq!(found.len(), 1, "{found:?}");
    let f = found[0];
    assert_eq!(f.frame, DATA_0);
    assert_eq!(f.related_frame, Some(DATA_0), "the first capture's copy");
    assert_eq!((f.observed, f.expected), (0, 2), "Not-ECT against ECT(0)");
    assert_eq!(f.ts_ns, b[DATA_0 as usize - 1].ts_ns, "the copy's own time");
    assert_eq!(f.conn.src(), ip(A));
    assert_eq!(f.conn.dst(), ip(B));
    assert!(f.ev.is_some());
    let evidence = f.evidence();
    assert!(
        evidence.contains(&format!("frame {DATA_0} of another capture")),
        "{evidence}"
    );
    assert!(network_frames(&out.findings[0]).is_empty());
    // The counts: the second capture's report, not the first's.
    let count = |r: &analyzer::lint::LintReport| {
        r.counts
            .iter()
            .find(|c| c.rule == ECN_KEPT)
            .map_or(0, |c| c.count)
    };
    assert_eq!(count(&out.reports[1]), 1);
    assert_eq!(count(&out.reports[0]), 0);
    assert!(out.reports[1].keeps(f), "judged wherever the host is");
    assert_eq!(f.rule().vantage, Vantage::TwoCapture);
}

#[test]
fn legit_marks_and_identical_copies_give_no_network_finding() {
    let cases: [(&str, [Vec<Frame>; 2]); 5] = [
        ("identical", two_points(LATER_NS, unchanged, unchanged)),
        (
            "CE downstream, ECT(0) upstream",
            two_points(LATER_NS, unchanged, ecn(DATA_0, ECN_CE)),
        ),
        (
            "CE upstream, ECT(0) downstream (clocks say nothing of order)",
            two_points(LATER_NS, ecn(DATA_0, ECN_CE), unchanged),
        ),
        (
            "CE ingested first",
            two_points(-LATER_NS, unchanged, ecn(DATA_1, ECN_CE)),
        ),
        (
            "Not-ECT at both points (sent so: MR-PKT-012's, not the network's)",
            two_points(LATER_NS, ecn(DATA_0, ECN_NOT_ECT), ecn(DATA_0, ECN_NOT_ECT)),
        ),
    ];
    for (what, [a, b]) in cases {
        let out = run_two([&a, &b]);
        for (c, findings) in out.findings.iter().enumerate() {
            assert!(
                network_frames(findings).is_empty(),
                "{what}: capture {c}: {findings:?}"
            );
        }
    }
}

#[test]
fn a_single_capture_never_fires_a_two_capture_rule() {
    for case in two_capture_cases() {
        for capture in (case.build)() {
            let out = run(&capture.frames, analyzer::lint::CapturePoint::Auto);
            assert!(
                network_frames(&out.findings).is_empty(),
                "{}: {:?}",
                case.what,
                out.findings
            );
        }
    }
}
