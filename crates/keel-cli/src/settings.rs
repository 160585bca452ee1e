//! Where keel keeps its state, and loading the configuration for a command.
//!
//! Invariants:
//! - `KEEL_HOME` (default `~/.keel`) is the only place keel writes outside the workspace;
//!   loading the configuration writes nothing.
//! - Configuration errors keep their file/line/key message and exit with code 2.
//! - Every surface gets its settings from `load_config`: the one place project files are read
//!   and trust is decided.

use crate::UsageError;
use crate::cli::CommonArgs;
use anyhow::Context;
use keel_config::{KeelConfig, Overrides, TrustStore, WorkspaceFiles, WorkspaceTrust};
use std::path::Path;
use std::path::PathBuf;

pub fn keel_home() -> anyhow::Result<PathBuf> {
    let home = match std::env::var_os("KEEL_HOME").filter(|home| !home.is_empty()) {
        Some(home) => PathBuf::from(home),
        None => {
            let user_home = std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .ok_or_else(|| {
                    UsageError(
                        "neither KEEL_HOME nor HOME is set: set KEEL_HOME to a directory".into(),
                    )
                })?;
            PathBuf::from(user_home).join(".keel")
        }
    };
    keep_private(&home);
    Ok(home)
}

/// Once per process: make `home` owner-only if keel is the one to create it, and tighten what
/// an earlier keel left readable by others there (`keel_types::private_files`). A failure here
/// is left to the first real use of the directory to report.
fn keep_private(home: &std::path::Path) {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let _ = keel_types::private_files::create_private_dir(home);
        keel_types::private_files::tighten_home(home);
        // An earlier keel's snapshot stores may hold a copy of a file with a key.
        keel_agent::retire_old_snapshot_stores(home);
    });
}

/// keel's keys: the environment's, then those `keel auth login` stored in `$KEEL_HOME/state`.
/// A key file keel cannot read safely is not used: said once, with its path and the fix, and
/// the environment's keys still work (`keel auth login`/`logout` refuse to touch it).
pub fn keys() -> anyhow::Result<keel_llm::HomeKeys> {
    let home = keel_home()?;
    Ok(match keel_llm::HomeKeys::open(&home) {
        Ok(keys) => keys,
        Err(error) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                eprintln!(
                    "warning: {}; no stored key is used (keys in the environment still are)",
                    keel_render::visible_line(&error.to_string())
                );
            });
            keel_llm::HomeKeys::new(keel_llm::KeyStore::empty(&home))
        }
    })
}

/// The workspace: `--cwd` or the current directory, made absolute.
pub fn workspace(common: &CommonArgs) -> anyhow::Result<PathBuf> {
    let current = std::env::current_dir().context("cannot read the current directory")?;
    let Some(dir) = &common.cwd else {
        return Ok(current);
    };
    let dir = current.join(dir);
    if !dir.is_dir() {
        return Err(UsageError(format!("--cwd {}: no such directory", dir.display())).into());
    }
    Ok(dir)
}

/// The flags and environment variables that override the files.
pub fn overrides(common: &CommonArgs) -> Overrides {
    let mut overrides = Overrides::from_env();
    overrides.model_flag = common.model.clone();
    overrides.model_flag_name = common.model_named_by.unwrap_or("--model");
    overrides.permission_mode_flag = common.mode_flag();
    overrides.sandbox_flag = common.sandbox.map(crate::cli::SandboxModeArg::mode);
    overrides
}

/// Files a user layer refers to (`--token-file`): hidden from every command and tool.
static REFERENCED_FILES: std::sync::Mutex<Vec<std::path::PathBuf>> =
    std::sync::Mutex::new(Vec::new());

/// Note that a user layer refers to `path` (absolute from here on).
pub fn refer_to_file(path: &std::path::Path) {
    let absolute = std::env::current_dir()
        .map(|dir| dir.join(path))
        .unwrap_or_else(|_| path.to_path_buf());
    REFERENCED_FILES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(absolute);
}

/// The user's home directory (`$HOME`), where set.
pub fn home_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(std::path::PathBuf::from)
}

/// The workspace's project files, as trust sees them: with Claude Code's settings when the
/// user's own config reads its hooks.
pub fn workspace_files(workspace: &Path) -> anyhow::Result<WorkspaceFiles> {
    let home = keel_home()?;
    let claude = KeelConfig::user_reads_claude_hooks(&home.join("config.toml"));
    Ok(WorkspaceFiles::read_with(workspace, claude)?)
}

/// How the session's commands are confined, from the configuration.
pub fn sandbox_setup(config: &KeelConfig) -> anyhow::Result<keel_agent::SandboxSetup> {
    Ok(keel_agent::SandboxSetup {
        settings: config.sandbox().settings,
        keel_home: keel_home()?,
        home: std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(std::path::PathBuf::from),
        referenced_files: REFERENCED_FILES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone(),
    })
}

/// The configuration of a command in `workspace`: the user's file and the workspace's project
/// files, read once, restricted unless the user trusts them (docs/security.md#repository-trust).
pub fn load_config(common: &CommonArgs, workspace: &std::path::Path) -> anyhow::Result<KeelConfig> {
    let home = keel_home()?;
    let project = workspace_files(workspace)?;
    let trust = decide_trust(common, &home, workspace, &project);
    let config = KeelConfig::load(&home.join("config.toml"), project, trust, overrides(common))?;
    keel_types::startup_trace::mark("config");
    Ok(config)
}

/// Whether this run trusts `workspace`'s project files as read.
pub fn decide_trust(
    common: &CommonArgs,
    home: &Path,
    workspace: &Path,
    files: &WorkspaceFiles,
) -> WorkspaceTrust {
    if common.trust_workspace {
        return WorkspaceTrust::Trusted;
    }
    match TrustStore::in_home(home).trusts(workspace, files) {
        Ok(true) => WorkspaceTrust::Trusted,
        Ok(false) => WorkspaceTrust::Untrusted,
        Err(error) => {
            eprintln!("warning: {error}");
            WorkspaceTrust::Untrusted
        }
    }
}
