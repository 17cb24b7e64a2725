//! Detail view of one connection: the selected direction's counters, its
//! latencies, its stalls, what the reverse direction sent back and the
//! lint's findings on the connection (per rule); or, for
//! a RoCEv2 flow, its QP, PSN counters, NAKs and RNR NAKs, CNPs, ECN marks
//! and message latency.

use std::collections::BTreeMap;

use analyzer::engine::{DirectionReport, RoceFlowReport, Summary};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

use crate::app::{App, ConnRow, RoceRow, Selected};
use crate::model::{self, DirKey};
use analyzer::lint::Severity;

use super::{connections, fmt};

fn kv(k: &str, v: String) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!(" {k:<16}"), Style::default().fg(Color::DarkGray)),
        Span::raw(v),
    ])
}

fn head(t: &str) -> Line<'static> {
    Line::from(Span::styled(
        format!(" {t}"),
        Style::default()
            .fg(Color::Yellow)
            .add_modifier(Modifier::BOLD),
    ))
}

fn summary(s: &Summary) -> String {
    if s.count == 0 {
        "-".into()
    } else {
        format!(
            "n={} p50 {} p99 {} p99.9 {} max {}",
            fmt::count(s.count),
            fmt::ns(s.p50),
            fmt::ns(s.p99),
            fmt::ns(s.p999),
            fmt::ns(s.max)
        )
    }
}

fn counters(d: &DirectionReport, goodput_bps: f64) -> Vec<Line<'static>> {
    vec![
        head("Sent by this direction"),
        kv(
            "DATA",
            format!("{} pkts, {} bytes", d.data_packets, d.data_bytes),
        ),
        kv(
            "goodput",
            format!(
                "{} now, {} average",
                fmt::bps(goodput_bps),
                fmt::bps(d.goodput_bps as f64)
            ),
        ),
        kv(
            "retransmissions",
            format!(
                "{} (fast {}, timeout {}, spurious {})",
                d.retransmissions,
                d.fast_retransmissions,
                d.timeout_retransmissions,
                d.spurious_retransmissions
            ),
        ),
        kv(
            "loss",
            format!(
                "{} (rx lost {}, tx lost {})",
                connections::lost(d),
                d.path_loss,
                d.paths.iter().map(|p| p.lost_inferred).sum::<u64>()
            ),
        ),
        kv(
            "out of order",
            format!(
                "{} (max distance {})",
                d.out_of_order, d.max_reorder_distance
            ),
        ),
        kv("trimmed / CE", format!("{} / {}", d.trimmed, d.ce_marked)),
        kv(
            "messages",
            format!(
                "{} completed, {} delivered",
                d.messages_completed, d.messages_delivered
            ),
        ),
        kv(
            "cum ack / high",
            format!(
                "{} / {} ({} outstanding)",
                d.cum_ack.map_or("-".into(), |v| v.to_string()),
                d.highest_psn.map_or("-".into(), |v| v.to_string()),
                d.outstanding_packets
            ),
        ),
        head("Feedback it received"),
        kv("ACK", format!("{} (ECE {})", d.acks, d.ece)),
        kv("NACK", format!("{}{}", d.nacks, parts(&d.nacks_by_code))),
        kv("CNP", format!("{}{}", d.cnps, parts(&d.cnps_by_reason))),
        kv(
            "probes",
            format!("{} sent, {} replies", d.probes, d.probe_replies),
        ),
    ]
}

/// " (GAP 1, TRIMMED 2)": the entries of a count map in parentheses (""
/// when empty).
fn parts<K: std::fmt::Display>(m: &BTreeMap<K, u64>) -> String {
    let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

fn psn(p: Option<u32>) -> String {
    p.map_or("-".into(), |v| v.to_string())
}

/// The left column of a RoCEv2 flow: what the requester sent, what the
/// responder answered, ECN.
fn roce_counters(r: &RoceFlowReport, rate: f64) -> Vec<Line<'static>> {
    vec![
        head("Requests (requester → responder)"),
        kv(
            "DATA",
            format!("{} pkts, {} bytes", r.data_packets, r.data_bytes),
        ),
        kv("rate", format!("{} now", fmt::bps(rate))),
        kv(
            "retransmissions",
            format!(
                "{} (fast {}, timeout {}, spurious {})",
                r.retransmissions,
                r.fast_retransmissions,
                r.timeout_retransmissions,
                r.spurious_retransmissions
            ),
        ),
        kv(
            "PSN first, high",
            format!("{}, {}", psn(r.first_psn), psn(r.highest_psn)),
        ),
        kv(
            "PSN acked",
            format!("{} ({} outstanding)", psn(r.acked_psn), r.outstanding_psns),
        ),
        kv(
            "READ",
            format!(
                "{} requests, {} response pkts",
                r.read_requests, r.read_response_packets
            ),
        ),
        kv("messages", format!("{} completed", r.messages_completed)),
        head("Responses (responder → requester)"),
        kv("ACK", r.acks.to_string()),
        kv("NAK", format!("{}{}", r.naks, parts(&r.naks_by_code))),
        kv("RNR NAK", r.rnr_naks.to_string()),
        kv("CNP", r.cnps.to_string()),
        head("ECN"),
        kv(
            "CE marked",
            format!("{} of {} ECN-capable pkts", r.ce_marked, r.ect_packets),
        ),
        kv("FECN / BECN", format!("{} / {}", r.fecn, r.becn)),
    ]
}

fn render_rocev2(f: &mut Frame<'_>, area: Rect, row: &RoceRow<'_>) {
    let r = row.flow;
    let block = Block::bordered().title(format!(" Detail RoCEv2 {} ", row.key));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let counters = roce_counters(r, row.rate.goodput_bps);
    let [left, right] = halves(inner, &counters);
    f.render_widget(wrapped(counters), left);
    let mut lines = vec![
        head("Flow"),
        kv("requester", r.src.to_string()),
        kv("responder", r.dst.to_string()),
        kv("dest QP", format!("{:#08x} ({})", r.dest_qp, r.dest_qp)),
        kv("first frame", r.first_frame.to_string()),
        head("Latency"),
        kv("ACK RTT", summary(&r.ack_rtt_ns)),
        kv("msg completion", summary(&r.msg_completion_ns)),
    ];
    for (op, s) in &r.msg_completion_by_op_ns {
        if s.count > 0 {
            lines.push(kv(&format!("  {op}"), summary(s)));
        }
    }
    f.render_widget(wrapped(lines), right);
}

/// The counters' column as wide as its widest line (at most 60 % of the
/// pane), the other column the rest: values are not cut where there is
/// room, and wrap where there is not ([`wrapped`]).
fn halves(inner: Rect, left: &[Line<'_>]) -> [Rect; 2] {
    let widest = left.iter().map(Line::width).max().unwrap_or(0) as u16;
    let cap = inner.width.saturating_mul(3) / 5;
    Layout::horizontal([Constraint::Length(widest.min(cap) + 1), Constraint::Fill(1)]).areas(inner)
}

/// Lines that continue on the next row instead of being cut at the edge.
fn wrapped(lines: Vec<Line<'static>>) -> Paragraph<'static> {
    Paragraph::new(lines).wrap(Wrap { trim: false })
}

pub fn render(f: &mut Frame<'_>, area: Rect, app: &App) {
    match app.selection() {
        Some(Selected::Dir(row)) => render_metaroce(f, area, app, &row),
        Some(Selected::Roce(row)) => render_rocev2(f, area, &row),
        None => f.render_widget(
            Paragraph::new(" no connection selected").block(Block::bordered().title(" Detail ")),
            area,
        ),
    }
}

/// The lint's findings on the connection: the totals, then each rule that
/// fired, on this direction's packets and on the reverse direction's.
fn lint_lines(app: &App, key: DirKey, lines: &mut Vec<Line<'static>>) {
    let snap = &app.snapshot;
    if !snap.lint_on() {
        lines.push(head("Lint: off"));
        return;
    }
    let c = snap.connection_lint(key);
    let plural = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    lines.push(head(&format!(
        "Lint: {}, {}",
        plural(c.errors, "error"),
        plural(c.warnings, "warning")
    )));
    for (which, k) in [("", key), (" (reverse)", key.reverse())] {
        let Some((_, d)) = snap.direction(k) else {
            continue;
        };
        for (id, n) in &d.lint {
            let severity = model::severity(id);
            let colour = match severity {
                Severity::Error => Color::Red,
                Severity::Warning => Color::Yellow,
            };
            lines.push(Line::from(vec![
                Span::styled(format!(" {id:<16}"), Style::default().fg(colour)),
                Span::raw(format!("{n} {severity}{which}")),
            ]));
        }
    }
}

fn render_metaroce(f: &mut Frame<'_>, area: Rect, app: &App, row: &ConnRow<'_>) {
    let d = row.dir;
    let block = Block::bordered().title(format!(" Detail {} ", row.key));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let counters = counters(d, row.rate.goodput_bps);
    let [left, right] = halves(inner, &counters);
    f.render_widget(wrapped(counters), left);

    let mut lines = vec![
        head("Latency"),
        kv("ACK RTT", summary(&d.ack_rtt_ns)),
        kv("fabric RTT", summary(&d.fabric_rtt_ns)),
        kv("msg completion", summary(&d.msg_completion_ns)),
        kv("msg delivery", summary(&d.msg_delivery_ns)),
    ];
    let reverse: Option<&DirectionReport> = app
        .snapshot
        .direction(DirKey::reverse(row.key))
        .map(|(_, r)| r);
    lines.push(head("Reverse direction"));
    lines.push(match reverse {
        Some(r) => kv(
            "sent",
            format!(
                "{} feedback, {} DATA, {} CTRL",
                r.feedback_sent, r.data_packets, r.ctrl
            ),
        ),
        None => kv("sent", "not captured".into()),
    });
    lint_lines(app, row.key, &mut lines);
    lines.push(head(&format!(
        "Stalls ({}{})",
        d.stalls.len(),
        if d.stalls_dropped > 0 {
            format!(" + {} not kept", d.stalls_dropped)
        } else {
            String::new()
        }
    )));
    let first = app.snapshot.report.capture.first_ts_ns;
    for s in d.stalls.iter().rev().take(8) {
        lines.push(Line::from(Span::styled(
            format!(
                "  +{:.6}s {} {}, {} outstanding, paths {}",
                s.start_ns.saturating_sub(first) as f64 / 1e9,
                fmt::ns(s.duration_ns),
                if s.open {
                    "OPEN".to_string()
                } else {
                    format!("ended by {}", s.end_cause.replace('_', " "))
                },
                s.outstanding_packets,
                fmt::evs(&s.paths_in_flight)
            ),
            Style::default().fg(if s.open { Color::Red } else { Color::LightRed }),
        )));
    }
    f.render_widget(wrapped(lines), right);
}
