//! Final readiness: a turn that ends with unfinished plan items, whose final answer follows a
//! failed tool result, or whose final answer was cut off (output limit) or filtered, is not
//! ready. A call the person (or a deny rule) refused is not a failure: a turn that ends after
//! a deliberate denial is ready. A call refused because nobody could be asked (a headless run)
//! is not: the turn is not ready, and says how to rerun.
//!
//! Invariant: readiness reads only committed state — the history (the plan is the latest
//! `todo_write` call whose result succeeded) and the receipts (which calls keel denied) — so
//! it gives the same answer after a restart. A tool's own output can never pass for a denial:
//! only a receipt keel wrote as `denied` can.

use keel_types::{FinishReason, Item, ReceiptState, ToolReceipt, ToolResult};

/// How a turn that completed stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Open plan items, or an answer right after a failed tool.
    OpenWork(String),
    /// The final answer itself is incomplete: cut off at the output limit, or filtered.
    CutOff(String),
}

impl Readiness {
    /// Judge a turn by its final answer's finish reason, then by its history (`denied`: whether
    /// keel's receipt of a call id says it was denied).
    pub fn of(
        finish_reason: FinishReason,
        history: &[Item],
        denied: &dyn Fn(&str) -> bool,
    ) -> Readiness {
        match finish_reason {
            FinishReason::Length => {
                Readiness::CutOff("the answer was cut off at the model's output limit".into())
            }
            FinishReason::ContentFilter => {
                Readiness::CutOff("the provider filtered the answer".into())
            }
            FinishReason::Stop | FinishReason::ToolCalls => match check(history, denied) {
                Some(reason) => Readiness::OpenWork(reason),
                None => Readiness::Ready,
            },
        }
    }

    /// Why the turn is not ready, or `None` when it is.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Readiness::Ready => None,
            Readiness::OpenWork(reason) | Readiness::CutOff(reason) => Some(reason),
        }
    }
}

/// Why the history's last turn is not ready, or `None` when it is.
pub fn check(history: &[Item], denied: &dyn Fn(&str) -> bool) -> Option<String> {
    let open = open_plan_items(history);
    if open > 0 {
        let items = if open == 1 { "item" } else { "items" };
        return Some(format!("the plan has {open} open {items}"));
    }
    // The results the final answer came after: the last round's, every one of them (a call
    // refused beside a failed one does not hide the failure).
    let last_round = history
        .iter()
        .rev()
        .skip_while(|item| matches!(item, Item::Assistant(_)))
        .map_while(|item| match item {
            Item::ToolResult(result) => Some(result),
            Item::User { .. } | Item::Assistant(_) | Item::Summary(_) | Item::Context(_) => None,
        });
    let mut unattended = None;
    let mut failed = None;
    for ToolResult {
        name,
        call_id,
        content,
        is_error,
    } in last_round
    {
        if !is_error {
            continue;
        }
        if !denied(call_id) {
            failed = Some(format!("the final answer came right after `{name}` failed"));
        } else if content.starts_with("denied: ") && content.contains(SANDBOX_DENIAL) {
            // Not a choice anybody made: the command could not run here.
            failed = Some(format!(
                "`{name}` could not run: this kernel cannot give it the sandbox the mode needs"
            ));
        } else if content.starts_with(UNATTENDED_DENIAL) {
            unattended = Some(format!(
                "`{name}` needed approval and nobody could be asked: {RERUN_WITH_YES}"
            ));
        }
    }
    failed.or(unattended)
}

/// Whether keel denied a call, by its id, from `receipts` in the order keel wrote them: only
/// turn `turn`'s when given (the last round is this turn's), and for each id the newest
/// receipt — a provider that sends no ids gets `call_0`, `call_1`, … every round, so an id's
/// earlier denial must not speak for its later failure.
pub(crate) fn denials(
    receipts: Vec<ToolReceipt>,
    turn: Option<u64>,
) -> impl Fn(&str) -> bool + use<> {
    let mut newest = std::collections::BTreeMap::new();
    for receipt in receipts {
        if turn.is_none_or(|turn| receipt.turn == turn) {
            newest.insert(receipt.call_id, receipt.state);
        }
    }
    move |call_id: &str| newest.get(call_id) == Some(&ReceiptState::Denied)
}

/// How a reason ends when the turn needed an approval nobody could give (a headless run).
pub const RERUN_WITH_YES: &str = "rerun with `--yes` or an allow rule";

/// What keel's refusal of a command the sandbox cannot confine says (`confinement`); a mode's
/// own refusal ("denied: keel is in plan mode, …") does not say it.
pub(crate) const SANDBOX_DENIAL: &str = "where commands run only inside an enforced sandbox";

/// How keel's refusal of a call nobody could approve begins (`Approval::Unattended`).
pub(crate) const UNATTENDED_DENIAL: &str =
    "denied: this call needs approval and there was nobody to ask";

/// Open items of the plan in force: the latest successful `todo_write` in the history, or
/// the plan a compaction's summary carried.
fn open_plan_items(history: &[Item]) -> usize {
    let Some(plan) = latest_plan(history) else {
        return 0;
    };
    let args: serde_json::Value = serde_json::from_str(&plan).unwrap_or_default();
    args.get("todos")
        .and_then(|todos| todos.as_array())
        .map_or(0, |todos| {
            todos
                .iter()
                .filter(|todo| todo.get("status").and_then(|s| s.as_str()) != Some("completed"))
                .count()
        })
}

/// The arguments of the plan in force (see `open_plan_items`).
pub(crate) fn latest_plan(history: &[Item]) -> Option<String> {
    let succeeded = |call_id: &str| {
        history
            .iter()
            .any(|item| matches!(item, Item::ToolResult(r) if r.call_id == call_id && !r.is_error))
    };
    let latest_plan = history
        .iter()
        .rev()
        .filter_map(|item| match item {
            Item::Assistant(assistant) => Some(
                assistant
                    .tool_calls()
                    .filter(|c| c.name == "todo_write")
                    .last()
                    .cloned(),
            ),
            Item::User { .. } | Item::ToolResult(_) | Item::Summary(_) | Item::Context(_) => None,
        })
        .flatten()
        .find(|call| succeeded(&call.id));
    if let Some(plan) = latest_plan {
        return Some(plan.arguments);
    }
    history.iter().find_map(|item| match item {
        Item::Summary(summary) => summary.plan.clone(),
        Item::User { .. } | Item::Assistant(_) | Item::ToolResult(_) | Item::Context(_) => None,
    })
}

/// The prompt of a "continue checks" turn.
pub fn continue_prompt(reason: &str) -> String {
    format!(
        "Continue the checks: the task is not finished yet ({reason}). Finish the open work (an \
         answer that was cut off goes on exactly where it stopped) and verify it with the \
         permitted tools; report completion only from real tool results."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::{AssistantItem, AssistantPart, ToolCall};

    fn call(id: &str, name: &str, args: &str) -> Item {
        Item::Assistant(AssistantItem {
            parts: vec![AssistantPart::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: args.into(),
            })],
        })
    }

    fn result(id: &str, name: &str, is_error: bool) -> Item {
        Item::ToolResult(ToolResult {
            call_id: id.into(),
            name: name.into(),
            content: "x".into(),
            is_error,
        })
    }

    fn answer() -> Item {
        Item::Assistant(AssistantItem {
            parts: vec![AssistantPart::Text {
                text: "done".into(),
            }],
        })
    }

    #[test]
    fn open_plan_items_make_a_turn_not_ready() {
        let plan = r#"{"todos":[{"content":"a","status":"completed"},{"content":"b","status":"pending"}]}"#;
        let history = vec![
            Item::User { text: "go".into() },
            call("t1", "todo_write", plan),
            result("t1", "todo_write", false),
            answer(),
        ];
        assert_eq!(
            check(&history, &|_| false).as_deref(),
            Some("the plan has 1 open item")
        );
        let done = r#"{"todos":[{"content":"a","status":"completed"}]}"#;
        let mut finished = history.clone();
        finished.extend([
            call("t2", "todo_write", done),
            result("t2", "todo_write", false),
            answer(),
        ]);
        assert_eq!(check(&finished, &|_| false), None);
    }

    #[test]
    fn a_cut_off_answer_is_not_ready_whatever_the_history() {
        let history = vec![Item::User { text: "hi".into() }, answer()];
        assert_eq!(
            Readiness::of(FinishReason::Stop, &history, &|_| false),
            Readiness::Ready
        );
        let cut = Readiness::of(FinishReason::Length, &history, &|_| false);
        assert!(matches!(cut, Readiness::CutOff(_)));
        assert!(cut.reason().unwrap().contains("output limit"));
        assert!(matches!(
            Readiness::of(FinishReason::ContentFilter, &history, &|_| false),
            Readiness::CutOff(_)
        ));
    }

    #[test]
    fn an_answer_right_after_a_failed_tool_is_not_ready() {
        let history = vec![
            Item::User { text: "go".into() },
            call("b1", "bash", "{}"),
            result("b1", "bash", true),
            answer(),
        ];
        assert_eq!(
            check(&history, &|_| false).as_deref(),
            Some("the final answer came right after `bash` failed")
        );
        let ok = vec![
            Item::User { text: "go".into() },
            call("b1", "bash", "{}"),
            result("b1", "bash", false),
            answer(),
        ];
        assert_eq!(check(&ok, &|_| false), None);
        assert_eq!(
            check(&[Item::User { text: "hi".into() }, answer()], &|_| false),
            None
        );
    }

    fn refused(id: &str, content: &str) -> Item {
        Item::ToolResult(ToolResult {
            call_id: id.into(),
            name: "bash".into(),
            content: content.into(),
            is_error: true,
        })
    }

    #[test]
    fn a_denial_beside_a_failure_does_not_hide_it() {
        let history = vec![
            Item::User { text: "go".into() },
            call("b1", "bash", "{}"),
            result("b1", "bash", true),
            refused("b2", "denied: the user declined"),
            answer(),
        ];
        let denied = |id: &str| id == "b2";
        assert_eq!(
            check(&history, &denied).as_deref(),
            Some("the final answer came right after `bash` failed")
        );
        // The denial alone is a choice: ready.
        let chosen = vec![
            Item::User { text: "go".into() },
            call("b2", "bash", "{}"),
            refused("b2", "denied: the user declined"),
            answer(),
        ];
        assert_eq!(check(&chosen, &denied), None);
    }

    #[test]
    fn a_command_the_sandbox_could_not_confine_is_a_failure_not_a_choice() {
        let history = vec![
            Item::User { text: "go".into() },
            call("b1", "bash", "{}"),
            refused(
                "b1",
                &format!(
                    "denied: keel is in read-only mode, {SANDBOX_DENIAL}, and this kernel lacks …"
                ),
            ),
            answer(),
        ];
        let reason = check(&history, &|id| id == "b1").unwrap();
        assert!(reason.contains("could not run"), "{reason}");
        // The mode's own refusal is the user's choice of mode: ready.
        let mode = vec![
            Item::User { text: "go".into() },
            call("b1", "bash", "{}"),
            refused(
                "b1",
                "denied: keel is in plan mode, where nothing is changed until …",
            ),
            answer(),
        ];
        assert_eq!(check(&mode, &|id| id == "b1"), None);
        let unattended = vec![
            Item::User { text: "go".into() },
            call("b1", "bash", "{}"),
            refused("b1", &format!("{UNATTENDED_DENIAL}: rerun it")),
            answer(),
        ];
        let reason = check(&unattended, &|id| id == "b1").unwrap();
        assert!(reason.contains("rerun with `--yes`"), "{reason}");
    }

    #[test]
    fn the_newest_receipt_of_an_id_decides_whether_it_was_denied() {
        let receipt = |call_id: &str, turn: u64, state: ReceiptState| ToolReceipt {
            call_id: call_id.into(),
            tool: "bash".into(),
            args_digest: String::new(),
            state,
            turn,
            seq: 0,
            summary: None,
            sandbox: None,
            child_session: None,
        };
        let receipts = vec![
            receipt("call_0", 3, ReceiptState::Denied),
            receipt("call_0", 3, ReceiptState::Failed),
            receipt("call_1", 2, ReceiptState::Denied),
            receipt("call_2", 3, ReceiptState::Denied),
        ];
        let this_turn = denials(receipts.clone(), Some(3));
        assert!(!this_turn("call_0"), "a later failure under a reused id");
        assert!(!this_turn("call_1"), "another turn's denial");
        assert!(this_turn("call_2"));
        assert!(denials(receipts, None)("call_1"));
    }
}
