//! A history rewrite as a value, and the one place that commits it.
//!
//! keel rewrites a session's history in more than one way: compaction (a summary and a
//! verbatim tail), `/reload-context` (a new context block), and — next — rewind and fork.
//! Each *produces* a `Rewrite`: the new revision's items with their turns, why, and what it
//! announces. `commit` alone writes it, moves the session onto it and tells subscribers.
//!
//! The lesson this module holds: compaction used to write and announce its revision itself,
//! and a second way of rewriting would have copied that sequence (with its own order of
//! events and its own idea of what expires). A producer now returns a value and never commits;
//! it never imports the code that runs turns either (a summarising request goes through the
//! attempt function handed down to it). One committer means one order for everyone.
//!
//! Invariants:
//! - One store transaction writes the revision and names the revision it replaces: a crash
//!   before or during it leaves the old revision whole; a concurrent rewrite is refused.
//! - Receipts are never touched; no tool runs.
//! - Subscribers see `history/rewritten`, then the producer's own events, then
//!   `prefix/changed` (the next request's prefix is not the last one's), in that order.
//! - Pending recovery offers expire: they were made against the history replaced. A repaired
//!   prefix does not survive a rewrite (the new revision holds no repair).

use crate::agent::Agent;
use crate::agent_state::AgentState;
use crate::error::AgentError;
use keel_store::HistoryRewrite;
use keel_types::{EventBody, Item};

/// A history revision to commit, as its producer made it.
pub(crate) struct Rewrite {
    /// The new revision's items, each with the turn it belongs to.
    pub rows: Vec<(u64, Item)>,
    /// Stored with the revision (`threshold`, `manual`, `context_limit`,
    /// `instructions_changed`, …).
    pub reason: &'static str,
    /// The reason `history/rewritten` and `prefix/changed` give (`compaction`,
    /// `instructions_changed`, …).
    pub announced: &'static str,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// How many items of the old revision a summary stands for (0: none).
    pub replaced: u64,
    /// A kill point right after the transaction (for the crash tests).
    pub kill_point: Option<&'static str>,
}

/// Commit `rewrite` as the session's next revision; `also` gives the producer's own events
/// (from the new revision's number), announced between `history/rewritten` and
/// `prefix/changed`. `turn` is the turn the events belong to (none between turns).
pub(crate) fn commit(
    agent: &Agent,
    state: &mut AgentState,
    rewrite: Rewrite,
    turn: Option<u64>,
    also: impl FnOnce(u64) -> Vec<EventBody>,
) -> Result<u64, AgentError> {
    let revision = agent.services.store.rewrite_history(
        &agent.session.id,
        &HistoryRewrite {
            replaces: state.revision,
            items: &rewrite.rows,
            reason: rewrite.reason,
            tokens_before: rewrite.tokens_before,
            tokens_after: rewrite.tokens_after,
            replaced: rewrite.replaced,
        },
    )?;
    if let Some(point) = rewrite.kill_point {
        keel_types::kill_point::kill_point(point);
    }
    state.history = rewrite.rows.into_iter().map(|(_, item)| item).collect();
    state.revision = revision;
    state.repair = None;
    state.meter.set_estimate(rewrite.tokens_after);
    agent.emit(
        turn,
        EventBody::HistoryRewritten {
            revision,
            reason: rewrite.announced.into(),
        },
    );
    for body in also(revision) {
        agent.emit(turn, body);
    }
    agent.emit(
        turn,
        EventBody::PrefixChanged {
            reason: rewrite.announced.into(),
        },
    );
    crate::recovery::stored::expire_pending(agent, turn.unwrap_or(state.last_turn))?;
    Ok(revision)
}
