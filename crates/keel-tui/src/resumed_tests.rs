//! Tests of a resumed session's recent turns.

use super::*;
use keel_types::{AssistantItem, ToolCall, ToolResult};

fn plain(lines: &[Line]) -> String {
    keel_render::to_plain(lines)
}

fn turn(prompt: &str, answer: &str, call: Option<(&str, &str)>) -> Vec<Result<Item, String>> {
    let mut parts = vec![AssistantPart::Text {
        text: answer.into(),
    }];
    let mut items = vec![Ok(Item::User {
        text: prompt.into(),
    })];
    if let Some((id, command)) = call {
        parts.insert(
            0,
            AssistantPart::ToolCall(ToolCall {
                id: id.into(),
                name: "bash".into(),
                arguments: serde_json::json!({"command": command}).to_string(),
            }),
        );
        items.push(Ok(Item::Assistant(AssistantItem { parts })));
        items.push(Ok(Item::ToolResult(ToolResult {
            call_id: id.into(),
            name: "bash".into(),
            content: "SECRET OUTPUT LINE\n[exit code 0]".into(),
            is_error: false,
        })));
    } else {
        items.push(Ok(Item::Assistant(AssistantItem { parts })));
    }
    items
}

#[test]
fn the_last_turns_as_seen_without_what_was_written_for_the_model() {
    let mut items = vec![Ok(Item::Context(keel_types::ContextBlock {
        text: "<environment>\nCONTEXT BLOCK\n</environment>".into(),
        sources: Vec::new(),
    }))];
    items.extend(turn("first question", "First **answer**.", None));
    items.extend(turn(
        "[keel: the user stopped your previous answer before it was complete; what it had produced was not kept.]\n\nsecond @a.rs\n\n<attached path=\"a.rs\">\nATTACHED BODY\n</attached>",
        "Second answer.",
        Some(("c2", "cargo test")),
    ));
    items.extend(turn(
        "Continue the interrupted task from valid history. FACTS",
        "Recovered.",
        None,
    ));
    // Turn 1: the context block, the first prompt and its answer; then three items a turn.
    let turn_of = |index: usize| -> u64 {
        match index {
            0..=2 => 1,
            3..=5 => 2,
            _ => 3,
        }
    };
    let numbered: Vec<(u64, &Result<Item, String>)> = items
        .iter()
        .enumerate()
        .map(|(index, item)| (turn_of(index), item))
        .collect();
    let input_of = |turn: u64| {
        Some(if turn == 3 {
            InputKind::ProtocolRecovery
        } else {
            InputKind::User
        })
    };
    let states = |id: &str| (id == "c2").then_some(ReceiptState::Completed);
    let lines = recent_lines(numbered.iter().copied(), &input_of, &states, 80, 40);
    let text = plain(&lines);
    assert!(text.contains("› first question"), "{text}");
    assert!(text.contains("First answer."), "rendered: {text}");
    assert!(text.contains("› second @a.rs"), "{text}");
    assert!(text.contains("● bash cargo test · completed"), "{text}");
    assert!(text.contains("↻ recovery"), "{text}");
    for hidden in [
        "CONTEXT BLOCK",
        "ATTACHED BODY",
        "[keel:",
        "FACTS",
        "SECRET OUTPUT LINE",
        "**",
    ] {
        assert!(!text.contains(hidden), "{hidden}: {text}");
    }
    assert!(!text.contains("earlier turn"), "all fit: {text}");
    // Room for the last turn only: the earlier ones are counted.
    let lines = recent_lines(numbered.iter().copied(), &input_of, &states, 80, 4);
    let text = plain(&lines);
    assert!(
        text.starts_with("… 2 earlier turns not shown · Ctrl-T shows the whole transcript"),
        "{text}"
    );
    assert!(text.contains("Recovered."), "{text}");
    assert!(!text.contains("first question"), "{text}");
    assert!(lines.len() <= 4, "{text}");
    for line in &lines {
        assert!(line.width() <= 80);
    }
}

#[test]
fn a_long_prompt_is_folded_and_a_long_last_turn_shows_its_end() {
    let prompt: String = (1..=20).map(|n| format!("prompt line {n}\n")).collect();
    let answer: String = (1..=50).map(|n| format!("answer line {n}\n\n")).collect();
    let items = turn(&prompt, &answer, None);
    let numbered: Vec<(u64, &Result<Item, String>)> = items.iter().map(|item| (1, item)).collect();
    let lines = recent_lines(
        numbered.iter().copied(),
        &|_| Some(InputKind::User),
        &|_| None,
        60,
        200,
    );
    let text = plain(&lines);
    assert!(
        text.contains("prompt line 6") && !text.contains("prompt line 7\n"),
        "{text}"
    );
    assert!(text.contains("… 14 more lines"), "{text}");
    let lines = recent_lines(
        numbered.iter().copied(),
        &|_| Some(InputKind::User),
        &|_| None,
        60,
        10,
    );
    let text = plain(&lines);
    assert_eq!(lines.len(), 10, "{text}");
    assert!(
        text.starts_with("… the start of this turn is above"),
        "{text}"
    );
    assert!(text.contains("answer line 50"), "{text}");
}
