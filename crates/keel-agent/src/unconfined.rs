//! "Run it again outside the sandbox?": after a confined command fails in a way that suggests
//! a sandbox refusal, the person may allow one unconfined run (docs/sandbox.md#unconfined-runs).
//!
//! Invariants:
//! - Only in `ask` mode, only for a `bash` call that ran confined under an enforced sandbox and
//!   failed (an exit code, not a timeout or a cancel) with output that reads like a refusal.
//!   keel cannot read the kernel's record of a refusal here, so the question says "suggests".
//! - Never automatic: a separate approval each time (`ApprovalRequest::unconfined`, which no
//!   surface answers with a remembered "always"), showing the exact command — and only where
//!   keel itself asks a person (`Approver::asks_a_person`: not over ACP, whose client may
//!   answer by itself). At most once per turn: the trigger is the command's own output.
//! - The question says that the output is the command's own (keel cannot verify it) and that
//!   the re-run runs workspace code the confined run may have changed.
//! - A separate receipt: `<call id>#unconfined`, durably `started` (sandbox `off`) before the
//!   command runs, final after; a crash in between leaves it `unknown`, never re-run.
//! - The model gets both outcomes in the call's one result: the confined run's, then the
//!   unconfined one's (or that the person declined).

use crate::agent_state::AgentState;
use crate::approval::ApprovalRequest;
use crate::error::AgentError;
use crate::turn_run::TurnRun;
use keel_sandbox::{Enforcement, SandboxMode};
use keel_tools::{PermissionMode, ToolOutput, ToolServices};
use keel_types::kill_point::kill_point;
use keel_types::{EventBody, ReceiptState, ToolCall, ToolReceipt};

/// What a refusal by the sandbox prints (a command's own words: never proof).
const REFUSAL_SIGNS: &[&str] = &[
    "Permission denied",
    "Read-only file system",
    "Operation not permitted",
    "Network is unreachable",
    "Device or resource busy",
    "Temporary failure in name resolution",
    "Could not resolve host",
];

/// Whether `output` of `call` is one to offer an unconfined run for.
pub(crate) fn worth_offering(run: &TurnRun, call: &ToolCall, output: &ToolOutput) -> bool {
    let agent = run.agent.clone();
    let agent = &*agent;
    let Some(sandbox) = &agent.sandbox_now() else {
        return false;
    };
    call.name == keel_tools::BuiltinTool::Bash.name()
        && !run.unconfined_offered
        && agent.services.surface.approver.asks_a_person()
        && agent.permission_mode() == PermissionMode::Ask
        && sandbox.mode != SandboxMode::Off
        && sandbox.enforcement() == Enforcement::Enforced
        && output.is_error
        && output.summary.starts_with("exit ")
        && REFUSAL_SIGNS
            .iter()
            .any(|sign| output.content.contains(sign))
}

/// Ask, and if the person allows it, run `call` once more outside the sandbox under a receipt
/// of its own; `confined` with what happened appended.
pub(crate) async fn offer(
    run: &mut TurnRun,
    state: &mut AgentState,
    call: &ToolCall,
    context: &ToolServices,
    confined: ToolOutput,
) -> Result<ToolOutput, AgentError> {
    let agent = run.agent.clone();
    let agent = &*agent;
    let Ok(valid) = agent
        .services
        .registry
        .validate(&call.name, &call.arguments)
    else {
        return Ok(confined);
    };
    let command = valid
        .args
        .get("command")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string();
    run.unconfined_offered = true;
    let call_id = format!("{}#unconfined", call.id);
    let request = crate::approval::with_always_label(ApprovalRequest {
        call_id: call_id.clone(),
        tool: "bash (unconfined)".into(),
        subject: command.clone(),
        arguments: call.arguments.clone(),
        unconfined: true,
        plan: false,
        reason: None,
        preview: None,
        always_label: None,
        asked_by: None,
    });
    let answer = agent.ask(run.turn, &request);
    let answer = tokio::select! {
        biased;
        () = run.cancelled() => None,
        answer = answer => Some(answer),
    };
    let Some(answer) = answer else {
        return Ok(confined);
    };
    if answer.refusal().is_some() {
        let mut output = confined;
        output
            .content
            .push_str("\n[keel asked the user to run it again outside the sandbox; they did not]");
        return Ok(output);
    }
    let seq = state.next_seq;
    state.next_seq += 1;
    let mut receipt = ToolReceipt {
        call_id: call_id.clone(),
        tool: call.name.clone(),
        args_digest: crate::call::digest(&call.arguments),
        state: ReceiptState::Started,
        turn: run.turn,
        seq,
        summary: None,
        sandbox: Some(SandboxMode::Off.name().to_string()),
        child_session: None,
    };
    kill_point("before_receipt_started");
    agent
        .services
        .store
        .put_receipt(&agent.session.id, &receipt)?;
    kill_point("after_receipt_started");
    run.emit(EventBody::ToolStarted {
        call_id: call_id.clone(),
        name: call.name.clone(),
        read_only: false,
    });
    let unconfined_context = ToolServices {
        sandbox: None,
        ..context.clone()
    };
    let outcome = tokio::select! {
        biased;
        () = run.cancelled() => None,
        output = valid.run(&unconfined_context) => Some(output),
    };
    let (final_state, text) = match outcome {
        Some(output) => {
            let state = if output.is_error {
                ReceiptState::Failed
            } else {
                ReceiptState::Completed
            };
            receipt.summary = Some(output.summary.clone());
            (state, output.content)
        }
        None => (ReceiptState::Cancelled, "[cancelled]".to_string()),
    };
    receipt.state = final_state;
    agent
        .services
        .store
        .put_receipt(&agent.session.id, &receipt)?;
    let summary = receipt.summary.clone().unwrap_or_default();
    let (excerpt, tail, lines) =
        keel_types::event::output_view(&agent.services.tool_services.secrets.redact(&text));
    run.emit(EventBody::ToolResult {
        call_id,
        name: call.name.clone(),
        state: final_state,
        summary,
        output: excerpt,
        tail,
        lines,
    });
    let mut output = confined;
    output.content.push_str(&format!(
        "\n[the user allowed running it again outside the sandbox, unconfined; that run:]\n{text}"
    ));
    output.is_error = final_state != ReceiptState::Completed;
    Ok(output)
}
