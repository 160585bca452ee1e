//! The answer of the attempt streaming now, as rendered lines: blocks that are final are
//! rendered once; the open block again as it grows (an open code fence a new line at a time).
//!
//! Invariants:
//! - The lines are `markdown_lines` of the text so far (settled blocks one empty line apart),
//!   at the width last set; a new width renders the settled text again.
//! - Nothing here is on screen for good: the attempt's lines go to the scrollback only when
//!   the attempt is the answer (or was interrupted), so a retry drops them whole.

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
        }
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
        if !self.settled.is_empty() {
            self.settled.push(Line::empty());
        }
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
        let separator = if !open.is_empty() && !self.settled.is_empty() {
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

    /// Every line of the answer, the open block rendered as final.
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
    fn a_new_width_renders_everything_again() {
        let text = "A paragraph long enough to wrap at twenty columns.\n\nnext\n";
        let mut answer = StreamedAnswer::new(80);
        answer.push(text);
        answer.set_width(20);
        assert_eq!(answer.finish(), markdown_lines(text, 20));
    }
}
