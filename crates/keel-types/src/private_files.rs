//! keel's own files, kept from every other local user: the one module of this crate that
//! touches the file system, here because every crate that writes into `$KEEL_HOME` (the store,
//! the sandbox's temp and cache dirs, the trust store, the snapshot store, the binary's
//! history and launch pages) depends on this one and no other.
//!
//! Invariants:
//! - What keel makes is the owner's alone whatever the umask: a directory 0700, a file 0600,
//!   set explicitly on the new entry. The process umask is never changed (a command keel
//!   starts meanwhile inherits the user's own, so the files it makes in the workspace keep
//!   their usual modes).
//! - A looser entry keel made earlier is tightened (`tighten`) only if it is the user's own and
//!   not a link, through a descriptor opened without following one: a file the user links in
//!   from a dotfiles repository, or anyone else's file, is left as it is.
//! - A file written whole (`write_private_file`) appears complete or not at all (a temp file
//!   renamed over it), and never through a link at its name.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// A directory of keel's: the owner's only.
pub const DIR_MODE: u32 = 0o700;
/// A file of keel's: the owner's only.
pub const FILE_MODE: u32 = 0o600;

const NO_FOLLOW: i32 = nix::fcntl::OFlag::O_NOFOLLOW.bits();
const NO_BLOCK: i32 = nix::fcntl::OFlag::O_NONBLOCK.bits();
const DIRECTORY: i32 = nix::fcntl::OFlag::O_DIRECTORY.bits();

/// Make `dir` (and any missing parent) owner-only; an existing directory is left as it is.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.symlink_metadata().is_ok() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    // The umask may have taken bits from the mode asked for: set it whole.
    let made = OpenOptions::new()
        .read(true)
        .custom_flags(NO_FOLLOW | DIRECTORY)
        .open(dir)?;
    made.set_permissions(std::fs::Permissions::from_mode(DIR_MODE))
}

/// Open `path` to read and write, creating it owner-only (never truncating, never through a
/// link); a looser file of the user's own is tightened.
pub fn create_private_file(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .custom_flags(NO_FOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.uid() == nix::unistd::getuid().as_raw() && meta.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(meta.mode() & FILE_MODE))?;
    }
    Ok(file)
}

/// Write `bytes` to `path` whole and owner-only: a temp file beside it, renamed over it.
pub fn write_private_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = synced_temp_beside(path, bytes)?;
    let renamed = std::fs::rename(&temp, path);
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    renamed
}

/// `bytes` in a new owner-only file beside `path` (created exclusively, never through a link,
/// a name unique to this process and call), synced: its path. Nothing is left on failure.
fn synced_temp_beside(path: &Path, bytes: &[u8]) -> std::io::Result<std::path::PathBuf> {
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.{}-{serial}.tmp", std::process::id()));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .custom_flags(NO_FOLLOW)
            .open(&temp)?;
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    match written {
        Ok(()) => Ok(temp),
        Err(error) => {
            let _ = std::fs::remove_file(&temp);
            Err(error)
        }
    }
}

/// Read a file keel keeps private (at most `limit` bytes), `None` when there is none. Refused
/// (`PermissionDenied`, the message says what to do) when it is a link, not a regular file,
/// someone else's, or readable by other users: what it holds may be a secret someone else
/// planted or could have read.
pub fn read_private_file(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::{Error, ErrorKind, Read};
    let refused = |why: String| Err(Error::new(ErrorKind::PermissionDenied, why));
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(NO_FOLLOW | NO_BLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) if error.raw_os_error() == Some(nix::libc::ELOOP) => {
            return refused("it is a link: keel reads it only as a file of its own".into());
        }
        Err(error) => return Err(error),
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return refused("it is not a regular file".into());
    }
    if meta.uid() != nix::unistd::getuid().as_raw() {
        return refused(format!(
            "it belongs to another user (uid {}): remove it",
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return refused(format!(
            "other users can read it (mode {:o}): run chmod 600 on it",
            meta.mode() & 0o777
        ));
    }
    if meta.len() > limit {
        return refused(format!("it is larger than {limit} bytes"));
    }
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// Put `bytes` at `path` owner-only unless something is there already: a synced temp file
/// beside it, linked into place (never replacing, never through a link); whether it was placed.
/// A power failure leaves no file or the whole of it.
pub fn place_private_file(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    let temp = synced_temp_beside(path, bytes)?;
    let placed = match std::fs::hard_link(&temp, path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(error),
    };
    let _ = std::fs::remove_file(&temp);
    placed
}

/// What kind of entry `tighten` expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File,
}

/// Take group and other bits off `path` if it is the user's own `kind` of entry and looser
/// than owner-only; never through a link, never anyone else's. Whether it was tightened.
pub fn tighten(path: &Path, kind: Entry) -> std::io::Result<bool> {
    let Ok(seen) = path.symlink_metadata() else {
        return Ok(false);
    };
    let right_kind = match kind {
        Entry::Dir => seen.file_type().is_dir(),
        Entry::File => seen.file_type().is_file(),
    };
    if !right_kind || seen.uid() != nix::unistd::getuid().as_raw() || seen.mode() & 0o077 == 0 {
        return Ok(false);
    }
    let flags = match kind {
        Entry::Dir => NO_FOLLOW | NO_BLOCK | DIRECTORY,
        Entry::File => NO_FOLLOW | NO_BLOCK,
    };
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)?;
    let meta = opened.metadata()?;
    // Still the entry looked at (not one swapped in meanwhile).
    if meta.dev() != seen.dev() || meta.ino() != seen.ino() {
        return Ok(false);
    }
    let mode = match kind {
        Entry::Dir => meta.mode() & DIR_MODE,
        Entry::File => meta.mode() & FILE_MODE,
    };
    opened.set_permissions(std::fs::Permissions::from_mode(mode))?;
    Ok(true)
}

/// The directories of `$KEEL_HOME` that keel makes.
pub const PRIVATE_DIRS: &[&str] = &["state", "snapshots", "tmp", "cache"];

/// The files of `$KEEL_HOME` that keel writes (`serve-launch-*.html` too, in `state` and,
/// from older versions, beside it).
pub const PRIVATE_FILES: &[&str] = &[
    "state/keel.db",
    "state/keel.db-wal",
    "state/keel.db-shm",
    // Not `state/keys.json`: a key file others could read is reported, never quietly
    // tightened (the key may have been read: the user should know to rotate it).
    "history.txt",
    "trusted-workspaces.json",
];

/// Tighten what keel made in `home` (`PRIVATE_DIRS`, `PRIVATE_FILES`, launch pages) where an
/// earlier version left it looser; the paths tightened. `config.toml`, `AGENTS.md` and
/// `commands/` are the user's and are never touched, nor is anything below these entries.
pub fn tighten_home(home: &Path) -> Vec<std::path::PathBuf> {
    let mut entries: Vec<(std::path::PathBuf, Entry)> = PRIVATE_DIRS
        .iter()
        .map(|name| (home.join(name), Entry::Dir))
        .chain(
            PRIVATE_FILES
                .iter()
                .map(|name| (home.join(name), Entry::File)),
        )
        .collect();
    for dir in [home.to_path_buf(), home.join("state")] {
        if let Ok(children) = std::fs::read_dir(&dir) {
            entries.extend(
                children
                    .flatten()
                    .filter(|child| {
                        child
                            .file_name()
                            .to_str()
                            .is_some_and(|name| name.starts_with("serve-launch-"))
                    })
                    .map(|child| (child.path(), Entry::File)),
            );
        }
    }
    entries
        .into_iter()
        .filter(|(path, kind)| tighten(path, *kind).unwrap_or(false))
        .map(|(path, _)| path)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        path.symlink_metadata().unwrap().mode() & 0o777
    }

    #[test]
    fn made_owner_only_and_tightened_but_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        create_private_dir(&home.join("state")).unwrap();
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&home.join("state")), 0o700);
        drop(create_private_file(&home.join("state/keel.db")).unwrap());
        assert_eq!(mode(&home.join("state/keel.db")), 0o600);
        write_private_file(&home.join("history.txt"), b"x").unwrap();
        assert_eq!(mode(&home.join("history.txt")), 0o600);
        std::fs::set_permissions(home.join("state"), PermissionsExt::from_mode(0o755)).unwrap();
        std::fs::set_permissions(home.join("history.txt"), PermissionsExt::from_mode(0o644))
            .unwrap();
        let elsewhere = dir.path().join("dotfiles-config");
        std::fs::write(&elsewhere, "").unwrap();
        std::fs::set_permissions(&elsewhere, PermissionsExt::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, home.join("trusted-workspaces.json")).unwrap();
        let tightened = tighten_home(&home);
        assert_eq!(
            tightened,
            vec![home.join("state"), home.join("history.txt")]
        );
        assert_eq!(mode(&home.join("state")), 0o700);
        assert_eq!(mode(&home.join("history.txt")), 0o600);
        assert_eq!(mode(&elsewhere), 0o644, "a link is never followed");
    }
}
