//! History revisions: the canonical history of a session is the items of its current revision;
//! a compaction writes the next revision (a summary and a verbatim tail) in one transaction.
//!
//! Invariants:
//! - Revision 1 exists implicitly; revision N > 1 exists once its row in `history_revisions`
//!   and its items are committed together, so a reader sees the old revision or the whole new
//!   one, never a mix (a crash mid-commit leaves the old one).
//! - A rewrite names the revision it replaces and is refused if the history moved meanwhile.
//! - Receipts, events and recovery records are not touched by a rewrite.

use crate::sessions::{CURRENT_REVISION_OF_1, StoredItem, append_in, to_i64, to_u64};
use crate::{Store, StoreError, now_ms};
use keel_types::Item;
use rusqlite::{Connection, params};

/// One revision of a session's history, as `keel session show` lists it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RevisionInfo {
    pub revision: u64,
    /// `start` for revision 1; otherwise why it was written (`threshold`, `manual`,
    /// `context_limit`).
    pub reason: String,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Items of the previous revision the summary stands for.
    pub replaced: u64,
    /// Items in this revision.
    pub items: u64,
    pub created_at: i64,
}

/// A new revision to write.
#[derive(Clone, Debug)]
pub struct HistoryRewrite<'a> {
    /// The revision this one replaces (the rewrite is refused if it is no longer current).
    pub replaces: u64,
    /// Each item with the turn it belongs to (a kept tail keeps its turns).
    pub items: &'a [(u64, Item)],
    pub reason: &'a str,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub replaced: u64,
}

fn read_items(
    connection: &Connection,
    session: &str,
    revision: Option<u64>,
) -> Result<Vec<StoredItem>, StoreError> {
    let wanted = match revision {
        Some(_) => "?2",
        None => CURRENT_REVISION_OF_1,
    };
    let mut statement = connection.prepare(&format!(
        "SELECT revision, turn, item FROM items WHERE session_id = ?1 AND history_revision = {wanted} \
         ORDER BY revision"
    ))?;
    let decode = |row: &rusqlite::Row<'_>| {
        let text: String = row.get(2)?;
        Ok(StoredItem {
            revision: to_u64(row.get(0)?),
            turn: to_u64(row.get(1)?),
            item: serde_json::from_str(&text).map_err(|error| error.to_string()),
        })
    };
    let rows = match revision {
        Some(revision) => statement
            .query_map(params![session, to_i64(revision)], decode)?
            .collect::<Result<Vec<_>, _>>()?,
        None => statement
            .query_map([session], decode)?
            .collect::<Result<Vec<_>, _>>()?,
    };
    Ok(rows)
}

fn current_revision_in(connection: &Connection, session: &str) -> Result<u64, StoreError> {
    let revision: i64 = connection.query_row(
        &format!("SELECT {CURRENT_REVISION_OF_1}"),
        [session],
        |row| row.get(0),
    )?;
    Ok(to_u64(revision))
}

impl Store {
    /// The session's canonical history: the items of its current revision, in order.
    pub fn items(&self, session: &str) -> Result<Vec<StoredItem>, StoreError> {
        read_items(&self.connection(), session, None)
    }

    /// The items of one revision (an earlier one stays readable after a compaction).
    pub fn items_of_revision(
        &self,
        session: &str,
        revision: u64,
    ) -> Result<Vec<StoredItem>, StoreError> {
        let latest = self.current_revision(session)?;
        if revision == 0 || revision > latest {
            return Err(StoreError::NoSuchRevision {
                session: session.to_string(),
                revision,
                latest,
            });
        }
        read_items(&self.connection(), session, Some(revision))
    }

    /// The newest revision that holds every turn before `turn` verbatim: none of its summaries
    /// was made at `turn` or later (a summary stands for the turns before its own). `None`
    /// when no revision does any more.
    pub fn revision_holding_before(
        &self,
        session: &str,
        turn: u64,
    ) -> Result<Option<u64>, StoreError> {
        let summarised = |rows: &[StoredItem]| {
            rows.iter()
                .any(|row| row.turn >= turn && matches!(row.item, Ok(keel_types::Item::Summary(_))))
        };
        for info in self.revisions(session)?.iter().rev() {
            if !summarised(&self.items_of_revision(session, info.revision)?) {
                return Ok(Some(info.revision));
            }
        }
        Ok(None)
    }

    /// The current history revision (1 until the first compaction).
    pub fn current_revision(&self, session: &str) -> Result<u64, StoreError> {
        current_revision_in(&self.connection(), session)
    }

    /// The highest turn number any stored event of the session carries (0 when none): a turn
    /// that wrote no history item (a failed compaction) still took its number.
    pub fn last_event_turn(&self, session: &str) -> Result<u64, StoreError> {
        let turn: i64 = self.connection().query_row(
            "SELECT coalesce(max(json_extract(event, '$.turn')), 0) FROM events WHERE session_id = ?1",
            [session],
            |row| row.get(0),
        )?;
        Ok(to_u64(turn))
    }

    /// Every revision of the session's history, oldest first.
    pub fn revisions(&self, session: &str) -> Result<Vec<RevisionInfo>, StoreError> {
        let connection = self.connection();
        let mut counting = connection.prepare(
            "SELECT history_revision, count(*) FROM items WHERE session_id = ?1 \
             GROUP BY history_revision",
        )?;
        let counts: std::collections::BTreeMap<u64, u64> = counting
            .query_map([session], |row| {
                Ok((to_u64(row.get(0)?), to_u64(row.get(1)?)))
            })?
            .collect::<Result<_, _>>()?;
        let count_of = |revision: u64| counts.get(&revision).copied().unwrap_or(0);
        let created: i64 = connection
            .query_row(
                "SELECT created_at FROM sessions WHERE id = ?1",
                [session],
                |row| row.get(0),
            )
            .map_err(|_| StoreError::NoSuchSession(session.to_string()))?;
        let mut revisions = vec![RevisionInfo {
            revision: 1,
            reason: "start".into(),
            tokens_before: 0,
            tokens_after: 0,
            replaced: 0,
            items: count_of(1),
            created_at: created,
        }];
        let mut statement = connection.prepare(
            "SELECT revision, reason, tokens_before, tokens_after, replaced, created_at \
             FROM history_revisions WHERE session_id = ?1 ORDER BY revision",
        )?;
        let rows = statement
            .query_map([session], |row| {
                Ok(RevisionInfo {
                    revision: to_u64(row.get(0)?),
                    reason: row.get(1)?,
                    tokens_before: to_u64(row.get(2)?),
                    tokens_after: to_u64(row.get(3)?),
                    replaced: to_u64(row.get(4)?),
                    items: 0,
                    created_at: row.get(5)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        for mut info in rows {
            info.items = count_of(info.revision);
            revisions.push(info);
        }
        Ok(revisions)
    }

    /// Write the next history revision in one transaction; returns its number. Refused (and
    /// nothing written) when `rewrite.replaces` is no longer the current revision.
    pub fn rewrite_history(
        &self,
        session: &str,
        rewrite: &HistoryRewrite<'_>,
    ) -> Result<u64, StoreError> {
        self.write(|transaction| {
            let current = current_revision_in(transaction, session)?;
            if current != rewrite.replaces {
                return Err(StoreError::HistoryMoved {
                    session: session.to_string(),
                    expected: rewrite.replaces,
                    found: current,
                });
            }
            let next = current + 1;
            transaction.execute(
                "INSERT INTO history_revisions \
                 (session_id, revision, reason, tokens_before, tokens_after, replaced, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    session,
                    to_i64(next),
                    rewrite.reason,
                    to_i64(rewrite.tokens_before),
                    to_i64(rewrite.tokens_after),
                    to_i64(rewrite.replaced),
                    now_ms()
                ],
            )?;
            // The items join the revision just inserted (the current one from now on).
            for (turn, item) in rewrite.items {
                append_in(transaction, session, *turn, std::slice::from_ref(item))?;
            }
            keel_types::kill_point::kill_point("compaction_commit");
            Ok(next)
        })
    }
}
