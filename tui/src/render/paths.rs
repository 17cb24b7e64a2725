//! Per-path (ev) view of the selected direction: heat strips of loss and CE
//! (one cell per ev, green → red), then per ev its share of the traffic
//! (bar), packets, loss, CE marks, retransmissions and ACK RTT.

use analyzer::engine::PathReport;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};

use crate::app::{App, Selected};

use super::fmt;

/// Colour of a rate (loss or CE fraction) on the heat strip.
pub fn heat(frac: f64) -> Color {
    if frac <= 0.0 {
        Color::Green
    } else if frac < 0.01 {
        Color::LightGreen
    } else if frac < 0.05 {
        Color::Yellow
    } else if frac < 0.2 {
        Color::LightRed
    } else {
        Color::Red
    }
}

fn loss(p: &PathReport) -> u64 {
    p.lost + p.lost_inferred
}

fn strip<'a>(
    label: &'a str,
    paths: &[&PathReport],
    value: impl Fn(&PathReport) -> u64,
) -> Line<'a> {
    let mut spans = vec![Span::raw(format!(" {label:<5}"))];
    for p in paths {
        let frac = if p.packets == 0 {
            0.0
        } else {
            value(p) as f64 / p.packets as f64
        };
        spans.push(Span::styled("█", Style::default().fg(heat(frac))));
    }
    Line::from(spans)
}

pub fn render(f: &mut Frame<'_>, area: Rect, app: &App) {
    let sel = app.selection();
    let title = match &sel {
        Some(Selected::Dir(r)) => format!(" Paths (ev) of {} ", r.key),
        _ => " Paths (ev) ".to_string(),
    };
    let block = Block::bordered().title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let row = match sel {
        Some(Selected::Dir(r)) => r,
        Some(Selected::Roce(r)) => {
            let text = format!(
                " {} is a RoCEv2 flow: one path, no ev (Enter: its detail)",
                r.key
            );
            f.render_widget(Paragraph::new(text), inner);
            return;
        }
        None => {
            f.render_widget(Paragraph::new(" no connection selected"), inner);
            return;
        }
    };
    let d = row.dir;
    let mut paths: Vec<&PathReport> = d.paths.iter().collect();
    paths.sort_by_key(|p| p.ev);
    let total: u64 = paths.iter().map(|p| p.packets).sum();
    let [strips, table_area] =
        Layout::vertical([Constraint::Length(2), Constraint::Fill(1)]).areas(inner);
    f.render_widget(
        Paragraph::new(vec![
            strip("loss", &paths, loss),
            strip("CE", &paths, |p| p.ce_marked),
        ]),
        strips,
    );
    let bar_width = 10;
    let header = Row::new(vec![
        "ev", "share", "", "pkts", "loss", "loss%", "CE", "retx", "RTT p50", "RTT p99",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let rows = paths.iter().map(|p| {
        let share = if total == 0 {
            0.0
        } else {
            p.packets as f64 / total as f64
        };
        let l = loss(p);
        let lfrac = if p.packets == 0 {
            0.0
        } else {
            l as f64 / p.packets as f64
        };
        Row::new(vec![
            Cell::from(p.ev.to_string()),
            Cell::from(fmt::bar(share, bar_width)).style(Style::default().fg(Color::Cyan)),
            Cell::from(format!("{:.0}%", share * 100.0)),
            Cell::from(fmt::count(p.packets)),
            Cell::from(fmt::count(l)).style(Style::default().fg(heat(lfrac))),
            Cell::from(fmt::pct(l, p.packets)),
            Cell::from(fmt::count(p.ce_marked)),
            Cell::from(fmt::count(p.retransmissions)),
            Cell::from(fmt::ns(p.ack_rtt_ns.p50)),
            Cell::from(fmt::ns(p.ack_rtt_ns.p99)),
        ])
    });
    let widths = [
        Constraint::Length(5),
        Constraint::Length(bar_width as u16),
        Constraint::Length(4),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(8),
        Constraint::Length(8),
    ];
    f.render_widget(Table::new(rows, widths).header(header), table_area);
}
