//! Special files and kernel trees: what the file tools refuse to read or search.
//!
//! Invariants:
//! - A file is read only through a descriptor opened without blocking (`O_NONBLOCK`, so
//!   opening a FIFO returns at once instead of waiting for a writer) and without making it a
//!   controlling terminal; then `fstat` on that descriptor must say "regular file". The check
//!   is on the open file, so nothing can be swapped in between the check and the read.
//! - `/proc`, `/sys` and `/dev` are never searched: reads there can block forever (e.g.
//!   `/proc/kmsg`) or never end.

use nix::fcntl::OFlag;
use std::fmt;
use std::fs::File;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What a path is, as far as reading it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Regular,
    Directory,
    Fifo,
    Socket,
    Device,
    Symlink,
    Other,
}

/// One classification for both `std` and `cap-std` file types (they share method names but
/// no trait).
macro_rules! classify {
    ($file_type:expr) => {{
        let file_type = $file_type;
        if file_type.is_file() {
            FileKind::Regular
        } else if file_type.is_dir() {
            FileKind::Directory
        } else if file_type.is_symlink() {
            FileKind::Symlink
        } else if file_type.is_fifo() {
            FileKind::Fifo
        } else if file_type.is_socket() {
            FileKind::Socket
        } else if file_type.is_char_device() || file_type.is_block_device() {
            FileKind::Device
        } else {
            FileKind::Other
        }
    }};
}

impl FileKind {
    pub fn of(file_type: &std::fs::FileType) -> FileKind {
        classify!(file_type)
    }

    /// The same, for a type from `cap-std`.
    pub fn of_cap(file_type: &cap_std::fs::FileType) -> FileKind {
        use cap_std::fs::FileTypeExt;
        classify!(file_type)
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Regular => "a regular file",
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO",
            FileKind::Socket => "a socket",
            FileKind::Device => "a device",
            FileKind::Symlink => "a symlink",
            FileKind::Other => "a special file",
        })
    }
}

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadRefusal {
    #[error("`{path}` is a directory: use list_dir")]
    Directory { path: String },
    #[error("`{path}` is {kind}, not a regular file; keel reads regular files only")]
    NotRegular { path: String, kind: FileKind },
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Flags for opening a file to read it: never block in `open`, never take a terminal.
pub fn read_flags() -> i32 {
    (OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits()
}

/// Open `path` (following symlinks) for reading, if it is a regular file; `shown` names it in
/// errors.
pub fn open_regular(path: &Path, shown: &str) -> Result<File, ReadRefusal> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(read_flags())
        .open(path)
        .map_err(|source| ReadRefusal::Io {
            path: shown.to_string(),
            source,
        })?;
    require_regular(file, shown)
}

/// Keep `file` only if `fstat` says it is a regular file.
pub fn require_regular(file: File, shown: &str) -> Result<File, ReadRefusal> {
    let kind = file
        .metadata()
        .map(|meta| FileKind::of(&meta.file_type()))
        .map_err(|source| ReadRefusal::Io {
            path: shown.to_string(),
            source,
        })?;
    match kind {
        FileKind::Regular => Ok(file),
        FileKind::Directory => Err(ReadRefusal::Directory {
            path: shown.to_string(),
        }),
        FileKind::Fifo
        | FileKind::Socket
        | FileKind::Device
        | FileKind::Symlink
        | FileKind::Other => Err(ReadRefusal::NotRegular {
            path: shown.to_string(),
            kind,
        }),
    }
}

/// The kernel tree (`/proc`, `/sys`, `/dev`) that the absolute, resolved `path` is in.
pub fn kernel_tree(path: &Path) -> Option<&'static str> {
    ["/proc", "/sys", "/dev"]
        .into_iter()
        .find(|tree| path.starts_with(tree))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_trees_are_whole_components() {
        assert_eq!(kernel_tree(Path::new("/proc")), Some("/proc"));
        assert_eq!(kernel_tree(Path::new("/proc/1/fd")), Some("/proc"));
        assert_eq!(kernel_tree(Path::new("/sys/kernel")), Some("/sys"));
        assert_eq!(kernel_tree(Path::new("/dev/null")), Some("/dev"));
        assert_eq!(kernel_tree(Path::new("/procedures")), None);
        assert_eq!(kernel_tree(Path::new("/home/dev")), None);
        assert_eq!(kernel_tree(Path::new("/")), None);
    }

    #[test]
    fn only_regular_files_open() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "x").unwrap();
        assert!(open_regular(&file, "a.txt").is_ok());
        let error = open_regular(dir.path(), "d").unwrap_err();
        assert_eq!(error.to_string(), "`d` is a directory: use list_dir");
        let error = open_regular(Path::new("/dev/null"), "/dev/null").unwrap_err();
        assert_eq!(
            error.to_string(),
            "`/dev/null` is a device, not a regular file; keel reads regular files only"
        );
        let error = open_regular(&dir.path().join("missing"), "missing").unwrap_err();
        assert!(matches!(error, ReadRefusal::Io { .. }), "{error}");
    }
}
