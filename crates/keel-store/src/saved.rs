//! What a rewind kept before it overwrote a file: the file's bytes as they were, so nothing a
//! person wrote is lost even where keel cannot tell who wrote it (a file that changed while
//! one of keel's commands ran: no kernel interface says which process wrote it).
//!
//! Invariants:
//! - A version is committed (its bytes as a content-addressed blob, and its row) before the
//!   rewind overwrites the file: a crash between the two loses nothing.
//! - Versions are never pruned while their session lives: checkpoints' pruning and a session's
//!   removal spare every blob a version names; they go with their session only.

use crate::checkpoints::put_blob;
use crate::{Store, StoreError, now_ms};
use rusqlite::params;

/// Version 6: the versions rewinds kept.
pub(crate) const SCHEMA_V6: &str = "
CREATE TABLE saved (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    n INTEGER NOT NULL,
    path TEXT NOT NULL,
    hash TEXT NOT NULL,
    turn INTEGER NOT NULL,
    saved_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, n)
);
";

/// A version of a file a rewind kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedVersion {
    /// Its number in the session (1, 2, …), in the order they were kept.
    pub number: u64,
    pub path: String,
    /// The blob holding its bytes.
    pub hash: String,
    /// The turn the rewind went back to.
    pub turn: u64,
    /// When it was kept (milliseconds since the epoch).
    pub saved_at_ms: i64,
}

impl Store {
    /// Keep `bytes` as the version of `path` a rewind to `turn` is about to overwrite.
    pub fn save_version(
        &self,
        session: &str,
        path: &str,
        bytes: &[u8],
        turn: u64,
    ) -> Result<SavedVersion, StoreError> {
        self.write(|transaction| {
            let hash = put_blob(transaction, bytes)?;
            let number: i64 = transaction.query_row(
                "SELECT COALESCE(MAX(n), 0) + 1 FROM saved WHERE session_id = ?1",
                [session],
                |row| row.get(0),
            )?;
            let saved_at_ms = now_ms();
            transaction.execute(
                "INSERT INTO saved (session_id, n, path, hash, turn, saved_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    session,
                    number,
                    path,
                    hash,
                    i64::try_from(turn).unwrap_or(i64::MAX),
                    saved_at_ms
                ],
            )?;
            Ok(SavedVersion {
                number: u64::try_from(number).unwrap_or(0),
                path: path.to_string(),
                hash,
                turn,
                saved_at_ms,
            })
        })
    }

    /// The versions rewinds of `session` kept, oldest first.
    pub fn saved_versions(&self, session: &str) -> Result<Vec<SavedVersion>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT n, path, hash, turn, saved_at FROM saved WHERE session_id = ?1 ORDER BY n",
        )?;
        let rows = statement.query_map([session], |row| {
            Ok(SavedVersion {
                number: u64::try_from(row.get::<_, i64>(0)?).unwrap_or(0),
                path: row.get(1)?,
                hash: row.get(2)?,
                turn: u64::try_from(row.get::<_, i64>(3)?).unwrap_or(0),
                saved_at_ms: row.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
