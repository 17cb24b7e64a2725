//! The help overlay, drawn from the key-binding table.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, Cell, Clear, Row, Table};

use crate::keys::BINDINGS;

pub fn render(f: &mut Frame<'_>, area: Rect) {
    let height = (BINDINGS.len() as u16 + 4).min(area.height);
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
    let table = Table::new(rows, [Constraint::Length(12), Constraint::Fill(1)])
        .header(
            Row::new(vec!["key", "action"]).style(Style::default().add_modifier(Modifier::BOLD)),
        )
        .block(Block::bordered().title(" Help (Esc or ? to close) "));
    f.render_widget(table, popup);
}
