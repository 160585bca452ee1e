//! Keeping a workspace's snapshot store within its budget (`checkpoint_max_bytes`): the
//! oldest brackets go first, across the sessions that share the store, and what is pruned is
//! recorded so a rewind names it.
//!
//! Invariants:
//! - Only keel's own objects count and only they are removed; the repository's, borrowed
//!   through the alternates, are never touched.
//! - A bracket goes whole (both snapshots), oldest first by when it was taken, never the
//!   pruning session's newest (so a store the workspace itself outgrows still undoes the last
//!   command, and says at each turn's end that it is over budget); each session
//!   records the last receipt whose bracket was pruned (`pruned-<session>`), so a rewind past
//!   it says the commands' snapshots are gone instead of restoring half of what they did.
//! - What a session's index holds stays: each index is written as a tree under a temporary
//!   ref while git prunes, so the next snapshot never meets a missing object.
//! - An object younger than `GRACE` stays: another session may have just written it and not
//!   yet named it in a ref.

use super::Snapshots;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// How old an unreferenced object must be before it is removed.
const GRACE: &str = "10.minutes.ago";

/// What one pruning did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Pruned {
    /// Brackets removed.
    pub brackets: usize,
    /// The store's own objects, in bytes, before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// One bracket in the store: its session, its receipts, its ref files, when it was taken.
struct Bracket {
    session: String,
    last: u64,
    refs: Vec<PathBuf>,
    taken: SystemTime,
}

impl Snapshots {
    /// Bring the store's own objects within `max_bytes` (nothing to do: `None`).
    pub(crate) fn prune_to(&self, max_bytes: u64) -> Result<Option<Pruned>, String> {
        let objects = self.store.join("objects");
        let bytes_before = tree_bytes(&objects);
        if bytes_before <= max_bytes {
            return Ok(None);
        }
        let mut brackets = self.brackets();
        brackets.sort_by_key(|bracket| bracket.taken);
        let mut pruned = Pruned {
            bytes_before,
            bytes_after: bytes_before,
            brackets: 0,
        };
        while pruned.bytes_after > max_bytes && !brackets.is_empty() {
            // A quarter at a time: few git runs, little pruned beyond the need.
            let chunk = (brackets.len() / 4).max(1);
            let gone: Vec<Bracket> = brackets.drain(..chunk).collect();
            self.record_pruned(&gone)?;
            for bracket in &gone {
                for reference in &bracket.refs {
                    std::fs::remove_file(reference).map_err(|error| {
                        format!("cannot remove {}: {error}", reference.display())
                    })?;
                }
            }
            pruned.brackets += gone.len();
            self.prune_unreferenced()?;
            pruned.bytes_after = tree_bytes(&objects);
        }
        Ok(Some(pruned))
    }

    /// The last receipt of this session whose bracket was pruned.
    pub(crate) fn pruned_up_to(&self) -> Option<u64> {
        std::fs::read_to_string(self.store.join(format!("pruned-{}", self.session)))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Every bracket of every session in the store but this session's newest (the command
    /// just run stays undoable, whatever the budget).
    fn brackets(&self) -> Vec<Bracket> {
        let mut found: BTreeMap<(String, u64, u64), Bracket> = BTreeMap::new();
        let sessions = std::fs::read_dir(self.store.join("refs/keel"))
            .into_iter()
            .flatten()
            .flatten();
        for session in sessions {
            let Some(name) = session.file_name().to_str().map(str::to_string) else {
                continue;
            };
            for entry in std::fs::read_dir(session.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let file = entry.file_name();
                let Some(mut parts) = file.to_str().map(|file| file.split('-')) else {
                    continue;
                };
                let (Some(Ok(first)), Some(Ok(last))) = (
                    parts.next().map(str::parse::<u64>),
                    parts.next().map(str::parse::<u64>),
                ) else {
                    continue;
                };
                let taken = entry
                    .metadata()
                    .and_then(|meta| meta.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                let bracket = found
                    .entry((name.clone(), first, last))
                    .or_insert_with(|| Bracket {
                        session: name.clone(),
                        last,
                        refs: Vec::new(),
                        taken,
                    });
                bracket.refs.push(entry.path());
                bracket.taken = bracket.taken.max(taken);
            }
        }
        let newest = found
            .keys()
            .filter(|(session, _, _)| *session == self.session)
            .max_by_key(|(_, first, _)| *first)
            .cloned();
        if let Some(newest) = newest {
            found.remove(&newest);
        }
        found.into_values().collect()
    }

    /// Record, per session, the last receipt whose bracket goes.
    fn record_pruned(&self, gone: &[Bracket]) -> Result<(), String> {
        let mut highest: BTreeMap<&str, u64> = BTreeMap::new();
        for bracket in gone {
            let entry = highest.entry(bracket.session.as_str()).or_default();
            *entry = (*entry).max(bracket.last);
        }
        for (session, last) in highest {
            let file = self.store.join(format!("pruned-{session}"));
            let known = std::fs::read_to_string(&file)
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .unwrap_or(0);
            std::fs::write(&file, format!("{}\n", known.max(last)))
                .map_err(|error| format!("cannot record what was pruned: {error}"))?;
        }
        Ok(())
    }

    /// Remove the store's objects no ref and no session index holds.
    fn prune_unreferenced(&self) -> Result<(), String> {
        let kept_dir = self.store.join("refs/keel-index");
        let _ = std::fs::remove_dir_all(&kept_dir);
        std::fs::create_dir_all(&kept_dir)
            .map_err(|error| format!("cannot create {}: {error}", kept_dir.display()))?;
        for index in self.session_indexes() {
            match self.run_indexed(&index, &["write-tree"]) {
                Ok(tree) => {
                    let name = index
                        .file_name()
                        .map(|name| name.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let tree = String::from_utf8_lossy(&tree).trim().to_string();
                    std::fs::write(kept_dir.join(name), format!("{tree}\n"))
                        .map_err(|error| format!("cannot keep an index's objects: {error}"))?;
                }
                // An index naming what is gone: its session starts a fresh one.
                Err(_) => {
                    let _ = std::fs::remove_file(&index);
                }
            }
        }
        let pruned = self.run(&["prune", &format!("--expire={GRACE}")]);
        let _ = std::fs::remove_dir_all(&kept_dir);
        pruned.map(|_| ())
    }

    /// The index files of the sessions sharing the store.
    fn session_indexes(&self) -> Vec<PathBuf> {
        std::fs::read_dir(&self.store)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| {
                entry.file_name().to_str().is_some_and(|name| {
                    name.strip_prefix("index-").is_some_and(|id| {
                        !id.is_empty() && id.bytes().all(|byte| byte.is_ascii_hexdigit())
                    })
                })
            })
            .map(|entry| entry.path())
            .collect()
    }
}

/// The bytes of the regular files under `dir` (links not followed).
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => tree_bytes(&entry.path()),
            Ok(kind) if kind.is_file() => entry.metadata().map(|meta| meta.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn run(dir: &Path, program: &str, args: &[&str]) {
        let status = Command::new(program)
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(status.success(), "{program} {args:?}");
    }

    #[test]
    fn what_another_sessions_index_holds_survives_a_prune() {
        let dir = tempfile::tempdir().unwrap();
        let (workspace, home) = (dir.path().join("ws"), dir.path().join("home"));
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let workspace = workspace.canonicalize().unwrap();
        run(&workspace, "git", &["init", "-q"]);
        std::fs::write(workspace.join("kept.txt"), "only an index names me\n").unwrap();
        // Older than the index will be, so git trusts its stat and never hashes it again.
        run(&workspace, "touch", &["-d", "1 hour ago", "kept.txt"]);
        // Session A's index holds the file; no ref does.
        let holder = Snapshots::for_session(&workspace, &home, "aaaaaaaaaaaaaaaa", None).unwrap();
        holder.take_now().unwrap();
        // Old enough for git to remove, were nothing holding it.
        let objects = holder.store.join("objects");
        run(
            &workspace,
            "find",
            &[
                objects.to_str().unwrap(),
                "-type",
                "f",
                "-exec",
                "touch",
                "-d",
                "1 hour ago",
                "{}",
                "+",
            ],
        );
        // Session B prunes.
        let pruner = Snapshots::for_session(&workspace, &home, "bbbbbbbbbbbbbbbb", None).unwrap();
        pruner.prune_unreferenced().unwrap();
        assert!(
            holder.take_now().is_ok(),
            "session A's next snapshot finds every object its index names"
        );
        assert!(
            !holder.store.join("refs/keel-index").exists(),
            "the temporary refs are gone"
        );
    }
}
