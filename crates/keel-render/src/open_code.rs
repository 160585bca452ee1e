//! The open fenced code block of a streaming message, rendered one new line at a time.
//!
//! Invariants:
//! - Each whole line of code is highlighted and wrapped once, carrying the highlighter's state
//!   to the next; only the line still arriving is rendered again on each update (from a copy
//!   of that state), so an update costs the new text, not the block.
//! - The rows are exactly `code_lines` of the same text at the same width; a new width renders
//!   the block again from its start.

use crate::highlight::Highlighter;
use crate::style::Line;
use crate::terminal::code_line_rows;

/// The rows of an open code block after an update: the first `keep` rows of the previous
/// update stay as they were, then `rows` follow.
#[derive(Debug, PartialEq)]
pub struct OpenRows {
    pub keep: usize,
    pub rows: Vec<Line>,
}

/// An open code block's rendering so far.
pub struct OpenCode {
    language: Option<String>,
    width: usize,
    /// The state after the whole lines rendered.
    highlighter: Highlighter,
    /// Bytes of the code rendered as whole lines.
    consumed: usize,
    /// Rows those whole lines took.
    rows: usize,
}

impl OpenCode {
    pub fn new(language: Option<&str>) -> OpenCode {
        OpenCode {
            language: language.map(str::to_string),
            width: 0,
            highlighter: Highlighter::new(language),
            consumed: 0,
            rows: 0,
        }
    }

    /// The rows of `code` (the block's text so far, growing only) at `width`.
    pub fn update(&mut self, code: &str, width: usize) -> OpenRows {
        if width != self.width || code.len() < self.consumed {
            *self = OpenCode::new(self.language.as_deref());
            self.width = width;
        }
        let keep = self.rows;
        let mut rows = Vec::new();
        let whole = code.rfind('\n').map_or(0, |at| at + 1);
        if whole > self.consumed {
            for line in code[self.consumed..whole - 1].split('\n') {
                rows.extend(code_line_rows(&mut self.highlighter, line, width));
            }
            self.consumed = whole;
            self.rows += rows.len();
        }
        let partial = &code[whole..];
        if !partial.is_empty() {
            let mut ahead = self.highlighter.clone();
            rows.extend(code_line_rows(&mut ahead, partial, width));
        }
        OpenRows { keep, rows }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::code_lines;

    #[test]
    fn rows_grown_line_by_line_are_the_rows_of_the_whole_block() {
        let code = "fn main() {\n    let s = \"a string long enough to wrap at twenty\";\n    /* open\n    comment */ x();\n}\n";
        let chars: Vec<char> = code.chars().collect();
        for chunk in [1, 5, 16] {
            let mut open = OpenCode::new(Some("rust"));
            let mut shown: Vec<Line> = Vec::new();
            let mut text = String::new();
            for piece in chars.chunks(chunk) {
                text.extend(piece);
                let update = open.update(&text, 20);
                assert!(update.keep <= shown.len());
                shown.truncate(update.keep);
                shown.extend(update.rows);
                let expected = code_lines(Some("rust"), &text, 20);
                assert_eq!(shown, expected, "after {text:?} in chunks of {chunk}");
            }
        }
    }

    #[test]
    fn a_new_width_starts_again() {
        let mut open = OpenCode::new(None);
        open.update("abcdef\nghi", 4);
        let update = open.update("abcdef\nghij", 10);
        assert_eq!(update.keep, 0);
        assert_eq!(update.rows, code_lines(None, "abcdef\nghij", 10));
    }
}
