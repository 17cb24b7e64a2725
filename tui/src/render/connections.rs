//! The connections table: one row per connection direction that sent DATA
//! (`a` shows feedback-only directions too), sortable by goodput,
//! retransmissions, RTT p99 and stalls.

use analyzer::engine::DirectionReport;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, HighlightSpacing, Row, Table, TableState};

use crate::app::{App, SortKey};

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

/// RoCEv2 flows (by destination QP): counted by the same engine, shown
/// below the MetaRoCE table; selectable like its rows (↑↓ go on from the
/// last MetaRoCE row), with the same sort and filter.
fn render_rocev2(f: &mut Frame<'_>, area: Rect, app: &App) {
    let rows = app.roce_rows();
    let selected = app.selected_roce_index(&rows);
    let header = Row::new(vec![
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
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let body = rows.iter().map(|r| {
        let f = r.flow;
        Row::new(vec![
            Cell::from(r.key.to_string()),
            Cell::from(fmt::bps(r.rate.goodput_bps)),
            Cell::from(fmt::per_s(r.rate.packets_per_s)),
            Cell::from(fmt::count(f.data_packets)),
            Cell::from(fmt::count(f.data_bytes)),
            Cell::from(fmt::count(f.retransmissions)).style(warn(f.retransmissions, Color::Yellow)),
            Cell::from(fmt::count(f.naks)).style(warn(f.naks, Color::Yellow)),
            Cell::from(fmt::count(f.rnr_naks)).style(warn(f.rnr_naks, Color::Yellow)),
            Cell::from(fmt::count(f.cnps)).style(warn(f.cnps, Color::Magenta)),
            Cell::from(fmt::count(f.ce_marked)).style(warn(f.ce_marked, Color::Magenta)),
            Cell::from(fmt::ns(f.ack_rtt_ns.p50)),
            Cell::from(fmt::ns(f.ack_rtt_ns.p99)),
        ])
    });
    let widths = [
        Constraint::Min(36),
        Constraint::Length(11),
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(8),
        Constraint::Length(8),
    ];
    let table = Table::new(body, widths)
        .header(header)
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
            Cell::from(format!("{arrow}{label}")).style(Style::default().fg(Color::Yellow))
        } else {
            Cell::from(label)
        }
    };
    let header = Row::new(vec![
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
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let body = rows.iter().map(|r| {
        let d = r.dir;
        let stalls = d.stalls.len() as u64 + d.stalls_dropped;
        let open = d.stalls.iter().any(|s| s.open);
        let loss = lost(d);
        Row::new(vec![
            Cell::from(r.key.to_string()),
            Cell::from(fmt::bps(r.rate.goodput_bps)),
            Cell::from(fmt::per_s(r.rate.packets_per_s)),
            Cell::from(fmt::count(d.data_packets)),
            Cell::from(fmt::count(d.retransmissions)).style(warn(d.retransmissions, Color::Yellow)),
            Cell::from(fmt::pct(d.retransmissions, d.data_packets)),
            Cell::from(fmt::count(loss)).style(warn(loss, Color::Red)),
            Cell::from(fmt::count(d.out_of_order)),
            Cell::from(fmt::count(d.ce_marked)).style(warn(d.ce_marked, Color::Magenta)),
            Cell::from(fmt::count(d.nacks)).style(warn(d.nacks, Color::Yellow)),
            Cell::from(fmt::count(d.cnps)).style(warn(d.cnps, Color::Magenta)),
            Cell::from(fmt::ns(d.ack_rtt_ns.p50)),
            Cell::from(fmt::ns(d.ack_rtt_ns.p99)),
            Cell::from(if open {
                format!("{stalls}+open")
            } else {
                stalls.to_string()
            })
            .style(warn(stalls, Color::Red)),
            Cell::from(d.paths.len().to_string()),
        ])
    });
    let widths = [
        Constraint::Min(30),
        Constraint::Length(11),
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(5),
    ];
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
    let table = Table::new(body, widths)
        .header(header)
        .block(Block::bordered().title(title))
        .column_spacing(1)
        .row_highlight_style(highlight())
        .highlight_symbol("▶")
        .highlight_spacing(HighlightSpacing::Always);
    let mut state = TableState::default().with_selected(selected);
    f.render_stateful_widget(table, area, &mut state);
}
