//! Column widths that fit what a table shows: each column as wide as its
//! header or its widest cell, so no value is cut. Values are short on
//! purpose instead ([`super::fmt`]: `12.3k`, `4.56M`, `1.23 Gb/s`); only the
//! first column (a flow's name) takes what is left and may be cut.

use ratatui::layout::Constraint;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Cell, Row};

/// One table's text, cell by cell, before it is laid out.
pub struct Fitted {
    header: Vec<(String, Style)>,
    rows: Vec<Vec<(String, Style)>>,
    /// Widths below which a column does not shrink (the usual look).
    at_least: Vec<u16>,
}

impl Fitted {
    pub fn new(header: Vec<(String, Style)>) -> Fitted {
        Fitted {
            header,
            rows: Vec::new(),
            at_least: Vec::new(),
        }
    }

    /// Column widths that hold typical values, so that the table does not
    /// change shape with every value; wider values widen their column.
    pub fn at_least(mut self, widths: &[u16]) -> Fitted {
        self.at_least = widths.to_vec();
        self
    }

    pub fn push(&mut self, row: Vec<(String, Style)>) {
        self.rows.push(row);
    }

    /// Every column as wide as its widest text (or its `at_least`); with `stretch_first`
    /// the first one at least that wide, and wider when the table has room.
    pub fn widths(&self, stretch_first: bool) -> Vec<Constraint> {
        (0..self.header.len())
            .map(|col| {
                let widest = std::iter::once(&self.header[col].0)
                    .chain(self.rows.iter().filter_map(|r| r.get(col).map(|c| &c.0)))
                    .map(|text| Line::raw(text.as_str()).width())
                    .max()
                    .unwrap_or(0) as u16;
                let widest = widest.max(self.at_least.get(col).copied().unwrap_or(0));
                if col == 0 && stretch_first {
                    Constraint::Min(widest)
                } else {
                    Constraint::Length(widest)
                }
            })
            .collect()
    }

    /// Cells the table needs at its columns' widths with `spacing` between
    /// them.
    pub fn needed(&self, spacing: u16) -> u16 {
        let columns = self.widths(false);
        let cells: u16 = columns
            .iter()
            .map(|c| match c {
                Constraint::Length(w) | Constraint::Min(w) => *w,
                _ => 0,
            })
            .sum();
        cells + spacing * columns.len().saturating_sub(1) as u16
    }

    pub fn header(&self) -> Row<'static> {
        row(&self.header)
    }

    pub fn rows(&self) -> Vec<Row<'static>> {
        self.rows.iter().map(|r| row(r)).collect()
    }
}

fn row(cells: &[(String, Style)]) -> Row<'static> {
    Row::new(
        cells
            .iter()
            .map(|(text, style)| Cell::from(text.clone()).style(*style)),
    )
}
