//! Git snapshots of the workspace at each turn's start and end, so a rewind also undoes what
//! commands changed (PRODUCT.md §4e).
//!
//! Invariants:
//! - Only in a workspace inside a git repository of the workspace's owner. The snapshots live
//!   in keel's own bare repository (`$KEEL_HOME/snapshots/<hash of the workspace>.git`, hidden
//!   from commands), with its own index per session; the repository's objects are borrowed
//!   through `objects/info/alternates` and never written. Nothing of the repository's own
//!   state (index, refs, config, hooks) is read or changed.
//! - keel's git runs no code a repository configures: the system and global configuration are
//!   not read, keel's repository has no filters, no fsmonitor and no hooks (`/dev/null`), and
//!   the run is confined like a command (reading the workspace, writing only keel's store),
//!   bounded by `GIT_TIMEOUT`.
//! - A snapshot is a tree (what `git add -A` sees: `.gitignore`d files are not in it) named by
//!   a ref `refs/keel/<session>/<turn>/<start|end>`. A snapshot that fails is skipped: a
//!   rewind then says it cannot restore what commands did, never guesses.
//! - What a rewind restores from a snapshot goes through the file tools' guard; a link, a
//!   submodule or a path changed outside keel's turns is never written silently.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest one git run may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(20);

/// The most bytes of output kept from one git run.
const MOST_OUTPUT: usize = 64 * 1024 * 1024;

/// Where in a turn a snapshot was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Point {
    Start,
    End,
}

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::Start => "start",
            Point::End => "end",
        }
    }
}

/// One path that differs between two snapshots: what it was in the first (`None`: absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Changed {
    pub path: String,
    /// The first snapshot's entry: (mode, object id), or `None` when the path was absent.
    pub before: Option<(String, String)>,
}

/// A session's snapshots of its workspace.
#[derive(Clone, Debug)]
pub(crate) struct Snapshots {
    workspace: PathBuf,
    /// The repository's object directory, borrowed (read only).
    borrowed_objects: Option<PathBuf>,
    store: PathBuf,
    /// keel's own files, relative to the workspace, when keel's home is inside it: never in a
    /// snapshot (as pathspecs that exclude them).
    excluded: Vec<String>,
    session: String,
    sandbox: Option<keel_tools::CommandSandbox>,
}

impl Snapshots {
    /// The snapshots of a session in `workspace`, if it is inside a repository of its owner
    /// (nothing is run or written yet).
    pub(crate) fn for_session(
        workspace: &Path,
        keel_home: &Path,
        session: &str,
        sandbox: Option<keel_tools::CommandSandbox>,
    ) -> Option<Snapshots> {
        let root = crate::project_context::repository_root(workspace)?;
        let dot_git = root.join(".git");
        let borrowed_objects = dot_git
            .is_dir()
            .then(|| dot_git.join("objects"))
            .filter(|objects| objects.is_dir());
        let name = keel_store::content_hash(workspace.as_os_str().as_encoded_bytes());
        let name: String = name
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(24)
            .collect();
        let home = keel_home
            .canonicalize()
            .unwrap_or_else(|_| keel_home.to_path_buf());
        let excluded = match home.strip_prefix(workspace) {
            Ok(inside) => keel_sandbox::KEEL_HOME_PRIVATE
                .iter()
                .chain(&["cache"])
                .map(|name| format!(":(exclude,top,literal){}", inside.join(name).display()))
                .collect(),
            Err(_) => Vec::new(),
        };
        Some(Snapshots {
            workspace: workspace.to_path_buf(),
            borrowed_objects,
            excluded,
            store: keel_home.join("snapshots").join(format!("{name}.git")),
            session: session.to_string(),
            sandbox,
        })
    }

    fn reference(&self, turn: u64, point: Point) -> String {
        format!("refs/keel/{}/{turn}/{}", self.session, point.name())
    }

    /// Take a snapshot of the workspace now, recorded as `turn`'s `point`; its tree id.
    pub(crate) fn take(&self, turn: u64, point: Point) -> Result<String, String> {
        let tree = self.take_now()?;
        self.git(&["update-ref", &self.reference(turn, point), &tree])?;
        Ok(tree)
    }

    /// A snapshot of the workspace now, recorded nowhere: its tree id.
    pub(crate) fn take_now(&self) -> Result<String, String> {
        self.prepare()?;
        let mut add = vec!["add", "--all", "--ignore-errors", "--", "."];
        add.extend(self.excluded.iter().map(String::as_str));
        self.git(&add).or_else(|error| {
            // Unreadable files are left out (and said by git): the rest is the snapshot.
            if error.contains("unable to index") || error.contains("failed to insert") {
                Ok(String::new())
            } else {
                Err(error)
            }
        })?;
        let tree = self.git(&["write-tree"])?;
        Ok(tree.trim().to_string())
    }

    /// The tree `turn`'s `point` snapshot recorded, if there is one.
    pub(crate) fn recorded(&self, turn: u64, point: Point) -> Option<String> {
        if !self.store.is_dir() {
            return None;
        }
        let reference = self.reference(turn, point);
        let found = self
            .git(&["rev-parse", "--verify", "--quiet", &reference])
            .ok()?;
        let tree = found.trim();
        (!tree.is_empty()).then(|| tree.to_string())
    }

    /// The paths that differ between trees `from` and `to`, with what each was in `from`.
    pub(crate) fn changed(&self, from: &str, to: &str) -> Result<Vec<Changed>, String> {
        let raw = self.git(&["diff-tree", "-r", "-z", "--no-renames", "--raw", from, to])?;
        Ok(parse_raw(&raw))
    }

    /// The paths that differ between `from` and `to` (names only).
    pub(crate) fn changed_paths(&self, from: &str, to: &str) -> Result<BTreeSet<String>, String> {
        Ok(self
            .changed(from, to)?
            .into_iter()
            .map(|changed| changed.path)
            .collect())
    }

    /// The bytes of blob `id`.
    pub(crate) fn blob(&self, id: &str) -> Result<Vec<u8>, String> {
        self.git_bytes(&["cat-file", "blob", id])
    }

    /// The workspace path of `path` (a snapshot's, relative to the workspace).
    pub(crate) fn path_of(&self, path: &str) -> PathBuf {
        self.workspace.join(path)
    }

    /// This session's index (git's list of what the last snapshot held, with file stats).
    fn index(&self) -> PathBuf {
        self.store.join(format!("index-{}", self.session))
    }

    /// Create keel's repository for this workspace (once), borrowing the repository's objects.
    fn prepare(&self) -> Result<(), String> {
        let objects = self.store.join("objects");
        if !objects.is_dir() {
            for dir in ["objects/info", "refs", "info"] {
                std::fs::create_dir_all(self.store.join(dir))
                    .map_err(|error| format!("cannot create {}: {error}", self.store.display()))?;
            }
            let write = |name: &str, text: &str| {
                std::fs::write(self.store.join(name), text)
                    .map_err(|error| format!("cannot write {name}: {error}"))
            };
            write("HEAD", "ref: refs/heads/none\n")?;
            write(
                "config",
                "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tfsmonitor = false\n\
                 \thooksPath = /dev/null\n\tautocrlf = false\n\tsymlinks = true\n[gc]\n\tauto = 0\n",
            )?;
        }
        // A new session starts from the index another one left (its file stats spare hashing
        // every file again); each session then keeps its own, so two never wait on one lock.
        let index = self.index();
        if !index.exists()
            && let Some(latest) = std::fs::read_dir(&self.store).ok().and_then(|entries| {
                entries
                    .flatten()
                    .filter(|entry| entry.file_name().to_string_lossy().starts_with("index-"))
                    .filter_map(|entry| {
                        Some((entry.metadata().ok()?.modified().ok()?, entry.path()))
                    })
                    .max()
                    .map(|(_, path)| path)
            })
        {
            let _ = std::fs::copy(latest, &index);
        }
        if let Some(borrowed) = &self.borrowed_objects {
            let line = format!("{}\n", borrowed.display());
            let alternates = self.store.join("objects/info/alternates");
            if std::fs::read_to_string(&alternates).ok().as_deref() != Some(line.as_str()) {
                std::fs::write(&alternates, line)
                    .map_err(|error| format!("cannot write the alternates: {error}"))?;
            }
        }
        Ok(())
    }

    fn git(&self, args: &[&str]) -> Result<String, String> {
        let bytes = self.git_bytes(args)?;
        String::from_utf8(bytes).map_err(|_| "git answered in something not UTF-8".to_string())
    }

    /// Run keel's git with `args` (see the module invariants): its stdout.
    fn git_bytes(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let mut command = std::process::Command::new("git");
        command
            .args([
                "-c",
                "core.fsmonitor=false",
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.untrackedCache=false",
                "--git-dir",
            ])
            .arg(&self.store)
            .arg("--work-tree")
            .arg(&self.workspace)
            .args(args)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .env("GIT_INDEX_FILE", self.index())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let explain = match &self.sandbox {
            Some(sandbox) if sandbox.mode != keel_sandbox::SandboxMode::Off => {
                let store = self
                    .store
                    .canonicalize()
                    .unwrap_or_else(|_| self.store.clone());
                let policy = sandbox.sandbox.snapshot_policy(&store);
                let confinement = sandbox
                    .sandbox
                    .confine_policy(&mut command, &policy)
                    .map_err(|error| format!("cannot confine git: {error}"))?;
                Some(confinement)
            }
            _ => None,
        };
        let mut child = keel_sandbox::on_lasting_thread(move || command.spawn())
            .and_then(|spawned| spawned)
            .map_err(|error| match &explain {
                Some(confinement) => confinement.explain(error).to_string(),
                None => format!("cannot run git: {error}"),
            })?;
        // Both pipes drained while the run is watched, so a large answer cannot stall it.
        let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(pipe) = pipe {
                    let _ = pipe.take(MOST_OUTPUT as u64 + 1).read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<_>));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<_>));
        let deadline = std::time::Instant::now() + GIT_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("git took longer than {} s", GIT_TIMEOUT.as_secs()));
                }
                Err(error) => return Err(format!("git failed: {error}")),
            }
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        if !status.success() {
            let said = String::from_utf8_lossy(&stderr);
            let said: String = said.chars().take(400).collect();
            return Err(format!("git {}: {}", args[0], said.trim()));
        }
        if stdout.len() > MOST_OUTPUT {
            return Err(format!(
                "git {} answered more than {MOST_OUTPUT} bytes",
                args[0]
            ));
        }
        Ok(stdout)
    }
}

/// `git diff-tree -r -z --raw` output: `:oldmode newmode oldid newid status\0path\0` each.
fn parse_raw(raw: &str) -> Vec<Changed> {
    let mut fields = raw.split('\0');
    let mut changes = Vec::new();
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let words: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let [old_mode, _new_mode, old_id, _new_id, _status] = words[..] else {
            break;
        };
        let before = (old_mode != "000000").then(|| (old_mode.to_string(), old_id.to_string()));
        changes.push(Changed {
            path: path.to_string(),
            before,
        });
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_diff_lines_give_each_path_and_what_it_was() {
        let zero = "0".repeat(40);
        let (a, b) = ("a".repeat(40), "b".repeat(40));
        let raw = format!(
            ":100644 100644 {a} {b} M\0src/x.rs\0:000000 100644 {zero} {b} A\0new file\0\
             :100644 000000 {a} {zero} D\0gone.txt\0"
        );
        let changes = parse_raw(&raw);
        assert_eq!(changes.len(), 3);
        assert_eq!(changes[0].path, "src/x.rs");
        assert_eq!(changes[0].before, Some(("100644".into(), a.clone())));
        assert_eq!(changes[1].path, "new file");
        assert_eq!(changes[1].before, None);
        assert_eq!(changes[2].before, Some(("100644".into(), a)));
        assert!(parse_raw("").is_empty());
    }
}
