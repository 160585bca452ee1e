//! Schema creation and migrations, versioned with `PRAGMA user_version`.
//!
//! Invariants:
//! - Migrations only ever move forward, each in one transaction.
//! - A version above `CURRENT_VERSION` is refused before anything is written.

use crate::StoreError;
use rusqlite::Connection;
use std::path::Path;

pub const CURRENT_VERSION: i64 = 1;

const SCHEMA_V1: &str = "
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX sessions_by_workspace ON sessions (workspace, updated_at);
CREATE TABLE items (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    revision INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    item TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, revision)
);
CREATE TABLE receipts (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    state TEXT NOT NULL,
    turn INTEGER NOT NULL,
    summary TEXT,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE recovery_records (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    id TEXT NOT NULL,
    record TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE leases (
    session_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    pid INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL
);
";

pub fn prepare(connection: &Connection, path: &Path) -> Result<(), StoreError> {
    let corrupt = |error: rusqlite::Error| StoreError::corrupt(path, &error);
    let version: i64 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(corrupt)?;
    if version > CURRENT_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            known: CURRENT_VERSION,
        });
    }
    if version > 0 {
        // An existing keel database must have its tables; anything else is not ours.
        let tables: i64 = connection
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN \
                 ('sessions', 'items', 'receipts', 'events', 'recovery_records', 'leases')",
                [],
                |row| row.get(0),
            )
            .map_err(corrupt)?;
        if tables != 6 {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: format!("schema version {version} but {tables} of 6 keel tables"),
            });
        }
    } else {
        let foreign: i64 = connection
            .query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))
            .map_err(corrupt)?;
        if foreign > 0 {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: "it holds tables that are not keel's".into(),
            });
        }
    }
    connection
        .busy_timeout(std::time::Duration::from_secs(5))
        .map_err(corrupt)?;
    connection
        .execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
        )
        .map_err(corrupt)?;
    if version < 1 {
        connection.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA_V1} PRAGMA user_version = 1; COMMIT;"
        ))?;
    }
    Ok(())
}
