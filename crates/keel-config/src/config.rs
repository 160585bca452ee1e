//! Loading the config files and layering them with flags and the environment; the settings
//! that belong to no provider: the model, the permission mode and rules, `max_rounds`,
//! `compact_at`.
//!
//! Invariants:
//! - Precedence: command-line flag > environment > `./keel.toml` > `$KEEL_HOME/config.toml` >
//!   built-in defaults; it is applied per field, so a project file can override one retry knob.
//! - Permission rules are the exception: a rule in any file applies (they are added up, the
//!   highest-precedence file first).
//! - Every error names where the bad value came from: file, line and key for a file, the flag
//!   or the environment variable otherwise. Nothing here panics on any input.
//! - `load` and `from_texts` resolve everything once (`validate`), so a config that loads
//!   yields every profile, the model, `max_rounds` and the permission policy without error.

use crate::error::ConfigError;
use crate::ignored::IgnoredValue;
use crate::layer::{Layer, LayerKind};
use crate::resolved::ResolvedProvider;
use crate::source::{Source, Sourced};
use crate::trust::{self, UserBaseline, WorkspaceTrust};
use crate::workspace_files::WorkspaceFiles;
use keel_llm::profile;
use keel_tools::{PermissionMode, PermissionPolicy, PermissionRule};
use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

pub const DEFAULT_MODEL: &str = "deepseek/deepseek-v4-flash";

pub const DEFAULT_MAX_ROUNDS: u32 = 500;

/// Compact when the context is this full (a share of the window).
pub const DEFAULT_COMPACT_AT: f64 = 0.85;

/// The most bytes of file checkpoints a session keeps when no file says (256 MiB).
pub const DEFAULT_CHECKPOINT_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// How the permission mode was given on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeFlag {
    /// `--permission-mode MODE`
    PermissionMode(PermissionMode),
    /// `--yes`: the same as `--permission-mode auto`.
    Yes,
}

impl ModeFlag {
    pub fn mode(self) -> PermissionMode {
        match self {
            Self::PermissionMode(mode) => mode,
            Self::Yes => PermissionMode::Auto,
        }
    }

    /// The flag as the user typed it.
    pub fn flag(self) -> &'static str {
        match self {
            Self::PermissionMode(_) => "--permission-mode",
            Self::Yes => "--yes",
        }
    }
}

/// Values from outside the files: flags and environment variables.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--model`
    pub model_flag: Option<String>,
    /// What gave `model_flag`, as errors name it: `--model`, or `/model` in a session.
    pub model_flag_name: &'static str,
    /// `--permission-mode` or `--yes`
    pub permission_mode_flag: Option<ModeFlag>,
    /// `KEEL_MODEL`
    pub model_env: Option<String>,
    /// `DEEPSEEK_BASE_URL`
    pub deepseek_base_url_env: Option<String>,
    /// `--sandbox MODE`
    pub sandbox_flag: Option<keel_sandbox::SandboxMode>,
}

impl Overrides {
    /// What gave the model flag (`--model` unless a surface said otherwise).
    pub fn model_named(&self) -> &'static str {
        if self.model_flag_name.is_empty() {
            "--model"
        } else {
            self.model_flag_name
        }
    }

    /// Environment overrides read from the process environment.
    pub fn from_env() -> Self {
        let non_empty = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        Self {
            model_flag: None,
            model_flag_name: "--model",
            permission_mode_flag: None,
            model_env: non_empty("KEEL_MODEL"),
            deepseek_base_url_env: non_empty("DEEPSEEK_BASE_URL"),
            sandbox_flag: None,
        }
    }
}

/// A `<provider>/<model id>` reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelRef {
    pub provider: String,
    pub model: String,
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// The three lists of `[permissions]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleList {
    Allow,
    Ask,
    Deny,
}

impl RuleList {
    pub const ALL: [RuleList; 3] = [Self::Allow, Self::Ask, Self::Deny];

    /// The key inside `[permissions]`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// One permission rule as written in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfiguredRule {
    pub list: RuleList,
    pub text: String,
    pub source: Source,
}

/// Everything the configuration resolves to, each value with its source (`keel config`).
#[derive(Clone, Debug)]
pub struct ResolvedConfig {
    /// The files read, highest precedence first.
    pub files: Vec<PathBuf>,
    pub model: Sourced<ModelRef>,
    pub permission_mode: Sourced<PermissionMode>,
    pub max_rounds: Sourced<u32>,
    pub compact_at: Sourced<f64>,
    /// Allow rules, then ask, then deny; each list highest-precedence file first.
    pub rules: Vec<ConfiguredRule>,
    /// The active provider first, then every other provider a file names, by name.
    pub providers: Vec<ResolvedProvider>,
    pub sandbox: crate::sandbox::ResolvedSandbox,
    /// The names of project instruction files, the first found per directory.
    pub instruction_files: Sourced<Vec<String>>,
    /// The most bytes of file checkpoints one session keeps (the oldest are pruned).
    pub checkpoint_max_bytes: Sourced<u64>,
    /// Whether read-only commands are asked about in `ask` mode too.
    pub ask_read_only_commands: Sourced<bool>,
    /// `[agents]`: the limits on subagents.
    pub agents: crate::agent_limits::ResolvedAgentLimits,
}

/// The merged configuration: files in precedence order plus overrides.
#[derive(Debug)]
pub struct KeelConfig {
    /// Highest precedence first; an untrusted project layer holds only what it may decide.
    pub(crate) layers: Vec<Layer>,
    pub(crate) overrides: Overrides,
    /// The workspace's project files as read (the `.mcp.json` servers come from here).
    pub(crate) project: WorkspaceFiles,
    pub(crate) trust: WorkspaceTrust,
    /// What the untrusted project files asked for and did not get.
    pub(crate) ignored: Vec<IgnoredValue>,
}

impl KeelConfig {
    /// Load `$KEEL_HOME/config.toml` (may be absent) with the workspace's project files as
    /// read, trusted or not.
    pub fn load(
        home_file: &Path,
        project: WorkspaceFiles,
        trust: WorkspaceTrust,
        overrides: Overrides,
    ) -> Result<KeelConfig, ConfigError> {
        let home = match std::fs::read_to_string(home_file) {
            Ok(text) => Some((home_file.to_path_buf(), text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(ConfigError::Read {
                    file: home_file.to_path_buf(),
                    source,
                });
            }
        };
        KeelConfig::from_parts(home, project, trust, overrides)
    }

    /// The user's file (path and text) and the project's files: the one place a project layer
    /// is admitted, restricted unless trusted (docs/security.md#repository-trust).
    pub fn from_parts(
        home: Option<(PathBuf, String)>,
        project: WorkspaceFiles,
        trust: WorkspaceTrust,
        overrides: Overrides,
    ) -> Result<KeelConfig, ConfigError> {
        let mut user = KeelConfig {
            layers: Vec::new(),
            overrides,
            project: WorkspaceFiles::default(),
            trust,
            ignored: Vec::new(),
        };
        if let Some((path, text)) = home {
            user.layers
                .push(Layer::parse(&path, LayerKind::User, text)?);
        }
        let Some(keel_toml) = &project.keel_toml else {
            return user.with_project(None, project, Vec::new());
        };
        let layer = Layer::parse(&keel_toml.path, LayerKind::Project, keel_toml.text.clone())?;
        let unknown = crate::ignored::unknown_keys_ignored(&layer);
        match trust {
            WorkspaceTrust::Trusted => user.with_project(Some(layer), project, unknown),
            WorkspaceTrust::Untrusted => {
                user.validate()?;
                let (layer, mut ignored) = trust::restrict(layer, &user.baseline());
                ignored.extend(unknown);
                ignored.sort_by_key(|value| value.line);
                user.with_project(Some(layer), project, ignored)
            }
        }
    }

    fn with_project(
        mut self,
        layer: Option<Layer>,
        project: WorkspaceFiles,
        mut ignored: Vec<IgnoredValue>,
    ) -> Result<KeelConfig, ConfigError> {
        if let Some(mut layer) = layer {
            // Only the user's layers are here yet: what a project may only lower is compared
            // with them.
            let user_limits = crate::agent_limits::resolve(&self.layers).limits();
            ignored.extend(crate::agent_limits::lower_only(&mut layer, &user_limits));
            ignored.sort_by_key(|value| value.line);
            if self.trust == WorkspaceTrust::Trusted {
                let user = crate::sandbox::user_mode(&self.layers);
                ignored.extend(crate::sandbox::limit_trusted_project(&mut layer, user));
                ignored.extend(crate::hook_tables::limit_trusted_project(&mut layer));
            }
            self.layers.insert(0, layer);
        }
        if self.trust == WorkspaceTrust::Untrusted
            && let Some(shared) = &project.mcp_json
        {
            ignored.extend(trust::ignored_shared_servers(shared));
        }
        if self.trust == WorkspaceTrust::Untrusted
            && let Some(claude) = &project.claude_settings
        {
            ignored.extend(crate::hook_tables::ignored_claude_hooks(
                &claude.path,
                &claude.text,
            ));
        }
        self.project = project;
        self.ignored = ignored;
        self.validate()?;
        Ok(self)
    }

    /// A config from in-memory texts of the user's own layers (highest precedence first), for
    /// tests and `keel demo`.
    pub fn from_texts(
        files: Vec<(PathBuf, String)>,
        overrides: Overrides,
    ) -> Result<KeelConfig, ConfigError> {
        let layers = files
            .into_iter()
            .map(|(path, text)| Layer::parse(&path, LayerKind::User, text))
            .collect::<Result<Vec<_>, _>>()?;
        let config = KeelConfig {
            layers,
            overrides,
            project: WorkspaceFiles::default(),
            trust: WorkspaceTrust::Trusted,
            ignored: Vec::new(),
        };
        config.validate()?;
        Ok(config)
    }

    /// What the untrusted project files asked for and did not get, in file order.
    pub fn ignored(&self) -> &[IgnoredValue] {
        &self.ignored
    }

    pub fn trust(&self) -> WorkspaceTrust {
        self.trust
    }

    /// The project files this configuration was built from, as read.
    pub fn workspace_files(&self) -> &WorkspaceFiles {
        &self.project
    }

    /// What the user's own layers give, to compare a project value with.
    fn baseline(&self) -> UserBaseline {
        let mode = self
            .layers
            .iter()
            .find_map(|layer| layer.raw.permission_mode.as_ref().map(|m| *m.get_ref()))
            .unwrap_or(PermissionMode::Ask);
        let mut windows = std::collections::BTreeMap::new();
        for layer in &self.layers {
            for (name, provider) in &layer.raw.providers {
                if let Some(window) = &provider.context_window {
                    windows.entry(name.clone()).or_insert(*window.get_ref());
                }
            }
        }
        UserBaseline {
            mode,
            max_rounds: self.max_rounds().unwrap_or(DEFAULT_MAX_ROUNDS),
            providers: self
                .configured_providers()
                .into_iter()
                .map(str::to_string)
                .collect(),
            windows,
            model: self.model().ok().map(|m| (m.provider, m.model)),
        }
    }

    /// Resolve everything once so that a bad value fails at start-up, not mid-session.
    fn validate(&self) -> Result<(), ConfigError> {
        for layer in &self.layers {
            if let Some(removed) = &layer.raw.trust_workspace_mcp {
                return Err(layer.error(
                    removed.span(),
                    "was removed: run `keel trust` in the workspace to start the MCP servers of \
                     its .mcp.json and keel.toml (trust is bound to their contents)",
                ));
            }
        }
        for name in self.configured_providers() {
            self.provider(name)?;
        }
        let model = self.model()?;
        self.provider(&model.provider)?;
        self.max_rounds()?;
        self.compact_at()?;
        self.permission_policy()?;
        crate::agent_limits::check(&self.layers)?;
        Ok(())
    }

    /// Every provider a file has a `[providers.NAME]` table for, in the order first met
    /// (highest-precedence file first, each file's tables by name).
    pub(crate) fn configured_providers(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for layer in &self.layers {
            for name in layer.raw.providers.keys() {
                if !names.contains(&name.as_str()) {
                    names.push(name);
                }
            }
        }
        names
    }

    pub(crate) fn has_provider_table(&self, name: &str) -> bool {
        self.layers
            .iter()
            .any(|layer| layer.raw.providers.contains_key(name))
    }

    /// Everything resolved, each value with its source; the providers shown are the active
    /// one and every one a file names.
    pub fn resolve(&self) -> Result<ResolvedConfig, ConfigError> {
        let model = self.sourced_model()?;
        let mut providers = vec![self.provider(&model.value.provider)?];
        let others: BTreeSet<&str> = self
            .configured_providers()
            .into_iter()
            .filter(|name| *name != model.value.provider)
            .collect();
        for name in others {
            providers.push(self.provider(name)?);
        }
        Ok(ResolvedConfig {
            files: self.layers.iter().map(|layer| layer.path.clone()).collect(),
            permission_mode: self.sourced_permission_mode(),
            max_rounds: self.sourced_max_rounds()?,
            compact_at: self.sourced_compact_at()?,
            rules: self.rules(),
            model,
            providers,
            sandbox: self.sandbox(),
            instruction_files: self.sourced_instruction_files()?,
            checkpoint_max_bytes: self.sourced_checkpoint_max_bytes(),
            ask_read_only_commands: self.sourced_ask_read_only_commands(),
            agents: crate::agent_limits::resolve(&self.layers),
        })
    }

    /// Whether `ask` mode asks about read-only commands too (`false` unless a file says so).
    fn sourced_ask_read_only_commands(&self) -> Sourced<bool> {
        self.layers
            .iter()
            .find_map(|layer| {
                layer
                    .raw
                    .ask_read_only_commands
                    .as_ref()
                    .map(|value| layer.sourced(value))
            })
            .unwrap_or(Sourced::default_value(false))
    }

    /// The limits on this session's subagents.
    pub fn agent_limits(&self) -> crate::agent_limits::AgentLimits {
        crate::agent_limits::resolve(&self.layers).limits()
    }

    /// The most bytes of file checkpoints one session keeps.
    pub fn checkpoint_max_bytes(&self) -> u64 {
        self.sourced_checkpoint_max_bytes().value
    }

    fn sourced_checkpoint_max_bytes(&self) -> Sourced<u64> {
        self.layers
            .iter()
            .find_map(|layer| {
                layer
                    .raw
                    .checkpoint_max_bytes
                    .as_ref()
                    .map(|value| layer.sourced(value))
            })
            .unwrap_or(Sourced::default_value(DEFAULT_CHECKPOINT_MAX_BYTES))
    }

    /// The names of project instruction files (`AGENTS.md`, `CLAUDE.md` unless the user's
    /// config names others), each a plain file name.
    pub fn instruction_files(&self) -> Result<Vec<String>, ConfigError> {
        self.sourced_instruction_files().map(|names| names.value)
    }

    fn sourced_instruction_files(&self) -> Result<Sourced<Vec<String>>, ConfigError> {
        let Some((layer, names)) = self
            .layers
            .iter()
            .find_map(|layer| layer.raw.instruction_files.as_ref().map(|v| (layer, v)))
        else {
            return Ok(Sourced::default_value(
                keel_types::DEFAULT_INSTRUCTION_FILES
                    .map(String::from)
                    .to_vec(),
            ));
        };
        if let Some(bad) = names.get_ref().iter().find(|name| {
            name.is_empty() || name.contains(['/', '\\', '\0']) || *name == "." || *name == ".."
        }) {
            return Err(layer.error(
                names.span(),
                format!(
                    "{bad:?} is not a file name: each entry names a file looked for in every \
                     directory (e.g. \"AGENTS.md\")"
                ),
            ));
        }
        Ok(layer.sourced(names))
    }

    /// `[sandbox]` as the layers and `--sandbox` decide.
    pub fn sandbox(&self) -> crate::sandbox::ResolvedSandbox {
        crate::sandbox::resolve(&self.layers, self.overrides.sandbox_flag)
    }

    pub fn permission_mode(&self) -> PermissionMode {
        self.sourced_permission_mode().value
    }

    fn sourced_permission_mode(&self) -> Sourced<PermissionMode> {
        if let Some(flag) = self.overrides.permission_mode_flag {
            return Sourced::new(flag.mode(), Source::Flag(flag.flag()));
        }
        self.layers
            .iter()
            .find_map(|layer| layer.raw.permission_mode.as_ref().map(|v| layer.sourced(v)))
            .unwrap_or(Sourced::default_value(PermissionMode::Ask))
    }

    /// The `[permissions]` rules of every file, allow then ask then deny.
    pub fn rules(&self) -> Vec<ConfiguredRule> {
        let mut rules = Vec::new();
        for list in RuleList::ALL {
            for layer in &self.layers {
                for rule in layer_rules(layer, list) {
                    rules.push(ConfiguredRule {
                        list,
                        text: rule.get_ref().clone(),
                        source: layer.source(rule.span()),
                    });
                }
            }
        }
        rules
    }

    /// The permission mode and every rule of every file, parsed; a bad rule is an error that
    /// names its file, line and list (`permissions.allow`, …).
    /// Ask rules of a project layer beat allow rules (deny > project ask > allow > ask).
    pub fn permission_policy(&self) -> Result<PermissionPolicy, ConfigError> {
        type Rules = Vec<PermissionRule>;
        // (project rules, user rules)
        let parse_split = |list: RuleList| -> Result<(Rules, Rules), ConfigError> {
            let mut project = Vec::new();
            let mut user = Vec::new();
            for layer in &self.layers {
                for rule in layer_rules(layer, list) {
                    let key = format!("permissions.{}", list.as_str());
                    let parsed = PermissionRule::parse(rule.get_ref()).map_err(|error| {
                        layer.error_for_key(rule.span(), key, error.to_string())
                    })?;
                    match layer.kind {
                        LayerKind::Project => project.push(parsed),
                        LayerKind::User => user.push(parsed),
                    }
                }
            }
            Ok((project, user))
        };
        let parse = |list: RuleList| -> Result<Rules, ConfigError> {
            let (mut project, user) = parse_split(list)?;
            project.extend(user);
            Ok(project)
        };
        let (project_ask, user_ask) = parse_split(RuleList::Ask)?;
        Ok(PermissionPolicy::from_rules(
            self.permission_mode(),
            parse(RuleList::Allow)?,
            user_ask,
            parse(RuleList::Deny)?,
        )
        .with_overriding_ask(project_ask)
        .with_ask_read_only_commands(self.sourced_ask_read_only_commands().value))
    }

    /// The most tool rounds one turn may take.
    pub fn max_rounds(&self) -> Result<u32, ConfigError> {
        self.sourced_max_rounds().map(|rounds| rounds.value)
    }

    fn sourced_max_rounds(&self) -> Result<Sourced<u32>, ConfigError> {
        match self
            .layers
            .iter()
            .find_map(|layer| layer.raw.max_rounds.as_ref().map(|v| (layer, v)))
        {
            Some((layer, value)) if *value.get_ref() == 0 => {
                Err(layer.error(value.span(), "must be at least 1"))
            }
            Some((layer, value)) => Ok(layer.sourced(value)),
            None => Ok(Sourced::default_value(DEFAULT_MAX_ROUNDS)),
        }
    }

    /// The share of the context window at which keel compacts the history.
    pub fn compact_at(&self) -> Result<f64, ConfigError> {
        self.sourced_compact_at().map(|share| share.value)
    }

    fn sourced_compact_at(&self) -> Result<Sourced<f64>, ConfigError> {
        match self
            .layers
            .iter()
            .find_map(|layer| layer.raw.compact_at.as_ref().map(|v| (layer, v)))
        {
            Some((layer, value)) if !(0.1..=1.0).contains(value.get_ref()) => Err(layer.error(
                value.span(),
                "must be a share of the context window between 0.1 and 1.0 (e.g. 0.85)",
            )),
            Some((layer, value)) => Ok(layer.sourced(value)),
            None => Ok(Sourced::default_value(DEFAULT_COMPACT_AT)),
        }
    }

    /// The model to use, with its provider checked to exist.
    pub fn model(&self) -> Result<ModelRef, ConfigError> {
        self.sourced_model().map(|model| model.value)
    }

    fn sourced_model(&self) -> Result<Sourced<ModelRef>, ConfigError> {
        let (text, source, origin): (String, Source, Option<(&Layer, Range<usize>)>) =
            if let Some(flag) = &self.overrides.model_flag {
                (
                    flag.clone(),
                    Source::Flag(self.overrides.model_named()),
                    None,
                )
            } else if let Some(env) = &self.overrides.model_env {
                (env.clone(), Source::Env("KEEL_MODEL"), None)
            } else if let Some((layer, value)) = self
                .layers
                .iter()
                .find_map(|layer| layer.raw.model.as_ref().map(|v| (layer, v)))
            {
                (
                    value.get_ref().clone(),
                    layer.source(value.span()),
                    Some((layer, value.span())),
                )
            } else {
                (DEFAULT_MODEL.to_string(), Source::Default, None)
            };
        let fail = |message: String| match &origin {
            Some((layer, span)) => layer.error(span.clone(), message),
            None => ConfigError::Setting {
                origin: self.model_origin(),
                message,
            },
        };
        let Some((provider, model)) = text.split_once('/') else {
            return Err(fail(format!(
                "model `{text}` must be written `<provider>/<model id>`"
            )));
        };
        if provider.is_empty() || model.is_empty() {
            return Err(fail(format!(
                "model `{text}` must be written `<provider>/<model id>`"
            )));
        }
        if profile::preset(provider).is_none() && !self.has_provider_table(provider) {
            let known: Vec<&str> = profile::PRESETS.iter().map(|p| p.name).collect();
            return Err(fail(format!(
                "unknown provider `{provider}`: use a preset ({}) or add a `[providers.{provider}]` table",
                known.join(", ")
            )));
        }
        let model = ModelRef {
            provider: provider.to_string(),
            model: model.to_string(),
        };
        Ok(Sourced::new(model, source))
    }

    fn model_origin(&self) -> String {
        if self.overrides.model_flag.is_some() {
            self.overrides.model_named().to_string()
        } else if self.overrides.model_env.is_some() {
            "environment variable KEEL_MODEL".to_string()
        } else {
            "default model".to_string()
        }
    }

    /// Every environment variable that holds a provider key keel may read: each preset's and
    /// each configured provider's accounts. Tools must never see these.
    pub fn key_env_vars(&self) -> Vec<String> {
        let mut names: Vec<String> = profile::PRESETS
            .iter()
            .map(|preset| preset.api_key_env.to_string())
            .collect();
        for name in self.configured_providers() {
            let accounts = self
                .accounts(name, profile::preset(name))
                .map(|accounts| accounts.value)
                .unwrap_or_default();
            for account in accounts {
                if !names.contains(&account.api_key_env) {
                    names.push(account.api_key_env);
                }
            }
        }
        names
    }
}

fn layer_rules(layer: &Layer, list: RuleList) -> &[toml::Spanned<String>] {
    let permissions = &layer.raw.permissions;
    match list {
        RuleList::Allow => &permissions.allow,
        RuleList::Ask => &permissions.ask,
        RuleList::Deny => &permissions.deny,
    }
}

#[cfg(test)]
mod tests;
