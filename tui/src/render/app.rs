//! The whole screen. Layout (main view):
//!
//! ```text
//!  metaroce-top │ live eth0 │ 512k pkt/s 4.1 GB/s │ drops kernel 0 if 0 │ …   ← status
//! ┌Connections (sort ▼goodput)─────────────────────────────────────────────┐
//! │ Connection            Goodput  Pkt/s  DATA  Retx  Loss  CE  RTT p99 …  │ ← connections
//! │▶10.0.0.1#256→10.0.0.2#512 …                                            │
//! └────────────────────────────────────────────────────────────────────────┘
//! ┌Paths (ev) of the selection──────────┐┌ACK RTT, all flows──────────────┐
//! │ loss ▇▇▇▇  CE ▇▇▇▇   (heat strips)  ││ p50 … p99 … p99.9 … max …      │
//! │ ev share pkts rx loss% tx loss% …   ││      █                         │ ← paths │ latency
//! └─────────────────────────────────────┘└1u──10u──100u──1m──10m─────────┘
//! ┌Events──────────────────────────────────────────────────────────────────┐
//! │ +0.000200s STALL 10.0.0.1#256→10.0.0.2#512 …                           │ ← events
//! └────────────────────────────────────────────────────────────────────────┘
//!  q quit  ? help  ↑↓ select  Enter detail  s sort  / filter  p pause …      ← hints
//! ```
//!
//! In the detail view (`Enter`) the connections and paths panes give way
//! to [`super::detail`]; the paths pane stays beside it (a RoCEv2 flow has
//! no paths: its detail takes the whole row). `?` draws the
//! help overlay ([`super::help`]) on top of either view.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::app::{App, Selected, View};

use super::{connections, detail, events, help, latency, paths, status};

/// Draws one frame from `app` (which holds the snapshot).
pub fn render(f: &mut Frame<'_>, app: &mut App) {
    let [status_area, body, hints_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(8),
        Constraint::Length(1),
    ])
    .areas(f.area());
    status::render(f, status_area, app);
    match app.view {
        View::Main => {
            let [conns, middle, log] = Layout::vertical([
                Constraint::Percentage(38),
                Constraint::Percentage(37),
                Constraint::Fill(1),
            ])
            .areas(body);
            connections::render(f, conns, app);
            let [p, l] =
                Layout::horizontal([Constraint::Percentage(55), Constraint::Fill(1)]).areas(middle);
            paths::render(f, p, app);
            latency::render(f, l, app);
            events::render(f, log, app);
        }
        View::Detail => {
            let [top, log] =
                Layout::vertical([Constraint::Percentage(70), Constraint::Fill(1)]).areas(body);
            if matches!(app.selection(), Some(Selected::Roce(_))) {
                // A RoCEv2 flow has no paths (ev): the detail takes the row.
                detail::render(f, top, app);
            } else {
                let [d, p] = Layout::horizontal([Constraint::Percentage(55), Constraint::Fill(1)])
                    .areas(top);
                detail::render(f, d, app);
                paths::render(f, p, app);
            }
            events::render(f, log, app);
        }
    }
    render_hints(f, hints_area, app);
    if app.help {
        help::render(f, f.area());
    }
}

fn render_hints(f: &mut Frame<'_>, area: Rect, app: &App) {
    let key = Style::default()
        .fg(Color::Black)
        .bg(Color::Cyan)
        .add_modifier(Modifier::BOLD);
    let line = if let Some(input) = &app.filter_input {
        Line::from(vec![
            Span::styled(" filter ", key),
            Span::raw(format!(" {input}▏  (Enter apply, Esc cancel)")),
        ])
    } else {
        let mut spans = Vec::new();
        for (k, what) in [
            ("q", "quit"),
            ("?", "help"),
            ("↑↓", "select"),
            ("Enter", "detail"),
            ("s/1-4", "sort"),
            ("/", "filter"),
            ("p", "pause"),
            ("r", "reset"),
            ("w", "save"),
        ] {
            spans.push(Span::styled(format!(" {k} "), key));
            spans.push(Span::raw(format!(" {what} ")));
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(line), area);
}
