//! Running hooks (docs/hooks.md): which configured hooks an event reaches, the JSON each reads,
//! and what their ends decide, by Claude Code's rules.
//!
//! Invariants:
//! - The hooks of one event run one after another, the user's before a trusted project's, an
//!   identical command once; `updatedInput` is chained (the next hook sees it); decisions
//!   combine deny > ask > allow.
//! - Exit 0: go on, and JSON on stdout (only then) is read. Exit 2: block, stderr the reason.
//!   Anything else (no start, a signal, a timeout, another code, malformed JSON) follows the
//!   hook's `on_error`, by default `deny` for `PreToolUse` and `allow` elsewhere; a Claude Code
//!   settings hook's other exit code does not block, as in Claude Code.
//! - A hook from a Claude Code settings file sees Claude Code's tool and argument names, and
//!   its `updatedInput` is read back into keel's (`claude_names`); keel's own see keel's.
//! - Every run is a `hook/ran` event; what a hook prints is redacted before anything keeps it
//!   (`keel_tools::hook_process`), and what it adds to the conversation is cut at
//!   `MAX_CONTEXT_CHARS`.

use crate::agent::Agent;
use crate::claude_names;
use keel_tools::hook_process::{HookCommand, HookEnd, HookRun, run_hook};
use keel_types::hooks::{ConfiguredHook, HookEvent, HookOnError};
use keel_types::{EventBody, Item};
use serde_json::{Map, Value, json};
use std::time::Duration;

/// The most characters a hook adds to the conversation at once.
pub(crate) const MAX_CONTEXT_CHARS: usize = 10_000;

/// The most characters of what a hook says to the person.
const MAX_MESSAGE_CHARS: usize = 2_000;

/// One event as hooks receive it.
pub(crate) struct HookInput {
    pub event: HookEvent,
    pub turn: Option<u64>,
    /// What matchers match, in keel's words (a tool's name, a start's source, …).
    pub subject: Option<String>,
    /// The event's own fields, in keel's names (`tool_name`, `tool_input`, `prompt`, …).
    pub fields: Map<String, Value>,
}

/// What the hooks of one event decided, together.
#[derive(Debug, Default)]
pub(crate) struct HookOutcome {
    pub permission: Option<HookPermission>,
    /// Exit 2 or `decision: "block"`: the reason.
    pub block: Option<String>,
    /// `continue: false`: the turn ends, with this reason.
    pub stop: Option<String>,
    /// What is added to the conversation (cut at `MAX_CONTEXT_CHARS`).
    pub context: Vec<String>,
    /// The arguments the call runs with instead of the model's (keel's names).
    pub updated_input: Option<Value>,
}

impl HookOutcome {
    /// The context joined and bounded, or `None` when there is none.
    pub(crate) fn context_text(&self) -> Option<String> {
        if self.context.is_empty() {
            return None;
        }
        let text = self.context.join("\n");
        if text.chars().count() <= MAX_CONTEXT_CHARS {
            return Some(text);
        }
        let kept: String = text.chars().take(MAX_CONTEXT_CHARS).collect();
        Some(format!(
            "{kept}\n[keel: the hooks' context was cut at {MAX_CONTEXT_CHARS} characters]"
        ))
    }
}

/// A `PreToolUse` permission decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HookPermission {
    Allow,
    Ask(Option<String>),
    Deny(String),
}

impl HookPermission {
    fn rank(&self) -> u8 {
        match self {
            HookPermission::Allow => 0,
            HookPermission::Ask(_) => 1,
            HookPermission::Deny(_) => 2,
        }
    }
}

/// Run the hooks `input` reaches (`hook_set::Hooks`); `history` is the session's, for its transcript.
pub(crate) async fn run(agent: &Agent, history: &[Item], input: HookInput) -> HookOutcome {
    let mut outcome = HookOutcome::default();
    let hooks = agent.services.hooks();
    let mut ran: Vec<&str> = Vec::new();
    let transcript = crate::hook_transcript::sync(agent, history);
    for (hook, matcher) in hooks.of(input.event) {
        if ran.contains(&hook.command.as_str()) {
            continue;
        }
        let mut fields = input.fields.clone();
        if let Some(updated) = &outcome.updated_input {
            fields.insert("tool_input".into(), updated.clone());
        }
        let subject = input.subject.as_deref().map(|subject| {
            if hook.claude && matches!(input.event, HookEvent::PreToolUse | HookEvent::PostToolUse)
            {
                claude_names::to_claude(subject)
            } else {
                subject.to_string()
            }
        });
        let matched = match (matcher, input.event.matched_on(), &subject) {
            (Some(matcher), Some(_), Some(subject)) => matcher.is_match(subject),
            (Some(_), Some(_), None) => false,
            _ => true,
        };
        if !matched {
            continue;
        }
        ran.push(&hook.command);
        if hook.claude {
            to_claude_fields(&mut fields, agent);
        }
        let payload = payload(agent, &input, hook, fields, transcript.clone());
        let run = run_hook(
            HookCommand {
                command: &hook.command,
                stdin: payload,
                env: vec![(
                    "CLAUDE_PROJECT_DIR".into(),
                    agent
                        .services
                        .tool_services
                        .guard
                        .workspace()
                        .display()
                        .to_string(),
                )],
                timeout: Duration::from_secs(hook.timeout_secs),
                unconfined: hook.unconfined,
            },
            &keel_tools::ToolServices {
                sandbox: agent.sandbox_now(),
                ..agent.services.tool_services.clone()
            },
        )
        .await;
        let (decision, message) = interpret(hook, &input, &run, &mut outcome);
        emit_ran(agent, &input, hook, &run, decision, message);
        if outcome.stop.is_some() {
            break;
        }
    }
    outcome
}

/// The JSON a hook reads, given where it sees the session's temp dir.
fn payload(
    agent: &Agent,
    input: &HookInput,
    hook: &ConfiguredHook,
    fields: Map<String, Value>,
    transcript: Option<crate::hook_transcript::TranscriptPlace>,
) -> keel_tools::hook_process::HookInput {
    let mode = agent.permission_mode();
    let mut common = json!({
        "session_id": agent.session.id,
        "cwd": agent.services.tool_services.guard.workspace().display().to_string(),
        "hook_event_name": input.event.name(),
        "permission_mode": if hook.claude {
            claude_names::permission_mode(mode)
        } else {
            mode.as_str()
        },
    });
    if let Some(object) = common.as_object_mut() {
        object.extend(fields);
    }
    Box::new(move |temp_inside: Option<&std::path::Path>| {
        if let (Some(object), Some(place)) = (common.as_object_mut(), transcript) {
            object.insert(
                "transcript_path".into(),
                Value::String(place.as_seen_from(temp_inside).display().to_string()),
            );
        }
        serde_json::to_vec(&common).unwrap_or_default()
    })
}

/// A tool event's fields in Claude Code's names.
fn to_claude_fields(fields: &mut Map<String, Value>, agent: &Agent) {
    let Some(tool) = fields
        .get("tool_name")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return;
    };
    let workspace = agent.services.tool_services.guard.workspace();
    if let Some(arguments) = fields.get("tool_input") {
        let renamed = claude_names::arguments_to_claude(&tool, arguments, workspace);
        fields.insert("tool_input".into(), renamed);
    }
    fields.insert(
        "tool_name".into(),
        Value::String(claude_names::to_claude(&tool)),
    );
}

/// What one hook's end decides, added to `outcome`; the decision's name and what the person
/// is told.
fn interpret(
    hook: &ConfiguredHook,
    input: &HookInput,
    run: &HookRun,
    outcome: &mut HookOutcome,
) -> (String, Option<String>) {
    let failed = |how: String, outcome: &mut HookOutcome, claude_code: bool| {
        let on_error = hook.on_error.unwrap_or(if claude_code {
            HookOnError::Allow
        } else {
            hook.event.default_on_error()
        });
        let said = format!("the hook `{}` {how}", shorten(&hook.command));
        match on_error {
            HookOnError::Allow => ("failed_allow".to_string(), Some(said)),
            HookOnError::Deny => {
                let reason = format!("{said}, and a failing {} hook refuses", hook.event);
                match hook.event {
                    HookEvent::PreToolUse => {
                        combine(outcome, HookPermission::Deny(reason.clone()));
                    }
                    HookEvent::UserPromptSubmit | HookEvent::PostToolUse => {
                        outcome.block.get_or_insert(reason.clone());
                    }
                    _ => {}
                }
                ("failed_deny".to_string(), Some(reason))
            }
        }
    };
    let code = match &run.end {
        HookEnd::NotStarted(why) => {
            return failed(format!("could not start: {why}"), outcome, false);
        }
        HookEnd::TimedOut => {
            return failed(
                format!("did not end within {} s and was killed", hook.timeout_secs),
                outcome,
                false,
            );
        }
        HookEnd::Signalled(signal) => {
            return failed(format!("was killed by signal {signal}"), outcome, false);
        }
        HookEnd::Exited(code) => *code,
    };
    if code == 2 {
        let reason = match run.stderr.trim() {
            "" => format!("the hook `{}` blocked it", shorten(&hook.command)),
            said => said.to_string(),
        };
        return match input.event {
            HookEvent::PreToolUse => {
                combine(outcome, HookPermission::Deny(reason));
                ("deny".into(), None)
            }
            HookEvent::UserPromptSubmit => {
                outcome.block.get_or_insert(reason.clone());
                ("block".into(), Some(bounded(&reason)))
            }
            HookEvent::PostToolUse | HookEvent::Stop | HookEvent::SubagentStop => {
                outcome.block.get_or_insert(reason);
                ("block".into(), None)
            }
            // Nothing to block: the person hears it.
            HookEvent::SessionStart | HookEvent::PreCompact | HookEvent::Notification => {
                ("none".into(), Some(bounded(&reason)))
            }
        };
    }
    if code != 0 {
        let stderr = run.stderr.trim();
        let how = if stderr.is_empty() {
            format!("exited with code {code}")
        } else {
            format!("exited with code {code}: {}", bounded(stderr))
        };
        return failed(how, outcome, hook.claude);
    }
    let stdout = run.stdout.trim();
    if !stdout.starts_with('{') {
        // Plain text is context where Claude Code makes it context.
        if !stdout.is_empty()
            && matches!(
                input.event,
                HookEvent::UserPromptSubmit | HookEvent::SessionStart
            )
        {
            outcome.context.push(stdout.to_string());
        }
        return ("none".into(), None);
    }
    let Ok(said) = serde_json::from_str::<Value>(stdout) else {
        return failed("printed JSON keel cannot read".into(), outcome, false);
    };
    read_json(hook, input, &said, outcome)
}

/// What a hook's JSON on exit 0 decides.
fn read_json(
    hook: &ConfiguredHook,
    input: &HookInput,
    said: &Value,
    outcome: &mut HookOutcome,
) -> (String, Option<String>) {
    let text =
        |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    let mut decision = "none".to_string();
    let mut message = text(said, "systemMessage").map(|message| bounded(&message));
    let specific = said
        .get("hookSpecificOutput")
        .cloned()
        .unwrap_or(Value::Null);
    if input.event == HookEvent::PreToolUse {
        let reason = text(&specific, "permissionDecisionReason");
        let permission = match text(&specific, "permissionDecision").as_deref() {
            Some("allow") => Some(HookPermission::Allow),
            Some("ask") => Some(HookPermission::Ask(reason.clone())),
            Some("deny") => Some(HookPermission::Deny(
                reason
                    .clone()
                    .unwrap_or_else(|| "a PreToolUse hook denied it".into()),
            )),
            // keel has no one to defer to: it refuses, and says so.
            Some("defer") => {
                message.get_or_insert_with(|| {
                    "a hook answered `defer`, which keel treats as `deny`".into()
                });
                Some(HookPermission::Deny(
                    reason
                        .clone()
                        .unwrap_or_else(|| "a PreToolUse hook deferred it".into()),
                ))
            }
            _ => None,
        };
        if let Some(permission) = permission {
            decision = match &permission {
                HookPermission::Allow => "allow",
                HookPermission::Ask(_) => "ask",
                HookPermission::Deny(_) => "deny",
            }
            .into();
            combine(outcome, permission);
        }
        if let Some(updated) = specific
            .get("updatedInput")
            .filter(|value| value.is_object())
        {
            let tool = input
                .fields
                .get("tool_name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            outcome.updated_input = Some(if hook.claude {
                claude_names::arguments_from_claude(tool, updated)
            } else {
                updated.clone()
            });
            if decision == "none" {
                decision = "updated_input".into();
            }
        }
    }
    if text(said, "decision").as_deref() == Some("block")
        && matches!(
            input.event,
            HookEvent::PostToolUse
                | HookEvent::Stop
                | HookEvent::SubagentStop
                | HookEvent::UserPromptSubmit
        )
    {
        let reason = text(said, "reason").unwrap_or_else(|| "a hook blocked it".into());
        if input.event == HookEvent::UserPromptSubmit {
            message = Some(bounded(&reason));
        }
        outcome.block.get_or_insert(reason);
        decision = "block".into();
    }
    if let Some(context) = text(&specific, "additionalContext").filter(|c| !c.trim().is_empty()) {
        outcome.context.push(context);
    }
    if said.get("continue") == Some(&Value::Bool(false)) {
        let reason = text(said, "stopReason").unwrap_or_else(|| "a hook ended the turn".into());
        message = Some(bounded(&reason));
        outcome.stop.get_or_insert(reason);
        decision = "stop".into();
    }
    (decision, message)
}

fn combine(outcome: &mut HookOutcome, permission: HookPermission) {
    let stronger = outcome
        .permission
        .as_ref()
        .is_none_or(|held| permission.rank() > held.rank());
    if stronger {
        outcome.permission = Some(permission);
    }
}

fn emit_ran(
    agent: &Agent,
    input: &HookInput,
    hook: &ConfiguredHook,
    run: &HookRun,
    decision: String,
    message: Option<String>,
) {
    let secrets = &agent.services.tool_services.secrets;
    agent.emit(
        input.turn,
        EventBody::HookRan {
            event: input.event.name().to_string(),
            matcher: hook.matcher.clone(),
            command: secrets.redact(&hook.command).into_owned(),
            exit: match run.end {
                HookEnd::Exited(code) => Some(code),
                _ => None,
            },
            duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
            decision,
            message: message.map(|message| secrets.redact(&message).into_owned()),
        },
    );
}

fn bounded(text: &str) -> String {
    if text.chars().count() <= MAX_MESSAGE_CHARS {
        return text.to_string();
    }
    text.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "…"
}

fn shorten(command: &str) -> String {
    let line = command.lines().next().unwrap_or_default();
    if line.chars().count() <= 80 && !command.contains('\n') {
        return line.to_string();
    }
    line.chars().take(80).collect::<String>() + "…"
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
