//! What a command leaves that would run code outside the sandbox later, and undoing it after
//! the command: a git redirect file (`.git/commondir`, …: the user's git would read another
//! directory's configuration and hooks) and, in a workspace holding the home, a startup file
//! (`~/.zshenv`, `~/.config/git/config`, …). No mount can guard a path that does not exist.
//!
//! Invariants:
//! - Only what was absent just before the command (`absent_now`) is undone: a file the user
//!   makes meanwhile, or moves back, is theirs.
//! - Never through a link: keel runs unconfined here, so an entry whose parent no longer is
//!   where it was (a directory on the way replaced by a link) is reported, not touched.
//! - A git redirect is removed; a startup file is moved aside under a name the command cannot
//!   foresee (`<name>.keel-moved-aside-<nanoseconds>`), or removed when that fails. Every undo,
//!   and every failure to undo, is reported.

use crate::policy::canonical;
use std::path::{Path, PathBuf};

/// How keel undid a file a command made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undo {
    Removed,
    /// Its content kept at this path.
    MovedAside(PathBuf),
    /// Left where it is, and why.
    Left(String),
}

/// A file a command made that keel undid (or could not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undone {
    pub path: PathBuf,
    pub how: Undo,
}

impl Undone {
    /// What a person (and the model) is told.
    pub fn describe(&self) -> String {
        let path = self.path.display();
        let why = if is_git_redirect(&self.path) {
            "which would make git use another directory's configuration and hooks outside the \
             sandbox"
        } else {
            "which your shell, git or desktop would run or read outside the sandbox"
        };
        match &self.how {
            Undo::Removed => format!("the command created {path}, {why}; keel removed it"),
            Undo::MovedAside(aside) => format!(
                "the command created {path}, {why}; keel moved it to {} (move it back yourself \
                 if you meant it)",
                aside.display()
            ),
            Undo::Left(reason) => format!(
                "the command created {path}, {why}; keel could not undo it ({reason}): look \
                 at it before you run git or open a shell"
            ),
        }
    }
}

fn is_git_redirect(path: &Path) -> bool {
    path.parent()
        .and_then(Path::file_name)
        .is_some_and(|name| name == ".git")
}

/// Of `candidates`, those absent now.
pub(crate) fn absent_now(candidates: &[PathBuf]) -> Vec<PathBuf> {
    candidates
        .iter()
        .filter(|path| path.symlink_metadata().is_err())
        .cloned()
        .collect()
}

fn remove(path: &Path, directory: bool) -> std::io::Result<()> {
    if directory {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// Undo each of `absent_before` that exists now.
pub(crate) fn undo(absent_before: &[PathBuf]) -> Vec<Undone> {
    let mut undone = Vec::new();
    for path in absent_before {
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        let how = undo_one(path, meta.is_dir());
        undone.push(Undone {
            path: path.clone(),
            how,
        });
    }
    undone
}

fn undo_one(path: &Path, directory: bool) -> Undo {
    let parent = path.parent().unwrap_or(path);
    if canonical(parent).as_deref() != Some(parent) {
        return Undo::Left(format!(
            "a directory on the way, {}, is now a link",
            parent.display()
        ));
    }
    if is_git_redirect(path) {
        return match remove(path, directory) {
            Ok(()) => Undo::Removed,
            Err(error) => Undo::Left(error.to_string()),
        };
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!(".keel-moved-aside-{nanos}"));
    let aside = PathBuf::from(aside);
    if aside.symlink_metadata().is_err() && std::fs::rename(path, &aside).is_ok() {
        return Undo::MovedAside(aside);
    }
    match remove(path, directory) {
        Ok(()) => Undo::Removed,
        Err(error) => Undo::Left(error.to_string()),
    }
}
