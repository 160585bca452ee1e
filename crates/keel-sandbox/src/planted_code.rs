//! What a command leaves that would run code outside the sandbox later, and undoing it after
//! the command: a git redirect file (`.git/commondir`, …: the user's git would read another
//! directory's configuration and hooks) and, in a workspace holding the home, a startup file
//! (`~/.zshenv`, `~/.config/git/config`, …), any new top-level dot entry of the home
//! (`~/.ssh` made where there was none), or a dot entry that was a link and is no longer the
//! same link (`home_dots`). No mount can guard a path that does not exist.
//!
//! Invariants:
//! - Only what was absent just before the command (`before`) is undone: a file the user makes
//!   meanwhile, or moves back, is theirs — but for the home's top-level dot entries, where
//!   one made while the command ran cannot be told from the command's and is moved aside
//!   (kept, and said). A link the command removed or replaced is made again as it was.
//! - Never through a link: keel runs unconfined here, so an entry whose parent no longer is
//!   where it was (a directory on the way replaced by a link) is reported, not touched.
//! - A git redirect is removed; a startup file is moved aside under a name the command cannot
//!   foresee (`<name>.keel-moved-aside-<nanoseconds>`), or removed when that fails. Every undo,
//!   and every failure to undo, is reported.

use crate::home_dots::{DotEntries, HomeDots};
use crate::paths::canonical;
use std::path::{Path, PathBuf};

/// How keel undid a file a command made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undo {
    Removed,
    /// Its content kept at this path.
    MovedAside(PathBuf),
    /// It was a link to this place, which a command removed or replaced: made again (what
    /// was put in its place, if anything, moved aside first).
    Relinked(PathBuf),
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
            Undo::Relinked(target) => format!(
                "the command removed or replaced the link {path}, {why}; keel made it again, \
                 to {}",
                target.display()
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

/// What a command could plant, as it was just before it: take it with `before`, give it to
/// `undo` after.
#[derive(Clone, Debug, Default)]
pub struct Planted {
    /// The paths a command must not create that were absent.
    absent: Vec<PathBuf>,
    /// The home's dot entries, where a writable root holds the home.
    home: Option<(HomeDots, DotEntries)>,
}

/// Of `candidates`, those absent now; and the home's dot entries now, under `home`'s rule.
pub(crate) fn before(candidates: &[PathBuf], home: Option<&HomeDots>) -> Planted {
    Planted {
        absent: candidates
            .iter()
            .filter(|path| path.symlink_metadata().is_err())
            .cloned()
            .collect(),
        home: home.map(|rule| (rule.clone(), rule.entries_now())),
    }
}

fn remove(path: &Path, directory: bool) -> std::io::Result<()> {
    if directory {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// Undo what a command planted of `before`.
pub(crate) fn undo(before: &Planted) -> Vec<Undone> {
    let mut undone = Vec::new();
    if let Some((rule, entries)) = &before.home {
        let now = rule.entries_now();
        for (name, target) in &now {
            let path = rule.home.join(name);
            if !rule.kept(name) {
                continue;
            }
            match entries.get(name) {
                // New: moved aside.
                None => {
                    let directory = path.symlink_metadata().is_ok_and(|meta| meta.is_dir());
                    undone.push(Undone {
                        how: undo_one(&path, directory),
                        path,
                    });
                }
                // A link before, something else now: that aside, the link again.
                Some(Some(was)) if target.as_ref() != Some(was) => {
                    let directory = path.symlink_metadata().is_ok_and(|meta| meta.is_dir());
                    let how = match undo_one(&path, directory) {
                        Undo::Left(why) => Undo::Left(why),
                        Undo::Removed | Undo::MovedAside(_) | Undo::Relinked(_) => {
                            relink(&path, was)
                        }
                    };
                    undone.push(Undone { path, how });
                }
                Some(_) => {}
            }
        }
        // A link removed.
        for (name, was) in entries {
            if let Some(was) = was
                && !now.contains_key(name)
                && rule.kept(name)
            {
                let path = rule.home.join(name);
                undone.push(Undone {
                    how: relink(&path, was),
                    path,
                });
            }
        }
    }
    // What is left of the paths that must not be made (a new dot entry holding one went
    // aside whole above).
    for path in &before.absent {
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

/// Make `path` a link to `target` again.
fn relink(path: &Path, target: &Path) -> Undo {
    match std::os::unix::fs::symlink(target, path) {
        Ok(()) => Undo::Relinked(target.to_path_buf()),
        Err(error) => Undo::Left(format!("the link could not be made again: {error}")),
    }
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
