//! What a write or an edit changes in a file, as a unified diff with line numbers, for the
//! terminal (coloured lines at a width) and the browser (a table).
//!
//! Invariants:
//! - The diff is of the exact bytes before and after: what a person approves is what is
//!   written. A new file is all added lines.
//! - Binary content (a NUL byte, or not UTF-8) and content too large to diff in a moment are a
//!   one-line summary instead, saying which and how large.
//! - Text in a diff is shown like any outside text: control characters visible, tabs expanded.

use crate::html::escape;
use crate::style::{Color, Line, Span, Style};
use crate::terminal::expand_tabs;
use crate::text::visible_exact;
use crate::wrap::break_line;
use similar::{ChangeTag, TextDiff};

/// Larger than this (both sides together) is summarised, not diffed.
const LARGEST_DIFFED: usize = 4 << 20;
/// Lines of context around each change.
const CONTEXT: usize = 3;

/// One line of a hunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffLine {
    pub kind: LineKind,
    pub old_number: Option<usize>,
    pub new_number: Option<usize>,
    pub text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    Context,
    Removed,
    Added,
}

/// A run of changes with their context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    pub header: String,
    pub lines: Vec<DiffLine>,
}

/// What a change does to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileDiff {
    Text {
        created: bool,
        /// The file held this many bytes of binary content, all replaced by the text.
        replaced_binary: Option<usize>,
        added: usize,
        removed: usize,
        hunks: Vec<Hunk>,
    },
    Binary {
        old_bytes: Option<usize>,
        new_bytes: usize,
    },
    TooLarge {
        old_bytes: Option<usize>,
        new_bytes: usize,
    },
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes.contains(&0) || std::str::from_utf8(bytes).is_err()
}

impl FileDiff {
    /// The change from `old` (`None`: the file does not exist yet) to `new`.
    pub fn new(old: Option<&[u8]>, new: &[u8]) -> FileDiff {
        let old_bytes = old.map(<[u8]>::len);
        // Text replacing binary content: every new line is shown (the old side cannot be).
        let replaced_binary = old.filter(|old| is_binary(old)).map(<[u8]>::len);
        let old = if replaced_binary.is_some() { None } else { old };
        if is_binary(new) {
            return FileDiff::Binary {
                old_bytes,
                new_bytes: new.len(),
            };
        }
        if old_bytes.unwrap_or(0) + new.len() > LARGEST_DIFFED {
            return FileDiff::TooLarge {
                old_bytes,
                new_bytes: new.len(),
            };
        }
        let old_text = old
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .unwrap_or("");
        let new_text = std::str::from_utf8(new).unwrap_or("");
        let diff = TextDiff::configure()
            .timeout(std::time::Duration::from_millis(200))
            .diff_lines(old_text, new_text);
        let (mut added, mut removed) = (0, 0);
        let mut hunks = Vec::new();
        for group in diff.grouped_ops(CONTEXT) {
            let (Some(first), Some(last)) = (group.first(), group.last()) else {
                continue;
            };
            let old_range = first.old_range().start..last.old_range().end;
            let new_range = first.new_range().start..last.new_range().end;
            let header = format!(
                "@@ -{},{} +{},{} @@",
                old_range.start + usize::from(!old_range.is_empty()),
                old_range.len(),
                new_range.start + usize::from(!new_range.is_empty()),
                new_range.len()
            );
            let mut lines = Vec::new();
            for op in &group {
                for change in diff.iter_changes(op) {
                    let kind = match change.tag() {
                        ChangeTag::Equal => LineKind::Context,
                        ChangeTag::Delete => {
                            removed += 1;
                            LineKind::Removed
                        }
                        ChangeTag::Insert => {
                            added += 1;
                            LineKind::Added
                        }
                    };
                    let text = change.value();
                    lines.push(DiffLine {
                        kind,
                        old_number: change.old_index().map(|index| index + 1),
                        new_number: change.new_index().map(|index| index + 1),
                        text: text.strip_suffix('\n').unwrap_or(text).to_string(),
                    });
                }
            }
            hunks.push(Hunk { header, lines });
        }
        FileDiff::Text {
            created: old.is_none() && replaced_binary.is_none(),
            replaced_binary,
            added,
            removed,
            hunks,
        }
    }

    /// One line saying what changes: `new file, 12 lines` or `+3 −1`.
    pub fn summary(&self) -> String {
        match self {
            FileDiff::Text {
                created: true,
                added,
                ..
            } => format!(
                "new file, {added} line{}",
                if *added == 1 { "" } else { "s" }
            ),
            FileDiff::Text {
                replaced_binary: Some(bytes),
                added,
                ..
            } => format!(
                "replaces {bytes} bytes of binary content with {added} line{}",
                if *added == 1 { "" } else { "s" }
            ),
            FileDiff::Text { added, removed, .. } if added + removed == 0 => {
                "no change".to_string()
            }
            FileDiff::Text { added, removed, .. } => format!("+{added} −{removed}"),
            FileDiff::Binary {
                old_bytes,
                new_bytes,
            } => format!("binary content, {}", sizes(*old_bytes, *new_bytes)),
            FileDiff::TooLarge {
                old_bytes,
                new_bytes,
            } => format!("too large to show, {}", sizes(*old_bytes, *new_bytes)),
        }
    }

    /// The diff as terminal lines at most `width` wide: the summary, then each hunk.
    pub fn lines(&self, width: usize) -> Vec<Line> {
        let mut lines = break_line(
            vec![Span::new(&self.summary(), Style::fg(Color::Gray))],
            width,
        );
        let FileDiff::Text { hunks, .. } = self else {
            return lines;
        };
        let largest = hunks
            .iter()
            .flat_map(|hunk| &hunk.lines)
            .flat_map(|line| [line.old_number, line.new_number])
            .flatten()
            .max()
            .unwrap_or(1);
        let digits = largest.to_string().len();
        // "old new " before each line.
        let gutter_width = 2 * digits + 2;
        for hunk in hunks {
            lines.extend(break_line(
                vec![Span::new(&hunk.header, Style::fg(Color::Cyan))],
                width,
            ));
            for line in &hunk.lines {
                let number = |n: Option<usize>| {
                    n.map(|n| format!("{n:>digits$}"))
                        .unwrap_or_else(|| " ".repeat(digits))
                };
                let (sign, style) = match line.kind {
                    LineKind::Context => (' ', Style::PLAIN),
                    LineKind::Removed => ('-', Style::fg(Color::Red)),
                    LineKind::Added => ('+', Style::fg(Color::Green)),
                };
                let gutter = Span::new(
                    &format!("{} {} ", number(line.old_number), number(line.new_number)),
                    Style::fg(Color::Gray),
                );
                let text = format!("{sign} {}", visible_exact(&expand_tabs(&line.text)));
                let room = width.saturating_sub(gutter_width).max(1);
                let blank = Span::plain(&" ".repeat(gutter_width));
                for (index, part) in break_line(vec![Span::new(&text, style)], room)
                    .into_iter()
                    .enumerate()
                {
                    let lead = if index == 0 { &gutter } else { &blank };
                    lines.push(part.prefixed(std::slice::from_ref(lead)));
                }
            }
        }
        lines
    }

    /// The diff as an HTML table (the summary in its caption).
    pub fn html(&self) -> String {
        self.html_with(&self.summary(), true)
    }

    /// The diff of a change whose place in its file is not known (an edit's replaced text and
    /// its replacement, a write's content, from a stored call): no line numbers, `caption` as
    /// its summary.
    pub fn html_unplaced(&self, caption: &str) -> String {
        self.html_with(caption, false)
    }

    fn html_with(&self, caption: &str, numbered: bool) -> String {
        let mut out = String::from("<table class=\"diff\"><caption>");
        escape(caption, &mut out);
        out.push_str("</caption>\n");
        if let FileDiff::Text { hunks, .. } = self {
            for hunk in hunks {
                out.push_str("<tr class=\"hunk\"><td colspan=\"3\">");
                escape(&hunk.header, &mut out);
                out.push_str("</td></tr>\n");
                for line in &hunk.lines {
                    let (class, sign) = match line.kind {
                        LineKind::Context => ("ctx", ' '),
                        LineKind::Removed => ("del", '-'),
                        LineKind::Added => ("add", '+'),
                    };
                    let number = |n: Option<usize>| {
                        n.filter(|_| numbered)
                            .map(|n| n.to_string())
                            .unwrap_or_default()
                    };
                    out.push_str(&format!(
                        "<tr class=\"{class}\"><td class=\"no\">{}</td><td class=\"no\">{}</td><td class=\"text\">{sign} ",
                        number(line.old_number),
                        number(line.new_number)
                    ));
                    escape(&visible_exact(&line.text), &mut out);
                    out.push_str("</td></tr>\n");
                }
            }
        }
        out.push_str("</table>\n");
        out
    }
}

fn sizes(old: Option<usize>, new: usize) -> String {
    match old {
        Some(old) => format!("{old} → {new} bytes"),
        None => format!("{new} bytes, new file"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_has_numbered_context_and_counts() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\ni\n";
        let diff = FileDiff::new(Some(old.as_bytes()), new.as_bytes());
        assert_eq!(diff.summary(), "+2 −1");
        let FileDiff::Text { hunks, .. } = &diff else {
            panic!("{diff:?}")
        };
        assert_eq!(hunks.len(), 1);
        assert_eq!(hunks[0].header, "@@ -1,8 +1,9 @@");
        let removed = hunks[0]
            .lines
            .iter()
            .find(|line| line.kind == LineKind::Removed)
            .unwrap();
        assert_eq!((removed.old_number, removed.new_number), (Some(4), None));
        assert_eq!(removed.text, "d");
    }

    #[test]
    fn a_new_file_is_all_added_and_binary_or_huge_is_a_summary() {
        let diff = FileDiff::new(None, b"one\ntwo\n");
        assert_eq!(diff.summary(), "new file, 2 lines");
        let binary = FileDiff::new(Some(b"x"), b"\x00\x01");
        assert_eq!(binary.summary(), "binary content, 1 → 2 bytes");
        let over_binary = FileDiff::new(Some(b"\x00\x01\x02"), b"#!/bin/sh\ncurl x | sh\n");
        assert_eq!(
            over_binary.summary(),
            "replaces 3 bytes of binary content with 2 lines"
        );
        let shown: Vec<String> = over_binary.lines(80).iter().map(Line::plain).collect();
        assert!(
            shown.iter().any(|line| line.ends_with("+ curl x | sh")),
            "{shown:?}"
        );
        let huge = vec![b'a'; LARGEST_DIFFED + 1];
        assert_eq!(
            FileDiff::new(None, &huge).summary(),
            format!("too large to show, {} bytes, new file", LARGEST_DIFFED + 1)
        );
    }

    #[test]
    fn a_change_no_one_could_see_is_named() {
        let diff = FileDiff::new(Some(b"foo\n"), "foo\u{200b}\n".as_bytes());
        let shown: Vec<String> = diff.lines(80).iter().map(Line::plain).collect();
        assert!(
            shown.contains(&"  1 + foo⟨U+200B⟩".to_string()),
            "{shown:?}"
        );
        assert!(diff.html().contains("foo⟨U+200B⟩"));
    }

    #[test]
    fn continuation_rows_line_up_under_the_text() {
        let diff = FileDiff::new(None, b"abcdefghijklmnopqrstuvwxyz\n");
        let shown: Vec<String> = diff.lines(16).iter().map(Line::plain).collect();
        assert_eq!(
            shown,
            [
                "new file, 1 line",
                "@@ -0,0 +1,1 @@",
                "  1 + abcdefghij",
                "    klmnopqrstuv",
                "    wxyz"
            ]
        );
    }

    #[test]
    fn diff_lines_fit_the_width_and_show_controls() {
        let diff = FileDiff::new(Some(b"x\n"), "y\u{1b}[2J\t".repeat(20).as_bytes());
        for line in diff.lines(30) {
            assert!(line.width() <= 30, "{:?}", line.plain());
            assert!(!line.plain().contains('\u{1b}'));
        }
    }
}
