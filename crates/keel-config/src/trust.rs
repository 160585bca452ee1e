//! What a repository may decide (docs/security.md#repository-trust): `restrict` alone takes an
//! untrusted project's `keel.toml` apart and keeps only what tightens the user's own settings.
//!
//! | key | from an untrusted project |
//! |---|---|
//! | `model` | kept when its provider is a preset or one the user's layers define |
//! | `permission_mode` | kept when at least as strict as the user's (read-only < ask < auto) |
//! | `max_rounds`, `providers.X.context_window` | kept when not above the user's (the minimum) |
//! | `permissions.deny`, `permissions.ask` | added (a project ask beats a user allow) |
//! | `ask_read_only_commands` | kept when `true` (trusted or not, a project may only ask more) |
//! | `agents.*` | kept when lower than the user's (trusted or not: `agent_limits.rs`) |
//! | `sandbox.*` | ignored and reported (a trusted project is limited too: see `sandbox.rs`) |
//! | `hooks.*`, `hooks_from_claude` | ignored and reported (a trusted project's hooks run, `hooks.rs`) |
//! | everything else | ignored and reported |
//!
//! Invariants:
//! - The project's fields are taken apart exhaustively (no `..`): a field added to `RawFile`,
//!   `RawProvider`, `RawRetry` or `RawPermissions` does not compile until it is decided here,
//!   and the table test in `trust_tests.rs` fails for a key it has no case for. A new key is
//!   closed until someone decides.
//! - Nothing is dropped silently: every value not applied becomes one `IgnoredValue` naming the
//!   file, the 1-based line and the dotted key.
//! - A trusted project layer is not restricted at all; no layer, trusted or not, gets here for
//!   the user's own file.

use crate::ignored::{IgnoredBecause, IgnoredValue, VALUE_SHOWN_CHARS};
use crate::layer::{Layer, RawFile, RawPermissions, RawProvider, RawRetry, RawSandbox};
use crate::workspace_files::WorkspaceFile;
use keel_llm::profile;
use keel_tools::PermissionMode;
use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;

/// The user's decision about a workspace's project files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkspaceTrust {
    /// Recorded by `keel trust` (or the interactive question) for exactly these files, or given
    /// for one run with `--trust-workspace`: project layers apply like the user's.
    Trusted,
    /// Project layers may only tighten.
    Untrusted,
}

/// What the user's own layers give, for comparing a project value against.
pub(crate) struct UserBaseline {
    /// The mode of `$KEEL_HOME/config.toml`, or the default (flags still win above the project).
    pub mode: PermissionMode,
    pub max_rounds: u32,
    /// Providers with a `[providers.NAME]` table in the user's file.
    pub providers: Vec<String>,
    /// Each provider's window as the user's file sets it.
    pub windows: BTreeMap<String, u64>,
    /// The model the user's layers choose (flag, environment, file or default).
    pub model: Option<(String, String)>,
}

/// How strict a mode is: lower is stricter.
fn looseness(mode: PermissionMode) -> u8 {
    match mode {
        PermissionMode::ReadOnly => 0,
        PermissionMode::Plan => 1,
        PermissionMode::Ask => 2,
        PermissionMode::Auto => 3,
    }
}

/// Collects what is not applied, with its place in the file.
struct Report<'a> {
    layer: &'a Layer,
    ignored: Vec<IgnoredValue>,
}

impl Report<'_> {
    fn ignore(&mut self, key: String, span: Range<usize>, why: IgnoredBecause) {
        let mut value: String = self.layer.snippet(&span).to_string();
        // A table's span is its header only: say so, rather than repeat the header as a value
        // (`keel trust` shows the table's lines in full).
        if value.trim_start().starts_with('[') && value.contains(key.as_str()) {
            value = "(the table: see its lines in the file)".to_string();
        }
        if value.chars().count() > VALUE_SHOWN_CHARS {
            value = value.chars().take(VALUE_SHOWN_CHARS).collect::<String>() + "…";
        }
        self.ignored.push(IgnoredValue {
            file: self.layer.path.clone(),
            line: self.layer.line(&span),
            key,
            value,
            why,
        });
    }

    fn closed<T>(&mut self, key: impl Into<String>, value: Option<Spanned<T>>) {
        if let Some(value) = value {
            self.ignore(key.into(), value.span(), IgnoredBecause::Closed);
        }
    }
}

/// The untrusted project layer `layer`, keeping only what tightens `user`; the rest reported.
pub(crate) fn restrict(mut layer: Layer, user: &UserBaseline) -> (Layer, Vec<IgnoredValue>) {
    let raw = std::mem::take(&mut layer.raw);
    let mut report = Report {
        layer: &layer,
        ignored: Vec::new(),
    };
    let RawFile {
        model,
        permission_mode,
        max_rounds,
        compact_at,
        permissions,
        providers,
        mcp_servers,
        trust_workspace_mcp,
        sandbox,
        instruction_files,
        checkpoint_max_bytes,
        reasoning_effort,
        ask_read_only_commands,
        agents,
        hooks_from_claude,
        hooks,
    } = raw;
    // Hooks run commands: an untrusted project's never run.
    report.closed("hooks_from_claude", hooks_from_claude);
    for (event, groups) in hooks {
        report.ignore(
            format!("hooks.{event}"),
            groups.span(),
            IgnoredBecause::Closed,
        );
    }
    let ask_read_only_commands = ask_read_only_commands.and_then(|ask| {
        if *ask.get_ref() {
            Some(ask)
        } else {
            report.ignored.push(crate::sandbox::refused(
                &layer,
                "ask_read_only_commands",
                &ask,
                crate::sandbox::ONLY_ASK_MORE,
            ));
            None
        }
    });
    report.closed("instruction_files", instruction_files);
    report.closed("checkpoint_max_bytes", checkpoint_max_bytes);
    // The sandbox is the user's: an untrusted project may not even tighten it (deny and ask
    // rules are how a project tightens what commands run).
    let RawSandbox {
        mode,
        forbid_read,
        allow_write,
        allow_network,
    } = sandbox;
    report.closed("sandbox.mode", mode);
    report.closed("sandbox.forbid_read", forbid_read);
    // What each entry really leads to is shown with it: the words alone can hide a link.
    let leads = match (&allow_write, layer.path.parent()) {
        (Some(list), Some(workspace)) => {
            crate::sandbox::where_writes_lead(workspace, list.get_ref())
        }
        _ => String::new(),
    };
    report.closed("sandbox.allow_write", allow_write);
    if let Some(last) = report.ignored.last_mut().filter(|_| !leads.is_empty()) {
        last.value.push_str(&leads);
    }
    report.closed("sandbox.allow_network", allow_network);
    let model = model.and_then(|model| {
        let provider = model.get_ref().split_once('/').map(|(p, _)| p);
        match provider {
            Some(provider)
                if profile::preset(provider).is_none()
                    && !user.providers.iter().any(|p| p == provider) =>
            {
                report.ignore(
                    "model".into(),
                    model.span(),
                    IgnoredBecause::ProjectProvider,
                );
                None
            }
            // Malformed references stay: resolving them is an error naming the file.
            _ => Some(model),
        }
    });
    let permission_mode = permission_mode.and_then(|mode| {
        if looseness(*mode.get_ref()) <= looseness(user.mode) {
            Some(mode)
        } else {
            let user = format!("permission_mode = \"{}\"", user.mode.as_str());
            report.ignore(
                "permission_mode".into(),
                mode.span(),
                IgnoredBecause::Looser { user },
            );
            None
        }
    });
    let max_rounds = max_rounds.and_then(|rounds| {
        if *rounds.get_ref() <= user.max_rounds {
            Some(rounds)
        } else {
            let user = format!("max_rounds = {}", user.max_rounds);
            report.ignore(
                "max_rounds".into(),
                rounds.span(),
                IgnoredBecause::Looser { user },
            );
            None
        }
    });
    report.closed("compact_at", compact_at);
    report.closed("reasoning_effort", reasoning_effort);
    report.closed("trust_workspace_mcp", trust_workspace_mcp);
    let RawPermissions { allow, ask, deny } = permissions;
    for rule in allow {
        report.ignore(
            "permissions.allow".into(),
            rule.span(),
            IgnoredBecause::Closed,
        );
    }
    // The models a window bound is checked against: the user's, and the one the project chose.
    let mut models: Vec<(String, String)> = user.model.iter().cloned().collect();
    if let Some((provider, id)) = model.as_ref().and_then(|m| m.get_ref().split_once('/')) {
        models.push((provider.to_string(), id.to_string()));
    }
    let mut kept_providers = BTreeMap::new();
    for (name, provider) in providers {
        let known = profile::preset(&name).is_some() || user.providers.contains(&name);
        let window = restrict_provider(&name, provider, known, (user, &models), &mut report);
        if let Some(window) = window {
            let kept = RawProvider {
                context_window: Some(window),
                ..RawProvider::default()
            };
            kept_providers.insert(name, kept);
        }
    }
    for (name, server) in mcp_servers {
        report.ignore(
            format!("mcp_servers.{name}"),
            server.span(),
            IgnoredBecause::Closed,
        );
    }
    let mut ignored = report.ignored;
    ignored.sort_by_key(|value| value.line);
    layer.raw = RawFile {
        model,
        permission_mode,
        max_rounds,
        compact_at: None,
        permissions: RawPermissions {
            allow: Vec::new(),
            ask,
            deny,
        },
        providers: kept_providers,
        mcp_servers: BTreeMap::new(),
        trust_workspace_mcp: None,
        sandbox: RawSandbox::default(),
        instruction_files: None,
        checkpoint_max_bytes: None,
        reasoning_effort: None,
        ask_read_only_commands,
        // Only lower limits stay, trusted or not (`agent_limits::lower_only`).
        agents,
        hooks_from_claude: None,
        hooks: BTreeMap::new(),
    };
    (layer, ignored)
}

/// Report every field of an untrusted `[providers.NAME]` table but a tightening
/// `context_window`, which is returned.
fn restrict_provider(
    name: &str,
    provider: RawProvider,
    known: bool,
    (user, models): (&UserBaseline, &[(String, String)]),
    report: &mut Report<'_>,
) -> Option<Spanned<u64>> {
    let key = |field: &str| format!("providers.{name}.{field}");
    let RawProvider {
        protocol,
        base_url,
        api_key_env,
        accounts,
        reasoning_protocol,
        idle_timeout_secs,
        connect_timeout_secs,
        max_output_tokens,
        web_search,
        max_event_bytes,
        context_window,
        retry,
        price,
        region,
    } = provider;
    // What money the user sees spent is theirs to say, not a repository's.
    report.closed(key("price"), price);
    report.closed(key("region"), region);
    report.closed(key("protocol"), protocol);
    report.closed(key("base_url"), base_url);
    report.closed(key("api_key_env"), api_key_env);
    report.closed(key("accounts"), accounts);
    report.closed(key("reasoning_protocol"), reasoning_protocol);
    report.closed(key("idle_timeout_secs"), idle_timeout_secs);
    report.closed(key("connect_timeout_secs"), connect_timeout_secs);
    report.closed(key("max_output_tokens"), max_output_tokens);
    report.closed(key("web_search"), web_search);
    report.closed(key("max_event_bytes"), max_event_bytes);
    if let Some(retry) = retry {
        let RawRetry {
            mode,
            max_retries,
            retry_on,
            base_delay_ms,
            max_delay_ms,
            jitter,
            retry_after_cap_ms,
            rotate_on,
        } = retry;
        let key = |field: &str| format!("providers.{name}.retry.{field}");
        report.closed(key("mode"), mode);
        report.closed(key("max_retries"), max_retries);
        report.closed(key("retry_on"), retry_on);
        report.closed(key("base_delay_ms"), base_delay_ms);
        report.closed(key("max_delay_ms"), max_delay_ms);
        report.closed(key("jitter"), jitter);
        report.closed(key("retry_after_cap_ms"), retry_after_cap_ms);
        report.closed(key("rotate_on"), rotate_on);
    }
    let window = context_window?;
    if !known {
        report.ignore(
            key("context_window"),
            window.span(),
            IgnoredBecause::ProjectProvider,
        );
        return None;
    }
    match user_window(name, user, models) {
        Some(bound) if *window.get_ref() > bound => {
            let user = format!("a window of {bound} tokens");
            report.ignore(
                key("context_window"),
                window.span(),
                IgnoredBecause::Looser { user },
            );
            None
        }
        _ => Some(window),
    }
}

/// The window the user's layers give provider `name`: their own setting, else the smallest the
/// model table knows for a model of it in play (the user's, or the one the project chose; none
/// known: any bound the project sets is stricter).
fn user_window(name: &str, user: &UserBaseline, models: &[(String, String)]) -> Option<u64> {
    if let Some(window) = user.windows.get(name) {
        return Some(*window);
    }
    models
        .iter()
        .filter(|(provider, _)| provider == name)
        .filter_map(|(_, model)| keel_llm::context_window::known_window(model))
        .min()
}

/// The servers of an untrusted workspace's `.mcp.json`, each as a value not applied (a file
/// that does not parse is one value, `mcpServers`, at line 1).
pub(crate) fn ignored_shared_servers(shared: &WorkspaceFile) -> Vec<IgnoredValue> {
    let entry = |line: usize, key: String, value: String| IgnoredValue {
        file: shared.path.clone(),
        line,
        key,
        value: shown(&value),
        why: IgnoredBecause::Closed,
    };
    let parsed: Result<serde_json::Value, _> = serde_json::from_str(&shared.text);
    let Some(servers) = parsed
        .as_ref()
        .ok()
        .and_then(|value| value.get("mcpServers"))
        .and_then(serde_json::Value::as_object)
    else {
        return match parsed {
            Ok(value) if value.get("mcpServers").is_none() => Vec::new(),
            _ => vec![entry(1, "mcpServers".into(), shared.text.clone())],
        };
    };
    servers
        .iter()
        .map(|(name, server)| {
            let quoted = serde_json::Value::String(name.clone()).to_string();
            let line = shared
                .text
                .find(&quoted)
                .map_or(1, |at| shared.text[..at].matches('\n').count() + 1);
            entry(line, format!("mcpServers.{name}"), server.to_string())
        })
        .collect()
}

fn shown(value: &str) -> String {
    if value.chars().count() > VALUE_SHOWN_CHARS {
        value.chars().take(VALUE_SHOWN_CHARS).collect::<String>() + "…"
    } else {
        value.to_string()
    }
}
