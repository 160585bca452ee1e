//! The answer of the attempt streaming now, as rendered lines: blocks that are final are
//! rendered once; the open block again as it grows (an open code fence a new line at a time).
//!
//! Invariants:
//! - The lines are `markdown_lines` of the text so far (settled blocks one empty line apart),
//!   at the width last set; a new width renders again the settled text not yet taken.
//! - `take_settled` hands out each settled block's lines once, in order, with the empty line
//!   that parts it from the block before; what was taken, then `finish`, is line for line the
//!   block-by-block render of the whole text (at an unchanged width). Lines taken are never
//!   rendered again: they are the caller's (the terminal's scrollback) at their width.

use keel_render::{Line, MarkdownStream, OpenCode, markdown_lines};

pub struct StreamedAnswer {
    stream: MarkdownStream,
    /// The settled markdown, and its lines at `width`.
    settled_text: String,
    settled: Vec<Line>,
    width: usize,
    /// The open block while it is a fenced code block: its renderer and rows.
    code: Option<(OpenCode, Vec<Line>)>,
    /// The open fence grew since its rows were brought up to date (done once per frame, not
    /// once per delta: the line still arriving is highlighted again on each update).
    code_stale: bool,
    /// A block settled before (taken or not): the next one is parted from it by an empty line.
    blocks_before: bool,
    /// Lines were taken by `take_settled`.
    taken: bool,
}

impl StreamedAnswer {
    pub fn new(width: usize) -> StreamedAnswer {
        StreamedAnswer {
            stream: MarkdownStream::new(),
            settled_text: String::new(),
            settled: Vec::new(),
            width: width.max(1),
            code: None,
            code_stale: false,
            blocks_before: false,
            taken: false,
        }
    }

    /// The settled lines not taken before (final: a settled block never renders otherwise).
    pub fn take_settled(&mut self) -> Vec<Line> {
        self.settled_text.clear();
        let lines = std::mem::take(&mut self.settled);
        self.taken |= !lines.is_empty();
        lines
    }

    /// Whether `take_settled` gave out any line.
    pub fn has_taken(&self) -> bool {
        self.taken
    }

    pub fn is_empty(&self) -> bool {
        self.stream.text().trim().is_empty()
    }

    pub fn text(&self) -> &str {
        self.stream.text()
    }

    pub fn push(&mut self, delta: &str) {
        self.stream.push(delta);
        if let Some(settled) = self.stream.take_settled() {
            self.code = None;
            self.add_settled(&settled);
        }
        if self.stream.open_fence().is_some() {
            self.code_stale = true;
        } else {
            self.code = None;
            self.code_stale = false;
        }
    }

    /// Bring an open fence's rows up to date with the text.
    fn refresh(&mut self) {
        if !std::mem::take(&mut self.code_stale) {
            return;
        }
        let Some(fence) = self.stream.open_fence() else {
            return;
        };
        let body = &self.stream.open()[fence.body_start..];
        let (code, rows) = self
            .code
            .get_or_insert_with(|| (OpenCode::new(fence.language.as_deref()), Vec::new()));
        let update = code.update(body, self.width);
        rows.truncate(update.keep);
        rows.extend(update.rows);
    }

    fn add_settled(&mut self, markdown: &str) {
        if markdown.trim().is_empty() {
            return;
        }
        if self.blocks_before {
            self.settled.push(Line::empty());
        }
        self.blocks_before = true;
        self.settled.extend(markdown_lines(markdown, self.width));
        self.settled_text.push_str(markdown);
    }

    /// Render again at `width` (the terminal was resized).
    pub fn set_width(&mut self, width: usize) {
        let width = width.max(1);
        if width == self.width {
            return;
        }
        self.width = width;
        let settled = std::mem::take(&mut self.settled_text);
        self.settled.clear();
        // What was taken stays as it was written; what follows it is parted from it.
        self.blocks_before = self.taken;
        // Block by block as they settled: the same lines as while streaming.
        let mut stream = MarkdownStream::new();
        stream.push(&settled);
        while let Some(block) = stream.take_settled() {
            self.add_settled(&block);
        }
        let rest = stream.finish();
        self.add_settled(&rest);
        self.code = None;
        // The open block's fence renderer starts again at the new width.
        self.push("");
    }

    /// The open block's lines unless it is a code fence (whose rows are kept).
    fn open_markdown(&self) -> Vec<Line> {
        if self.code.is_some() || self.stream.open().trim().is_empty() {
            return Vec::new();
        }
        markdown_lines(self.stream.open(), self.width)
    }

    /// The settled lines, the separator and the open block's lines, as parts (an open code
    /// fence's rows are borrowed: it may be long).
    fn parts<'a>(&'a self, open: &'a [Line]) -> [&'a [Line]; 3] {
        let open: &[Line] = match &self.code {
            Some((_, rows)) => rows,
            None => open,
        };
        const SEPARATOR: &[Line] = &[Line { spans: Vec::new() }];
        // Also after blocks already taken: the open block is parted from them as it will be.
        let separator = if !open.is_empty() && self.blocks_before {
            SEPARATOR
        } else {
            &[]
        };
        [&self.settled, separator, open]
    }

    /// The last `count` lines so far.
    pub fn tail(&mut self, count: usize) -> Vec<Line> {
        self.refresh();
        let open = self.open_markdown();
        let parts = self.parts(&open);
        let total: usize = parts.iter().map(|part| part.len()).sum();
        let mut skip = total.saturating_sub(count);
        let mut lines = Vec::with_capacity(count.min(total));
        for part in parts {
            let from = skip.min(part.len());
            skip -= from;
            lines.extend_from_slice(&part[from..]);
        }
        lines
    }

    /// How many lines the answer has so far.
    pub fn len(&mut self) -> usize {
        self.refresh();
        let open = self.open_markdown();
        self.parts(&open).iter().map(|part| part.len()).sum()
    }

    /// Every line of the answer not taken, the open block rendered as final.
    pub fn finish(mut self) -> Vec<Line> {
        let rest = self.stream.finish();
        self.add_settled(&rest);
        self.settled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_in_small_deltas_it_ends_as_the_whole_render() {
        let text = "# Title\n\nSome *text* here.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```rust\nfn main() {}\n```\n\n- one\n- two\n";
        for width in [20, 40, 80] {
            let mut answer = StreamedAnswer::new(width);
            for chunk in text.as_bytes().chunks(3) {
                answer.push(std::str::from_utf8(chunk).unwrap_or(""));
            }
            let whole = markdown_lines(text, width);
            assert_eq!(answer.len(), whole.len(), "at {width}");
            assert_eq!(answer.tail(usize::MAX / 2), whole, "at {width}");
            assert_eq!(answer.finish(), whole, "at {width}");
        }
    }

    #[test]
    fn taken_as_it_settles_then_finished_it_is_the_whole_render() {
        let text = "# Title\n\nSome *text* here.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```rust\nfn main() {}\n```\n\n- one\n- two\n\nlast words";
        for width in [20, 40, 80] {
            let mut answer = StreamedAnswer::new(width);
            let mut written = Vec::new();
            for chunk in text.as_bytes().chunks(3) {
                answer.push(std::str::from_utf8(chunk).unwrap_or(""));
                written.extend(answer.take_settled());
            }
            assert!(answer.has_taken());
            // Before the end, most of it has left; the live lines are the open block only.
            assert!(written.len() > 8, "at {width}");
            let whole = markdown_lines(text, width).len();
            assert!(answer.tail(usize::MAX / 2).len() < whole / 2, "at {width}");
            written.extend(answer.finish());
            assert_eq!(written, markdown_lines(text, width), "at {width}");
        }
    }

    #[test]
    fn a_new_width_leaves_what_was_taken_and_renders_the_rest_again() {
        let mut answer = StreamedAnswer::new(80);
        answer.push("First paragraph, long enough to wrap at twenty columns.\n\nSecond one, ");
        answer.push("also long enough to wrap.\n");
        let taken = answer.take_settled();
        let first = "First paragraph, long enough to wrap at twenty columns.\n";
        assert_eq!(taken, markdown_lines(first, 80));
        answer.push("\nthird");
        answer.set_width(20);
        let mut rest = answer.take_settled();
        rest.extend(answer.finish());
        let mut expected = vec![Line::empty()];
        expected.extend(markdown_lines(
            "Second one, also long enough to wrap.\n",
            20,
        ));
        expected.push(Line::empty());
        expected.extend(markdown_lines("third", 20));
        assert_eq!(rest, expected);
    }

    #[test]
    fn a_new_width_renders_everything_again() {
        let text = "A paragraph long enough to wrap at twenty columns.\n\nnext\n";
        let mut answer = StreamedAnswer::new(80);
        answer.push(text);
        answer.set_width(20);
        assert_eq!(answer.finish(), markdown_lines(text, 20));
    }
}
