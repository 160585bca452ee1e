//! Blocks as styled terminal lines at a width.
//!
//! Invariants:
//! - No line is wider than the width given (for widths of 8 columns and more: a quote's bar or
//!   a list's marker needs its columns), and nothing in a line came from outside unescaped
//!   (every span goes through `Span::new`).
//! - Markup is shown as what it means, never as its characters: headings, emphasis, lists,
//!   quotes, rules, tables and code are styled or drawn; a link is its text then its URL in
//!   parentheses (never a terminal hyperlink sequence).
//! - Top-level blocks are separated by one empty line; blocks inside a list item are not.

use crate::blocks::{Block, Item};
use crate::highlight::{Tokens, highlight_lines};
use crate::inline::pieces;
use crate::style::{Color, Line, Span, Style};
use crate::table;
use crate::wrap::{break_line, wrap};

/// `blocks` as lines at most `width` wide.
pub(crate) fn render(blocks: &[Block], width: usize) -> Vec<Line> {
    let mut lines = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        if index > 0 {
            lines.push(Line::empty());
        }
        lines.extend(render_block(block, width, 0));
    }
    lines
}

fn heading_style(level: u8) -> Style {
    match level {
        1 => Style::fg(Color::Cyan).bold().underline(),
        2 => Style::fg(Color::Cyan).bold(),
        _ => Style::PLAIN.bold(),
    }
}

fn render_block(block: &Block, width: usize, depth: usize) -> Vec<Line> {
    match block {
        Block::Paragraph(inlines) => wrap(&pieces(inlines, Style::PLAIN), width),
        Block::Heading(level, inlines) => wrap(&pieces(inlines, heading_style(*level)), width),
        Block::Quote(blocks) => {
            let bar = [Span::new("│ ", Style::fg(Color::Gray))];
            let inner = narrower(width, 2);
            let mut lines = Vec::new();
            for (index, block) in blocks.iter().enumerate() {
                if index > 0 {
                    lines.push(Line::empty());
                }
                lines.extend(render_block(block, inner, depth));
            }
            lines
                .into_iter()
                .map(|line| {
                    let line = Line::new(
                        line.spans
                            .into_iter()
                            .map(|span| {
                                let style = Style {
                                    italic: true,
                                    ..span.style
                                };
                                Span::new(span.text(), style)
                            })
                            .collect(),
                    );
                    line.prefixed(&bar)
                })
                .collect()
        }
        Block::Code { language, text } => code_lines(language.as_deref(), text, width),
        Block::List { start, items } => list(*start, items, width, depth),
        Block::Rule => vec![Line::from_text(
            &"─".repeat(width.min(80)),
            Style::fg(Color::Gray),
        )],
        Block::Table { aligns, head, rows } => table::render(aligns, head, rows, width),
        Block::Html(text) => text
            .trim_end_matches('\n')
            .split('\n')
            .flat_map(|line| break_line(vec![Span::new(line, Style::fg(Color::Gray))], width))
            .collect(),
    }
}

fn narrower(width: usize, by: usize) -> usize {
    width.saturating_sub(by).max(1)
}

/// Spaces every tab stop of four columns would give.
pub(crate) fn expand_tabs(line: &str) -> String {
    if !line.contains('\t') {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len() + 8);
    let mut column = 0usize;
    for c in line.chars() {
        if c == '\t' {
            let spaces = 4 - column % 4;
            out.extend(std::iter::repeat_n(' ', spaces));
            column += spaces;
        } else {
            out.push(c);
            column += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        }
    }
    out
}

/// A code block's lines, highlighted, each broken at the width (code is never re-flowed).
pub(crate) fn code_lines(language: Option<&str>, text: &str, width: usize) -> Vec<Line> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    let lines: Vec<String> = text.split('\n').map(expand_tabs).collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    highlight_lines(language, &lines)
        .into_iter()
        .flat_map(|tokens| token_rows(tokens, width))
        .collect()
}

/// One highlighted line of code as rows at most `width` wide.
pub(crate) fn token_rows(tokens: Tokens, width: usize) -> Vec<Line> {
    let spans = tokens
        .into_iter()
        .map(|(kind, token)| Span::new(&token, kind.style()))
        .collect();
    break_line(spans, width)
}

const BULLETS: [&str; 3] = ["•", "◦", "▪"];

fn list(start: Option<u64>, items: &[Item], width: usize, depth: usize) -> Vec<Line> {
    let last_number = start.map(|first| first + items.len().saturating_sub(1) as u64);
    let number_width = last_number.map(|n| n.to_string().len()).unwrap_or(0);
    let mut lines = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let marker = match (start, item.task) {
            (_, Some(true)) => Span::new("☑ ", Style::fg(Color::Green)),
            (_, Some(false)) => Span::new("☐ ", Style::PLAIN),
            (Some(first), None) => Span::new(
                &format!("{:>number_width$}. ", first + index as u64),
                Style::fg(Color::Cyan),
            ),
            (None, None) => Span::new(
                &format!("{} ", BULLETS[depth % BULLETS.len()]),
                Style::fg(Color::Cyan),
            ),
        };
        let indent = marker.width();
        let inner = narrower(width, indent);
        let hang = [Span::plain(&" ".repeat(indent))];
        let item_lines: Vec<Line> = item
            .blocks
            .iter()
            .flat_map(|block| render_block(block, inner, depth + 1))
            .collect();
        if item_lines.is_empty() {
            lines.push(Line::new(vec![marker]));
            continue;
        }
        for (row, line) in item_lines.into_iter().enumerate() {
            if row == 0 {
                lines.push(line.prefixed(std::slice::from_ref(&marker)));
            } else {
                lines.push(line.prefixed(&hang));
            }
        }
    }
    lines
}
