//! keel's events and history as ACP `session/update`s.
//!
//! Invariants:
//! - What an attempt streams is held until the attempt completes (`llm/response`): ACP clients
//!   keep every chunk, so text of a failed attempt must never be sent, or a retried answer would
//!   show twice. A retry is announced as its own short message line (`↻ retry …`) instead.
//! - Tool calls go `pending` (announced) → `in_progress` (its receipt is `started`) →
//!   `completed` or `failed`; a denied, cancelled or never-started call is `failed` with a
//!   message that says which.
//! - The history replay of `session/load` produces the same kinds of updates, from the stored
//!   items and receipts.
//! - A background job is a tool call of its own (`CALL/job-N`, kind `execute`): `in_progress`
//!   from `job/started`, `completed` (exit code 0) or `failed` at `job/exited`, its output's
//!   last lines as its content.

use keel_types::{AssistantPart, Event, EventBody, Item, ReceiptState, ToolReceipt};
use serde_json::{Value, json};
use std::path::Path;

/// The ACP tool kind of a keel tool.
fn kind(name: &str) -> &'static str {
    match name {
        "read_file" | "list_dir" => "read",
        "write_file" | "edit_file" => "edit",
        "bash" => "execute",
        "glob" | "grep" => "search",
        "todo_write" => "think",
        "web_fetch" => "fetch",
        _ => "other",
    }
}

fn text_block(text: impl Into<String>) -> Value {
    json!({"type": "text", "text": text.into()})
}

fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": text_block(text)})
}

/// The `tool_call` update that announces a call.
pub fn tool_call(
    workspace: &Path,
    id: &str,
    name: &str,
    arguments: &str,
    subject: Option<&str>,
) -> Value {
    let input: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let shown = subject.map_or_else(|| arguments.to_string(), str::to_string);
    let mut update = json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": format!("{name} {}", shown.lines().next().unwrap_or("")),
        "kind": kind(name),
        "status": "pending",
        "rawInput": input,
    });
    let is_path_tool = matches!(
        name,
        "read_file" | "write_file" | "edit_file" | "list_dir" | "glob" | "grep"
    );
    if let (true, Some(subject)) = (is_path_tool, subject) {
        let path = workspace.join(subject);
        update["locations"] = json!([{"path": path.display().to_string()}]);
        match name {
            "edit_file" => {
                update["content"] = json!([{"type": "diff", "path": path.display().to_string(),
                    "oldText": input.get("old_string").and_then(Value::as_str).unwrap_or(""),
                    "newText": input.get("new_string").and_then(Value::as_str).unwrap_or("")}]);
            }
            "write_file" => {
                update["content"] = json!([{"type": "diff", "path": path.display().to_string(),
                    "oldText": Value::Null,
                    "newText": input.get("content").and_then(Value::as_str).unwrap_or("")}]);
            }
            _ => {}
        }
    }
    update
}

/// The `plan` update of a `todo_write` call, if its arguments hold a plan.
pub fn plan(arguments: &str) -> Option<Value> {
    let input: Value = serde_json::from_str(arguments).ok()?;
    let entries: Vec<Value> = input
        .get("todos")?
        .as_array()?
        .iter()
        .map(|todo| {
            let status = match todo.get("status").and_then(Value::as_str) {
                Some("completed") => "completed",
                Some("in_progress") => "in_progress",
                _ => "pending",
            };
            json!({"content": todo.get("content").and_then(Value::as_str).unwrap_or(""),
                   "priority": "medium", "status": status})
        })
        .collect();
    Some(json!({"sessionUpdate": "plan", "entries": entries}))
}

fn result_update(id: &str, state: ReceiptState, summary: &str, output: &str) -> Value {
    let (status, note) = match state {
        ReceiptState::Completed => ("completed", summary.to_string()),
        ReceiptState::Failed => ("failed", summary.to_string()),
        // keel's denial text says so itself ("denied: …").
        ReceiptState::Denied if summary.starts_with("denied") => ("failed", summary.to_string()),
        ReceiptState::Denied => ("failed", format!("denied: {summary}")),
        ReceiptState::Cancelled => ("failed", "cancelled while it ran".to_string()),
        ReceiptState::NotStarted => ("failed", "not started".to_string()),
        ReceiptState::Unknown => (
            "failed",
            "outcome unknown: keel stopped while it ran".to_string(),
        ),
        ReceiptState::Pending | ReceiptState::Started => ("in_progress", summary.to_string()),
    };
    let mut content = vec![json!({"type": "content", "content": text_block(note)})];
    if !output.is_empty() {
        content.push(json!({"type": "content", "content": text_block(output)}));
    }
    json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status,
           "content": content})
}

/// Turns one turn's events into updates, holding each attempt's text until it completes.
#[derive(Default)]
pub struct Translator {
    text: String,
    thought: String,
    /// The model's context window, when known: each response then reports how full it is.
    context_window: Option<u64>,
    /// The session whose turn this is; another's events are its subagents'.
    own_session: Option<String>,
    /// Each running subagent's session: its `task` call, its rounds, what it does now.
    children: std::collections::HashMap<String, (String, u32, String)>,
    /// A subagent's calls announced for their permission request (`SESSION/CALL`): their end
    /// is reported too.
    asked: std::collections::HashSet<String>,
}

/// A subagent's call as the editor knows it: its own session's id and the call's (call ids
/// repeat across sessions).
pub fn child_call_id(session: &str, call_id: &str) -> String {
    format!("{session}/{call_id}")
}

/// A background job as the editor knows it: the call that started it and its id.
pub fn job_call_id(call_id: &str, job: &str) -> String {
    format!("{call_id}/{job}")
}

impl Translator {
    pub fn new(context_window: Option<u64>) -> Translator {
        Translator {
            context_window,
            ..Translator::default()
        }
    }

    /// The translator of session `id`'s turns: events of other sessions (its subagents') are
    /// progress on their `task` calls.
    pub fn for_session(mut self, id: &str) -> Translator {
        self.own_session = Some(id.to_string());
        self
    }

    /// A subagent's event: its rounds and current tool as its `task` call's content, and the
    /// end of a call of its that asked permission (announced by the approver before it asked).
    fn child_updates(&mut self, event: &Event) -> Vec<Value> {
        let status = |state: &ReceiptState| match state {
            ReceiptState::Completed => "completed",
            _ => "failed",
        };
        if let EventBody::ApprovalRequested { call_id, .. } = &event.body {
            self.asked.insert(child_call_id(&event.session_id, call_id));
            return Vec::new();
        }
        if let EventBody::ToolResult { call_id, state, .. } = &event.body {
            let id = child_call_id(&event.session_id, call_id);
            if self.asked.remove(&id) {
                return vec![
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                    "status": status(state)}),
                ];
            }
        }
        let Some((task, rounds, doing)) = self.children.get_mut(&event.session_id) else {
            return Vec::new();
        };
        match &event.body {
            EventBody::LlmResponse { .. } => *rounds += 1,
            EventBody::ToolCall {
                name,
                arguments,
                subject,
                ..
            } => {
                let shown = subject.clone().unwrap_or_else(|| arguments.clone());
                *doing = format!("{name} {}", shown.lines().next().unwrap_or(""));
            }
            _ => return Vec::new(),
        }
        let text = format!(
            "{rounds} round{} · {doing}",
            if *rounds == 1 { "" } else { "s" }
        );
        vec![
            json!({"sessionUpdate": "tool_call_update", "toolCallId": task,
            "status": "in_progress",
            "content": [{"type": "content", "content": text_block(text)}]}),
        ]
    }

    /// The updates for `event`, in order.
    pub fn updates(&mut self, workspace: &Path, event: &Event) -> Vec<Value> {
        if self
            .own_session
            .as_ref()
            .is_some_and(|own| *own != event.session_id)
        {
            return self.child_updates(event);
        }
        if let EventBody::AgentStarted {
            call_id,
            child_session_id,
            ..
        } = &event.body
        {
            self.children.insert(
                child_session_id.clone(),
                (call_id.clone(), 0, "thinking".into()),
            );
        }
        match &event.body {
            EventBody::LlmRequest { .. } => {
                self.text.clear();
                self.thought.clear();
                Vec::new()
            }
            EventBody::LlmText { delta } => {
                self.text.push_str(delta);
                Vec::new()
            }
            EventBody::LlmReasoning { delta } => {
                self.thought.push_str(delta);
                Vec::new()
            }
            EventBody::LlmRetry {
                attempt,
                max_retries,
                kind,
                status,
                delay_ms,
                host,
            } => {
                self.text.clear();
                self.thought.clear();
                let status = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
                let host = host
                    .as_deref()
                    .map(|host| format!(" to {}", host.escape_debug()))
                    .unwrap_or_default();
                vec![chunk(
                    "agent_message_chunk",
                    &format!(
                        "↻ retry {attempt}/{max_retries}{host} in {:.1} s: {}{status}\n\n",
                        *delay_ms as f64 / 1000.0,
                        kind.describe()
                    ),
                )]
            }
            // The provider's words, fenced so an editor never renders them as markdown.
            EventBody::ProviderSaid { message, .. } => {
                let longest = message
                    .split(|c| c != '`')
                    .map(str::len)
                    .max()
                    .unwrap_or(0);
                let fence = "`".repeat(longest.max(2) + 1);
                vec![chunk(
                    "agent_message_chunk",
                    &format!("the provider said:\n{fence}\n{message}\n{fence}\n\n"),
                )]
            }
            EventBody::LlmResponse { usage, .. } => {
                let mut updates = Vec::new();
                if let Some(size) = self.context_window {
                    // The context now holds the request and its answer.
                    updates.push(json!({"sessionUpdate": "usage_update",
                        "used": usage.input + usage.output, "size": size}));
                }
                if !self.thought.is_empty() {
                    updates.push(chunk(
                        "agent_thought_chunk",
                        &std::mem::take(&mut self.thought),
                    ));
                }
                if !self.text.is_empty() {
                    updates.push(chunk(
                        "agent_message_chunk",
                        &std::mem::take(&mut self.text),
                    ));
                }
                updates
            }
            EventBody::ToolCall {
                call_id,
                name,
                arguments,
                subject,
            } => {
                let mut updates = vec![tool_call(
                    workspace,
                    call_id,
                    name,
                    arguments,
                    subject.as_deref(),
                )];
                if name == "todo_write"
                    && let Some(plan) = plan(arguments)
                {
                    updates.push(plan);
                }
                updates
            }
            EventBody::ToolStarted {
                call_id, read_only, ..
            } => {
                let mut update = json!({
                    "sessionUpdate": "tool_call_update", "toolCallId": call_id,
                    "status": "in_progress"});
                // A command confined to reading is a read, as the client's icon shows it.
                if *read_only {
                    update["kind"] = json!("read");
                    update["_meta"] = json!({"keel": {"readOnly": true}});
                }
                vec![update]
            }
            EventBody::ToolResult {
                call_id,
                state,
                summary,
                output,
                ..
            } => vec![result_update(call_id, *state, summary, output)],
            EventBody::SearchResult {
                query,
                sources_status,
                sources,
            } => {
                let about = match sources_status {
                    Some(keel_types::SourcesStatus::NotProvided) => {
                        "the provider gave no structured sources; its summary is kept".to_string()
                    }
                    Some(keel_types::SourcesStatus::Available) | None => {
                        format!("{sources} source(s)")
                    }
                };
                vec![chunk(
                    "agent_thought_chunk",
                    &format!("web search `{query}`: {about}\n"),
                )]
            }
            EventBody::ContextCompacted {
                revision,
                tokens_before,
                tokens_after,
                ..
            } => {
                let mut updates = vec![chunk(
                    "agent_thought_chunk",
                    &format!(
                        "context compacted: about {tokens_before} → {tokens_after} tokens \
                         (history revision {revision})\n"
                    ),
                )];
                if let Some(size) = self.context_window {
                    updates.push(json!({"sessionUpdate": "usage_update",
                        "used": tokens_after, "size": size}));
                }
                updates
            }
            EventBody::SnapshotFailed { side, reason, .. } => {
                let reason = reason.replace(['\n', '\r'], " ");
                let text = if side == "prune" {
                    format!("\nkeel could not prune its snapshot store ({reason}).\n")
                } else {
                    format!(
                        "\nkeel took no snapshot of the workspace {side} a command ({reason}): \
                         a rewind cannot tell what it changed from what anyone else did.\n"
                    )
                };
                vec![chunk("agent_message_chunk", &text)]
            }
            EventBody::TrustIgnored(ignored) => vec![chunk(
                "agent_message_chunk",
                &untrusted_note(std::slice::from_ref(ignored)),
            )],
            EventBody::SnapshotPruned { brackets, .. } => vec![chunk(
                "agent_message_chunk",
                &format!(
                    "\nkeel's snapshot store reached checkpoint_max_bytes: the oldest {brackets} \
                     command snapshot(s) were pruned; a rewind past them cannot undo those \
                     commands.\n"
                ),
            )],
            // A background job is a tool call of its own, running until it exits.
            EventBody::JobStarted {
                job,
                call_id,
                command,
                ..
            } => vec![json!({
                "sessionUpdate": "tool_call",
                "toolCallId": job_call_id(call_id, job),
                "title": format!("{job}: {}", command.lines().next().unwrap_or("")),
                "kind": "execute",
                "status": "in_progress",
                "rawInput": {"command": command, "run_in_background": true},
            })],
            EventBody::JobExited {
                job,
                call_id,
                exit_code,
                signal,
                ..
            } => {
                let how = match (exit_code, signal) {
                    (Some(code), _) => format!("{job} exited with code {code}"),
                    (None, Some(signal)) => format!("{job} was killed by signal {signal}"),
                    (None, None) => format!("{job} ended"),
                };
                vec![json!({
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": job_call_id(call_id, job),
                    "status": if *exit_code == Some(0) { "completed" } else { "failed" },
                    "content": [{"type": "content", "content": text_block(how)}],
                })]
            }
            EventBody::SessionStarted { .. }
            // What a hook decided shows in the call's result or the answer it changed.
            | EventBody::HookRan { .. }
            | EventBody::HistoryRewritten { .. }
            | EventBody::SessionRewound { .. }
            // A subagent is its `task` call's card: the call and its result say it.
            | EventBody::AgentStarted { .. }
            | EventBody::AgentFinished { .. }
            | EventBody::PrefixChanged { .. }
            | EventBody::TurnStarted { .. }
            | EventBody::ApprovalRequested { .. }
            | EventBody::AccountRotated { .. }
            | EventBody::TurnCompleted { .. }
            | EventBody::TurnFailed { .. }
            // The offer goes in the prompt's answer and on its command (`outcome`), not
            // into the agent's message text.
            | EventBody::RecoveryOffered { .. }
            | EventBody::RecoveryConsumed { .. }
            | EventBody::RecoveryExpired { .. }
            // A client gets a command's output with its result (ACP's tool content replaces,
            // it does not append).
            | EventBody::ToolOutput { .. }
            | EventBody::ToolPreview { .. } => Vec::new(),
        }
    }
}

/// What the workspace's untrusted project files asked for and did not get, for the editor's
/// transcript (the editor shows it as text; nothing in it is a control).
pub fn untrusted_note(ignored: &[keel_types::IgnoredSetting]) -> String {
    let mut note = String::new();
    for value in ignored {
        note.push_str(&format!(
            "note: {}:{}: `{}` {}\n",
            value.file.escape_debug(),
            value.line,
            value.key.escape_debug(),
            value.reason
        ));
    }
    note
}

/// The stored history as updates, for `session/load`.
pub fn replay(workspace: &Path, items: &[Item], receipts: &[ToolReceipt]) -> Vec<Value> {
    let mut updates = Vec::new();
    for item in items {
        match item {
            Item::User { text } => updates.push(chunk("user_message_chunk", text)),
            Item::Summary(summary) => updates.push(chunk("agent_thought_chunk", &summary.text)),
            // keel's own context block, not a message of the conversation.
            Item::Context(_) => {}
            Item::Assistant(assistant) => {
                for part in &assistant.parts {
                    match part {
                        AssistantPart::Reasoning { text, .. } if !text.is_empty() => {
                            updates.push(chunk("agent_thought_chunk", text));
                        }
                        AssistantPart::Text { text } if !text.is_empty() => {
                            updates.push(chunk("agent_message_chunk", text));
                        }
                        AssistantPart::ToolCall(call) => {
                            // The path as the model wrote it: the live update had the resolved
                            // one, which the replay cannot know without the files of then.
                            let input: Value =
                                serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
                            let subject = input.get("path").and_then(Value::as_str);
                            updates.push(tool_call(
                                workspace,
                                &call.id,
                                &call.name,
                                &call.arguments,
                                subject,
                            ));
                        }
                        AssistantPart::Reasoning { .. }
                        | AssistantPart::Text { .. }
                        | AssistantPart::WebSearch(_) => {}
                    }
                }
            }
            Item::ToolResult(result) => {
                let receipt = receipts
                    .iter()
                    .rev()
                    .find(|r| r.call_id == result.call_id && r.tool == result.name);
                let state = receipt.map_or(
                    if result.is_error {
                        ReceiptState::Failed
                    } else {
                        ReceiptState::Completed
                    },
                    |r| r.state,
                );
                let summary = receipt
                    .and_then(|r| r.summary.clone())
                    .unwrap_or_else(|| result.content.lines().next().unwrap_or("").to_string());
                let excerpt: String = result
                    .content
                    .chars()
                    .take(keel_types::event::OUTPUT_EXCERPT_CHARS)
                    .collect();
                updates.push(result_update(&result.call_id, state, &summary, &excerpt));
            }
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::{Event, FailureKind, FinishReason, Usage};

    fn event(body: EventBody) -> Event {
        Event {
            id: None,
            session_id: "s".into(),
            turn: Some(1),
            body,
        }
    }

    fn texts(updates: &[Value]) -> String {
        updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .map(|u| u["content"]["text"].as_str().unwrap_or("").to_string())
            .collect()
    }

    #[test]
    fn a_command_confined_to_reading_is_a_read_for_the_client() {
        let mut translator = Translator::default();
        let started = |read_only| {
            event(EventBody::ToolStarted {
                call_id: "c1".into(),
                name: "bash".into(),
                read_only,
            })
        };
        let confined = translator.updates(Path::new("/w"), &started(true));
        assert_eq!(confined[0]["status"], "in_progress");
        assert_eq!(confined[0]["kind"], "read");
        assert_eq!(confined[0]["_meta"]["keel"]["readOnly"], true);
        let plain = translator.updates(Path::new("/w"), &started(false));
        assert!(plain[0].get("kind").is_none(), "{}", plain[0]);
    }

    #[test]
    fn a_retried_attempt_sends_its_text_once() {
        let mut translator = Translator::default();
        let ws = Path::new("/w");
        let mut sent = Vec::new();
        for body in [
            EventBody::LlmText {
                delta: "Half of the ans".into(),
            },
            EventBody::LlmRetry {
                attempt: 1,
                max_retries: 5,
                kind: FailureKind::Server,
                status: Some(503),
                delay_ms: 400,
                host: Some("api.deepseek.com".into()),
            },
            EventBody::LlmText {
                delta: "The whole answer.".into(),
            },
            EventBody::LlmResponse {
                finish_reason: FinishReason::Stop,
                usage: Usage::default(),
            },
        ] {
            sent.extend(translator.updates(ws, &event(body)));
        }
        let text = texts(&sent);
        assert!(!text.contains("Half of the ans"), "{text}");
        assert_eq!(text.matches("The whole answer.").count(), 1);
        assert!(
            text.starts_with(
                "↻ retry 1/5 to api.deepseek.com in 0.4 s: the provider failed to answer (HTTP 503)"
            ),
            "{text}"
        );
    }

    #[test]
    fn plans_results_and_cards_have_the_shapes_clients_accept() {
        let plan = plan(r#"{"todos":[{"content":"a","status":"completed"},{"content":"b","status":"in_progress"},{"content":"c","status":"weird"}]}"#).unwrap();
        let statuses: Vec<&str> = plan["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses, ["completed", "in_progress", "pending"]);
        let card = tool_call(
            Path::new("/w"),
            "c1",
            "edit_file",
            r#"{"path":"a.rs","old_string":"x","new_string":"y"}"#,
            Some("a.rs"),
        );
        assert_eq!(card["title"], "edit_file a.rs");
        assert_eq!(card["kind"], "edit");
        assert_eq!(card["locations"][0]["path"], "/w/a.rs");
        assert_eq!(card["content"][0]["type"], "diff");
        let denied = result_update("c1", ReceiptState::Denied, "by the rule", "");
        assert_eq!(denied["status"], "failed");
        assert!(
            denied["content"][0]["content"]["text"]
                .as_str()
                .unwrap()
                .starts_with("denied")
        );
    }
}
