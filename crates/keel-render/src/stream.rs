//! A message arriving in deltas, split into blocks that are final and the block still open.
//!
//! Invariants:
//! - A block is settled only once another top-level block has begun after it, on a whole line:
//!   nothing a later delta adds can change how it renders (a growing list, a paragraph that
//!   may yet become a setext heading or a table, an unclosed fence, a line half arrived all
//!   stay open).
//! - Settled text is handed out once, in order, and together with `finish` it is the whole
//!   message, byte for byte.
//! - Cost per delta stays flat however long the open block grows: the open text is parsed
//!   again only when a whole line was added, and an open fenced code block (the one block that
//!   is often huge) is never parsed while it grows: each new line is only checked for the
//!   closing fence, and the block settles as soon as that line is whole.

use crate::blocks::{fence_language, options};
use pulldown_cmark::{Event, Parser};

/// A streaming message.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    text: String,
    settled: usize,
    /// How much of the open text (its whole lines) the last parse looked at.
    parsed: usize,
    /// The open block is a fenced code block.
    fence: Option<OpenFence>,
    /// The open block's first line is whole (so whether it is a fence is decided).
    first_line_known: bool,
}

/// An open fenced code block: its fence, and how far its lines were checked for the close.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenFence {
    marker: char,
    length: usize,
    /// The first word of the info string.
    pub language: Option<String>,
    /// Where the code starts in the open text (after the fence line).
    pub body_start: usize,
    /// The open text's whole lines up to here were checked.
    scanned: usize,
}

/// `line` opens a fence: up to three spaces, then three or more backticks (no backtick in
/// the info string after them) or tildes.
fn opening_fence(line: &str) -> Option<(char, usize, Option<String>)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let marker = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let length = rest.len() - rest.trim_start_matches(marker).len();
    if length < 3 {
        return None;
    }
    let info = rest[length..].trim();
    if marker == '`' && info.contains('`') {
        return None;
    }
    Some((marker, length, fence_language(info)))
}

/// The first line of `whole_lines` that is not blank, as (start, end without its newline),
/// once it is whole.
fn first_line(whole_lines: &str) -> Option<(usize, usize)> {
    let mut start = 0;
    for line in whole_lines.split_inclusive('\n') {
        let end = start + line.len();
        if !line.ends_with('\n') {
            return None;
        }
        if !line.trim().is_empty() {
            return Some((start, end - 1));
        }
        start = end;
    }
    None
}

/// `line` closes a fence opened with `length` × `marker`.
fn closes(line: &str, marker: char, length: usize) -> bool {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return false;
    }
    let rest = &line[indent..];
    let run = rest.len() - rest.trim_start_matches(marker).len();
    run >= length && rest[run..].trim_matches([' ', '\t']).is_empty()
}

impl MarkdownStream {
    pub fn new() -> MarkdownStream {
        MarkdownStream::default()
    }

    pub fn push(&mut self, delta: &str) {
        self.text.push_str(delta);
    }

    /// The markdown of the blocks settled since the last call, if any: render it once and
    /// keep it (it is final).
    pub fn take_settled(&mut self) -> Option<String> {
        let open = &self.text[self.settled..];
        // A line still arriving may yet change what it is (`|` may become a table row, `-` a
        // rule or a list): only whole lines decide.
        // A lone `\r` ends a line too (CommonMark reads it so).
        let whole = open.rfind(['\n', '\r']).map_or(0, |at| at + 1);
        if whole == self.parsed {
            return None;
        }
        if !self.first_line_known
            && let Some((start, end)) = first_line(&open[..whole])
        {
            self.first_line_known = true;
            self.fence =
                opening_fence(&open[start..end]).map(|(marker, length, language)| OpenFence {
                    marker,
                    length,
                    language,
                    body_start: end + 1,
                    scanned: end + 1,
                });
        }
        if let Some(fence) = &mut self.fence {
            while let Some(at) = open[fence.scanned..whole].find('\n') {
                let line = &open[fence.scanned..fence.scanned + at];
                fence.scanned += at + 1;
                if closes(line, fence.marker, fence.length) {
                    // Closed: nothing after it can change it.
                    let end = fence.scanned;
                    return Some(self.settle(end));
                }
            }
            self.parsed = whole;
            return None;
        }
        self.parsed = whole;
        let last_start = top_level_starts(&open[..whole])
            .into_iter()
            .skip(1)
            .last()?;
        // The parser starts indented code (and an indented fence) after its indentation:
        // the block begins at its line's start.
        let line_start = open[..last_start]
            .rfind(['\n', '\r'])
            .map_or(0, |at| at + 1);
        if line_start == 0 {
            return None;
        }
        Some(self.settle(line_start))
    }

    /// Hand out the open text up to `end` (relative to it) as settled.
    fn settle(&mut self, end: usize) -> String {
        let settled = self.text[self.settled..self.settled + end].to_string();
        self.settled += end;
        self.parsed = 0;
        self.fence = None;
        self.first_line_known = false;
        settled
    }

    /// The open block, when it is a fenced code block still growing.
    pub fn open_fence(&self) -> Option<&OpenFence> {
        self.fence.as_ref()
    }

    /// The text of the block still open (it re-renders as it grows).
    pub fn open(&self) -> &str {
        &self.text[self.settled..]
    }

    /// Everything not handed out yet, settled at the message's end.
    pub fn finish(&mut self) -> String {
        let end = self.text.len() - self.settled;
        self.settle(end)
    }

    /// The whole message so far.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Where each top-level block of `markdown` begins.
fn top_level_starts(markdown: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut depth = 0usize;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(_) => {
                if depth == 0 {
                    starts.push(range.start);
                }
                depth += 1;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Rule | Event::Html(_) if depth == 0 => starts.push(range.start),
            _ => {}
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_settles_only_when_the_next_begins() {
        let mut stream = MarkdownStream::new();
        stream.push("# Title\n\nSome ");
        assert_eq!(
            stream.take_settled(),
            None,
            "a line half arrived decides nothing"
        );
        stream.push("text\n- a\n");
        // A list interrupts a paragraph: the heading and the paragraph are final.
        assert_eq!(
            stream.take_settled().as_deref(),
            Some("# Title\n\nSome text\n")
        );
        assert_eq!(stream.open(), "- a\n");
        stream.push("- b\n\n");
        assert_eq!(stream.take_settled(), None, "the list may still grow");
        stream.push("```rust\nfn x() {}\n\nfn y() {}\n");
        assert_eq!(stream.take_settled().as_deref(), Some("- a\n- b\n\n"));
        assert_eq!(stream.take_settled(), None, "an unclosed fence stays open");
        stream.push("```\n");
        assert_eq!(stream.finish(), "```rust\nfn x() {}\n\nfn y() {}\n```\n");
        assert_eq!(
            stream.text(),
            "# Title\n\nSome text\n- a\n- b\n\n```rust\nfn x() {}\n\nfn y() {}\n```\n"
        );
    }

    #[test]
    fn a_table_arriving_in_any_chunks_settles_whole() {
        let markdown = "x\n\n| Name | Size |\n|:-----|-----:|\n| keel | 19.5 MiB |\n| other | 618 MiB |\n\nafter\n";
        let chars: Vec<char> = markdown.chars().collect();
        for size in 1..=17 {
            let mut stream = MarkdownStream::new();
            let mut settled = Vec::new();
            for chunk in chars.chunks(size) {
                stream.push(&chunk.iter().collect::<String>());
                settled.extend(stream.take_settled());
            }
            assert_eq!(
                settled,
                [
                    "x\n\n",
                    "| Name | Size |\n|:-----|-----:|\n| keel | 19.5 MiB |\n| other | 618 MiB |\n\n"
                ],
                "in chunks of {size}"
            );
        }
    }

    #[test]
    fn an_open_fence_settles_at_its_closing_line_and_knows_its_language() {
        let mut stream = MarkdownStream::new();
        stream.push("\n\n~~~~ python extra\nx = 1\n~~~\nstill code\n");
        assert_eq!(
            stream.take_settled(),
            None,
            "three tildes do not close four"
        );
        let fence = stream.open_fence().unwrap();
        assert_eq!(fence.language.as_deref(), Some("python"));
        assert_eq!(
            &stream.open()[fence.body_start..],
            "x = 1\n~~~\nstill code\n"
        );
        stream.push("  ~~~~~  \nafter");
        assert_eq!(
            stream.take_settled().as_deref(),
            Some("\n\n~~~~ python extra\nx = 1\n~~~\nstill code\n  ~~~~~  \n")
        );
        assert_eq!(stream.open_fence(), None);
        assert_eq!(stream.open(), "after");
        let mut ticks = MarkdownStream::new();
        ticks.push("``` a`b\n");
        assert_eq!(ticks.take_settled(), None);
        assert_eq!(
            ticks.open_fence(),
            None,
            "a backtick in the info string: not a fence"
        );
    }

    #[test]
    fn a_long_open_fence_is_checked_line_by_line_not_parsed() {
        let mut stream = MarkdownStream::new();
        stream.push("```rust\n");
        for n in 0..10_000 {
            stream.push(&format!("let x{n} = {n};\n"));
            assert_eq!(stream.take_settled(), None);
        }
        let fence = stream.open_fence().unwrap();
        assert_eq!(
            fence.scanned,
            stream.open().len(),
            "every whole line checked once"
        );
        stream.push("```\n");
        assert!(
            stream
                .take_settled()
                .unwrap()
                .ends_with("let x9999 = 9999;\n```\n")
        );
    }

    #[test]
    fn a_paragraph_that_becomes_a_table_was_never_settled() {
        let mut stream = MarkdownStream::new();
        stream.push("| a | b |\n");
        assert_eq!(stream.take_settled(), None);
        stream.push("|---|---|\n| 1 | 2 |\n\nafter\n");
        assert_eq!(
            stream.take_settled().as_deref(),
            Some("| a | b |\n|---|---|\n| 1 | 2 |\n\n")
        );
    }
}
