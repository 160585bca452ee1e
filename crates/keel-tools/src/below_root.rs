//! Reading and writing a file below a root through directory handles (`cap-std`), so that a
//! path changed after the guard checked it cannot carry the write out of the root.
//!
//! Invariants:
//! - The root is opened once; every parent directory is then opened (or created) one
//!   component at a time relative to the handle of the one above it, and the file is opened,
//!   created and renamed relative to its parent's handle. No path is resolved twice, so there
//!   is no window between a check and a use.
//! - The path below the root comes from the guard, which resolved every symlink in it; a
//!   symlink met on the way now was swapped in after the check, and is refused by name.
//!   `cap-std` itself never follows a symlink out of the handle it resolves from.
//! - A write is atomic: a new temporary file (created exclusively) in the same directory,
//!   written and synced, given the old file's permissions, then renamed over the target. On
//!   failure the temporary file is removed.
//! - Reads open the file without blocking and accept regular files only (see `special`).

use crate::guard::WriteTarget;
use crate::special_files::{FileKind, ReadRefusal, read_flags, require_regular};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a file below a root could not be read or written; `path` is what the model asked for.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    #[error(
        "`{path}` changed after keel checked it: `{link}` is now a symlink, which keel does not \
         follow while writing (it could lead out of the workspace); nothing was written"
    )]
    SymlinkSwapped { path: String, link: String },
    #[error("`{path}` is a directory")]
    Directory { path: String },
    #[error("`{path}` does not exist")]
    Missing { path: String },
    #[error("cannot write `{path}`: `{part}` is not a directory")]
    NotDirectory { path: String, part: String },
    #[error(transparent)]
    Read(#[from] ReadRefusal),
    #[error("cannot write `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// What to do with a parent directory that does not exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissingParents {
    Create,
    Refuse,
}

/// Whether a write made a new file or replaced one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    Created,
    Replaced,
}

/// A file below a root: an open handle of its parent directory and its name there.
pub struct FileBeneath {
    parent: Dir,
    name: OsString,
    path: String,
}

impl FileBeneath {
    /// Open the parent of `target` through handles from its root; `path` names it in errors.
    pub fn open(
        target: &WriteTarget,
        path: &str,
        missing: MissingParents,
    ) -> Result<FileBeneath, BeneathError> {
        let io = |source| BeneathError::Io {
            path: path.to_string(),
            source,
        };
        let Some(name) = target.relative.file_name().map(OsString::from) else {
            return Err(BeneathError::Directory {
                path: path.to_string(),
            });
        };
        let mut parent =
            Dir::open_ambient_dir(&target.root, cap_std::ambient_authority()).map_err(io)?;
        let mut walked = PathBuf::new();
        let parents = target.relative.parent().unwrap_or(Path::new(""));
        for component in parents.components() {
            let Component::Normal(part) = component else {
                return Err(io(std::io::Error::from(std::io::ErrorKind::InvalidInput)));
            };
            walked.push(part);
            let shown = || walked.to_string_lossy().into_owned();
            parent = match open_child_dir(&parent, Path::new(part), missing) {
                Ok(child) => child,
                Err(ChildFailure::Symlink) => {
                    return Err(BeneathError::SymlinkSwapped {
                        path: path.to_string(),
                        link: shown(),
                    });
                }
                Err(ChildFailure::NotDirectory) => {
                    return Err(BeneathError::NotDirectory {
                        path: path.to_string(),
                        part: shown(),
                    });
                }
                Err(ChildFailure::Missing) => {
                    return Err(BeneathError::Missing {
                        path: path.to_string(),
                    });
                }
                Err(ChildFailure::Io(source)) => return Err(io(source)),
            };
        }
        Ok(FileBeneath {
            parent,
            name,
            path: path.to_string(),
        })
    }

    /// The file's contents now, for a preview: `Ok(None)` when nothing is there yet, and its
    /// size alone when it is larger than `limit` bytes.
    pub fn current(&self, limit: u64) -> Result<Option<Result<Vec<u8>, u64>>, BeneathError> {
        match self.kind()? {
            None => Ok(None),
            Some((_, meta)) if meta.len() > limit => Ok(Some(Err(meta.len()))),
            Some(_) => self.read().map(|bytes| Some(Ok(bytes))),
        }
    }

    /// What is at the file's name now, without following a symlink; `None` when nothing is.
    /// Remove the file if a regular file is there (nothing there: done); a link, a directory
    /// or anything else is refused, never followed.
    pub fn remove_regular(&self) -> Result<(), BeneathError> {
        match self.kind()? {
            None => Ok(()),
            Some((FileKind::Regular, _)) => {
                self.parent.remove_file(&self.name).map_err(|e| self.io(e))
            }
            Some(_) => Err(self.io(std::io::Error::other(
                "something other than a regular file is there now",
            ))),
        }
    }

    fn kind(&self) -> Result<Option<(FileKind, cap_std::fs::Metadata)>, BeneathError> {
        match self.parent.symlink_metadata(&self.name) {
            Ok(meta) => Ok(Some((FileKind::of_cap(&meta.file_type()), meta))),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(self.io(source)),
        }
    }

    fn io(&self, source: std::io::Error) -> BeneathError {
        BeneathError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn swapped(&self) -> BeneathError {
        BeneathError::SymlinkSwapped {
            path: self.path.clone(),
            link: self.path.clone(),
        }
    }

    /// The whole file, if it is a regular file (opened without blocking, checked with fstat).
    pub fn read(&self) -> Result<Vec<u8>, BeneathError> {
        if let Some((FileKind::Symlink, _)) = self.kind()? {
            return Err(self.swapped());
        }
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(read_flags() | nix::fcntl::OFlag::O_NOFOLLOW.bits());
        let file = self
            .parent
            .open_with(&self.name, &options)
            .map_err(|source| ReadRefusal::Io {
                path: self.path.clone(),
                source,
            })?;
        let mut file = require_regular(file.into_std(), &self.path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|source| ReadRefusal::Io {
                path: self.path.clone(),
                source,
            })?;
        Ok(bytes)
    }

    /// Replace the file's content atomically (temporary file + rename, in the same directory).
    pub fn write_atomically(&self, content: &[u8]) -> Result<Written, BeneathError> {
        let permissions = match self.kind()? {
            None => None,
            Some((FileKind::Regular, meta)) => Some(meta.permissions()),
            Some((FileKind::Directory, _)) => {
                return Err(BeneathError::Directory {
                    path: self.path.clone(),
                });
            }
            Some((FileKind::Symlink, _)) => return Err(self.swapped()),
            Some((
                kind @ (FileKind::Fifo | FileKind::Socket | FileKind::Device | FileKind::Other),
                _,
            )) => {
                return Err(BeneathError::Read(ReadRefusal::NotRegular {
                    path: self.path.clone(),
                    kind,
                }));
            }
        };
        let written = match permissions {
            Some(_) => Written::Replaced,
            None => Written::Created,
        };
        let (temporary, file) = self.create_temporary()?;
        let result = (|| {
            let mut file = file.into_std();
            file.write_all(content)?;
            file.sync_all()?;
            if let Some(permissions) = permissions {
                file.set_permissions(permissions.into_std(&file)?)?;
            }
            drop(file);
            self.parent.rename(&temporary, &self.parent, &self.name)
        })();
        match result {
            Ok(()) => Ok(written),
            Err(source) => {
                let _ = self.parent.remove_file(&temporary);
                Err(self.io(source))
            }
        }
    }

    /// A new, exclusively created temporary file next to the target.
    fn create_temporary(&self) -> Result<(OsString, cap_std::fs::File), BeneathError> {
        static SEQUENCE: AtomicU64 = AtomicU64::new(0);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        let mut attempts = 0;
        loop {
            let mut temporary = OsString::from(".");
            temporary.push(&self.name);
            temporary.push(format!(
                ".keel-{}-{}.tmp",
                std::process::id(),
                SEQUENCE.fetch_add(1, Ordering::Relaxed)
            ));
            match self.parent.open_with(&temporary, &options) {
                Ok(file) => return Ok((temporary, file)),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && attempts < 8 => {
                    attempts += 1;
                }
                Err(source) => return Err(self.io(source)),
            }
        }
    }
}

enum ChildFailure {
    Symlink,
    Missing,
    NotDirectory,
    Io(std::io::Error),
}

/// Open the directory `name` in `dir`, creating it if allowed; never through a symlink.
fn open_child_dir(dir: &Dir, name: &Path, missing: MissingParents) -> Result<Dir, ChildFailure> {
    for _ in 0..4 {
        match dir.symlink_metadata(name) {
            Ok(meta) => match FileKind::of_cap(&meta.file_type()) {
                FileKind::Directory => {}
                FileKind::Symlink => return Err(ChildFailure::Symlink),
                FileKind::Regular
                | FileKind::Fifo
                | FileKind::Socket
                | FileKind::Device
                | FileKind::Other => return Err(ChildFailure::NotDirectory),
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => match missing {
                MissingParents::Refuse => return Err(ChildFailure::Missing),
                MissingParents::Create => match dir.create_dir(name) {
                    Ok(()) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(error) => return Err(ChildFailure::Io(error)),
                },
            },
            Err(error) => return Err(ChildFailure::Io(error)),
        }
        // The name was a directory (or was just made one) a moment ago. `cap-std` will not
        // follow a symlink swapped in since out of `dir`; say so if that is what happened.
        match dir.open_dir(name) {
            Ok(child) => return Ok(child),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => {
                return match dir.symlink_metadata(name) {
                    Ok(meta) if meta.file_type().is_symlink() => Err(ChildFailure::Symlink),
                    _ => Err(ChildFailure::Io(error)),
                };
            }
        }
    }
    Err(ChildFailure::Io(std::io::Error::other(
        "the directory kept changing while keel opened it",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn target(root: &Path, relative: &str) -> WriteTarget {
        let root = root.canonicalize().unwrap();
        WriteTarget {
            resolved: root.join(relative),
            root,
            relative: PathBuf::from(relative),
        }
    }

    #[test]
    fn writes_create_parents_and_keep_permissions() {
        let root = tempfile::tempdir().unwrap();
        let at = target(root.path(), "a/b/c.txt");
        let file = FileBeneath::open(&at, "a/b/c.txt", MissingParents::Create).unwrap();
        assert_eq!(file.write_atomically(b"one\n").unwrap(), Written::Created);
        let path = root.path().join("a/b/c.txt");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(file.write_atomically(b"two\n").unwrap(), Written::Replaced);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        assert_eq!(file.read().unwrap(), b"two\n");
        let names: Vec<_> = std::fs::read_dir(root.path().join("a/b"))
            .unwrap()
            .collect();
        assert_eq!(names.len(), 1, "no temporary file is left");
    }

    #[test]
    fn a_symlink_swapped_in_after_the_check_is_refused_by_name() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("c.txt"), "outside\n").unwrap();
        // The guard saw `d/c.txt` with no symlink in it; `d` is a symlink out by now.
        std::os::unix::fs::symlink(outside.path(), root.path().join("d")).unwrap();
        let at = target(root.path(), "d/c.txt");
        for missing in [MissingParents::Create, MissingParents::Refuse] {
            let Err(error) = FileBeneath::open(&at, "d/c.txt", missing) else {
                panic!("opened through a symlink out");
            };
            assert!(
                matches!(&error, BeneathError::SymlinkSwapped { path, link } if path == "d/c.txt" && link == "d"),
                "{error:?}"
            );
            assert!(error.to_string().contains("`d/c.txt`"), "{error}");
        }
        // The same at the file itself.
        std::fs::create_dir(root.path().join("e")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("c.txt"), root.path().join("e/c.txt"))
            .unwrap();
        let at = target(root.path(), "e/c.txt");
        let file = FileBeneath::open(&at, "e/c.txt", MissingParents::Refuse).unwrap();
        assert!(matches!(
            file.write_atomically(b"in\n"),
            Err(BeneathError::SymlinkSwapped { .. })
        ));
        assert!(matches!(
            file.read(),
            Err(BeneathError::SymlinkSwapped { .. })
        ));
        assert_eq!(
            std::fs::read_to_string(outside.path().join("c.txt")).unwrap(),
            "outside\n"
        );
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    }

    #[test]
    fn directories_and_missing_parents_are_named() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("dir")).unwrap();
        let at = target(root.path(), "dir");
        let file = FileBeneath::open(&at, "dir", MissingParents::Create).unwrap();
        assert_eq!(
            file.write_atomically(b"x").unwrap_err().to_string(),
            "`dir` is a directory"
        );
        let at = target(root.path(), "no/such.txt");
        let Err(error) = FileBeneath::open(&at, "no/such.txt", MissingParents::Refuse) else {
            panic!("a missing parent was opened");
        };
        assert_eq!(error.to_string(), "`no/such.txt` does not exist");
        assert!(!root.path().join("no").exists());
    }

    #[test]
    fn reads_refuse_fifos_at_once() {
        let root = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&root.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let at = target(root.path(), "pipe");
        let file = FileBeneath::open(&at, "pipe", MissingParents::Refuse).unwrap();
        let error = file.read().unwrap_err();
        assert_eq!(
            error.to_string(),
            "`pipe` is a FIFO, not a regular file; keel reads regular files only"
        );
        assert!(matches!(
            file.write_atomically(b"x"),
            Err(BeneathError::Read(ReadRefusal::NotRegular { .. }))
        ));
    }
}
