//! The connections table: one row per connection direction that sent DATA
//! (`a` shows feedback-only directions too), sortable by goodput,
//! retransmissions, RTT p99 and stalls; its last column counts the
//! conformance lint's findings on the connection (errors/warnings).

use analyzer::engine::DirectionReport;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, HighlightSpacing, Table, TableState};

use crate::app::{App, SortKey};
use crate::model::LintCounts;

use super::columns::Fitted;
use super::fmt;

/// Loss of a direction: receiver-side path_seq gaps plus sender-side
/// inferred losses, summed over its paths (spec 9).
pub fn lost(d: &DirectionReport) -> u64 {
    d.paths.iter().map(|p| p.lost + p.lost_inferred).sum()
}

pub fn render(f: &mut Frame<'_>, area: Rect, app: &mut App) {
    let roce = app.snapshot.report.rocev2.len();
    if roce > 0 {
        // RoCEv2 only: the flows table gets the room.
        let h = if app.snapshot.report.directions.is_empty() {
            area.height.saturating_sub(4).max(4)
        } else {
            (roce as u16 + 3).min(area.height / 2).max(4)
        };
        let [top, bottom] =
            Layout::vertical([Constraint::Fill(1), Constraint::Length(h)]).areas(area);
        render_metaroce(f, top, app);
        render_rocev2(f, bottom, app);
    } else {
        render_metaroce(f, area, app);
    }
}

fn highlight() -> Style {
    Style::default()
        .bg(Color::DarkGray)
        .add_modifier(Modifier::BOLD)
}

fn warn(n: u64, c: Color) -> Style {
    if n > 0 {
        Style::default().fg(c)
    } else {
        Style::default()
    }
}

/// A count, in colour `c` when not zero.
fn counted(n: u64, c: Color) -> (String, Style) {
    (fmt::count(n), warn(n, c))
}

/// The lint's findings on a connection (both directions): "errors/warnings",
/// red with errors, yellow with warnings only; "-" when the lint is off.
pub fn lint_cell(on: bool, c: LintCounts) -> (String, Style) {
    if !on {
        return ("-".into(), Style::default());
    }
    let style = if c.errors > 0 {
        Style::default().fg(Color::Red)
    } else {
        warn(c.warnings, Color::Yellow)
    };
    (
        format!("{}/{}", fmt::count(c.errors), fmt::count(c.warnings)),
        style,
    )
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// RoCEv2 flows (by destination QP): counted by the same engine, shown
/// below the MetaRoCE table; selectable like its rows (↑↓ go on from the
/// last MetaRoCE row), with the same sort and filter.
fn render_rocev2(f: &mut Frame<'_>, area: Rect, app: &App) {
    let rows = app.roce_rows();
    let selected = app.selected_roce_index(&rows);
    let plain = Style::default();
    let mut t = Fitted::new(
        [
            "RoCEv2 flow (src→dst QP)",
            "Rate",
            "Pkt/s",
            "DATA",
            "bytes",
            "Retx",
            "NAK",
            "RNR",
            "CNP",
            "CE",
            "RTT p50",
            "RTT p99",
            "Lint",
        ]
        .map(|h| (h.to_string(), plain))
        .into(),
    )
    .at_least(&[36, 11, 8, 7, 8, 6, 5, 5, 5, 5, 8, 8, 4]);
    for r in &rows {
        let f = r.flow;
        t.push(vec![
            (r.key.to_string(), plain),
            (fmt::bps(r.rate.goodput_bps), plain),
            (fmt::per_s(r.rate.packets_per_s), plain),
            (fmt::count(f.data_packets), plain),
            (fmt::count(f.data_bytes), plain),
            counted(f.retransmissions, Color::Yellow),
            counted(f.naks, Color::Yellow),
            counted(f.rnr_naks, Color::Yellow),
            counted(f.cnps, Color::Magenta),
            counted(f.ce_marked, Color::Magenta),
            (fmt::ns(f.ack_rtt_ns.p50), plain),
            (fmt::ns(f.ack_rtt_ns.p99), plain),
            lint_cell(app.snapshot.lint_on(), LintCounts::of_rules(&f.lint)),
        ]);
    }
    let table = Table::new(t.rows(), t.widths(true))
        .header(t.header().style(bold()))
        .block(Block::bordered().title(format!(
            " RoCEv2 flows ({} of {}) ",
            rows.len(),
            app.snapshot.report.rocev2.len()
        )))
        .row_highlight_style(highlight())
        .highlight_symbol("▶")
        .highlight_spacing(HighlightSpacing::Always);
    let mut state = TableState::default().with_selected(selected);
    f.render_stateful_widget(table, area, &mut state);
}

fn render_metaroce(f: &mut Frame<'_>, area: Rect, app: &mut App) {
    app.page_rows = usize::from(area.height.saturating_sub(3)).max(1);
    let rows = app.rows();
    let selected = app.selected_index(&rows);
    let arrow = if app.descending { "▼" } else { "▲" };
    let head = |label: &'static str, key: Option<SortKey>| {
        if key == Some(app.sort) {
            (
                format!("{arrow}{label}"),
                Style::default().fg(Color::Yellow),
            )
        } else {
            (label.to_string(), Style::default())
        }
    };
    let mut t = Fitted::new(vec![
        head("Connection (src#conn→dst#conn)", None),
        head("Goodput", Some(SortKey::Goodput)),
        head("Pkt/s", None),
        head("DATA", None),
        head("Retx", Some(SortKey::Retransmissions)),
        head("Retx%", None),
        head("Loss", None),
        head("OOO", None),
        head("CE", None),
        head("NACK", None),
        head("CNP", None),
        head("RTT p50", None),
        head("RTT p99", Some(SortKey::RttP99)),
        head("Stalls", Some(SortKey::Stalls)),
        head("Paths", None),
        head("Lint", None),
    ])
    .at_least(&[30, 11, 8, 7, 6, 6, 6, 6, 6, 5, 5, 8, 9, 7, 5, 4]);
    let plain = Style::default();
    for r in &rows {
        let d = r.dir;
        let stalls = d.stalls.len() as u64 + d.stalls_dropped;
        let open = d.stalls.iter().any(|s| s.open);
        let (stalls_text, _) = counted(stalls, Color::Red);
        t.push(vec![
            (r.key.to_string(), plain),
            (fmt::bps(r.rate.goodput_bps), plain),
            (fmt::per_s(r.rate.packets_per_s), plain),
            (fmt::count(d.data_packets), plain),
            counted(d.retransmissions, Color::Yellow),
            (fmt::pct(d.retransmissions, d.data_packets), plain),
            counted(lost(d), Color::Red),
            (fmt::count(d.out_of_order), plain),
            counted(d.ce_marked, Color::Magenta),
            counted(d.nacks, Color::Yellow),
            counted(d.cnps, Color::Magenta),
            (fmt::ns(d.ack_rtt_ns.p50), plain),
            (fmt::ns(d.ack_rtt_ns.p99), plain),
            (
                if open {
                    format!("{stalls_text}+open")
                } else {
                    stalls_text
                },
                warn(stalls, Color::Red),
            ),
            (fmt::count(d.paths.len() as u64), plain),
            lint_cell(app.snapshot.lint_on(), app.snapshot.connection_lint(r.key)),
        ]);
    }
    let title = Line::from(format!(
        " Connections ({} of {}) sort {arrow}{}{} ",
        rows.len(),
        app.snapshot.report.directions.len(),
        app.sort.label(),
        if app.filter.is_empty() {
            String::new()
        } else {
            format!(" filter \"{}\"", app.filter)
        }
    ));
    let table = Table::new(t.rows(), t.widths(true))
        .header(t.header().style(bold()))
        .block(Block::bordered().title(title))
        .column_spacing(1)
        .row_highlight_style(highlight())
        .highlight_symbol("▶")
        .highlight_spacing(HighlightSpacing::Always);
    let mut state = TableState::default().with_selected(selected);
    f.render_stateful_widget(table, area, &mut state);
}
