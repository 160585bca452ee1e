//! Which snapshot stores this keel made, and removing those an earlier one made: before this
//! version a store took every file git would hash, so it may hold a copy of a file with one of
//! keel's secrets (the store never holds a secret: docs/security.md#secrets).
//!
//! Invariants:
//! - A store this keel makes holds `FORMAT` from the moment it exists (written before the
//!   directory is renamed into place).
//! - A store without it is removed whole — moved aside first, in one rename, so no session
//!   sees half of it — at the next start of any keel (`retire_old_stores`) and, should one
//!   appear meanwhile, before a snapshot is taken in it.

use super::Snapshots;
use std::path::{Path, PathBuf};

/// The file that marks a store made by this keel (which keeps secrets out of it), and what it
/// holds.
pub(super) const FORMAT: (&str, &str) = (
    "keel-format",
    "2 (files holding keel's secrets are left out)\n",
);

/// Move `store` aside and remove it; an error only if it is still there, unmarked.
fn retire(store: &Path, tag: &str) -> Result<(), String> {
    let parent = store.parent().unwrap_or(Path::new("."));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let retired = parent.join(format!(".retired-{tag}-{nanos}"));
    match std::fs::rename(store, &retired) {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&retired);
            Ok(())
        }
        // Another keel retired it first, or made it anew.
        Err(_) if !store.join("objects").is_dir() || store.join(FORMAT.0).is_file() => Ok(()),
        Err(error) => Err(format!(
            "cannot remove the old snapshot store {}: {error}",
            store.display()
        )),
    }
}

/// Remove every snapshot store in `keel_home` that an earlier keel made; the stores removed.
pub fn retire_old_stores(keel_home: &Path) -> Vec<PathBuf> {
    let Ok(stores) = std::fs::read_dir(keel_home.join("snapshots")) else {
        return Vec::new();
    };
    stores
        .flatten()
        .map(|entry| entry.path())
        .filter(|store| {
            store.extension().is_some_and(|ext| ext == "git")
                && store.join("objects").is_dir()
                && !store.join(FORMAT.0).is_file()
        })
        .filter(|store| retire(store, "old").is_ok())
        .collect()
}

impl Snapshots {
    /// Remove a store an earlier keel made: it may hold a file with one of keel's secrets (it
    /// took every file). Moved aside first (one rename), so no session sees half of it.
    pub(super) fn retire_old_store(&self) -> Result<(), String> {
        retire(&self.store, &self.session)
    }
}
