//! A tool call's end: its result redacted, committed with its final receipt, announced — the
//! one way every call of a round ends (run, refused, answered by the engine, cancelled, or a
//! `task` whose subagent answered).
//!
//! Invariants:
//! - Every result is redacted of keel's secrets before it is stored, announced or sent.
//! - A result and its final receipt commit in one transaction; a `task` result commits in the
//!   same transaction as its subagent's final answer (`Store::commit_task`), so a crash never
//!   leaves an answer on disk that its parent does not have.
//! - A background job's end the model was not told of, then a mode the person chose while the
//!   turn runs, are told at the end of the next result.

use crate::agent_state::AgentState;
use crate::error::AgentError;
use crate::load::interrupted_result;
use crate::turn_run::TurnRun;
use keel_tools::ToolOutput;
use keel_types::kill_point::kill_point;
use keel_types::{EventBody, Item, ReceiptState, ToolCall, ToolReceipt, ToolResult};
use std::ops::Range;

/// One tool round: the calls of a committed assistant message and their receipts, by
/// position.
pub struct ToolRound {
    pub calls: Vec<ToolCall>,
    pub receipts: Vec<ToolReceipt>,
    /// What a call's `PreToolUse` hooks added, by position: committed with its result.
    pub hook_context: std::collections::HashMap<usize, String>,
}

/// How a batch ended.
#[derive(PartialEq, Eq)]
pub(crate) enum BatchEnd {
    Ran,
    Cancelled,
}

/// A subagent's final answer, committed with its parent's `task` result.
pub(crate) struct ChildAnswer<'a> {
    pub session: &'a str,
    pub turn: u64,
    pub items: &'a [Item],
}

/// Whatever a tool printed, with keel's secrets taken out: they never reach the store, an
/// event or the model.
fn redacted(output: ToolOutput, secrets: &keel_types::Secrets) -> ToolOutput {
    let content = secrets.redact(&output.content).into_owned();
    // An error's summary is cut from its message: cut again from the redacted message, so the
    // cut cannot fall inside a secret.
    let summary = if output.is_error && output.summary == keel_tools::error_summary(&output.content)
    {
        keel_tools::error_summary(&content)
    } else {
        secrets.redact(&output.summary).into_owned()
    };
    ToolOutput {
        content,
        summary,
        is_error: output.is_error,
    }
}

/// Commit the result and final receipt of the call at `position` together, then announce it.
pub(crate) fn finish(
    run: &TurnRun,
    state: &mut AgentState,
    round: &mut ToolRound,
    position: usize,
    final_state: ReceiptState,
    output: ToolOutput,
) -> Result<(), AgentError> {
    finish_with(run, state, round, position, final_state, output, None)
}

/// `finish`, with a subagent's final answer committed in the same transaction (`child`).
pub(crate) fn finish_with(
    run: &TurnRun,
    state: &mut AgentState,
    round: &mut ToolRound,
    position: usize,
    final_state: ReceiptState,
    output: ToolOutput,
    child: Option<ChildAnswer<'_>>,
) -> Result<(), AgentError> {
    let agent = run.agent.clone();
    let agent = &*agent;
    let call = &round.calls[position];
    let receipt = &mut round.receipts[position];
    let mut output = redacted(output, &agent.services.tool_services.secrets);
    // What its `PreToolUse` hooks added (redacted when the hook's output was read).
    if let Some(context) = round.hook_context.remove(&position) {
        output.content.push_str("\n\n");
        output.content.push_str(&context);
    }
    // Jobs that ended since the model was last told, then a mode the person chose while the
    // turn runs: told with the next result, last.
    let job_notes = agent.jobs.exit_notes();
    for (_, note) in &job_notes {
        output.content.push_str("\n\n");
        output.content.push_str(note);
    }
    if let Some(mode) = agent.take_mode_change() {
        output.content.push_str("\n\n");
        output.content.push_str(&crate::mode_notes::mode_note(mode));
    }
    receipt.state = final_state;
    receipt.summary = Some(output.summary.clone());
    let (excerpt, tail, lines) = keel_types::event::output_view(&output.content);
    let item = Item::ToolResult(ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: output.content,
        is_error: output.is_error,
    });
    kill_point("before_result_commit");
    match child {
        Some(child) => agent.services.store.commit_task(
            keel_store::TaskEnd {
                session: child.session,
                turn: child.turn,
                items: child.items,
                receipt: None,
            },
            keel_store::TaskEnd {
                session: &agent.session.id,
                turn: run.turn,
                items: std::slice::from_ref(&item),
                receipt: Some(receipt),
            },
        )?,
        None => {
            // What a file tool left, with its result: a later difference is someone else's
            // edit.
            let afters = crate::checkpoint::afters(
                &agent.services.store,
                &agent.session.id,
                receipt.seq,
                &agent.services.tool_services,
            )?;
            agent.services.store.append_result_after(
                &agent.session.id,
                run.turn,
                &item,
                receipt,
                &afters,
            )?;
        }
    }
    kill_point("after_result_commit");
    let told: Vec<String> = job_notes.into_iter().map(|(job, _)| job).collect();
    agent.jobs.told(&told);
    // What a `job_output` or `job_kill` result showed counts once it is committed.
    agent.jobs.confirm(&call.id);
    if call.name == keel_tools::BuiltinTool::Bash.name() {
        agent
            .services
            .store
            .forget_tool_processes(&agent.session.id, Some(&call.id))?;
    }
    state.history.push(item);
    run.emit(EventBody::ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        state: final_state,
        summary: output.summary,
        output: excerpt,
        tail,
        lines,
    });
    Ok(())
}

/// Announce a call with what permission rules see of it (the resolved path for file tools, the
/// agent of a `task`), so the card shows what will really be touched.
pub(crate) fn announce(run: &TurnRun, call: &ToolCall, subject: Option<String>) {
    run.emit(EventBody::ToolCall {
        call_id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        subject,
    });
}

/// Give the calls in `range` a result saying they were cancelled or never started.
pub(crate) fn settle(
    run: &TurnRun,
    state: &mut AgentState,
    round: &mut ToolRound,
    range: Range<usize>,
    final_state: ReceiptState,
) -> Result<(), AgentError> {
    for position in range {
        let output = ToolOutput::error(interrupted_result(final_state));
        finish(run, state, round, position, final_state, output)?;
    }
    Ok(())
}
