//! `/diff`: what this session's turns changed in the workspace, file by file, from what keel
//! recorded before it changed anything: the file tools' checkpoints and, in a git repository,
//! the snapshot taken before the session's first command.
//!
//! Invariants:
//! - Read only: nothing in the workspace changes (a snapshot of the workspace now is written
//!   into keel's own snapshot store, as a rewind's check does, and named by no ref).
//! - A path the file tools changed is compared with its earliest checkpoint a rewind has not
//!   undone; a path only commands changed, with the first snapshot. What keel did not keep
//!   (too large, holding a secret, outside the snapshots) is named with why, never guessed.
//! - Outside a git repository only the file tools' changes are known: `commands_covered` says
//!   so, for the surface to say it.
//! - Both sides are redacted as a tool's output is: a secret of keel's never reaches a screen.

use crate::agent::Agent;
use crate::error::AgentError;
use crate::snapshot::Side;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The largest file read for a diff.
const LARGEST_DIFFED: u64 = 4 << 20;

/// One file as it was before the session changed it, and as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedFile {
    /// Relative to the workspace when inside it.
    pub path: String,
    /// `None`: it did not exist.
    pub before: Option<Vec<u8>>,
    /// `None`: it does not exist now.
    pub now: Option<Vec<u8>>,
    /// Changed outside the file tools (known from the snapshots): by a command, an MCP tool,
    /// or the person.
    pub by_command: bool,
}

/// What `/diff` shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionDiff {
    pub files: Vec<ChangedFile>,
    /// Paths changed whose earlier bytes keel did not keep, with why.
    pub unknown: Vec<(String, String)>,
    /// Whether commands' changes are known (a git repository with the session's snapshots).
    pub commands_covered: bool,
}

impl Agent {
    /// What the session changed (refused while a turn runs).
    pub(crate) fn session_diff(&self) -> Result<SessionDiff, AgentError> {
        let agent = self;
        let Ok(_state) = agent.state.try_lock() else {
            return Err(AgentError::Busy(agent.session.id.clone()));
        };
        let workspace = &agent.settings.workspace;
        let secrets = &agent.services.tool_services.secrets;
        let shown = |path: &Path| -> String {
            path.strip_prefix(workspace)
                .unwrap_or(path)
                .display()
                .to_string()
        };
        let mut diff = SessionDiff::default();
        let mut earliest: BTreeMap<String, keel_store::Checkpoint> = BTreeMap::new();
        for checkpoint in agent.services.store.checkpoints(&agent.session.id)? {
            if !checkpoint.undone {
                earliest
                    .entry(checkpoint.path.clone())
                    .or_insert(checkpoint);
            }
        }
        for (path, checkpoint) in &earliest {
            let before = match (checkpoint.state.as_str(), &checkpoint.hash) {
                ("absent", _) => None,
                ("stored", Some(hash)) => match agent.services.store.blob(hash)? {
                    Some(bytes) => Some(bytes),
                    None => {
                        diff.unknown
                            .push((shown(Path::new(path)), "its copy is gone".into()));
                        continue;
                    }
                },
                (why, _) => {
                    diff.unknown.push((shown(Path::new(path)), why.to_string()));
                    continue;
                }
            };
            push_if_changed(
                &mut diff,
                shown(Path::new(path)),
                before,
                Path::new(path),
                false,
                secrets,
            );
        }
        let Some(snapshots) = &agent.snapshots else {
            return Ok(diff);
        };
        let points = snapshots.points().map_err(AgentError::Snapshot)?;
        diff.commands_covered = true;
        let Some(start) = points.iter().find(|point| point.side == Side::Before) else {
            return Ok(diff);
        };
        let (now, withheld) = snapshots
            .take_now_withholding()
            .map_err(AgentError::Snapshot)?;
        for path in withheld {
            diff.unknown.push((
                shown(&snapshots.path_of(&path)),
                "it holds one of keel's secrets, so no snapshot copies it".into(),
            ));
        }
        for changed in snapshots
            .changed(&start.tree, &now)
            .map_err(AgentError::Snapshot)?
        {
            let on_disk: PathBuf = snapshots.path_of(&changed.path);
            if earliest.contains_key(&on_disk.display().to_string()) {
                continue;
            }
            let before = match &changed.before {
                None => None,
                Some((_, id)) => match snapshots.blob(id) {
                    Ok(bytes) => Some(bytes),
                    Err(why) => {
                        diff.unknown.push((shown(&on_disk), why));
                        continue;
                    }
                },
            };
            push_if_changed(&mut diff, shown(&on_disk), before, &on_disk, true, secrets);
        }
        Ok(diff)
    }
}

fn push_if_changed(
    diff: &mut SessionDiff,
    shown: String,
    before: Option<Vec<u8>>,
    on_disk: &Path,
    by_command: bool,
    secrets: &keel_types::Secrets,
) {
    let now = match std::fs::symlink_metadata(on_disk) {
        Err(_) => None,
        Ok(meta) if !meta.is_file() => {
            diff.unknown
                .push((shown, "it is not a regular file now".into()));
            return;
        }
        Ok(meta) if meta.len() > LARGEST_DIFFED => {
            diff.unknown
                .push((shown, format!("larger than {LARGEST_DIFFED} bytes now")));
            return;
        }
        Ok(_) => std::fs::read(on_disk).ok(),
    };
    if before == now {
        return;
    }
    let redact = |bytes: Vec<u8>| match String::from_utf8(bytes) {
        Ok(text) => secrets.redact(&text).into_owned().into_bytes(),
        Err(error) => error.into_bytes(),
    };
    diff.files.push(ChangedFile {
        path: shown,
        before: before.map(redact),
        now: now.map(redact),
        by_command,
    });
}
