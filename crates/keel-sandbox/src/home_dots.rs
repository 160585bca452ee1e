//! A writable root that holds the home directory (keel run in `~`, `--add-dir ~`, the user's
//! `allow_write = ["~"]`). No fixed list of startup files can win there — `usercustomize.py`,
//! `~/.cargo/config.toml`, `~/.ssh/authorized_keys` made where `~/.ssh` did not exist, an
//! editor's or a REPL's configuration that runs code — so the rule is by shape: the home's
//! top-level dot entries and the `$PATH` directories under it are the user's configuration
//! and programs, never a command's to change.
//!
//! Invariants:
//! - Every top-level dot entry of the home that exists at the session's start is read-only to
//!   commands (bound read-only, like `.git/hooks`); one that is a link has where it leads
//!   protected too, where that is in a writable root. Exceptions: a dot entry the user's own
//!   `[sandbox] allow_write` names exactly (`"~/.cache"`), a dotfiles repository's `~/.git`
//!   (its config and hooks are protected like any repository's), and an entry holding a
//!   writable root.
//! - A top-level dot entry a command creates is moved aside after it, and a link it removed
//!   or changed is put back (`planted`); the file tools refuse every such entry by name.
//! - The `$PATH` directories under the home are treated the same (protected, or undone).
//! - It is said at the start of every session it applies to (`notice`).

use crate::paths::{canonical, expand};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The home's dot entries a session keeps from commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HomeDots {
    /// The home directory, canonical.
    pub home: PathBuf,
    /// The top-level dot names the user's own `allow_write` lets commands change.
    pub exempt: Vec<OsString>,
    /// `~/.git` was a directory at the start (a dotfiles repository): left to git.
    pub dotfiles_git: bool,
    /// Roots asked for inside a dot entry (the workspace in `~/.dotfiles`, `--add-dir
    /// ~/.config/x`, the user's `allow_write = ["~/.cargo/registry"]`): writable still, the
    /// rest of their dot entry not.
    pub open_inside: Vec<PathBuf>,
}

/// The home's top-level dot entries at a moment: each name, with where it led if a link.
pub type DotEntries = BTreeMap<OsString, Option<PathBuf>>;

impl HomeDots {
    /// The rule for a session whose writable roots are `writable`, with the user's own
    /// `allow_write` entries: `None` unless one of the roots holds the home.
    pub(crate) fn of(
        home: Option<&Path>,
        writable: &[PathBuf],
        requested: &[PathBuf],
        allow_write: &[String],
    ) -> Option<HomeDots> {
        let home = canonical(home?)?;
        if !writable.iter().any(|root| home.starts_with(root)) {
            return None;
        }
        let exempt = allow_write
            .iter()
            .filter_map(|entry| expand(entry, Some(&home)))
            .filter_map(|path| dot_name(&home, &path).filter(|_| path.parent() == Some(&home)))
            .collect();
        let open_inside = requested
            .iter()
            .filter(|root| dot_name(&home, root).is_some())
            .cloned()
            .collect();
        Some(HomeDots {
            dotfiles_git: home
                .join(".git")
                .symlink_metadata()
                .is_ok_and(|meta| meta.is_dir()),
            home,
            exempt,
            open_inside,
        })
    }

    /// The top-level dot entry of the home that `path` is or is inside, if commands and the
    /// file tools may not change it.
    pub fn covers(&self, path: &Path) -> Option<PathBuf> {
        if self.open_inside.iter().any(|root| path.starts_with(root)) {
            return None;
        }
        let name = dot_name(&self.home, path)?;
        self.kept(&name).then(|| self.home.join(name))
    }

    /// Whether the dot entry `name` is kept from change.
    pub(crate) fn kept(&self, name: &OsStr) -> bool {
        let exempt = self.exempt.iter().any(|exempt| exempt == name);
        let dotfiles = self.dotfiles_git && name == OsStr::new(".git");
        !(exempt || dotfiles)
    }

    /// The home's top-level dot entries now, each with where it leads if a link.
    pub fn entries_now(&self) -> DotEntries {
        let Ok(children) = std::fs::read_dir(&self.home) else {
            return DotEntries::new();
        };
        children
            .flatten()
            .filter(|child| child.file_name().as_bytes().starts_with(b"."))
            .map(|child| {
                let target = child
                    .file_type()
                    .is_ok_and(|kind| kind.is_symlink())
                    .then(|| std::fs::read_link(child.path()).ok())
                    .flatten();
                (child.file_name(), target)
            })
            .collect()
    }

    /// What to protect now: the kept dot entries, and where the links among them lead.
    pub(crate) fn to_protect(&self) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for (name, target) in self.entries_now() {
            if !self.kept(&name) {
                continue;
            }
            let path = self.home.join(&name);
            match target {
                None => paths.push(path),
                Some(_) => paths.extend(canonical(&path)),
            }
        }
        paths
    }

    /// The `$PATH` directories under the home (programs the user's shell runs): those that
    /// exist, and those that do not (a command may not make them).
    pub(crate) fn path_dirs(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let mut existing = Vec::new();
        let mut absent = Vec::new();
        let Some(path) = std::env::var_os("PATH") else {
            return (existing, absent);
        };
        for dir in std::env::split_paths(&path).filter(|dir| dir.is_absolute()) {
            match canonical(&dir) {
                Some(dir) if dir.starts_with(&self.home) && dir != self.home => existing.push(dir),
                Some(_) => {}
                None if dir.starts_with(&self.home) && dir != self.home => absent.push(dir),
                None => {}
            }
        }
        (existing, absent)
    }

    /// What a session is told at its start.
    pub fn notice(&self) -> String {
        format!(
            "your home directory {} is writable in this session: its dot entries (your \
             configuration) and the $PATH directories in it are read-only to commands, and a \
             new one a command makes is moved aside after it; to let commands change one, add \
             it to `[sandbox] allow_write` in $KEEL_HOME/config.toml (e.g. allow_write = \
             [\"~/.cache\"])",
            self.home.display()
        )
    }
}

/// The top-level dot name of `home` that `path` is or is inside.
fn dot_name(home: &Path, path: &Path) -> Option<OsString> {
    match path.strip_prefix(home).ok()?.components().next()? {
        Component::Normal(name) if name.as_bytes().starts_with(b".") => Some(name.to_os_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dot_entry_is_kept_but_those_the_user_names_and_a_dotfiles_git() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join(".git")).unwrap();
        std::fs::create_dir_all(home.join(".cache/pip")).unwrap();
        std::fs::create_dir_all(home.join(".cargo/registry")).unwrap();
        let rule = HomeDots::of(
            Some(&home),
            std::slice::from_ref(&home),
            &[home.clone(), home.join(".cargo/registry")],
            &["~/.cache".to_string(), "~/.cargo/registry".to_string()],
        )
        .unwrap();
        assert_eq!(
            rule.covers(&home.join(".ssh/authorized_keys")),
            Some(home.join(".ssh"))
        );
        assert_eq!(rule.covers(&home.join("usercustomize.py")), None);
        assert_eq!(
            rule.covers(&home.join(".cargo/config.toml")),
            Some(home.join(".cargo")),
            "only an exact top-level entry exempts"
        );
        assert_eq!(
            rule.covers(&home.join(".cargo/registry/index")),
            None,
            "a root asked for inside one stays writable"
        );
        assert_eq!(rule.covers(&home.join(".cache/pip/x")), None);
        assert_eq!(rule.covers(&home.join(".git/objects/x")), None);
        assert_eq!(
            HomeDots::of(Some(&home), &[home.join("project")], &[], &[]),
            None,
            "no root holds the home"
        );
    }
}
