//! The files that come with a workspace and can change a setting: `./keel.toml` and
//! `./.mcp.json` (docs/security.md#user-layers-and-project-layers), each read once.
//!
//! Invariants:
//! - Each file is read exactly once, and the digest is of those very bytes: what is parsed is
//!   what trust is checked against (no window between a check and a second read).
//! - An absent file is `None`; any other read failure, or text that is not UTF-8, is an error
//!   naming the file. Nothing here writes.

use crate::error::ConfigError;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The project's own config file, in the workspace root.
pub const PROJECT_CONFIG_FILE: &str = "keel.toml";

/// The MCP file other agents share, in the workspace root.
pub const SHARED_MCP_FILE: &str = ".mcp.json";

/// The largest project file read (a config file is a few KiB).
pub const MAX_PROJECT_FILE_BYTES: u64 = 1024 * 1024;

/// One project file as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceFile {
    pub path: PathBuf,
    /// `keel.toml` or `.mcp.json`: the name trust records it under.
    pub name: &'static str,
    pub text: String,
    /// The SHA-256 of the bytes read, in lower-case hex.
    pub sha256: String,
}

impl WorkspaceFile {
    /// A file from text already in memory (tests, `keel demo`).
    pub fn from_text(path: &Path, name: &'static str, text: String) -> WorkspaceFile {
        WorkspaceFile {
            path: path.to_path_buf(),
            name,
            sha256: sha256_hex(text.as_bytes()),
            text,
        }
    }

    fn read(workspace: &Path, name: &'static str) -> Result<Option<WorkspaceFile>, ConfigError> {
        use std::io::Read;
        let path = workspace.join(name);
        let refuse = |why: String| ConfigError::Read {
            file: path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
        };
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ConfigError::Read { file: path, source }),
        };
        // A repository can commit `keel.toml -> /dev/zero` or a FIFO: only a regular file of
        // sane size is read, and never more than the bound.
        let is_file = file.metadata().map(|meta| meta.is_file()).unwrap_or(false);
        if !is_file {
            return Err(refuse("it is not a regular file".into()));
        }
        let mut bytes = Vec::new();
        file.take(MAX_PROJECT_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| ConfigError::Read {
                file: path.clone(),
                source,
            })?;
        if bytes.len() as u64 > MAX_PROJECT_FILE_BYTES {
            return Err(refuse(format!(
                "it is larger than {MAX_PROJECT_FILE_BYTES} bytes"
            )));
        }
        let sha256 = sha256_hex(&bytes);
        let text = String::from_utf8(bytes).map_err(|_| ConfigError::Read {
            file: path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8 text"),
        })?;
        Ok(Some(WorkspaceFile {
            path,
            name,
            text,
            sha256,
        }))
    }
}

/// The workspace's project files, as read once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkspaceFiles {
    pub keel_toml: Option<WorkspaceFile>,
    pub mcp_json: Option<WorkspaceFile>,
}

impl WorkspaceFiles {
    /// Read `keel.toml` and `.mcp.json` from the workspace root (either may be absent).
    pub fn read(workspace: &Path) -> Result<WorkspaceFiles, ConfigError> {
        Ok(WorkspaceFiles {
            keel_toml: WorkspaceFile::read(workspace, PROJECT_CONFIG_FILE)?,
            mcp_json: WorkspaceFile::read(workspace, SHARED_MCP_FILE)?,
        })
    }

    /// The files present, `keel.toml` first.
    pub fn present(&self) -> impl Iterator<Item = &WorkspaceFile> {
        self.keel_toml.iter().chain(self.mcp_json.iter())
    }

    pub fn is_empty(&self) -> bool {
        self.keel_toml.is_none() && self.mcp_json.is_none()
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_once_with_the_digest_of_their_bytes() {
        let workspace = tempfile::tempdir().unwrap();
        assert!(WorkspaceFiles::read(workspace.path()).unwrap().is_empty());
        std::fs::write(workspace.path().join("keel.toml"), "max_rounds = 3\n").unwrap();
        let files = WorkspaceFiles::read(workspace.path()).unwrap();
        let keel = files.keel_toml.as_ref().unwrap();
        assert_eq!(keel.text, "max_rounds = 3\n");
        assert_eq!(keel.sha256, sha256_hex(b"max_rounds = 3\n"));
        assert_eq!(keel.sha256.len(), 64);
        assert!(files.mcp_json.is_none());
        assert_eq!(files.present().count(), 1);
    }

    #[test]
    fn a_device_or_a_huge_file_is_refused_without_reading_it_whole() {
        let workspace = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", workspace.path().join("keel.toml")).unwrap();
        let error = WorkspaceFiles::read(workspace.path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("not a regular file"), "{error}");
        std::fs::remove_file(workspace.path().join("keel.toml")).unwrap();
        let huge = vec![b'#'; (MAX_PROJECT_FILE_BYTES + 10) as usize];
        std::fs::write(workspace.path().join("keel.toml"), huge).unwrap();
        let error = WorkspaceFiles::read(workspace.path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("larger than"), "{error}");
    }

    #[test]
    fn a_file_that_is_not_text_is_an_error_naming_it() {
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(workspace.path().join(".mcp.json"), [0xff, 0xfe, 0x00]).unwrap();
        let error = WorkspaceFiles::read(workspace.path())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(".mcp.json") && error.contains("UTF-8"),
            "{error}"
        );
    }
}
