//! Keeping a workspace's snapshot store within its budget (`checkpoint_max_bytes`): the
//! oldest brackets go first, across the sessions that share the store, and what is pruned is
//! recorded so a rewind names it.
//!
//! Invariants:
//! - Only keel's own objects count and only they are removed; the repository's, borrowed
//!   through the alternates, are never touched.
//! - One prune at a time, and no snapshot while it runs (the store's lock, held alone).
//! - A bracket goes whole (both snapshots), oldest first by when it was taken, never a
//!   session's newest nor one younger than `GRACE` (so a store the workspace itself outgrows
//!   still undoes the last command); a pass that frees nothing ends the pruning; each session
//!   records the last receipt whose bracket was pruned (`pruned-<session>`), so a rewind past
//!   it says the commands' snapshots are gone instead of restoring half of what they did.
//! - What a session's index holds stays: each index is written as a tree under a temporary
//!   ref while git prunes, so the next snapshot never meets a missing object.
//! - An object younger than `GRACE` stays: another session may have just written it and not
//!   yet named it in a ref. A session's index that git cannot write as a tree (it names what
//!   is gone, or a killed git left it locked) is removed: that session starts a fresh one.

use super::Snapshots;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// How old an unreferenced object, or a bracket, must be before it is removed.
const GRACE: &str = "10.minutes.ago";
const GRACE_SECS: u64 = 600;

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
        if tree_bytes(&objects) <= max_bytes {
            return Ok(None);
        }
        // Alone: no session snapshots (or prunes) while objects may go.
        let _held = self.lock_store(nix::fcntl::FlockArg::LockExclusive)?;
        let bytes_before = tree_bytes(&objects);
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
                    match std::fs::remove_file(reference) {
                        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                            return Err(format!("cannot remove {}: {error}", reference.display()));
                        }
                        _ => {}
                    }
                }
            }
            pruned.brackets += gone.len();
            self.prune_unreferenced()?;
            let after = tree_bytes(&objects);
            // What is left is held by newer brackets, indexes or young objects: stop here
            // rather than empty the store for nothing.
            let freed = after < pruned.bytes_after;
            pruned.bytes_after = after;
            if !freed {
                break;
            }
        }
        Ok((pruned.brackets > 0).then_some(pruned))
    }

    /// The last receipt of this session whose bracket was pruned.
    pub(crate) fn pruned_up_to(&self) -> Option<u64> {
        std::fs::read_to_string(self.store.join(format!("pruned-{}", self.session)))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Every bracket of every session in the store that may go: not a session's newest (the
    /// command just run stays undoable, whatever the budget), not one younger than `GRACE`.
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
                // A ref being written (`take` renames it into place) is not one yet.
                let Some(mut parts) = file
                    .to_str()
                    .filter(|file| !file.ends_with(".partial"))
                    .map(|file| file.split('-'))
                else {
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
        let newest: Vec<(String, u64, u64)> = found
            .keys()
            .fold(
                BTreeMap::<&str, &(String, u64, u64)>::new(),
                |mut newest, key| {
                    let entry = newest.entry(key.0.as_str()).or_insert(key);
                    if key.1 > entry.1 {
                        *entry = key;
                    }
                    newest
                },
            )
            .into_values()
            .cloned()
            .collect();
        for key in newest {
            found.remove(&key);
        }
        let young = SystemTime::now()
            .checked_sub(std::time::Duration::from_secs(GRACE_SECS))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        found
            .into_values()
            .filter(|bracket| bracket.taken < young)
            .collect()
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
    use crate::snapshot::Side;
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

    fn age(dir: &Path) {
        run(
            dir,
            "find",
            &[
                dir.to_str().unwrap(),
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
    }

    /// Bytes no compression shrinks.
    fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect()
    }

    #[test]
    fn young_brackets_and_each_sessions_newest_are_never_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let (workspace, home) = (dir.path().join("ws"), dir.path().join("home"));
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let workspace = workspace.canonicalize().unwrap();
        run(&workspace, "git", &["init", "-q"]);
        let a = Snapshots::for_session(&workspace, &home, "aaaaaaaaaaaaaaaa", None).unwrap();
        let b = Snapshots::for_session(&workspace, &home, "bbbbbbbbbbbbbbbb", None).unwrap();
        for (seq, name) in [(1, "one.bin"), (2, "two.bin"), (3, "three.bin")] {
            a.take(seq, seq, Side::Before).unwrap();
            std::fs::write(workspace.join(name), noise(seq, 200_000)).unwrap();
            a.take(seq, seq, Side::After).unwrap();
        }
        b.take(1, 1, Side::Before).unwrap();
        b.take(1, 1, Side::After).unwrap();
        assert_eq!(a.prune_to(0).unwrap(), None, "every bracket is young");
        age(&a.store.join("refs"));
        age(&a.store.join("objects"));
        let pruned = a.prune_to(0).unwrap().expect("old brackets go");
        assert!(pruned.brackets >= 1, "{pruned:?}");
        let firsts = |snapshots: &Snapshots| -> Vec<u64> {
            snapshots
                .points()
                .unwrap()
                .iter()
                .map(|p| p.first)
                .collect()
        };
        assert!(
            firsts(&a).contains(&3),
            "A's newest stays: {:?}",
            firsts(&a)
        );
        assert_eq!(firsts(&b), [1, 1], "B's newest stays");
        assert!(a.pruned_up_to().is_some_and(|seq| seq < 3));
        assert!(
            a.take_now().is_ok() && b.take_now().is_ok(),
            "both still snapshot"
        );
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
