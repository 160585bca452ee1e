//! Loading a session: settle what a crash left behind, then rebuild the in-memory state.
//!
//! Invariants:
//! - Nothing is re-run: a receipt left `started` becomes `unknown`, one left `pending`
//!   becomes `not_started`; the command a `started` call left running is stopped
//!   (`orphan_processes`), never resumed.
//! - Every tool call of the last assistant message gets a result, so the next request is
//!   well-formed; a synthesized result states the receipt's state and is appended (history
//!   stays append-only).

use crate::agent_state::AgentState;
use crate::error::AgentError;
use keel_store::Store;
use keel_types::{Item, ReceiptState, ToolReceipt, ToolResult};

/// A session's receipts as a reader should see them: while a live process holds the session,
/// as stored; otherwise as the next load will settle them (`started` is `unknown`). Writes
/// nothing.
pub(crate) fn receipts_for_display(
    store: &Store,
    session: &str,
) -> Result<Vec<ToolReceipt>, AgentError> {
    let mut receipts = store.receipts(session)?;
    if !store.lease_is_held(session)? {
        for receipt in &mut receipts {
            receipt.state = receipt.state.after_interruption();
        }
    }
    Ok(receipts)
}

pub fn load_session(store: &Store, session: &str) -> Result<AgentState, AgentError> {
    let interrupted: Vec<String> = store
        .receipts(session)?
        .into_iter()
        .filter(|receipt| receipt.state == ReceiptState::Started)
        .map(|receipt| receipt.call_id)
        .collect();
    store.settle_interrupted_receipts(session)?;
    // What a dead keel left running stops now (never run again: the receipt stays `unknown`).
    crate::orphan_processes::stop_leftovers(store, session, &interrupted)?;
    keel_types::kill_point::kill_point("after_receipts_settled");
    let mut history = Vec::new();
    let mut last_turn = 0;
    for stored in store.items(session)? {
        let item = stored
            .item
            .map_err(|reason| AgentError::UndecodableHistory {
                session: session.to_string(),
                revision: stored.revision,
                reason,
            })?;
        last_turn = last_turn.max(stored.turn);
        history.push(item);
    }
    // A turn that wrote no item (a compaction that failed) still used its number.
    last_turn = last_turn.max(store.last_event_turn(session)?);
    let receipts = store.receipts(session)?;
    let next_seq = receipts.iter().map(|r| r.seq).max().unwrap_or(0) + 1;
    let unanswered = unanswered_calls(&history);
    if !unanswered.is_empty() {
        let results: Vec<Item> = unanswered
            .into_iter()
            .map(|(call_id, name)| {
                let state = receipts
                    .iter()
                    .rev()
                    .find(|r| r.call_id == call_id && r.tool == name)
                    .map_or(ReceiptState::NotStarted, |r| r.state);
                Item::ToolResult(ToolResult {
                    content: interrupted_result(state),
                    call_id,
                    name,
                    is_error: true,
                })
            })
            .collect();
        store.append_items(session, last_turn, &results)?;
        history.extend(results);
    }
    Ok(AgentState {
        revision: store.current_revision(session)?,
        history,
        next_seq,
        last_turn,
        repair: None,
        spent: Default::default(),
        meter: Default::default(),
        mcp_tools: Vec::new(),
        // Loaded when a session opens: no boundary has passed in this process.
        mcp_opening: true,
        tools_checked: false,
        interrupted: false,
        pending_context: None,
        // Set when the agent is assembled (its snapshots are known then).
        bracket: crate::snapshot::CommandBracket::new(None, keel_types::Secrets::default()),
    })
}

/// Tool calls of the last assistant message that have no result after it.
fn unanswered_calls(history: &[Item]) -> Vec<(String, String)> {
    let Some(last_assistant) = history
        .iter()
        .rposition(|item| matches!(item, Item::Assistant(_)))
    else {
        return Vec::new();
    };
    let Item::Assistant(assistant) = &history[last_assistant] else {
        return Vec::new();
    };
    let mut pending: Vec<(String, String)> = assistant
        .tool_calls()
        .map(|call| (call.id.clone(), call.name.clone()))
        .collect();
    for item in &history[last_assistant + 1..] {
        if let Item::ToolResult(result) = item
            && let Some(position) = pending.iter().position(|(id, _)| *id == result.call_id)
        {
            pending.remove(position);
        }
    }
    pending
}

/// What the model is told about a call that was interrupted by a crash or a cancellation.
pub fn interrupted_result(state: ReceiptState) -> String {
    match state {
        ReceiptState::Unknown | ReceiptState::Started => "[outcome unknown: keel stopped while this tool was running. It was not run again; inspect its effects with read-only tools before repeating it.]".into(),
        ReceiptState::Cancelled => "[cancelled while it was running (Ctrl-C, SIGTERM or SIGHUP); its effects may be partial]".into(),
        ReceiptState::Pending | ReceiptState::NotStarted => "[not started: the turn ended before this tool ran]".into(),
        ReceiptState::Completed | ReceiptState::Failed | ReceiptState::Denied => format!("[{state}; its result was not recorded]"),
    }
}
