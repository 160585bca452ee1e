//! The git status line of a session's environment block: how the workspace differs from the
//! commit checked out, from keel's own snapshot (never a git run on the repository's own
//! configuration; `HEAD` and refs are read as files).
//!
//! Invariants: counted, with at most `MOST_NAMED` paths named, each bounded and with control
//! characters replaced (a path is the repository's words, shown to the model).

use super::{Changed, MOST_INDEX, Snapshots, read_regular};
use crate::instructions::GIT_STATUS;

/// The most paths the environment's git status names.
const MOST_NAMED: usize = 10;

impl Snapshots {
    /// One line for the session's environment: how the workspace differs from the commit
    /// checked out (counted; the first paths named, bounded). `None` when keel cannot tell.
    pub(crate) fn status_line(&self) -> Option<String> {
        let head = self.head_commit()?;
        // First the snapshot: it also makes keel's store, which reads the commit through the
        // repository's objects.
        let now = self.take_now().ok()?;
        let head_tree = self
            .git(&[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{head}^{{tree}}"),
            ])
            .ok()?;
        let scope = self.scope.strip_prefix(":(top,literal)").unwrap_or("");
        let changes: Vec<Changed> = self
            .changed(head_tree.trim(), &now)
            .ok()?
            .into_iter()
            .filter(|change| {
                let inside = format!("{scope}/");
                scope.is_empty() || change.path.starts_with(inside.as_bytes())
            })
            .collect();
        if changes.is_empty() {
            return Some(format!(
                "{GIT_STATUS}clean (the workspace is as the checked-out commit)"
            ));
        }
        let count = |status: u8| changes.iter().filter(|c| c.status == status).count();
        let named: Vec<String> = changes
            .iter()
            .take(MOST_NAMED)
            .map(|change| {
                String::from_utf8_lossy(&change.path)
                    .chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .take(100)
                    .collect::<String>()
            })
            .collect();
        let more = changes.len().saturating_sub(MOST_NAMED);
        Some(format!(
            "{GIT_STATUS}{} paths differ from the checked-out commit ({} modified, {} new, {} \
             deleted): {}{}",
            changes.len(),
            count(b'M') + count(b'T'),
            count(b'A'),
            count(b'D'),
            named.join(", "),
            if more > 0 {
                format!(", and {more} more")
            } else {
                String::new()
            }
        ))
    }

    /// The commit checked out, read from the repository's `HEAD` and refs (files keel reads,
    /// never a git run on the repository's own configuration).
    fn head_commit(&self) -> Option<String> {
        let is_id = |text: &str| {
            (text.len() == 40 || text.len() == 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
        };
        let head = String::from_utf8(read_regular(&self.git_dir.join("HEAD"), 512)?).ok()?;
        let head = head.trim();
        let Some(name) = head.strip_prefix("ref: ") else {
            return is_id(head).then(|| head.to_string());
        };
        if !name.starts_with("refs/") || name.contains("..") {
            return None;
        }
        if let Some(loose) = read_regular(&self.common_dir.join(name), 512)
            .and_then(|bytes| String::from_utf8(bytes).ok())
            && is_id(loose.trim())
        {
            return Some(loose.trim().to_string());
        }
        let packed = read_regular(&self.common_dir.join("packed-refs"), MOST_INDEX)?;
        String::from_utf8_lossy(&packed).lines().find_map(|line| {
            let (id, named) = line.split_once(' ')?;
            (named == name && is_id(id)).then(|| id.to_string())
        })
    }
}
