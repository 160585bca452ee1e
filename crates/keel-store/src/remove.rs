//! Removing a session: its history, receipts, events, records, checkpoints, jobs — everything
//! the store holds for it — in one transaction, while no live process holds it; its child
//! sessions (a subagent's) with it, in the same transaction.
//!
//! Invariants:
//! - Refused while a live process holds the session's lease or a child's (all are taken
//!   first, so nothing opens one while they go, and nothing is removed when one is held).
//! - All or nothing: one transaction deletes every row of the session and its children; content
//!   blobs no other checkpoint names go with them.

use crate::{Store, StoreError};

/// The tables that hold a session's rows, by `session_id`.
const SESSION_TABLES: &[&str] = &[
    "items",
    "receipts",
    "events",
    "recovery_records",
    "history_revisions",
    "tool_processes",
    "checkpoints",
    "saved",
    "jobs",
];

impl Store {
    /// Remove `session` and all it holds, with its child sessions (a subagent's): every lease
    /// is taken first (refused, nothing removed, while a live process holds one), then one
    /// transaction deletes them all. The ids removed, the session's own first.
    pub fn remove_session(&self, session: &str) -> Result<Vec<String>, StoreError> {
        self.require_session(session)?;
        let mut ids = vec![session.to_string()];
        ids.extend(self.children(session)?.into_iter().map(|child| child.id));
        let mut leases = Vec::with_capacity(ids.len());
        for id in &ids {
            leases.push(self.acquire_lease(id, "keel session rm")?);
        }
        self.write(|transaction| {
            for id in &ids {
                for table in SESSION_TABLES {
                    transaction
                        .execute(&format!("DELETE FROM {table} WHERE session_id = ?1"), [id])?;
                }
                transaction.execute("DELETE FROM sessions WHERE id = ?1", [id])?;
                transaction.execute("DELETE FROM leases WHERE session_id = ?1", [id])?;
            }
            transaction.execute(
                "DELETE FROM blobs WHERE hash NOT IN \
                 (SELECT hash FROM checkpoints WHERE hash IS NOT NULL) AND hash NOT IN \
                 (SELECT hash FROM saved)",
                [],
            )?;
            Ok(())
        })?;
        // Their rows are gone already: releasing them changes nothing.
        drop(leases);
        // And what their background jobs printed (keel-agent's spools beside the store).
        if let Some(state) = self.path().parent() {
            for id in &ids {
                let _ = std::fs::remove_dir_all(state.join("jobs").join(id));
            }
        }
        Ok(ids)
    }
}
