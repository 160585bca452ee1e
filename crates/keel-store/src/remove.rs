//! Removing a session: its history, receipts, events, records, checkpoints, jobs — everything
//! the store holds for it — in one transaction, while no live process holds it; its child
//! sessions (a subagent's) go first, each the same way.
//!
//! Invariants:
//! - Refused while a live process holds the session's lease (it is taken first, so nothing
//!   opens the session while it goes).
//! - All or nothing: one transaction deletes every row of the session; content blobs no other
//!   checkpoint names go with it.

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
    /// Remove `session` and all it holds, its child sessions first; refused while a live
    /// process holds it or one of them.
    pub fn remove_session(&self, session: &str) -> Result<(), StoreError> {
        self.require_session(session)?;
        for child in self.children(session)? {
            self.remove_session(&child.id)?;
        }
        let lease = self.acquire_lease(session, "keel session rm")?;
        self.write(|transaction| {
            for table in SESSION_TABLES {
                transaction.execute(
                    &format!("DELETE FROM {table} WHERE session_id = ?1"),
                    [session],
                )?;
            }
            transaction.execute(
                "DELETE FROM blobs WHERE hash NOT IN \
                 (SELECT hash FROM checkpoints WHERE hash IS NOT NULL) AND hash NOT IN \
                 (SELECT hash FROM saved)",
                [],
            )?;
            transaction.execute("DELETE FROM sessions WHERE id = ?1", [session])?;
            transaction.execute("DELETE FROM leases WHERE session_id = ?1", [session])?;
            Ok(())
        })?;
        // Its row is gone already: releasing it changes nothing.
        drop(lease);
        Ok(())
    }
}
