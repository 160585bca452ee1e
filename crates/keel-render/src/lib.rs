//! keel's one renderer: what the model writes (markdown) and what a tool changes (diffs), as
//! styled terminal lines at a width and as sanitised HTML for the browser, from one parse, so
//! the two surfaces never disagree.
//!
//! Invariants:
//! - Pure functions of their input (and the width): no terminal, no I/O, no clock. Nothing is
//!   loaded to highlight code: the grammars are static tables in the binary.
//! - Nothing from outside reaches a terminal or a page as control or markup: text is made
//!   visible (`text`) and, for HTML, escaped (`html`); the only escape sequences in
//!   `to_ansi`'s output are the SGR styles it writes itself.
//! - Every terminal line fits the width it was rendered at.

mod blocks;
mod diff;
mod highlight;
mod html;
mod inline;
mod open_code;
mod stream;
mod style;
mod table;
mod terminal;
mod text;
mod wrap;

pub use diff::{DiffLine, FileDiff, Hunk, LineKind};
pub use open_code::{OpenCode, OpenRows};
pub use stream::{MarkdownStream, OpenFence};
pub use style::{Color, Colors, Line, Span, Style, line_to_ansi, to_ansi, to_plain};
pub use text::{visible, visible_exact, visible_line};

/// `markdown` as styled lines at most `width` columns wide.
pub fn markdown_lines(markdown: &str, width: usize) -> Vec<Line> {
    terminal::render(&blocks::parse(markdown), width)
}

/// `markdown` as sanitised HTML (see `html` for what it may contain).
pub fn markdown_html(markdown: &str) -> String {
    html::render(&blocks::parse(markdown))
}

/// `text` as HTML text: control characters visible, `& < > " '` escaped.
pub fn escaped(text: &str) -> String {
    let mut out = String::new();
    html::escape(text, &mut out);
    out
}

/// A code block's lines, highlighted for `language`, broken at `width`.
pub fn code_lines(language: Option<&str>, code: &str, width: usize) -> Vec<Line> {
    terminal::code_lines(language, code, width)
}
