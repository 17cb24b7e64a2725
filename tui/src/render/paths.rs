//! Per-path (ev) view of the selected direction: heat strips of loss and CE
//! (one cell per ev, green → red), then per ev its share of the traffic
//! (bar), packets, loss with its two rates, CE marks, retransmissions and
//! ACK RTT.
//!
//! The two losses are what each capture point can see (spec 9): `rx lost`
//! is `path_seq` values that never arrived, and `rx loss%` their rate
//! lost / (received + lost), meaningful on a receiver-side capture; `tx
//! lost` is transmissions retransmitted before any ack, and `tx loss%`
//! lost / sent, meaningful on a sender-side capture.

use analyzer::engine::PathReport;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Table};

use crate::app::{App, Selected};

use super::columns::Fitted;
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

/// The larger of the two loss rates (the heat strip's colour).
fn loss_rate(p: &PathReport) -> f64 {
    let rx = p.receive_loss_rate().unwrap_or(0.0);
    rx.max(p.send_loss_rate().unwrap_or(0.0))
}

fn ce_rate(p: &PathReport) -> f64 {
    if p.packets == 0 {
        0.0
    } else {
        p.ce_marked as f64 / p.packets as f64
    }
}

/// A rate as a percentage, "-" when undefined.
fn rate(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{:.1}%", r * 100.0))
}

fn strip<'a>(label: &'a str, paths: &[&PathReport], rate: impl Fn(&PathReport) -> f64) -> Line<'a> {
    let mut spans = vec![Span::raw(format!(" {label:<5}"))];
    for p in paths {
        spans.push(Span::styled("█", Style::default().fg(heat(rate(p)))));
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
            strip("loss", &paths, loss_rate),
            strip("CE", &paths, ce_rate),
        ]),
        strips,
    );
    // The full table when the pane is wide enough; else shorter headers
    // (`rx%` is `rx loss%`), a shorter bar and no spare room.
    let full = path_table(&paths, total, &FULL);
    let t = if full.needed(COLUMN_SPACING) <= table_area.width {
        full
    } else {
        path_table(&paths, total, &NARROW)
    };
    let header = t
        .header()
        .style(Style::default().add_modifier(Modifier::BOLD));
    f.render_widget(
        Table::new(t.rows(), t.widths(false))
            .header(header)
            .column_spacing(COLUMN_SPACING),
        table_area,
    );
}

const COLUMN_SPACING: u16 = 1;

/// How the paths table is laid out: its headers, the share bar's width
/// and the columns' usual widths.
struct Shape {
    headers: [&'static str; 11],
    bar_width: usize,
    at_least: &'static [u16],
}

const FULL: Shape = Shape {
    headers: [
        "ev", "share", "", "pkts", "rx lost", "rx loss%", "tx lost", "tx loss%", "CE", "retx",
        "RTT p99",
    ],
    bar_width: 10,
    at_least: &[5, 10, 4, 6, 7, 8, 7, 8, 5, 5, 8],
};

const NARROW: Shape = Shape {
    headers: [
        "ev", "share", "", "pkts", "rx lost", "rx%", "tx lost", "tx%", "CE", "retx", "RTT p99",
    ],
    bar_width: 5,
    at_least: &[],
};

fn path_table(paths: &[&PathReport], total: u64, shape: &Shape) -> Fitted {
    let plain = Style::default();
    let mut t =
        Fitted::new(shape.headers.map(|h| (h.to_string(), plain)).into()).at_least(shape.at_least);
    for p in paths {
        let share = if total == 0 {
            0.0
        } else {
            p.packets as f64 / total as f64
        };
        let rx = p.receive_loss_rate();
        let tx = p.send_loss_rate();
        let hot = |r: Option<f64>| Style::default().fg(heat(r.unwrap_or(0.0)));
        t.push(vec![
            (p.ev.to_string(), plain),
            (
                fmt::bar(share, shape.bar_width),
                Style::default().fg(Color::Cyan),
            ),
            (format!("{:.0}%", share * 100.0), plain),
            (fmt::count(p.packets), plain),
            (fmt::count(p.lost), hot(rx)),
            (rate(rx), plain),
            (fmt::count(p.lost_inferred), hot(tx)),
            (rate(tx), plain),
            (fmt::count(p.ce_marked), plain),
            (fmt::count(p.retransmissions), plain),
            (fmt::ns(p.ack_rtt_ns.p99), plain),
        ]);
    }
    t
}
