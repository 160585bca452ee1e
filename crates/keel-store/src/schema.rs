//! Schema creation and migrations, versioned with `PRAGMA user_version`.
//!
//! Invariants:
//! - Migrations only ever move forward, all pending ones in one transaction (a version-1
//!   database gains history revisions in place; nothing in it is rewritten).
//! - A version above `CURRENT_VERSION` is refused before anything is written.
//! - Safe under concurrency: any number of processes may open a fresh database at once; the
//!   schema is created by one `BEGIN IMMEDIATE` transaction that re-reads the version inside
//!   it, and every statement waits (`BUSY_TIMEOUT`) for another process's lock.
//! - Only SQLite's own verdict (`SQLITE_CORRUPT`, `SQLITE_NOTADB`) or a schema that is not
//!   keel's is called corrupt; a lock that outlasts the wait is reported as busy.

use crate::StoreError;
use rusqlite::Connection;
use std::path::Path;

pub const CURRENT_VERSION: i64 = 8;

pub(crate) const SCHEMA_V1: &str = "
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

/// Version 2: compaction. Items belong to a history revision; each revision past the first has
/// a row saying why and when it was written.
const SCHEMA_V2: &str = "
ALTER TABLE items ADD COLUMN history_revision INTEGER NOT NULL DEFAULT 1;
CREATE INDEX items_by_history_revision ON items (session_id, history_revision, revision);
CREATE TABLE history_revisions (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    revision INTEGER NOT NULL,
    reason TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after INTEGER NOT NULL,
    replaced INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, revision)
);
";

/// Version 3: the process group each running tool's command was started in (pgid, the
/// leader's start time, the boot id), so a restart after a crash can stop exactly that group.
const SCHEMA_V3: &str = "
CREATE TABLE tool_processes (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    call_id TEXT NOT NULL,
    pgid INTEGER NOT NULL,
    start_ticks INTEGER NOT NULL,
    boot_id TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id, pgid)
);
";

/// Version 4: the sandbox each command ran under, on its receipt.
const SCHEMA_V4: &str = "
ALTER TABLE receipts ADD COLUMN sandbox TEXT;
";

/// Version 7: many hands (docs/agents.md). A session started by another's `task` call names
/// its parent and its agent (with the agent's tools and mode, kept with it); a `task`
/// receipt names the child session it started; a session's background jobs are recorded with
/// their process group, so a later load can stop jobs a dead process left. A session keeps the
/// digest of the built-in tool specs its requests carried, so a keel that offers other tools
/// names the break when it continues the session.
pub(crate) const SCHEMA_V7: &str = "
ALTER TABLE sessions ADD COLUMN parent TEXT;
ALTER TABLE sessions ADD COLUMN agent TEXT;
ALTER TABLE sessions ADD COLUMN agent_settings TEXT;
ALTER TABLE sessions ADD COLUMN tools_digest TEXT;
CREATE INDEX sessions_by_parent ON sessions (parent);
ALTER TABLE receipts ADD COLUMN child_session TEXT;
CREATE TABLE jobs (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    job TEXT NOT NULL,
    call_id TEXT NOT NULL,
    command TEXT NOT NULL,
    pgid INTEGER NOT NULL,
    start_ticks INTEGER NOT NULL,
    boot_id TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    exit_code INTEGER,
    signal INTEGER,
    PRIMARY KEY (session_id, job)
);
";

/// Version 8: whether the model was told how each job ended (told once, across restarts).
const SCHEMA_V8: &str = "
ALTER TABLE jobs ADD COLUMN told INTEGER NOT NULL DEFAULT 0;
";

/// The tables each schema version has (version 2 and 3 each add one; 4 adds a column; 5 adds
/// the checkpoint tables; 6 the versions rewinds kept; 7 the jobs).
fn expected_tables(version: i64) -> &'static [&'static str] {
    const TABLES: &[&str] = &[
        "sessions",
        "items",
        "receipts",
        "events",
        "recovery_records",
        "leases",
        "history_revisions",
        "tool_processes",
        "blobs",
        "checkpoints",
        "saved",
        "jobs",
    ];
    match version {
        i64::MIN..=1 => &TABLES[..6],
        2 => &TABLES[..7],
        3 | 4 => &TABLES[..8],
        5 => &TABLES[..10],
        6 => &TABLES[..11],
        _ => TABLES,
    }
}

pub fn prepare(connection: &Connection, path: &Path) -> Result<(), StoreError> {
    // Some lock conflicts (switching to WAL while another process does the same, upgrading a
    // read lock) fail at once instead of waiting; preparing is idempotent, so try again.
    let started = std::time::Instant::now();
    loop {
        match prepare_once(connection, path) {
            Err(StoreError::Busy { .. }) if started.elapsed() < BUSY_TIMEOUT => {
                std::thread::sleep(std::time::Duration::from_millis(15));
            }
            result => return result,
        }
    }
}

fn prepare_once(connection: &Connection, path: &Path) -> Result<(), StoreError> {
    let fail = |error: rusqlite::Error| StoreError::from_open(path, error);
    // First, so that every statement below waits for another process's lock instead of
    // failing: several keel processes may open a fresh home at the same moment.
    connection.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
    // Read the version and the table list in one snapshot: another process may be creating
    // the schema right now, and a half-seen fresh database must not look foreign.
    connection.execute_batch("BEGIN").map_err(fail)?;
    let checked =
        read_version(connection, path).and_then(|version| check_version(connection, path, version));
    let _ = connection.execute_batch("COMMIT");
    checked?;
    connection
        .execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
        )
        .map_err(fail)?;
    if read_version(connection, path)? >= CURRENT_VERSION {
        return Ok(());
    }
    // One writer migrates; the others wait on the lock, then find the work done. The version
    // is read again inside the transaction, so the schema is created exactly once. The commit
    // is not fsync'd on its own: lost to a power failure, the store is as it was before (one
    // transaction) and the migration simply runs again; the next fsync'd write makes it durable.
    // If BEGIN fails, `prepare` retries from the top, which sets FULL again.
    connection
        .execute_batch("PRAGMA synchronous = NORMAL; BEGIN IMMEDIATE")
        .map_err(fail)?;
    let migrated = (|| {
        let version = read_version(connection, path)?;
        check_version(connection, path, version)?;
        if version < 1 {
            connection
                .execute_batch(&format!("{SCHEMA_V1} PRAGMA user_version = 1;"))
                .map_err(fail)?;
        }
        if version < 2 {
            connection
                .execute_batch(&format!("{SCHEMA_V2} PRAGMA user_version = 2;"))
                .map_err(fail)?;
        }
        if version < 3 {
            connection
                .execute_batch(&format!("{SCHEMA_V3} PRAGMA user_version = 3;"))
                .map_err(fail)?;
        }
        if version < 4 {
            connection
                .execute_batch(&format!("{SCHEMA_V4} PRAGMA user_version = 4;"))
                .map_err(fail)?;
        }
        if version < 5 {
            connection
                .execute_batch(&format!(
                    "{} PRAGMA user_version = 5;",
                    crate::checkpoints::SCHEMA_V5
                ))
                .map_err(fail)?;
        }
        if version < 6 {
            connection
                .execute_batch(&format!(
                    "{} PRAGMA user_version = 6;",
                    crate::saved::SCHEMA_V6
                ))
                .map_err(fail)?;
        }
        if version < 7 {
            connection
                .execute_batch(&format!("{SCHEMA_V7} PRAGMA user_version = 7;"))
                .map_err(fail)?;
        }
        if version < 8 {
            connection
                .execute_batch(&format!("{SCHEMA_V8} PRAGMA user_version = 8;"))
                .map_err(fail)?;
        }
        connection.execute_batch("COMMIT").map_err(fail)
    })();
    if migrated.is_err() {
        let _ = connection.execute_batch("ROLLBACK");
    }
    connection
        .execute_batch("PRAGMA synchronous = FULL")
        .map_err(fail)?;
    migrated
}

/// How long a statement waits for another process's lock before failing.
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn read_version(connection: &Connection, path: &Path) -> Result<i64, StoreError> {
    connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|error| StoreError::from_open(path, error))
}

/// Refuse a newer schema, an incomplete keel schema, or a database that is not keel's.
fn check_version(connection: &Connection, path: &Path, version: i64) -> Result<(), StoreError> {
    let fail = |error: rusqlite::Error| StoreError::from_open(path, error);
    if version > CURRENT_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            known: CURRENT_VERSION,
        });
    }
    if version > 0 {
        // An existing keel database must have its tables; anything else is not ours.
        let expected = expected_tables(version);
        let names = expected
            .iter()
            .map(|name| format!("'{name}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let tables: i64 = connection
            .query_row(
                &format!(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ({names})"
                ),
                [],
                |row| row.get(0),
            )
            .map_err(fail)?;
        if usize::try_from(tables).ok() != Some(expected.len()) {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: format!(
                    "schema version {version} but {tables} of {} keel tables",
                    expected.len()
                ),
            });
        }
    } else {
        let foreign: i64 = connection
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'",
                [],
                |row| row.get(0),
            )
            .map_err(fail)?;
        if foreign > 0 {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: "it holds tables that are not keel's".into(),
            });
        }
    }
    Ok(())
}
