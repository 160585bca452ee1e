//! Git snapshots of the workspace around each command keel runs (`bash`, MCP calls), so a
//! rewind also undoes what commands changed — and only that (docs/features.md#command-snapshots).
//!
//! Invariants:
//! - Only in a workspace inside a git repository of the workspace's owner. The snapshots live
//!   in keel's own bare repository (`$KEEL_HOME/snapshots/<hash of the workspace>.git`, hidden
//!   from commands), with a private index per session (first seeded from the repository's own
//!   index, read only, so unchanged files are never hashed again); the repository's objects
//!   are borrowed through `objects/info/alternates`. Nothing of the repository's own state
//!   (index, refs, config, hooks) is written.
//! - keel's git runs no code a repository configures: the git program is found on an absolute
//!   `PATH` entry outside the workspace; the system and global configuration are not read;
//!   keel's repository has no filters, no fsmonitor and no hooks (`/dev/null`), and its
//!   `info/attributes` turns every conversion off, so a snapshot holds the bytes on disk; the
//!   run is confined like a command (reading the workspace, writing only keel's store),
//!   bounded by `GIT_TIMEOUT`.
//! - A command batch is bracketed: a snapshot before it starts and one after it ends, named
//!   `refs/keel/<session>/<first seq>-<last seq>-<before|after>` by its receipts' sequence
//!   numbers (never reused, so a ref left by a crash is never mistaken for a new one). What
//!   changed inside a bracket is the command's; what changed anywhere else is not keel's to
//!   undo. A snapshot that fails leaves its bracket open: the rewind then cannot tell, and
//!   says so.
//! - A snapshot is what `git add -A` sees in the workspace (files the repository's ignore
//!   files, its `info/exclude` or the user's global `git/ignore` leave out, and files it
//!   cannot read, are not in it); keel's own files are never in it, nor a file holding one of
//!   keel's secrets (`withheld`): the store never holds a secret.
//! - A store an earlier keel made (without `FORMAT` in it) may hold a secret: it is removed,
//!   whole, the first time this keel snapshots its workspace, and made again.

mod bracket;
mod format;
mod prune;
mod status;
mod withheld;

pub(crate) use bracket::{Bracketed, CommandBracket};
use format::FORMAT;
pub use format::retire_old_stores;

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest one git run may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(20);

/// The most bytes of output kept from one git run.
const MOST_OUTPUT: usize = 64 * 1024 * 1024;

/// What keel's repository says about every path: no conversion, filter or driver.
const NO_CONVERSION: &str = "* -text -eol -crlf -ident -filter -diff -merge \
                             -working-tree-encoding\n";

/// A snapshot being taken: its `snapshot/failed` event if it fails.
pub(crate) type PendingSnapshot = tokio::task::JoinHandle<Option<keel_types::EventBody>>;

/// Which side of a command batch a snapshot was taken on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Before,
    After,
}

/// One recorded snapshot: the batch's receipt sequence numbers, its side, its tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Point {
    pub first: u64,
    pub last: u64,
    pub side: Side,
    pub tree: String,
}

/// One path that differs between two snapshots (relative to the repository root, as bytes):
/// what it was in the first and what it is in the second (`None`: absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Changed {
    pub path: Vec<u8>,
    /// git's letter for the change (`M`, `A`, `D`, `T`).
    pub status: u8,
    /// The first snapshot's entry: (mode, object id), or `None` when the path was absent.
    pub before: Option<(String, String)>,
    /// The second snapshot's entry, the same way.
    pub after: Option<(String, String)>,
}

/// A session's snapshots of its workspace.
#[derive(Clone, Debug)]
pub(crate) struct Snapshots {
    git: PathBuf,
    /// The repository's root: the work tree keel's git sees.
    root: PathBuf,
    /// The workspace, as a pathspec from the root.
    scope: String,
    /// The repository's git directory and common directory (they differ in a worktree).
    git_dir: PathBuf,
    common_dir: PathBuf,
    /// The repository's index (the first one a session starts from) and objects (borrowed).
    repository_index: PathBuf,
    borrowed_objects: PathBuf,
    /// The repository's `info/exclude` (data: what the user keeps out of git).
    repository_excludes: PathBuf,
    /// The user's global ignore file at git's default place (data, like the above).
    global_excludes: Option<PathBuf>,
    store: PathBuf,
    /// keel's own files inside the work tree, as pathspecs that exclude them.
    excluded: Vec<String>,
    session: String,
    sandbox: Option<keel_tools::CommandSandbox>,
    /// keel's secrets: a file holding one is never copied into the store.
    secrets: keel_types::Secrets,
}

impl Snapshots {
    /// The snapshots of a session in `workspace`, if it is inside a repository of its owner
    /// and git is installed (nothing is run or written yet).
    pub(crate) fn for_session(
        workspace: &Path,
        keel_home: &Path,
        session: &str,
        sandbox: Option<keel_tools::CommandSandbox>,
    ) -> Option<Snapshots> {
        let root = crate::instructions::repository_root(workspace)?.to_path_buf();
        let (git_dir, common_dir) = repository_dirs(&root)?;
        let git = git_program(workspace)?;
        let home = keel_home
            .canonicalize()
            .unwrap_or_else(|_| keel_home.to_path_buf());
        let literal = |path: &Path| -> Option<String> {
            let text = path.to_str()?;
            // Paths keel writes into a file git reads line by line, or names in a pathspec.
            (!text.contains(['\n', '\r']) && !text.starts_with('"')).then(|| text.to_string())
        };
        let relative = literal(workspace.strip_prefix(&root).ok()?)?;
        let scope = if relative.is_empty() {
            ":(top)".to_string()
        } else {
            format!(":(top,literal){relative}")
        };
        let excluded = match home.strip_prefix(&root) {
            Ok(inside) => {
                let inside = literal(inside)?;
                keel_sandbox::KEEL_HOME_PRIVATE
                    .iter()
                    .chain(&["cache"])
                    .map(|name| {
                        let path = Path::new(&inside).join(name);
                        format!(":(exclude,top,literal){}", path.display())
                    })
                    .collect()
            }
            Err(_) => Vec::new(),
        };
        let borrowed_objects = common_dir.join("objects");
        literal(&borrowed_objects)?;
        let name = keel_store::content_hash(workspace.as_os_str().as_encoded_bytes());
        let name: String = name
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(24)
            .collect();
        Some(Snapshots {
            git,
            root,
            scope,
            repository_index: git_dir.join("index"),
            git_dir: git_dir.clone(),
            common_dir: common_dir.clone(),
            borrowed_objects,
            repository_excludes: common_dir.join("info/exclude"),
            global_excludes: global_excludes_file(),
            store: home.join("snapshots").join(format!("{name}.git")),
            excluded,
            session: session.to_string(),
            sandbox,
            secrets: keel_types::Secrets::default(),
        })
    }

    /// These snapshots, keeping every file that holds one of `secrets` out of the store.
    pub(crate) fn keeping_out(self, secrets: keel_types::Secrets) -> Snapshots {
        Snapshots { secrets, ..self }
    }

    fn reference(&self, first: u64, last: u64, side: Side) -> String {
        let side = match side {
            Side::Before => "before",
            Side::After => "after",
        };
        format!("refs/keel/{}/{first:010}-{last:010}-{side}", self.session)
    }

    /// Take a snapshot now, recorded on `side` of the batch of receipts `first..=last` (a
    /// loose ref file, written whole: one git run fewer per snapshot).
    pub(crate) fn take(&self, first: u64, last: u64, side: Side) -> Result<String, String> {
        self.prepare()?;
        // Held until the ref names the tree: a prune never sees the tree unnamed.
        let _held = self.lock_store(nix::fcntl::FlockArg::LockShared)?;
        let (tree, withheld) = self.tree_now()?;
        self.record_withheld(first, &withheld)
            .map_err(|error| format!("cannot record what the snapshot left out: {error}"))?;
        let reference = self.store.join(self.reference(first, last, side));
        let written = (|| -> std::io::Result<()> {
            if let Some(parent) = reference.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let partial = reference.with_extension("partial");
            std::fs::write(&partial, format!("{tree}\n"))?;
            std::fs::rename(&partial, &reference)
        })();
        written.map_err(|error| format!("cannot record the snapshot: {error}"))?;
        Ok(tree)
    }

    /// A snapshot of the workspace now, recorded nowhere: its tree id.
    pub(crate) fn take_now(&self) -> Result<String, String> {
        self.take_now_withholding().map(|(tree, _)| tree)
    }

    /// `take_now`, with the paths it left out for holding one of keel's secrets.
    pub(crate) fn take_now_withholding(&self) -> Result<(String, Vec<Vec<u8>>), String> {
        self.prepare()?;
        // Agent with other sessions' snapshots; a prune waits for it and holds it alone.
        let _held = self.lock_store(nix::fcntl::FlockArg::LockShared)?;
        self.tree_now()
    }

    /// The workspace's tree now (the store prepared and locked), and what it withheld.
    fn tree_now(&self) -> Result<(String, Vec<Vec<u8>>), String> {
        let withheld = match self.add() {
            Err(error) if is_corrupt_index(&error) => {
                // An index left broken (a killed run): start again from nothing.
                let _ = std::fs::remove_file(self.index());
                self.add()?
            }
            other => other?,
        };
        let tree = self.git(&["write-tree"])?;
        Ok((tree.trim().to_string(), withheld))
    }

    /// Bring the index up to the workspace; the paths left out for holding a secret. A file
    /// git cannot add (unreadable, a repository inside with no commit) is left as the index
    /// had it; only a fatal error fails.
    fn add(&self) -> Result<Vec<Vec<u8>>, String> {
        let mut add: Vec<OsString> = [
            "-c",
            "advice.addEmbeddedRepo=false",
            "add",
            "--all",
            "--ignore-errors",
            "--",
            self.scope.as_str(),
        ]
        .iter()
        .map(OsString::from)
        .chain(self.excluded.iter().map(OsString::from))
        .collect();
        let left_out = self.left_out();
        add.extend(left_out.pathspecs);
        match self.run(&add) {
            Ok(_) => Ok(left_out.withheld),
            Err(error) if !error.contains("fatal:") => Ok(left_out.withheld),
            Err(error) => Err(error),
        }
    }

    /// The snapshots recorded for this session, in the order they were taken.
    pub(crate) fn points(&self) -> Result<Vec<Point>, String> {
        if !self.store.join("objects").is_dir() {
            return Ok(Vec::new());
        }
        let prefix = format!("refs/keel/{}/", self.session);
        let listed = self.git(&["for-each-ref", "--format=%(refname) %(objectname)", &prefix])?;
        let mut points: Vec<Point> = listed
            .lines()
            .filter_map(|line| {
                let (name, tree) = line.split_once(' ')?;
                let mut parts = name.strip_prefix(&prefix)?.split('-');
                let first = parts.next()?.parse().ok()?;
                let last = parts.next()?.parse().ok()?;
                let side = match parts.next()? {
                    "before" => Side::Before,
                    "after" => Side::After,
                    _ => return None,
                };
                Some(Point {
                    first,
                    last,
                    side,
                    tree: tree.to_string(),
                })
            })
            .collect();
        points.sort_by_key(|point| (point.first, point.side == Side::After));
        Ok(points)
    }

    /// The paths that differ between trees `from` and `to`, with what each was in `from`.
    pub(crate) fn changed(&self, from: &str, to: &str) -> Result<Vec<Changed>, String> {
        let raw = self.run(&["diff-tree", "-r", "-z", "--no-renames", "--raw", from, to])?;
        Ok(parse_raw(&raw))
    }

    /// Of `paths` (relative to the root), those that differ between trees `from` and `to`.
    pub(crate) fn changed_among(
        &self,
        from: &str,
        to: &str,
        paths: &[Vec<u8>],
    ) -> Result<Vec<Changed>, String> {
        let mut args: Vec<OsString> = [
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--raw",
            from,
            to,
            "--",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        args.extend(paths.iter().map(|path| {
            let mut spec = OsString::from(":(top,literal)");
            spec.push(OsStr::from_bytes(path));
            spec
        }));
        Ok(parse_raw(&self.run(&args)?))
    }

    /// `path` (on disk) as a snapshot names it: relative to the repository's root.
    pub(crate) fn relative(&self, path: &Path) -> Option<Vec<u8>> {
        path.strip_prefix(&self.root)
            .ok()
            .map(|relative| relative.as_os_str().as_bytes().to_vec())
    }

    /// The paths that differ between `from` and `to` (names only).
    pub(crate) fn changed_paths(&self, from: &str, to: &str) -> Result<BTreeSet<Vec<u8>>, String> {
        Ok(self
            .changed(from, to)?
            .into_iter()
            .map(|changed| changed.path)
            .collect())
    }

    /// The bytes of blob `id`.
    pub(crate) fn blob(&self, id: &str) -> Result<Vec<u8>, String> {
        self.run(&["cat-file", "blob", id])
    }

    /// Where a snapshot's `path` is on disk.
    pub(crate) fn path_of(&self, path: &[u8]) -> PathBuf {
        self.root.join(OsStr::from_bytes(path))
    }

    /// This session's index (git's list of what the last snapshot held, with file stats).
    fn index(&self) -> PathBuf {
        self.store.join(format!("index-{}", self.session))
    }

    /// Create keel's repository for this workspace (once, whole or not at all) and this
    /// session's index.
    fn prepare(&self) -> Result<(), String> {
        if self.store.join("objects").is_dir() && !self.store.join(FORMAT.0).is_file() {
            self.retire_old_store()?;
        }
        if !self.store.join("objects").is_dir() {
            let parent = self.store.parent().unwrap_or(Path::new("."));
            keel_types::private_files::create_private_dir(parent)
                .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
            let building = parent.join(format!(".building-{}", self.session));
            let _ = std::fs::remove_dir_all(&building);
            let made = (|| -> std::io::Result<()> {
                for dir in ["objects/info", "refs", "info"] {
                    std::fs::create_dir_all(building.join(dir))?;
                }
                std::fs::write(building.join("HEAD"), "ref: refs/heads/none\n")?;
                std::fs::write(
                    building.join("config"),
                    "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tfsmonitor = false\n\
                     \thooksPath = /dev/null\n\tautocrlf = false\n\tsymlinks = true\n\
                     [gc]\n\tauto = 0\n",
                )?;
                std::fs::write(building.join("info/attributes"), NO_CONVERSION)?;
                std::fs::write(building.join(FORMAT.0), FORMAT.1)?;
                std::fs::rename(&building, &self.store)
            })();
            if made.is_err() {
                let _ = std::fs::remove_dir_all(&building);
            }
            // Another session may have made it first; either way it must be there now.
            if !self.store.join("objects").is_dir() {
                return Err(format!("cannot create {}", self.store.display()));
            }
        }
        // The user's global ignore patterns, as keel's own `info/exclude` (patterns only:
        // the global configuration that names another file is not read).
        let excluded = self
            .global_excludes
            .as_deref()
            .and_then(|path| read_regular(path, MOST_EXCLUDES))
            .unwrap_or_default();
        let exclude = self.store.join("info/exclude");
        if std::fs::read(&exclude).ok().as_deref() != Some(excluded.as_slice()) {
            let partial = self.store.join(format!("info/exclude-{}", self.session));
            std::fs::write(&partial, &excluded)
                .and_then(|()| std::fs::rename(&partial, &exclude))
                .map_err(|error| format!("cannot write the excludes: {error}"))?;
        }
        let alternates = self.store.join("objects/info/alternates");
        let line = format!("{}\n", self.borrowed_objects.display());
        if std::fs::read_to_string(&alternates).ok().as_deref() != Some(line.as_str()) {
            std::fs::write(&alternates, line)
                .map_err(|error| format!("cannot write the alternates: {error}"))?;
        }
        let index = self.index();
        if !index.exists() {
            // A new session starts from the index another session left, else from the
            // repository's own (read, never written): unchanged files are not hashed again.
            let seed = self
                .latest_session_index()
                .or_else(|| read_regular(&self.repository_index, MOST_INDEX));
            if let Some(seed) = seed {
                let _ = std::fs::write(&index, seed);
            }
        }
        Ok(())
    }

    /// Hold the store's lock (`store/lock`) until the returned value is dropped.
    fn lock_store(
        &self,
        how: nix::fcntl::FlockArg,
    ) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
        let path = self.store.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|error| format!("cannot open {}: {error}", path.display()))?;
        nix::fcntl::Flock::lock(file, how)
            .map_err(|(_, error)| format!("cannot lock {}: {error}", path.display()))
    }

    /// The newest index another session of this workspace left (whole files only).
    fn latest_session_index(&self) -> Option<Vec<u8>> {
        let newest = std::fs::read_dir(&self.store)
            .ok()?
            .flatten()
            .filter(|entry| {
                entry
                    .file_name()
                    .to_str()
                    .and_then(|name| name.strip_prefix("index-"))
                    .is_some_and(|id| id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()))
            })
            .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
            .max()?;
        std::fs::read(newest.1).ok()
    }

    fn git(&self, args: &[&str]) -> Result<String, String> {
        String::from_utf8(self.run(args)?)
            .map_err(|_| "git answered in something not UTF-8".to_string())
    }

    /// Run keel's git with `args` (see the module invariants): its stdout.
    fn run<A: AsRef<OsStr>>(&self, args: &[A]) -> Result<Vec<u8>, String> {
        self.run_indexed(&self.index(), args)
    }

    /// Run keel's git with `args` on the index at `index`: its stdout.
    fn run_indexed<A: AsRef<OsStr>>(&self, index: &Path, args: &[A]) -> Result<Vec<u8>, String> {
        let what = args
            .first()
            .map(|arg| arg.as_ref().to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut command = std::process::Command::new(&self.git);
        command
            .args([
                "-c",
                "core.fsmonitor=false",
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.untrackedCache=true",
                "-c",
                "core.quotePath=false",
            ])
            .arg("-c")
            .arg(format!(
                "core.excludesFile={}",
                self.repository_excludes.display()
            ))
            .arg("--git-dir")
            .arg(&self.store)
            .arg("--work-tree")
            .arg(&self.root)
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .env("GIT_INDEX_FILE", index)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let explain = match &self.sandbox {
            Some(sandbox) if sandbox.mode != keel_sandbox::SandboxMode::Off => {
                let policy = sandbox.sandbox.snapshot_policy(&self.store);
                let confinement = sandbox
                    .sandbox
                    .confine_policy(&mut command, &policy)
                    .map_err(|error| format!("cannot confine git: {error}"))?;
                Some(confinement)
            }
            _ => {
                keel_sandbox::keep_file_limit(&mut command);
                None
            }
        };
        let mut child = keel_sandbox::on_lasting_thread(move || command.spawn())
            .and_then(|spawned| spawned)
            .map_err(|error| match &explain {
                Some(confinement) => confinement.explain(error).to_string(),
                None => format!("cannot run git: {error}"),
            })?;
        // Both pipes drained while the run is watched, so a large answer cannot stall it.
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(pipe) = pipe {
                    let _ = pipe.take(MOST_OUTPUT as u64 + 1).read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as Box<_>));
        let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as Box<_>));
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
                    // Its lock would stop every later snapshot of this session.
                    let mut lock = index.as_os_str().to_os_string();
                    lock.push(".lock");
                    let _ = std::fs::remove_file(lock);
                    return Err(format!("git took longer than {} s", GIT_TIMEOUT.as_secs()));
                }
                Err(error) => return Err(format!("git failed: {error}")),
            }
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        if !status.success() {
            let said = String::from_utf8_lossy(&stderr);
            return Err(format!("git {what}: {}", said.trim()));
        }
        if stdout.len() > MOST_OUTPUT {
            return Err(format!("git {what} answered more than {MOST_OUTPUT} bytes"));
        }
        Ok(stdout)
    }
}

/// The largest file git does not track that a snapshot keeps.
const MOST_UNTRACKED: u64 = 16 * 1024 * 1024;

/// The largest global ignore file read.
const MOST_EXCLUDES: u64 = 1024 * 1024;

/// Where git looks for the user's global ignore patterns when nothing names another file:
/// `$XDG_CONFIG_HOME/git/ignore`, else `~/.config/git/ignore`.
fn global_excludes_file() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|home| home.is_absolute())
                .map(|home| home.join(".config"))
        })?;
    Some(config.join("git/ignore"))
}

/// The largest repository index a session starts from.
const MOST_INDEX: u64 = 256 * 1024 * 1024;

/// The bytes of the regular file at `path`, up to `most` (a repository's file: never a FIFO
/// that would block, never more than asked).
fn read_regular(path: &Path, most: u64) -> Option<Vec<u8>> {
    let file = keel_tools::open_regular(path, &path.display().to_string()).ok()?;
    let mut bytes = Vec::new();
    file.take(most + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= most).then_some(bytes)
}

/// Whether git said the index could not be read.
fn is_corrupt_index(error: &str) -> bool {
    [
        "index file corrupt",
        "bad signature",
        "index file smaller",
        "bad index",
    ]
    .iter()
    .any(|sign| error.contains(sign))
}

/// The repository's git directory and common directory (they differ for a worktree), from
/// its `.git` (a directory, or a file naming one).
fn repository_dirs(root: &Path) -> Option<(PathBuf, PathBuf)> {
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        let text = String::from_utf8(read_regular(&dot_git, 4096)?).ok()?;
        root.join(text.trim().strip_prefix("gitdir:")?.trim())
    };
    let common = match read_regular(&git_dir.join("commondir"), 4096)
        .and_then(|bytes| String::from_utf8(bytes).ok())
    {
        Some(named) => git_dir.join(named.trim()),
        None => git_dir.clone(),
    };
    let git_dir = git_dir.canonicalize().ok()?;
    let common = common.canonicalize().ok()?;
    Some((git_dir, common))
}

/// The git program: the first `git` on an absolute `PATH` entry outside the workspace (a
/// repository's own `bin/git` never runs as keel's).
fn git_program(workspace: &Path) -> Option<PathBuf> {
    git_on(&std::env::var_os("PATH")?, workspace)
}

/// `git_program` on the `PATH` value `path`.
fn git_on(path: &OsStr, workspace: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .filter(|dir| {
            let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            !dir.starts_with(workspace)
        })
        .map(|dir| dir.join("git"))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// `git diff-tree -r -z --raw` output: `:oldmode newmode oldid newid status\0path\0` each.
fn parse_raw(raw: &[u8]) -> Vec<Changed> {
    let mut fields = raw.split(|byte| *byte == 0);
    let mut changes = Vec::new();
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let Ok(meta) = std::str::from_utf8(meta) else {
            break;
        };
        let words: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let [old_mode, new_mode, old_id, new_id, status] = words[..] else {
            break;
        };
        let entry =
            |mode: &str, id: &str| (mode != "000000").then(|| (mode.to_string(), id.to_string()));
        changes.push(Changed {
            path: path.to_vec(),
            status: status.bytes().next().unwrap_or(b'M'),
            before: entry(old_mode, old_id),
            after: entry(new_mode, new_id),
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
        let mut raw = format!(
            ":100644 100644 {a} {b} M\0src/x.rs\0:000000 100644 {zero} {b} A\0new\nline\0\
             :100755 000000 {a} {zero} D\0"
        )
        .into_bytes();
        raw.extend_from_slice(b"caf\xe9.txt\0");
        let changes = parse_raw(&raw);
        assert_eq!(changes.len(), 3);
        assert_eq!(changes[0].path, b"src/x.rs");
        assert_eq!(changes[0].before, Some(("100644".into(), a.clone())));
        assert_eq!(changes[1].path, b"new\nline", "a newline in a name is kept");
        assert_eq!(changes[1].before, None);
        assert_eq!(changes[1].after, Some(("100644".into(), b.clone())));
        assert_eq!(changes[0].after, Some(("100644".into(), b.clone())));
        assert_eq!(
            changes[2].path, b"caf\xe9.txt",
            "a name that is not UTF-8 is kept"
        );
        assert_eq!(changes[2].before, Some(("100755".into(), a)));
        assert_eq!(changes[2].after, None, "a removed file is absent after");
        assert!(parse_raw(b"").is_empty());
    }

    #[test]
    fn a_git_in_the_workspace_or_on_a_relative_path_entry_is_never_keels() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (workspace, elsewhere) = (dir.path().join("ws"), dir.path().join("tools"));
        for bin in [workspace.join("bin"), elsewhere.clone()] {
            std::fs::create_dir_all(&bin).unwrap();
            std::fs::write(bin.join("git"), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(bin.join("git"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let path = format!(
            "bin:{}:{}",
            workspace.join("bin").display(),
            elsewhere.display()
        );
        // Run from inside the workspace, `bin` would be its own: neither is taken.
        assert_eq!(
            git_on(OsStr::new(&path), &workspace),
            Some(elsewhere.join("git"))
        );
        assert_eq!(git_on(OsStr::new("bin"), &workspace), None);
    }
}
