//! The turn engine: project → attempt → commit → validate → write receipts ahead → run tools
//! → commit results → repeat until the model stops.
//!
//! Invariants:
//! - The assistant message and the `pending` receipts of its calls are committed in one
//!   transaction before any tool starts; calls present with `finish_reason: stop` still run.
//! - A reply that arrives after its turn was cancelled is never committed.
//! - Every round's request is built from the committed history only (nothing provisional).
//! - A turn ends at `max_rounds`, or earlier when its tool rounds stop making progress
//!   (`progress::ProgressGuard`).

use crate::progress::ProgressGuard;
use crate::prompt::system_prompt;
use crate::recovery;
use crate::tools_round::{RoundEnd, run_tools};
use crate::{AgentError, SessionState, Shared};
use keel_llm::{AccountCursor, Dispatcher, ProjectionInput};
use keel_types::{
    EventBody, FailureDiagnostic, FailureKind, InputKind, Item, ReceiptState, ToolCall,
    ToolReceipt, Usage,
};
use sha2::{Digest, Sha256};
use std::sync::atomic::Ordering;
use tokio::sync::{MutexGuard, watch};

/// What starts a turn.
pub(crate) struct TurnInput {
    pub text: String,
    pub kind: InputKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TurnOutcome {
    Completed {
        usage: Usage,
        readiness: recovery::readiness::Readiness,
    },
    /// The turn failed; `recovery_id` names the explicit recovery offered for it, if any.
    Failed {
        diagnostic: FailureDiagnostic,
        recovery_id: Option<String>,
    },
    Cancelled,
}

/// Resolves once the generation moves past `generation` (a cancel).
pub(crate) async fn cancelled(signal: &mut watch::Receiver<u64>, generation: u64) {
    while *signal.borrow_and_update() == generation {
        if signal.changed().await.is_err() {
            // The controller is gone: nothing can cancel any more.
            std::future::pending::<()>().await;
        }
    }
}

pub(crate) fn digest(arguments: &str) -> String {
    Sha256::digest(arguments.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

pub async fn run_turn(
    shared: &Shared,
    mut state: MutexGuard<'_, SessionState>,
    input: TurnInput,
) -> Result<TurnOutcome, AgentError> {
    let generation = shared.generation.load(Ordering::SeqCst);
    let mut signal = shared.cancel_signal.subscribe();
    let session = shared.session.id.clone();
    let turn = state.last_turn + 1;
    state.last_turn = turn;
    let input_kind = input.kind;
    let mut ran_tools = false;
    if input.kind == InputKind::User {
        recovery::admission::expire_pending(shared, turn)?;
    }
    let user = Item::User { text: input.text };
    shared
        .store
        .append_items(&session, turn, std::slice::from_ref(&user))?;
    state.history.push(user);
    shared.emit(
        Some(turn),
        EventBody::TurnStarted {
            input_kind: input.kind,
        },
    );

    let settings = &shared.settings;
    let specs = shared.registry.specs();
    let system = system_prompt(&settings.workspace);
    let mut accounts = AccountCursor::new(&settings.profile);
    let mut usage = Usage::default();
    let mut progress = ProgressGuard::default();
    for _round in 0..settings.max_rounds {
        let dispatcher = Dispatcher {
            client: &shared.client,
            profile: &settings.profile,
            keys: shared.keys.as_ref(),
        };
        let repaired;
        let history: &[Item] = match state.repair {
            Some(boundary) => {
                let receipts = shared.store.receipts(&session)?;
                repaired = recovery::apply_repair(&state.history, boundary, &receipts);
                &repaired
            }
            None => &state.history,
        };
        let result = {
            let request = ProjectionInput {
                model: &settings.model,
                system: &system,
                tools: &specs,
                history,
            };
            let mut emit = |body: EventBody| shared.emit(Some(turn), body);
            tokio::select! {
                biased;
                _ = cancelled(&mut signal, generation) => None,
                result = dispatcher.complete(&request, &mut accounts, &mut emit) => Some(result),
            }
        };
        let outcome = match result {
            None => return Ok(end_cancelled(shared, turn)),
            Some(Err(diagnostic)) => {
                let offered =
                    recovery::admission::record_incident(shared, &state, turn, &diagnostic)?;
                shared.emit(
                    Some(turn),
                    EventBody::TurnFailed {
                        diagnostic: diagnostic.clone(),
                    },
                );
                if let Some(recovery_id) = &offered {
                    shared.emit(
                        Some(turn),
                        EventBody::RecoveryOffered {
                            recovery_id: recovery_id.clone(),
                            action: InputKind::ProtocolRecovery,
                        },
                    );
                }
                return Ok(TurnOutcome::Failed {
                    diagnostic,
                    recovery_id: offered,
                });
            }
            Some(Ok(outcome)) => outcome,
        };
        if shared.generation.load(Ordering::SeqCst) != generation {
            // A late reply of a cancelled turn: dropped, never committed.
            return Ok(end_cancelled(shared, turn));
        }
        let completion = outcome.completion;
        usage.add(&completion.usage);
        shared.emit(
            Some(turn),
            EventBody::LlmResponse {
                finish_reason: completion.finish_reason.to_string(),
                usage: completion.usage,
            },
        );
        let calls: Vec<ToolCall> = completion.item.tool_calls().cloned().collect();
        let receipts: Vec<ToolReceipt> = calls
            .iter()
            .map(|call| {
                let seq = state.next_seq;
                state.next_seq += 1;
                ToolReceipt {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    args_digest: digest(&call.arguments),
                    state: ReceiptState::Pending,
                    turn,
                    seq,
                    summary: None,
                }
            })
            .collect();
        for part in &completion.item.parts {
            if let keel_types::AssistantPart::WebSearch(search) = part {
                shared.emit(
                    Some(turn),
                    EventBody::SearchResult {
                        query: search.query.clone(),
                        sources_status: search.sources_status,
                        sources: search.sources.len(),
                    },
                );
            }
        }
        let assistant = Item::Assistant(completion.item);
        shared
            .store
            .append_with_receipts(&session, turn, &assistant, &receipts)?;
        state.history.push(assistant);
        if calls.is_empty() {
            let readiness =
                recovery::readiness::Readiness::of(completion.finish_reason, &state.history);
            // A continue-checks turn that did nothing new does not renew the offer.
            let may_offer = input_kind == InputKind::User || ran_tools;
            let offered = match readiness.reason() {
                Some(reason) if may_offer => {
                    recovery::admission::record_readiness(shared, &state, turn, reason)?
                }
                Some(_) | None => None,
            };
            shared.emit(
                Some(turn),
                EventBody::TurnCompleted {
                    usage,
                    cache_hit_ratio: usage.cache_hit_ratio(),
                    ready: readiness.reason().is_none(),
                    not_ready_reason: readiness.reason().map(str::to_string),
                },
            );
            if let Some(recovery_id) = offered {
                shared.emit(
                    Some(turn),
                    EventBody::RecoveryOffered {
                        recovery_id,
                        action: InputKind::FinalReadinessRecovery,
                    },
                );
            }
            return Ok(TurnOutcome::Completed { usage, readiness });
        }
        match run_tools(
            shared,
            &mut state,
            turn,
            calls,
            receipts,
            generation,
            &mut signal,
        )
        .await?
        {
            RoundEnd::Continue => ran_tools = true,
            RoundEnd::Cancelled => return Ok(end_cancelled(shared, turn)),
        }
        if let Some(diagnostic) = progress.observe(&state.history) {
            return Ok(end_failed(shared, turn, diagnostic));
        }
    }
    let diagnostic = FailureDiagnostic::with_message(
        FailureKind::Limit,
        None,
        format!(
            "the turn stopped after {} tool rounds (max_rounds); ask keel to continue",
            settings.max_rounds
        ),
    );
    Ok(end_failed(shared, turn, diagnostic))
}

fn end_failed(shared: &Shared, turn: u64, diagnostic: FailureDiagnostic) -> TurnOutcome {
    shared.emit(
        Some(turn),
        EventBody::TurnFailed {
            diagnostic: diagnostic.clone(),
        },
    );
    TurnOutcome::Failed {
        diagnostic,
        recovery_id: None,
    }
}

fn end_cancelled(shared: &Shared, turn: u64) -> TurnOutcome {
    let diagnostic = FailureDiagnostic::new(FailureKind::Cancelled, None);
    shared.emit(Some(turn), EventBody::TurnFailed { diagnostic });
    TurnOutcome::Cancelled
}
