//! Inline markdown as styled pieces for the wrapper, and as plain text.
//!
//! Invariants:
//! - Markup is shown as what it means: emphasis italic, strong bold, code coloured, a link as
//!   its text then its URL in parentheses (never a terminal hyperlink sequence), an image as
//!   `[image: alt]` and its URL.

use crate::blocks::Inline;
use crate::style::{Color, Style};
use crate::wrap::Piece;

/// Inlines as styled pieces, `base` applied under their own styles.
pub(crate) fn pieces(inlines: &[Inline], base: Style) -> Vec<Piece> {
    let mut out = Vec::new();
    for inline in inlines {
        push_inline(inline, base, &mut out);
    }
    out
}

fn push_inline(inline: &Inline, style: Style, out: &mut Vec<Piece>) {
    match inline {
        Inline::Text(text) => out.push(Piece::Text(text.clone(), style)),
        Inline::Code(code) => out.push(Piece::Text(code.clone(), style.with_fg(Color::Yellow))),
        Inline::Emphasis(children) => {
            for child in children {
                push_inline(child, style.italic(), out);
            }
        }
        Inline::Strong(children) => {
            for child in children {
                push_inline(child, style.bold(), out);
            }
        }
        Inline::Strike(children) => {
            for child in children {
                push_inline(child, style.crossed(), out);
            }
        }
        Inline::Link { url, children } => {
            let linked = style.with_fg(Color::Blue).underline();
            for child in children {
                push_inline(child, linked, out);
            }
            let text = plain_text(children);
            if text != *url && !url.is_empty() {
                out.push(Piece::Text(format!(" ({url})"), Style::fg(Color::Gray)));
            }
        }
        Inline::Image { url, alt } => {
            let alt = plain_text(alt);
            let label = if alt.is_empty() {
                "[image]".to_string()
            } else {
                format!("[image: {alt}]")
            };
            out.push(Piece::Text(label, style.with_fg(Color::Blue)));
            out.push(Piece::Text(format!(" ({url})"), Style::fg(Color::Gray)));
        }
        Inline::SoftBreak => out.push(Piece::Text(" ".into(), style)),
        Inline::HardBreak => out.push(Piece::Break),
    }
}

/// The text of inlines without any markup.
pub(crate) fn plain_text(inlines: &[Inline]) -> String {
    let mut out = String::new();
    for inline in inlines {
        match inline {
            Inline::Text(text) | Inline::Code(text) => out.push_str(text),
            Inline::Emphasis(children)
            | Inline::Strong(children)
            | Inline::Strike(children)
            | Inline::Link { children, .. }
            | Inline::Image { alt: children, .. } => out.push_str(&plain_text(children)),
            Inline::SoftBreak | Inline::HardBreak => out.push(' '),
        }
    }
    out
}
