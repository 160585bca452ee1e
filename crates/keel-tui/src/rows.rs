//! Text laid out in rows for the live region: wrapped or cut to a width.
//!
//! Invariants: every row returned fits the width; text is made visible (`keel_render`) first,
//! so no control character reaches a row.

use keel_render::{Line, Span, Style, visible};
use unicode_width::UnicodeWidthChar;

/// `text` as lines of at most `width` columns (hard wrapped), made visible, in `style`.
pub fn wrapped(text: &str, width: usize, style: Style) -> Vec<Line> {
    let width = width.max(1);
    let mut lines = Vec::new();
    for raw in text.split('\n') {
        // A tab shows as one space (as `Span` writes it): measured as one.
        let shown = visible(raw).replace('\t', " ");
        let mut row = String::new();
        let mut used = 0;
        for c in shown.chars() {
            let columns = c.width().unwrap_or(0);
            if used + columns > width {
                lines.push(Line::from_text(&std::mem::take(&mut row), style));
                used = 0;
            }
            row.push(c);
            used += columns;
        }
        lines.push(Line::from_text(&row, style));
    }
    lines
}

/// `line` cut to `width` columns.
pub fn fit(line: Line, width: usize) -> Line {
    if line.width() <= width {
        return line;
    }
    let mut out = Line::empty();
    let mut used = 0;
    for span in line.spans {
        let room = width.saturating_sub(used);
        if room == 0 {
            break;
        }
        let text = cut(span.text(), room);
        used += unicode_width::UnicodeWidthStr::width(text.as_str());
        out.push(Span::new(&text, span.style));
    }
    out
}

/// `text` cut to `width` columns, `…` marking a cut.
pub fn cut(text: &str, width: usize) -> String {
    // A tab shows as one space (as `Span` writes it): measured as one.
    let text = &text.replace('\t', " ");
    let mut out = String::new();
    let mut used = 0;
    let total: usize = text.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width {
        return text.to_string();
    }
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    if width > 0 {
        out.push('…');
    }
    out
}
