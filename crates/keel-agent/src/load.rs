//! Loading a session: settle what a crash left behind, then rebuild the in-memory state.
//!
//! Invariants:
//! - Nothing is re-run: a receipt left `started` becomes `unknown`, one left `pending`
//!   becomes `not_started`; the command a `started` call left running is stopped
//!   (`orphan_processes`), never resumed.
//! - Every tool call of the last assistant message gets a result, so the next request is
//!   well-formed; a synthesized result states the receipt's state and is appended (history
//!   stays append-only).
//! - A `task` call left without a result settles its child session the same way (its
//!   receipts, its leftovers, its unanswered calls), and its own result names the child and
//!   lists the child's receipts by state: keel never starts that child again — only a new
//!   `task` call starts one. A child another live process holds is left as it is, and said.

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
    let settled = settle(store, session)?;
    Ok(AgentState {
        revision: store.current_revision(session)?,
        history: settled.history,
        next_seq: settled.next_seq,
        last_turn: settled.last_turn,
        repair: None,
        spent: Default::default(),
        meter: Default::default(),
        mcp_tools: Vec::new(),
        // Loaded when a session opens: no boundary has passed in this process.
        mcp_opening: true,
        tools_checked: false,
        interrupted: false,
        pending_context: None,
        skills_note: None,
        // Set when the agent is assembled (its snapshots are known then).
        bracket: crate::snapshot::CommandBracket::new(None, keel_types::Secrets::default()),
        held_answer: None,
        hold_answer: false,
        replies: 0,
        budget_stop: None,
    })
}

/// A session as a crash left it, settled (see the module invariants).
struct Settled {
    history: Vec<Item>,
    last_turn: u64,
    next_seq: u64,
}

fn settle(store: &Store, session: &str) -> Result<Settled, AgentError> {
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
    forget_unstarted_children(store, session, &receipts)?;
    let next_seq = receipts.iter().map(|r| r.seq).max().unwrap_or(0) + 1;
    let unanswered = unanswered_calls(&history);
    if !unanswered.is_empty() {
        let results: Vec<Item> = unanswered
            .into_iter()
            .map(|(call_id, name)| {
                let receipt = receipts
                    .iter()
                    .rev()
                    .find(|r| r.call_id == call_id && r.tool == name);
                let state = receipt.map_or(ReceiptState::NotStarted, |r| r.state);
                let content = match receipt.and_then(|r| r.child_session.as_deref()) {
                    Some(child) => settle_child(store, session, child),
                    None => interrupted_result(state),
                };
                Ok(Item::ToolResult(ToolResult {
                    content,
                    call_id,
                    name,
                    is_error: true,
                }))
            })
            .collect::<Result<_, AgentError>>()?;
        store.append_items(session, last_turn, &results)?;
        history.extend(results);
    }
    Ok(Settled {
        history,
        last_turn,
        next_seq,
    })
}

/// Remove the child sessions of `parent` that no receipt names and that hold nothing: keel
/// stopped between making one and writing its `task` receipt `started`, so nothing ran in it
/// (its call is answered `not_started`). One a live process holds is left alone.
fn forget_unstarted_children(
    store: &Store,
    parent: &str,
    receipts: &[keel_types::ToolReceipt],
) -> Result<(), AgentError> {
    for child in store.children(parent)? {
        let named = receipts
            .iter()
            .any(|receipt| receipt.child_session.as_deref() == Some(child.id.as_str()));
        if !named && store.items(&child.id)?.is_empty() && !store.lease_is_held(&child.id)? {
            store.remove_session(&child.id)?;
        }
    }
    Ok(())
}

/// Settle the child session a `task` call of `parent` left without a result; what the call's
/// result says: the child, and its receipts by state. Only `parent`'s own child is settled,
/// and only when no live process (this one included) holds it; a child that cannot be read is
/// said, never a reason the parent cannot open.
fn settle_child(store: &Store, parent: &str, child: &str) -> String {
    let not_again = format!(
        "It was not started again: read what it did (`keel session show {child}`) before you \
         delegate the work again."
    );
    let own_child =
        matches!(store.session(child), Ok(Some(info)) if info.parent.as_deref() == Some(parent));
    if !own_child {
        return format!(
            "[outcome unknown: the subagent's session {child} is not this session's child. {not_again}]"
        );
    }
    let settled = match store.lease_is_held(child) {
        Ok(true) => Err(
            "its session is open in a keel that still runs: it may still be working".to_string(),
        ),
        Ok(false) => store
            .acquire_lease(child, "keel (settling a subagent)")
            .map_err(|error| error.to_string())
            .and_then(|lease| {
                let settled = settle(store, child).map_err(|error| error.to_string());
                drop(lease);
                settled
            }),
        Err(error) => Err(error.to_string()),
    };
    if let Err(why) = settled {
        return format!(
            "[outcome unknown: the subagent in session {child} was not settled: {why}. {not_again}]"
        );
    }
    let receipts = match store.receipts(child) {
        Ok(receipts) => receipts,
        Err(error) => {
            return format!(
                "[outcome unknown: the subagent's session {child} cannot be read: {error}. {not_again}]"
            );
        }
    };
    // By state, each tool counted: bounded whatever the child did.
    let said = crate::task_report::tools_by_state(&receipts);
    format!(
        "[outcome unknown: the subagent was interrupted — keel stopped while it ran, in its \
         session {child}. Its tool calls — {said}. {not_again}]"
    )
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
