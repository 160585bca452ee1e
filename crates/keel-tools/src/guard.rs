//! The workspace guard: where tools may write.
//!
//! Invariants:
//! - A path is resolved against the workspace component by component, following symlinks
//!   (dangling ones too) and applying `..` to the real directory, the way the OS will; so
//!   neither `../x`, an absolute path, nor a symlink pointing outside can smuggle a write out.
//! - A file whose *name* merely contains `..` (e.g. `a..b`) is an ordinary name.
//! - The roots themselves are canonicalised once, when the guard is built.
//! - The guard only decides; a write must then open its target below the root it was resolved
//!   to without following symlinks out (see `beneath`), since the path can change after the
//!   check.

use std::collections::VecDeque;
use std::path::{Component, Path, PathBuf};

#[derive(Clone, Debug)]
pub struct WorkspaceGuard {
    workspace: PathBuf,
    roots: Vec<PathBuf>,
}

/// Where a write lands, as the guard resolved it: a root and the path below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteTarget {
    /// The workspace or an added directory (canonical).
    pub root: PathBuf,
    /// The path below `root`; it contained no symlink when it was resolved.
    pub relative: PathBuf,
    /// `root` joined with `relative`.
    pub resolved: PathBuf,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GuardError {
    #[error(
        "`{path}` is outside the workspace ({workspace}); keel only writes inside it and directories added with --add-dir"
    )]
    Outside { path: String, workspace: String },
    #[error("`{0}` is not a usable path")]
    Invalid(String),
}

impl WorkspaceGuard {
    pub fn new(workspace: &Path, extra_dirs: &[PathBuf]) -> std::io::Result<WorkspaceGuard> {
        let workspace = workspace.canonicalize()?;
        let mut roots = vec![workspace.clone()];
        for dir in extra_dirs {
            roots.push(dir.canonicalize()?);
        }
        Ok(WorkspaceGuard { workspace, roots })
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The absolute, symlink-resolved form of `path` (which need not exist yet), resolved
    /// component by component the way the OS will: `..` after a symlink goes up from the link's
    /// target, and dangling links are followed too.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, GuardError> {
        if path.is_empty() || path.contains('\0') {
            return Err(GuardError::Invalid(path.to_string()));
        }
        let mut resolved = self.workspace.clone();
        let mut queue: VecDeque<PathBuf> = Path::new(path)
            .components()
            .map(|c| PathBuf::from(c.as_os_str()))
            .collect();
        let mut hops = 0;
        while let Some(part) = queue.pop_front() {
            match part.components().next() {
                Some(Component::RootDir) | Some(Component::Prefix(_)) => resolved = part,
                Some(Component::CurDir) | None => {}
                Some(Component::ParentDir) => {
                    resolved.pop();
                }
                Some(Component::Normal(name)) => {
                    let candidate = resolved.join(name);
                    let is_link = candidate
                        .symlink_metadata()
                        .is_ok_and(|meta| meta.file_type().is_symlink());
                    if !is_link {
                        resolved = candidate;
                        continue;
                    }
                    hops += 1;
                    let target = std::fs::read_link(&candidate)
                        .map_err(|_| GuardError::Invalid(path.to_string()))?;
                    if hops > 40 {
                        return Err(GuardError::Invalid(path.to_string()));
                    }
                    for component in target.components().rev() {
                        queue.push_front(PathBuf::from(component.as_os_str()));
                    }
                }
            }
        }
        Ok(resolved)
    }

    pub fn is_inside(&self, resolved: &Path) -> bool {
        self.roots.iter().any(|root| resolved.starts_with(root))
    }

    /// Resolve `path` and require it to be inside a root: the check for every write.
    pub fn check_write(&self, path: &str) -> Result<PathBuf, GuardError> {
        let resolved = self.resolve(path)?;
        if self.is_inside(&resolved) {
            Ok(resolved)
        } else {
            Err(GuardError::Outside {
                path: path.to_string(),
                workspace: self.workspace.display().to_string(),
            })
        }
    }

    /// Resolve `path` for a write: the root that contains it (the innermost one) and the path
    /// below that root, which has no symlink in it as resolved now.
    pub fn write_target(&self, path: &str) -> Result<WriteTarget, GuardError> {
        let resolved = self.check_write(path)?;
        let root = self
            .roots
            .iter()
            .filter(|root| resolved.starts_with(root))
            .max_by_key(|root| root.components().count())
            .ok_or_else(|| GuardError::Invalid(path.to_string()))?;
        let relative = resolved
            .strip_prefix(root)
            .map_err(|_| GuardError::Invalid(path.to_string()))?
            .to_path_buf();
        Ok(WriteTarget {
            root: root.clone(),
            relative,
            resolved,
        })
    }

    /// `resolved` relative to the workspace when inside it, for display.
    pub fn display(&self, resolved: &Path) -> String {
        match resolved.strip_prefix(&self.workspace) {
            Ok(relative) if relative.as_os_str().is_empty() => ".".into(),
            Ok(relative) => relative.to_string_lossy().into_owned(),
            Err(_) => resolved.to_string_lossy().into_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, WorkspaceGuard) {
        let workspace = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(workspace.path().join("src")).unwrap();
        let guard = WorkspaceGuard::new(workspace.path(), &[]).unwrap();
        (workspace, outside, guard)
    }

    #[test]
    fn parent_escapes_are_refused() {
        let (_w, _o, guard) = setup();
        assert!(matches!(
            guard.check_write("../x"),
            Err(GuardError::Outside { .. })
        ));
        assert!(matches!(
            guard.check_write("src/../../x"),
            Err(GuardError::Outside { .. })
        ));
        assert!(guard.check_write("src/../ok.txt").is_ok());
    }

    #[test]
    fn absolute_paths_are_checked() {
        let (workspace, outside, guard) = setup();
        assert!(
            guard
                .check_write(outside.path().join("f").to_str().unwrap())
                .is_err()
        );
        assert!(guard.check_write("/etc/passwd").is_err());
        let inside = workspace.path().join("src/new.rs");
        assert!(guard.check_write(inside.to_str().unwrap()).is_ok());
    }

    #[test]
    fn symlinks_pointing_outside_are_refused() {
        let (workspace, outside, guard) = setup();
        std::os::unix::fs::symlink(outside.path(), workspace.path().join("escape")).unwrap();
        assert!(guard.check_write("escape/file.txt").is_err());
        std::os::unix::fs::symlink(outside.path().join("target"), workspace.path().join("link"))
            .unwrap();
        assert!(
            guard.check_write("link").is_err(),
            "a dangling link to outside"
        );
        std::os::unix::fs::symlink(workspace.path().join("src"), workspace.path().join("inner"))
            .unwrap();
        assert!(
            guard.check_write("inner/a.rs").is_ok(),
            "a link that stays inside"
        );
        std::fs::create_dir_all(outside.path().join("a/b")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("a/b"), workspace.path().join("deep"))
            .unwrap();
        assert!(
            guard.check_write("deep/../x").is_err(),
            "`..` after a link leaves from its target"
        );
    }

    #[test]
    fn names_containing_dots_are_ordinary() {
        let (_w, _o, guard) = setup();
        let resolved = guard.check_write("src/a..b/..c/file..txt").unwrap();
        assert!(resolved.ends_with("src/a..b/..c/file..txt"));
    }

    #[test]
    fn write_targets_are_below_the_innermost_root() {
        let workspace = tempfile::tempdir().unwrap();
        let inner = workspace.path().join("vendor");
        std::fs::create_dir(&inner).unwrap();
        std::os::unix::fs::symlink("vendor", workspace.path().join("v")).unwrap();
        let guard = WorkspaceGuard::new(workspace.path(), std::slice::from_ref(&inner)).unwrap();
        let target = guard.write_target("v/lib/a.rs").unwrap();
        assert_eq!(target.root, inner.canonicalize().unwrap());
        assert_eq!(target.relative, Path::new("lib/a.rs"));
        assert_eq!(target.resolved, target.root.join("lib/a.rs"));
        let top = guard.write_target("./b.rs").unwrap();
        assert_eq!(top.relative, Path::new("b.rs"));
        assert!(guard.write_target("../c.rs").is_err());
    }

    #[test]
    fn added_directories_are_writable() {
        let workspace = tempfile::tempdir().unwrap();
        let extra = tempfile::tempdir().unwrap();
        let guard = WorkspaceGuard::new(workspace.path(), &[extra.path().to_path_buf()]).unwrap();
        assert!(
            guard
                .check_write(extra.path().join("x").to_str().unwrap())
                .is_ok()
        );
    }
}
