//! What a trial's `keel run --json` said: read from its event stream, never from its own
//! summary.
//!
//! Invariants:
//! - The final answer is the text of the last response the provider completed (a retried
//!   attempt's text is dropped with its attempt).
//! - A call id that starts twice is counted (it must never happen), and so is the same tool
//!   with the same arguments completing twice (the seed's "repeated successful operation").
//! - Lines that are not events are ignored; an event keel adds later does not break a run.

use keel_types::FailureKind;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Everything counted over one or more runs of a trial's session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    pub session: Option<String>,
    pub proposals: u32,
    pub successful_ops: u32,
    pub keel_input_tokens: u64,
    pub keel_output_tokens: u64,
    /// The last run's final answer.
    pub answer: String,
    /// The last run ended with `turn/completed`.
    pub completed: bool,
    /// The last run's failure, when it failed, and its message.
    pub failure: Option<FailureKind>,
    pub failure_message: String,
    /// A protocol recovery the last run offered.
    pub recovery: Option<String>,
    /// Subagents the session started (`agent/started`) and background jobs (`job/started`).
    pub subagents: u32,
    pub jobs: u32,
    started: BTreeMap<String, u32>,
    completed_ops: BTreeMap<(String, String), u32>,
    arguments: BTreeMap<String, (String, String)>,
    attempt_text: String,
}

impl Observed {
    /// Count one run's stdout (one JSON event per line). Events are read by their names and
    /// the fields used here, so a field keel adds later changes nothing.
    pub fn read_run(&mut self, stdout: &str) {
        self.completed = false;
        self.failure = None;
        self.recovery = None;
        self.answer.clear();
        for line in stdout.lines() {
            let Ok(event) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if let Some(session) = text(&event, "session_id") {
                self.session.get_or_insert_with(|| session.to_string());
            }
            match text(&event, "session_id") {
                // A subagent's events (under its own session id): its tool calls are work the
                // trial did; its text, turns and tokens are not the trial's answer (its
                // parent's turn counts its tokens).
                Some(other) if Some(other) != self.session.as_deref() => {
                    let other = other.to_string();
                    self.see_child(&other, &event);
                }
                _ => self.see(&event),
            }
        }
    }

    /// A subagent's event: only its tool calls count, by their ids in its own session (call
    /// ids repeat across sessions).
    fn see_child(&mut self, session: &str, event: &Value) {
        if matches!(
            text(event, "type"),
            Some("tool/call" | "tool/started" | "tool/result")
        ) {
            let call_id = format!("{session}/{}", text(event, "call_id").unwrap_or_default());
            let mut event = event.clone();
            event["call_id"] = Value::String(call_id);
            self.see(&event);
        }
    }

    fn see(&mut self, event: &Value) {
        let call_id = || text(event, "call_id").unwrap_or_default().to_string();
        match text(event, "type").unwrap_or_default() {
            "agent/started" => self.subagents += 1,
            "job/started" => self.jobs += 1,
            "llm/request" => self.attempt_text.clear(),
            "llm/text" => self
                .attempt_text
                .push_str(text(event, "delta").unwrap_or_default()),
            "llm/response" => self.answer = std::mem::take(&mut self.attempt_text),
            "tool/call" => {
                self.proposals += 1;
                let arguments = text(event, "arguments").unwrap_or_default();
                let digest = Sha256::digest(arguments.as_bytes());
                let digest: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
                let name = text(event, "name").unwrap_or_default().to_string();
                self.arguments.insert(call_id(), (name, digest));
            }
            "tool/started" => *self.started.entry(call_id()).or_default() += 1,
            "tool/result" if text(event, "state") == Some("completed") => {
                self.successful_ops += 1;
                if let Some(operation) = self.arguments.get(&call_id()) {
                    *self.completed_ops.entry(operation.clone()).or_default() += 1;
                }
            }
            "turn/completed" => {
                self.completed = true;
                let tokens = |key: &str| event.pointer(key).and_then(Value::as_u64).unwrap_or(0);
                self.keel_input_tokens += tokens("/usage/input");
                self.keel_output_tokens += tokens("/usage/output");
            }
            "turn/failed" => {
                self.failure_message = event
                    .pointer("/diagnostic/message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                self.failure = event
                    .pointer("/diagnostic/kind")
                    .and_then(|kind| serde_json::from_value::<FailureKind>(kind.clone()).ok())
                    .or(Some(FailureKind::Unknown));
            }
            "recovery/offered" if text(event, "action") == Some("protocol_recovery") => {
                self.recovery = text(event, "recovery_id").map(str::to_string);
            }
            _ => {}
        }
    }

    /// Call ids that started more than once.
    pub fn duplicate_call_ids(&self) -> u32 {
        self.started.values().filter(|count| **count > 1).count() as u32
    }

    /// Completions of an operation (tool and arguments) beyond its first.
    pub fn repeated_ops(&self) -> u32 {
        self.completed_ops
            .values()
            .map(|count| count.saturating_sub(1))
            .sum()
    }
}

/// The string at `key` of `event`.
fn text<'a>(event: &'a Value, key: &str) -> Option<&'a str> {
    event.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(body: serde_json::Value) -> String {
        let mut event = body;
        event["session_id"] = json!("s1");
        event.to_string()
    }

    #[test]
    fn a_runs_events_give_its_answer_calls_and_repeats() {
        let usage =
            json!({"input": 10, "output": 2, "reasoning": 0, "cache_hit": 0, "cache_miss": 10});
        let stdout = [
            line(json!({"type": "llm/request", "attempt": 1, "protocol": "chat", "model": "m", "message_count": 1, "prefix_hash": "x"})),
            line(json!({"type": "llm/text", "delta": "lost with its attempt"})),
            line(json!({"type": "llm/request", "attempt": 2, "protocol": "chat", "model": "m", "message_count": 1, "prefix_hash": "x"})),
            line(json!({"type": "tool/call", "call_id": "a", "name": "bash", "arguments": "{\"command\":\"ls\"}"})),
            line(json!({"type": "tool/started", "call_id": "a", "name": "bash"})),
            line(json!({"type": "tool/result", "call_id": "a", "name": "bash", "state": "completed", "summary": ""})),
            line(json!({"type": "tool/call", "call_id": "b", "name": "bash", "arguments": "{\"command\":\"ls\"}"})),
            line(json!({"type": "tool/started", "call_id": "b", "name": "bash"})),
            line(json!({"type": "tool/started", "call_id": "b", "name": "bash"})),
            line(json!({"type": "tool/result", "call_id": "b", "name": "bash", "state": "completed", "summary": ""})),
            line(json!({"type": "llm/request", "attempt": 1, "protocol": "chat", "model": "m", "message_count": 3, "prefix_hash": "y"})),
            line(json!({"type": "llm/text", "delta": "Done: "})),
            line(json!({"type": "llm/text", "delta": "both listed."})),
            line(json!({"type": "llm/response", "finish_reason": "stop", "usage": usage})),
            line(json!({"type": "turn/completed", "usage": usage, "cache_hit_ratio": 0.0})),
            "not an event".to_string(),
        ]
        .join("\n");
        let mut observed = Observed::default();
        observed.read_run(&stdout);
        assert_eq!(observed.answer, "Done: both listed.");
        assert_eq!(observed.session.as_deref(), Some("s1"));
        assert_eq!((observed.proposals, observed.successful_ops), (2, 2));
        assert_eq!(observed.duplicate_call_ids(), 1);
        assert_eq!(observed.repeated_ops(), 1);
        assert!(observed.completed);
        assert_eq!(observed.keel_input_tokens, 10);
    }

    #[test]
    fn a_subagents_events_count_its_calls_but_not_its_words_or_tokens() {
        let usage =
            json!({"input": 10, "output": 2, "reasoning": 0, "cache_hit": 0, "cache_miss": 10});
        let child = |body: serde_json::Value| {
            let mut event = body;
            event["session_id"] = json!("c1");
            event.to_string()
        };
        let stdout = [
            line(json!({"type": "session/started", "workspace": "/w", "model": "m", "provider": "p", "resumed": false})),
            line(json!({"type": "tool/call", "call_id": "a", "name": "task", "arguments": "{}"})),
            line(json!({"type": "agent/started", "call_id": "a", "child_session_id": "c1", "agent": "explore", "description": "d"})),
            // The child's call has the parent's call id: not a call started twice.
            child(json!({"type": "tool/call", "call_id": "a", "name": "read_file", "arguments": "{}"})),
            child(json!({"type": "tool/started", "call_id": "a", "name": "read_file"})),
            child(json!({"type": "tool/result", "call_id": "a", "name": "read_file", "state": "completed", "summary": ""})),
            child(json!({"type": "llm/request", "attempt": 1, "protocol": "chat", "model": "m", "message_count": 1, "prefix_hash": "x"})),
            child(json!({"type": "llm/text", "delta": "the child's words"})),
            child(json!({"type": "llm/response", "finish_reason": "stop", "usage": usage})),
            child(json!({"type": "turn/completed", "usage": usage, "cache_hit_ratio": 0.0})),
            line(json!({"type": "tool/started", "call_id": "a", "name": "task"})),
            line(json!({"type": "tool/result", "call_id": "a", "name": "task", "state": "completed", "summary": ""})),
            line(json!({"type": "llm/request", "attempt": 1, "protocol": "chat", "model": "m", "message_count": 3, "prefix_hash": "y"})),
            line(json!({"type": "llm/text", "delta": "The parent's answer."})),
            line(json!({"type": "llm/response", "finish_reason": "stop", "usage": usage})),
            line(json!({"type": "turn/completed", "usage": usage, "cache_hit_ratio": 0.0})),
        ]
        .join("\n");
        let mut observed = Observed::default();
        observed.read_run(&stdout);
        assert_eq!(observed.answer, "The parent's answer.");
        assert_eq!(observed.subagents, 1);
        assert_eq!((observed.proposals, observed.successful_ops), (2, 2));
        assert_eq!(observed.duplicate_call_ids(), 0);
        assert_eq!(
            observed.keel_input_tokens, 10,
            "the parent's turn counts its child"
        );
    }
}
