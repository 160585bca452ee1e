//! Running the tool calls of one committed assistant message.
//!
//! Invariants:
//! - Arguments are validated before anything runs; an invalid call gets the specific error as
//!   its result (state `failed`) and uses no network retry.
//! - A receipt is durably `started` before its tool starts and final (with the result item, in
//!   one transaction) before the next request.
//! - Consecutive read-only calls that need no approval run in parallel; anything that can
//!   change things runs alone, in order.
//! - Every result is redacted of keel's secrets before it is stored, announced or sent.
//! - On cancel the running tools are dropped (commands killed), their receipts become
//!   `cancelled`, the calls not yet started `not_started`; every call still gets a result.

use crate::ApprovalRequest;
use crate::load::interrupted_result;
use crate::turn::cancelled;
use crate::{AgentError, SessionState, Shared};
use futures_util::future::join_all;
use keel_tools::{Decision, Reach, ToolOutput, ValidCall};
use keel_types::{EventBody, Item, ReceiptState, ToolCall, ToolReceipt, ToolResult};
use std::sync::atomic::Ordering;
use tokio::sync::watch;

pub enum RoundEnd {
    Continue,
    Cancelled,
}

enum Prepared {
    Run(ValidCall),
    Finished {
        state: ReceiptState,
        output: ToolOutput,
    },
}

pub async fn run_tools(
    shared: &Shared,
    state: &mut SessionState,
    turn: u64,
    calls: Vec<ToolCall>,
    mut receipts: Vec<ToolReceipt>,
    generation: u64,
    signal: &mut watch::Receiver<u64>,
) -> Result<RoundEnd, AgentError> {
    let mut index = 0;
    while index < calls.len() {
        let call = &calls[index];
        let prepared = if shared.generation.load(Ordering::SeqCst) == generation {
            announce(shared, turn, call);
            tokio::select! {
                biased;
                _ = cancelled(signal, generation) => None,
                prepared = prepare(shared, call) => Some(prepared),
            }
        } else {
            None
        };
        let Some(prepared) = prepared else {
            settle_rest(
                shared,
                state,
                turn,
                &calls,
                &mut receipts,
                index..calls.len(),
                ReceiptState::NotStarted,
            )?;
            return Ok(RoundEnd::Cancelled);
        };
        let valid = match prepared {
            Prepared::Finished {
                state: final_state,
                output,
            } => {
                finish(
                    shared,
                    state,
                    turn,
                    call,
                    &mut receipts[index],
                    final_state,
                    output,
                )?;
                index += 1;
                continue;
            }
            Prepared::Run(valid) => valid,
        };
        // A parallel batch: this call and the following read-only calls that need no approval.
        let mut batch = vec![(index, valid)];
        let parallel = !batch[0].1.is_sensitive(&shared.tool_context);
        while parallel && index + batch.len() < calls.len() {
            let next = &calls[index + batch.len()];
            match shared.registry.validate(&next.name, &next.arguments) {
                Ok(valid)
                    if !valid.is_sensitive(&shared.tool_context)
                        && decide(shared, &valid) == Decision::Allow =>
                {
                    announce(shared, turn, next);
                    batch.push((index + batch.len(), valid));
                }
                Ok(_) | Err(_) => break,
            }
        }
        for (position, _) in &batch {
            receipts[*position].state = ReceiptState::Started;
            shared
                .store
                .put_receipt(&shared.session.id, &receipts[*position])?;
        }
        let context = &shared.tool_context;
        let outputs = tokio::select! {
            biased;
            _ = cancelled(signal, generation) => None,
            outputs = join_all(batch.iter().map(|(_, valid)| valid.run(context))) => Some(outputs),
        };
        let Some(outputs) = outputs else {
            let end = index + batch.len();
            settle_rest(
                shared,
                state,
                turn,
                &calls,
                &mut receipts,
                index..end,
                ReceiptState::Cancelled,
            )?;
            settle_rest(
                shared,
                state,
                turn,
                &calls,
                &mut receipts,
                end..calls.len(),
                ReceiptState::NotStarted,
            )?;
            return Ok(RoundEnd::Cancelled);
        };
        for ((position, _), output) in batch.iter().zip(outputs) {
            let final_state = if output.is_error {
                ReceiptState::Failed
            } else {
                ReceiptState::Completed
            };
            finish(
                shared,
                state,
                turn,
                &calls[*position],
                &mut receipts[*position],
                final_state,
                output,
            )?;
        }
        index += batch.len();
    }
    Ok(RoundEnd::Continue)
}

fn decide(shared: &Shared, valid: &ValidCall) -> Decision {
    let reach = if valid.is_sensitive(&shared.tool_context) {
        Reach::Sensitive
    } else {
        Reach::ReadsWorkspace
    };
    shared.settings.policy.decide(
        valid.tool.name(),
        &valid.subject(&shared.tool_context),
        reach,
    )
}

/// Validate, then ask the policy (and the person, if it says so).
async fn prepare(shared: &Shared, call: &ToolCall) -> Prepared {
    let valid = match shared.registry.validate(&call.name, &call.arguments) {
        Ok(valid) => valid,
        Err(message) => {
            return Prepared::Finished {
                state: ReceiptState::Failed,
                output: ToolOutput::error(message),
            };
        }
    };
    match decide(shared, &valid) {
        Decision::Allow => Prepared::Run(valid),
        Decision::Deny(reason) => Prepared::Finished {
            state: ReceiptState::Denied,
            output: ToolOutput::error(format!("{reason}; the call was not run")),
        },
        Decision::Ask => {
            let request = ApprovalRequest {
                tool: call.name.clone(),
                subject: valid.subject(&shared.tool_context),
                arguments: call.arguments.clone(),
            };
            match shared.approver.approve(&request).await.refusal() {
                None => Prepared::Run(valid),
                Some(refusal) => Prepared::Finished {
                    state: ReceiptState::Denied,
                    output: ToolOutput::error(refusal.into()),
                },
            }
        }
    }
}

/// Commit one call's result and final receipt together, then announce it.
fn finish(
    shared: &Shared,
    state: &mut SessionState,
    turn: u64,
    call: &ToolCall,
    receipt: &mut ToolReceipt,
    final_state: ReceiptState,
    output: ToolOutput,
) -> Result<(), AgentError> {
    // Whatever a tool printed, keel's secrets never reach the store, an event or the model.
    let secrets = &shared.tool_context.secrets;
    let output = ToolOutput {
        content: secrets.redact(&output.content).into_owned(),
        summary: secrets.redact(&output.summary).into_owned(),
        is_error: output.is_error,
    };
    receipt.state = final_state;
    receipt.summary = Some(output.summary.clone());
    let item = Item::ToolResult(ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: output.content,
        is_error: output.is_error,
    });
    shared
        .store
        .append_result(&shared.session.id, turn, &item, receipt)?;
    state.history.push(item);
    shared.emit(
        Some(turn),
        EventBody::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            state: final_state.to_string(),
            summary: output.summary,
        },
    );
    Ok(())
}

/// Announce a call with what permission rules see of it (the resolved path for file tools),
/// so the card shows what will really be touched.
fn announce(shared: &Shared, turn: u64, call: &ToolCall) {
    let subject = shared
        .registry
        .validate(&call.name, &call.arguments)
        .ok()
        .map(|valid| valid.subject(&shared.tool_context))
        .filter(|subject| !subject.is_empty());
    shared.emit(
        Some(turn),
        EventBody::ToolCall {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            subject,
        },
    );
}

/// Give the calls in `range` a result saying they were cancelled or never started.
fn settle_rest(
    shared: &Shared,
    state: &mut SessionState,
    turn: u64,
    calls: &[ToolCall],
    receipts: &mut [ToolReceipt],
    range: std::ops::Range<usize>,
    final_state: ReceiptState,
) -> Result<(), AgentError> {
    for (call, receipt) in calls[range.clone()].iter().zip(receipts[range].iter_mut()) {
        let output = ToolOutput::error(interrupted_result(final_state));
        finish(shared, state, turn, call, receipt, final_state, output)?;
    }
    Ok(())
}
