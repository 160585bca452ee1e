//! Where the words of a read-only command lead (`read_only_commands`): paths, globs, `PATH`
//! and the git repository, judged from outside the sandbox the command will run in.
//!
//! Invariants:
//! - A word is inside when, with a leading `~` or `~/` expanded to `$HOME`, it resolves
//!   (symlinks followed, `..` applied as the OS will; `WorkspaceGuard::resolve`) inside the
//!   workspace or an added directory; `~user`, `~+` and `~-` never are. A word under `/proc` or
//!   `/dev` (but `/dev/null`), or one whose path passes a link into either, is never inside:
//!   keel resolves `/proc/self` as itself, not as the command. `/dev/null` is always fine.
//! - A word the shell may expand as a glob (`SimpleCommand::globbed`) is expanded component by
//!   component against the tree (a superset of bash's matches: hidden names match too) and
//!   every match must be inside; a match that starts with `-` is refused (a file named
//!   `--pre=sh` would be an option), and so is a component that starts with `.` and holds a
//!   glob character (bash before 5.2 lets it match `..`). Unmatched, the word itself must be
//!   inside (bash passes it as written). Looking at more than `MOST_GLOB_ENTRIES` entries,
//!   or at an entry whose name is not UTF-8, gives up (the command asks).
//! - A program is found on `PATH` only when no entry is relative or empty, none is inside the
//!   workspace or an added directory, and none is one the sandbox replaces (`/tmp`,
//!   `/var/tmp`, `/dev/shm`: inside the sandbox they are the session's writable temp dir).
//! - git reads the repository it finds from the workspace up: the first `.git` found must be a
//!   directory whose parent is inside the workspace or an added directory (a workspace that
//!   is a subdirectory of a repository, or holds a `.git` file naming another place, asks).

use crate::guard::WorkspaceGuard;
use globset::GlobBuilder;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The most directory entries one glob may make keel look at before it gives up.
const MOST_GLOB_ENTRIES: usize = 10_000;

/// `PATH` entries the sandbox replaces with the session's writable temp dir.
const REPLACED_DIRS: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// Where a read-only command may read, and how the shell finds programs and `~`.
pub struct ReadPlaces<'a> {
    /// The workspace and the added directories.
    pub guard: &'a WorkspaceGuard,
    /// `$HOME` as the command sees it (for `~`).
    pub home: Option<PathBuf>,
    /// `$PATH` as the command sees it.
    pub path: Option<OsString>,
}

impl<'a> ReadPlaces<'a> {
    /// The places as a command keel runs sees them: `HOME` and `PATH` of this process.
    pub fn from_env(guard: &'a WorkspaceGuard) -> ReadPlaces<'a> {
        ReadPlaces {
            guard,
            home: std::env::var_os("HOME").map(PathBuf::from),
            path: std::env::var_os("PATH"),
        }
    }
}

/// Why a word does not stay inside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leads {
    /// Outside the workspace and the added directories (or keel cannot tell).
    Outside,
    /// A glob match the program would read as an option.
    ToAnOption(String),
}

/// `Ok` if `word` stays inside (see the module invariants); `globbed`: the shell may expand it.
pub fn inside(word: &str, globbed: bool, places: &ReadPlaces<'_>) -> Result<(), Leads> {
    let expanded = match word.strip_prefix('~') {
        None => word.to_string(),
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = places.home.as_ref().ok_or(Leads::Outside)?;
            format!("{}{rest}", home.display())
        }
        // `~user`, `~+`, `~-`: another place keel does not look up.
        Some(_) => return Err(Leads::Outside),
    };
    if expanded == "/dev/null" {
        return Ok(());
    }
    let guard = places.guard;
    // Unmatched, a glob is passed as written: that path must be inside too.
    if !stays(&expanded, guard) {
        return Err(Leads::Outside);
    }
    if !globbed {
        return Ok(());
    }
    let matches = glob_matches(&expanded, guard).ok_or(Leads::Outside)?;
    if let Some(option) = matches.iter().find(|path| path.starts_with('-')) {
        return Err(Leads::ToAnOption(option.clone()));
    }
    if matches.iter().all(|path| stays(path, guard)) {
        Ok(())
    } else {
        Err(Leads::Outside)
    }
}

/// Whether `path` resolves inside, passing no link into `/proc` or `/dev`.
fn stays(path: &str, guard: &WorkspaceGuard) -> bool {
    if special(Path::new(path)) || passes_a_special_link(path, guard) {
        return false;
    }
    guard
        .resolve(path)
        .is_ok_and(|resolved| guard.is_inside(&resolved) && !special(&resolved))
}

/// Under `/proc` or `/dev`, but not `/dev/null`.
fn special(path: &Path) -> bool {
    (path.starts_with("/proc") || path.starts_with("/dev")) && path != Path::new("/dev/null")
}

/// Whether some leading part of `path` (from the workspace) is a link that leads, in the end,
/// into `/proc` or `/dev`.
fn passes_a_special_link(path: &str, guard: &WorkspaceGuard) -> bool {
    let mut prefix = if Path::new(path).is_absolute() {
        PathBuf::new()
    } else {
        guard.workspace().to_path_buf()
    };
    for component in Path::new(path).components() {
        prefix.push(component);
        let is_link = prefix
            .symlink_metadata()
            .is_ok_and(|meta| meta.file_type().is_symlink());
        if is_link && prefix.canonicalize().map_or(true, |real| special(&real)) {
            return true;
        }
    }
    false
}

/// Every path `pattern` matches (see the module invariants); `None` when keel cannot tell.
fn glob_matches(pattern: &str, guard: &WorkspaceGuard) -> Option<Vec<String>> {
    let mut found = vec![if pattern.starts_with('/') {
        "/".to_string()
    } else {
        String::new()
    }];
    let mut looked = 0;
    let joined = |base: &str, name: &str| {
        if base.is_empty() || base.ends_with('/') {
            format!("{base}{name}")
        } else {
            format!("{base}/{name}")
        }
    };
    for component in pattern.split('/').filter(|part| !part.is_empty()) {
        if !component.contains(['*', '?', '[']) {
            found = found.iter().map(|base| joined(base, component)).collect();
            continue;
        }
        if component.starts_with('.') {
            return None;
        }
        let matcher = GlobBuilder::new(component)
            .literal_separator(true)
            .build()
            .ok()?
            .compile_matcher();
        let mut next = Vec::new();
        for base in &found {
            let directory = guard
                .resolve(if base.is_empty() { "." } else { base })
                .ok()?;
            let Ok(entries) = std::fs::read_dir(&directory) else {
                continue;
            };
            for entry in entries {
                looked += 1;
                if looked > MOST_GLOB_ENTRIES {
                    return None;
                }
                let name = entry.ok()?.file_name();
                let name = name.to_str()?;
                if matcher.is_match(name) {
                    next.push(joined(base, name));
                }
            }
        }
        found = next;
    }
    Some(found)
}

/// Whether the shell finds `program` on `PATH` where the repository cannot have put it (see
/// the module invariants).
pub fn found_outside(program: &str, places: &ReadPlaces<'_>) -> bool {
    let Some(path) = places.path.as_ref() else {
        return false;
    };
    let mut found = false;
    for entry in std::env::split_paths(path) {
        let inside = |path: &Path| {
            path.canonicalize()
                .is_ok_and(|real| places.guard.is_inside(&real))
        };
        let replaced = REPLACED_DIRS.iter().any(|dir| entry.starts_with(dir));
        let candidate = entry.join(program);
        if !entry.is_absolute() || replaced || inside(&entry) || inside(&candidate) {
            return false;
        }
        found |= is_executable(&candidate);
    }
    found
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Whether the repository git finds from the workspace lies inside (see the module
/// invariants); no repository at all is fine (git finds none either).
pub fn repository_inside(guard: &WorkspaceGuard) -> bool {
    let mut dir = Some(guard.workspace());
    while let Some(here) = dir {
        let git = here.join(".git");
        if let Ok(meta) = git.symlink_metadata() {
            return meta.is_dir() && guard.is_inside(here);
        }
        dir = here.parent();
    }
    true
}

/// Whether `path` is a directory (links followed), for programs that read files only.
pub fn is_directory(word: &str, guard: &WorkspaceGuard) -> bool {
    guard.resolve(word).is_ok_and(|resolved| resolved.is_dir())
}
