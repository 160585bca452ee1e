//! The transcript: the session's history as a person reads it, for the pager (Ctrl-T,
//! `/transcript`): every prompt, every reasoning block, every answer rendered, every tool call
//! with its whole result.
//!
//! Invariants:
//! - Pure: stored items in, lines out. What the history holds was redacted before it was
//!   stored; everything is made visible (`keel_render`), so nothing in it is a control sequence.
//! - Nothing is folded or cut: this is where the full output lives.
//! - A call is shown as its card's subject would be, in full: a command's every line, an edit
//!   or a write as the renderer's diff of its arguments (the replaced text and its
//!   replacement; the whole content of a write), other calls as their arguments. A result is
//!   headed by its receipt's state (completed, failed, denied, cancelled, unknown …) in the
//!   cards' colours.

use keel_render::{Color, FileDiff, Line, Span, Style, markdown_lines};
use keel_types::{AssistantPart, Item, ReceiptState};

use crate::rows::wrapped;

/// A tool call's arguments as a person reads them in full (see the module invariants).
fn call_lines(name: &str, arguments: &str, width: usize) -> Vec<Line> {
    if let Some(change) = keel_types::stated_change(name, arguments) {
        let mut lines = wrapped(&change.path, width, Style::PLAIN.dim());
        let before = change.replaced.as_deref().map(str::as_bytes);
        lines.extend(FileDiff::new(before, change.with.as_bytes()).lines(width));
        return lines;
    }
    let parsed: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    match parsed.get("command").and_then(serde_json::Value::as_str) {
        Some(command) if name == "bash" => wrapped(command, width, Style::PLAIN),
        _ => wrapped(arguments, width, Style::PLAIN.dim()),
    }
}

/// The transcript of `items` (a stored item that cannot be read is named, not skipped), each
/// result headed by `state_of(call id)`, its receipt's state where there is one.
pub fn transcript_lines<'a>(
    items: impl IntoIterator<Item = &'a Result<Item, String>>,
    state_of: &dyn Fn(&str) -> Option<ReceiptState>,
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
                            lines.extend(call_lines(&call.name, &call.arguments, width));
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
                let state = state_of(&result.call_id).unwrap_or(if result.is_error {
                    ReceiptState::Failed
                } else {
                    ReceiptState::Completed
                });
                lines.push(heading(
                    &format!("  ⎿ {} {}", result.name, state.as_str().replace('_', " ")),
                    crate::cards::state_color(state),
                ));
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
        let text = keel_render::to_plain(&transcript_lines(&items, &|_| None, 80));
        assert!(text.contains("think ␛[2J"), "{text}");
        assert!(!text.contains('\u{1b}'));
        assert!(
            text.contains("line 1\n") && text.contains("line 50\n"),
            "{text}"
        );
        assert!(!text.contains("## Done") && text.contains("Done"), "{text}");
        assert!(text.contains("cannot be read: bad json"), "{text}");
        assert!(
            text.contains("● bash call\nseq 50\n"),
            "the command: {text}"
        );
        assert!(text.contains("⎿ bash completed"), "{text}");
    }

    #[test]
    fn an_edit_is_a_diff_and_a_result_says_its_receipts_state() {
        let call = |id: &str, name: &str, arguments: serde_json::Value| {
            AssistantPart::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.to_string(),
            })
        };
        let result = |id: &str, name: &str, content: &str| {
            Ok(Item::ToolResult(ToolResult {
                call_id: id.into(),
                name: name.into(),
                content: content.into(),
                is_error: true,
            }))
        };
        let items = vec![
            Ok(Item::Assistant(AssistantItem {
                parts: vec![
                    call(
                        "c1",
                        "edit_file",
                        serde_json::json!({"path": "a.rs", "old_string": "one\ntwo", "new_string": "one\n2"}),
                    ),
                    call("c2", "bash", serde_json::json!({"command": "rm -rf x"})),
                    call("c3", "bash", serde_json::json!({"command": "sleep 9"})),
                ],
            })),
            result("c1", "edit_file", "denied: the user declined"),
            result("c2", "bash", "the turn was cancelled"),
            result("c3", "bash", "it may have run"),
        ];
        let states = |id: &str| match id {
            "c1" => Some(ReceiptState::Denied),
            "c2" => Some(ReceiptState::Cancelled),
            "c3" => Some(ReceiptState::Unknown),
            _ => None,
        };
        let lines = transcript_lines(&items, &states, 80);
        let text = keel_render::to_plain(&lines);
        assert!(text.contains("- two") && text.contains("+ 2"), "{text}");
        assert!(!text.contains("old_string"), "no raw arguments: {text}");
        for said in ["⎿ edit_file denied", "⎿ bash cancelled", "⎿ bash unknown"] {
            assert!(text.contains(said), "{said}: {text}");
        }
        // In the cards' colours.
        let colored = keel_render::to_ansi(&lines, keel_render::Colors::Ansi);
        let denied = colored
            .lines()
            .find(|l| l.contains("edit_file denied"))
            .unwrap();
        let yellow = keel_render::to_ansi(
            &[Line::new(vec![Span::new(
                "x",
                Style::fg(crate::cards::state_color(ReceiptState::Denied)).bold(),
            )])],
            keel_render::Colors::Ansi,
        );
        let code = yellow.split('x').next().unwrap();
        assert!(
            !code.is_empty() && denied.starts_with(code),
            "{denied:?} {code:?}"
        );
    }
}
