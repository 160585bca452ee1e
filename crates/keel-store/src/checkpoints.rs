//! Checkpoints: what a file was before a file tool changed it, and what the call left there —
//! the undo records `rewind` restores from.
//!
//! Invariants:
//! - A pre-image is committed in the same transaction as the receipt that says the call
//!   started: there is no write without its undo record (a crash after the commit leaves the
//!   record; one before it leaves neither).
//! - Contents are stored once per distinct bytes (`blobs`, keyed by their SHA-256), so a
//!   file checkpointed in many turns costs its distinct versions only.
//! - What a call left (the hash of the content, or that there was none) is committed with its
//!   result: a later difference is someone else's edit, a conflict for `rewind`. A call a
//!   crash cut short has none recorded; `rewind` then judges from what it meant to write.
//! - A checkpoint a rewind restored (or found restored) is marked undone, so a second rewind
//!   does not take the restored file for a later edit.

use crate::sessions::{append_in, put_receipt_in, to_i64};
use crate::{Store, StoreError};
use keel_types::{Item, ToolReceipt};
use rusqlite::{OptionalExtension, Transaction, params};
use sha2::{Digest, Sha256};

/// Version 5: content-addressed blobs and pre-images with what their calls left.
pub(crate) const SCHEMA_V5: &str = "
CREATE TABLE blobs (
    hash TEXT PRIMARY KEY,
    bytes BLOB NOT NULL
);
CREATE TABLE checkpoints (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    path TEXT NOT NULL,
    state TEXT NOT NULL,
    hash TEXT,
    after_recorded INTEGER NOT NULL DEFAULT 0,
    after_hash TEXT,
    undone INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, seq, path)
);
";

/// What a file was before a call changed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Before {
    /// It did not exist.
    Absent,
    /// These bytes.
    Bytes(Vec<u8>),
    /// Too large (or unreadable) to keep: a rewind cannot restore it and says so.
    NotKept(String),
}

/// One pre-image to commit with a call's `started` receipt.
#[derive(Clone, Debug)]
pub struct PreImage {
    pub path: String,
    pub before: Before,
}

/// A pre-image as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub seq: u64,
    pub turn: u64,
    pub call_id: String,
    pub path: String,
    /// `absent`, `stored` (with `hash`) or why it was not kept.
    pub state: String,
    pub hash: Option<String>,
    /// What the call left: `None` not recorded (a crash cut it short), `Some(None)` nothing.
    pub after: Option<Option<String>>,
    /// A rewind restored it.
    pub undone: bool,
}

/// The SHA-256 of `bytes`, as lowercase hex (how blobs are named).
pub fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The bytes of the distinct contents `session`'s checkpoints hold.
fn session_bytes(connection: &rusqlite::Connection, session: &str) -> Result<u64, StoreError> {
    let total: i64 = connection.query_row(
        "SELECT COALESCE(SUM(LENGTH(bytes)), 0) FROM blobs WHERE hash IN \
         (SELECT hash FROM checkpoints WHERE session_id = ?1 AND hash IS NOT NULL)",
        [session],
        |row| row.get(0),
    )?;
    Ok(u64::try_from(total).unwrap_or(0))
}

/// Prune `session`'s oldest stored pre-images until `needed` more bytes fit in `max_bytes`;
/// a content no checkpoint holds any more is deleted.
fn make_room(
    transaction: &Transaction<'_>,
    session: &str,
    needed: u64,
    max_bytes: u64,
) -> Result<(), StoreError> {
    while session_bytes(transaction, session)? + needed > max_bytes {
        let oldest: Option<(i64, String, String)> = transaction
            .query_row(
                "SELECT seq, path, hash FROM checkpoints WHERE session_id = ?1 AND hash IS NOT \
                 NULL ORDER BY seq, path LIMIT 1",
                [session],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        let Some((seq, path, hash)) = oldest else {
            return Ok(());
        };
        transaction.execute(
            "UPDATE checkpoints SET hash = NULL, state = ?4 \
             WHERE session_id = ?1 AND seq = ?2 AND path = ?3",
            params![
                session,
                seq,
                path,
                format!("pruned: the session's checkpoints reached their {max_bytes} bytes")
            ],
        )?;
        transaction.execute(
            "DELETE FROM blobs WHERE hash = ?1 AND NOT EXISTS \
             (SELECT 1 FROM checkpoints WHERE hash = ?1) AND NOT EXISTS \
             (SELECT 1 FROM saved WHERE hash = ?1)",
            [hash],
        )?;
    }
    Ok(())
}

pub(crate) fn put_blob(transaction: &Transaction<'_>, bytes: &[u8]) -> Result<String, StoreError> {
    let hash = content_hash(bytes);
    transaction.execute(
        "INSERT OR IGNORE INTO blobs (hash, bytes) VALUES (?1, ?2)",
        params![hash, bytes],
    )?;
    Ok(hash)
}

impl Store {
    /// The receipt of a call that starts now, with what it may change as it was: one
    /// transaction.
    /// The session keeps at most `max_bytes` of distinct contents: older pre-images are
    /// pruned, oldest first, to make room (a rewind then names them as pruned).
    pub fn start_with_pre_images(
        &self,
        session: &str,
        receipt: &ToolReceipt,
        pre_images: &[PreImage],
        max_bytes: u64,
    ) -> Result<(), StoreError> {
        self.write(|transaction| {
            for image in pre_images {
                let (state, hash) = match &image.before {
                    Before::Absent => ("absent".to_string(), None),
                    Before::Bytes(bytes) if bytes.len() as u64 > max_bytes => (
                        format!("not kept: larger than the session's {max_bytes} bytes of checkpoints"),
                        None,
                    ),
                    Before::Bytes(bytes) => {
                        make_room(transaction, session, bytes.len() as u64, max_bytes)?;
                        ("stored".to_string(), Some(put_blob(transaction, bytes)?))
                    }
                    Before::NotKept(why) => (format!("not kept: {why}"), None),
                };
                transaction.execute(
                    "INSERT OR IGNORE INTO checkpoints (session_id, seq, turn, call_id, path, state, hash) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        session,
                        to_i64(receipt.seq),
                        to_i64(receipt.turn),
                        receipt.call_id,
                        image.path,
                        state,
                        hash
                    ],
                )?;
            }
            put_receipt_in(transaction, session, receipt)
        })
    }

    /// The session's pre-images, oldest first.
    pub fn checkpoints(&self, session: &str) -> Result<Vec<Checkpoint>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT seq, turn, call_id, path, state, hash, after_recorded, after_hash, undone \
             FROM checkpoints WHERE session_id = ?1 ORDER BY seq, path",
        )?;
        let rows = statement.query_map([session], |row| {
            Ok(Checkpoint {
                seq: u64::try_from(row.get::<_, i64>(0)?).unwrap_or(0),
                turn: u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
                call_id: row.get(2)?,
                path: row.get(3)?,
                state: row.get(4)?,
                hash: row.get(5)?,
                after: match row.get::<_, i64>(6)? {
                    0 => None,
                    _ => Some(row.get(7)?),
                },
                undone: row.get::<_, i64>(8)? != 0,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The bytes stored as `hash`.
    pub fn blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare("SELECT bytes FROM blobs WHERE hash = ?1")?;
        let mut rows = statement.query([hash])?;
        Ok(match rows.next()? {
            Some(row) => Some(row.get(0)?),
            None => None,
        })
    }

    /// The bytes of the distinct contents the session's checkpoints hold.
    pub fn checkpoint_bytes(&self, session: &str) -> Result<u64, StoreError> {
        session_bytes(&self.connection(), session)
    }

    /// The paths the call `seq` checkpointed.
    pub fn checkpointed_paths(&self, session: &str, seq: u64) -> Result<Vec<String>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT path FROM checkpoints WHERE session_id = ?1 AND seq = ?2 ORDER BY path",
        )?;
        let rows = statement.query_map(params![session, to_i64(seq)], |row| row.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Mark the checkpoints `seqs` of `path` restored by a rewind.
    pub fn mark_undone(&self, session: &str, path: &str, seqs: &[u64]) -> Result<(), StoreError> {
        self.write(|transaction| {
            for seq in seqs {
                transaction.execute(
                    "UPDATE checkpoints SET undone = 1 WHERE session_id = ?1 AND seq = ?2 AND path = ?3",
                    params![session, to_i64(*seq), path],
                )?;
            }
            Ok(())
        })
    }
}

impl Store {
    /// A tool result and its receipt's final state (`append_result`), with what the call left
    /// at each path it checkpointed: all in one transaction.
    pub fn append_result_after(
        &self,
        session: &str,
        turn: u64,
        item: &Item,
        receipt: &ToolReceipt,
        afters: &[(String, Option<String>)],
    ) -> Result<u64, StoreError> {
        self.write(|transaction| {
            let revisions = append_in(transaction, session, turn, std::slice::from_ref(item))?;
            put_receipt_in(transaction, session, receipt)?;
            record_after_in(transaction, session, receipt.seq, afters)?;
            Ok(revisions.first().copied().unwrap_or(0))
        })
    }
}

/// Record, in the result's transaction, what the call `seq` left at each path (`None`:
/// nothing there).
fn record_after_in(
    transaction: &Transaction<'_>,
    session: &str,
    seq: u64,
    afters: &[(String, Option<String>)],
) -> Result<(), StoreError> {
    for (path, hash) in afters {
        transaction.execute(
            "UPDATE checkpoints SET after_recorded = 1, after_hash = ?4 \
             WHERE session_id = ?1 AND seq = ?2 AND path = ?3",
            params![session, to_i64(seq), path, hash],
        )?;
    }
    Ok(())
}
