//! keel's durable session store: one SQLite file (WAL, `synchronous = FULL`) holding sessions,
//! the canonical history, tool receipts, the event index, recovery records and session leases.
//!
//! Invariants:
//! - History is append-only: items get increasing numbers and are never updated. A compaction
//!   writes a new history revision in one transaction; earlier revisions stay readable.
//! - Every write is one transaction, committed (fsync'd) before the call returns; an assistant
//!   message and the receipts of its tool calls are written in the same transaction. The only
//!   writes not fsync'd on their own are the event index, leases and a new store's schema:
//!   a crash of keel loses none of them, and the next fsync'd write makes them durable with it;
//!   a power failure before that may take the last events (and their ids may be given again),
//!   a lease (void anyway) or a migration's schema (made again). Every other write sets
//!   `synchronous = FULL` itself. A new store is a synced copy of the empty schema
//!   (`fresh`), linked into place, never over an existing file.
//! - A database that is corrupt, not keel's, or of a newer schema is an error that says so, and
//!   is never modified or overwritten.
//! - One process writes a session at a time (`Lease`); a second gets an error naming the holder.

mod checkpoints;
mod error;
mod fork;
mod fresh;
mod history;
mod jobs;
mod lease;
mod processes;
mod remove;
mod saved;
mod schema;
mod sessions;

pub use checkpoints::{Before, Checkpoint, PreImage, content_hash};
pub use error::StoreError;
pub use history::{HistoryRewrite, RevisionInfo};
pub use jobs::{JobEnd, RecordedJob};
pub use lease::Lease;
pub use processes::RecordedProcess;
pub use saved::SavedVersion;
pub use sessions::{SessionInfo, SessionOverview, StoredEvent, StoredItem, TITLE_CHARS, TaskEnd};

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// A handle to the state database; cheap to clone, shared by every part of one process.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    connection: Mutex<Connection>,
}

impl Store {
    /// Open (creating if needed) the database at `path` and bring its schema up to date.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(parent) = path.parent() {
            keel_types::private_files::create_private_dir(parent).map_err(|source| {
                StoreError::Io {
                    path: parent.to_path_buf(),
                    source,
                }
            })?;
        }
        // A new store is the template (`fresh`), made owner-only before SQLite opens it:
        // SQLite gives its `-wal` and `-shm` files the database file's mode, so all three are
        // the user's alone, whatever the umask.
        if path.symlink_metadata().is_err() {
            fresh::place(path).map_err(|source| StoreError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        }
        let connection =
            Connection::open(path).map_err(|error| StoreError::from_open(path, error))?;
        keel_types::startup_trace::mark("store file");
        schema::prepare(&connection, path)?;
        Ok(Store {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                connection: Mutex::new(connection),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn connection(&self) -> MutexGuard<'_, Connection> {
        // A poisoned lock means a panic elsewhere; SQLite's own state is still consistent.
        self.inner
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod children_and_jobs_tests;
#[cfg(test)]
mod tests;
