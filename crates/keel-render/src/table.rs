//! Markdown tables drawn with box characters at a width.
//!
//! Invariants:
//! - A table that fits is drawn at its natural column widths, each column aligned as its
//!   delimiter row says.
//! - A table too wide is narrowed column by column (the widest give way first, none below
//!   `NARROWEST_COLUMN`), and its cells wrap within their columns.
//! - A table that cannot fit even then is shown as records, one `header: value` line per cell,
//!   so nothing is cut off.
//! - Cells are single-line in markdown; what they hold is styled as inline text anywhere.

use crate::blocks::{Align, Inline};
use crate::inline::{pieces, plain_text};
use crate::style::{Color, Line, Span, Style};
use crate::wrap::wrap;
use unicode_width::UnicodeWidthStr;

/// No column is narrowed below this.
const NARROWEST_COLUMN: usize = 6;

fn border(text: &str) -> Span {
    Span::new(text, Style::fg(Color::Gray))
}

/// The table as lines at most `width` wide.
pub(crate) fn render(
    aligns: &[Align],
    head: &[Vec<Inline>],
    rows: &[Vec<Vec<Inline>>],
    width: usize,
) -> Vec<Line> {
    let columns = aligns
        .len()
        .max(head.len())
        .max(rows.iter().map(Vec::len).max().unwrap_or(0));
    if columns == 0 {
        return Vec::new();
    }
    let cell = |row: &[Vec<Inline>], column: usize| -> String {
        row.get(column)
            .map(|inlines| plain_text(inlines))
            .unwrap_or_default()
    };
    let natural: Vec<usize> = (0..columns)
        .map(|column| {
            std::iter::once(head)
                .chain(rows.iter().map(Vec::as_slice))
                .map(|row| cell(row, column).width())
                .max()
                .unwrap_or(0)
                .max(1)
        })
        .collect();
    // "│ a │ b │": three columns of frame per column, and one more.
    let frame = 3 * columns + 1;
    let Some(widths) = fit(&natural, width.saturating_sub(frame)) else {
        return records(head, rows, columns, width);
    };
    let mut lines = vec![rule(&widths, "┌", "┬", "┐")];
    lines.extend(row_lines(head, &widths, aligns, Style::PLAIN.bold()));
    lines.push(rule(&widths, "├", "┼", "┤"));
    for row in rows {
        lines.extend(row_lines(row, &widths, aligns, Style::PLAIN));
    }
    lines.push(rule(&widths, "└", "┴", "┘"));
    lines
}

/// Column widths within `room`: the natural ones if they fit, else the widest narrowed first.
fn fit(natural: &[usize], room: usize) -> Option<Vec<usize>> {
    let floor: usize = natural.iter().map(|n| (*n).min(NARROWEST_COLUMN)).sum();
    if floor > room {
        return None;
    }
    let mut widths = natural.to_vec();
    while widths.iter().sum::<usize>() > room {
        let widest = widths.iter().copied().max().unwrap_or(0);
        let next = widths
            .iter()
            .copied()
            .filter(|w| *w < widest)
            .max()
            .unwrap_or(0)
            .max(NARROWEST_COLUMN);
        let excess = widths.iter().sum::<usize>() - room;
        let at_widest = widths.iter().filter(|w| **w == widest).count();
        // Take from every widest column alike, down to the next width at most.
        let cut = (widest - next).min(excess.div_ceil(at_widest)).max(1);
        for w in widths.iter_mut().filter(|w| **w == widest) {
            *w -= cut.min(*w - NARROWEST_COLUMN.min(*w));
        }
        if widths.iter().all(|w| *w <= NARROWEST_COLUMN) {
            break;
        }
    }
    Some(widths)
}

fn rule(widths: &[usize], left: &str, middle: &str, right: &str) -> Line {
    let inner: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
    Line::new(vec![border(&format!(
        "{left}{}{right}",
        inner.join(middle)
    ))])
}

fn row_lines(row: &[Vec<Inline>], widths: &[usize], aligns: &[Align], base: Style) -> Vec<Line> {
    let empty = Vec::new();
    let cells: Vec<Vec<Line>> = widths
        .iter()
        .enumerate()
        .map(|(column, width)| wrap(&pieces(row.get(column).unwrap_or(&empty), base), *width))
        .collect();
    let height = cells.iter().map(Vec::len).max().unwrap_or(1);
    (0..height)
        .map(|index| {
            let mut line = Line::new(vec![border("│")]);
            for (column, width) in widths.iter().enumerate() {
                let content = cells[column].get(index).cloned().unwrap_or_default();
                let room = width.saturating_sub(content.width());
                let (before, after) = match aligns.get(column).copied().unwrap_or(Align::Left) {
                    Align::Left => (0, room),
                    Align::Right => (room, 0),
                    Align::Center => (room / 2, room - room / 2),
                };
                line.push(Span::plain(&" ".repeat(before + 1)));
                line.spans.extend(content.spans);
                line.push(Span::plain(&" ".repeat(after + 1)));
                line.push(border("│"));
            }
            line
        })
        .collect()
}

/// A table too wide for any columns: each row as `header: value` lines.
fn records(
    head: &[Vec<Inline>],
    rows: &[Vec<Vec<Inline>>],
    columns: usize,
    width: usize,
) -> Vec<Line> {
    let mut lines = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        if index > 0 {
            lines.push(Line::new(vec![border(&"─".repeat(width.clamp(1, 40)))]));
        }
        for column in 0..columns {
            let mut cell = head
                .get(column)
                .map(|inlines| pieces(inlines, Style::PLAIN.bold()))
                .unwrap_or_default();
            cell.push(crate::wrap::Piece::Text(": ".into(), Style::PLAIN.bold()));
            cell.extend(pieces(
                row.get(column).map(Vec::as_slice).unwrap_or(&[]),
                Style::PLAIN,
            ));
            lines.extend(wrap(&cell, width));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_widths_fit_and_narrowing_takes_from_the_widest() {
        assert_eq!(fit(&[3, 10], 20), Some(vec![3, 10]));
        assert_eq!(fit(&[3, 30, 20], 40), Some(vec![3, 18, 18]));
        assert_eq!(fit(&[30, 30], 7), None);
        let narrowed = fit(&[50, 40, 8], 60).unwrap();
        assert!(narrowed.iter().sum::<usize>() <= 60, "{narrowed:?}");
        assert_eq!(
            narrowed[2], 8,
            "the narrow column keeps its width: {narrowed:?}"
        );
    }
}
