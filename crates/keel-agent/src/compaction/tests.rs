//! The tail a compaction keeps: never split between a call and its result, never inside a
//! repaired prefix, at least the latest round, and nothing when nothing can help.

use super::*;
use keel_types::{AssistantItem, AssistantPart, Summary, ToolCall, ToolResult};

fn user(text: &str) -> Item {
    Item::User { text: text.into() }
}

fn call(id: &str) -> Item {
    Item::Assistant(AssistantItem {
        parts: vec![AssistantPart::ToolCall(ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: "{}".into(),
        })],
    })
}

fn result(id: &str) -> Item {
    Item::ToolResult(ToolResult {
        call_id: id.into(),
        name: "bash".into(),
        content: "ok".into(),
        is_error: false,
    })
}

/// A prompt, then `rounds` rounds of one call and its result.
fn rounds(rounds: usize) -> Vec<Item> {
    let mut history = vec![user("go")];
    for n in 0..rounds {
        history.push(call(&format!("c{n}")));
        history.push(result(&format!("c{n}")));
    }
    history
}

#[test]
fn the_tail_starts_at_a_round_and_holds_at_least_the_latest_one() {
    let history = rounds(20);
    let tokens = vec![100; history.len()];
    for usable in [2_000, 4_000, 20_000] {
        let plan = plan_for(&history, &tokens, 300, 0, Some(usable)).unwrap();
        assert!(
            matches!(history[plan.tail_start], Item::Assistant(_)),
            "a tail never starts at a result"
        );
        assert!(plan.tail_start > 0 && plan.tail_start <= history.len() - 2);
        let kept = (history.len() - plan.tail_start) as u64 * 100;
        assert!(kept <= usable / 4 || plan.tail_start == history.len() - 2);
        assert_eq!(plan.tokens_before, 300 + 100 * history.len() as u64);
    }
}

#[test]
fn a_repaired_prefix_is_never_split() {
    let history = rounds(10);
    let tokens = vec![10; history.len()];
    let plan = plan_for(&history, &tokens, 0, 15, Some(100_000)).unwrap();
    assert!(plan.tail_start >= 15, "{}", plan.tail_start);
}

#[test]
fn nothing_to_summarise_and_a_tail_too_large_are_told_apart() {
    let only_prompt = vec![user("go")];
    assert_eq!(
        plan_for(&only_prompt, &[10], 100, 0, Some(4_000)),
        Err(CannotCompact::NothingToSummarise)
    );
    let summary_then_round = vec![
        Item::Summary(Summary {
            text: "s".into(),
            replaced: 9,
            plan: None,
        }),
        call("c1"),
        result("c1"),
    ];
    assert_eq!(
        plan_for(&summary_then_round, &[10, 10, 10], 100, 0, Some(4_000)),
        Err(CannotCompact::NothingToSummarise),
        "re-summarising a lone summary frees nothing"
    );
    let huge_latest = rounds(3);
    let mut tokens = vec![10; huge_latest.len()];
    *tokens.last_mut().unwrap() = 5_000;
    assert!(matches!(
        plan_for(&huge_latest, &tokens, 1_000, 0, Some(3_000)),
        Err(CannotCompact::TailTooLarge { tokens: 5_010, .. })
    ));
    // Without a known window, only the shape of the history decides.
    assert!(plan_for(&huge_latest, &tokens, 1_000, 0, None).is_ok());
}

#[test]
fn the_context_block_alone_is_nothing_to_summarise() {
    let context = Item::Context(keel_types::ContextBlock {
        text: "<context from=\"keel\">rules</context>".into(),
        sources: Vec::new(),
    });
    let summary = Item::Summary(Summary {
        text: "s".into(),
        replaced: 9,
        plan: None,
    });
    // The block is kept verbatim: "summarising" it (with or without the last summary) frees
    // nothing.
    for history in [
        vec![context.clone(), call("c1"), result("c1")],
        vec![context.clone(), summary, call("c1"), result("c1")],
    ] {
        let tokens = vec![10; history.len()];
        assert_eq!(
            plan_for(&history, &tokens, 100, 0, Some(4_000)),
            Err(CannotCompact::NothingToSummarise),
            "{history:?}"
        );
    }
    let mut with_rounds = vec![context];
    with_rounds.extend(rounds(10));
    let tokens = vec![10; with_rounds.len()];
    assert!(plan_for(&with_rounds, &tokens, 100, 0, Some(4_000)).is_ok());
}
