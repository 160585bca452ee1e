//! Property: no text from a model, a tool or a provider makes the renderer emit a control
//! sequence it did not choose, or markup the page did not choose. Inputs mix markdown syntax
//! with every kind of control character, escape sequence and HTML.

use keel_render::{Colors, FileDiff, markdown_html, markdown_lines, to_ansi};
use proptest::prelude::*;

/// Pieces an attacker (or an unlucky model) might write.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}]{1,4}",
        Just("\u{1b}[2J".to_string()),
        Just("\u{1b}]8;;http://evil\u{7}x\u{1b}]8;;\u{7}".to_string()),
        Just("\u{1b}]0;title\u{7}".to_string()),
        Just("\u{9b}31m".to_string()),
        Just("\r\u{1b}[2K".to_string()),
        Just("\n```rust\n".to_string()),
        Just("\n```\n".to_string()),
        Just("\n| a | b |\n|---|--:|\n| 1 | 2 |\n".to_string()),
        Just("\n- [x] ".to_string()),
        Just("\n1. ".to_string()),
        Just("\n> ".to_string()),
        Just("**".to_string()),
        Just("`".to_string()),
        Just("[t](javascript:alert(1))".to_string()),
        Just("<script>alert(1)</script>".to_string()),
        Just("<img src=x onerror=alert(1)>".to_string()),
        Just("\n\n".to_string()),
        Just("\t".to_string()),
    ]
}

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(fragment(), 0..12).prop_map(|parts| parts.concat())
}

/// Where the first sequence or character the renderer did not choose is, if any.
fn foreign(output: &str) -> Option<String> {
    let mut chars = output.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '\n' => {}
            '\u{1b}' => {
                // Only SGR: ESC [ digits and semicolons m.
                if chars.next().map(|(_, c)| c) != Some('[') {
                    return Some(format!("a bare ESC at {at}"));
                }
                loop {
                    match chars.next().map(|(_, c)| c) {
                        Some('m') => break,
                        Some(c) if c.is_ascii_digit() || c == ';' => {}
                        other => return Some(format!("a non-SGR sequence at {at}: {other:?}")),
                    }
                }
            }
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => {
                return Some(format!("control {:#x} at {at}", c as u32));
            }
            '\u{061c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{2028}'
            | '\u{2029}' => return Some(format!("bidi {:#x} at {at}", c as u32)),
            _ => {}
        }
    }
    None
}

const TAGS: &[&str] = &[
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "div",
    "span",
    "button",
    "pre",
    "code",
    "ol",
    "ul",
    "li",
    "input",
    "hr",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "em",
    "strong",
    "del",
    "a",
    "br",
    "caption",
];

/// The first tag the HTML renderer would not write, if any.
fn foreign_tag(html: &str) -> Option<String> {
    for (at, _) in html.match_indices('<') {
        let rest = &html[at + 1..];
        let name: String = rest
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if !TAGS.contains(&name.as_str()) {
            return Some(format!("<{name} at {at}"));
        }
        let tag_end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..tag_end];
        if tag.contains("on")
            && tag.contains('=')
            && tag.split_whitespace().any(|a| a.starts_with("on"))
        {
            return Some(format!("an event handler in <{tag}>"));
        }
        if tag.contains("href=\"")
            && !(tag.contains("href=\"http://")
                || tag.contains("href=\"https://")
                || tag.contains("href=\"mailto:"))
        {
            return Some(format!("an unsafe href in <{tag}>"));
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn markdown_never_emits_a_foreign_sequence(markdown in text(), width in 1usize..140) {
        let lines = markdown_lines(&markdown, width.max(1));
        let ansi = to_ansi(&lines, Colors::Ansi);
        prop_assert_eq!(foreign(&ansi), None, "{:?}", ansi);
        let html = markdown_html(&markdown);
        prop_assert_eq!(foreign(&html.replace(['\t'], " ")), None, "{:?}", html);
        prop_assert_eq!(foreign_tag(&html), None, "{:?}", html);
    }

    #[test]
    fn diffs_never_emit_a_foreign_sequence(old in text(), new in text(), width in 1usize..140) {
        let diff = FileDiff::new(Some(old.as_bytes()), new.as_bytes());
        let ansi = to_ansi(&diff.lines(width), Colors::Ansi);
        prop_assert_eq!(foreign(&ansi), None, "{:?}", ansi);
        prop_assert_eq!(foreign_tag(&diff.html()), None);
    }
}

#[test]
fn the_checker_itself_catches_what_it_looks_for() {
    assert!(foreign("a\u{1b}]0;x\u{7}").is_some());
    assert!(foreign("\u{1b}[2J").is_some());
    assert!(foreign("\u{9b}").is_some());
    assert!(foreign("\u{202e}").is_some());
    assert_eq!(foreign("\u{1b}[1;36mok\u{1b}[0m\n"), None);
    assert!(foreign_tag("<script>").is_some());
    assert!(foreign_tag("<a href=\"javascript:x\">").is_some());
    assert!(foreign_tag("<span onclick=\"x\">").is_some());
    assert_eq!(
        foreign_tag("<p><a href=\"https://x\" rel=\"noopener\">x</a></p>"),
        None
    );
}

/// Markdown without link reference definitions (they apply to the whole document, so a
/// message split into blocks may render them differently: a documented limit).
fn streamable() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z ]{1,30}",
        Just("\n".to_string()),
        Just("\n\n".to_string()),
        Just("\r".to_string()),
        Just("\n# Title\n".to_string()),
        Just("\n- item\n".to_string()),
        Just("\n  - nested\n".to_string()),
        Just("\n1. one\n".to_string()),
        Just("\n> quoted\n".to_string()),
        Just("\n```rust\nfn x() {}\n".to_string()),
        Just("\n```\n".to_string()),
        Just("\n~~~\n".to_string()),
        Just("\n    indented code\n".to_string()),
        Just("\n| a | b |\n|---|---|\n| 1 | 2 |\n".to_string()),
        Just("\n---\n".to_string()),
        Just("**bold** `code` [l](https://x.y)".to_string()),
        Just("\n<div>\nhtml\n</div>\n".to_string()),
    ];
    proptest::collection::vec(piece, 0..16).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// What a streamed message shows, block by block as it settles, is what the whole
    /// message renders to, whatever the deltas.
    #[test]
    fn a_streamed_message_ends_as_the_whole_message_renders(
        markdown in streamable(),
        chunk in 1usize..40,
    ) {
        let mut stream = keel_render::MarkdownStream::new();
        let mut pieces: Vec<String> = Vec::new();
        let chars: Vec<char> = markdown.chars().collect();
        for delta in chars.chunks(chunk) {
            stream.push(&delta.iter().collect::<String>());
            pieces.extend(stream.take_settled());
        }
        pieces.push(stream.finish());
        prop_assert_eq!(pieces.concat(), markdown.clone(), "nothing lost or doubled");
        let mut shown: Vec<String> = Vec::new();
        for piece in &pieces {
            let lines = markdown_lines(piece, 60);
            if lines.is_empty() {
                continue;
            }
            if !shown.is_empty() {
                shown.push(String::new());
            }
            shown.extend(lines.iter().map(keel_render::Line::plain));
        }
        let whole: Vec<String> = markdown_lines(&markdown, 60).iter().map(keel_render::Line::plain).collect();
        prop_assert_eq!(shown, whole);
    }

    #[test]
    fn every_line_fits_its_width(markdown in text(), width in 8usize..140) {
        for line in markdown_lines(&markdown, width) {
            prop_assert!(line.width() <= width, "{:?} is {} wide at {}", line.plain(), line.width(), width);
        }
    }
}
