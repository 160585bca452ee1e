//! Rewind: the files and the conversation of a session as they were before a turn.
//!
//! Invariants:
//! - Files come back from the checkpoints of the file tools: the earliest pre-image of each
//!   path the undone turns changed. A file that differs from what the last of those turns left
//!   is the user's (or another program's) later edit: a conflict, listed and left alone unless
//!   forced.
//! - In a git repository, what else changed since the first undone turn started (what `bash`
//!   and MCP tools did) comes back from the turn's git snapshot (`snapshot`). A path that also
//!   changed between two turns, or after the last one, is someone else's edit: a conflict, as
//!   above; where a snapshot is missing keel cannot tell, and says so. What no snapshot holds
//!   (`.gitignore`d files, anything outside the workspace) is named, never guessed.
//! - The conversation becomes a new history revision (through `rewrite::commit`): the items of
//!   the turns before, the context block always; old revisions stay readable and receipts are
//!   untouched, so nothing that ran is forgotten or run again. A turn a compaction summarised
//!   is restored from the newest revision that still held it verbatim (its bytes, so the
//!   provider's cache may serve them again).
//! - One turn at a time: a rewind waits for no turn and is refused while one runs.

use crate::checkpoint::current_hash;
use crate::rewrite::{Rewrite, commit};
use crate::snapshot::Point;
use crate::{AgentError, Controller};
use keel_store::Checkpoint;
use keel_types::Item;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What a rewind restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RewindScope {
    pub code: bool,
    pub conversation: bool,
}

impl RewindScope {
    pub const BOTH: RewindScope = RewindScope {
        code: true,
        conversation: true,
    };
}

/// What a rewind did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RewindReport {
    /// The files written back, or removed (they did not exist before).
    pub restored: Vec<String>,
    /// Files left alone: they changed after the turn that last wrote them (path, why).
    pub conflicts: Vec<(String, String)>,
    /// What keel cannot undo: commands and MCP calls of the undone turns, files not kept.
    pub not_restorable: Vec<String>,
    /// The history revision the conversation now is (none: not rewound, or nothing to drop).
    pub revision: Option<u64>,
}

impl Controller {
    /// The latest turn the conversation still holds (what `/undo` undoes); none when every
    /// turn was undone or there was none.
    pub fn last_turn_in_history(&self) -> Result<Option<u64>, AgentError> {
        let shared = &self.shared;
        if shared.state.try_lock().is_err() {
            return Err(AgentError::Busy(shared.session.id.clone()));
        }
        Ok(shared
            .store
            .items(&shared.session.id)?
            .into_iter()
            .filter(|row| !matches!(row.item, Ok(Item::Context(_))))
            .map(|row| row.turn)
            .max())
    }

    /// Undo turn `to` and every turn after it: files, conversation, or both (`force`: also
    /// files changed since).
    pub fn rewind(
        &self,
        to: u64,
        scope: RewindScope,
        force: bool,
    ) -> Result<RewindReport, AgentError> {
        let shared = &self.shared;
        let Ok(mut state) = shared.state.try_lock() else {
            return Err(AgentError::Busy(shared.session.id.clone()));
        };
        if to == 0 || to > state.last_turn {
            return Err(AgentError::CannotRewind(if state.last_turn == 0 {
                "this session has no turn yet".into()
            } else {
                format!(
                    "no turn {to}: this session's turns are 1 to {}",
                    state.last_turn
                )
            }));
        }
        let session = shared.session.id.as_str();
        let rows = decoded(shared, shared.store.items(session)?)?;
        // The turns before `to`, verbatim: from an earlier revision when a compaction since
        // summarised them.
        let before = if scope.conversation {
            match shared.store.revision_holding_before(session, to)? {
                Some(revision) if revision == state.revision => rows.clone(),
                Some(revision) => {
                    decoded(shared, shared.store.items_of_revision(session, revision)?)?
                }
                None => {
                    return Err(AgentError::CannotRewind(format!(
                        "no revision of this session holds turn {to} verbatim any more"
                    )));
                }
            }
        } else {
            Vec::new()
        };
        let mut report = RewindReport::default();
        let mut snapshot_covered = false;
        if scope.code {
            let checkpointed = self.restore_files(to, force, &rows, &mut report)?;
            snapshot_covered =
                self.restore_from_snapshot(to, state.last_turn, force, &checkpointed, &mut report);
        }
        // Only calls that ran (a denied or never-started one changed nothing).
        let ran: Vec<String> = shared
            .store
            .receipts(session)?
            .into_iter()
            .filter(|receipt| {
                !matches!(
                    receipt.state,
                    keel_types::ReceiptState::Denied
                        | keel_types::ReceiptState::NotStarted
                        | keel_types::ReceiptState::Pending
                )
            })
            .map(|receipt| receipt.call_id)
            .collect();
        let calls = unrestorable_calls(&rows, to, &ran);
        if !snapshot_covered {
            report.not_restorable.extend(calls);
        } else if !calls.is_empty() && scope.code {
            report.not_restorable.push(
                "what commands changed in files git ignores (.gitignore) or outside the \
                 workspace is not restored"
                    .into(),
            );
        }
        if scope.conversation {
            // The context block stays whatever the turn (the session's current one): rewind
            // never removes it.
            let kept: Vec<(u64, Item)> = rows
                .iter()
                .filter(|(_, item)| matches!(item, Item::Context(_)))
                .chain(
                    before
                        .iter()
                        .filter(|(turn, item)| *turn < to && !matches!(item, Item::Context(_))),
                )
                .cloned()
                .collect();
            if kept != rows {
                let tokens = crate::compaction::fixed_tokens(shared, &state)
                    + kept
                        .iter()
                        .map(|(_, item)| state.meter.tokens_of_item(item))
                        .sum::<u64>();
                let rewrite = Rewrite {
                    rows: kept,
                    reason: "rewind",
                    announced: "rewind",
                    tokens_before: tokens,
                    tokens_after: tokens,
                    replaced: 0,
                    kill_point: None,
                };
                report.revision = Some(commit(shared, &mut state, rewrite, None, |_| Vec::new())?);
                state.interrupted = false;
            }
        }
        Ok(report)
    }

    /// Write back (or remove) what the turns from `to` on changed through the file tools; the
    /// paths their checkpoints cover.
    fn restore_files(
        &self,
        to: u64,
        force: bool,
        rows: &[(u64, Item)],
        report: &mut RewindReport,
    ) -> Result<BTreeSet<String>, AgentError> {
        let shared = &self.shared;
        let session = shared.session.id.as_str();
        // Per path: its checkpoints from `to` on that no rewind restored yet, in order.
        let mut by_path: BTreeMap<String, Vec<Checkpoint>> = BTreeMap::new();
        for checkpoint in shared.store.checkpoints(session)? {
            if checkpoint.turn >= to && !checkpoint.undone {
                by_path
                    .entry(checkpoint.path.clone())
                    .or_default()
                    .push(checkpoint);
            }
        }
        let checkpointed: BTreeSet<String> = by_path.keys().cloned().collect();
        for (path, chain) in by_path {
            let seqs: Vec<u64> = chain.iter().map(|checkpoint| checkpoint.seq).collect();
            let (Some(first), Some(last)) = (chain.first(), chain.last()) else {
                continue;
            };
            let content = match (first.state.as_str(), &first.hash) {
                ("absent", _) => None,
                ("stored", Some(hash)) => match shared.store.blob(hash)? {
                    Some(bytes) => Some(bytes),
                    None => {
                        report
                            .not_restorable
                            .push(format!("{path}: its checkpoint is missing"));
                        continue;
                    }
                },
                (why, _) => {
                    report.not_restorable.push(format!("{path}: {why}"));
                    continue;
                }
            };
            let now = current_hash(Path::new(&path));
            // Already as it was (a rewind done twice): nothing to do.
            if now == first.hash {
                shared.store.mark_undone(session, &path, &seqs)?;
                continue;
            }
            if let Some(odd) = now.as_deref().filter(|name| name.starts_with('(')) {
                // Never replaced, even forced: a link or a directory there now is not a file
                // the turn left.
                let odd = odd.trim_matches(|c| c == '(' || c == ')');
                report.conflicts.push((
                    path,
                    format!("{odd} is there now; keel does not replace it"),
                ));
                continue;
            }
            if let Some(why) = conflict(&chain, last, &now, rows)
                && !force
            {
                report
                    .conflicts
                    .push((path, format!("{why}; --force restores it anyway")));
                continue;
            }
            match keel_tools::restore_file(&shared.tool_context, &path, content.as_deref()) {
                Ok(()) => {
                    shared.store.mark_undone(session, &path, &seqs)?;
                    report.restored.push(path);
                }
                Err(why) => report.not_restorable.push(format!("{path}: {why}")),
            }
        }
        Ok(checkpointed)
    }

    /// Undo, from the git snapshot taken as turn `to` started, what changed since in the
    /// workspace that no checkpoint covers; whether a snapshot covered the undone turns.
    fn restore_from_snapshot(
        &self,
        to: u64,
        last_turn: u64,
        force: bool,
        checkpointed: &BTreeSet<String>,
        report: &mut RewindReport,
    ) -> bool {
        let Some(snapshots) = &self.shared.snapshots else {
            return false;
        };
        let Some(start) = snapshots.recorded(to, Point::Start) else {
            return false;
        };
        let changed = match snapshots
            .take_now()
            .and_then(|now| Ok((snapshots.changed(&start, &now)?, now)))
        {
            Ok(found) => found,
            Err(why) => {
                report.not_restorable.push(format!(
                    "what commands changed: keel could not compare the workspace with its \
                     snapshot ({why})"
                ));
                return true;
            }
        };
        let (changed, now) = changed;
        let elsewhere = changed_outside_turns(snapshots, to, last_turn, &now);
        for change in changed {
            let path = snapshots.path_of(&change.path).display().to_string();
            if checkpointed.contains(&path) {
                continue;
            }
            if let Some(why) = elsewhere.get(&change.path).or(elsewhere.get(""))
                && !force
            {
                report
                    .conflicts
                    .push((path, format!("{why}; --force restores it anyway")));
                continue;
            }
            let content = match &change.before {
                None => None,
                Some((mode, id)) if mode.starts_with("100") => match snapshots.blob(id) {
                    Ok(bytes) => Some(bytes),
                    Err(why) => {
                        report.not_restorable.push(format!("{path}: {why}"));
                        continue;
                    }
                },
                Some((mode, _)) => {
                    let what = if mode == "120000" {
                        "a link"
                    } else {
                        "a submodule"
                    };
                    report.not_restorable.push(format!(
                        "{path}: it was {what}; keel does not restore those"
                    ));
                    continue;
                }
            };
            match keel_tools::restore_file(&self.shared.tool_context, &path, content.as_deref()) {
                Ok(()) => report.restored.push(path),
                Err(why) => report.not_restorable.push(format!("{path}: {why}")),
            }
        }
        true
    }
}

/// The paths changed outside keel's turns from `to` on — between one turn's end and the next
/// one's start, or after the last (`now`) — each with why; under `""`, why every path is in
/// doubt (a snapshot is missing: keel cannot tell whose a change was).
fn changed_outside_turns(
    snapshots: &crate::snapshot::Snapshots,
    to: u64,
    last_turn: u64,
    now: &str,
) -> BTreeMap<String, String> {
    let mut elsewhere = BTreeMap::new();
    for turn in to..=last_turn {
        let end = snapshots.recorded(turn, Point::End);
        let next = if turn == last_turn {
            Some(now.to_string())
        } else {
            snapshots.recorded(turn + 1, Point::Start)
        };
        let paths = match (&end, &next) {
            (Some(end), Some(next)) => snapshots.changed_paths(end, next).ok(),
            _ => None,
        };
        let Some(paths) = paths else {
            elsewhere.entry(String::new()).or_insert(format!(
                "keel has no snapshot of the workspace around turn {turn} (it was stopped), so \
                 it cannot tell its changes from anyone else's"
            ));
            continue;
        };
        let why = if turn == last_turn {
            format!("it changed after turn {turn}")
        } else {
            format!("it changed between turn {turn} and turn {}", turn + 1)
        };
        for path in paths {
            elsewhere.entry(path).or_insert_with(|| why.clone());
        }
    }
    elsewhere
}

/// The decoded rows of a stored history.
fn decoded(
    shared: &crate::Shared,
    stored: Vec<keel_store::StoredItem>,
) -> Result<Vec<(u64, Item)>, AgentError> {
    stored
        .into_iter()
        .map(|row| {
            row.item
                .map(|item| (row.turn, item))
                .map_err(|reason| AgentError::UndecodableHistory {
                    session: shared.session.id.clone(),
                    revision: row.revision,
                    reason,
                })
        })
        .collect()
}

/// Why the file at a checkpointed path is not simply what the undone calls left: someone
/// changed it between the calls or after the last one (`None`: it is theirs to undo).
fn conflict(
    chain: &[Checkpoint],
    last: &Checkpoint,
    now: &Option<String>,
    rows: &[(u64, Item)],
) -> Option<String> {
    for pair in chain.windows(2) {
        let [earlier, later] = pair else { continue };
        let comparable = matches!(later.state.as_str(), "absent" | "stored");
        if let Some(left) = &earlier.after
            && comparable
            && *left != later.hash
        {
            return Some(format!(
                "it changed between turn {} and turn {} (that edit would be lost)",
                earlier.turn, later.turn
            ));
        }
    }
    let expected = match &last.after {
        Some(left) => *left == *now,
        // A crash cut the call short: the write happened or it did not.
        None => {
            *now == last.hash
                || intended(rows, &last.call_id).is_some_and(|meant| Some(meant) == *now)
        }
    };
    (!expected).then(|| format!("it changed after turn {} wrote it", last.turn))
}

/// The content hash a `write_file` call meant to leave (none for other calls).
fn intended(rows: &[(u64, Item)], call_id: &str) -> Option<String> {
    rows.iter()
        .filter_map(|(_, item)| match item {
            Item::Assistant(assistant) => Some(assistant.tool_calls()),
            _ => None,
        })
        .flatten()
        .find(|call| call.id == call_id && call.name == keel_tools::BuiltinTool::WriteFile.name())
        .and_then(|call| serde_json::from_str::<serde_json::Value>(&call.arguments).ok())
        .and_then(|args| {
            args.get("content")
                .and_then(|content| content.as_str())
                .map(|content| keel_store::content_hash(content.as_bytes()))
        })
}

/// The calls of turns from `to` on whose effects keel has no checkpoint of: `bash` commands
/// and MCP tools (what they changed stays as it is).
fn unrestorable_calls(rows: &[(u64, Item)], to: u64, ran: &[String]) -> Vec<String> {
    use keel_tools::BuiltinTool;
    // Of keel's own tools only `bash` changes files without a checkpoint; every MCP tool may.
    let uncheckpointed = |name: &str| match BuiltinTool::ALL.iter().find(|tool| tool.name() == name)
    {
        Some(tool) => *tool == BuiltinTool::Bash,
        None => true,
    };
    rows.iter()
        .filter(|(turn, _)| *turn >= to)
        .filter_map(|(_, item)| match item {
            Item::Assistant(assistant) => Some(assistant.tool_calls()),
            _ => None,
        })
        .flatten()
        .filter(|call| {
            ran.contains(&call.id) && uncheckpointed(&call.name)
        })
        .map(|call| {
            let command = serde_json::from_str::<serde_json::Value>(&call.arguments)
                .ok()
                .and_then(|args| args.get("command").and_then(|c| c.as_str()).map(str::to_string));
            match command {
                Some(command) => format!(
                    "{}: `{command}` — what it changed is not restored (keel keeps no checkpoint of commands yet)",
                    call.name
                ),
                None => format!(
                    "{} — what it changed is not restored (keel keeps no checkpoint of it)",
                    call.name
                ),
            }
        })
        .collect()
}
