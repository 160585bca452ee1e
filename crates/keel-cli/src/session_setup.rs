//! Building a `Controller` for a command: store, session choice, workspace, configuration,
//! permissions, secrets.
//!
//! Invariants:
//! - A missing or malformed key is refused before a session is created or anything is sent
//!   (exit 2), naming the variable and never quoting the key.
//! - `--session ID` must name an existing session and `-c` needs one in this workspace;
//!   neither silently starts a new one.
//! - A resumed session keeps its own workspace and its own provider and model. Only `--model`
//!   switches the model, and that is said; a `--cwd` that contradicts the session's workspace
//!   is refused with the `--cwd` to use. Nothing about a session changes silently.
//! - Tools never see keel's secrets: every provider key variable and every `KEEL_*` variable
//!   that names a key, token, secret or password.

use crate::UsageError;
use crate::cli::CommonArgs;
use crate::settings;
use keel_agent::{AgentSettings, Approver, Controller, Host, SessionChoice, SessionInfo};
use keel_config::{KeelConfig, ModelRef};
use keel_llm::{HomeKeys, KeySource, ProviderProfile, key_problem};
use keel_types::Secrets;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct Setup {
    pub host: Host,
    pub settings: AgentSettings,
    /// The MCP servers to start with the session.
    pub mcp_servers: Vec<keel_mcp::ServerConfig>,
    pub choice: SessionChoice,
    /// What changed or was kept about a resumed session, for the user (stderr).
    pub notices: Vec<String>,
    /// The keys the session's requests use.
    pub keys: Arc<HomeKeys>,
    /// An editor the file tools go through (an ACP client with the `fs` capability).
    pub editor: Option<Arc<dyn keel_tools::EditorFiles>>,
    /// The session's custom slash commands.
    pub commands: Arc<keel_agent::CustomCommands>,
    /// The agents a `task` may start.
    pub agents: Arc<keel_agent::AgentDefinitions>,
    /// The skills the `skill` tool loads.
    pub skills: Arc<keel_agent::Skills>,
    /// The hooks in force.
    pub hooks: Arc<keel_agent::Hooks>,
}

pub fn open_host() -> anyhow::Result<Host> {
    let path = settings::keel_home()?.join("state").join("keel.db");
    keel_types::startup_trace::mark("home");
    Ok(Host::open(&path)?)
}

/// Refuse to start without a usable key for the first account, or with a malformed key for
/// any account.
pub fn require_key(profile: &ProviderProfile, keys: &dyn KeySource) -> Result<(), UsageError> {
    let Some(first) = profile.accounts.first() else {
        return Err(UsageError(format!(
            "provider `{}` has no account",
            profile.name
        )));
    };
    for account in &profile.accounts {
        if let Some(problem) = keys.key(&account.api_key_env).and_then(|k| key_problem(&k)) {
            return Err(UsageError(format!(
                "the environment variable {} (the key of provider `{}`) {problem}",
                account.api_key_env, profile.name
            )));
        }
    }
    if keys.key(&first.api_key_env).is_some() {
        return Ok(());
    }
    Err(UsageError(format!(
        "no API key for provider `{}`: set the environment variable {}, or store one with \
         `keel auth login {}` (or try `keel demo`, which needs no key)",
        profile.name, first.api_key_env, profile.name
    )))
}

/// keel's secrets: the keys of its providers (from the environment, or stored by `keel auth
/// login`) and `KEEL_*` variables that look like secrets. Without `keys` (a key file keel
/// could not read), the environment's only.
pub fn secrets(config: &KeelConfig, keys: Option<&HomeKeys>) -> Secrets {
    let mut names = config.key_env_vars();
    if let Some(keys) = keys {
        names.extend(keys.stored_variables());
    }
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let upper = name.to_ascii_uppercase();
        let secret_like = ["KEY", "TOKEN", "SECRET", "PASSWORD"]
            .iter()
            .any(|word| upper.contains(word));
        if upper.starts_with("KEEL_") && secret_like {
            names.push(name.to_string());
        }
    }
    let secrets = Secrets::from_names(names, |name| match keys {
        Some(keys) => keys.key(name),
        None => std::env::var(name).ok(),
    });
    // A stored key behind a set variable is not the one in use, but it is still a secret.
    keys.into_iter()
        .flat_map(HomeKeys::stored_keys)
        .fold(secrets, |secrets, (name, value)| {
            secrets.with_value(name, value)
        })
}

/// The session the flags ask for, if any.
fn requested_session(
    common: &CommonArgs,
    host: &Host,
    workspace: &Path,
) -> anyhow::Result<Option<SessionInfo>> {
    if let Some(id) = &common.session {
        return match host.session(id)? {
            Some(session) => Ok(Some(session)),
            None => Err(UsageError(format!(
                "no session `{id}`: `keel sessions` lists this workspace's sessions"
            ))
            .into()),
        };
    }
    if common.continue_latest {
        // The newest one `keel sessions` lists: a session nobody typed into is not "the last".
        let latest = host.session_overviews(&workspace.display().to_string())?;
        return match latest.into_iter().find(keel_agent::SessionOverview::listed) {
            Some(overview) => Ok(Some(overview.info)),
            None => {
                Err(UsageError(format!("no session to continue in {}", workspace.display())).into())
            }
        };
    }
    Ok(None)
}

/// Where a resumed session works: its own workspace, unless `--cwd` contradicts it.
fn session_workspace(
    common: &CommonArgs,
    session: &SessionInfo,
    current: &Path,
    notices: &mut Vec<String>,
) -> Result<PathBuf, UsageError> {
    let recorded = PathBuf::from(&session.workspace);
    if !recorded.is_dir() {
        return Err(UsageError(format!(
            "session {} works in {}, which no longer exists; it cannot continue there",
            session.id, session.workspace
        )));
    }
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    if same(&recorded, current) {
        return Ok(recorded);
    }
    if common.cwd.is_some() {
        return Err(UsageError(format!(
            "session {} works in {}, not {}: run with --cwd {} (or without --cwd)",
            session.id,
            session.workspace,
            current.display(),
            session.workspace
        )));
    }
    notices.push(format!(
        "session {} works in {}; its tools run there",
        session.id, session.workspace
    ));
    Ok(recorded)
}

/// The model of this command: a resumed session keeps its own unless `--model` is given.
fn session_model(
    common: &CommonArgs,
    config: &KeelConfig,
    session: Option<&SessionInfo>,
    notices: &mut Vec<String>,
) -> anyhow::Result<ModelRef> {
    let Some(session) = session else {
        return Ok(config.model()?);
    };
    let recorded = format!("{}/{}", session.provider, session.model);
    if common.model.is_none() {
        if config.profile(&session.provider).is_err() {
            return Err(UsageError(format!(
                "session {} used the provider `{}`, which is no longer configured: configure it \
                 again or continue with --model PROVIDER/ID",
                session.id, session.provider
            ))
            .into());
        }
        return Ok(ModelRef {
            provider: session.provider.clone(),
            model: session.model.clone(),
        });
    }
    let chosen = config.model()?;
    let chosen_text = format!("{}/{}", chosen.provider, chosen.model);
    if chosen_text != recorded {
        notices.push(format!(
            "session {}: switching the model from {recorded} to {chosen_text} (--model); the \
             provider's prompt cache starts over",
            session.id
        ));
    }
    Ok(chosen)
}

/// A run that approves every command by itself (`--yes` headless) needs the sandbox enforced,
/// or the user's own `mode = "off"`: keel never runs commands unconfined on its own say.
pub fn require_confinement(settings: &AgentSettings) -> Result<(), UsageError> {
    let Some(setup) = &settings.sandbox else {
        return Ok(());
    };
    let network_on = setup.settings.allow_network;
    if setup.settings.mode == keel_sandbox::SandboxMode::Off
        || keel_sandbox::meets_minimum(network_on)
    {
        return Ok(());
    }
    Err(UsageError(format!(
        "keel sandbox: commands cannot be confined on this machine: it lacks {}. A headless \
         --yes run approves every command itself, so keel will not start one unconfined. To run \
         commands without the sandbox, set `mode = \"off\"` under [sandbox] in \
         $KEEL_HOME/config.toml, or pass --sandbox off for this run",
        keel_sandbox::detected().missing(network_on).join("; ")
    )))
}

pub fn prepare(common: &CommonArgs, holder: &str) -> anyhow::Result<Setup> {
    prepare_on(common, holder, open_host()?)
}

/// `prepare` on a host the caller already holds (a server drives many sessions on one).
pub fn prepare_on(common: &CommonArgs, holder: &str, host: Host) -> anyhow::Result<Setup> {
    let current = settings::workspace(common)?;
    let session = requested_session(common, &host, &current)?;
    let mut notices = Vec::new();
    let workspace = match &session {
        Some(session) => session_workspace(common, session, &current, &mut notices)?,
        None => current,
    };
    let config = settings::load_config(common, &workspace)?;
    // Said once per process (a server opens many sessions).
    static PARENT_CHECKED: std::sync::Once = std::sync::Once::new();
    PARENT_CHECKED.call_once(|| {
        if let Some(warning) = parent_key_warning(&config) {
            eprintln!("warning: {warning}");
        }
    });
    let model = session_model(common, &config, session.as_ref(), &mut notices)?;
    let profile = config.profile(&model.provider)?;
    let keys = Arc::new(settings::keys()?);
    require_key(&profile, keys.as_ref())?;
    // For a person at the start (a `--json` reader gets nothing on stderr it did not ask for).
    if !common.json {
        notices.extend(keel_llm::context_window::unknown_model_notice(
            &profile,
            &model.model,
        ));
    }
    let policy = config.permission_policy()?;
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
    let mut commands = keel_agent::CustomCommands::load(
        &workspace,
        Some(&settings::keel_home()?),
        &keel_agent::builtin_names(),
    );
    let providers: Vec<String> = config
        .resolve()?
        .providers
        .into_iter()
        .map(|provider| provider.name)
        .collect();
    let model_known = |model: &str| {
        model
            .split_once('/')
            .is_some_and(|(provider, id)| !id.is_empty() && providers.iter().any(|p| p == provider))
    };
    let mut agents =
        keel_agent::AgentDefinitions::load(&workspace, Some(&settings::keel_home()?), &model_known);
    notices.extend(agents.notices.iter().cloned());
    // An agent on a model of its own runs with that provider's profile.
    for other in agents.other_models(&format!("{}/{}", model.provider, model.model)) {
        let provider = other
            .split_once('/')
            .map_or(other.as_str(), |(name, _)| name);
        match config.profile(provider) {
            Ok(profile) => agents.set_profile(&other, profile),
            Err(error) => notices.push(format!(
                "an agent's model `{other}` cannot be used: {error}"
            )),
        }
    }
    let skills = keel_agent::Skills::load(
        &workspace,
        Some(&settings::keel_home()?),
        std::env::var_os("HOME")
            .map(std::path::PathBuf::from)
            .as_deref(),
    );
    notices.extend(skills.notices.iter().cloned());
    // A skill the person may invoke is `/NAME` too, unless a command of that name wins.
    commands.add_skills(&skills, &keel_agent::builtin_names());
    notices.extend(commands.notices.iter().cloned());
    let resolved_hooks = config.hooks(settings::home_dir().as_deref())?;
    let hooks = keel_agent::Hooks::new(resolved_hooks.hooks, resolved_hooks.notices);
    notices.extend(hooks.notices().iter().cloned());
    let declared = mcp_servers(&config)?;
    notices.extend(declared.notices);
    let mcp_servers = declared.trusted;
    keel_types::startup_trace::mark("commands and mcp");
    let sandbox = settings::sandbox_setup(&config)?;
    notices.extend(home_notice(&sandbox, &workspace, &extra_dirs));
    keel_types::startup_trace::mark("sandbox settings");
    let settings = AgentSettings {
        profile,
        model: model.model,
        policy,
        max_rounds: config.max_rounds()?,
        compact_at: config.compact_at()?,
        workspace,
        extra_dirs,
        holder: holder.to_string(),
        secrets: secrets(&config, Some(&keys)),
        untrusted: untrusted_settings(&config),
        sandbox: Some(sandbox),
        context: keel_agent::ContextSettings {
            instruction_files: config.instruction_files()?,
            global_dir: Some(settings::keel_home()?),
            max_bytes: keel_agent::DEFAULT_INSTRUCTION_BYTES,
        },
        checkpoint_max_bytes: config.checkpoint_max_bytes(),
        action_policy: common.action_policy,
        subagents: {
            let limits = config.agent_limits();
            keel_agent::SubagentLimits {
                max_concurrent: limits.max_concurrent,
                max_rounds: limits.max_rounds,
                max_child_tokens: limits.max_child_tokens,
            }
        },
    };
    let choice = match session {
        Some(session) => SessionChoice::Resume(session.id),
        None => SessionChoice::New,
    };
    Ok(Setup {
        host,
        settings,
        mcp_servers,
        choice,
        notices,
        keys,
        editor: None,
        commands: Arc::new(commands),
        agents: Arc::new(agents),
        skills: Arc::new(skills),
        hooks: Arc::new(hooks),
    })
}

/// What a session whose writable roots hold the home is told at its start: its dot entries
/// and `$PATH` directories are kept from commands (`keel_sandbox::HomeDots`).
fn home_notice(
    sandbox: &keel_agent::SandboxSetup,
    workspace: &std::path::Path,
    extra_dirs: &[std::path::PathBuf],
) -> Option<String> {
    if sandbox.settings.mode == keel_sandbox::SandboxMode::Off {
        return None;
    }
    let places = keel_sandbox::Places {
        workspace: workspace.to_path_buf(),
        extra_dirs: extra_dirs.to_vec(),
        keel_home: sandbox.keel_home.clone(),
        home: sandbox.home.clone(),
        ..keel_sandbox::Places::default()
    };
    keel_sandbox::SandboxPolicy::resolve(
        &sandbox.settings,
        &places,
        keel_sandbox::SandboxMode::WorkspaceWrite,
    )
    .home_dots
    .map(|rule| rule.notice())
}

/// `base` asking for `choice`: a new session, or exactly the session to resume (never "the
/// latest"), for surfaces that open sessions by id.
pub fn args_for(base: &CommonArgs, choice: SessionChoice) -> CommonArgs {
    let mut common = base.clone();
    common.continue_latest = false;
    common.session = match choice {
        SessionChoice::New => None,
        SessionChoice::Resume(id) => Some(id),
    };
    common
}

/// Print what `prepare` noticed (stderr, so `--json` stdout stays JSON).
pub fn print_notices(setup: &Setup) {
    for notice in &setup.notices {
        eprintln!("note: {}", keel_render::visible(notice));
    }
}

pub fn open_controller(setup: Setup, approver: Arc<dyn Approver>) -> anyhow::Result<Controller> {
    let controller = open_controller_with(setup, approver, McpStart::Wait)?;
    for note in mcp_notes(controller.services().mcp()) {
        eprintln!("note: {note}");
    }
    Ok(controller)
}

/// Whether opening a session waits for its MCP servers' first start.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum McpStart {
    /// At most `MCP_FIRST_WAIT`, then say which are still starting or not available.
    Wait,
    /// Not at all: a screen is drawn first; the session's first request waits for them
    /// (`McpHub::first_start`), and `mcp_notes` says afterwards how they came up.
    Background,
}

/// What the user is told about the MCP servers that are not running (names and reasons made
/// visible: a reason may hold a server's stderr).
pub fn mcp_notes(hub: &keel_mcp::McpHub) -> Vec<String> {
    hub.statuses()
        .into_iter()
        .filter_map(|status| match status.state {
            "running" => None,
            "starting" => Some(format!(
                "MCP server `{}` is still starting; its tools join at the next turn once it is up",
                keel_render::visible_line(&status.name)
            )),
            _ => Some(format!(
                "MCP server `{}` is not available, the session goes on without it: {}",
                keel_render::visible_line(&status.name),
                keel_render::visible(status.reason.as_deref().unwrap_or("it did not start"))
            )),
        })
        .collect()
}

pub fn open_controller_with(
    mut setup: Setup,
    approver: Arc<dyn Approver>,
    mcp_start: McpStart,
) -> anyhow::Result<Controller> {
    let mut mcp = Arc::new(keel_mcp::McpHub::empty());
    if !setup.mcp_servers.is_empty() {
        let servers = std::mem::take(&mut setup.mcp_servers);
        let workspace = setup.settings.workspace.clone();
        // Opening a session is synchronous for its callers; the servers start in parallel.
        let secret_names = setup.settings.secrets.env_names().to_vec();
        let sandbox = mcp_sandbox(
            setup.settings.sandbox.as_ref(),
            &workspace,
            &setup.settings.extra_dirs,
        )?;
        let options = mcp_options(workspace, MCP_FIRST_WAIT, secret_names, sandbox);
        let hub = match mcp_start {
            McpStart::Background => keel_mcp::McpHub::launch(servers, &options),
            McpStart::Wait => tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current()
                    .block_on(keel_mcp::McpHub::start(servers, &options))
            }),
        };
        mcp = Arc::new(hub);
    }
    let surface = keel_agent::SurfaceServices {
        keys: setup.keys,
        approver,
        mcp,
        editor: setup.editor,
        commands: setup.commands,
        agents: setup.agents,
        skills: setup.skills,
        hooks: setup.hooks,
    };
    Ok(setup
        .host
        .open_session(setup.choice, setup.settings, surface)?)
}

/// How long an MCP server may take to answer `initialize` and `tools/list`.
pub const MCP_START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// How long opening a session waits for its MCP servers; slower ones join at a later turn.
pub const MCP_FIRST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Start `servers` for a session in `workspace`: a minimal environment plus what each
/// declares (`$VAR` values read from keel's environment).
/// The sandbox a session's MCP stdio servers run in, with a temp dir of their own
/// (`$KEEL_HOME/tmp/mcp-<pid>-<n>`, removed with the servers).
pub fn mcp_sandbox(
    setup: Option<&keel_agent::SandboxSetup>,
    workspace: &Path,
    extra_dirs: &[PathBuf],
) -> anyhow::Result<Option<Arc<keel_sandbox::Sandbox>>> {
    static HUBS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let Some(setup) = setup else {
        return Ok(None);
    };
    let hub = HUBS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("mcp-{}-{hub}", std::process::id());
    let temp = keel_sandbox::TempDir::create(&setup.keel_home, &name)?;
    let places = keel_sandbox::Places {
        workspace: workspace.to_path_buf(),
        extra_dirs: extra_dirs.to_vec(),
        keel_home: setup.keel_home.clone(),
        home: setup.home.clone(),
        temp_dir: None,
        referenced_files: setup.referenced_files.clone(),
        socket_dirs: Vec::new(),
    };
    Ok(Some(Arc::new(keel_sandbox::Sandbox::owning_temp(
        setup.settings.clone(),
        places,
        temp,
    ))))
}

pub async fn start_mcp(
    servers: Vec<keel_mcp::ServerConfig>,
    workspace: PathBuf,
    first_wait: std::time::Duration,
    secret_names: Vec<String>,
    sandbox: Option<Arc<keel_sandbox::Sandbox>>,
) -> keel_mcp::McpHub {
    let options = mcp_options(workspace, first_wait, secret_names, sandbox);
    keel_mcp::McpHub::start(servers, &options).await
}

fn mcp_options(
    workspace: PathBuf,
    first_wait: std::time::Duration,
    secret_names: Vec<String>,
    sandbox: Option<Arc<keel_sandbox::Sandbox>>,
) -> keel_mcp::StartOptions {
    keel_mcp::StartOptions {
        base_env: keel_mcp::StartOptions::base_env_from_process(),
        // keel's own keys are never handed to a server, whatever a declaration asks for.
        lookup: Arc::new(move |name| {
            if secret_names.iter().any(|secret| secret == name) {
                None
            } else {
                std::env::var(name).ok()
            }
        }),
        start_timeout: MCP_START_TIMEOUT,
        first_wait,
        workspace,
        sandbox,
    }
}

/// The MCP servers a session may start, and what the user must be told about the others.
pub struct DeclaredServers {
    pub trusted: Vec<keel_mcp::ServerConfig>,
    pub notices: Vec<String>,
}

/// The servers the configuration may start: the user's own, and a project's only in a trusted
/// workspace (an untrusted one's are among `config.ignored()`, announced as `trust/ignored`).
pub fn mcp_servers(config: &keel_config::KeelConfig) -> anyhow::Result<DeclaredServers> {
    let (trusted, notices) = config.mcp_servers()?;
    Ok(DeclaredServers { trusted, notices })
}

/// The values the workspace's untrusted project files asked for, as the session announces them.
pub fn untrusted_settings(config: &keel_config::KeelConfig) -> Vec<keel_types::IgnoredSetting> {
    config
        .ignored()
        .iter()
        .map(|value| keel_types::IgnoredSetting {
            file: value.file.display().to_string(),
            line: value.line,
            key: value.key.clone(),
            reason: match value.why {
                // Refused whether or not the workspace is trusted: trusting it changes nothing.
                keel_config::IgnoredBecause::NeverFromProject(why) => {
                    format!("not applied: {why}")
                }
                keel_config::IgnoredBecause::Closed
                | keel_config::IgnoredBecause::Looser { .. }
                | keel_config::IgnoredBecause::ProjectProvider
                | keel_config::IgnoredBecause::UnknownKey { .. } => format!(
                    "not applied: {}; this workspace is not trusted (`keel trust` shows what \
                     its files ask for and trusts them)",
                    value.why
                ),
            },
        })
        .collect()
}

/// Programs that are shells: their environment is the user's own session, not a wrapper's.
const SHELLS: [&str; 14] = [
    "bash", "zsh", "fish", "sh", "dash", "ksh", "mksh", "tcsh", "csh", "nu", "elvish", "xonsh",
    "pwsh", "login",
];

/// The warning to give when keel's parent process is not a shell and holds a provider key in
/// its environment: a command keel runs can read `/proc/<parent>/environ` (same user), and only
/// the sandbox's PID namespace hides it (docs/security.md#secrets). `None`: nothing to say.
pub fn parent_key_warning(config: &KeelConfig) -> Option<String> {
    let parent = std::os::unix::process::parent_id();
    let comm = std::fs::read_to_string(format!("/proc/{parent}/comm")).ok()?;
    let name = comm.trim();
    if SHELLS.contains(&name) {
        return None;
    }
    let environ = std::fs::read(format!("/proc/{parent}/environ")).ok()?;
    let keys = config.key_env_vars();
    let held: Vec<&str> = environ
        .split(|byte| *byte == 0)
        .filter_map(|entry| std::str::from_utf8(entry).ok()?.split_once('='))
        .filter(|(variable, value)| !value.is_empty() && keys.iter().any(|key| key == variable))
        .map(|(variable, _)| variable)
        .collect();
    if held.is_empty() {
        return None;
    }
    Some(format!(
        "keel was started by `{}` (pid {parent}), whose environment holds {}: a command keel runs \
         can read it from /proc/{parent}/environ. Start keel from a shell, or unset the key in \
         the wrapper (docs/security.md)",
        keel_render::visible_line(name),
        held.join(", ")
    ))
}
