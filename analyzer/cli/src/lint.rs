//! `metaroce-analyze lint`: the conformance lint (`analyzer::lint`) over
//! captures, as text, JSON Lines or a JUnit report.
//!
//! The lint runs inside the flow engine (`Config::lint`) on the same
//! pipeline as `report`; this module only collects the findings the
//! pipeline hands over (`Sink::findings`), applies `--allow`/`--deny`, and
//! writes them. Documented in `docs/lint.md`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use analyzer::engine::{MsgDone, Observation, Verdict};
use analyzer::lint::{
    self, CapturePoint, Finding, LintConfig, LintOptions, LintReport, LintTimings, RuleId, Severity,
};
use clap::Args;
use metaroce_analyze::pipeline::{self, CaptureResult, Sink};

use super::{AnalysisArgs, ColorWhen, TermProgress, analysis_status, parse_duration, write_out};

/// Findings listed per rule in the text and JUnit outputs (the counts are
/// complete).
const SHOWN_PER_RULE: usize = 5;

/// Findings kept for `--json` (the counts are complete beyond).
const MAX_KEPT: usize = 1_000_000;

#[derive(Debug, Args)]
#[command(mut_arg("captures", |a| a.required(false).required_unless_present("rules")))]
pub(crate) struct LintArgs {
    #[command(flatten)]
    analysis: AnalysisArgs,
    /// Print one JSON object per finding (JSON Lines): rule, severity,
    /// capture, frame, related_frame, ts_ns, connection, path (ev),
    /// evidence. With --rules, one object per rule.
    #[arg(long)]
    json: bool,
    /// Also write a JUnit XML report: one test case per rule of the
    /// registry, failed by its error-severity findings.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Print the rules (id, severity, vantage, spec section, statement)
    /// and exit.
    #[arg(long)]
    rules: bool,
    /// With --rules: the rules as docs/lint.md's Markdown table (id,
    /// severity, vantage, why there, spec, statement).
    #[arg(long, requires = "rules", conflicts_with = "json")]
    markdown: bool,
    /// Do not report this rule (repeatable).
    #[arg(long, value_name = "ID")]
    allow: Vec<String>,
    /// Report this rule as an error (repeatable).
    #[arg(long, value_name = "ID")]
    deny: Vec<String>,
    /// Where the captures were taken, for the rules only one side can
    /// judge: `auto` (decided per capture from its traffic, see
    /// docs/lint.md), `none` (a mirror or unknown point: only rules of
    /// vantage `either`), or the address of the host the capture was
    /// taken on (one capture only).
    #[arg(long, value_name = "auto|none|ADDR", default_value = "auto", value_parser = parse_point)]
    vantage: CapturePoint,
    /// RC-CNP-001's CNP interval: the least time between two RoCEv2 CNPs
    /// of a flow (DCQCN's default 50us; 0 turns the rule off).
    #[arg(long, value_name = "DURATION", default_value = "50us", value_parser = parse_duration)]
    cnp_interval: u64,
    #[command(flatten)]
    timings: TimingArgs,
}

/// The rules' timing bounds (`analyzer::lint::LintTimings`), for an
/// implementation whose timers differ from the lint's defaults.
#[derive(Debug, Args)]
struct TimingArgs {
    /// MR-RCV-008's ack delay: how long a DATA packet with AR may wait
    /// for its acknowledgement.
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = parse_duration)]
    ack_delay: u64,
    /// MR-SND-005: a NACK GAP or TRIMMED is answered within this many of
    /// the direction's largest RTT...
    #[arg(long, value_name = "N", default_value_t = 8)]
    nack_rtts: u64,
    /// ...and at least this long.
    #[arg(long, value_name = "DURATION", default_value = "2ms", value_parser = parse_duration)]
    nack_min: u64,
    /// MR-SND-007: the DATA rate after a CNP or ECE is measured over this
    /// many RTTs...
    #[arg(long, value_name = "N", default_value_t = 4)]
    rate_window_rtts: u64,
    /// ...and at least this long.
    #[arg(long, value_name = "DURATION", default_value = "100us", value_parser = parse_duration)]
    rate_window_min: u64,
    /// The sender's reaction time: MR-SND-007's window starts one RTT, and
    /// at least this long, after the signal; RC-REQ-001, RC-REQ-003 and
    /// MR-SND-004 judge what was sent at least this long after the NAK or
    /// the acknowledgement.
    #[arg(long, value_name = "DURATION", default_value = "10us", value_parser = parse_duration)]
    reaction_min: u64,
    /// MR-CONN-010: a CLOSE is unanswered when the capture went on this
    /// long after it with no CLOSE_ACK from the peer.
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = parse_duration)]
    close_wait: u64,
}

impl TimingArgs {
    fn timings(&self) -> LintTimings {
        LintTimings {
            ack_delay_ns: self.ack_delay,
            nack_rtts: self.nack_rtts,
            nack_min_ns: self.nack_min,
            rate_window_rtts: self.rate_window_rtts,
            rate_window_min_ns: self.rate_window_min,
            reaction_min_ns: self.reaction_min,
            close_wait_ns: self.close_wait,
        }
    }
}

fn parse_point(s: &str) -> Result<CapturePoint, String> {
    match s {
        "auto" => Ok(CapturePoint::Auto),
        "none" => Ok(CapturePoint::Unknown),
        addr => addr
            .parse::<IpAddr>()
            .map(CapturePoint::Host)
            .map_err(|_| format!("'{s}' is neither auto, none nor an IP address")),
    }
}

/// The findings of every capture, as the pipeline hands them over.
#[derive(Default)]
struct Collector {
    findings: Vec<Vec<Finding>>,
    kept: usize,
    not_kept: u64,
}

impl Sink for Collector {
    #[inline]
    fn packet(&mut self, _: usize, _: &Observation, _: &Verdict, _: &[MsgDone]) {}

    fn findings(&mut self, capture: usize, findings: &[Finding]) {
        if self.findings.len() <= capture {
            self.findings.resize_with(capture + 1, Vec::new);
        }
        let room = MAX_KEPT.saturating_sub(self.kept).min(findings.len());
        self.findings[capture].extend_from_slice(&findings[..room]);
        self.kept += room;
        self.not_kept += (findings.len() - room) as u64;
    }
}

/// One finding as reported: after the vantage filter and the overrides.
struct Reported<'a> {
    capture: &'a str,
    severity: Severity,
    finding: &'a Finding,
}

/// Per rule: severity after overrides, count, and the first findings.
struct RuleSummary<'a> {
    severity: Severity,
    count: u64,
    first: Vec<Reported<'a>>,
}

pub(crate) fn run(args: &LintArgs) -> ExitCode {
    let mut config = LintConfig::default();
    for (ids, deny) in [(&args.allow, false), (&args.deny, true)] {
        for id in ids {
            let Some(rule) = RuleId::find(id) else {
                eprintln!(
                    "metaroce-analyze: no lint rule '{id}' (`metaroce-analyze lint --rules` lists them)"
                );
                return ExitCode::from(1);
            };
            if deny {
                config.deny(rule);
            } else {
                config.allow(rule);
            }
        }
    }
    if args.rules {
        let format = match (args.json, args.markdown) {
            (true, _) => RulesFormat::Json,
            (_, true) => RulesFormat::Markdown,
            _ => RulesFormat::Text,
        };
        return match write_out(|out| write_rules(out, format), ColorWhen::Never) {
            Ok(()) => ExitCode::SUCCESS,
            Err(code) => code,
        };
    }
    if matches!(args.vantage, CapturePoint::Host(_)) && args.analysis.captures.len() > 1 {
        eprintln!(
            "metaroce-analyze: --vantage ADDR names the host of one capture; with several \
             captures use --vantage auto (each capture's host is decided from its traffic)"
        );
        return ExitCode::from(1);
    }
    let mut analysis = args.analysis.options();
    // MR-PKT-013 and 014 read the parser's warnings and the CRC check.
    analysis.decode.verify_crc = true;
    analysis.engine.lint = Some(LintOptions {
        point: args.vantage,
        cnp_interval_ns: args.cnp_interval,
        timings: args.timings.timings(),
    });
    let mut collector = Collector::default();
    let progress = TermProgress::new(&args.analysis);
    let captures = &args.analysis.captures;
    let results = match pipeline::analyze(captures, &analysis, &mut collector, &progress) {
        Ok(r) => r,
        Err(err) => {
            eprintln!("metaroce-analyze: {err}");
            return ExitCode::from(1);
        }
    };
    if collector.not_kept > 0 {
        eprintln!(
            "metaroce-analyze: {} findings beyond the first {MAX_KEPT} are counted, not listed",
            collector.not_kept
        );
    }
    let lint_reports: Vec<LintReport> = results
        .iter()
        .map(|r| r.report.lint.clone().unwrap_or_default())
        .collect();
    let mut reported = Vec::new();
    for ((result, report), findings) in results.iter().zip(&lint_reports).zip(&collector.findings) {
        for finding in findings.iter().filter(|f| report.keeps(f)) {
            if let Some(severity) = config.severity(finding.rule) {
                reported.push(Reported {
                    capture: &result.stem,
                    severity,
                    finding,
                });
            }
        }
    }
    let summaries = summarise(&results, &lint_reports, &config, &reported);
    if let Some(path) = &args.junit
        && let Err(err) = write_junit(path, &summaries, &lint_reports, &config)
    {
        eprintln!("metaroce-analyze: {}: {err}", path.display());
        return ExitCode::from(1);
    }
    let several = results.len() > 1;
    let written = write_out(
        |out| {
            if args.json {
                write_json(out, &reported)
            } else {
                let given_none = args.vantage == CapturePoint::Unknown;
                write_text(
                    out,
                    &results,
                    &lint_reports,
                    &summaries,
                    several,
                    given_none,
                )
            }
        },
        ColorWhen::Never,
    );
    if let Err(code) = written {
        return code;
    }
    let status = analysis_status(&results);
    let errors = summaries.values().any(|s| s.severity == Severity::Error);
    if status == ExitCode::from(1) {
        status
    } else if errors {
        ExitCode::from(3)
    } else {
        status
    }
}

/// Counts per rule (from the engine's complete counts, so findings beyond
/// those kept are counted too) and the first findings of each.
fn summarise<'a>(
    results: &[CaptureResult],
    reports: &[LintReport],
    config: &LintConfig,
    reported: &'a [Reported<'a>],
) -> BTreeMap<RuleId, RuleSummary<'a>> {
    let mut out: BTreeMap<RuleId, RuleSummary<'a>> = BTreeMap::new();
    for report in reports.iter().take(results.len()) {
        for c in &report.counts {
            let Some(rule) = RuleId::find(c.rule) else {
                continue;
            };
            let Some(severity) = config.severity(rule) else {
                continue;
            };
            out.entry(rule)
                .or_insert(RuleSummary {
                    severity,
                    count: 0,
                    first: Vec::new(),
                })
                .count += c.count;
        }
    }
    for r in reported {
        if let Some(s) = out.get_mut(&r.finding.rule)
            && s.first.len() < SHOWN_PER_RULE
        {
            s.first.push(Reported {
                capture: r.capture,
                severity: r.severity,
                finding: r.finding,
            });
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RulesFormat {
    Text,
    Json,
    /// docs/lint.md's table of the rules.
    Markdown,
}

fn write_rules(out: &mut dyn Write, format: RulesFormat) -> io::Result<()> {
    if format == RulesFormat::Markdown {
        writeln!(
            out,
            "| id | severity | vantage | why there | spec | statement |"
        )?;
        writeln!(out, "|---|---|---|---|---|---|")?;
    }
    for (_, rule) in lint::rules() {
        match format {
            RulesFormat::Json => {
                let line = serde_json::json!({
                    "rule": rule.id,
                    "severity": rule.severity.as_str(),
                    "vantage": rule.vantage.as_str(),
                    "vantage_why": rule.vantage_why,
                    "protocol": rule.protocol.as_str(),
                    "spec_section": rule.spec_section,
                    "statement": rule.statement,
                });
                writeln!(out, "{line}")?;
            }
            RulesFormat::Markdown => {
                let cell = |s: &str| s.replace('|', "\\|");
                writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} |",
                    rule.id,
                    rule.severity.as_str(),
                    rule.vantage.as_str(),
                    cell(rule.vantage_why),
                    cell(rule.spec_section),
                    cell(rule.statement)
                )?;
            }
            RulesFormat::Text => writeln!(
                out,
                "{:<12} {:<8} {:<11} {:<8} {:<10} {}",
                rule.id,
                rule.severity.as_str(),
                rule.vantage.as_str(),
                rule.protocol.as_str(),
                rule.spec_section,
                rule.statement
            )?,
        }
    }
    Ok(())
}

/// Where a finding is: `frame N`, or `host1 frame N` with several captures.
fn place(r: &Reported<'_>, several: bool) -> String {
    if several {
        format!("{} frame {}", r.capture, r.finding.frame)
    } else {
        format!("frame {}", r.finding.frame)
    }
}

fn write_text(
    out: &mut dyn Write,
    results: &[CaptureResult],
    reports: &[LintReport],
    summaries: &BTreeMap<RuleId, RuleSummary<'_>>,
    several: bool,
    given_none: bool,
) -> io::Result<()> {
    for (rule, s) in summaries {
        let r = rule.rule();
        writeln!(
            out,
            "{} {}: {} finding{} (spec {}) {}",
            r.id,
            s.severity,
            s.count,
            if s.count == 1 { "" } else { "s" },
            r.spec_section,
            r.statement
        )?;
        for f in &s.first {
            let ev = f
                .finding
                .ev
                .map_or_else(String::new, |ev| format!(" ev {ev}"));
            writeln!(
                out,
                "  {} {}{}: {}",
                place(f, several),
                f.finding.conn,
                ev,
                f.finding.evidence()
            )?;
        }
        let more = s.count.saturating_sub(s.first.len() as u64);
        if more > 0 {
            writeln!(out, "  ... and {more} more")?;
        }
    }
    for (result, report) in results.iter().zip(reports) {
        let host = match report.host {
            Some(h) => format!("captured on {h}"),
            None if given_none => {
                "capture point unknown (--vantage none): only rules of vantage either judged"
                    .to_string()
            }
            None if several => "capture point unknown: only rules of vantage either and \
                 two-capture judged (the traffic did not say which host it was taken on; lint \
                 this capture alone with --vantage ADDR, the address of that host, for the \
                 others)"
                .to_string(),
            None => "capture point unknown: only rules of vantage either judged (the traffic \
                     did not say which host it was taken on; give it with --vantage ADDR, the \
                     address of that host)"
                .to_string(),
        };
        writeln!(out, "{}: {host}", result.path.display())?;
        if report.findings_dropped > 0 {
            writeln!(
                out,
                "{}: {} findings were counted but not kept",
                result.path.display(),
                report.findings_dropped
            )?;
        }
        for n in &report.not_judged {
            writeln!(
                out,
                "{}: {}: {} packets not judged (what the rule needed had left the lint's \
                 bounded state: docs/lint.md)",
                result.path.display(),
                n.rule,
                n.count
            )?;
        }
    }
    let count = |sev: Severity| -> (usize, u64) {
        let of = summaries.values().filter(|s| s.severity == sev);
        (of.clone().count(), of.map(|s| s.count).sum())
    };
    let (error_rules, errors) = count(Severity::Error);
    let (warning_rules, warnings) = count(Severity::Warning);
    if summaries.is_empty() {
        writeln!(
            out,
            "lint: clean: no rule broken ({} rules checked)",
            lint::rule_count()
        )
    } else {
        writeln!(
            out,
            "lint: {errors} error finding{} ({error_rules} rule{}), {warnings} warning finding{} \
             ({warning_rules} rule{}) of {} rules",
            if errors == 1 { "" } else { "s" },
            if error_rules == 1 { "" } else { "s" },
            if warnings == 1 { "" } else { "s" },
            if warning_rules == 1 { "" } else { "s" },
            lint::rule_count()
        )
    }
}

fn write_json(out: &mut dyn Write, reported: &[Reported<'_>]) -> io::Result<()> {
    for r in reported {
        let f = r.finding;
        let line = serde_json::json!({
            "rule": f.rule().id,
            "severity": r.severity.as_str(),
            "capture": r.capture,
            "frame": f.frame,
            "related_frame": f.related_frame,
            "ts_ns": f.ts_ns,
            "connection": f.conn.to_string(),
            "path": f.ev,
            "evidence": f.evidence(),
        });
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Escapes text for XML content and attribute values; characters XML 1.0
/// cannot hold are replaced.
fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// The JUnit report: one test case per rule of the registry. A rule with
/// error-severity findings fails (`<failure>`, its first findings'
/// evidence in the body); a rule with warnings passes and lists them in
/// `<system-out>`; an allowed rule, a side-specific one the capture
/// point could not judge, or a two-capture one on a single capture, is
/// `<skipped>`.
fn write_junit(
    path: &Path,
    summaries: &BTreeMap<RuleId, RuleSummary<'_>>,
    reports: &[LintReport],
    config: &LintConfig,
) -> io::Result<()> {
    let judged_everywhere = reports.iter().all(|r| r.host.is_some());
    let mut cases = String::new();
    let mut failures = 0;
    let mut skipped = 0;
    for (id, rule) in lint::rules() {
        let class = format!("metaroce.lint.{}", rule.protocol.as_str());
        cases.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\">\n",
            xml_escape(&class),
            xml_escape(rule.id)
        ));
        let side_specific = matches!(
            rule.vantage,
            lint::Vantage::Sender | lint::Vantage::Receiver | lint::Vantage::Endpoint
        );
        let two_capture = rule.vantage == lint::Vantage::TwoCapture;
        match (summaries.get(&id), config.severity(id)) {
            (_, None) => {
                skipped += 1;
                cases.push_str("      <skipped message=\"allowed (--allow)\"/>\n");
            }
            (Some(s), Some(_)) => {
                let body: String = s
                    .first
                    .iter()
                    .map(|f| {
                        format!(
                            "{} {}: {}\n",
                            place(f, reports.len() > 1),
                            f.finding.conn,
                            f.finding.evidence()
                        )
                    })
                    .collect();
                let message = format!(
                    "{} {} finding{}: {}",
                    s.count,
                    s.severity,
                    if s.count == 1 { "" } else { "s" },
                    rule.statement
                );
                if s.severity == Severity::Error {
                    failures += 1;
                    cases.push_str(&format!(
                        "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
                        rule.id,
                        xml_escape(&message),
                        xml_escape(&body)
                    ));
                } else {
                    cases.push_str(&format!(
                        "      <system-out>{}\n{}</system-out>\n",
                        xml_escape(&message),
                        xml_escape(&body)
                    ));
                }
            }
            (None, Some(_)) if two_capture && reports.len() < 2 => {
                skipped += 1;
                cases.push_str(
                    "      <skipped message=\"not judged: a two-capture rule needs two captures of the traffic\"/>\n",
                );
            }
            (None, Some(_)) if side_specific && !judged_everywhere => {
                skipped += 1;
                cases.push_str(
                    "      <skipped message=\"not judged: the capture point is unknown (--vantage)\"/>\n",
                );
            }
            (None, Some(_)) => {}
        }
        cases.push_str("    </testcase>\n");
    }
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <testsuites name=\"metaroce-lint\" tests=\"{n}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">\n\
         \x20 <testsuite name=\"metaroce-lint\" tests=\"{n}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">\n\
         {cases}\
         \x20 </testsuite>\n\
         </testsuites>\n",
        n = lint::rule_count(),
    );
    fs::write(path, xml)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escaping() {
        assert_eq!(
            xml_escape("a<b & \"c\" 'd'>\u{1}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;\u{FFFD}"
        );
    }

    #[test]
    fn vantage_values() {
        assert_eq!(parse_point("auto"), Ok(CapturePoint::Auto));
        assert_eq!(parse_point("none"), Ok(CapturePoint::Unknown));
        assert_eq!(
            parse_point("10.0.0.1"),
            Ok(CapturePoint::Host("10.0.0.1".parse().unwrap()))
        );
        assert!(parse_point("sender").is_err());
    }

    /// The options' defaults are the engine's.
    #[test]
    fn timing_defaults_are_the_lints() {
        use clap::Parser;
        #[derive(Parser)]
        struct Lint {
            #[command(flatten)]
            args: LintArgs,
        }
        let cli = Lint::parse_from(["lint", "capture.pcap"]);
        assert_eq!(cli.args.timings.timings(), LintTimings::default());
        let cli = Lint::parse_from(["lint", "--ack-delay", "4ms", "--nack-rtts", "3", "c.pcap"]);
        let t = cli.args.timings.timings();
        assert_eq!((t.ack_delay_ns, t.nack_rtts), (4_000_000, 3));
    }
}
