//! The open fenced code block of a streaming message, rendered a chunk at a time.
//!
//! Invariants:
//! - Highlighting works in chunks of whole lines (`highlight::chunk_end`); a chunk the lines
//!   have closed, and that does not hold the last line (which may still grow), is highlighted
//!   and wrapped once and kept. Only the open chunk is rendered again on each update, so an
//!   update costs at most a chunk, not the block.
//! - The rows are exactly `code_lines` of the same text at the same width, for a text that only
//!   grows; a new width, or a text shorter than the kept chunks, renders the block again from
//!   its start.

use crate::highlight::{Highlighter, chunk_end};
use crate::style::Line;
use crate::terminal::{expand_tabs, token_rows};

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
    highlighter: Highlighter,
    /// Bytes of the code in kept chunks (each of their lines with its newline).
    kept_bytes: usize,
    /// Rows those chunks took.
    kept_rows: usize,
}

impl OpenCode {
    pub fn new(language: Option<&str>) -> OpenCode {
        OpenCode {
            language: language.map(str::to_string),
            width: 0,
            highlighter: Highlighter::new(language),
            kept_bytes: 0,
            kept_rows: 0,
        }
    }

    /// The rows of `code` (the block's text so far, growing only) at `width`.
    pub fn update(&mut self, code: &str, width: usize) -> OpenRows {
        if width != self.width || code.len() < self.kept_bytes {
            *self = OpenCode::new(self.language.as_deref());
            self.width = width;
        }
        let keep = self.kept_rows;
        // The lines after the kept chunks, split as `code_lines` splits the whole block.
        let rest = code.get(self.kept_bytes..).unwrap_or_default();
        let rest = rest.strip_suffix('\n').unwrap_or(rest);
        let originals: Vec<&str> = rest.split('\n').collect();
        let expanded: Vec<String> = originals.iter().map(|line| expand_tabs(line)).collect();
        let lines: Vec<&str> = expanded.iter().map(String::as_str).collect();
        let mut rows = Vec::new();
        let mut from = 0;
        while let Some(end) = chunk_end(&lines, from).filter(|end| *end < lines.len()) {
            for tokens in self.highlighter.chunk(&lines[from..end]) {
                rows.extend(token_rows(tokens, width));
            }
            self.kept_bytes += originals[from..end]
                .iter()
                .map(|line| line.len() + 1)
                .sum::<usize>();
            from = end;
        }
        self.kept_rows += rows.len();
        for tokens in self.highlighter.chunk(&lines[from..]) {
            rows.extend(token_rows(tokens, width));
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
    fn a_long_block_keeps_its_closed_chunks_and_still_matches_the_whole() {
        let mut code = String::new();
        for n in 0..150 {
            code.push_str(&format!("\tlet x{n} = \"s{n}\"; // {n}\n"));
            if n % 20 == 19 {
                code.push('\n');
            }
        }
        let mut open = OpenCode::new(Some("rust"));
        let mut shown: Vec<Line> = Vec::new();
        let mut kept_any = false;
        for end in (1..=code.len()).step_by(37).chain([code.len()]) {
            let text = &code[..end];
            let update = open.update(text, 24);
            assert!(update.keep <= shown.len());
            kept_any |= update.keep > 0;
            // Kept rows are never re-rendered: an update sends at most a chunk and a bit.
            assert!(update.rows.len() < 3 * 64, "{} rows", update.rows.len());
            shown.truncate(update.keep);
            shown.extend(update.rows);
            assert_eq!(
                shown,
                code_lines(Some("rust"), text, 24),
                "after {end} bytes"
            );
        }
        assert!(kept_any, "closed chunks were kept");
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
