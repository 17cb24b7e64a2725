//! One report for several capture points (`Report::merge`), with the
//! capture section's note on traffic that held none of our packets.

use analyzer::engine::Report;

use super::CaptureResult;

/// One report for several captures.
///
/// With one capture this is its engine's report unchanged. With several
/// (the `MultiEngine`'s per-capture reports), the reports are joined by
/// `Report::merge`, and `files` is the number of captures.
pub fn merge_reports(results: &[CaptureResult]) -> Option<Report> {
    let (first, rest) = results.split_first()?;
    let mut merged = first.report.clone();
    if rest.is_empty() {
        explain_traffic(&mut merged);
        return Some(merged);
    }
    // Capture points of one file (mirror sessions) count it once.
    merged.capture.files = results
        .iter()
        .map(|r| r.report.capture.files)
        .max()
        .unwrap_or(1)
        .max(results.iter().filter(|r| r.mirror.is_none()).count() as u64);
    for r in rest {
        merged.merge(&r.report);
    }
    explain_traffic(&mut merged);
    Some(merged)
}

/// Says, in the capture section, why a capture with frames held none of
/// our packets (`analyzer::traffic::explain`).
fn explain_traffic(report: &mut Report) {
    let c = &report.capture;
    let note =
        analyzer::traffic::explain(c.frames, c.metaroce_packets + c.rocev2_packets, &c.traffic);
    report.capture.traffic.note = note;
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::pipeline::ReadStats;
    use analyzer::engine::{Config, Engine};
    use std::path::PathBuf;

    /// The lint's counts of several captures are summed per rule.
    #[test]
    fn merged_reports_sum_the_lint_counts() {
        use analyzer::lint::{RuleCount, RuleId};
        let count = |rule: &'static str, count| RuleCount {
            rule,
            severity: RuleId::of(rule).rule().severity,
            count,
        };
        let capture = |counts: Vec<RuleCount>| {
            let engine = Engine::new(Config {
                lint: Some(Default::default()),
                ..Config::default()
            });
            let mut report = engine.snapshot();
            report.lint.as_mut().expect("lint on").counts = counts;
            CaptureResult::new(
                PathBuf::from("c.pcap"),
                "c".into(),
                ReadStats::default(),
                report,
            )
        };
        let merged = merge_reports(&[
            capture(vec![count("MR-PKT-002", 3), count("MR-RCV-001", 1)]),
            capture(vec![count("MR-PKT-001", 1), count("MR-RCV-001", 4)]),
        ])
        .unwrap();
        assert_eq!(
            merged.lint.unwrap().counts,
            [
                count("MR-PKT-001", 1),
                count("MR-PKT-002", 3),
                count("MR-RCV-001", 5)
            ]
        );
    }
}
