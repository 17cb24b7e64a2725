//! Violating cases of the connection rules (`lint/connection.rs`).

use analyzer::lint::CapturePoint;
use proto_parse::metaroce::Body;

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
    ]
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
