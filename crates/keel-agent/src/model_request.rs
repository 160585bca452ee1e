//! One model request of a turn: the committed history projected with the session's system
//! prompt and tools, sent through the dispatcher (retries, account rotation), raced against the
//! turn's cancellation.
//!
//! Invariants:
//! - A request is projected once, and the failure path is told about the very request that was
//!   sent (its message count and size).
//! - A request whose estimate reaches the compaction threshold is not sent (`CompactionDue`).
//! - A summarising request's text never reaches subscribers as answer deltas (`Deltas::Hidden`).

use crate::error::AgentError;
use crate::turn_run::TurnRun;
use keel_llm::{Completion, Dispatcher};
use keel_types::{EventBody, FailureDiagnostic, FailureKind, Item};

/// How one model request of a turn ended.
pub(crate) enum Reply {
    Completed {
        completion: Completion,
        /// Bytes of the request body (calibrates the token estimate).
        sent_bytes: usize,
    },
    Failed {
        diagnostic: FailureDiagnostic,
        /// Provider-visible messages of the request that failed, when it was projected.
        sent_messages: Option<usize>,
        /// Bytes of the request that failed, when it was projected.
        sent_bytes: Option<usize>,
    },
    Cancelled,
    /// The projected request reached `compact_at`: nothing was sent.
    CompactionDue,
}

/// Whether a request's streamed text reaches subscribers as it arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deltas {
    Shown,
    /// A summarising request: its text becomes the summary, not an answer to show.
    Hidden,
}

/// Project `history` with the session's system prompt and tools, and send it — unless its
/// estimated size reaches `due_at` tokens.
pub(crate) async fn send_items(
    run: &mut TurnRun,
    history: &[Item],
    mcp_tools: &[keel_types::ToolSpec],
    due_at: Option<u64>,
    meter: &crate::token_meter::ContextMeter,
    deltas: Deltas,
) -> Result<Reply, AgentError> {
    let agent = run.agent.clone();
    let agent = &*agent;
    let settings = &agent.settings;
    let dispatcher = Dispatcher {
        client: &agent.services.client,
        profile: &settings.profile,
        keys: agent.services.surface.keys.as_ref(),
        secrets: &agent.services.tool_services.secrets,
    };
    let request = match agent.project(history, mcp_tools) {
        Ok(request) => request,
        Err(error) => {
            return Ok(Reply::Failed {
                diagnostic: FailureDiagnostic::with_message(
                    FailureKind::InvalidRequest,
                    None,
                    error.to_string(),
                ),
                sent_messages: None,
                sent_bytes: None,
            });
        }
    };
    if due_at.is_some_and(|due_at| meter.tokens_of_bytes(request.body.len()) >= due_at) {
        return Ok(Reply::CompactionDue);
    }
    let sent_messages = Some(request.message_count);
    let sent_bytes = request.body.len();
    let turn = run.turn;
    // The sandbox's kernel probes (process spawns) start once the provider answers, while the
    // rest of the answer streams: nothing only a command needs delays the first request. A
    // run that approves commands itself (`--yes`) has probed before it sent anything.
    let mut probe_pending = settings
        .sandbox
        .as_ref()
        .is_some_and(|setup| setup.settings.mode != keel_sandbox::SandboxMode::Off);
    let mut emit = |body: EventBody| {
        if probe_pending && !matches!(body, EventBody::LlmRequest { .. }) {
            probe_pending = false;
            keel_sandbox::warm_up();
        }
        if deltas == Deltas::Shown || !body.is_model_delta() {
            agent.emit(Some(turn), body);
        }
    };
    let mut accounts = run.accounts.clone();
    let result = {
        let sending = dispatcher.send(request, &settings.model, &mut accounts, &mut emit);
        tokio::select! {
            biased;
            () = run.cancelled() => None,
            result = sending => Some(result),
        }
    };
    run.accounts = accounts;
    Ok(match result {
        None => Reply::Cancelled,
        Some(Err(diagnostic)) => Reply::Failed {
            diagnostic,
            sent_messages,
            sent_bytes: Some(sent_bytes),
        },
        Some(Ok(outcome)) => Reply::Completed {
            completion: outcome.completion,
            sent_bytes,
        },
    })
}
