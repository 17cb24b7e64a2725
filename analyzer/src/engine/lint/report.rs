//! What the lint reports: per-rule counts of a capture ([`LintReport`]) and
//! of a direction ([`RuleCounts`]), and the consumer's severity overrides
//! ([`LintConfig`]).

use std::net::IpAddr;

use super::finding::Finding;
use super::rule::{RuleId, Severity, Vantage};
use super::vantage::Side;

/// Per-run severity overrides (`--allow ID`, `--deny ID`), applied by the
/// consumer to the engine's findings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LintConfig {
    /// `None`: the rule is allowed (not reported); otherwise its severity.
    overrides: Vec<(RuleId, Option<Severity>)>,
}

impl LintConfig {
    /// Reports nothing of `rule`.
    pub fn allow(&mut self, rule: RuleId) {
        self.set(rule, None);
    }

    /// Makes `rule` an error.
    pub fn deny(&mut self, rule: RuleId) {
        self.set(rule, Some(Severity::Error));
    }

    fn set(&mut self, rule: RuleId, severity: Option<Severity>) {
        self.overrides.retain(|(r, _)| *r != rule);
        self.overrides.push((rule, severity));
    }

    /// The severity `rule` is reported with, `None` when it is allowed.
    pub fn severity(&self, rule: RuleId) -> Option<Severity> {
        match self.overrides.iter().find(|(r, _)| *r == rule) {
            Some((_, s)) => *s,
            None => Some(rule.rule().severity),
        }
    }
}

/// Per-rule finding counts of a capture (the report's `lint`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LintReport {
    /// The host the capture was taken on (given, or decided from the
    /// traffic), `None` when unknown: then only rules of vantage `either`
    /// were judged.
    pub host: Option<IpAddr>,
    /// Findings per rule, in registry order, only rules that fired (the
    /// registry's severities: overrides are the consumer's).
    pub counts: Vec<RuleCount>,
    /// Findings not kept for the caller (more than `MAX_PENDING` waited).
    pub findings_dropped: u64,
    /// Per rule, the packets it could not judge although the capture
    /// point can (what it needed had left the lint's bounded state), in
    /// registry order, only rules with any: MR-RCV-004's echoes of a PSN
    /// neither the engine's window nor the lint's record of the latest
    /// PSNs holds (`docs/lint.md`).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub not_judged: Vec<NotJudged>,
}

/// Packets one rule could not judge ([`LintReport::not_judged`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct NotJudged {
    pub rule: &'static str,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RuleCount {
    pub rule: &'static str,
    pub severity: Severity,
    pub count: u64,
}

impl LintReport {
    /// Adds another capture's counts (a report over several captures):
    /// per rule summed, in registry order; the host kept when both
    /// captures were taken on the same one, else `None`.
    pub fn merge(&mut self, other: &LintReport) {
        if self.host != other.host {
            self.host = None;
        }
        merge_per_rule(&mut self.counts, &other.counts);
        self.findings_dropped += other.findings_dropped;
        merge_per_rule(&mut self.not_judged, &other.not_judged);
    }

    /// Whether `finding` holds at this capture point: its rule, or the
    /// part of it the finding rests on ([`Finding::vantage`]), can be
    /// judged there.
    pub fn keeps(&self, finding: &Finding) -> bool {
        finding.judged_from(self.host)
    }
}

/// An entry of a per-rule list of a report ([`RuleCount`], [`NotJudged`]).
trait PerRule: Clone {
    fn rule(&self) -> &'static str;
    fn count_mut(&mut self) -> &mut u64;
}

impl PerRule for RuleCount {
    fn rule(&self) -> &'static str {
        self.rule
    }
    fn count_mut(&mut self) -> &mut u64 {
        &mut self.count
    }
}

impl PerRule for NotJudged {
    fn rule(&self) -> &'static str {
        self.rule
    }
    fn count_mut(&mut self) -> &mut u64 {
        &mut self.count
    }
}

/// Adds `from`'s counts per rule to `into`'s, in registry order.
fn merge_per_rule<T: PerRule>(into: &mut Vec<T>, from: &[T]) {
    for entry in from {
        let mut entry = entry.clone();
        match into.iter_mut().find(|m| m.rule() == entry.rule()) {
            Some(m) => *m.count_mut() += *entry.count_mut(),
            None => into.push(entry),
        }
    }
    into.sort_by_key(|m| RuleId::find(m.rule()).map(RuleId::index));
}

/// Counts per rule of one direction (a short list: few rules fire), each
/// with the vantage its findings hold from ([`Finding::vantage`]: the
/// rule's, or narrower for a part of it).
#[derive(Debug, Clone, Default)]
pub(crate) struct RuleCounts(pub(super) Vec<(RuleId, Vantage, u64)>);

impl RuleCounts {
    /// The counts of the findings that hold from `side`, by rule id in
    /// registry order.
    pub(super) fn judged(&self, side: Side) -> Vec<(&'static str, u64)> {
        let mut out: Vec<(RuleId, u64)> = Vec::new();
        for &(rule, vantage, n) in &self.0 {
            if side.judges(vantage) {
                match out.iter_mut().find(|(r, _)| *r == rule) {
                    Some((_, sum)) => *sum += n,
                    None => out.push((rule, n)),
                }
            }
        }
        out.sort_unstable();
        out.into_iter().map(|(r, n)| (r.rule().id, n)).collect()
    }

    /// Adds the counts that hold from `side` to `sums` (by rule index).
    pub(super) fn add_judged(&self, side: Side, sums: &mut [u64]) {
        for &(rule, vantage, n) in &self.0 {
            if side.judges(vantage) {
                sums[rule.index()] += n;
            }
        }
    }

    pub(super) fn add(&mut self, rule: RuleId, vantage: Vantage) {
        match self
            .0
            .iter_mut()
            .find(|(r, v, _)| *r == rule && *v == vantage)
        {
            Some((_, _, n)) => *n += 1,
            None => self.0.push((rule, vantage, 1)),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn merged_reports_sum_their_counts_per_rule_in_registry_order() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let count = |rule: &'static str, count| RuleCount {
            rule,
            severity: RuleId::of(rule).rule().severity,
            count,
        };
        let mut merged = LintReport {
            host: Some(a),
            counts: vec![count("MR-PKT-002", 3), count("MR-SND-004", 1)],
            findings_dropped: 1,
            not_judged: vec![NotJudged {
                rule: "MR-RCV-004",
                count: 4,
            }],
        };
        merged.merge(&LintReport {
            host: Some(a),
            counts: vec![count("MR-PKT-001", 2), count("MR-SND-004", 5)],
            findings_dropped: 2,
            not_judged: vec![NotJudged {
                rule: "MR-RCV-004",
                count: 1,
            }],
        });
        assert_eq!(merged.host, Some(a));
        assert_eq!(
            merged.counts,
            [
                count("MR-PKT-001", 2),
                count("MR-PKT-002", 3),
                count("MR-SND-004", 6)
            ]
        );
        assert_eq!(merged.findings_dropped, 3);
        assert_eq!(
            merged.not_judged,
            [NotJudged {
                rule: "MR-RCV-004",
                count: 5
            }]
        );
        merged.merge(&LintReport {
            host: "10.0.0.2".parse().ok(),
            ..LintReport::default()
        });
        assert_eq!(merged.host, None, "captures taken on different hosts");
        assert_eq!(merged.counts.len(), 3);
    }

    #[test]
    fn overrides_change_severity() {
        let rule = RuleId::of("MR-PKT-001");
        let mut cfg = LintConfig::default();
        assert_eq!(cfg.severity(rule), Some(Severity::Error));
        cfg.allow(rule);
        assert_eq!(cfg.severity(rule), None);
        cfg.deny(rule);
        assert_eq!(cfg.severity(rule), Some(Severity::Error));
    }
}
