//! A sandbox's temp dir under keel's home: `$KEEL_HOME/tmp/<name>`, the confined command's
//! `/tmp`.
//!
//! Invariants:
//! - Created owner-only (0700), its parent too; an existing one is reused (a resumed session).
//!   Processes sharing keel's home may create and remove temp dirs at once: a parent removed
//!   under a creation is made again.
//! - Removed, with everything in it, when dropped; `$KEEL_HOME/tmp` goes too once empty.

use std::path::{Path, PathBuf};

/// `$KEEL_HOME/tmp/<name>`, removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Create `$KEEL_HOME/tmp/<name>` (owner-only).
    pub fn create(keel_home: &Path, name: &str) -> std::io::Result<TempDir> {
        use std::os::unix::fs::DirBuilderExt;
        let parent = keel_home.join("tmp");
        let dir = parent.join(name);
        // Another process may remove the (then empty) parent between the two creations: try
        // again a few times.
        let mut attempts = 0;
        loop {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&parent)?;
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(TempDir(dir)),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Ok(TempDir(dir));
                }
                Err(error) if error.kind() == std::io::ErrorKind::NotFound && attempts < 8 => {
                    attempts += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        if let Some(parent) = self.0.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_owner_only_and_goes_away_with_its_empty_parent() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let temp = TempDir::create(home.path(), "s1").unwrap();
        std::fs::write(temp.path().join("f"), "x").unwrap();
        let mode = std::fs::metadata(temp.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let other = TempDir::create(home.path(), "s2").unwrap();
        drop(temp);
        assert!(!home.path().join("tmp/s1").exists());
        assert!(
            home.path().join("tmp").exists(),
            "another session still uses it"
        );
        drop(other);
        assert!(!home.path().join("tmp").exists());
    }
}
