//! Fork: a new session that starts with another's history up to a turn.
//!
//! Invariants:
//! - One transaction: the new session exists with its whole inherited history and receipts,
//!   or not at all.
//! - The inherited items are a revision of the source as stored (the current one, or an
//!   earlier one that still holds turns a compaction since summarised), each with its turn, so
//!   the fork's requests begin with exactly the bytes the source sent (the provider's cache
//!   serves them); the context block comes along as it was, its date included.
//! - The receipts of the inherited calls come along as they were: facts about what ran, never
//!   a reason to run anything again. Nothing of the source changes.

use crate::sessions::{SessionInfo, append_in, put_receipt_in};
use crate::{Store, StoreError, now_ms};
use keel_types::Item;
use rusqlite::params;

impl Store {
    /// Start session `id` with `source`'s history (of `revision`, else the current one) and
    /// receipts of turns up to `up_to` (all when `None`).
    pub fn fork_session(
        &self,
        source: &str,
        id: &str,
        up_to: Option<u64>,
        revision: Option<u64>,
    ) -> Result<SessionInfo, StoreError> {
        let from = self.require_session(source)?;
        let keep = |turn: u64| up_to.is_none_or(|last| turn <= last);
        let stored = match revision {
            Some(revision) => self.items_of_revision(source, revision)?,
            None => self.items(source)?,
        };
        let mut items: Vec<(u64, Item)> = Vec::new();
        for stored in stored {
            if !keep(stored.turn) {
                continue;
            }
            let item = stored.item.map_err(|reason| StoreError::UnreadableItem {
                session: source.to_string(),
                revision: stored.revision,
                reason,
            })?;
            items.push((stored.turn, item));
        }
        let receipts: Vec<_> = self
            .receipts(source)?
            .into_iter()
            .filter(|receipt| keep(receipt.turn))
            .collect();
        let now = now_ms();
        self.write(|transaction| {
            transaction.execute(
                "INSERT INTO sessions (id, workspace, provider, model, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                params![id, from.workspace, from.provider, from.model, now],
            )?;
            for (turn, item) in &items {
                append_in(transaction, id, *turn, std::slice::from_ref(item))?;
            }
            for receipt in &receipts {
                put_receipt_in(transaction, id, receipt)?;
            }
            Ok(())
        })?;
        // A fork is a session of its own, even of a child session.
        Ok(SessionInfo {
            id: id.into(),
            created_at: now,
            updated_at: now,
            parent: None,
            agent: None,
            ..from
        })
    }
}
