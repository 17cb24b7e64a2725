//! The status line: source, packet and byte rates, libpcap drops (always
//! shown, red when non-zero), totals, IP fragments (when any: reassembled
//! datagrams and those that never completed) and the UI state.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::app::App;
use crate::model::{RunState, SourceInfo};

use super::fmt;

pub fn render(f: &mut Frame<'_>, area: Rect, app: &App) {
    let s = &app.snapshot;
    let sep = || Span::styled(" │ ", Style::default().fg(Color::DarkGray));
    let title = Style::default()
        .fg(Color::Black)
        .bg(Color::Green)
        .add_modifier(Modifier::BOLD);
    let source = match &s.source {
        SourceInfo::Live { interface, .. } => format!("live {interface}"),
        SourceInfo::Replay { file, speed } => {
            let name = std::path::Path::new(file)
                .file_name()
                .map_or_else(|| file.clone(), |n| n.to_string_lossy().into_owned());
            if *speed > 0.0 && speed.is_finite() {
                format!("replay {name} ×{speed}")
            } else {
                format!("replay {name} (max speed)")
            }
        }
    };
    let drops = |label: &str, n: u64| {
        let style = if n > 0 {
            Style::default()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().fg(Color::Green)
        };
        Span::styled(format!("{label} {}", fmt::count(n)), style)
    };
    let st = &s.stats;
    let rates = Span::raw(format!(
        "{} pkt/s {}",
        fmt::per_s(st.packets_per_s),
        fmt::bytes_per_s(st.bytes_per_s)
    ));
    let drop_spans = vec![
        Span::raw("drops "),
        drops("kernel", st.kernel_drops),
        Span::raw(" "),
        drops("if", st.interface_drops),
    ];
    // Drops are never hidden: the source name gives way first, and on a
    // very narrow terminal the drops come right after the title.
    let title = Span::styled(" metaroce-top ", title);
    let fixed = title.width()
        + 1
        + 2 * sep().width()
        + rates.width()
        + drop_spans.iter().map(Span::width).sum::<usize>();
    let width = usize::from(area.width);
    let mut spans = vec![title];
    if fixed < width {
        spans.push(Span::raw(" "));
        spans.push(Span::raw(shorten(&source, width - fixed)));
        spans.push(sep());
        spans.push(rates);
        spans.push(sep());
        spans.extend(drop_spans);
    } else {
        spans.push(Span::raw(" "));
        spans.extend(drop_spans);
        spans.push(sep());
        spans.push(rates);
    }
    spans.extend([
        sep(),
        Span::raw(format!(
            "frames {} flows {}",
            fmt::count(st.frames),
            s.report.engine.live_directions + s.report.engine.live_rocev2_flows
        )),
    ]);
    let c = &s.report.capture;
    if c.ip_fragments > 0 {
        // IP fragments are reassembled; what never completed is counted.
        let style = if c.incomplete_datagrams > 0 {
            Style::default().fg(Color::Yellow)
        } else {
            Style::default()
        };
        spans.push(sep());
        spans.push(Span::styled(
            format!(
                "IP frags {}: {} rebuilt, {} incomplete ({} frags)",
                fmt::count(c.ip_fragments),
                fmt::count(c.reassembled_datagrams),
                fmt::count(c.incomplete_datagrams),
                fmt::count(c.incomplete_fragments)
            ),
            style,
        ));
    }
    if s.report.capture.malformed > 0 || st.capture_errors > 0 {
        spans.push(sep());
        spans.push(Span::styled(
            format!(
                "malformed {} bad records {}",
                s.report.capture.malformed, st.capture_errors
            ),
            Style::default().fg(Color::Yellow),
        ));
    }
    let decapsulated: u64 = c.traffic.decapsulated.values().sum();
    if decapsulated > 0 {
        spans.push(sep());
        spans.push(Span::raw(format!("mirrored {}", fmt::count(decapsulated))));
    }
    if s.points.len() > 1 {
        // Each host pair is analysed from the first point that carried it;
        // the other points' copies of it are counted here.
        let skipped: u64 = s.points.iter().map(|p| p.copies_not_analysed).sum();
        spans.push(sep());
        spans.push(Span::raw(format!(
            "{} capture points, {} copies not analysed twice",
            s.points.len(),
            fmt::count(skipped)
        )));
    }
    if let Some(note) = &c.traffic.note {
        // Frames but none of ours: what they were and the likely cause.
        spans.push(sep());
        spans.push(Span::styled(
            note.clone(),
            Style::default().fg(Color::Yellow),
        ));
    }
    match &s.state {
        RunState::Running => {}
        RunState::Finished => {
            spans.push(sep());
            spans.push(Span::styled(
                "replay done",
                Style::default().fg(Color::Cyan),
            ));
        }
        RunState::Failed(e) => {
            spans.push(sep());
            spans.push(Span::styled(
                e.clone(),
                Style::default().fg(Color::White).bg(Color::Red),
            ));
        }
    }
    if app.paused {
        spans.push(sep());
        spans.push(Span::styled(
            "PAUSED",
            Style::default().fg(Color::Black).bg(Color::Yellow),
        ));
    }
    if let Some(m) = &app.message {
        spans.push(sep());
        spans.push(Span::styled(m.clone(), Style::default().fg(Color::Cyan)));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// `text` in at most `max` columns, with "…" when cut.
fn shorten(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        text.to_string()
    } else if max == 0 {
        String::new()
    } else {
        let mut t: String = text.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}
