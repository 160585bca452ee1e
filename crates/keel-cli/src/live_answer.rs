//! The model's answer on a terminal in line mode, rendered as it streams: blocks that are
//! final are printed once; the block still open is redrawn in place as it grows.
//!
//! Invariants:
//! - Only rendered markdown reaches the screen (never the raw `## ` or `|---|`), through
//!   `keel_render`, so nothing the model sends is printed as a control sequence.
//! - The cursor rests at the start of the row below the answer after every call; the open
//!   block's rows are the last on screen, and a redraw rewrites only from its first changed
//!   line (never above the top of the screen: lines already scrolled away stay as they were).
//! - The functions return the bytes to write; they never write themselves (so the redraw is
//!   tested without a terminal).

use crossterm::cursor::{MoveToColumn, MoveUp};
use crossterm::terminal::{Clear, ClearType};
use keel_render::{Colors, MarkdownStream, line_to_ansi, markdown_lines};

#[derive(Debug)]
pub struct LiveAnswer {
    stream: MarkdownStream,
    colors: Colors,
    /// The open block's lines as on screen (terminal bytes, one row each).
    live: Vec<String>,
    /// Rows printed for good (settled blocks and their separators).
    final_rows: usize,
}

impl LiveAnswer {
    pub fn new(colors: Colors) -> LiveAnswer {
        LiveAnswer {
            stream: MarkdownStream::new(),
            colors,
            live: Vec::new(),
            final_rows: 0,
        }
    }

    /// Rows of the screen this answer occupies (to erase it).
    pub fn rows(&self) -> usize {
        self.final_rows + self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stream.text().is_empty()
    }

    /// The bytes that show `delta` at `width` columns on a screen of `height` rows.
    pub fn push(&mut self, delta: &str, width: usize, height: usize) -> String {
        self.stream.push(delta);
        let mut out = String::new();
        if let Some(settled) = self.stream.take_settled() {
            let lines = self.render(&settled, width);
            out.push_str(&self.redraw(lines, height));
            self.final_rows += self.live.len();
            self.live.clear();
        }
        let open = self.stream.open().to_string();
        let lines = self.render(&open, width);
        out.push_str(&self.redraw(lines, height));
        out
    }

    /// The bytes that show the rest of the answer for good.
    pub fn finish(&mut self, width: usize, height: usize) -> String {
        let rest = self.stream.finish();
        let lines = self.render(&rest, width);
        let out = self.redraw(lines, height);
        self.final_rows += self.live.len();
        self.live.clear();
        out
    }

    /// `markdown` as terminal lines, after an empty line when a block is already on screen.
    fn render(&self, markdown: &str, width: usize) -> Vec<String> {
        if markdown.trim().is_empty() {
            return Vec::new();
        }
        let mut lines = Vec::new();
        if self.final_rows > 0 {
            lines.push(String::new());
        }
        lines.extend(
            markdown_lines(markdown, width)
                .iter()
                .map(|line| line_to_ansi(line, self.colors)),
        );
        lines
    }

    /// Bytes that turn the open block's rows on screen into `lines`.
    fn redraw(&mut self, lines: Vec<String>, height: usize) -> String {
        let same = self
            .live
            .iter()
            .zip(&lines)
            .take_while(|(shown, new)| shown == new)
            .count();
        if same == self.live.len() && same == lines.len() {
            return String::new();
        }
        // Rows above the screen cannot be reached: redraw from the top row at most.
        let reachable = height.saturating_sub(1).max(1);
        let from = same.max(self.live.len().saturating_sub(reachable));
        let up = self.live.len() - from;
        let mut out = String::new();
        if up > 0 {
            out.push_str(&MoveUp(u16::try_from(up).unwrap_or(u16::MAX)).to_string());
        }
        out.push_str(&MoveToColumn(0).to_string());
        out.push_str(&Clear(ClearType::FromCursorDown).to_string());
        for line in lines.iter().skip(from) {
            out.push_str(line);
            out.push('\n');
        }
        self.live = lines;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a terminal shows after `bytes`: a tiny emulator of newline, cursor up, column 0
    /// and clear-down, enough for what `LiveAnswer` writes.
    fn screen(bytes: &str) -> Vec<String> {
        let mut rows: Vec<String> = vec![String::new()];
        let mut row = 0usize;
        let mut rest = bytes;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('\n') {
                row += 1;
                if rows.len() <= row {
                    rows.push(String::new());
                }
                rest = after;
            } else if let Some(after) = rest.strip_prefix("\u{1b}[") {
                let end = after.find(|c: char| c.is_ascii_alphabetic()).unwrap();
                let (argument, command) = (&after[..end], &after[end..=end]);
                match command {
                    "A" => row -= argument.parse::<usize>().unwrap(),
                    "G" => {}
                    "J" => rows.truncate(row + 1),
                    other => panic!("unexpected command {other}"),
                }
                if command == "J" {
                    rows[row].clear();
                }
                rest = &after[end + 1..];
            } else {
                let c = rest.chars().next().unwrap();
                rows[row].push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        rows
    }

    #[test]
    fn the_open_block_redraws_in_place_and_the_screen_ends_rendered() {
        let mut answer = LiveAnswer::new(Colors::None);
        let mut bytes = String::new();
        for delta in [
            "## Ti",
            "tle\n\nSome **bo",
            "ld** text\n\n| a | b |\n",
            "|---|---|\n| 1 | 2 |\n",
        ] {
            bytes.push_str(&answer.push(delta, 40, 50));
        }
        bytes.push_str(&answer.finish(40, 50));
        let shown = screen(&bytes);
        assert_eq!(
            shown,
            [
                "Title",
                "",
                "Some bold text",
                "",
                "┌───┬───┐",
                "│ a │ b │",
                "├───┼───┤",
                "│ 1 │ 2 │",
                "└───┴───┘",
                ""
            ]
        );
        assert_eq!(answer.rows(), 9);
        assert!(!bytes.contains("## ") && !bytes.contains("|---|"));
    }

    #[test]
    fn a_redraw_never_moves_above_the_screen() {
        let mut answer = LiveAnswer::new(Colors::None);
        let mut bytes = String::new();
        let long: String = (0..30).map(|n| format!("| {n} | x |\n")).collect();
        bytes.push_str(&answer.push("| h | i |\n|---|---|\n", 40, 10));
        bytes.push_str(&answer.push(&long, 40, 10));
        bytes.push_str(&answer.push("| wide cell here | y |\n", 40, 10));
        for command in bytes.split("\u{1b}[").skip(1) {
            if let Some(up) = command
                .split('A')
                .next()
                .and_then(|n| n.parse::<usize>().ok())
            {
                assert!(up <= 9, "moved up {up} rows on a 10-row screen");
            }
        }
    }
}
