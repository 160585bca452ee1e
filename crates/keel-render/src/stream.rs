//! A message arriving in deltas, split into blocks that are final and the block still open.
//!
//! Invariants:
//! - A block is settled only once another top-level block has begun after it, on a whole line:
//!   nothing a later delta adds can change how it renders (a growing list, a paragraph that
//!   may yet become a setext heading or a table, an unclosed fence, a line half arrived all
//!   stay open).
//! - Settled text is handed out once, in order, and together with `finish` it is the whole
//!   message, byte for byte.

use crate::blocks::options;
use pulldown_cmark::{Event, Parser};

/// A streaming message.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    text: String,
    settled: usize,
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
        let whole_lines = &open[..open.rfind('\n').map_or(0, |at| at + 1)];
        let last_start = top_level_starts(whole_lines).into_iter().skip(1).last()?;
        let settled = open[..last_start].to_string();
        self.settled += last_start;
        Some(settled)
    }

    /// The text of the block still open (it re-renders as it grows).
    pub fn open(&self) -> &str {
        &self.text[self.settled..]
    }

    /// Everything not handed out yet, settled at the message's end.
    pub fn finish(&mut self) -> String {
        let rest = self.text[self.settled..].to_string();
        self.settled = self.text.len();
        rest
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
