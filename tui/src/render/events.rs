//! The event log, newest first: stalls, NACK and CNP bursts, new
//! connections, paths that went quiet (retired) or came back.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use crate::app::App;
use crate::events::EventKind;

pub fn color(kind: EventKind) -> Color {
    match kind {
        EventKind::NewConnection => Color::Green,
        EventKind::Stall => Color::Red,
        EventKind::StallEnded => Color::LightRed,
        EventKind::NackBurst => Color::Yellow,
        EventKind::CnpBurst => Color::Magenta,
        EventKind::PathRetired => Color::LightRed,
        EventKind::PathResumed => Color::Cyan,
    }
}

pub fn render(f: &mut Frame<'_>, area: Rect, app: &App) {
    let snap = &app.snapshot;
    let first = snap.report.capture.first_ts_ns;
    let lines: Vec<Line<'_>> = snap
        .events
        .iter()
        .rev()
        .take(usize::from(area.height.saturating_sub(2)))
        .map(|e| {
            let t = e.ts_ns.saturating_sub(first) as f64 / 1e9;
            Line::from(vec![
                Span::styled(format!(" +{t:.6}s "), Style::default().fg(Color::DarkGray)),
                Span::styled(
                    format!("{:<9}", e.kind.label()),
                    Style::default().fg(color(e.kind)),
                ),
                Span::raw(format!(" {} ", e.flow)),
                Span::raw(e.text.clone()),
            ])
        })
        .collect();
    let title = format!(" Events ({}) ", snap.events.len());
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}
