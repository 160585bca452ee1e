//! The user's trust decisions, kept in `$KEEL_HOME/trusted-workspaces.json` (never in a
//! workspace): each trusted workspace with the SHA-256 of each project file it was trusted for.
//!
//! Invariants:
//! - A workspace is trusted only when a record exists for its canonical path and every project
//!   file present now has exactly the digest recorded for it: a changed file, or one that was
//!   absent when trust was given, is untrusted. A recorded file that is gone loosens nothing.
//! - The file is written whole (a temporary file, fsync, rename), readable by its owner only
//!   (0600). A store that cannot be read or parsed trusts nothing and is never overwritten: the
//!   error names the file and what to do.
//! - This is the only place in keel-config that writes.

use crate::workspace_files::WorkspaceFiles;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The store's file name under `$KEEL_HOME`.
pub const TRUST_FILE: &str = "trusted-workspaces.json";

const FORMAT_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum TrustStoreError {
    #[error(
        "cannot read the trust store {file}: {reason}; no workspace is trusted until it is fixed \
         or removed (`keel trust` records trust again)"
    )]
    Unreadable { file: PathBuf, reason: String },
    #[error("cannot write the trust store {file}: {source}")]
    Write {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot resolve the workspace {workspace}: {source}")]
    Workspace {
        workspace: PathBuf,
        source: std::io::Error,
    },
}

/// One trusted workspace: the digest of each project file it was trusted with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRecord {
    /// File name (`keel.toml`, `.mcp.json`) → SHA-256 in hex.
    pub files: BTreeMap<String, String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFile {
    version: u32,
    /// Canonical workspace path → its record.
    workspaces: BTreeMap<String, TrustRecord>,
}

/// `$KEEL_HOME/trusted-workspaces.json`.
#[derive(Clone, Debug)]
pub struct TrustStore {
    path: PathBuf,
}

/// Whether a record still covers the files as they are now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordState {
    /// Every present file has its recorded digest.
    Current,
    /// A file changed or appeared since trust was given.
    Changed,
}

impl TrustStore {
    pub fn in_home(keel_home: &Path) -> TrustStore {
        TrustStore {
            path: keel_home.join(TRUST_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<StoreFile, TrustStoreError> {
        let unreadable = |reason: String| TrustStoreError::Unreadable {
            file: self.path.clone(),
            reason,
        };
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(StoreFile {
                    version: FORMAT_VERSION,
                    workspaces: BTreeMap::new(),
                });
            }
            Err(error) => return Err(unreadable(error.to_string())),
        };
        let store: StoreFile =
            serde_json::from_str(&text).map_err(|error| unreadable(error.to_string()))?;
        if store.version != FORMAT_VERSION {
            return Err(unreadable(format!(
                "format version {} is not {FORMAT_VERSION}",
                store.version
            )));
        }
        Ok(store)
    }

    fn write(&self, store: &StoreFile) -> Result<(), TrustStoreError> {
        let fail = |source: std::io::Error| TrustStoreError::Write {
            file: self.path.clone(),
            source,
        };
        let text = serde_json::to_string_pretty(store)
            .map_err(|error| fail(std::io::Error::other(error)))?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        keel_types::private_files::create_private_dir(dir).map_err(fail)?;
        keel_types::private_files::write_private_file(&self.path, format!("{text}\n").as_bytes())
            .map_err(fail)
    }

    /// Whether `workspace` is trusted for exactly `files`. A workspace without project files
    /// has nothing to trust: `false` (nothing is restricted either).
    pub fn trusts(
        &self,
        workspace: &Path,
        files: &WorkspaceFiles,
    ) -> Result<bool, TrustStoreError> {
        if files.is_empty() {
            return Ok(false);
        }
        let key = workspace_key(workspace)?;
        let store = self.read()?;
        Ok(store
            .workspaces
            .get(&key)
            .is_some_and(|record| state_of(record, files) == RecordState::Current))
    }

    /// Trust `workspace` for exactly these files (replacing an earlier record).
    pub fn record(&self, workspace: &Path, files: &WorkspaceFiles) -> Result<(), TrustStoreError> {
        let key = workspace_key(workspace)?;
        let mut store = self.read()?;
        let record = TrustRecord {
            files: files
                .present()
                .map(|file| (file.name.to_string(), file.sha256.clone()))
                .collect(),
        };
        store.workspaces.insert(key, record);
        self.write(&store)
    }

    /// Forget `workspace`; whether it was trusted.
    pub fn revoke(&self, workspace: &Path) -> Result<bool, TrustStoreError> {
        let key = workspace_key(workspace)?;
        let mut store = self.read()?;
        let removed = store.workspaces.remove(&key).is_some();
        if removed {
            self.write(&store)?;
        }
        Ok(removed)
    }

    /// Every trusted workspace, by path.
    pub fn list(&self) -> Result<Vec<(PathBuf, TrustRecord)>, TrustStoreError> {
        Ok(self
            .read()?
            .workspaces
            .into_iter()
            .map(|(path, record)| (PathBuf::from(path), record))
            .collect())
    }
}

/// Whether `record` covers `files` as read now.
pub fn state_of(record: &TrustRecord, files: &WorkspaceFiles) -> RecordState {
    let covered = files
        .present()
        .all(|file| record.files.get(file.name) == Some(&file.sha256));
    if covered {
        RecordState::Current
    } else {
        RecordState::Changed
    }
}

fn workspace_key(workspace: &Path) -> Result<String, TrustStoreError> {
    let canonical =
        std::fs::canonicalize(workspace).map_err(|source| TrustStoreError::Workspace {
            workspace: workspace.to_path_buf(),
            source,
        })?;
    Ok(canonical.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(workspace: &Path) -> WorkspaceFiles {
        WorkspaceFiles::read(workspace).unwrap()
    }

    #[test]
    fn trust_is_bound_to_the_path_and_the_bytes_of_each_file() {
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let store = TrustStore::in_home(home.path());
        std::fs::write(workspace.path().join("keel.toml"), "max_rounds = 3\n").unwrap();
        assert!(
            !store
                .trusts(workspace.path(), &files(workspace.path()))
                .unwrap()
        );
        store
            .record(workspace.path(), &files(workspace.path()))
            .unwrap();
        assert!(
            store
                .trusts(workspace.path(), &files(workspace.path()))
                .unwrap()
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "the store is the owner's only");
        }
        // Another spelling of the same directory is the same workspace.
        let dotted = workspace.path().join(".");
        assert!(store.trusts(&dotted, &files(&dotted)).unwrap());
        // One byte changed: no longer trusted.
        std::fs::write(workspace.path().join("keel.toml"), "max_rounds = 4\n").unwrap();
        assert!(
            !store
                .trusts(workspace.path(), &files(workspace.path()))
                .unwrap()
        );
        std::fs::write(workspace.path().join("keel.toml"), "max_rounds = 3\n").unwrap();
        assert!(
            store
                .trusts(workspace.path(), &files(workspace.path()))
                .unwrap()
        );
        // A file that appears after trust was given is not covered.
        std::fs::write(workspace.path().join(".mcp.json"), "{}").unwrap();
        assert!(
            !store
                .trusts(workspace.path(), &files(workspace.path()))
                .unwrap()
        );
        store
            .record(workspace.path(), &files(workspace.path()))
            .unwrap();
        assert!(
            store
                .trusts(workspace.path(), &files(workspace.path()))
                .unwrap()
        );
        // A recorded file that is gone loosens nothing: still trusted.
        std::fs::remove_file(workspace.path().join(".mcp.json")).unwrap();
        assert!(
            store
                .trusts(workspace.path(), &files(workspace.path()))
                .unwrap()
        );
        assert_eq!(store.list().unwrap().len(), 1);
        assert!(store.revoke(workspace.path()).unwrap());
        assert!(!store.revoke(workspace.path()).unwrap());
        assert!(
            !store
                .trusts(workspace.path(), &files(workspace.path()))
                .unwrap()
        );
    }

    #[test]
    fn a_corrupt_store_trusts_nothing_and_is_never_overwritten() {
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(workspace.path().join("keel.toml"), "max_rounds = 3\n").unwrap();
        let store = TrustStore::in_home(home.path());
        std::fs::write(store.path(), "{not json").unwrap();
        let error = store
            .trusts(workspace.path(), &files(workspace.path()))
            .unwrap_err()
            .to_string();
        assert!(error.contains(TRUST_FILE) && error.contains("no workspace is trusted"));
        assert!(
            store
                .record(workspace.path(), &files(workspace.path()))
                .is_err()
        );
        assert_eq!(std::fs::read_to_string(store.path()).unwrap(), "{not json");
    }
}
