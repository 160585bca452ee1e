//! One config file: its TOML shape, its text, and the place of each value in it.
//!
//! Invariants:
//! - Unknown keys are never a silent default: in a user's file all of them are reported at
//!   once, each with the key it most likely meant (an error); in a project's file they are left
//!   out and reported as values not applied, so a repository with a newer keel's key cannot
//!   stop keel (`unknown_keys`). What remains is parsed with `deny_unknown_fields`.
//! - Every value keeps its span, so any error about it can name the file, the 1-based line and
//!   the dotted key; `locate` never panics, whatever the span.

use crate::error::ConfigError;
use crate::source::{Source, Sourced};
use keel_tools::PermissionMode;
use keel_types::{ReasoningProtocol, WireProtocol};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFile {
    pub model: Option<Spanned<String>>,
    pub permission_mode: Option<Spanned<PermissionMode>>,
    pub max_rounds: Option<Spanned<u32>>,
    pub compact_at: Option<Spanned<f64>>,
    #[serde(default)]
    pub permissions: RawPermissions,
    #[serde(default)]
    pub providers: BTreeMap<String, RawProvider>,
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, Spanned<RawMcpServer>>,
    /// Removed (`keel trust` decides now); kept only to refuse it with what to do instead.
    pub trust_workspace_mcp: Option<Spanned<bool>>,
    #[serde(default)]
    pub sandbox: RawSandbox,
    /// The names of project instruction files (user layers only).
    pub instruction_files: Option<Spanned<Vec<String>>>,
    /// The most bytes of file checkpoints one session keeps.
    pub checkpoint_max_bytes: Option<Spanned<u64>>,
    /// How hard the model reasons (`off`, `low`, `medium`, `high`, `max`).
    pub reasoning_effort: Option<Spanned<String>>,
    /// Ask about read-only commands too (a project may only set `true`).
    pub ask_read_only_commands: Option<Spanned<bool>>,
    /// `[agents]`: subagent limits (a project may only lower them).
    #[serde(default)]
    pub agents: RawAgents,
    /// Also read the hooks of Claude Code's settings files (user layers only).
    pub hooks_from_claude: Option<Spanned<bool>>,
    /// `[[hooks.EVENT]]`: the hooks of each event, in the order written.
    #[serde(default)]
    pub hooks: BTreeMap<String, Spanned<Vec<RawHookGroup>>>,
}

/// `[[hooks.EVENT]]`: a matcher and the commands it runs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHookGroup {
    pub matcher: Option<String>,
    #[serde(default)]
    pub hooks: Vec<RawHookCommand>,
}

/// `[[hooks.EVENT.hooks]]`: one command.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHookCommand {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub command: Option<String>,
    pub timeout: Option<u64>,
    pub on_error: Option<String>,
    pub sandbox: Option<String>,
}

/// `[agents]`: how many subagents run at once and how far each may go.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAgents {
    pub max_concurrent: Option<Spanned<u32>>,
    pub max_rounds: Option<Spanned<u32>>,
    /// 0: no limit.
    pub max_child_tokens: Option<Spanned<u64>>,
}

/// `[sandbox]`: how commands are confined (user layers; see `sandbox.rs` for projects).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSandbox {
    pub mode: Option<Spanned<keel_sandbox::SandboxMode>>,
    pub forbid_read: Option<Spanned<Vec<String>>>,
    pub allow_write: Option<Spanned<Vec<String>>>,
    pub allow_network: Option<Spanned<bool>>,
}

/// `[mcp_servers.NAME]`: a stdio server (`command`, `args`, `env`, `cwd`) or an HTTP one
/// (`url`, `headers`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpServer {
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub trust_read_only: bool,
    /// How a stdio server is confined: `mcp` (default), `workspace-write` or `off`.
    pub sandbox: Option<keel_sandbox::ServerConfinement>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPermissions {
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub ask: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProvider {
    pub protocol: Option<Spanned<WireProtocol>>,
    pub base_url: Option<Spanned<String>>,
    pub api_key_env: Option<Spanned<String>>,
    pub accounts: Option<Spanned<Vec<RawAccount>>>,
    pub reasoning_protocol: Option<Spanned<ReasoningProtocol>>,
    pub idle_timeout_secs: Option<Spanned<u64>>,
    pub connect_timeout_secs: Option<Spanned<u64>>,
    pub max_output_tokens: Option<Spanned<u32>>,
    pub web_search: Option<Spanned<bool>>,
    pub max_event_bytes: Option<Spanned<u64>>,
    pub context_window: Option<Spanned<u64>>,
    pub retry: Option<RawRetry>,
    /// What this provider charges per million tokens (overrides keel's table).
    pub price: Option<Spanned<RawPrice>>,
    /// Which regional price list applies: `domestic` or `overseas` (MiMo's).
    pub region: Option<Spanned<String>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPrice {
    pub input_cache_hit: f64,
    pub input_cache_miss: f64,
    /// Tokens written to the provider's cache, where the protocol reports them (Anthropic);
    /// billed as misses when absent.
    pub input_cache_write: Option<f64>,
    pub output: f64,
    pub currency: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAccount {
    pub name: String,
    pub api_key_env: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRetry {
    pub mode: Option<Spanned<String>>,
    pub max_retries: Option<Spanned<u32>>,
    pub retry_on: Option<Spanned<Vec<String>>>,
    pub base_delay_ms: Option<Spanned<u64>>,
    pub max_delay_ms: Option<Spanned<u64>>,
    pub jitter: Option<Spanned<f64>>,
    pub retry_after_cap_ms: Option<Spanned<u64>>,
    pub rotate_on: Option<Spanned<Vec<String>>>,
}

/// Whose file a layer is (docs/security.md#user-layers-and-project-layers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// `$KEEL_HOME/config.toml`: the user's own.
    User,
    /// `./keel.toml`: it comes with the repository.
    Project,
}

/// One parsed config file, kept with its text so errors can point at lines.
#[derive(Debug)]
pub(crate) struct Layer {
    pub path: PathBuf,
    pub kind: LayerKind,
    text: String,
    pub raw: RawFile,
    /// A project file's keys keel does not know, left out of `raw` (a user's are an error).
    pub unknown: Vec<crate::unknown_keys::UnknownKey>,
}

impl Layer {
    pub fn parse(path: &Path, kind: LayerKind, text: String) -> Result<Layer, ConfigError> {
        let unknown = crate::unknown_keys::unknown_keys(&text);
        if !unknown.is_empty() && kind == LayerKind::User {
            let keys = unknown
                .iter()
                .map(|key| {
                    let line = locate(&text, &(key.at..key.at)).0;
                    match key.did_you_mean {
                        Some(known) => {
                            format!("  line {line}: `{}` — did you mean `{known}`?", key.key)
                        }
                        None => format!("  line {line}: `{}`", key.key),
                    }
                })
                .collect();
            return Err(ConfigError::UnknownKeys {
                file: path.to_path_buf(),
                keys,
            });
        }
        // A project file's unknown keys are left out (and said), never a stop.
        let parsed_text = crate::unknown_keys::without(&text, &unknown);
        match toml::from_str::<RawFile>(&parsed_text) {
            Ok(raw) => Ok(Layer {
                path: path.to_path_buf(),
                kind,
                text,
                raw,
                unknown,
            }),
            Err(error) => {
                let (line, key, message) = toml_error_at(&text, &error);
                Err(ConfigError::InFile {
                    file: path.to_path_buf(),
                    line,
                    key,
                    message,
                })
            }
        }
    }

    /// An error about the value at `span`, keyed by the dotted key written on its line. A
    /// project file's (a file keel did not write) says no value it quotes.
    pub fn error(&self, span: Range<usize>, message: impl Into<String>) -> ConfigError {
        let (line, key) = locate(&self.text, &span);
        ConfigError::InFile {
            file: self.path.clone(),
            line,
            key,
            message: self.said(message.into()),
        }
    }

    /// `message` as this layer may say it: a project file's with every quoted value left out.
    fn said(&self, message: String) -> String {
        match self.kind {
            LayerKind::User => message,
            LayerKind::Project => keel_types::parse_error::elide_quoted(&message),
        }
    }

    /// An error about the value at `span` of the known dotted `key` (for an element of an
    /// array, whose line may not show the key).
    pub fn error_for_key(
        &self,
        span: Range<usize>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::InFile {
            file: self.path.clone(),
            line: self.line(&span),
            key: key.into(),
            message: self.said(message.into()),
        }
    }

    pub fn line(&self, span: &Range<usize>) -> usize {
        locate(&self.text, span).0
    }

    /// The text of the value at `span` as written (empty for a span outside the text).
    pub fn snippet(&self, span: &Range<usize>) -> &str {
        self.text.get(span.clone()).unwrap_or("")
    }

    /// Where the value at `span` was written.
    pub fn source(&self, span: Range<usize>) -> Source {
        Source::File {
            path: self.path.clone(),
            line: self.line(&span),
        }
    }

    /// A copy of a file value with its place.
    pub fn sourced<T: Clone>(&self, value: &Spanned<T>) -> Sourced<T> {
        Sourced::new(value.get_ref().clone(), self.source(value.span()))
    }
}

/// Where a TOML parse error in `text` is and what it is, as `(line, key, what)`: the
/// line, the dotted key written there (when the line has one), and the kind of mistake —
/// never the value (the file may be anyone's, even a link to someone's secrets).
pub fn toml_error_at(text: &str, error: &toml::de::Error) -> (usize, String, String) {
    let span = error.span().unwrap_or(0..0);
    let (line, key) = locate(text, &span);
    (
        line,
        key,
        keel_types::parse_error::without_values(error.message()),
    )
}

/// The 1-based line of `span` and the dotted key written there (table header + key).
pub(crate) fn locate(text: &str, span: &Range<usize>) -> (usize, String) {
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
        // Only a key is repeated: a line that has none (a stray value, someone's secret) is
        // placed by its number alone.
        let local = trimmed
            .split_once('=')
            .map(|(key, _)| key.trim().trim_matches('"'))
            .filter(|key| {
                key.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ' '))
            })
            .unwrap_or("");
        match (&table, local.is_empty()) {
            (Some(table), false) => format!("{table}.{local}"),
            (Some(table), true) => table.clone(),
            (None, _) => local.to_string(),
        }
    };
    (line_number, key)
}
