//! Where a turn meets its hooks (docs/hooks.md#events): the input each event gets and how its
//! outcome changes the call, the result or the turn.
//!
//! Invariants:
//! - A hook's `allow` counts as an allow rule of its layer: it answers only a question the
//!   rules would ask by default — never over a deny rule, an ask rule or
//!   `ask_read_only_commands`, never in read-only or plan mode, never where the sandbox is
//!   below its minimum — and the call runs under the sandbox as any other (`apply_permission`).
//! - A hook's `ask` turns a call that would run into a question; its `deny` refuses the call
//!   with the reason as its result.
//! - What hooks add to the conversation is history: a tool hook's with its call's result, a
//!   prompt hook's inside the user item (`hooks::HookOutcome::context_text`); never the system
//!   prompt, never an earlier item.

use crate::agent::Agent;
use crate::hooks::{self, HookInput, HookOutcome, HookPermission};
use keel_tools::{Decision, ToolOutput};
use keel_types::hooks::HookEvent;
use keel_types::{Item, ToolCall};
use serde_json::{Map, Value, json};

/// The most `Stop` hook continuations one turn takes.
pub(crate) const MAX_STOP_CONTINUATIONS: u32 = 3;

/// Run the `PreToolUse` hooks for `call`; `None` when there are none.
pub(crate) async fn pre_tool_use(
    agent: &Agent,
    turn: u64,
    history: &[Item],
    call: &ToolCall,
) -> Option<HookOutcome> {
    if !agent.services.hooks().has(HookEvent::PreToolUse) {
        return None;
    }
    // Only a valid call reaches its hooks: its arguments are a JSON object.
    let arguments = serde_json::from_str(&call.arguments)
        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
    let fields = tool_fields(call, &arguments);
    Some(
        hooks::run(
            agent,
            history,
            tool_input(HookEvent::PreToolUse, turn, call, fields),
        )
        .await,
    )
}

/// Run the `PostToolUse` hooks for `call`, which ran with `arguments` and gave `output`; the
/// result as the model gets it (a block's reason and any context added after it).
pub(crate) async fn post_tool_use(
    agent: &Agent,
    turn: u64,
    history: &[Item],
    call: &ToolCall,
    arguments: &Value,
    mut output: ToolOutput,
) -> ToolOutput {
    if !agent.services.hooks().has(HookEvent::PostToolUse) {
        return output;
    }
    let mut fields = tool_fields(call, arguments);
    fields.insert(
        "tool_response".into(),
        json!({"content": output.content, "is_error": output.is_error, "summary": output.summary}),
    );
    let outcome = hooks::run(
        agent,
        history,
        tool_input(HookEvent::PostToolUse, turn, call, fields),
    )
    .await;
    if let Some(reason) = &outcome.block {
        output
            .content
            .push_str(&format!("\n\n[a PostToolUse hook says: {reason}]"));
    }
    if let Some(context) = outcome.context_text() {
        output.content.push_str(&format!("\n\n{context}"));
    }
    output
}

fn tool_fields(call: &ToolCall, arguments: &Value) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("tool_name".into(), Value::String(call.name.clone()));
    fields.insert("tool_input".into(), arguments.clone());
    fields.insert("tool_use_id".into(), Value::String(call.id.clone()));
    fields
}

fn tool_input(
    event: HookEvent,
    turn: u64,
    call: &ToolCall,
    fields: Map<String, Value>,
) -> HookInput {
    HookInput {
        event,
        turn: Some(turn),
        subject: Some(call.name.clone()),
        fields,
    }
}

/// Run the `UserPromptSubmit` hooks for `prompt`; `None` when there are none.
pub(crate) async fn user_prompt_submit(
    agent: &Agent,
    turn: u64,
    history: &[Item],
    prompt: &str,
) -> Option<HookOutcome> {
    if !agent.services.hooks().has(HookEvent::UserPromptSubmit) {
        return None;
    }
    let mut fields = Map::new();
    fields.insert("prompt".into(), Value::String(prompt.to_string()));
    let input = HookInput {
        event: HookEvent::UserPromptSubmit,
        turn: Some(turn),
        subject: None,
        fields,
    };
    Some(hooks::run(agent, history, input).await)
}

/// Run the `Stop` hooks (`SubagentStop` for a subagent) as the model answered without tools;
/// `None` when there are none.
pub(crate) async fn stop(
    agent: &Agent,
    turn: u64,
    history: &[Item],
    stop_hook_active: bool,
) -> Option<HookOutcome> {
    let event = if agent.role.is_some() {
        HookEvent::SubagentStop
    } else {
        HookEvent::Stop
    };
    if !agent.services.hooks().has(event) {
        return None;
    }
    let last_assistant_message = history
        .iter()
        .rev()
        .find_map(|item| match item {
            Item::Assistant(message) => Some(message.text()),
            _ => None,
        })
        .unwrap_or_default();
    let mut fields = Map::new();
    fields.insert("stop_hook_active".into(), Value::Bool(stop_hook_active));
    fields.insert(
        "last_assistant_message".into(),
        Value::String(last_assistant_message),
    );
    let input = HookInput {
        event,
        turn: Some(turn),
        subject: None,
        fields,
    };
    Some(hooks::run(agent, history, input).await)
}

/// The decision for a call after its `PreToolUse` hooks said `permission` (see the module
/// invariants).
pub(crate) fn apply_permission(
    agent: &Agent,
    decision: Decision,
    permission: Option<&HookPermission>,
    tool: &str,
    subject: &str,
) -> Decision {
    match (permission, decision) {
        (Some(HookPermission::Deny(reason)), _) => {
            Decision::Deny(format!("refused by a PreToolUse hook: {reason}"))
        }
        (Some(HookPermission::Ask(_)), Decision::Allow | Decision::AllowReadOnly) => Decision::Ask,
        (Some(HookPermission::Allow), Decision::Ask) if hook_may_allow(agent, tool, subject) => {
            Decision::Allow
        }
        (_, decision) => decision,
    }
}

fn hook_may_allow(agent: &Agent, tool: &str, subject: &str) -> bool {
    let policy = agent.policy_now();
    if policy.mode.only_reads() || policy.asks(tool, subject) {
        return false;
    }
    if tool == keel_tools::BuiltinTool::Bash.name() {
        if policy.asks_read_only_commands() {
            return false;
        }
        let below_minimum = agent.sandbox_now().is_some_and(|sandbox| {
            matches!(
                sandbox.enforcement(),
                keel_sandbox::Enforcement::BelowMinimum { .. }
            )
        });
        return !below_minimum;
    }
    true
}
