//! The transcript: the session's history as a person reads it, for the pager (Ctrl-T,
//! `/transcript`): every prompt, every reasoning block, every answer rendered, every tool call
//! with its whole result.
//!
//! Invariants:
//! - Pure: stored items in, lines out. What the history holds was redacted before it was
//!   stored; everything is made visible (`keel_render`), so nothing in it is a control sequence.
//! - Nothing is folded or cut: this is where the full output lives.

use keel_render::{Color, Line, Span, Style, markdown_lines};
use keel_types::{AssistantPart, Item};

use crate::rows::wrapped;

/// The transcript of `items` (a stored item that cannot be read is named, not skipped).
pub fn transcript_lines<'a>(
    items: impl IntoIterator<Item = &'a Result<Item, String>>,
    width: usize,
) -> Vec<Line> {
    let mut lines = Vec::new();
    let heading =
        |text: &str, color: Color| Line::new(vec![Span::new(text, Style::fg(color).bold())]);
    for item in items {
        if !lines.is_empty() {
            lines.push(Line::empty());
        }
        match item {
            Err(error) => lines.push(Line::from_text(
                &format!("(an item that cannot be read: {error})"),
                Style::fg(Color::Red),
            )),
            Ok(Item::User { text }) => {
                lines.push(heading("› you", Color::Cyan));
                lines.extend(wrapped(text, width, Style::PLAIN));
            }
            Ok(Item::Context(block)) => {
                lines.push(heading(
                    "⌂ context: project instructions and environment",
                    Color::Gray,
                ));
                lines.extend(wrapped(&block.text, width, Style::PLAIN.dim()));
            }
            Ok(Item::Summary(summary)) => {
                lines.push(heading(
                    "⟲ summary of the earlier conversation",
                    Color::Gray,
                ));
                lines.extend(wrapped(&summary.text, width, Style::PLAIN.dim()));
            }
            Ok(Item::Assistant(assistant)) => {
                for part in &assistant.parts {
                    match part {
                        AssistantPart::Reasoning { text, .. } if !text.trim().is_empty() => {
                            lines.push(heading("✻ reasoning", Color::Gray));
                            lines.extend(wrapped(text, width, Style::PLAIN.dim().italic()));
                        }
                        AssistantPart::Reasoning { .. } => {}
                        AssistantPart::Text { text } => {
                            lines.push(heading("● keel", Color::Green));
                            lines.extend(markdown_lines(text, width));
                        }
                        AssistantPart::ToolCall(call) => {
                            lines.push(heading(&format!("● {} call", call.name), Color::Blue));
                            lines.extend(wrapped(&call.arguments, width, Style::PLAIN.dim()));
                        }
                        AssistantPart::WebSearch(search) => {
                            lines.push(heading("⌕ web search", Color::Blue));
                            lines.extend(wrapped(
                                &format!("{search:?}"),
                                width,
                                Style::PLAIN.dim(),
                            ));
                        }
                    }
                }
            }
            Ok(Item::ToolResult(result)) => {
                let (mark, color) = if result.is_error {
                    ("failed", Color::Red)
                } else {
                    ("result", Color::Green)
                };
                lines.push(heading(&format!("  ⎿ {} {mark}", result.name), color));
                lines.extend(wrapped(&result.content, width, Style::PLAIN));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::{AssistantItem, ToolCall, ToolResult};

    #[test]
    fn every_part_is_there_in_full_and_visible() {
        let output: String = (1..=50).map(|n| format!("line {n}\n")).collect();
        let items = vec![
            Ok(Item::User { text: "hi".into() }),
            Ok(Item::Assistant(AssistantItem {
                parts: vec![
                    AssistantPart::Reasoning {
                        text: "think \u{1b}[2J".into(),
                        replay: None,
                    },
                    AssistantPart::Text {
                        text: "## Done".into(),
                    },
                    AssistantPart::ToolCall(ToolCall {
                        id: "c1".into(),
                        name: "bash".into(),
                        arguments: "{\"command\":\"seq 50\"}".into(),
                    }),
                ],
            })),
            Ok(Item::ToolResult(ToolResult {
                call_id: "c1".into(),
                name: "bash".into(),
                content: output,
                is_error: false,
            })),
            Err("bad json".into()),
        ];
        let text = keel_render::to_plain(&transcript_lines(&items, 80));
        assert!(text.contains("think ␛[2J"), "{text}");
        assert!(!text.contains('\u{1b}'));
        assert!(
            text.contains("line 1\n") && text.contains("line 50\n"),
            "{text}"
        );
        assert!(!text.contains("## Done") && text.contains("Done"), "{text}");
        assert!(text.contains("cannot be read: bad json"), "{text}");
    }
}
