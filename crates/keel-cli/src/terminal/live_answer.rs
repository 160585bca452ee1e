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
//! - An open code block is rendered a new line at a time (`OpenCode`) and compared from its
//!   first changed row: a delta costs its own text, however long the block.

use crossterm::cursor::{MoveToColumn, MoveUp};
use crossterm::terminal::{Clear, ClearType};
use keel_render::{Colors, MarkdownStream, OpenCode, line_to_ansi, markdown_lines};

pub struct LiveAnswer {
    stream: MarkdownStream,
    /// The open block's rendering while it is a fenced code block.
    code: Option<OpenCode>,
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
            code: None,
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
            self.code = None;
            let lines = self.render(&settled, width);
            out.push_str(&self.redraw(0, lines, height));
            self.final_rows += self.live.len();
            self.live.clear();
        }
        if let Some(fence) = self.stream.open_fence() {
            let separator = usize::from(self.final_rows > 0);
            let code = self
                .code
                .get_or_insert_with(|| OpenCode::new(fence.language.as_deref()));
            let update = code.update(&self.stream.open()[fence.body_start..], width);
            let mut tail: Vec<String> = Vec::with_capacity(update.rows.len() + 1);
            let keep = if update.keep == 0 {
                tail.extend((separator == 1).then(String::new));
                0
            } else {
                separator + update.keep
            };
            tail.extend(update.rows.iter().map(|row| line_to_ansi(row, self.colors)));
            out.push_str(&self.redraw(keep, tail, height));
            return out;
        }
        self.code = None;
        let open = self.stream.open().to_string();
        let lines = self.render(&open, width);
        out.push_str(&self.redraw(0, lines, height));
        out
    }

    /// The bytes that show the rest of the answer for good.
    pub fn finish(&mut self, width: usize, height: usize) -> String {
        let rest = self.stream.finish();
        self.code = None;
        let lines = self.render(&rest, width);
        let out = self.redraw(0, lines, height);
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

    /// Bytes that turn the open block's rows on screen into its first `keep` rows as they
    /// are, then `tail` (rewritten from the first row that differs).
    fn redraw(&mut self, keep: usize, tail: Vec<String>, height: usize) -> String {
        let keep = keep.min(self.live.len());
        let mut lines = std::mem::take(&mut self.live);
        let shown_len = lines.len();
        let same = keep
            + lines[keep..]
                .iter()
                .zip(&tail)
                .take_while(|(shown, new)| shown == new)
                .count();
        lines.truncate(keep);
        lines.extend(tail);
        if same == shown_len && same == lines.len() {
            self.live = lines;
            return String::new();
        }
        // Rows above the screen cannot be reached: redraw from the top row at most.
        let reachable = height.saturating_sub(1).max(1);
        let from = same.max(shown_len.saturating_sub(reachable));
        let up = shown_len - from;
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
    fn an_open_code_block_is_drawn_as_it_grows_and_ends_as_rendered() {
        let mut answer = LiveAnswer::new(Colors::None);
        let mut bytes = String::new();
        let code = "Intro.\n\n```rust\nfn a() {}\nfn b() {}\nfn c() {}\n```\nDone.\n";
        let chars: Vec<char> = code.chars().collect();
        for piece in chars.chunks(3) {
            bytes.push_str(&answer.push(&piece.iter().collect::<String>(), 40, 50));
        }
        bytes.push_str(&answer.finish(40, 50));
        assert_eq!(
            screen(&bytes),
            [
                "Intro.",
                "",
                "fn a() {}",
                "fn b() {}",
                "fn c() {}",
                "",
                "Done.",
                ""
            ]
        );
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
