//! The live latency histogram: ACK RTT samples of all flows in 1-2-5
//! buckets, with p50 / p99 / p99.9 and the buckets that hold them coloured.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use crate::app::App;
use crate::latency::{BUCKETS, bucket_label, bucket_of};

use super::fmt;

pub fn render(f: &mut Frame<'_>, area: Rect, app: &App) {
    let h = &app.snapshot.latency;
    let block =
        Block::bordered().title(format!(" ACK RTT, all flows (n={}) ", fmt::count(h.count)));
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height < 3 || inner.width < 10 {
        return;
    }
    let p = |label: &str, v: u64, c: Color| {
        vec![
            Span::styled(
                format!(" {label} "),
                Style::default().fg(c).add_modifier(Modifier::BOLD),
            ),
            Span::raw(fmt::ns(v)),
        ]
    };
    let mut spans = Vec::new();
    spans.extend(p("p50", h.p50_ns, Color::Green));
    spans.extend(p("p99", h.p99_ns, Color::Yellow));
    spans.extend(p("p99.9", h.p999_ns, Color::Red));
    spans.extend(p("max", h.max_ns, Color::Gray));
    f.render_widget(
        Paragraph::new(Line::from(spans)),
        Rect { height: 1, ..inner },
    );
    if h.count == 0 || h.buckets.len() != BUCKETS {
        f.render_widget(
            Paragraph::new(" no RTT samples yet"),
            Rect {
                y: inner.y + 1,
                height: 1,
                ..inner
            },
        );
        return;
    }
    // Bars: rows y0..y1 (exclusive), labels on the last line.
    let bars_top = inner.y + 1;
    let label_y = inner.y + inner.height - 1;
    let bar_rows = label_y - bars_top;
    let col = (inner.width / BUCKETS as u16).max(1);
    let max = h.buckets.iter().copied().max().unwrap_or(1).max(1);
    let (b50, b99, b999) = (
        bucket_of(h.p50_ns),
        bucket_of(h.p99_ns),
        bucket_of(h.p999_ns),
    );
    let buf = f.buffer_mut();
    const EIGHTHS: [&str; 9] = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];
    let mut next_label_x = inner.x;
    for (i, &n) in h.buckets.iter().enumerate() {
        let x0 = inner.x + i as u16 * col;
        if x0 + col > inner.x + inner.width {
            break;
        }
        let color = if i == b999 && i != b99 {
            Color::Red
        } else if i == b99 && i != b50 {
            Color::Yellow
        } else if i == b50 {
            Color::Green
        } else {
            Color::Cyan
        };
        let mut eighths = (n as u128 * u128::from(bar_rows) * 8).div_ceil(u128::from(max)) as u16;
        for r in 0..bar_rows {
            let y = label_y - 1 - r;
            let cell = eighths.min(8);
            eighths -= cell;
            for dx in 0..col.saturating_sub(u16::from(col > 1)) {
                if let Some(c) = buf.cell_mut((x0 + dx, y)) {
                    c.set_symbol(EIGHTHS[cell as usize]).set_fg(color);
                }
            }
        }
        let label = bucket_label(i);
        if x0 >= next_label_x && x0 + label.len() as u16 <= inner.x + inner.width {
            buf.set_string(x0, label_y, &label, Style::default().fg(Color::DarkGray));
            next_label_x = x0 + label.len() as u16 + 1;
        }
    }
}
