//! The transcript hooks read (`transcript_path`): the session's history as JSON lines, redacted,
//! appended to as it grows — never written again whole for a hook (docs/hooks.md#payloads).
//!
//! Invariants:
//! - It lives in the session's temp dir (which a confined hook sees as its `TMPDIR`), one file
//!   per agent's session, owner-only; without a temp dir (no sandbox), in a private directory
//!   of the system's temp dir.
//! - Each item is written once, in order, each line redacted of keel's secrets; a history that
//!   was rewritten (compaction, a rewind) is marked by a line and written on from where it now
//!   ends.
//! - A transcript that cannot be written leaves the hook without a path, never the turn stuck.

use crate::agent::Agent;
use keel_types::Item;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where a session's transcript is: its directory as keel sees it, and its file name.
#[derive(Clone, Debug)]
pub(crate) struct TranscriptPlace {
    dir: PathBuf,
    file_name: String,
}

impl TranscriptPlace {
    /// The path as a hook sees it: in `temp_inside` when it is confined (its `TMPDIR`).
    pub(crate) fn as_seen_from(&self, temp_inside: Option<&Path>) -> PathBuf {
        temp_inside.unwrap_or(&self.dir).join(&self.file_name)
    }
}

/// Append what `history` has that the transcript does not yet; its place.
pub(crate) fn sync(agent: &Agent, history: &[Item]) -> Option<TranscriptPlace> {
    let dir = match agent.services.temp_dir() {
        Some(dir) => dir.to_path_buf(),
        None => private_dir(&agent.session.id)?,
    };
    let file_name = format!("transcript-{}.jsonl", agent.session.id);
    let mut written = agent
        .services
        .transcripts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let count = written.entry(agent.session.id.clone()).or_insert(0);
    let mut lines = String::new();
    if history.len() < *count {
        lines.push_str("{\"role\":\"keel\",\"history_rewritten\":true}\n");
        *count = history.len();
    }
    let secrets = &agent.services.tool_services.secrets;
    for item in &history[*count..] {
        if let Ok(line) = serde_json::to_string(item) {
            lines.push_str(&secrets.redact(&line));
            lines.push('\n');
        }
    }
    let path = dir.join(&file_name);
    if !lines.is_empty() {
        use std::os::unix::fs::OpenOptionsExt;
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut file| file.write_all(lines.as_bytes()));
        if appended.is_err() {
            return None;
        }
    }
    *count = history.len();
    Some(TranscriptPlace { dir, file_name })
}

/// `$TMPDIR/keel-SESSION`, owner-only (made when first needed).
fn private_dir(session: &str) -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::env::temp_dir().join(format!("keel-{session}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => Some(dir),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::symlink_metadata(&dir).ok()?;
            // Someone else's directory (or a link) is never written into.
            (meta.is_dir() && meta.uid() == nix::unistd::getuid().as_raw()).then_some(dir)
        }
        Err(_) => None,
    }
}
