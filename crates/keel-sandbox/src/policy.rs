//! The sandbox policy as data: what a confined command may read, write and reach. Pure: it
//! reads the file system only to resolve paths (canonical forms, what exists), never changes
//! it, and decides nothing about the kernel (see `support` and `plan`).
//!
//! Invariants:
//! - Every path in a `SandboxPolicy` is absolute and canonical (no symlink, no `..`): mounts
//!   and Landlock rules are made on exactly these.
//! - `forbid_read` never covers a root (the workspace, a writable root, the session's temp
//!   dir): an entry that contains one is hidden whole, and the roots inside it stay reachable
//!   at their own paths (attached back on the cover: `mounts`), so nothing else of it is
//!   seen, not even what appears there after the command started; an entry that is a root is
//!   dropped; an entry inside one is kept. Paths that are not roots but must stay readable
//!   (the resolver's file, `PATH` directories under `/run`) split an entry into its other
//!   children instead.
//! - `read_only` lists only paths inside a writable root that existed when the policy was
//!   made, each with the ancestors (below its root) that must become mount points so the
//!   protected path cannot be renamed away.
//! - `read-only` mode writes nothing but the temp dir; `off` confines nothing.

use crate::paths::{canonical, expand};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How commands are confined (`[sandbox] mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read anywhere but `forbid_read`; write the workspace, added dirs, the temp dir and
    /// `allow_write`.
    #[default]
    WorkspaceWrite,
    /// Read anywhere but `forbid_read`; write only the temp dir.
    ReadOnly,
    /// No confinement (the user's own choice only).
    Off,
}

impl SandboxMode {
    pub fn name(self) -> &'static str {
        match self {
            Self::WorkspaceWrite => "workspace-write",
            Self::ReadOnly => "read-only",
            Self::Off => "off",
        }
    }

    pub fn parse(text: &str) -> Option<SandboxMode> {
        match text {
            "workspace-write" => Some(Self::WorkspaceWrite),
            "read-only" => Some(Self::ReadOnly),
            "off" => Some(Self::Off),
            _ => None,
        }
    }

    /// How loose a mode is: lower is stricter.
    pub fn looseness(self) -> u8 {
        match self {
            Self::ReadOnly => 0,
            Self::WorkspaceWrite => 1,
            Self::Off => 2,
        }
    }
}

/// Whether a confined command reaches the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    /// Its own loopback at most: nothing reaches the host's ports or beyond.
    Off,
    On,
}

/// The user's sandbox settings (`[sandbox]`), before paths are resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    /// Added to the built-in list (`~` is the home directory).
    pub forbid_read: Vec<String>,
    /// Written besides the workspace (`~` is the home directory): the user's own entries,
    /// which may name any path.
    pub allow_write: Vec<String>,
    /// A trusted project's `allow_write` entries (absolute, joined with its workspace): each
    /// is opened only where its real path, every link followed, is inside the workspace's
    /// real path (`project_write_target`); the others are refused (`refused_writes`).
    pub project_allow_write: Vec<String>,
    pub allow_network: bool,
}

/// Where a project's `allow_write` entry leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProjectWrite {
    /// Inside the workspace's real path: this real path may be opened.
    Inside(PathBuf),
    /// Somewhere else (through a link, or named so): never opened.
    Outside(PathBuf),
    /// Nowhere yet (nothing to open).
    Missing,
}

/// Where the project `allow_write` entry `entry` (absolute) really leads, judged against the
/// real path of `workspace`: a link on the way (`cache -> ~`) is followed, so the words of the
/// entry decide nothing.
pub fn project_write_target(entry: &Path, workspace: &Path) -> ProjectWrite {
    let Some(target) = canonical(entry) else {
        return ProjectWrite::Missing;
    };
    let workspace = canonical(workspace).unwrap_or_else(|| workspace.to_path_buf());
    if target.starts_with(&workspace) {
        ProjectWrite::Inside(target)
    } else {
        ProjectWrite::Outside(target)
    }
}

/// Where things are for one session.
#[derive(Clone, Debug, Default)]
pub struct Places {
    pub workspace: PathBuf,
    /// `--add-dir` directories.
    pub extra_dirs: Vec<PathBuf>,
    pub keel_home: PathBuf,
    /// The user's home directory (`$HOME`), for `~` and the credential stores.
    pub home: Option<PathBuf>,
    /// The session's temp dir (`$KEEL_HOME/tmp/<session>`); created by the caller.
    pub temp_dir: Option<PathBuf>,
    /// Files a user layer refers to (`--token-file`), forbidden to read.
    pub referenced_files: Vec<PathBuf>,
    /// Directories holding sockets found in the home directory (`sockets_and_links::socket_dirs_in`): hidden, for
    /// a unix socket cannot be kept from a command any other way.
    pub socket_dirs: Vec<PathBuf>,
}

/// The credential stores (and the agents' sockets beside them) every command is kept from,
/// below the home directory.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".config/gcloud",
    ".netrc",
    // Its credentials, and Docker Desktop's socket (root on the host).
    ".docker",
    ".kube",
    ".config/gh",
    ".git-credentials",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    // Password managers' SSH agents and VM runtimes' sockets.
    ".1password",
    ".colima",
    ".lima",
    // Other clouds' and services' tokens.
    ".azure",
    ".oci",
    ".config/doctl",
    ".config/github-copilot",
    ".config/hub",
    ".config/glab-cli",
    ".config/rclone",
    ".s3cfg",
    ".vault-token",
    ".terraform.d",
    ".pgpass",
    ".my.cnf",
    ".gem/credentials",
    ".config/composer/auth.json",
    // Other agents' logins.
    ".claude",
    ".codex",
    // Keyrings, password stores and browser profiles (cookies, saved passwords).
    ".local/share/keyrings",
    ".password-store",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    // What the user typed: passwords pasted at a prompt, tokens in a curl line.
    ".bash_history",
    ".zsh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
];

/// The machine's own secrets, hidden too (unreadable already but to root, which keel may run
/// as in a container or on CI).
pub const SYSTEM_SECRETS: &[&str] = &["/etc/shadow", "/etc/gshadow", "/etc/ssl/private"];

/// Where a system keeps its services' sockets (the Docker socket, the D-Bus buses): hidden,
/// with `$XDG_RUNTIME_DIR`. With the network on, the resolver's file stays.
pub const RUNTIME_DIRS: &[&str] = &["/run", "/var/run", "/var/snap/lxd"];

/// keel's own files in `$KEEL_HOME` that no command reads (and `serve-launch-*` pages an older
/// keel left beside them; a launch page is written in `state` now).
pub const KEEL_HOME_PRIVATE: &[&str] = &[
    "state",
    "config.toml",
    "history.txt",
    "trusted-workspaces.json",
    "tmp",
    // Checkpoint snapshots of workspaces (keel's own git objects).
    "snapshots",
];

/// The files of a writable root that a command may not change (where they exist at start):
/// what git reads its configuration, hooks and other repositories' from, and keel's own.
pub const PROTECTED_IN_ROOT: &[&str] = &[
    ".git/config",
    ".git/hooks",
    ".git/info",
    ".git/modules",
    ".git/worktrees",
    ".git/commondir",
    ".git/config.worktree",
    "keel.toml",
    ".mcp.json",
    ".keel",
];

/// What the user's shell, git and desktop run or read when they next start, protected where
/// they exist when a writable root holds the home directory.
pub const STARTUP_IN_HOME: &[&str] = &[
    ".bashrc",
    ".bash_aliases",
    ".bashrc.d",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".config/fish",
    ".gitconfig",
    ".config/git",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".pam_environment",
    ".xprofile",
    ".xsessionrc",
    ".local/bin",
    ".cargo/bin",
    // Read by tools the user starts: settings that run code.
    ".npmrc",
    ".tmux.conf",
    ".vimrc",
    ".config/nvim",
];

/// Files in `.git` that make git read another directory's configuration and hooks. Where
/// they do not exist at start they cannot be protected by a mount: keel removes any that a
/// command creates (`Sandbox::undo_planted`), and the file tools refuse them.
pub const GIT_REDIRECTS: &[&str] = &[".git/commondir", ".git/config.worktree", ".git/gitdir"];

/// A path that must not be changed, and the ancestors below its root that become mount
/// points first (outermost first), so that none of them can be renamed or removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protected {
    pub path: PathBuf,
    pub ancestors: Vec<PathBuf>,
}

/// A resolved policy for one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    pub network: Network,
    pub workspace: PathBuf,
    /// Where commands write (workspace, added dirs, `allow_write`); empty in `read-only`.
    pub writable: Vec<PathBuf>,
    /// The session's temp dir: writable, the command's `/tmp` where it can be.
    pub temp_dir: Option<PathBuf>,
    /// Hidden from commands (and refused to the file tools).
    pub forbid_read: Vec<PathBuf>,
    /// Inside a writable root, but not to be changed.
    pub read_only: Vec<Protected>,
    /// The temp dir is the command's `/tmp` (the host's `/tmp` out of sight; a command's
    /// view). Otherwise the host's `/tmp` stays readable (its socket directories hidden) and
    /// the temp dir is written at its own path (an MCP server, whose declaration may name
    /// files under `/tmp`).
    pub private_tmp: bool,
    /// Variables the command is given (where an MCP server keeps its caches), unless it
    /// was given its own.
    pub env: Vec<(&'static str, String)>,
    /// A project's `allow_write` entries that lead outside the workspace, and where: never
    /// writable (said by `keel sandbox`, and at start as `trust/ignored`).
    pub refused_writes: Vec<(PathBuf, PathBuf)>,
    /// Where a writable root holds the home: its dot entries and `$PATH` directories are kept
    /// from change (`home_dots`).
    pub home_dots: Option<crate::home_dots::HomeDots>,
    /// Inside a writable root, absent at start, and not to be made: git's redirect files and,
    /// where a root holds the home, the startup files (no mount can guard a path that does
    /// not exist: the file tools refuse them, and keel undoes them after each command).
    pub not_to_create: Vec<PathBuf>,
}

/// Add `path` to `list` unless it (or a path containing it) is there; drop entries it contains.
fn add_outermost(list: &mut Vec<PathBuf>, path: PathBuf) {
    if list.iter().any(|kept| path.starts_with(kept)) {
        return;
    }
    list.retain(|kept| !kept.starts_with(&path));
    list.push(path);
}

/// `entry`, or where it contains one of `keep`, its other children, recursively.
fn split_around(entry: &Path, keep: &[PathBuf], out: &mut Vec<PathBuf>) {
    let covers = keep.iter().any(|kept| kept.starts_with(entry));
    if !covers {
        out.push(entry.to_path_buf());
        return;
    }
    if keep.iter().any(|kept| kept == entry) {
        return;
    }
    let Ok(children) = std::fs::read_dir(entry) else {
        return;
    };
    for child in children.flatten() {
        let path = child.path();
        // Not followed: a link is a name; what it leads to is readable at its own path or
        // hidden by its own entry (a link into a hidden directory meets the hidden directory).
        if child.file_type().is_ok_and(|kind| kind.is_symlink()) {
            continue;
        }
        split_around(&path, keep, out);
    }
}

/// The entry of `hidden` that keeps `path` out of sight, if one does: `path` is under it and
/// not inside one of `roots` that lies inside it (a root inside a hidden entry stays
/// reachable).
pub(crate) fn hiding<'a>(hidden: &'a [PathBuf], roots: &[&Path], path: &Path) -> Option<&'a Path> {
    hidden
        .iter()
        .find(|entry| {
            path.starts_with(entry)
                && !roots
                    .iter()
                    .any(|root| root.starts_with(entry) && path.starts_with(root))
        })
        .map(PathBuf::as_path)
}

/// `entries` without those another entry hides already (outermost first), and without the
/// roots themselves.
fn outermost_hidden(mut entries: Vec<PathBuf>, roots: &[&Path]) -> Vec<PathBuf> {
    entries.sort_by_key(|entry| entry.components().count());
    let mut kept: Vec<PathBuf> = Vec::new();
    for entry in entries {
        if roots.contains(&entry.as_path()) || hiding(&kept, roots, &entry).is_some() {
            continue;
        }
        kept.push(entry);
    }
    kept
}

impl SandboxPolicy {
    /// Resolve `settings` for `places`. `mode` may differ from `settings.mode` (a read-only
    /// permission mode runs commands under the read-only sandbox).
    pub fn resolve(settings: &SandboxSettings, places: &Places, mode: SandboxMode) -> Self {
        let home = places.home.as_deref();
        let workspace = canonical(&places.workspace).unwrap_or_else(|| places.workspace.clone());
        let temp_dir = places.temp_dir.as_deref().and_then(canonical);
        let mut writable = Vec::new();
        let mut refused_writes = Vec::new();
        let mut project_roots = Vec::new();
        for entry in &settings.project_allow_write {
            match project_write_target(Path::new(entry), &workspace) {
                ProjectWrite::Inside(root) => project_roots.push(root),
                ProjectWrite::Outside(target) => {
                    refused_writes.push((PathBuf::from(entry), target))
                }
                ProjectWrite::Missing => {}
            }
        }
        // Every root asked for, before the outermost stand for those inside them.
        let mut requested: Vec<PathBuf> = Vec::new();
        if mode == SandboxMode::WorkspaceWrite {
            requested = std::iter::once(workspace.clone())
                .chain(places.extra_dirs.iter().filter_map(|dir| canonical(dir)))
                .chain(
                    settings
                        .allow_write
                        .iter()
                        .filter_map(|entry| expand(entry, home))
                        .filter_map(|path| canonical(&path)),
                )
                .chain(project_roots)
                .collect();
            for root in &requested {
                add_outermost(&mut writable, root.clone());
            }
        }
        let mut policy = SandboxPolicy {
            mode,
            network: if settings.allow_network {
                Network::On
            } else {
                Network::Off
            },
            workspace,
            writable,
            temp_dir,
            forbid_read: Vec::new(),
            read_only: Vec::new(),
            private_tmp: true,
            env: Vec::new(),
            refused_writes,
            home_dots: None,
            not_to_create: Vec::new(),
        };
        policy.home_dots = crate::home_dots::HomeDots::of(
            home,
            &policy.writable,
            &requested,
            &settings.allow_write,
        );
        policy.forbid_read = policy.hidden_now(settings, places);
        let (read_only, not_to_create) = Self::protected(&policy, places);
        (policy.read_only, policy.not_to_create) = (read_only, not_to_create);
        policy
    }

    /// The paths hidden now, around this policy's roots (found again for each command: the
    /// credential stores and keel's files that exist at that moment).
    pub fn hidden_now(&self, settings: &SandboxSettings, places: &Places) -> Vec<PathBuf> {
        let mut keep: Vec<PathBuf> = Vec::new();
        if self.network == Network::On {
            // The resolver's file (systemd-resolved keeps it under /run).
            keep.extend(Path::new("/etc/resolv.conf").canonicalize().ok());
        }
        // Where the system keeps its programs under /run (NixOS: /run/current-system,
        // /run/wrappers), commands must still find them.
        if let Some(path) = std::env::var_os("PATH") {
            keep.extend(
                std::env::split_paths(&path)
                    .filter(|dir| RUNTIME_DIRS.iter().any(|runtime| dir.starts_with(runtime))),
            );
        }
        Self::forbidden(settings, places, &keep, &self.roots())
    }

    /// The roots: the workspace, the writable roots and the temp dir. Each stays reachable at
    /// its own path, also inside a hidden entry.
    pub fn roots(&self) -> Vec<&Path> {
        std::iter::once(self.workspace.as_path())
            .chain(self.writable.iter().map(PathBuf::as_path))
            .chain(self.temp_dir.as_deref())
            .collect()
    }

    /// The outermost roots strictly inside `hidden` (attached back on its cover).
    pub fn roots_inside(&self, hidden: &Path) -> Vec<PathBuf> {
        let inside: Vec<&Path> = self
            .roots()
            .into_iter()
            .filter(|root| root.starts_with(hidden) && *root != hidden)
            .collect();
        let mut outermost: Vec<PathBuf> = Vec::new();
        for root in &inside {
            if !inside
                .iter()
                .any(|other| other != root && root.starts_with(other))
                && !outermost.iter().any(|kept| kept == root)
            {
                outermost.push(root.to_path_buf());
            }
        }
        outermost
    }

    /// The first root (the workspace, a writable root, the temp dir) whose path no longer
    /// leads to itself — a command replaced a directory on it with a link — if any.
    pub fn moved_root(&self) -> Option<&Path> {
        std::iter::once(&self.workspace)
            .chain(&self.writable)
            .chain(self.temp_dir.iter())
            .find(|root| canonical(root).as_deref() != Some(root.as_path()))
            .map(PathBuf::as_path)
    }

    fn forbidden(
        settings: &SandboxSettings,
        places: &Places,
        keep: &[PathBuf],
        roots: &[&Path],
    ) -> Vec<PathBuf> {
        let home = places.home.as_deref();
        let mut entries: Vec<PathBuf> = Vec::new();
        if let Some(home) = home {
            entries.extend(HOME_SECRETS.iter().map(|name| home.join(name)));
        }
        entries.extend(
            KEEL_HOME_PRIVATE
                .iter()
                .map(|name| places.keel_home.join(name)),
        );
        if let Ok(children) = std::fs::read_dir(&places.keel_home) {
            entries.extend(children.flatten().map(|child| child.path()).filter(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("serve-launch-"))
            }));
        }
        entries.extend(SYSTEM_SECRETS.iter().map(PathBuf::from));
        // The SSH server's host keys (`/etc/ssh` itself holds the client's configuration).
        if let Ok(children) = std::fs::read_dir("/etc/ssh") {
            entries.extend(children.flatten().map(|child| child.path()).filter(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("ssh_host_") && name.ends_with("_key"))
            }));
        }
        entries.extend(places.referenced_files.iter().cloned());
        entries.extend(places.socket_dirs.iter().cloned());
        entries.extend(RUNTIME_DIRS.iter().map(PathBuf::from));
        // The user's runtime dir (its sockets: the session bus, keyrings, agents).
        entries.extend(std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from));
        entries.extend(
            settings
                .forbid_read
                .iter()
                .filter_map(|entry| expand(entry, home)),
        );
        let mut forbid = Vec::new();
        for entry in entries.iter().filter_map(|entry| canonical(entry)) {
            split_around(&entry, keep, &mut forbid);
        }
        outermost_hidden(forbid, roots)
    }

    /// What is protected (existing), and what must not be created (absent).
    fn protected(policy: &SandboxPolicy, places: &Places) -> (Vec<Protected>, Vec<PathBuf>) {
        let writable = &policy.writable;
        let roots = policy.roots();
        let mut protected = Vec::new();
        let mut absent = Vec::new();
        let keel_home = canonical(&places.keel_home);
        for root in writable {
            if root.join(".git").is_dir() {
                absent.extend(
                    GIT_REDIRECTS
                        .iter()
                        .map(|name| root.join(name))
                        .filter(|path| path.symlink_metadata().is_err()),
                );
            }
            let mut candidates: Vec<PathBuf> = PROTECTED_IN_ROOT
                .iter()
                .map(|name| root.join(name))
                .collect();
            // A `.git` file (a worktree's, a submodule's) names the repository to use.
            if root.join(".git").is_file() {
                candidates.push(root.join(".git"));
            }
            // A writable root holding the home directory (keel run in `~`): what the user's
            // shell, git and desktop run or read at their next start stays as it is — every
            // top-level dot entry and `$PATH` directory of the home (`home_dots`), and the
            // startup files inside the dot entries the user lets commands change.
            if let Some(home) = places.home.as_deref().and_then(canonical)
                && home.starts_with(root)
            {
                candidates.extend(STARTUP_IN_HOME.iter().map(|name| home.join(name)));
                absent.extend(
                    STARTUP_IN_HOME
                        .iter()
                        .map(|name| home.join(name))
                        .filter(|path| path.symlink_metadata().is_err()),
                );
                if let Some(rule) = &policy.home_dots {
                    candidates.extend(rule.to_protect());
                    let (existing, missing) = rule.path_dirs();
                    candidates.extend(existing);
                    absent.extend(missing);
                    if home != *root && rule.dotfiles_git {
                        // A dotfiles repository's own configuration and hooks.
                        candidates.extend(
                            PROTECTED_IN_ROOT
                                .iter()
                                .filter(|name| name.starts_with(".git/"))
                                .map(|name| home.join(name)),
                        );
                    }
                }
            }
            // keel's home inside a writable root (not holding one): nothing of it may change.
            if let Some(keel_home) = &keel_home
                && keel_home.starts_with(root)
                && keel_home != root
                && !writable.iter().any(|other| other.starts_with(keel_home))
            {
                candidates.push(keel_home.clone());
            }
            policy.protect_in(root, &candidates, &roots, &mut protected);
        }
        (protected, absent)
    }

    /// Protect each of `candidates` in `root` that exists now, into `protected`: the outermost
    /// of each nest only, never one holding a writable root (it would be sealed with it), a
    /// link or a hidden path, nor one outside this root, nor one already there.
    fn protect_in(
        &self,
        root: &Path,
        candidates: &[PathBuf],
        roots: &[&Path],
        protected: &mut Vec<Protected>,
    ) {
        let outermost = candidates.iter().filter(|path| {
            path.starts_with(root)
                && path.as_path() != root
                && !self.writable.iter().any(|other| other.starts_with(path))
                && !candidates
                    .iter()
                    .any(|other| other != *path && path.starts_with(other))
        });
        for path in outermost {
            if protected.iter().any(|kept| kept.path == *path) {
                continue;
            }
            let Ok(meta) = path.symlink_metadata() else {
                continue;
            };
            if meta.file_type().is_symlink() || hiding(&self.forbid_read, roots, path).is_some() {
                continue;
            }
            let ancestors = path
                .ancestors()
                .skip(1)
                .take_while(|ancestor| *ancestor != root)
                .filter(|ancestor| ancestor.starts_with(root))
                .map(Path::to_path_buf)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            protected.push(Protected {
                path: path.clone(),
                ancestors,
            });
        }
    }

    /// The home's dot entries and `$PATH` directories as they are now, protected too (one the
    /// user made since the session started is theirs: it was there before the command).
    pub(crate) fn protect_home_now(&mut self) {
        let Some(rule) = self.home_dots.clone() else {
            return;
        };
        let Some(root) = self
            .writable
            .iter()
            .find(|root| rule.home.starts_with(root))
            .cloned()
        else {
            return;
        };
        let mut candidates = rule.to_protect();
        candidates.extend(rule.path_dirs().0);
        let roots: Vec<PathBuf> = self.roots().into_iter().map(Path::to_path_buf).collect();
        let roots: Vec<&Path> = roots.iter().map(PathBuf::as_path).collect();
        let mut protected = std::mem::take(&mut self.read_only);
        self.protect_in(&root, &candidates, &roots, &mut protected);
        self.read_only = protected;
    }

    /// Whether a command may read `path` (canonical): not under a `forbid_read` entry.
    pub fn forbids_reading(&self, path: &Path) -> Option<&Path> {
        if self.mode == SandboxMode::Off {
            return None;
        }
        hiding(&self.forbid_read, &self.roots(), path)
    }

    /// Whether `path` (canonical) is protected from change: the protected path it is under.
    pub fn forbids_changing(&self, path: &Path) -> Option<PathBuf> {
        if self.mode == SandboxMode::Off {
            return None;
        }
        // A root asked for inside a home's dot entry is writable inside the protected entry.
        let opened = |protected: &Path| {
            self.home_dots.as_ref().is_some_and(|rule| {
                rule.open_inside
                    .iter()
                    .any(|root| root.starts_with(protected) && path.starts_with(root))
            })
        };
        let covering = self
            .read_only
            .iter()
            .map(|protected| protected.path.as_path())
            .find(|protected| path.starts_with(protected) && !opened(protected))
            .or_else(|| self.forbids_reading(path));
        if let Some(covering) = covering {
            return Some(covering.to_path_buf());
        }
        // A git redirect or startup file that did not exist at start is refused by name.
        if let Some(absent) = self
            .not_to_create
            .iter()
            .find(|absent| path.starts_with(absent))
        {
            return Some(absent.clone());
        }
        // Any dot entry of a home a writable root holds, existing or new.
        self.home_dots.as_ref().and_then(|rule| rule.covers(path))
    }

    /// This policy with another mode (writable roots gone in `read-only`).
    pub fn with_mode(&self, mode: SandboxMode) -> SandboxPolicy {
        match mode {
            SandboxMode::ReadOnly => SandboxPolicy {
                mode,
                writable: Vec::new(),
                read_only: Vec::new(),
                home_dots: None,
                ..self.clone()
            },
            SandboxMode::WorkspaceWrite | SandboxMode::Off => SandboxPolicy {
                mode,
                ..self.clone()
            },
        }
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
