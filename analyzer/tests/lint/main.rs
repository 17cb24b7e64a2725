//! The conformance lint, tested both ways: each rule of the registry is
//! broken by at least one capture and found on the right frame, and clean
//! traffic gives no error-severity finding.
//!
//! The table of violating cases is split by family, one file each under
//! `tests/lint/` (this test is `tests/lint/main.rs`); `cases.rs` holds the harness and a clean conversation to
//! break. A family adds its file as a `mod` here and its cases to
//! [`all_cases`]. A rule of vantage two-capture is judged on two captures
//! of the same traffic: its cases are [`cases::TwoCaptureCase`]s
//! (`network.rs`), each capture with the frames to be found in it.

mod cases;
mod connection;
mod network;
mod packet;
mod receiver;
mod rocev2;
mod sender;

use analyzer::lint::{self, Severity};
use cases::{Case, run, run_two};

/// Every family's cases.
fn all_cases() -> Vec<Case> {
    [
        packet::cases(),
        connection::cases(),
        sender::cases(),
        receiver::cases(),
        rocev2::cases(),
    ]
    .concat()
}

#[test]
fn every_case_breaks_its_rule_on_its_frame() {
    let mut failures = Vec::new();
    for case in all_cases() {
        let rule = lint::RuleId::find(case.rule)
            .unwrap_or_else(|| panic!("case '{}': no rule {}", case.what, case.rule));
        let capture = (case.build)();
        let out = run(&capture.frames, case.point);
        let frames: Vec<u64> = out
            .findings
            .iter()
            .filter(|f| f.rule == rule)
            .map(|f| f.frame)
            .collect();
        // A finding made when the capture ended marks no verdict.
        let marked = capture.expect.iter().all(|&n| {
            let at_end = out.at_end.iter().any(|f| f.rule == rule && f.frame == n);
            at_end
                || out
                    .verdicts
                    .iter()
                    .find(|v| v.frame == n)
                    .is_some_and(|v| v.lint.contains(rule))
        });
        if frames != capture.expect || !marked {
            failures.push(format!(
                "{} ({}): expected findings on frames {:?}, got {frames:?}{}; all findings: {:?}",
                case.rule,
                case.what,
                capture.expect,
                if marked { "" } else { ", verdict not marked" },
                out.findings
                    .iter()
                    .map(|f| (f.rule().id, f.frame))
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_two_capture_case_breaks_its_rule_on_its_frames() {
    let mut failures = Vec::new();
    for case in network::two_capture_cases() {
        let rule = lint::RuleId::find(case.rule)
            .unwrap_or_else(|| panic!("case '{}': no rule {}", case.what, case.rule));
        assert_eq!(
            rule.rule().vantage,
            lint::Vantage::TwoCapture,
            "{}",
            case.rule
        );
        let [a, b] = (case.build)();
        let out = run_two([&a.frames, &b.frames]);
        for ((capture, findings), c) in [a, b].iter().zip(&out.findings).zip(0..) {
            let frames: Vec<u64> = findings
                .iter()
                .filter(|f| f.rule == rule)
                .map(|f| f.frame)
                .collect();
            if frames != capture.expect {
                failures.push(format!(
                    "{} ({}): capture {c}: expected findings on frames {:?}, got {frames:?}",
                    case.rule, case.what, capture.expect
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_rule_of_the_registry_has_a_violating_case() {
    let cases = all_cases();
    let two = network::two_capture_cases();
    let missing: Vec<&str> = lint::rules()
        .map(|(_, r)| r.id)
        .filter(|id| !cases.iter().any(|c| c.rule == *id) && !two.iter().any(|c| c.rule == *id))
        .collect();
    assert!(missing.is_empty(), "rules without a case: {missing:?}");
}

#[test]
fn the_clean_conversation_gives_no_finding_at_all() {
    let frames = cases::render(&cases::conversation());
    for point in [
        lint::CapturePoint::Auto,
        lint::CapturePoint::Host(cases::ip(cases::A)),
        lint::CapturePoint::Host(cases::ip(cases::B)),
        lint::CapturePoint::Unknown,
    ] {
        let out = run(&frames, point);
        let found: Vec<_> = out
            .findings
            .iter()
            .map(|f| (f.rule().id, f.frame, f.evidence()))
            .collect();
        assert!(found.is_empty(), "{point:?}: {found:?}");
    }
}

#[test]
fn the_generated_scenarios_give_no_error_finding() {
    for name in ["multipath_loss_sender", "multipath_loss_receiver"] {
        let frames = cases::read_fixture(&format!("{name}.pcap"));
        let out = run(&frames, lint::CapturePoint::Auto);
        let errors: Vec<_> = out
            .findings
            .iter()
            .filter(|f| out.report.keeps(f) && f.rule().severity == Severity::Error)
            .map(|f| (f.rule().id, f.frame, f.evidence()))
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
        assert!(out.report.host.is_some(), "{name}: no host decided");
    }
}

#[test]
fn the_rule_table_of_docs_lint_md_is_the_registry() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/lint.md");
    let doc = std::fs::read_to_string(&path).expect("docs/lint.md");
    let rows: Vec<Vec<String>> = doc
        .lines()
        .filter(|l| l.starts_with("| MR-") || l.starts_with("| RC-"))
        .map(|l| {
            l.replace("\\|", "\u{0}")
                .trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().replace('\u{0}', "|"))
                .collect()
        })
        .collect();
    let registry: Vec<Vec<String>> = lint::rules()
        .map(|(_, r)| {
            vec![
                r.id.to_string(),
                r.severity.as_str().to_string(),
                r.vantage.as_str().to_string(),
                r.vantage_why.to_string(),
                r.spec_section.to_string(),
                r.statement.to_string(),
            ]
        })
        .collect();
    for (row, rule) in rows.iter().zip(&registry) {
        assert_eq!(row, rule, "docs/lint.md row for {}", rule[0]);
    }
    assert_eq!(
        rows.len(),
        registry.len(),
        "docs/lint.md lists {} rules, the registry {}",
        rows.len(),
        registry.len()
    );
}

/// A capture taken on A of `seconds` of A's single-packet WRITEs (one a
/// millisecond, ev `i % 4`) and B's ACKs, B sending each ACK 1 us after
/// its WRITE arrived; `delays(i, ev)` gives the i-th WRITE's trip there
/// and its ACK's trip back, in ns. A's tx_ts is its clock from `a_clock`
/// (the capture's, shifted), B's its own from `b_clock`: both wrap (mod
/// 2^32) every 4.3 s.
fn long_capture(
    seconds: u64,
    a_clock: u32,
    b_clock: u32,
    delays: impl Fn(u64, u16) -> (u64, u64),
) -> Vec<cases::Frame> {
    use proto_parse::build::{ECN_ECT0, UdpFrameBuilder};
    use proto_parse::metaroce::{Body, DEFAULT_PORT, udp_source_port};
    use std::net::SocketAddr;
    let start = cases::render_ts(0);
    let frame = |from_a: bool, repr: &proto_parse::metaroce::Repr<'_>, ts_ns: u64| {
        let (src, dst) = match from_a {
            true => (cases::ip(cases::A), cases::ip(cases::B)),
            false => (cases::ip(cases::B), cases::ip(cases::A)),
        };
        let bytes = UdpFrameBuilder::new(
            SocketAddr::from((src, udp_source_port(repr.ev))),
            SocketAddr::from((dst, DEFAULT_PORT)),
        )
        .with_ecn(ECN_ECT0)
        .build(&repr.to_vec());
        cases::Frame { ts_ns, bytes }
    };
    let mut frames = Vec::new();
    let mut path_seq = [0u16; 4];
    for i in 0..seconds * 1000 {
        let ev = (i % 4) as u16;
        let psn = cases::A_INIT_PSN + i as u32;
        let sent = i * 1_000_000;
        let mut d = cases::write(true, ev, psn, i as u32 + 1, 0, 1).repr;
        path_seq[ev as usize] = path_seq[ev as usize].wrapping_add(1).max(1);
        d.path_seq = path_seq[ev as usize];
        d.tx_ts = a_clock.wrapping_add(sent as u32);
        frames.push(frame(true, &d, start + sent));
        let (there, back) = delays(i, ev);
        let acked = sent + there + 1_000;
        let mut a = cases::ack(&cases::Pkt::new(true, d.clone()), psn + 1).repr;
        a.path_seq = d.path_seq;
        a.tx_ts = b_clock.wrapping_add(acked as u32);
        if let Body::Ack(ack) = &mut a.body {
            ack.feedback.echo_tx_ts = d.tx_ts;
            ack.feedback.rx_ts = b_clock.wrapping_add((acked - 1_000) as u32);
        }
        frames.push(frame(false, &a, start + acked + back));
    }
    frames
}

/// Trips of 2 to 17 us each, varying from packet to packet.
fn varied_delays(i: u64, _ev: u16) -> (u64, u64) {
    (2_000 + (i * 7_919) % 15_000, 2_000 + (i * 104_729) % 15_000)
}

/// Spec 2 on a quiet fabric: each path has its own constant delay, the
/// four within 450 ns of each other. At the capture host capture time
/// minus tx_ts is exactly constant (the same clock read twice) while B's
/// packets still show their paths' different delays: a spread of 0
/// against any other decides, even under the 1 us that timestamp noise
/// could explain when neither side is exact.
#[test]
fn the_capture_host_is_guessed_when_the_paths_differ_by_less_than_a_microsecond() {
    let per_path = |_i: u64, ev: u16| (5_000 + 150 * u64::from(ev), 5_000 + 150 * u64::from(ev));
    for (a_clock, b_clock) in [
        (0xFFFF_FFFF - 500_000_000, 0x1234_5678),
        (0x10, 0xFFFF_FFF0),
    ] {
        let frames = long_capture(6, a_clock, b_clock, per_path);
        let out = run(&frames, lint::CapturePoint::Auto);
        assert_eq!(
            out.report.host,
            Some(cases::ip(cases::A)),
            "A's clock from {a_clock:#x}, B's from {b_clock:#x}"
        );
    }
    // Both sides exactly constant (every trip the same): nothing tells
    // the ends apart, and the point stays unknown.
    let frames = long_capture(6, 0x10, 0xFFFF_FFF0, |_, _| (5_000, 5_000));
    assert_eq!(run(&frames, lint::CapturePoint::Auto).report.host, None);
}

/// Spec 2: tx_ts is the sender's clock modulo 2^32 (1 ns units: it wraps
/// every 4.3 s). At the capture host, capture time minus tx_ts is the same
/// for every packet it sends, modulo 2^32, across the wraps; at the other
/// end it varies with the paths' delays: the host is decided on a capture
/// of several seconds, whichever clock wraps where.
#[test]
fn the_capture_host_is_guessed_across_tx_ts_wraps() {
    for (a_clock, b_clock) in [
        (0xFFFF_FFFF - 500_000_000, 0x1234_5678),
        (0x0000_1000, 0xFFFF_0000),
        (0xC000_0000, 0xC000_0000),
    ] {
        let frames = long_capture(6, a_clock, b_clock, varied_delays);
        let out = run(&frames, lint::CapturePoint::Auto);
        assert_eq!(
            out.report.host,
            Some(cases::ip(cases::A)),
            "A's clock from {a_clock:#x}, B's from {b_clock:#x}"
        );
    }
}

/// Spec 2, 4 and 9: the engine's RTT samples match an echo by tx_ts
/// equality and its hold time T3 - T2 is taken modulo 2^32, so both hold
/// across the wraps of either clock: on the 6 s capture every ACK gives its
/// WRITE's RTT, and the fabric RTT is that less B's 1 us hold.
#[test]
fn rtt_and_hold_time_hold_across_tx_ts_wraps() {
    let frames = long_capture(
        6,
        0xFFFF_FFFF - 500_000_000,
        0xFFFF_FFFF - 2_000_000_000,
        varied_delays,
    );
    let out = run(&frames, lint::CapturePoint::Auto);
    let mut samples = 0;
    for (pair, verdicts) in frames.chunks(2).zip(out.verdicts.chunks(2)) {
        let rtt = pair[1].ts_ns - pair[0].ts_ns;
        assert_eq!(
            verdicts[1].ack_rtt_ns,
            Some(rtt),
            "frame {}",
            verdicts[1].frame
        );
        assert_eq!(verdicts[1].fabric_rtt_ns, Some(rtt as i64 - 1_000));
        samples += 1;
    }
    assert_eq!(samples, 6_000);
}
