//! The help overlay, drawn from the key-binding table.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, Cell, Clear, Row, Table};

use crate::keys::BINDINGS;

pub fn render(f: &mut Frame<'_>, area: Rect) {
    // Borders and one row per binding; the column header only when the
    // terminal has a row to spare (a classic 80x24 shows every binding).
    let rows_needed = BINDINGS.len() as u16 + 2;
    let with_header = area.height > rows_needed;
    let height = (rows_needed + u16::from(with_header)).min(area.height);
    let width = 70.min(area.width);
    let [v] = Layout::vertical([Constraint::Length(height)])
        .flex(Flex::Center)
        .areas(area);
    let [popup] = Layout::horizontal([Constraint::Length(width)])
        .flex(Flex::Center)
        .areas(v);
    f.render_widget(Clear, popup);
    let rows = BINDINGS.iter().map(|b| {
        Row::new(vec![
            Cell::from(b.label).style(
                Style::default()
                    .fg(Color::Cyan)
                    .add_modifier(Modifier::BOLD),
            ),
            Cell::from(b.help),
        ])
    });
    let mut table = Table::new(rows, [Constraint::Length(12), Constraint::Fill(1)])
        .block(Block::bordered().title(" Help (Esc or ? to close) "));
    if with_header {
        table = table.header(
            Row::new(vec!["key", "action"]).style(Style::default().add_modifier(Modifier::BOLD)),
        );
    }
    f.render_widget(table, popup);
}
