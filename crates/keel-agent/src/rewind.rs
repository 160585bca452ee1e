//! Rewind: the files and the conversation of a session as they were before a turn.
//!
//! Invariants:
//! - Files come back from the checkpoints of the file tools: the earliest pre-image of each
//!   path the undone turns changed. A path a command changed too is put in one line with the
//!   command's snapshots (`command_steps`), so it comes back as it was before whichever came
//!   first. A file that differs from what the last of keel's changes left, or changed between
//!   two of them, is the user's (or another program's) edit: a conflict, listed and left alone
//!   unless forced.
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

use crate::agent::Agent;
use crate::checkpoint::seen_hash;
use crate::command_steps::{CommandSteps, command_steps};
use crate::error::AgentError;
use crate::rewrite::{Rewrite, commit};
use crate::snapshot::{Point, Side};
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

/// The turns a rewind undoes: from `to` on, their first receipt, the history and receipts.
struct Undone<'a> {
    to: u64,
    first_seq: Option<u64>,
    rows: &'a [(u64, Item)],
    receipts: &'a [keel_types::ToolReceipt],
}

/// What a rewind did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RewindReport {
    /// The files written back, or removed (they did not exist before).
    pub restored: Vec<String>,
    /// Files left alone: they changed after the turn that last wrote them (path, why).
    pub conflicts: Vec<(String, String)>,
    /// Files written back after their bytes as they were were kept — they changed while one of
    /// keel's commands ran, so an edit of a person's may be among what was undone (path, the
    /// command that prints the kept bytes).
    pub saved: Vec<(String, String)>,
    /// What keel cannot undo: commands and MCP calls of the undone turns, files not kept.
    pub not_restorable: Vec<String>,
    /// The history revision the conversation now is (none: not rewound, or nothing to drop).
    pub revision: Option<u64>,
}

/// The session held between turns: taken where the order of requests is decided, so a rewind
/// done later (on another thread) still comes before anything asked after it.
pub struct BetweenTurns(tokio::sync::OwnedMutexGuard<crate::agent_state::AgentState>);

impl Agent {
    /// Hold the session for a rewind; refused while a turn (or another rewind) runs.
    pub(crate) fn hold_between_turns(&self) -> Result<BetweenTurns, AgentError> {
        let agent = self;
        agent
            .state
            .clone()
            .try_lock_owned()
            .map(BetweenTurns)
            .map_err(|_| AgentError::Busy(agent.session.id.clone()))
    }

    /// The latest turn the conversation still holds (what `/undo` undoes); none when every
    /// turn was undone or there was none.
    pub(crate) fn last_turn_in_history(&self) -> Result<Option<u64>, AgentError> {
        let lease = self.hold_between_turns()?;
        self.last_turn_held(&lease)
    }

    /// `last_turn_in_history`, with the session held.
    pub(crate) fn last_turn_held(&self, _held: &BetweenTurns) -> Result<Option<u64>, AgentError> {
        let agent = self;
        Ok(agent
            .services
            .store
            .items(&agent.session.id)?
            .into_iter()
            .filter(|row| !matches!(row.item, Ok(Item::Context(_))))
            .map(|row| row.turn)
            .max())
    }

    /// Undo turn `to` and every turn after it: files, conversation, or both (`force`: also
    /// files changed since).
    pub(crate) fn rewind(
        &self,
        to: u64,
        scope: RewindScope,
        force: bool,
    ) -> Result<RewindReport, AgentError> {
        let mut lease = self.hold_between_turns()?;
        self.rewind_held(&mut lease, to, scope, force)
    }

    /// `rewind`, with the session held.
    pub(crate) fn rewind_held(
        &self,
        lease: &mut BetweenTurns,
        to: u64,
        scope: RewindScope,
        force: bool,
    ) -> Result<RewindReport, AgentError> {
        let agent = self;
        let state = &mut *lease.0;
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
        let session = agent.session.id.as_str();
        let rows = decoded(agent, agent.services.store.items(session)?)?;
        // A turn undone earlier is gone: going back to it would bring back what undoing it
        // took away. (A turn a summary stands for is still there, in an earlier revision.)
        let present = rows.iter().any(|(turn, item)| {
            (*turn == to && !matches!(item, Item::Context(_)))
                || (*turn > to && matches!(item, Item::Summary(_)))
        });
        if !present {
            return Err(AgentError::CannotRewind(format!(
                "turn {to} is not in the conversation any more (undone earlier, or it left \
                 nothing in it); rewind to a turn it holds"
            )));
        }
        // The turns before `to`, verbatim: from an earlier revision when a compaction since
        // summarised them.
        let before = if scope.conversation {
            match agent.services.store.revision_holding_before(session, to)? {
                Some(revision) if revision == state.revision => rows.clone(),
                Some(revision) => decoded(
                    agent,
                    agent.services.store.items_of_revision(session, revision)?,
                )?,
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
        let receipts = agent.services.store.receipts(session)?;
        let mut covered = BTreeSet::new();
        if scope.code {
            let first_seq = receipts
                .iter()
                .filter(|receipt| receipt.turn >= to)
                .map(|receipt| receipt.seq)
                .min();
            let undone = Undone {
                to,
                first_seq,
                rows: &rows,
                receipts: &receipts,
            };
            let checkpointed = self.restore_files(&undone, force, &mut report)?;
            covered = self.restore_from_snapshots(to, first_seq, force, &checkpointed, &mut report);
        }
        // Only calls that ran (a denied or never-started one changed nothing), and only those
        // no snapshots bracketed.
        let ran: Vec<String> = receipts
            .into_iter()
            .filter(|receipt| {
                !matches!(
                    receipt.state,
                    keel_types::ReceiptState::Denied
                        | keel_types::ReceiptState::NotStarted
                        | keel_types::ReceiptState::Pending
                ) && !covered.contains(&receipt.seq)
            })
            .map(|receipt| receipt.call_id)
            .collect();
        report
            .not_restorable
            .extend(unrestorable_calls(&rows, to, &ran));
        if !covered.is_empty() && scope.code {
            report.not_restorable.push(
                "what commands changed in files git ignores (.gitignore), in untracked files \
                 over 16 MiB or outside the workspace is not restored"
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
                let tokens = crate::compaction::fixed_tokens(agent, state)
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
                report.revision = Some(commit(agent, state, rewrite, None, |_| Vec::new())?);
                state.interrupted = false;
            }
        }
        agent.emit(
            None,
            keel_types::EventBody::SessionRewound {
                to_turn: to,
                code: scope.code,
                conversation: scope.conversation,
                revision: report.revision,
                conflicts: report
                    .conflicts
                    .iter()
                    .map(|(path, _)| path.clone())
                    .collect(),
            },
        );
        Ok(report)
    }

    /// Write back (or remove) what the turns from `to` on changed through the file tools
    /// (from its earliest state: before a command of those turns, where one changed it
    /// first); the paths their checkpoints cover.
    fn restore_files(
        &self,
        undone: &Undone<'_>,
        force: bool,
        report: &mut RewindReport,
    ) -> Result<BTreeSet<String>, AgentError> {
        let agent = self;
        let session = agent.session.id.as_str();
        // Per path: its checkpoints from `to` on that no rewind restored yet, in order.
        let mut by_path: BTreeMap<String, Vec<Checkpoint>> = BTreeMap::new();
        for checkpoint in agent.services.store.checkpoints(session)? {
            if checkpoint.turn >= undone.to && !checkpoint.undone {
                by_path
                    .entry(checkpoint.path.clone())
                    .or_default()
                    .push(checkpoint);
            }
        }
        let checkpointed: BTreeSet<String> = by_path.keys().cloned().collect();
        let commands = match (&agent.snapshots, undone.first_seq) {
            (Some(snapshots), Some(first_seq)) => {
                command_steps(snapshots, first_seq, undone.receipts, checkpointed.iter())
                    .unwrap_or_else(|why| {
                        report.not_restorable.push(format!(
                            "what commands changed in files keel's file tools also changed: \
                             keel could not read its snapshots ({why})"
                        ));
                        CommandSteps::default()
                    })
            }
            _ => CommandSteps::default(),
        };
        for (path, mut chain) in by_path {
            // Only the file tools' own records are marked undone.
            let seqs: Vec<u64> = chain.iter().map(|checkpoint| checkpoint.seq).collect();
            if let Some(steps) = commands.steps.get(&path) {
                chain.extend(steps.iter().cloned());
                chain.sort_by_key(|step| step.seq);
            }
            let (Some(first), Some(last)) = (chain.first(), chain.last()) else {
                continue;
            };
            // The earliest state is a command's pre-image where a command changed it first.
            let from_command = commands.contents.get(&(path.clone(), first.seq));
            let content = match (first.state.as_str(), &first.hash) {
                ("absent", _) => None,
                ("stored", Some(hash)) => match from_command
                    .map(|(bytes, _)| Ok(Some(bytes.clone())))
                    .unwrap_or_else(|| agent.services.store.blob(hash))?
                {
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
            let now = seen_hash(Path::new(&path), &agent.services.tool_services);
            // Already as it was (a rewind done twice): nothing to do.
            if now == first.hash {
                agent.services.store.mark_undone(session, &path, &seqs)?;
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
            let conflicted = conflict(&chain, last, &now, undone.rows);
            if let Some(why) = &conflicted
                && !force
            {
                report
                    .conflicts
                    .push((path, format!("{why}; --force restores it anyway")));
                continue;
            }
            // A command changed it too (a person's edit may be in that), or it is forced past
            // a conflict: what it holds now is kept first.
            let by_command = commands
                .steps
                .get(&path)
                .is_some_and(|steps| !steps.is_empty());
            let kept = if by_command || conflicted.is_some() {
                match self.keep_first(&path, content.as_deref(), undone.to, force, report) {
                    Some(kept) => kept,
                    None => continue,
                }
            } else {
                None
            };
            let restored =
                keel_tools::restore_file(&agent.services.tool_services, &path, content.as_deref())
                    .and_then(|()| match (from_command, &content) {
                        (Some((_, executable)), Some(_)) => {
                            set_executable(Path::new(&path), *executable)
                        }
                        _ => Ok(()),
                    });
            match restored {
                Ok(()) => {
                    agent.services.store.mark_undone(session, &path, &seqs)?;
                    report.done(path, kept);
                }
                Err(why) => report.not_restorable.push(format!("{path}: {why}")),
            }
        }
        Ok(checkpointed)
    }

    /// Undo what the commands from receipt `first_seq` on (the undone turns' first) changed
    /// that no checkpoint covers, from the snapshots bracketing them; the receipts (by
    /// sequence number) whose commands a snapshot covered.
    fn restore_from_snapshots(
        &self,
        to: u64,
        first_seq: Option<u64>,
        force: bool,
        checkpointed: &BTreeSet<String>,
        report: &mut RewindReport,
    ) -> BTreeSet<u64> {
        let agent = self;
        let Some(snapshots) = &agent.snapshots else {
            return BTreeSet::new();
        };
        let (Some(first_seq), Ok(points)) = (first_seq, snapshots.points()) else {
            return BTreeSet::new();
        };
        if let Some(pruned) = snapshots
            .pruned_up_to()
            .filter(|pruned| *pruned >= first_seq)
        {
            report.not_restorable.push(format!(
                "keel pruned the snapshots of the commands up to call number {pruned} to keep \
                 its store within checkpoint_max_bytes: what they changed is not restored"
            ));
        }
        let points: Vec<Point> = points
            .into_iter()
            .filter(|point| point.first >= first_seq)
            .collect();
        let Some(base) = points.first().map(|point| point.tree.clone()) else {
            return BTreeSet::new();
        };
        let covered: BTreeSet<u64> = points
            .windows(2)
            .filter(|pair| is_bracket(&pair[0], &pair[1]))
            .flat_map(|pair| pair[0].first..=pair[0].last)
            .collect();
        let compared = snapshots
            .take_now_withholding()
            .and_then(|(now, withheld_now)| {
                let elsewhere = changed_outside_commands(snapshots, &points, &now)?;
                Ok((snapshots.changed(&base, &now)?, elsewhere, withheld_now))
            });
        let (changed, elsewhere, withheld_now) = match compared {
            Ok(found) => found,
            Err(why) => {
                report.not_restorable.push(format!(
                    "what commands changed: keel could not compare the workspace with its \
                     snapshots ({why})"
                ));
                return BTreeSet::new();
            }
        };
        // Files that held one of keel's secrets were never copied into a snapshot: what
        // commands did to them cannot be undone, and their snapshot entries are stale.
        let mut withheld = snapshots.withheld_since(first_seq);
        withheld.extend(withheld_now);
        for path in &withheld {
            report.not_restorable.push(format!(
                "{}: it holds one of keel's secrets, which keel keeps out of its snapshots; \
                 what commands did to it is not restored",
                snapshots.path_of(path).display()
            ));
        }
        for change in changed
            .into_iter()
            .filter(|change| !withheld.contains(&change.path))
        {
            let on_disk = snapshots.path_of(&change.path);
            let Some(path) = on_disk.to_str().map(str::to_string) else {
                report.not_restorable.push(format!(
                    "{}: its name is not UTF-8; keel does not restore it",
                    on_disk.display()
                ));
                continue;
            };
            if checkpointed.contains(&path) {
                continue;
            }
            let changed_elsewhere = elsewhere.get(&change.path).or(elsewhere.get(&Vec::new()));
            if let Some(why) = changed_elsewhere
                && !force
            {
                report
                    .conflicts
                    .push((path, format!("{why}; --force restores it anyway")));
                continue;
            }
            let (content, executable) = match &change.before {
                None => (None, false),
                Some((mode, id)) if mode == "100644" || mode == "100755" => {
                    match snapshots.blob(id) {
                        Ok(bytes) => (Some(bytes), mode == "100755"),
                        Err(why) => {
                            report.not_restorable.push(format!("{path}: {why}"));
                            continue;
                        }
                    }
                }
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
            // It changed while a command ran: a person's edit may be in it. Kept first.
            let Some(kept) = self.keep_first(&path, content.as_deref(), to, force, report) else {
                continue;
            };
            let restored =
                keel_tools::restore_file(&agent.services.tool_services, &path, content.as_deref())
                    .and_then(|()| match content {
                        Some(_) => set_executable(&on_disk, executable),
                        None => Ok(()),
                    });
            match restored {
                Ok(()) => report.done(path, kept),
                Err(why) => report.not_restorable.push(format!("{path}: {why}")),
            }
        }
        covered
    }
}

/// Whether `before` and `after` bracket one command batch.
fn is_bracket(before: &Point, after: &Point) -> bool {
    before.side == Side::Before
        && after.side == Side::After
        && (before.first, before.last) == (after.first, after.last)
}

/// The paths that changed outside the bracketed commands from the first snapshot on — between
/// two batches, or after the last (`now`) — each with why; under the empty path, why every
/// path is in doubt (a bracket keel did not close: a command it did not see end).
fn changed_outside_commands(
    snapshots: &crate::snapshot::Snapshots,
    points: &[Point],
    now: &str,
) -> Result<BTreeMap<Vec<u8>, String>, String> {
    let mut elsewhere = BTreeMap::new();
    let now = Point {
        first: u64::MAX,
        last: u64::MAX,
        side: Side::Before,
        tree: now.to_string(),
    };
    let chain: Vec<&Point> = points.iter().chain(std::iter::once(&now)).collect();
    for pair in chain.windows(2) {
        let (from, to) = (pair[0], pair[1]);
        if is_bracket(from, to) {
            continue;
        }
        if from.side == Side::Before {
            elsewhere.entry(Vec::new()).or_insert_with(|| {
                "keel did not see one of its commands end (it was stopped), so it cannot tell \
                 what the command changed from what anyone else did"
                    .to_string()
            });
            continue;
        }
        let why = if to.first == u64::MAX {
            "it changed after keel's last command (by you, or by something keel does not keep)"
        } else {
            "it changed between keel's commands (by you, or by something keel does not keep)"
        };
        for path in snapshots.changed_paths(&from.tree, &to.tree)? {
            elsewhere.entry(path).or_insert_with(|| why.to_string());
        }
    }
    Ok(elsewhere)
}

/// Give the file at `path` (just restored, never a link) its executable bits as they were.
fn set_executable(path: &Path, executable: bool) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = path
        .symlink_metadata()
        .map_err(|error| format!("cannot read its mode: {error}"))?;
    if !meta.is_file() {
        return Err("it is not a file now".into());
    }
    let mode = meta.permissions().mode();
    let wanted = if executable {
        mode | ((mode & 0o444) >> 2)
    } else {
        mode & !0o111
    };
    if wanted != mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(wanted))
            .map_err(|error| format!("cannot set its mode: {error}"))?;
    }
    Ok(())
}

/// The decoded rows of a stored history.
fn decoded(
    agent: &crate::agent::Agent,
    stored: Vec<keel_store::StoredItem>,
) -> Result<Vec<(u64, Item)>, AgentError> {
    stored
        .into_iter()
        .map(|row| {
            row.item
                .map(|item| (row.turn, item))
                .map_err(|reason| AgentError::UndecodableHistory {
                    session: agent.session.id.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Snapshots;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(["-c", "user.email=t@example.org", "-c", "user.name=t"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[test]
    fn only_what_changed_inside_a_command_bracket_is_the_commands() {
        let dir = tempfile::tempdir().unwrap();
        let (workspace, home) = (dir.path().join("ws"), dir.path().join("home"));
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let workspace = workspace.canonicalize().unwrap();
        git(&workspace, &["init", "-q"]);
        std::fs::write(workspace.join("tracked.txt"), "one\n").unwrap();
        git(&workspace, &["add", "."]);
        git(&workspace, &["commit", "-qm", "start"]);
        let snapshots =
            Snapshots::for_session(&workspace, &home, "0123456789abcdef", None).unwrap();
        snapshots.take(1, 1, Side::Before).unwrap();
        std::fs::write(workspace.join("made.txt"), "by the command\n").unwrap();
        snapshots.take(1, 1, Side::After).unwrap();
        // Someone edits while the model thinks, between two commands.
        std::fs::write(workspace.join("tracked.txt"), "by hand\n").unwrap();
        snapshots.take(2, 2, Side::Before).unwrap();
        snapshots.take(2, 2, Side::After).unwrap();
        let points = snapshots.points().unwrap();
        assert_eq!(points.len(), 4);
        let now = snapshots.take_now().unwrap();
        let elsewhere = changed_outside_commands(&snapshots, &points, &now).unwrap();
        assert!(
            elsewhere.contains_key(b"tracked.txt".as_slice()),
            "{elsewhere:?}"
        );
        assert!(
            !elsewhere.contains_key(b"made.txt".as_slice()),
            "{elsewhere:?}"
        );
        // A bracket left open (a crash in a command) puts every path in doubt.
        snapshots.take(3, 3, Side::Before).unwrap();
        let points = snapshots.points().unwrap();
        let elsewhere = changed_outside_commands(&snapshots, &points, &now).unwrap();
        assert!(elsewhere.contains_key(b"".as_slice()), "{elsewhere:?}");
    }
}
