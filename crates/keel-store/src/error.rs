//! Store errors.
//!
//! Invariant: every message names the database file or the session concerned and says what to
//! do; none carries a secret (the store never holds one).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the state database {path} is corrupt or not a keel database ({detail}); it was left \
         untouched: move it away to start fresh"
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "the state database {path} has schema version {found}, newer than this keel knows \
         ({known}); it was left untouched: upgrade keel"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error(
        "the state database {path} stayed locked by another keel process for {waited_secs} s; \
         try again when it has finished"
    )]
    Busy { path: PathBuf, waited_secs: u64 },
    #[error("session {0} does not exist")]
    NoSuchSession(String),
    /// A child session must name its parent and its agent (a bug in the caller).
    #[error("session {0} was to be a child session but names no parent or no agent")]
    NotAChild(String),
    #[error(
        "session {session}: the history moved to revision {found} while revision {expected} \
         was being compacted; nothing was written"
    )]
    HistoryMoved {
        session: String,
        expected: u64,
        found: u64,
    },
    #[error("session {session} has no history revision {revision} (it has 1 to {latest})")]
    NoSuchRevision {
        session: String,
        revision: u64,
        latest: u64,
    },
    #[error(
        "session {session} is in use by {holder} (since {since_ms} ms after the epoch); wait for it to finish or stop it"
    )]
    LeaseHeld {
        session: String,
        holder: String,
        since_ms: i64,
    },
    #[error(
        "session {session}: history item {revision} cannot be read ({reason}); `keel session \
         show` still shows the rest"
    )]
    UnreadableItem {
        session: String,
        revision: u64,
        reason: String,
    },
    #[error("state database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot encode a record for the store: {0}")]
    Encode(#[from] serde_json::Error),
}

impl StoreError {
    /// Whether the person running keel must act (a busy or missing session, a database that
    /// is corrupt, locked or newer), as opposed to a failure of keel or the machine.
    pub fn is_for_the_user(&self) -> bool {
        match self {
            StoreError::LeaseHeld { .. }
            | StoreError::Corrupt { .. }
            | StoreError::Busy { .. }
            | StoreError::NewerSchema { .. }
            | StoreError::NoSuchSession(_)
            | StoreError::NoSuchRevision { .. }
            | StoreError::UnreadableItem { .. } => true,
            StoreError::HistoryMoved { .. } | StoreError::NotAChild(_) => false,
            StoreError::Io { .. } | StoreError::Sqlite(_) | StoreError::Encode(_) => false,
        }
    }

    /// Classify an error met while opening or preparing the database: corrupt only when SQLite
    /// says so, busy when a lock outlasted the wait, otherwise a plain SQLite error.
    pub(crate) fn from_open(path: &Path, error: rusqlite::Error) -> StoreError {
        match error.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
                StoreError::corrupt(path, &error)
            }
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                StoreError::Busy {
                    path: path.to_path_buf(),
                    waited_secs: crate::schema::BUSY_TIMEOUT.as_secs(),
                }
            }
            _ => StoreError::Sqlite(error),
        }
    }

    pub(crate) fn corrupt(path: &Path, error: &rusqlite::Error) -> StoreError {
        StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: error.to_string(),
        }
    }
}
