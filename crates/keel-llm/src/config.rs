//! The TOML configuration (CONTRACT.md "Configuration") and its resolution into profiles.
//!
//! Invariants:
//! - Precedence: command-line flag > environment > `./keel.toml` > `$KEEL_HOME/config.toml` >
//!   built-in defaults; it is applied per field, so a project file can override one retry knob.
//! - Every error names where the bad value came from: file, line and key for a file, the flag
//!   or the environment variable otherwise. Nothing here panics on any input.
//! - Keys are never read here: a profile names the environment variable only.

use crate::profile::{
    self, Account, DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_OUTPUT_TOKENS,
    ProviderProfile,
};
use crate::retry::{RetryMode, RetryPolicy};
use keel_types::{FailureKind, PermissionMode, ReasoningProtocol, WireProtocol};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

pub const DEFAULT_MODEL: &str = "deepseek/deepseek-v4-flash";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}:{line}: `{key}`: {message}")]
    InFile {
        file: PathBuf,
        line: usize,
        key: String,
        message: String,
    },
    #[error("cannot read {file}: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Setting { origin: String, message: String },
}

/// Values from outside the files: flags and environment variables.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--model`
    pub model_flag: Option<String>,
    /// `--permission-mode` (or `--yes`)
    pub permission_mode_flag: Option<PermissionMode>,
    /// `KEEL_MODEL`
    pub model_env: Option<String>,
    /// `DEEPSEEK_BASE_URL`
    pub deepseek_base_url_env: Option<String>,
}

impl Overrides {
    /// Environment overrides read from the process environment.
    pub fn from_env() -> Self {
        let non_empty = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        Self {
            model_flag: None,
            permission_mode_flag: None,
            model_env: non_empty("KEEL_MODEL"),
            deepseek_base_url_env: non_empty("DEEPSEEK_BASE_URL"),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    model: Option<Spanned<String>>,
    permission_mode: Option<Spanned<PermissionMode>>,
    max_rounds: Option<Spanned<u32>>,
    #[serde(default)]
    permissions: RawPermissions,
    #[serde(default)]
    providers: BTreeMap<String, RawProvider>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPermissions {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    ask: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

/// Permission rules from every config file (a rule in any file applies).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PermissionRules {
    pub allow: Vec<String>,
    pub ask: Vec<String>,
    pub deny: Vec<String>,
}

pub const DEFAULT_MAX_ROUNDS: u32 = 500;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    protocol: Option<Spanned<WireProtocol>>,
    base_url: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    accounts: Option<Spanned<Vec<RawAccount>>>,
    reasoning_protocol: Option<Spanned<ReasoningProtocol>>,
    idle_timeout_secs: Option<Spanned<u64>>,
    connect_timeout_secs: Option<Spanned<u64>>,
    max_output_tokens: Option<Spanned<u32>>,
    web_search: Option<Spanned<bool>>,
    max_event_bytes: Option<Spanned<u64>>,
    retry: Option<RawRetry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccount {
    name: String,
    api_key_env: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetry {
    mode: Option<Spanned<String>>,
    max_retries: Option<Spanned<u32>>,
    retry_on: Option<Spanned<Vec<String>>>,
    base_delay_ms: Option<Spanned<u64>>,
    max_delay_ms: Option<Spanned<u64>>,
    jitter: Option<Spanned<f64>>,
    retry_after_cap_ms: Option<Spanned<u64>>,
    rotate_on: Option<Spanned<Vec<String>>>,
}

/// One parsed config file, kept with its text so errors can point at lines.
#[derive(Debug)]
struct Layer {
    path: PathBuf,
    text: String,
    raw: RawFile,
}

impl Layer {
    fn parse(path: &Path, text: String) -> Result<Layer, ConfigError> {
        match toml::from_str::<RawFile>(&text) {
            Ok(raw) => Ok(Layer {
                path: path.to_path_buf(),
                text,
                raw,
            }),
            Err(error) => {
                let span = error.span().unwrap_or(0..0);
                let (line, key) = locate(&text, &span);
                Err(ConfigError::InFile {
                    file: path.to_path_buf(),
                    line,
                    key,
                    message: first_line(error.message()),
                })
            }
        }
    }

    fn error(&self, span: Range<usize>, message: impl Into<String>) -> ConfigError {
        let (line, key) = locate(&self.text, &span);
        ConfigError::InFile {
            file: self.path.clone(),
            line,
            key,
            message: message.into(),
        }
    }
}

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_string()
}

/// The 1-based line of `span` and the dotted key written there (table header + key).
fn locate(text: &str, span: &Range<usize>) -> (usize, String) {
    let start = span.start.min(text.len());
    let before = text.get(..start).unwrap_or("");
    let line_number = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |index| index + 1);
    let line_text = text
        .get(line_start..)
        .unwrap_or("")
        .lines()
        .next()
        .unwrap_or("");
    let table = text
        .get(..line_start)
        .unwrap_or("")
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| line.starts_with('[') && !line.starts_with("[["))
        .map(|header| {
            header
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string()
        });
    let trimmed = line_text.trim();
    let key = if trimmed.starts_with('[') {
        trimmed
            .trim_matches(|c| c == '[' || c == ']')
            .trim()
            .to_string()
    } else {
        let local = trimmed
            .split('=')
            .next()
            .unwrap_or("")
            .trim()
            .trim_matches('"');
        match (&table, local.is_empty()) {
            (Some(table), false) => format!("{table}.{local}"),
            (Some(table), true) => table.clone(),
            (None, _) => local.to_string(),
        }
    };
    (line_number, key)
}

/// The merged configuration: files in precedence order plus overrides.
#[derive(Debug)]
pub struct KeelConfig {
    /// Highest precedence first.
    layers: Vec<Layer>,
    overrides: Overrides,
}

/// A `<provider>/<model id>` reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelRef {
    pub provider: String,
    pub model: String,
}

impl KeelConfig {
    /// Load `$KEEL_HOME/config.toml` and `./keel.toml` (either may be absent).
    pub fn load(
        home_file: &Path,
        project_file: &Path,
        overrides: Overrides,
    ) -> Result<KeelConfig, ConfigError> {
        let mut layers = Vec::new();
        for path in [project_file, home_file] {
            match std::fs::read_to_string(path) {
                Ok(text) => layers.push(Layer::parse(path, text)?),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ConfigError::Read {
                        file: path.to_path_buf(),
                        source,
                    });
                }
            }
        }
        let config = KeelConfig { layers, overrides };
        config.validate()?;
        Ok(config)
    }

    /// A config from in-memory texts (highest precedence first), for tests and `keel demo`.
    pub fn from_texts(
        files: Vec<(PathBuf, String)>,
        overrides: Overrides,
    ) -> Result<KeelConfig, ConfigError> {
        let layers = files
            .into_iter()
            .map(|(path, text)| Layer::parse(&path, text))
            .collect::<Result<Vec<_>, _>>()?;
        let config = KeelConfig { layers, overrides };
        config.validate()?;
        Ok(config)
    }

    /// Resolve everything once so that a bad value fails at start-up, not mid-session.
    fn validate(&self) -> Result<(), ConfigError> {
        let mut names: Vec<&str> = Vec::new();
        for layer in &self.layers {
            for name in layer.raw.providers.keys() {
                if !names.contains(&name.as_str()) {
                    names.push(name);
                }
            }
        }
        for name in names {
            self.profile(name)?;
        }
        let model = self.model()?;
        self.profile(&model.provider)?;
        self.max_rounds()?;
        Ok(())
    }

    pub fn permission_mode(&self) -> PermissionMode {
        self.overrides
            .permission_mode_flag
            .or_else(|| {
                self.layers
                    .iter()
                    .find_map(|layer| layer.raw.permission_mode.as_ref().map(|v| *v.get_ref()))
            })
            .unwrap_or(PermissionMode::Ask)
    }

    pub fn permission_rules(&self) -> PermissionRules {
        let mut rules = PermissionRules::default();
        for layer in &self.layers {
            rules
                .allow
                .extend(layer.raw.permissions.allow.iter().cloned());
            rules.ask.extend(layer.raw.permissions.ask.iter().cloned());
            rules
                .deny
                .extend(layer.raw.permissions.deny.iter().cloned());
        }
        rules
    }

    /// The most tool rounds one turn may take.
    pub fn max_rounds(&self) -> Result<u32, ConfigError> {
        match self
            .layers
            .iter()
            .find_map(|layer| layer.raw.max_rounds.as_ref().map(|v| (layer, v)))
        {
            Some((layer, value)) if *value.get_ref() == 0 => {
                Err(layer.error(value.span(), "must be at least 1"))
            }
            Some((_, value)) => Ok(*value.get_ref()),
            None => Ok(DEFAULT_MAX_ROUNDS),
        }
    }

    /// The model to use, with its provider checked to exist.
    pub fn model(&self) -> Result<ModelRef, ConfigError> {
        let (text, origin): (String, Option<(&Layer, Range<usize>)>) =
            if let Some(flag) = &self.overrides.model_flag {
                (flag.clone(), None)
            } else if let Some(env) = &self.overrides.model_env {
                (env.clone(), None)
            } else if let Some((layer, value)) = self
                .layers
                .iter()
                .find_map(|layer| layer.raw.model.as_ref().map(|v| (layer, v)))
            {
                (value.get_ref().clone(), Some((layer, value.span())))
            } else {
                (DEFAULT_MODEL.to_string(), None)
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
                "unknown provider `{provider}`: use a preset ({}) or add a [providers.{provider}] table",
                known.join(", ")
            )));
        }
        Ok(ModelRef {
            provider: provider.to_string(),
            model: model.to_string(),
        })
    }

    fn model_origin(&self) -> String {
        if self.overrides.model_flag.is_some() {
            "--model".to_string()
        } else if self.overrides.model_env.is_some() {
            "environment variable KEEL_MODEL".to_string()
        } else {
            "default model".to_string()
        }
    }

    fn has_provider_table(&self, name: &str) -> bool {
        self.layers
            .iter()
            .any(|layer| layer.raw.providers.contains_key(name))
    }

    /// The highest-precedence layer that sets a field of provider `name`.
    fn provider_field<'a, T>(
        &'a self,
        name: &str,
        field: impl Fn(&'a RawProvider) -> Option<&'a T>,
    ) -> Option<(&'a Layer, &'a T)> {
        self.layers.iter().find_map(|layer| {
            layer
                .raw
                .providers
                .get(name)
                .and_then(&field)
                .map(|v| (layer, v))
        })
    }

    fn retry_field<'a, T>(
        &'a self,
        name: &str,
        field: impl Fn(&'a RawRetry) -> Option<&'a T>,
    ) -> Option<(&'a Layer, &'a T)> {
        self.provider_field(name, |provider| provider.retry.as_ref().and_then(&field))
    }

    /// Every environment variable that holds a provider key keel may read: each preset's and
    /// each configured provider's accounts. Tools must never see these.
    pub fn key_env_vars(&self) -> Vec<String> {
        let mut names: Vec<String> = profile::PRESETS
            .iter()
            .map(|preset| preset.api_key_env.to_string())
            .collect();
        for layer in &self.layers {
            for name in layer.raw.providers.keys() {
                let accounts = self
                    .accounts(name, profile::preset(name))
                    .unwrap_or_default();
                for account in accounts {
                    if !names.contains(&account.api_key_env) {
                        names.push(account.api_key_env);
                    }
                }
            }
        }
        names
    }

    /// Resolve provider `name`: preset defaults, then files, then environment.
    pub fn profile(&self, name: &str) -> Result<ProviderProfile, ConfigError> {
        let preset = profile::preset(name);
        if preset.is_none() && !self.has_provider_table(name) {
            return Err(ConfigError::Setting {
                origin: format!("provider `{name}`"),
                message: "is neither a preset nor configured in a [providers] table".into(),
            });
        }
        let protocol = self
            .provider_field(name, |p| p.protocol.as_ref())
            .map(|(_, v)| *v.get_ref())
            .or(preset.map(|p| p.protocol))
            .unwrap_or(WireProtocol::Chat);
        let reasoning_protocol = self
            .provider_field(name, |p| p.reasoning_protocol.as_ref())
            .map(|(_, v)| *v.get_ref())
            .or(preset.map(|p| p.reasoning_protocol))
            .unwrap_or(ReasoningProtocol::None);
        let base_url = self.base_url(name, preset)?;
        let accounts = self.accounts(name, preset)?;
        let secs = |field: fn(&RawProvider) -> Option<&Spanned<u64>>, default: Duration| match self
            .provider_field(name, field)
        {
            Some((layer, value)) if *value.get_ref() == 0 => {
                Err(layer.error(value.span(), "must be at least 1 second"))
            }
            Some((_, value)) => Ok(Duration::from_secs(*value.get_ref())),
            None => Ok(default),
        };
        let idle_timeout = secs(|p| p.idle_timeout_secs.as_ref(), DEFAULT_IDLE_TIMEOUT)?;
        let connect_timeout = secs(|p| p.connect_timeout_secs.as_ref(), DEFAULT_CONNECT_TIMEOUT)?;
        let max_output_tokens = match self.provider_field(name, |p| p.max_output_tokens.as_ref()) {
            Some((layer, value)) if *value.get_ref() == 0 => {
                return Err(layer.error(value.span(), "must be at least 1"));
            }
            Some((_, value)) => *value.get_ref(),
            None => DEFAULT_MAX_OUTPUT_TOKENS,
        };
        let native_web_search = match self.provider_field(name, |p| p.web_search.as_ref()) {
            Some((layer, value)) if *value.get_ref() && protocol == WireProtocol::Chat => {
                return Err(layer.error(
                    value.span(),
                    "provider-native web search needs protocol \"anthropic\" or \"responses\"",
                ));
            }
            Some((_, value)) => *value.get_ref(),
            None => false,
        };
        let max_event_bytes = match self.provider_field(name, |p| p.max_event_bytes.as_ref()) {
            Some((layer, value)) if *value.get_ref() < 1024 => {
                return Err(layer.error(value.span(), "must be at least 1024 bytes"));
            }
            Some((_, value)) => usize::try_from(*value.get_ref()).unwrap_or(usize::MAX),
            None => profile::DEFAULT_MAX_EVENT_BYTES,
        };
        Ok(ProviderProfile {
            native_web_search,
            max_event_bytes,
            name: name.to_string(),
            protocol,
            base_url,
            accounts,
            reasoning_protocol,
            retry: self.retry_policy(name)?,
            idle_timeout,
            connect_timeout,
            max_output_tokens,
        })
    }

    fn base_url(
        &self,
        name: &str,
        preset: Option<&profile::Preset>,
    ) -> Result<String, ConfigError> {
        if name == "deepseek"
            && let Some(url) = &self.overrides.deepseek_base_url_env
        {
            return validate_base_url(url).map_err(|message| ConfigError::Setting {
                origin: "environment variable DEEPSEEK_BASE_URL".into(),
                message,
            });
        }
        if let Some((layer, value)) = self.provider_field(name, |p| p.base_url.as_ref()) {
            return validate_base_url(value.get_ref())
                .map_err(|message| layer.error(value.span(), message));
        }
        match preset.and_then(|p| p.base_url) {
            Some(url) => Ok(url.to_string()),
            None => Err(ConfigError::Setting {
                origin: format!("provider `{name}`"),
                message: format!("has no base_url: set `base_url` in [providers.{name}]"),
            }),
        }
    }

    fn accounts(
        &self,
        name: &str,
        preset: Option<&profile::Preset>,
    ) -> Result<Vec<Account>, ConfigError> {
        if let Some((layer, accounts)) = self.provider_field(name, |p| p.accounts.as_ref()) {
            if accounts.get_ref().is_empty() {
                return Err(layer.error(accounts.span(), "needs at least one account"));
            }
            let mut seen: Vec<&str> = Vec::new();
            for account in accounts.get_ref() {
                if !is_env_var_name(&account.api_key_env) {
                    return Err(layer.error(
                        accounts.span(),
                        format!(
                            "`{}` is not an environment variable name",
                            account.api_key_env
                        ),
                    ));
                }
                if seen.contains(&account.name.as_str()) {
                    return Err(layer.error(
                        accounts.span(),
                        format!("account name `{}` is used twice", account.name),
                    ));
                }
                seen.push(&account.name);
            }
            return Ok(accounts
                .get_ref()
                .iter()
                .map(|a| Account {
                    name: a.name.clone(),
                    api_key_env: a.api_key_env.clone(),
                })
                .collect());
        }
        let api_key_env = match self.provider_field(name, |p| p.api_key_env.as_ref()) {
            Some((layer, value)) => {
                if !is_env_var_name(value.get_ref()) {
                    return Err(layer.error(
                        value.span(),
                        format!("`{}` is not an environment variable name", value.get_ref()),
                    ));
                }
                value.get_ref().clone()
            }
            None => match preset {
                Some(preset) => preset.api_key_env.to_string(),
                None => {
                    return Err(ConfigError::Setting {
                        origin: format!("provider `{name}`"),
                        message: format!(
                            "has no key: set `api_key_env` (or `accounts`) in [providers.{name}]"
                        ),
                    });
                }
            },
        };
        Ok(vec![Account {
            name: "default".into(),
            api_key_env,
        }])
    }

    fn retry_policy(&self, name: &str) -> Result<RetryPolicy, ConfigError> {
        let mut policy = RetryPolicy::default();
        if let Some((layer, mode)) = self.retry_field(name, |r| r.mode.as_ref()) {
            policy.mode = RetryMode::parse(mode.get_ref()).ok_or_else(|| {
                layer.error(
                    mode.span(),
                    format!(
                        "unknown retry mode `{}`: use `normal` or `off`",
                        mode.get_ref()
                    ),
                )
            })?;
        }
        if let Some((_, value)) = self.retry_field(name, |r| r.max_retries.as_ref()) {
            policy.max_retries = *value.get_ref();
        }
        if let Some((layer, kinds)) = self.retry_field(name, |r| r.retry_on.as_ref()) {
            policy.retry_on = parse_kinds(layer, kinds, |kind| {
                kind.is_never_retryable().then(|| {
                    format!("`{kind}` can never be retried (repeating the request cannot help)")
                })
            })?;
        }
        if let Some((layer, kinds)) = self.retry_field(name, |r| r.rotate_on.as_ref()) {
            policy.rotate_on = parse_kinds(layer, kinds, |kind| {
                (!matches!(kind, FailureKind::Quota | FailureKind::RateLimit)).then(|| {
                    format!("`{kind}` cannot rotate accounts: use `quota` or `rate_limit`")
                })
            })?;
        }
        if let Some((_, value)) = self.retry_field(name, |r| r.base_delay_ms.as_ref()) {
            policy.base_delay = Duration::from_millis(*value.get_ref());
        }
        if let Some((layer, value)) = self.retry_field(name, |r| r.max_delay_ms.as_ref()) {
            policy.max_delay = Duration::from_millis(*value.get_ref());
            if policy.max_delay < policy.base_delay {
                return Err(layer.error(value.span(), "must not be smaller than base_delay_ms"));
            }
        }
        if let Some((layer, value)) = self.retry_field(name, |r| r.jitter.as_ref()) {
            let jitter = *value.get_ref();
            if !(0.0..=1.0).contains(&jitter) {
                return Err(layer.error(value.span(), "must be between 0.0 and 1.0"));
            }
            policy.jitter = jitter;
        }
        if let Some((_, value)) = self.retry_field(name, |r| r.retry_after_cap_ms.as_ref()) {
            policy.retry_after_cap = Duration::from_millis(*value.get_ref());
        }
        Ok(policy)
    }
}

fn parse_kinds(
    layer: &Layer,
    kinds: &Spanned<Vec<String>>,
    refuse: impl Fn(FailureKind) -> Option<String>,
) -> Result<Vec<FailureKind>, ConfigError> {
    let mut parsed = Vec::new();
    for name in kinds.get_ref() {
        let kind = FailureKind::parse(name).ok_or_else(|| {
            let known: Vec<&str> = FailureKind::ALL.iter().map(|k| k.as_str()).collect();
            layer.error(
                kinds.span(),
                format!(
                    "unknown failure kind `{name}`: known kinds are {}",
                    known.join(", ")
                ),
            )
        })?;
        if let Some(message) = refuse(kind) {
            return Err(layer.error(kinds.span(), message));
        }
        if !parsed.contains(&kind) {
            parsed.push(kind);
        }
    }
    Ok(parsed)
}

fn is_env_var_name(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
}

/// An absolute http(s) URL with a host, no credentials, no query; returned without a
/// trailing `/`.
pub fn validate_base_url(text: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(text.trim())
        .map_err(|error| format!("`{text}` is not a valid URL ({error})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("`{text}` must start with http:// or https://"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{text}` has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a base URL must not contain credentials: use api_key_env".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("`{text}` must not have a query or fragment"));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests;
