//! Building a `Controller` for a command: configuration, store, session choice, permissions.
//!
//! Invariants:
//! - A missing key is refused before a session is created or anything is sent (exit 2).
//! - `--session ID` must name an existing session and `-c` needs one in this workspace;
//!   neither silently starts a new one.

use crate::UsageError;
use crate::cli::CommonArgs;
use crate::settings;
use keel_agent::{AgentSettings, Approver, Controller, SessionChoice};
use keel_llm::{EnvKeys, KeySource, ProviderProfile};
use keel_store::Store;
use keel_tools::PermissionPolicy;
use std::path::PathBuf;
use std::sync::Arc;

pub struct Setup {
    pub store: Store,
    pub workspace: PathBuf,
    pub settings: AgentSettings,
}

pub fn open_store() -> anyhow::Result<Store> {
    let path = settings::keel_home()?.join("state").join("keel.db");
    Ok(Store::open(&path)?)
}

/// Refuse to start without a key for the first account.
pub fn require_key(profile: &ProviderProfile, keys: &dyn KeySource) -> Result<(), UsageError> {
    let Some(first) = profile.accounts.first() else {
        return Err(UsageError(format!(
            "provider `{}` has no account",
            profile.name
        )));
    };
    if keys.key(&first.api_key_env).is_some() {
        return Ok(());
    }
    Err(UsageError(format!(
        "no API key for provider `{}`: set the environment variable {} (or try `keel demo`, which \
         needs no key)",
        profile.name, first.api_key_env
    )))
}

pub fn prepare(common: &CommonArgs, holder: &str) -> anyhow::Result<Setup> {
    let workspace = settings::workspace(common)?;
    let config = settings::load_config(common, &workspace)?;
    let model = config.model()?;
    let profile = config.profile(&model.provider)?;
    require_key(&profile, &EnvKeys)?;
    let mode = config.permission_mode();
    let rules = config.permission_rules();
    let policy = PermissionPolicy::new(mode, &rules.allow, &rules.ask, &rules.deny)
        .map_err(|error| UsageError(format!("[permissions]: {error}")))?;
    let mut extra_dirs = Vec::new();
    for dir in &common.add_dirs {
        let absolute = workspace.join(dir);
        if !absolute.is_dir() {
            return Err(UsageError(format!(
                "--add-dir {}: no such directory",
                absolute.display()
            ))
            .into());
        }
        extra_dirs.push(absolute);
    }
    let settings = AgentSettings {
        profile,
        model: model.model,
        policy,
        max_rounds: config.max_rounds()?,
        workspace: workspace.clone(),
        extra_dirs,
        holder: holder.to_string(),
    };
    Ok(Setup {
        store: open_store()?,
        workspace,
        settings,
    })
}

/// Which session the flags ask for.
pub fn session_choice(
    common: &CommonArgs,
    store: &Store,
    workspace: &std::path::Path,
) -> anyhow::Result<SessionChoice> {
    if let Some(id) = &common.session {
        if store.session(id)?.is_none() {
            return Err(UsageError(format!(
                "no session `{id}`: `keel sessions` lists this workspace's sessions"
            ))
            .into());
        }
        return Ok(SessionChoice::Resume(id.clone()));
    }
    if common.continue_latest {
        let latest = store.sessions_for_workspace(&workspace.display().to_string())?;
        return match latest.first() {
            Some(session) => Ok(SessionChoice::Resume(session.id.clone())),
            None => {
                Err(UsageError(format!("no session to continue in {}", workspace.display())).into())
            }
        };
    }
    Ok(SessionChoice::New)
}

pub fn open_controller(
    setup: Setup,
    choice: SessionChoice,
    approver: Arc<dyn Approver>,
) -> anyhow::Result<Controller> {
    Ok(Controller::open(
        setup.store,
        choice,
        setup.settings,
        Arc::new(EnvKeys),
        approver,
    )?)
}
