//! Blocks as sanitised HTML for the browser UI.
//!
//! Invariants:
//! - Every piece of text is escaped (`& < > " '`) after control characters were made visible
//!   as on the terminal: no markup, script or reordering from the model reaches the page.
//! - The only elements are those written here; the only attributes are fixed class names,
//!   `start` (a number), `href` (below), `rel`, `target`, `type`, `disabled` and `checked`.
//! - A link's `href` is kept only for `http`, `https` and `mailto` URLs, and opens in a new tab
//!   with no referrer and no opener; any other scheme (`javascript:`, `data:`, …) is shown as
//!   text. Images are never loaded: an image is a link to its URL.
//! - Code blocks carry their language and a copy button (the page's script copies the code's
//!   text); highlighting is `hl-*` classes of the same kinds the terminal colours.

use crate::blocks::{Align, Block, Inline, Item};
use crate::highlight::highlight_lines;
use crate::inline::plain_text;
use crate::text::visible;

/// `blocks` as HTML.
pub(crate) fn render(blocks: &[Block]) -> String {
    let mut out = String::new();
    for block in blocks {
        push_block(block, &mut out);
    }
    out
}

/// `text` escaped for HTML text and attribute values.
pub(crate) fn escape(text: &str, out: &mut String) {
    for c in visible(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

fn push_block(block: &Block, out: &mut String) {
    match block {
        Block::Paragraph(inlines) => {
            out.push_str("<p>");
            push_inlines(inlines, out);
            out.push_str("</p>\n");
        }
        Block::Heading(level, inlines) => {
            let level = (*level).clamp(1, 6);
            out.push_str(&format!("<h{level}>"));
            push_inlines(inlines, out);
            out.push_str(&format!("</h{level}>\n"));
        }
        Block::Quote(blocks) => {
            out.push_str("<blockquote>\n");
            for block in blocks {
                push_block(block, out);
            }
            out.push_str("</blockquote>\n");
        }
        Block::Code { language, text } => push_code(language.as_deref(), text, out),
        Block::List { start, items } => push_list(*start, items, out),
        Block::Rule => out.push_str("<hr>\n"),
        Block::Table { aligns, head, rows } => {
            out.push_str("<table>\n<thead><tr>");
            for (column, cell) in head.iter().enumerate() {
                push_cell("th", aligns.get(column).copied(), cell, out);
            }
            out.push_str("</tr></thead>\n<tbody>\n");
            for row in rows {
                out.push_str("<tr>");
                for (column, cell) in row.iter().enumerate() {
                    push_cell("td", aligns.get(column).copied(), cell, out);
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</tbody>\n</table>\n");
        }
        Block::Html(text) => {
            out.push_str("<pre class=\"raw-html\">");
            escape(text, out);
            out.push_str("</pre>\n");
        }
    }
}

fn push_cell(tag: &str, align: Option<Align>, inlines: &[Inline], out: &mut String) {
    match align {
        Some(Align::Center) => out.push_str(&format!("<{tag} class=\"al-center\">")),
        Some(Align::Right) => out.push_str(&format!("<{tag} class=\"al-right\">")),
        _ => out.push_str(&format!("<{tag}>")),
    }
    push_inlines(inlines, out);
    out.push_str(&format!("</{tag}>"));
}

fn push_list(start: Option<u64>, items: &[Item], out: &mut String) {
    match start {
        Some(1) => out.push_str("<ol>\n"),
        Some(first) => out.push_str(&format!("<ol start=\"{first}\">\n")),
        None => out.push_str("<ul>\n"),
    }
    for item in items {
        match item.task {
            Some(done) => {
                out.push_str("<li class=\"task\"><input type=\"checkbox\" disabled");
                if done {
                    out.push_str(" checked");
                }
                out.push('>');
            }
            None => out.push_str("<li>"),
        }
        // A tight item's single paragraph reads better without its margins.
        match item.blocks.as_slice() {
            [Block::Paragraph(inlines), rest @ ..] => {
                push_inlines(inlines, out);
                for block in rest {
                    push_block(block, out);
                }
            }
            blocks => {
                for block in blocks {
                    push_block(block, out);
                }
            }
        }
        out.push_str("</li>\n");
    }
    out.push_str(if start.is_some() {
        "</ol>\n"
    } else {
        "</ul>\n"
    });
}

fn push_code(language: Option<&str>, text: &str, out: &mut String) {
    out.push_str("<div class=\"code\"><div class=\"code-head\"><span class=\"code-lang\">");
    escape(language.unwrap_or(""), out);
    out.push_str("</span><button type=\"button\" class=\"copy\">copy</button></div><pre><code>");
    let text = text.strip_suffix('\n').unwrap_or(text);
    let lines: Vec<&str> = text.split('\n').collect();
    for (index, tokens) in highlight_lines(language, &lines).into_iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        for (kind, token) in tokens {
            match kind.class() {
                Some(class) => {
                    out.push_str(&format!("<span class=\"{class}\">"));
                    escape(&token, out);
                    out.push_str("</span>");
                }
                None => escape(&token, out),
            }
        }
    }
    out.push_str("</code></pre></div>\n");
}

/// Whether a link may point where it says.
fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
}

/// Where a link leads, as a person checks it: the host of an http(s) URL, the address of a
/// mailto one.
fn destination(url: &str) -> &str {
    let url = url.trim();
    let rest = url
        .split_once("://")
        .map(|(_, rest)| rest)
        .or_else(|| url.split_once(':').map(|(_, rest)| rest))
        .unwrap_or(url);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

fn push_link(url: &str, label: impl FnOnce(&mut String), out: &mut String) {
    if safe_url(url) {
        out.push_str("<a href=\"");
        escape(url.trim(), out);
        out.push_str("\" rel=\"noopener noreferrer nofollow\" target=\"_blank\">");
        label(out);
        out.push_str("</a>");
        // The label is the model's: where the link really goes is shown beside it.
        out.push_str(" <span class=\"url\">(");
        escape(destination(url), out);
        out.push_str(")</span>");
    } else {
        label(out);
        if !url.is_empty() {
            out.push_str(" <span class=\"url\">(");
            escape(url, out);
            out.push_str(")</span>");
        }
    }
}

fn push_inlines(inlines: &[Inline], out: &mut String) {
    for inline in inlines {
        push_inline(inline, out);
    }
}

fn push_inline(inline: &Inline, out: &mut String) {
    match inline {
        Inline::Text(text) => escape(text, out),
        Inline::Code(code) => {
            out.push_str("<code>");
            escape(code, out);
            out.push_str("</code>");
        }
        Inline::Emphasis(children) => wrap_in("em", children, out),
        Inline::Strong(children) => wrap_in("strong", children, out),
        Inline::Strike(children) => wrap_in("del", children, out),
        Inline::Link { url, children } => push_link(url, |out| push_inlines(children, out), out),
        Inline::Image { url, alt } => {
            let alt = plain_text(alt);
            push_link(
                url,
                |out| {
                    out.push_str("<span class=\"image\">");
                    if alt.is_empty() {
                        out.push_str("[image]");
                    } else {
                        out.push_str("[image: ");
                        escape(&alt, out);
                        out.push(']');
                    }
                    out.push_str("</span>");
                },
                out,
            );
        }
        Inline::SoftBreak => out.push('\n'),
        Inline::HardBreak => out.push_str("<br>\n"),
    }
}

fn wrap_in(tag: &str, children: &[Inline], out: &mut String) {
    out.push_str(&format!("<{tag}>"));
    push_inlines(children, out);
    out.push_str(&format!("</{tag}>"));
}
