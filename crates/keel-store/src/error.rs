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
    #[error("session {0} does not exist")]
    NoSuchSession(String),
    #[error(
        "session {session} is in use by {holder} (since {since_ms} ms after the epoch); wait for it to finish or stop it"
    )]
    LeaseHeld {
        session: String,
        holder: String,
        since_ms: i64,
    },
    #[error("state database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot encode a record for the store: {0}")]
    Encode(#[from] serde_json::Error),
}

impl StoreError {
    pub(crate) fn corrupt(path: &Path, error: &rusqlite::Error) -> StoreError {
        StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: error.to_string(),
        }
    }
}
