//! The no-progress guard: a turn whose tool rounds keep repeating themselves is stopped.
//!
//! Invariants:
//! - A round is "the same" as the one before when it made the same calls (name and raw
//!   arguments, in order) and got the same results (content and error flag); call ids do not
//!   count, since a provider gives every call a new one.
//! - `NO_PROGRESS_ROUNDS` identical rounds in a row stop the turn; any difference resets the
//!   count. The guard reads committed history only.

use keel_types::{FailureDiagnostic, FailureKind, Item};
use sha2::{Digest, Sha256};

/// How many identical tool rounds in a row stop a turn.
pub const NO_PROGRESS_ROUNDS: u32 = 5;

#[derive(Debug, Default)]
pub struct ProgressGuard {
    last: Option<[u8; 32]>,
    repeats: u32,
}

impl ProgressGuard {
    /// Look at the round that just ended (the tail of `history`: the assistant message with
    /// calls and their results); a diagnostic when the turn must stop.
    pub fn observe(&mut self, history: &[Item]) -> Option<FailureDiagnostic> {
        let signature = last_round_signature(history)?;
        if self.last == Some(signature) {
            self.repeats += 1;
        } else {
            self.last = Some(signature);
            self.repeats = 1;
        }
        if self.repeats < NO_PROGRESS_ROUNDS {
            return None;
        }
        Some(FailureDiagnostic::with_message(
            FailureKind::Limit,
            None,
            format!(
                "no progress: the last {NO_PROGRESS_ROUNDS} tool rounds made the same calls with \
                 the same arguments and got the same results, so the turn was stopped; say how \
                 to go on"
            ),
        ))
    }
}

/// A digest of the last tool round: its calls and their results, without call ids.
fn last_round_signature(history: &[Item]) -> Option<[u8; 32]> {
    let start = history
        .iter()
        .rposition(|item| matches!(item, Item::Assistant(a) if a.tool_calls().next().is_some()))?;
    let mut hasher = Sha256::new();
    for item in &history[start..] {
        match item {
            Item::Assistant(assistant) => {
                for call in assistant.tool_calls() {
                    hasher.update(b"call\0");
                    hasher.update(call.name.as_bytes());
                    hasher.update(b"\0");
                    hasher.update(call.arguments.as_bytes());
                    hasher.update(b"\0");
                }
            }
            Item::ToolResult(result) => {
                hasher.update(if result.is_error { b"err\0" } else { b"ok\0\0" });
                hasher.update(result.content.as_bytes());
                hasher.update(b"\0");
            }
            Item::User { .. } | Item::Summary(_) | Item::Context(_) => return None,
        }
    }
    Some(hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::{AssistantItem, AssistantPart, ToolCall, ToolResult};

    fn round(id: &str, command: &str, output: &str) -> [Item; 2] {
        [
            Item::Assistant(AssistantItem {
                parts: vec![AssistantPart::ToolCall(ToolCall {
                    id: id.into(),
                    name: "bash".into(),
                    arguments: format!("{{\"command\":\"{command}\"}}"),
                })],
            }),
            Item::ToolResult(ToolResult {
                call_id: id.into(),
                name: "bash".into(),
                content: output.into(),
                is_error: false,
            }),
        ]
    }

    #[test]
    fn identical_rounds_stop_the_turn_at_the_limit() {
        let mut guard = ProgressGuard::default();
        let mut history = vec![Item::User { text: "go".into() }];
        for n in 1..=NO_PROGRESS_ROUNDS {
            history.extend(round(&format!("c{n}"), "cat x", "same"));
            let verdict = guard.observe(&history);
            assert_eq!(verdict.is_some(), n == NO_PROGRESS_ROUNDS, "round {n}");
        }
    }

    #[test]
    fn a_changed_result_or_call_resets_the_count() {
        let mut guard = ProgressGuard::default();
        let mut history = vec![Item::User { text: "go".into() }];
        for n in 0..20 {
            let output = if n % 4 == 3 { "changed" } else { "same" };
            history.extend(round(&format!("c{n}"), "make", output));
            assert!(guard.observe(&history).is_none(), "round {n}");
        }
        for n in 0..20 {
            history.extend(round(&format!("d{n}"), &format!("echo {n}"), "same"));
            assert!(guard.observe(&history).is_none());
        }
    }
}
