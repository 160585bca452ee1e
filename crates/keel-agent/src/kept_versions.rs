//! A rewind never loses what a person wrote. A path that changed while one of keel's commands
//! ran cannot be told apart from the command's own change (no kernel interface says which
//! process wrote a file), so before a rewind overwrites such a path — or one it overwrites
//! with `--force` — its bytes as they are now are kept in the session's store
//! (`Store::save_version`), and the rewind lists the path apart with how to get them back:
//! `keel session show ID --saved PATH`.
//!
//! Invariants:
//! - Kept before the overwrite, committed: a crash between the two loses nothing.
//! - What cannot be kept (larger than a checkpoint may be, unreadable, or holding one of
//!   keel's secrets, which never enter the store) is not overwritten: the path is a conflict,
//!   and `--force` alone overwrites it.
//! - Nothing is kept where there is nothing to lose: the path is absent, or already holds what
//!   the rewind would write.

use crate::agent::Agent;
use crate::checkpoint::before;
use crate::rewind::RewindReport;
use keel_store::{Before, Store};
use keel_tools::ToolServices;
use std::path::Path;

/// What keeping a path's current bytes came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kept {
    /// Nothing to keep: overwrite.
    Nothing,
    /// Kept: overwrite, and say how to get it back.
    Saved { retrieve: String },
    /// It cannot be kept (why): leave it, unless forced.
    CannotKeep(String),
}

/// Keep what `path` holds now before a rewind to `turn` of `session` writes `restoring`
/// (`None`: removes it) there.
pub(crate) fn keep_before_overwrite(
    store: &Store,
    ctx: &ToolServices,
    session: &str,
    path: &str,
    restoring: Option<&[u8]>,
    turn: u64,
) -> Kept {
    match before(Path::new(path), ctx) {
        Before::Absent => Kept::Nothing,
        Before::Bytes(bytes) if Some(bytes.as_slice()) == restoring => Kept::Nothing,
        Before::Bytes(bytes) => match store.save_version(session, path, &bytes, turn) {
            Ok(_) => Kept::Saved {
                retrieve: format!("keel session show {session} --saved {}", quoted(path)),
            },
            Err(error) => Kept::CannotKeep(format!("keel could not keep it ({error})")),
        },
        Before::NotKept(why) => Kept::CannotKeep(format!("keel cannot keep it ({why})")),
    }
}

/// `path` as one shell word.
fn quoted(path: &str) -> String {
    if path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', "'\\''"))
    }
}

impl RewindReport {
    /// `path` was written back; `kept`: how to get what it held before.
    pub(crate) fn done(&mut self, path: String, kept: Option<String>) {
        match kept {
            Some(retrieve) => self.saved.push((path, retrieve)),
            None => self.restored.push(path),
        }
    }
}

impl Agent {
    /// Keep what `path` holds before a rewind to `to` writes `restoring` there: `Some` with
    /// how to get it back (`Some(None)`: nothing to keep) to go on, `None` to leave the path
    /// (it cannot be kept and nothing forces it; said as a conflict).
    pub(crate) fn keep_first(
        &self,
        path: &str,
        restoring: Option<&[u8]>,
        to: u64,
        force: bool,
        report: &mut RewindReport,
    ) -> Option<Option<String>> {
        let agent = self;
        match keep_before_overwrite(
            &agent.services.store,
            &agent.services.tool_services,
            &agent.session.id,
            path,
            restoring,
            to,
        ) {
            Kept::Nothing => Some(None),
            Kept::Saved { retrieve } => Some(Some(retrieve)),
            Kept::CannotKeep(why) if force => {
                report.not_restorable.push(format!(
                    "{path}: restored because of --force, but what it held is lost: {why}"
                ));
                Some(None)
            }
            Kept::CannotKeep(why) => {
                report.conflicts.push((
                    path.to_string(),
                    format!(
                        "it changed while one of keel's commands ran and {why}; --force \
                         restores it anyway"
                    ),
                ));
                None
            }
        }
    }
}
