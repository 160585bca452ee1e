//! Where keel keeps its state, and loading the configuration for a command.
//!
//! Invariants:
//! - `KEEL_HOME` (default `~/.keel`) is the only place keel writes outside the workspace;
//!   loading the configuration writes nothing.
//! - Configuration errors keep their file/line/key message and exit with code 2.

use crate::UsageError;
use crate::cli::CommonArgs;
use anyhow::Context;
use keel_config::{KeelConfig, Overrides};
use std::path::PathBuf;

pub fn keel_home() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("KEEL_HOME").filter(|home| !home.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    let user_home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .ok_or_else(|| {
            UsageError("neither KEEL_HOME nor HOME is set: set KEEL_HOME to a directory".into())
        })?;
    Ok(PathBuf::from(user_home).join(".keel"))
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

pub fn load_config(common: &CommonArgs, workspace: &std::path::Path) -> anyhow::Result<KeelConfig> {
    let home = keel_home()?;
    let mut overrides = Overrides::from_env();
    overrides.model_flag = common.model.clone();
    overrides.permission_mode_flag = common.mode_flag();
    let config = KeelConfig::load(
        &home.join("config.toml"),
        &workspace.join("keel.toml"),
        overrides,
    )?;
    keel_types::startup_trace::mark("config");
    Ok(config)
}
