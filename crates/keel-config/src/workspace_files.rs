//! The files that come with a workspace and can change a setting: `./keel.toml`,
//! `./.mcp.json`, and — with hooks — `./.claude/settings.json` (when the user reads Claude Code's
//! hooks) and the hook scripts in the workspace (docs/security.md#user-layers-and-project-layers,
//! docs/hooks.md#trust), each read once.
//!
//! Invariants:
//! - `.claude/settings.json` counts only when the user's `hooks_from_claude` is on and it
//!   declares hooks; the hook scripts count only when the project declares hooks. A workspace
//!   whose other agents' settings keel does not use is not asked about.
//! - Each file is read exactly once, and the digest is of those very bytes: what is parsed is
//!   what trust is checked against (no window between a check and a second read).
//! - An absent file is `None`; any other read failure, or text that is not UTF-8, is an error
//!   naming the file. Nothing here writes.

pub(crate) use crate::digest::sha256_hex;
use crate::error::ConfigError;
use std::path::{Path, PathBuf};

/// The project's own config file, in the workspace root.
pub const PROJECT_CONFIG_FILE: &str = "keel.toml";

/// The MCP file other agents share, in the workspace root.
pub const SHARED_MCP_FILE: &str = ".mcp.json";

/// Claude Code's project settings (its hooks count with `hooks_from_claude`).
pub const CLAUDE_PROJECT_SETTINGS: &str = ".claude/settings.json";

/// The largest project file read (a config file is a few KiB).
pub const MAX_PROJECT_FILE_BYTES: u64 = 1024 * 1024;

/// One project file as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceFile {
    pub path: PathBuf,
    /// `keel.toml`, `.mcp.json`, `.claude/settings.json` or `hook scripts`: the name trust
    /// records it under.
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
        let mut file = read_bounded(&workspace.join(name))?;
        if let Some(file) = &mut file {
            file.name = name;
        }
        Ok(file)
    }
}

/// The file at `path` (`None` when absent), refused unless it is a regular file of at most
/// `MAX_PROJECT_FILE_BYTES` of UTF-8 text.
pub(crate) fn read_bounded(path: &Path) -> Result<Option<WorkspaceFile>, ConfigError> {
    use std::io::Read;
    let path = path.to_path_buf();
    let refuse = |why: String| ConfigError::Read {
        file: path.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
    };
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None);
        }
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
        name: "",
        text,
        sha256,
    }))
}

/// The workspace's project files, as read once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkspaceFiles {
    pub keel_toml: Option<WorkspaceFile>,
    pub mcp_json: Option<WorkspaceFile>,
    /// `.claude/settings.json`, when the user reads Claude Code's hooks and it declares some.
    pub claude_settings: Option<WorkspaceFile>,
    /// The project's hook scripts as one listing (`hook_scripts.rs`), when it declares hooks.
    pub hook_scripts: Option<WorkspaceFile>,
}

impl WorkspaceFiles {
    /// Read `keel.toml` and `.mcp.json` from the workspace root (either may be absent), and the
    /// hook scripts of the hooks `keel.toml` declares.
    pub fn read(workspace: &Path) -> Result<WorkspaceFiles, ConfigError> {
        WorkspaceFiles::read_with(workspace, false)
    }

    /// As `read`; with `claude_hooks` (the user's `hooks_from_claude`) also
    /// `.claude/settings.json` when it declares hooks, and the scripts its hooks run.
    pub fn read_with(workspace: &Path, claude_hooks: bool) -> Result<WorkspaceFiles, ConfigError> {
        let keel_toml = WorkspaceFile::read(workspace, PROJECT_CONFIG_FILE)?;
        let mcp_json = WorkspaceFile::read(workspace, SHARED_MCP_FILE)?;
        let claude_settings = if claude_hooks {
            WorkspaceFile::read(workspace, CLAUDE_PROJECT_SETTINGS)?
                .filter(|file| crate::hook_tables::claude_settings_have_hooks(&file.text))
        } else {
            None
        };
        let keel_hooks = keel_toml
            .as_ref()
            .is_some_and(|file| crate::hook_tables::has_hooks_table(&file.text));
        let hook_scripts = if keel_hooks || claude_settings.is_some() {
            let commands = crate::hook_tables::project_hook_commands(
                keel_toml.as_ref().map(|file| file.text.as_str()),
                claude_settings.as_ref().map(|file| file.text.as_str()),
            );
            crate::hook_scripts::listing(workspace, &commands).map(|(root, text)| {
                WorkspaceFile::from_text(&root, crate::hook_scripts::HOOK_SCRIPTS, text)
            })
        } else {
            None
        };
        Ok(WorkspaceFiles {
            keel_toml,
            mcp_json,
            claude_settings,
            hook_scripts,
        })
    }

    /// The files present, `keel.toml` first.
    pub fn present(&self) -> impl Iterator<Item = &WorkspaceFile> {
        self.keel_toml
            .iter()
            .chain(self.mcp_json.iter())
            .chain(self.claude_settings.iter())
            .chain(self.hook_scripts.iter())
    }

    pub fn is_empty(&self) -> bool {
        self.present().next().is_none()
    }
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
