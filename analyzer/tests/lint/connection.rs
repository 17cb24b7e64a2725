//! Violating cases of the connection rules (`lint/connection.rs`).

use analyzer::lint::{CapturePoint, LintTimings};
use proto_parse::metaroce::{Body, CtrlOp};

use super::cases::*;

fn case(rule: &'static str, what: &'static str, build: fn() -> Capture) -> Case {
    Case {
        rule,
        what,
        build,
        point: CapturePoint::Auto,
    }
}

pub fn cases() -> Vec<Case> {
    vec![
        case("MR-CONN-001", "a CONNECT naming a dst_conn", || {
            edited(CONNECT, |p| at(p, CONNECT).repr.dst_conn = B_CONN)
        }),
        case("MR-CONN-002", "an ACK with dst_conn 0", || {
            edited(ACK_0, |p| at(p, ACK_0).repr.dst_conn = 0)
        }),
        case(
            "MR-CONN-003",
            "an ACCEPT to a connection id no CONNECT had",
            || edited(ACCEPT, |p| at(p, ACCEPT).repr.dst_conn = A_CONN + 1),
        ),
        case("MR-CONN-004", "DATA to the wrong connection id", || {
            edited(DATA_1, |p| at(p, DATA_1).repr.dst_conn = B_CONN + 5)
        }),
        case("MR-CONN-005", "DATA before the ACCEPT", || {
            edited(2, |p| {
                let d0 = p.remove(2);
                p.insert(1, d0);
            })
        }),
        case("MR-CONN-006", "new DATA after the CLOSE", || {
            edited(CLOSE + 1, |p| {
                let mut extra = write(true, 0, A_INIT_PSN + 2, 2, 0, 1);
                extra.repr.psn = A_INIT_PSN + 2;
                p.insert(CLOSE as usize, extra);
            })
        }),
        case("MR-CONN-007", "a CLOSE_ACK with no CLOSE", || {
            // The CLOSE_ACK moves up one frame.
            edited(CLOSE_ACK - 1, |p| {
                p.remove(CLOSE as usize - 1);
            })
        }),
        case("MR-CONN-008", "DATA below init_psn", || {
            edited(DATA_1, |p| at(p, DATA_1).repr.psn = A_INIT_PSN - 10)
        }),
        Case {
            rule: "MR-CONN-009",
            what: "first DATA after init_psn, captured at the sender",
            build: || {
                edited(DATA_0, |p| {
                    if let Body::Ctrl(c) = &mut at(p, CONNECT).repr.body {
                        c.init_psn = A_INIT_PSN - 1;
                    }
                })
            },
            point: CapturePoint::Host(ip(A)),
        },
        case(
            "MR-CONN-010",
            "a CLOSE with no CLOSE_ACK in the 20 ms the capture goes on",
            || Capture {
                frames: close_then(CtrlOp::Keepalive, 20_000_000),
                expect: vec![CLOSE],
            },
        ),
    ]
}

/// The conversation with B's answer to A's CLOSE (frame 8) replaced by
/// a CTRL `op` of B's, captured `ns` later.
fn close_then(op: CtrlOp, ns: u64) -> Vec<Frame> {
    let mut pkts = conversation();
    *at(&mut pkts, CLOSE_ACK) = ctrl(false, op);
    delayed(&pkts, CLOSE_ACK, ns)
}

const NONE: [u64; 0] = [];

/// MR-CONN-010's findings on `frames`, with the close wait `wait_ns`.
fn unanswered(frames: &[Frame], wait_ns: u64) -> Vec<u64> {
    let timings = LintTimings {
        close_wait_ns: wait_ns,
        ..LintTimings::default()
    };
    run_with(frames, CapturePoint::Auto, timings)
        .findings
        .iter()
        .filter(|f| f.rule().id == "MR-CONN-010")
        .map(|f| f.frame)
        .collect()
}

/// A CLOSE answered by a CLOSE_ACK or an ABORT is no finding, however
/// long the capture goes on; nor is one the capture ends too soon after
/// to tell (at the CLOSE itself, or 5 ms later with the default 10 ms
/// wait), unless the close wait is shorter.
#[test]
fn a_close_answered_or_outlived_briefly_is_no_finding() {
    let wait = LintTimings::default().close_wait_ns;
    assert_eq!(wait, 10_000_000);
    let mut answered = conversation();
    answered.push(ctrl(false, CtrlOp::Keepalive));
    assert_eq!(unanswered(&delayed(&answered, 9, 20_000_000), wait), NONE);
    assert_eq!(
        unanswered(&close_then(CtrlOp::Abort, 20_000_000), wait),
        NONE
    );

    let mut ends_at_close = conversation();
    ends_at_close.pop();
    assert_eq!(unanswered(&render(&ends_at_close), wait), NONE);
    let soon = close_then(CtrlOp::Keepalive, 5_000_000);
    assert_eq!(unanswered(&soon, wait), NONE);
    assert_eq!(unanswered(&soon, 1_000_000), [CLOSE]);
}

/// The finding names the CLOSE and its connection, says how long the
/// capture went on, and counts for the CLOSE's direction.
#[test]
fn an_unanswered_close_is_found_when_the_capture_ends() {
    let out = run(
        &close_then(CtrlOp::Keepalive, 20_000_000),
        CapturePoint::Auto,
    );
    let f = out.at_end.first().expect("a finding at the end");
    assert_eq!(out.at_end.len(), 1);
    assert_eq!((f.rule().id, f.frame), ("MR-CONN-010", CLOSE));
    assert_eq!((f.conn.src(), f.conn.dst()), (ip(A), ip(B)));
    assert_eq!(
        f.evidence(),
        "no CLOSE_ACK from the peer in the 20010 us the capture went on after this CLOSE \
         (close wait 10000 us)."
    );
    let from_a = out
        .full
        .directions
        .iter()
        .find(|d| d.src == ip(A) && d.src_conn == A_CONN && d.dst_conn == B_CONN)
        .expect("A's direction to B");
    assert_eq!(from_a.lint.get("MR-CONN-010"), Some(&1));
    assert!(
        out.report
            .counts
            .iter()
            .any(|c| c.rule == "MR-CONN-010" && c.count == 1)
    );
}

/// At the receiver the first DATA may have been lost: MR-CONN-009 is not
/// judged there.
#[test]
fn the_first_psn_is_not_judged_at_the_receiver() {
    let mut pkts = conversation();
    if let Body::Ctrl(c) = &mut at(&mut pkts, CONNECT).repr.body {
        c.init_psn = A_INIT_PSN - 1;
    }
    let frames = render(&pkts);
    let out = run(&frames, CapturePoint::Host(ip(B)));
    assert!(out.findings.is_empty(), "{:?}", out.findings);
    assert!(out.report.counts.is_empty());
}
