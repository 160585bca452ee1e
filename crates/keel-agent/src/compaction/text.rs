//! The words of a compaction: the summarising prompt, the receipts ledger and the summary item.
//!
//! Invariants:
//! - The prompt is fixed text (plus the user's focus), so the summarising request of an
//!   append-only session extends its last request: the provider's prefix cache serves it.
//! - The ledger comes from keel's receipts, never from the model: a call whose outcome is
//!   unknown is written as unknown in every summary, however the model summarised it.
//! - Everything here is deterministic: the same history and receipts give the same bytes.

use keel_types::{COMPACTION_REQUEST_MARKER, Item, ReceiptState, Summary, ToolReceipt};
use std::collections::{BTreeMap, BTreeSet};

/// Calls listed one by one in a ledger before the rest are counted.
const LEDGER_LINES: usize = 40;
/// The longest tool result shown in a flat transcript.
const TRANSCRIPT_RESULT_CHARS: usize = 1200;

/// The request that asks for a summary of the conversation above it.
pub fn compaction_prompt(focus: Option<&str>, ledger: &str) -> String {
    let mut prompt = format!(
        "{COMPACTION_REQUEST_MARKER} The conversation above is about to be replaced by your \
         summary, to free context; the most recent messages are kept verbatim after it. Write the \
         summary you will continue from, without calling tools: the user's goals; the decisions \
         made and why; the files read, created or changed; the open todo items; the state of every \
         tool call that matters (completed, failed, unknown — an unknown outcome must stay \
         unknown: never assume it took effect or repeat it blindly); and what remains to do."
    );
    if let Some(focus) = focus.filter(|focus| !focus.trim().is_empty()) {
        prompt.push_str("\n\nFocus the summary on: ");
        prompt.push_str(focus.trim());
    }
    if !ledger.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(ledger);
    }
    prompt
}

/// The state of the tool calls that the summary replaces, from the receipts (`kept` are the
/// calls of the verbatim tail, which speaks for itself).
pub fn ledger(receipts: &[ToolReceipt], kept: &BTreeSet<&str>, history: &[Item]) -> String {
    let arguments: BTreeMap<&str, &str> = history
        .iter()
        .filter_map(|item| match item {
            Item::Assistant(assistant) => Some(assistant.tool_calls()),
            Item::User { .. } | Item::ToolResult(_) | Item::Summary(_) | Item::Context(_) => None,
        })
        .flatten()
        .map(|call| (call.id.as_str(), call.arguments.as_str()))
        .collect();
    let mut completed: BTreeMap<&str, usize> = BTreeMap::new();
    let mut files: BTreeSet<String> = BTreeSet::new();
    // Every call of unknown outcome is listed; other calls that did not complete, the newest
    // `LEDGER_LINES` of them.
    let mut unknown = Vec::new();
    let mut notable = Vec::new();
    for receipt in receipts
        .iter()
        .filter(|receipt| !kept.contains(receipt.call_id.as_str()))
    {
        let args = arguments.get(receipt.call_id.as_str()).copied();
        if receipt.state == ReceiptState::Completed {
            *completed.entry(receipt.tool.as_str()).or_default() += 1;
            if matches!(receipt.tool.as_str(), "write_file" | "edit_file")
                && let Some(path) = args.and_then(path_of)
            {
                files.insert(path);
            }
        } else {
            let what = args.map(excerpt).unwrap_or_default();
            let line = format!(
                "- {} `{}` {}: {}",
                receipt.call_id, receipt.tool, what, receipt.state
            );
            match receipt.state {
                ReceiptState::Unknown | ReceiptState::Started => unknown.push(line),
                ReceiptState::Pending
                | ReceiptState::Completed
                | ReceiptState::Failed
                | ReceiptState::Denied
                | ReceiptState::Cancelled
                | ReceiptState::NotStarted => notable.push(line),
            }
        }
    }
    if completed.is_empty() && notable.is_empty() && unknown.is_empty() {
        return String::new();
    }
    let mut lines = vec!["Tool calls before this point, from keel's receipts:".to_string()];
    if !completed.is_empty() {
        let counts: Vec<String> = completed
            .iter()
            .map(|(tool, count)| format!("{tool} ×{count}"))
            .collect();
        lines.push(format!("- completed: {}", counts.join(", ")));
    }
    if !files.is_empty() {
        let listed: Vec<&str> = files
            .iter()
            .map(String::as_str)
            .take(LEDGER_LINES)
            .collect();
        lines.push(format!("- files written: {}", listed.join(", ")));
    }
    lines.extend(unknown);
    let extra = notable.len().saturating_sub(LEDGER_LINES);
    if extra > 0 {
        lines.push(format!(
            "- {extra} older calls failed, were denied, cancelled or not started (not listed)"
        ));
    }
    lines.extend(notable.into_iter().skip(extra));
    lines.join("\n")
}

fn path_of(arguments: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(arguments).ok()?;
    value.get("path")?.as_str().map(str::to_string)
}

fn excerpt(arguments: &str) -> String {
    let flat: String = arguments.chars().take(80).collect();
    let flat = flat.replace('\n', " ");
    if arguments.chars().count() > 80 {
        format!("{flat}…")
    } else {
        flat
    }
}

/// The head of the new revision: the model's summary (said to be cut short when `cut_off`
/// names why), then keel's ledger and the open items of the plan in force
/// (`plan`: the arguments of its `todo_write`).
pub fn summary_item(
    model_summary: &str,
    cut_off: Option<&str>,
    ledger: &str,
    replaced: u64,
    plan: Option<String>,
) -> Item {
    let mut text = format!(
        "[keel: the earlier conversation ({replaced} messages) was compacted into this summary]\n\n{}",
        model_summary.trim()
    );
    if let Some(why) = cut_off {
        text.push_str(&format!(
            "\n\n[keel: the summary above was cut off {why}; what it did not say is not known]"
        ));
    }
    if !ledger.is_empty() {
        text.push_str("\n\n");
        text.push_str(ledger);
    }
    let open = plan.as_deref().map(open_items).unwrap_or_default();
    if !open.is_empty() {
        text.push_str("\n\nOpen plan items (todo_write): ");
        text.push_str(&open.join("; "));
    }
    Item::Summary(Summary {
        text,
        replaced,
        plan,
    })
}

fn open_items(plan: &str) -> Vec<String> {
    let value: serde_json::Value = serde_json::from_str(plan).unwrap_or_default();
    value
        .get("todos")
        .and_then(serde_json::Value::as_array)
        .map(|todos| {
            todos
                .iter()
                .filter(|todo| todo.get("status").and_then(|s| s.as_str()) != Some("completed"))
                .filter_map(|todo| todo.get("content").and_then(|c| c.as_str()))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The conversation as plain text, for a summarising request that must be smaller than the
/// history: long tool results are cut in the middle and, past `budget_bytes`, the oldest
/// messages are left out (and the text says so).
pub fn flat_transcript(items: &[Item], budget_bytes: usize) -> String {
    let mut blocks: Vec<String> = items.iter().map(render).collect();
    let mut total: usize = blocks.iter().map(String::len).sum();
    let mut dropped = 0;
    while total > budget_bytes && blocks.len() > 1 {
        total -= blocks.remove(0).len();
        dropped += 1;
    }
    let mut text = String::new();
    if dropped > 0 {
        text.push_str(&format!("[{dropped} older messages left out]\n"));
    }
    for block in blocks {
        text.push_str(&block);
    }
    text
}

fn render(item: &Item) -> String {
    match item {
        Item::User { text } => format!("user: {text}\n"),
        Item::Summary(summary) => format!("summary: {}\n", summary.text),
        // Kept verbatim ahead of the summary: not summarised.
        Item::Context(_) => String::new(),
        Item::Assistant(assistant) => {
            let mut block = String::new();
            let text = assistant.text();
            if !text.is_empty() {
                block.push_str(&format!("assistant: {text}\n"));
            }
            for call in assistant.tool_calls() {
                block.push_str(&format!(
                    "assistant called {} ({}) with {}\n",
                    call.name,
                    call.id,
                    excerpt(&call.arguments)
                ));
            }
            block
        }
        Item::ToolResult(result) => format!(
            "{} result ({}{}): {}\n",
            result.name,
            result.call_id,
            if result.is_error { ", error" } else { "" },
            keel_tools::output::truncate_middle(&result.content, TRANSCRIPT_RESULT_CHARS)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::{AssistantItem, AssistantPart, ToolCall, ToolResult};

    fn receipt(call: &str, tool: &str, state: ReceiptState) -> ToolReceipt {
        ToolReceipt {
            call_id: call.into(),
            tool: tool.into(),
            args_digest: String::new(),
            state,
            turn: 1,
            seq: 1,
            summary: None,
            sandbox: None,
            child_session: None,
        }
    }

    #[test]
    fn the_prompt_asks_for_every_part_of_a_summary_and_its_fixed_text_comes_first() {
        let plain = compaction_prompt(None, "");
        assert!(plain.starts_with(COMPACTION_REQUEST_MARKER));
        for asked in [
            "without calling tools",
            "the user's goals",
            "the decisions made and why",
            "the files read, created or changed",
            "the open todo items",
            "(completed, failed, unknown",
            "an unknown outcome must stay unknown",
            "what remains to do",
        ] {
            assert!(
                plain.contains(asked),
                "the prompt asks for {asked:?}: {plain}"
            );
        }
        // The focus and the ledger follow the fixed text, which stays byte for byte the same.
        let focused = compaction_prompt(Some("  the parser \n"), "LEDGER");
        assert!(focused.starts_with(&plain));
        assert_eq!(
            &focused[plain.len()..],
            "\n\nFocus the summary on: the parser\n\nLEDGER"
        );
        assert_eq!(compaction_prompt(Some(" \t "), ""), plain);
    }

    #[test]
    fn the_ledger_keeps_unknown_outcomes_and_counts_the_rest() {
        let history = vec![Item::Assistant(AssistantItem {
            parts: vec![
                AssistantPart::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "write_file".into(),
                    arguments: r#"{"path":"a.rs","content":"x"}"#.into(),
                }),
                AssistantPart::ToolCall(ToolCall {
                    id: "c2".into(),
                    name: "bash".into(),
                    arguments: r#"{"command":"make deploy"}"#.into(),
                }),
            ],
        })];
        let receipts = [
            receipt("c1", "write_file", ReceiptState::Completed),
            receipt("c2", "bash", ReceiptState::Unknown),
            receipt("c3", "bash", ReceiptState::Completed),
        ];
        let kept = BTreeSet::from(["c3"]);
        let ledger = ledger(&receipts, &kept, &history);
        assert!(ledger.contains("- completed: write_file ×1"), "{ledger}");
        assert!(ledger.contains("- files written: a.rs"), "{ledger}");
        assert!(
            ledger.contains(r#"- c2 `bash` {"command":"make deploy"}: unknown"#),
            "{ledger}"
        );
        assert!(
            !ledger.contains("c3"),
            "calls of the kept tail are not listed"
        );
        let plan = r#"{"todos":[{"content":"write tests","status":"pending"},{"content":"read","status":"completed"}]}"#;
        let Item::Summary(summary) =
            summary_item("did things", None, &ledger, 4, Some(plan.into()))
        else {
            panic!("a summary item")
        };
        assert!(summary.text.contains("did things") && summary.text.contains(": unknown"));
        assert!(
            summary
                .text
                .ends_with("Open plan items (todo_write): write tests")
        );
        assert_eq!(summary.plan.as_deref(), Some(plan));
        assert!(
            compaction_prompt(Some("the parser"), &ledger).starts_with(COMPACTION_REQUEST_MARKER)
        );
    }

    #[test]
    fn every_unknown_outcome_is_listed_however_many_calls_failed() {
        let mut receipts: Vec<ToolReceipt> = (0..100)
            .map(|n| receipt(&format!("f{n}"), "bash", ReceiptState::Failed))
            .collect();
        receipts.push(receipt("u1", "bash", ReceiptState::Unknown));
        receipts
            .extend((100..150).map(|n| receipt(&format!("f{n}"), "bash", ReceiptState::Failed)));
        let ledger = ledger(&receipts, &BTreeSet::new(), &[]);
        assert!(ledger.contains("- u1 `bash` : unknown"), "{ledger}");
        assert!(ledger.contains("110 older calls failed"), "{ledger}");
        assert!(
            ledger.contains("f149") && !ledger.contains("- f0 "),
            "the newest are listed"
        );
    }

    #[test]
    fn a_flat_transcript_cuts_results_and_drops_the_oldest_first() {
        let items = vec![
            Item::User {
                text: "first".into(),
            },
            Item::ToolResult(ToolResult {
                call_id: "c1".into(),
                name: "bash".into(),
                content: "x".repeat(10_000),
                is_error: false,
            }),
            Item::User {
                text: "last".into(),
            },
        ];
        let whole = flat_transcript(&items, usize::MAX);
        assert!(whole.len() < 2000, "results are cut: {}", whole.len());
        let small = flat_transcript(&items, 20);
        assert!(small.starts_with("[2 older messages left out]") && small.contains("last"));
    }
}
