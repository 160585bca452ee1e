//! The command-snapshot bracket of one agent: the workspace's snapshot before a batch that
//! runs a command (or an MCP tool) and after it, so a rewind can undo what commands changed —
//! and only that (docs/features.md#command-snapshots).
//!
//! Invariants:
//! - Only a batch that can change files no checkpoint covers is bracketed: a command not
//!   confined to reading by an enforced sandbox, or an MCP tool. Nothing is bracketed outside
//!   a git repository (no `Snapshots`).
//! - One git at a time on the session's index: the last batch's "after" is awaited before the
//!   next "before", before a batch that touches sensitive paths, and before the turn ends.
//! - The "after" is taken in the background while the next request is out.
//! - A snapshot that fails leaves the bracket open, which a rewind reports; the failure is
//!   said at once (`snapshot/failed`), in git's words redacted of keel's secrets.
//! - A turn that bracketed a command keeps the snapshot store within `checkpoint_max_bytes`
//!   at its end (`snapshot/pruned`).

use crate::snapshot::{PendingSnapshot, Side, Snapshots};
use keel_types::{EventBody, Secrets};

/// The most characters of git's own words a `snapshot/failed` event carries.
const SNAPSHOT_REASON_CHARS: usize = 400;

/// The receipts a bracketed batch covers: its first and last sequence numbers, and its calls.
pub(crate) struct Bracketed {
    pub first: u64,
    pub last: u64,
    pub call_ids: Vec<String>,
}

/// One agent's bracket (see the module invariants).
pub(crate) struct CommandBracket {
    snapshots: Option<Snapshots>,
    secrets: Secrets,
    /// The "after" snapshot of the last batch, still being taken.
    pending: Option<PendingSnapshot>,
    /// This turn bracketed a batch: the store is kept within budget at its end.
    taken: bool,
}

impl CommandBracket {
    pub(crate) fn new(snapshots: Option<Snapshots>, secrets: Secrets) -> CommandBracket {
        CommandBracket {
            snapshots,
            secrets,
            pending: None,
            taken: false,
        }
    }

    /// Whether batches are bracketed at all (a git repository).
    pub(crate) fn is_active(&self) -> bool {
        self.snapshots.is_some()
    }

    /// Wait for the "after" snapshot still being taken, if any: its failure, if it failed.
    pub(crate) async fn settle(&mut self) -> Option<EventBody> {
        let pending = self.pending.take()?;
        pending.await.ok().flatten()
    }

    /// Take the "before" snapshot of `batch` (after settling the last "after"); what failed,
    /// in the order it happened.
    pub(crate) async fn open(&mut self, batch: &Bracketed) -> Vec<EventBody> {
        let mut failed: Vec<EventBody> = self.settle().await.into_iter().collect();
        self.taken = true;
        if let Some(before) = self.start(batch, Side::Before)
            && let Ok(Some(failure)) = before.await
        {
            failed.push(failure);
        }
        failed
    }

    /// Start the "after" snapshot of `batch`, in the background.
    pub(crate) fn close(&mut self, batch: &Bracketed) {
        self.pending = self.start(batch, Side::After);
    }

    /// At a turn's end: the store kept within `budget` if the turn bracketed anything (what
    /// went, or why it could not).
    pub(crate) async fn keep_in_budget(&mut self, budget: u64) -> Option<EventBody> {
        if !std::mem::take(&mut self.taken) {
            return None;
        }
        let snapshots = self.snapshots.clone()?;
        let pruned = tokio::task::spawn_blocking(move || snapshots.prune_to(budget)).await;
        match pruned {
            Ok(Ok(Some(pruned))) => Some(EventBody::SnapshotPruned {
                brackets: pruned.brackets as u64,
                bytes_before: pruned.bytes_before,
                bytes_after: pruned.bytes_after,
            }),
            Ok(Ok(None)) | Err(_) => None,
            Ok(Err(reason)) => Some(EventBody::SnapshotFailed {
                side: "prune".into(),
                call_ids: Vec::new(),
                reason: said_reason(&self.secrets, &reason),
            }),
        }
    }

    fn start(&self, batch: &Bracketed, side: Side) -> Option<PendingSnapshot> {
        let snapshots = self.snapshots.clone()?;
        let (first, last, call_ids) = (batch.first, batch.last, batch.call_ids.clone());
        let secrets = self.secrets.clone();
        Some(tokio::task::spawn_blocking(move || {
            let reason = snapshots.take(first, last, side).err()?;
            Some(EventBody::SnapshotFailed {
                side: match side {
                    Side::Before => "before",
                    Side::After => "after",
                }
                .to_string(),
                call_ids,
                reason: said_reason(&secrets, &reason),
            })
        }))
    }
}

/// git's words as an event says them: no secret, at most `SNAPSHOT_REASON_CHARS`.
fn said_reason(secrets: &Secrets, reason: &str) -> String {
    let mut reason = secrets.redact(reason).into_owned();
    if let Some((cut, _)) = reason.char_indices().nth(SNAPSHOT_REASON_CHARS) {
        reason.truncate(cut);
        reason.push('…');
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_workspace() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
        let dir = tempfile::tempdir().ok()?;
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(&workspace).ok()?;
        let made = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&workspace)
            .status()
            .ok()?;
        made.success().then_some((dir, workspace))
    }

    #[tokio::test]
    async fn a_bracket_takes_the_workspace_before_and_after_a_batch() {
        let Some((dir, workspace)) = git_workspace() else {
            return;
        };
        let snapshots = Snapshots::for_session(&workspace, &dir.path().join("home"), "s", None)
            .expect("a repository");
        let mut bracket = CommandBracket::new(Some(snapshots.clone()), Secrets::default());
        assert!(bracket.is_active());
        // Nothing bracketed yet: nothing to keep within budget.
        assert_eq!(bracket.keep_in_budget(0).await, None);
        let batch = Bracketed {
            first: 3,
            last: 4,
            call_ids: vec!["call_1".into(), "call_2".into()],
        };
        assert_eq!(bracket.open(&batch).await, Vec::<EventBody>::new());
        std::fs::write(workspace.join("made.txt"), "by a command\n").unwrap();
        bracket.close(&batch);
        // The "after" is taken in the background; settling waits for it.
        assert_eq!(bracket.settle().await, None);
        let points = snapshots.points().unwrap();
        let tree = |side: Side| {
            points
                .iter()
                .find(|point| point.side == side && (point.first, point.last) == (3, 4))
                .map(|point| point.tree.clone())
                .expect("a snapshot on each side")
        };
        let changed = snapshots
            .changed_paths(&tree(Side::Before), &tree(Side::After))
            .unwrap();
        assert!(changed.contains(b"made.txt".as_slice()), "{changed:?}");
    }

    #[tokio::test]
    async fn a_failed_snapshot_is_said_in_gits_words_without_a_secret() {
        let Some((dir, workspace)) = git_workspace() else {
            return;
        };
        let snapshots = Snapshots::for_session(&workspace, &dir.path().join("home"), "s", None)
            .expect("a repository");
        // The store cannot be made: a file stands where its directory would go.
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::write(dir.path().join("home/snapshots"), "in the way").unwrap();
        let secrets = Secrets::default().with_value("KEEL_TEST_SECRET", "snapshots");
        let mut bracket = CommandBracket::new(Some(snapshots), secrets);
        let batch = Bracketed {
            first: 1,
            last: 1,
            call_ids: vec!["call_1".into()],
        };
        let failed = bracket.open(&batch).await;
        let [
            EventBody::SnapshotFailed {
                side,
                call_ids,
                reason,
            },
        ] = failed.as_slice()
        else {
            panic!("one failure: {failed:?}");
        };
        assert_eq!(
            (side.as_str(), call_ids.as_slice()),
            ("before", ["call_1".to_string()].as_slice())
        );
        assert!(
            !reason.is_empty() && !reason.contains("snapshots"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn outside_a_repository_nothing_is_bracketed() {
        let mut bracket = CommandBracket::new(None, Secrets::default());
        assert!(!bracket.is_active());
        let batch = Bracketed {
            first: 1,
            last: 1,
            call_ids: Vec::new(),
        };
        assert!(bracket.open(&batch).await.is_empty());
        bracket.close(&batch);
        assert_eq!(bracket.settle().await, None);
        // Nothing was taken, so there is nothing to prune.
        assert_eq!(bracket.keep_in_budget(0).await, None);
    }
}
