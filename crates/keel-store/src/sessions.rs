//! Sessions, their canonical history, receipts, events and recovery records.
//!
//! Invariants:
//! - Items are appended with the next item number (the `revision` column) inside the writing
//!   transaction, so numbers are gap-free and never reused, and they join the session's
//!   current history revision (`history`).
//! - An item that cannot be decoded is returned as such (with its revision), never dropped, so
//!   a session with a damaged row stays loadable and the damage stays visible.
//! - Recovery records are stored as raw JSON text and returned byte for byte.

use crate::{Store, StoreError, now_ms};
use keel_types::{Event, Item, ReceiptState, ToolReceipt};
use rusqlite::{OptionalExtension, Transaction, params};

/// SQL for the current history revision of the session bound to `?1`.
pub(crate) const CURRENT_REVISION_OF_1: &str =
    "(SELECT coalesce(max(revision), 1) FROM history_revisions WHERE session_id = ?1)";

/// A session as a list shows it: what it is, how far it went, and what it was about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionOverview {
    pub info: SessionInfo,
    /// Its highest turn number (0 before its first turn).
    pub turns: u64,
    /// The first line of the first thing the user typed (at most [`TITLE_CHARS`] characters,
    /// with `…` when cut); empty before the first prompt. Raw text: each surface escapes it.
    pub title: String,
    /// The model ever answered in it (an assistant item in any revision of its history).
    pub answered: bool,
    /// It holds a recovery record (an offer to go on, in any state).
    pub has_recovery: bool,
}

impl SessionOverview {
    /// Whether a list of sessions shows it: one nobody typed into (or whose turns were all
    /// rewound away), one that failed before any answer and holds no offer to go on, and a
    /// subagent's child session are left out (they stay until pruned: `keel session show`
    /// still finds them).
    pub fn listed(&self) -> bool {
        self.info.parent.is_none() && self.turns > 0 && (self.answered || self.has_recovery)
    }

    /// The session as `keel sessions --json` and `GET /api/sessions` list it.
    pub fn to_json(&self) -> serde_json::Value {
        let info = &self.info;
        serde_json::json!({
            "id": info.id, "workspace": info.workspace,
            "model": format!("{}/{}", info.provider, info.model), "provider": info.provider,
            "created_at": info.created_at, "updated_at": info.updated_at,
            "turns": self.turns, "title": self.title,
            "parent": info.parent, "agent": info.agent,
        })
    }
}

/// The longest title a session list shows.
pub const TITLE_CHARS: usize = 60;

/// The first line of what the person (or a subagent's parent) wrote in `text` — keel's notes
/// before it left out — cut to [`TITLE_CHARS`] characters with `…`.
fn title_of(text: &str) -> String {
    let line = keel_types::person_text(text)
        .trim()
        .lines()
        .next()
        .unwrap_or("")
        .trim();
    if line.chars().count() <= TITLE_CHARS {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(TITLE_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SessionInfo {
    pub id: String,
    pub workspace: String,
    pub provider: String,
    pub model: String,
    pub created_at: i64,
    pub updated_at: i64,
    /// The session whose `task` call started this one (a subagent's child session).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The agent a child session runs (`explore`, a custom one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// One history row: the item, or why it could not be decoded.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredItem {
    pub revision: u64,
    pub turn: u64,
    pub item: Result<Item, String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StoredEvent {
    pub seq: u64,
    pub event: Event,
}

fn session_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionInfo> {
    Ok(SessionInfo {
        id: row.get(0)?,
        workspace: row.get(1)?,
        provider: row.get(2)?,
        model: row.get(3)?,
        created_at: row.get(4)?,
        updated_at: row.get(5)?,
        parent: row.get(6)?,
        agent: row.get(7)?,
    })
}

const SESSION_COLUMNS: &str =
    "id, workspace, provider, model, created_at, updated_at, parent, agent";

pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// One side of a finished `task` (`Store::commit_task`): the items to append to a session at
/// a turn, and the receipt that settles with them.
pub struct TaskEnd<'a> {
    pub session: &'a str,
    pub turn: u64,
    pub items: &'a [Item],
    pub receipt: Option<&'a ToolReceipt>,
}

impl Store {
    pub fn create_session(
        &self,
        id: &str,
        workspace: &str,
        provider: &str,
        model: &str,
    ) -> Result<SessionInfo, StoreError> {
        let now = now_ms();
        self.write(|transaction| {
            transaction.execute(
                "INSERT INTO sessions (id, workspace, provider, model, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                params![id, workspace, provider, model, now],
            )?;
            Ok(())
        })?;
        Ok(SessionInfo {
            id: id.into(),
            workspace: workspace.into(),
            provider: provider.into(),
            model: model.into(),
            created_at: now,
            updated_at: now,
            parent: None,
            agent: None,
        })
    }

    /// A child session of `child.parent`, running `child.agent`; `agent_settings` (the agent's
    /// tools and mode, as its engine writes them) is kept to be applied again on resume.
    pub fn create_child_session(
        &self,
        child: &SessionInfo,
        agent_settings: &str,
    ) -> Result<(), StoreError> {
        let (Some(parent), Some(agent)) = (&child.parent, &child.agent) else {
            return Err(StoreError::NotAChild(child.id.clone()));
        };
        self.require_session(parent)?;
        self.write(|transaction| {
            transaction.execute(
                "INSERT INTO sessions (id, workspace, provider, model, created_at, updated_at, \
                 parent, agent, agent_settings) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8)",
                params![
                    child.id,
                    child.workspace,
                    child.provider,
                    child.model,
                    child.created_at,
                    parent,
                    agent,
                    agent_settings
                ],
            )?;
            Ok(())
        })
    }

    /// The agent settings a child session was created with (`None` for any other session).
    pub fn agent_settings(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .connection()
            .query_row(
                "SELECT agent_settings FROM sessions WHERE id = ?1",
                [id],
                |row| row.get(0),
            )
            .optional()?
            .flatten())
    }

    /// The digest of the built-in tool specs the session's requests last carried (`None`
    /// before its first turn, or for a session a keel before this one made).
    pub fn tools_digest(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .connection()
            .query_row(
                "SELECT tools_digest FROM sessions WHERE id = ?1",
                [id],
                |row| row.get(0),
            )
            .optional()?
            .flatten())
    }

    pub fn set_tools_digest(&self, id: &str, digest: &str) -> Result<(), StoreError> {
        self.write(|transaction| {
            transaction.execute(
                "UPDATE sessions SET tools_digest = ?2 WHERE id = ?1",
                params![id, digest],
            )?;
            Ok(())
        })
    }

    /// The child sessions `parent` started, oldest first.
    pub fn children(&self, parent: &str) -> Result<Vec<SessionInfo>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE parent = ?1 ORDER BY created_at, rowid"
        ))?;
        let rows = statement.query_map([parent], session_from_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// A finished `task`, committed at once: the child's last items (its final answer) and the
    /// parent's tool result with its receipt, in one transaction — a crash leaves both or
    /// neither, never an answer on disk that the parent cannot see.
    pub fn commit_task(&self, child: TaskEnd<'_>, parent: TaskEnd<'_>) -> Result<(), StoreError> {
        self.write(|transaction| {
            for end in [&child, &parent] {
                append_in(transaction, end.session, end.turn, end.items)?;
                if let Some(receipt) = end.receipt {
                    put_receipt_in(transaction, end.session, receipt)?;
                }
            }
            Ok(())
        })
    }

    pub fn session(&self, id: &str) -> Result<Option<SessionInfo>, StoreError> {
        Ok(self
            .connection()
            .query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"),
                [id],
                session_from_row,
            )
            .optional()?)
    }

    pub fn require_session(&self, id: &str) -> Result<SessionInfo, StoreError> {
        self.session(id)?
            .ok_or_else(|| StoreError::NoSuchSession(id.to_string()))
    }

    /// Sessions of `workspace`, most recently updated first.
    pub fn sessions_for_workspace(&self, workspace: &str) -> Result<Vec<SessionInfo>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE workspace = ?1 \
             ORDER BY updated_at DESC, rowid DESC"
        ))?;
        let rows = statement.query_map([workspace], session_from_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The sessions of `workspace`, newest first, each with its turns and title.
    pub fn session_overviews(&self, workspace: &str) -> Result<Vec<SessionOverview>, StoreError> {
        let sessions = self.sessions_for_workspace(workspace)?;
        let connection = self.connection();
        // The current history's newest item but keel's own context block (turns only grow with
        // the item number): a rewind's new revision leaves the later turns behind, and one back
        // to before the first turn leaves none.
        let mut turns = connection.prepare(&format!(
            "SELECT turn FROM items WHERE session_id = ?1 AND history_revision = \
             {CURRENT_REVISION_OF_1} \
             AND (NOT json_valid(item) OR json_extract(item, '$.role') != 'context') \
             ORDER BY revision DESC LIMIT 1"
        ))?;
        // The first thing typed that the current history holds, else (a compaction summed it
        // up) the first ever typed. A row that is not JSON is passed over, never an error.
        // (Both walk the items in key order and stop at the first match.)
        let user_row = "json_valid(item) AND json_extract(item, '$.role') = 'user'";
        let mut first_user_now = connection.prepare(&format!(
            "SELECT json_extract(item, '$.text') FROM items WHERE session_id = ?1 \
             AND history_revision = {CURRENT_REVISION_OF_1} AND {user_row} \
             ORDER BY revision LIMIT 1"
        ))?;
        let mut answered = connection.prepare(
            "SELECT 1 FROM items WHERE session_id = ?1 AND json_valid(item) \
             AND json_extract(item, '$.role') = 'assistant' LIMIT 1",
        )?;
        let mut has_recovery =
            connection.prepare("SELECT 1 FROM recovery_records WHERE session_id = ?1 LIMIT 1")?;
        let mut first_user_ever = connection.prepare(&format!(
            "SELECT json_extract(item, '$.text') FROM items WHERE session_id = ?1 \
             AND {user_row} ORDER BY revision LIMIT 1"
        ))?;
        let mut overviews = Vec::with_capacity(sessions.len());
        for info in sessions {
            let turn_count: i64 = turns
                .query_row([&info.id], |row| row.get(0))
                .optional()?
                .unwrap_or(0);
            let mut first: Option<Option<String>> = first_user_now
                .query_row([&info.id], |row| row.get(0))
                .optional()?;
            if first.is_none() {
                first = first_user_ever
                    .query_row([&info.id], |row| row.get(0))
                    .optional()?;
            }
            let answered = answered.exists([&info.id])?;
            let has_recovery = has_recovery.exists([&info.id])?;
            overviews.push(SessionOverview {
                answered,
                has_recovery,
                turns: to_u64(turn_count),
                title: title_of(&first.flatten().unwrap_or_default()),
                info,
            });
        }
        Ok(overviews)
    }

    pub fn set_session_model(
        &self,
        id: &str,
        provider: &str,
        model: &str,
    ) -> Result<(), StoreError> {
        self.write(|transaction| {
            transaction.execute(
                "UPDATE sessions SET provider = ?2, model = ?3, updated_at = ?4 WHERE id = ?1",
                params![id, provider, model, now_ms()],
            )?;
            Ok(())
        })
    }

    /// Append items (one transaction); returns their revisions.
    pub fn append_items(
        &self,
        session: &str,
        turn: u64,
        items: &[Item],
    ) -> Result<Vec<u64>, StoreError> {
        self.write(|transaction| append_in(transaction, session, turn, items))
    }

    /// The write-ahead step: the assistant message and `pending` receipts for its tool calls,
    /// in one transaction.
    pub fn append_with_receipts(
        &self,
        session: &str,
        turn: u64,
        item: &Item,
        receipts: &[ToolReceipt],
    ) -> Result<u64, StoreError> {
        self.write(|transaction| {
            let revisions = append_in(transaction, session, turn, std::slice::from_ref(item))?;
            for receipt in receipts {
                put_receipt_in(transaction, session, receipt)?;
            }
            Ok(revisions.first().copied().unwrap_or(0))
        })
    }

    /// Insert or update a receipt (keyed by session and `seq`).
    pub fn put_receipt(&self, session: &str, receipt: &ToolReceipt) -> Result<(), StoreError> {
        self.write(|transaction| put_receipt_in(transaction, session, receipt))
    }

    /// A tool result and its receipt's final state, in one transaction.
    pub fn append_result(
        &self,
        session: &str,
        turn: u64,
        item: &Item,
        receipt: &ToolReceipt,
    ) -> Result<u64, StoreError> {
        self.write(|transaction| {
            let revisions = append_in(transaction, session, turn, std::slice::from_ref(item))?;
            put_receipt_in(transaction, session, receipt)?;
            Ok(revisions.first().copied().unwrap_or(0))
        })
    }

    pub fn receipts(&self, session: &str) -> Result<Vec<ToolReceipt>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT call_id, tool, args_digest, state, turn, seq, summary, sandbox, child_session \
             FROM receipts WHERE session_id = ?1 ORDER BY seq",
        )?;
        let rows = statement.query_map([session], |row| {
            let state: String = row.get(3)?;
            Ok(ToolReceipt {
                call_id: row.get(0)?,
                tool: row.get(1)?,
                args_digest: row.get(2)?,
                // An unreadable state is treated as unknown: never as something safe to re-run.
                state: ReceiptState::parse(&state).unwrap_or(ReceiptState::Unknown),
                turn: to_u64(row.get(4)?),
                seq: to_u64(row.get(5)?),
                summary: row.get(6)?,
                sandbox: row.get(7)?,
                child_session: row.get(8)?,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// On load: receipts left `started` by a process that died become `unknown`; receipts left
    /// `pending` become `not_started`. Returns how many changed.
    pub fn settle_interrupted_receipts(&self, session: &str) -> Result<usize, StoreError> {
        self.write(|transaction| {
            let now = now_ms();
            let unknown = transaction.execute(
                "UPDATE receipts SET state = 'unknown', updated_at = ?2 \
                 WHERE session_id = ?1 AND state = 'started'",
                params![session, now],
            )?;
            let not_started = transaction.execute(
                "UPDATE receipts SET state = 'not_started', updated_at = ?2 \
                 WHERE session_id = ?1 AND state = 'pending'",
                params![session, now],
            )?;
            Ok(unknown + not_started)
        })
    }

    pub fn append_event(&self, event: &Event) -> Result<u64, StoreError> {
        let text = serde_json::to_string(event)?;
        // The event index is derived data: made durable by the next write of history.
        self.write_deferred(|transaction| {
            let next: i64 = transaction.query_row(
                "SELECT coalesce(max(seq), 0) + 1 FROM events WHERE session_id = ?1",
                [&event.session_id],
                |row| row.get(0),
            )?;
            transaction.execute(
                "INSERT INTO events (session_id, seq, event) VALUES (?1, ?2, ?3)",
                params![event.session_id, next, text],
            )?;
            Ok(to_u64(next))
        })
    }

    /// The highest event sequence number of `session` (0 when it has none).
    pub fn last_event_id(&self, session: &str) -> Result<u64, StoreError> {
        let last: i64 = self.connection().query_row(
            "SELECT coalesce(max(seq), 0) FROM events WHERE session_id = ?1",
            [session],
            |row| row.get(0),
        )?;
        Ok(to_u64(last))
    }

    /// Events with a sequence number above `after`, in order (undecodable rows are skipped).
    pub fn events_after(&self, session: &str, after: u64) -> Result<Vec<StoredEvent>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT seq, event FROM events WHERE session_id = ?1 AND seq > ?2 ORDER BY seq",
        )?;
        let rows = statement.query_map(params![session, to_i64(after)], |row| {
            Ok((to_u64(row.get(0)?), row.get::<_, String>(1)?))
        })?;
        let mut events = Vec::new();
        for row in rows {
            let (seq, text) = row?;
            if let Ok(event) = serde_json::from_str(&text) {
                let mut event: Event = event;
                event.id = Some(seq);
                events.push(StoredEvent { seq, event });
            }
        }
        Ok(events)
    }

    /// Store a recovery record's raw JSON under its id (insert or replace).
    pub fn put_recovery_record(
        &self,
        session: &str,
        id: &str,
        raw: &str,
    ) -> Result<(), StoreError> {
        self.write(|transaction| {
            let now = now_ms();
            transaction.execute(
                "INSERT INTO recovery_records (session_id, id, record, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?4) \
                 ON CONFLICT (session_id, id) DO UPDATE SET record = ?3, updated_at = ?4",
                params![session, id, raw, now],
            )?;
            Ok(())
        })
    }

    /// Recovery records of a session as raw JSON, oldest first.
    pub fn recovery_records(&self, session: &str) -> Result<Vec<(String, String)>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT id, record FROM recovery_records WHERE session_id = ?1 ORDER BY created_at, rowid",
        )?;
        let rows = statement.query_map([session], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Run `work` in one immediate transaction and commit it.
    pub(crate) fn write<T>(
        &self,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut connection = self.connection();
        // Set at every write, so no deferred write that failed or panicked half-way can leave
        // a later one without its fsync.
        connection.execute_batch("PRAGMA synchronous = FULL")?;
        let transaction =
            connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let value = work(&transaction)?;
        transaction.commit()?;
        Ok(value)
    }

    /// `write` without the commit's fsync, for data whose loss in a power failure is tolerable:
    /// the event index (a power failure may take the last events, with the usage and failure
    /// notes only they hold, and their ids may then be given again) and leases (void after a
    /// restart anyway). Nothing is lost to a crash of keel itself (the OS has it), and the next
    /// `write`'s fsync of the log makes it durable with everything before it.
    pub(crate) fn write_deferred<T>(
        &self,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut connection = self.connection();
        connection.execute_batch("PRAGMA synchronous = NORMAL")?;
        let written = (|| -> Result<T, StoreError> {
            let transaction =
                connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let value = work(&transaction)?;
            transaction.commit()?;
            Ok(value)
        })();
        // Every other write stays synchronous, whatever happened above.
        let restored = connection.execute_batch("PRAGMA synchronous = FULL");
        let value = written?;
        restored?;
        Ok(value)
    }
}

pub(crate) fn append_in(
    transaction: &Transaction<'_>,
    session: &str,
    turn: u64,
    items: &[Item],
) -> Result<Vec<u64>, StoreError> {
    let first: i64 = transaction.query_row(
        "SELECT coalesce(max(revision), 0) + 1 FROM items WHERE session_id = ?1",
        [session],
        |row| row.get(0),
    )?;
    let now = now_ms();
    let mut revisions = Vec::with_capacity(items.len());
    for (revision, item) in (first..).zip(items) {
        transaction.execute(
            &format!(
                "INSERT INTO items (session_id, revision, turn, item, created_at, history_revision) \
                 VALUES (?1, ?2, ?3, ?4, ?5, {})",
                CURRENT_REVISION_OF_1
            ),
            params![session, revision, to_i64(turn), serde_json::to_string(item)?, now],
        )?;
        revisions.push(to_u64(revision));
    }
    let updated = transaction.execute(
        "UPDATE sessions SET updated_at = ?2 WHERE id = ?1",
        params![session, now],
    )?;
    if updated == 0 {
        return Err(StoreError::NoSuchSession(session.to_string()));
    }
    Ok(revisions)
}

pub(crate) fn put_receipt_in(
    transaction: &Transaction<'_>,
    session: &str,
    receipt: &ToolReceipt,
) -> Result<(), StoreError> {
    transaction.execute(
        "INSERT INTO receipts (session_id, seq, call_id, tool, args_digest, state, turn, summary, updated_at, sandbox, child_session) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT (session_id, seq) DO UPDATE SET state = ?6, summary = ?8, updated_at = ?9, \
         sandbox = COALESCE(?10, sandbox), child_session = COALESCE(?11, child_session)",
        params![
            session,
            to_i64(receipt.seq),
            receipt.call_id,
            receipt.tool,
            receipt.args_digest,
            receipt.state.as_str(),
            to_i64(receipt.turn),
            receipt.summary,
            now_ms(),
            receipt.sandbox,
            receipt.child_session
        ],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{TITLE_CHARS, title_of};

    #[test]
    fn a_title_is_the_first_typed_line_cut_with_an_ellipsis() {
        assert_eq!(
            title_of("\n  fix the loop  \nand then the tests"),
            "fix the loop"
        );
        let long = "x".repeat(TITLE_CHARS + 5);
        let cut = title_of(&long);
        assert_eq!(cut.chars().count(), TITLE_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(title_of(&"é".repeat(TITLE_CHARS)), "é".repeat(TITLE_CHARS));
        assert_eq!(title_of(""), "");
        // keel's notes before the prompt are not the title.
        assert_eq!(
            title_of("[keel: you are the `explore` subagent.]\n\nTask: find it\n\nmore"),
            "Task: find it"
        );
    }
}
