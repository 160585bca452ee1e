//! `keel config [--json]`: the resolved configuration, every value with its source.
//!
//! Invariants:
//! - It reads exactly what `keel run` reads — the same files, flags and environment, `--cwd`
//!   respected — through the same resolution (`KeelConfig::resolve`), writes nothing and needs
//!   no key.
//! - A key's value is never printed: an account shows the name of its variable and whether it
//!   is set.
//! - A bad config is the same `file:line: \`key\`` error as for `keel run` (exit 2).
//! - Each provider's effective retry policy is one line (`RetryPolicy::policy_key`); the retry
//!   fields listed under it are those that did not come from the default.
//! - Human output shows every cell with its control characters made visible.

use crate::cli::CommonArgs;
use crate::{Outcome, settings};
use keel_config::{
    IgnoredValue, ResolvedConfig, ResolvedProvider, ResolvedRetry, RuleList, Source, Sourced,
};
use keel_llm::profile::Account;
use keel_llm::{HomeKeys, KeyOrigin};
use keel_render::visible_line;
use keel_types::FailureKind;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;
use unicode_width::UnicodeWidthStr;

pub fn run(common: &CommonArgs) -> anyhow::Result<Outcome> {
    let workspace = settings::workspace(common)?;
    let config = settings::load_config(common, &workspace)?;
    let resolved = config.resolve()?;
    let keys = settings::keys()?;
    // The instruction files a session here reads (the same search as the session's).
    // The canonical workspace, as a session's guard sees it.
    let found = keel_agent::instruction_paths(
        &workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.clone()),
        &keel_agent::ContextSettings {
            instruction_files: resolved.instruction_files.value.clone(),
            global_dir: Some(settings::keel_home()?),
            ..Default::default()
        },
    );
    let found: Vec<String> = found
        .iter()
        .map(|path| path.display().to_string())
        .collect();
    if common.json {
        let mut json = ConfigJson::new(&resolved, &keys);
        json.ignored = config.ignored().iter().map(IgnoredJson::new).collect();
        json.instructions_found = found;
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", human(&resolved, config.ignored(), &keys));
        match found.as_slice() {
            [] => println!(
                "\ninstructions: no instruction file here (the names above, in the workspace, \
                 its parents up to the repository root, or $KEEL_HOME)"
            ),
            found => {
                println!("\ninstructions (the head of each session's first message, in order):");
                for path in found {
                    println!("  {}", visible_line(path));
                }
            }
        }
    }
    Ok(Outcome::Completed)
}

fn secs(duration: Duration) -> u64 {
    duration.as_secs()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn kind_names(kinds: &[FailureKind]) -> Vec<&'static str> {
    kinds.iter().map(|kind| kind.as_str()).collect()
}

/// `name: $VAR (set)` for each account (`stored` when `keel auth login` holds it and the
/// variable is not set); never the key.
fn accounts_text(accounts: &[Account], keys: &HomeKeys) -> String {
    accounts
        .iter()
        .map(|account| {
            let state = match keys.origin(&account.api_key_env) {
                Some(KeyOrigin::Environment) => "set",
                Some(KeyOrigin::Stored) => "stored by keel auth login",
                None => "not set",
            };
            format!("{}: ${} ({state})", account.name, account.api_key_env)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

// ---- JSON ------------------------------------------------------------------------------------

/// A value and where it came from.
#[derive(Serialize)]
struct Field<T> {
    value: T,
    source: String,
}

fn field<T, U>(sourced: &Sourced<T>, value: impl FnOnce(&T) -> U) -> Field<U> {
    Field {
        value: value(&sourced.value),
        source: sourced.source.to_string(),
    }
}

/// `[agents]`: the limits on subagents.
#[derive(Serialize)]
struct AgentsJson {
    max_concurrent: Field<u32>,
    max_rounds: Field<u32>,
    /// 0: no limit.
    max_child_tokens: Field<u64>,
}

#[derive(Serialize)]
struct ConfigJson {
    /// The files read, highest precedence first.
    files: Vec<String>,
    model: Field<String>,
    permission_mode: Field<&'static str>,
    max_rounds: Field<u32>,
    compact_at: Field<f64>,
    instruction_files: Field<Vec<String>>,
    checkpoint_max_bytes: Field<u64>,
    ask_read_only_commands: Field<bool>,
    agents: AgentsJson,
    permissions: PermissionsJson,
    sandbox: SandboxJson,
    providers: BTreeMap<String, ProviderJson>,
    /// What the workspace's untrusted project files set and was not applied.
    ignored: Vec<IgnoredJson>,
    /// The instruction files a session in this workspace reads, in order.
    instructions_found: Vec<String>,
}

/// `[sandbox]` as resolved: the mode with its source, the lists as added up over the layers.
#[derive(Serialize)]
struct SandboxJson {
    mode: Field<&'static str>,
    forbid_read: Vec<String>,
    allow_write: Vec<String>,
    allow_network: bool,
}

/// A project value not applied because the workspace is not trusted.
#[derive(Serialize)]
struct IgnoredJson {
    key: String,
    /// As written in the file.
    value: String,
    /// `file:line`.
    source: String,
    /// Always `ignored (untrusted workspace)`.
    status: &'static str,
    why: String,
}

/// Why a project value is not applied, in a few words.
fn ignored_status(value: &IgnoredValue) -> &'static str {
    match value.why {
        keel_config::IgnoredBecause::UnknownKey { .. } => "ignored (keel does not know this key)",
        _ => "ignored (untrusted workspace)",
    }
}

impl IgnoredJson {
    fn new(value: &IgnoredValue) -> IgnoredJson {
        IgnoredJson {
            key: value.key.clone(),
            value: value.value.clone(),
            source: format!("{}:{}", value.file.display(), value.line),
            status: ignored_status(value),
            why: value.why.to_string(),
        }
    }
}

#[derive(Serialize)]
struct PermissionsJson {
    allow: Vec<Field<String>>,
    ask: Vec<Field<String>>,
    deny: Vec<Field<String>>,
}

#[derive(Serialize)]
struct ProviderJson {
    /// Whether this is the provider of `model`.
    active: bool,
    protocol: Field<&'static str>,
    base_url: Field<String>,
    accounts: Field<Vec<AccountJson>>,
    reasoning_protocol: Field<&'static str>,
    idle_timeout_secs: Field<u64>,
    connect_timeout_secs: Field<u64>,
    max_output_tokens: Field<u32>,
    max_event_bytes: Field<usize>,
    context_window: Field<Option<u64>>,
    web_search: Field<bool>,
    /// `reasoning_effort` as this provider sends it (`null`: nothing is sent).
    reasoning_effort: Field<Option<&'static str>>,
    retry: RetryJson,
}

#[derive(Serialize)]
struct AccountJson {
    name: String,
    api_key_env: String,
    /// Whether there is a key for it (never the key).
    set: bool,
    /// Where it comes from: `environment` or `stored` (`keel auth login`); absent when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'static str>,
}

#[derive(Serialize)]
struct RetryJson {
    /// The effective policy as one line: `[mode, max_retries, retry_on, base_delay_ms,
    /// max_delay_ms, jitter]`.
    policy_key: String,
    /// Failures never retried whatever `retry_on` says: `kind/sub_reason`.
    never_retried: Vec<String>,
    mode: Field<&'static str>,
    max_retries: Field<u32>,
    retry_on: Field<Vec<&'static str>>,
    base_delay_ms: Field<u64>,
    max_delay_ms: Field<u64>,
    jitter: Field<f64>,
    retry_after_cap_ms: Field<u64>,
    rotate_on: Field<Vec<&'static str>>,
}

impl ConfigJson {
    fn new(resolved: &ResolvedConfig, keys: &HomeKeys) -> ConfigJson {
        let rules = |list: RuleList| {
            resolved
                .rules
                .iter()
                .filter(|rule| rule.list == list)
                .map(|rule| Field {
                    value: rule.text.clone(),
                    source: rule.source.to_string(),
                })
                .collect()
        };
        ConfigJson {
            files: resolved
                .files
                .iter()
                .map(|file| file.display().to_string())
                .collect(),
            model: field(&resolved.model, ToString::to_string),
            permission_mode: field(&resolved.permission_mode, |mode| mode.as_str()),
            max_rounds: field(&resolved.max_rounds, |rounds| *rounds),
            compact_at: field(&resolved.compact_at, |share| *share),
            instruction_files: field(&resolved.instruction_files, Clone::clone),
            checkpoint_max_bytes: field(&resolved.checkpoint_max_bytes, |bytes| *bytes),
            ask_read_only_commands: field(&resolved.ask_read_only_commands, |ask| *ask),
            agents: AgentsJson {
                max_concurrent: field(&resolved.agents.max_concurrent, |n| *n),
                max_rounds: field(&resolved.agents.max_rounds, |n| *n),
                max_child_tokens: field(&resolved.agents.max_child_tokens, |n| *n),
            },
            permissions: PermissionsJson {
                allow: rules(RuleList::Allow),
                ask: rules(RuleList::Ask),
                deny: rules(RuleList::Deny),
            },
            sandbox: SandboxJson {
                mode: field(&resolved.sandbox.mode, |mode| mode.name()),
                forbid_read: resolved.sandbox.settings.forbid_read.clone(),
                // The user's entries and a trusted project's (opened only inside its workspace).
                allow_write: resolved
                    .sandbox
                    .settings
                    .allow_write
                    .iter()
                    .chain(&resolved.sandbox.settings.project_allow_write)
                    .cloned()
                    .collect(),
                allow_network: resolved.sandbox.settings.allow_network,
            },
            providers: resolved
                .providers
                .iter()
                .map(|provider| {
                    (
                        provider.name.clone(),
                        ProviderJson::new(provider, active_model(resolved, provider), keys),
                    )
                })
                .collect(),
            ignored: Vec::new(),
            instructions_found: Vec::new(),
        }
    }
}

impl ProviderJson {
    fn new(
        provider: &ResolvedProvider,
        active_model: Option<&str>,
        keys: &HomeKeys,
    ) -> ProviderJson {
        ProviderJson {
            active: active_model.is_some(),
            protocol: field(&provider.protocol, |protocol| protocol.as_str()),
            base_url: field(&provider.base_url, Clone::clone),
            accounts: field(&provider.accounts, |accounts| {
                accounts
                    .iter()
                    .map(|account| AccountJson {
                        name: account.name.clone(),
                        api_key_env: account.api_key_env.clone(),
                        set: keys.origin(&account.api_key_env).is_some(),
                        source: keys
                            .origin(&account.api_key_env)
                            .map(|origin| match origin {
                                KeyOrigin::Environment => "environment",
                                KeyOrigin::Stored => "stored",
                            }),
                    })
                    .collect()
            }),
            reasoning_protocol: field(&provider.reasoning_protocol, |protocol| protocol.as_str()),
            idle_timeout_secs: field(&provider.idle_timeout, |d| secs(*d)),
            connect_timeout_secs: field(&provider.connect_timeout, |d| secs(*d)),
            max_output_tokens: field(&provider.max_output_tokens, |tokens| *tokens),
            max_event_bytes: field(&provider.max_event_bytes, |bytes| *bytes),
            context_window: field(&context_window(provider, active_model), |window| *window),
            web_search: field(&provider.web_search, |on| *on),
            reasoning_effort: field(&provider.reasoning_effort, |effort| {
                effort.map(|effort| effort.name())
            }),
            retry: RetryJson::new(&provider.retry),
        }
    }
}

impl RetryJson {
    fn new(retry: &ResolvedRetry) -> RetryJson {
        RetryJson {
            policy_key: retry.policy().policy_key(),
            never_retried: never_retried(),
            mode: field(&retry.mode, |mode| mode.as_str()),
            max_retries: field(&retry.max_retries, |n| *n),
            retry_on: field(&retry.retry_on, |kinds| kind_names(kinds)),
            base_delay_ms: field(&retry.base_delay, |d| millis(*d)),
            max_delay_ms: field(&retry.max_delay, |d| millis(*d)),
            jitter: field(&retry.jitter, |jitter| *jitter),
            retry_after_cap_ms: field(&retry.retry_after_cap, |d| millis(*d)),
            rotate_on: field(&retry.rotate_on, |kinds| kind_names(kinds)),
        }
    }
}

// ---- human text ------------------------------------------------------------------------------

/// One line of the human output: `key  value  source`.
struct Row {
    indent: usize,
    key: String,
    value: String,
    /// `None` for a line that stands alone (the retry policy key, a heading).
    source: Option<String>,
}

impl Row {
    fn new<T>(
        indent: usize,
        key: &str,
        sourced: &Sourced<T>,
        value: impl FnOnce(&T) -> String,
    ) -> Row {
        Row {
            indent,
            key: key.to_string(),
            value: value(&sourced.value),
            source: Some(sourced.source.to_string()),
        }
    }

    fn bare(indent: usize, key: &str, value: String) -> Row {
        Row {
            indent,
            key: key.to_string(),
            value,
            source: None,
        }
    }
}

fn human(resolved: &ResolvedConfig, ignored: &[IgnoredValue], keys: &HomeKeys) -> String {
    let mut sections = vec![general_rows(resolved)];
    if !ignored.is_empty() {
        let mut rows = vec![Row::bare(
            0,
            "untrusted workspace",
            "not applied (`keel trust` reviews and trusts it):".into(),
        )];
        rows.extend(ignored.iter().map(|value| Row {
            indent: 1,
            key: value.key.clone(),
            value: value.value.clone(),
            source: Some(format!(
                "{}: {}:{}",
                ignored_status(value),
                value.file.display(),
                value.line
            )),
        }));
        sections.push(rows);
    }
    for provider in &resolved.providers {
        sections.push(provider_rows(
            provider,
            active_model(resolved, provider),
            keys,
        ));
    }
    render(&sections)
}

fn general_rows(resolved: &ResolvedConfig) -> Vec<Row> {
    let mut rows = Vec::new();
    if resolved.files.is_empty() {
        rows.push(Row::bare(0, "files", "(none: built-in defaults)".into()));
    }
    for (index, file) in resolved.files.iter().enumerate() {
        let key = if index == 0 { "files" } else { "" };
        rows.push(Row::bare(0, key, file.display().to_string()));
    }
    rows.push(Row::new(0, "model", &resolved.model, ToString::to_string));
    rows.push(Row::new(
        0,
        "permission_mode",
        &resolved.permission_mode,
        |mode| mode.as_str().to_string(),
    ));
    rows.push(Row::new(
        0,
        "max_rounds",
        &resolved.max_rounds,
        ToString::to_string,
    ));
    rows.push(Row::new(
        0,
        "compact_at",
        &resolved.compact_at,
        ToString::to_string,
    ));
    rows.push(Row::new(
        0,
        "checkpoint_max_bytes",
        &resolved.checkpoint_max_bytes,
        ToString::to_string,
    ));
    rows.push(Row::new(
        0,
        "ask_read_only_commands",
        &resolved.ask_read_only_commands,
        ToString::to_string,
    ));
    rows.push(Row::new(
        0,
        "agents.max_concurrent",
        &resolved.agents.max_concurrent,
        ToString::to_string,
    ));
    rows.push(Row::new(
        0,
        "agents.max_rounds",
        &resolved.agents.max_rounds,
        ToString::to_string,
    ));
    rows.push(Row::new(
        0,
        "agents.max_child_tokens",
        &resolved.agents.max_child_tokens,
        |tokens| match tokens {
            0 => "no limit".to_string(),
            tokens => tokens.to_string(),
        },
    ));
    rows.push(Row::new(
        0,
        "instruction_files",
        &resolved.instruction_files,
        |names| format!("{names:?}"),
    ));
    rows.push(Row::new(
        0,
        "sandbox.mode",
        &resolved.sandbox.mode,
        |mode| mode.name().to_string(),
    ));
    let sandbox = &resolved.sandbox.settings;
    let allow_write: Vec<String> = sandbox
        .allow_write
        .iter()
        .chain(&sandbox.project_allow_write)
        .cloned()
        .collect();
    for (key, list) in [
        ("sandbox.forbid_read", &sandbox.forbid_read),
        ("sandbox.allow_write", &allow_write),
    ] {
        if !list.is_empty() {
            rows.push(Row::bare(0, key, list.join(", ")));
        }
    }
    if sandbox.allow_network {
        rows.push(Row::bare(0, "sandbox.allow_network", "true".into()));
    }
    if resolved.rules.is_empty() {
        rows.push(Row::bare(0, "permissions", "(no rules)".into()));
    }
    for rule in &resolved.rules {
        rows.push(Row {
            indent: 0,
            key: format!("permissions.{}", rule.list.as_str()),
            value: rule.text.clone(),
            source: Some(rule.source.to_string()),
        });
    }
    rows
}

/// The model id when `provider` is the active one.
fn active_model<'a>(resolved: &'a ResolvedConfig, provider: &ResolvedProvider) -> Option<&'a str> {
    let model = &resolved.model.value;
    (model.provider == provider.name).then_some(model.model.as_str())
}

/// The window keel works with: the configured one, else (for the active model) the table's.
fn context_window(provider: &ResolvedProvider, active_model: Option<&str>) -> Sourced<Option<u64>> {
    match active_model.and_then(keel_llm::context_window::known_window) {
        Some(known) if provider.context_window.value.is_none() => {
            Sourced::new(Some(known), Source::ModelTable)
        }
        Some(_) | None => provider.context_window.clone(),
    }
}

fn provider_rows(
    provider: &ResolvedProvider,
    active_model: Option<&str>,
    keys: &HomeKeys,
) -> Vec<Row> {
    let heading = format!(
        "[providers.{}]{}",
        provider.name,
        if active_model.is_some() {
            "  (active)"
        } else {
            ""
        }
    );
    let mut rows = vec![
        Row::bare(0, &heading, String::new()),
        Row::new(2, "protocol", &provider.protocol, ToString::to_string),
        Row::new(2, "base_url", &provider.base_url, Clone::clone),
        Row::new(2, "accounts", &provider.accounts, |accounts| {
            accounts_text(accounts, keys)
        }),
        Row::new(2, "reasoning_protocol", &provider.reasoning_protocol, |p| {
            p.as_str().to_string()
        }),
        Row::new(2, "idle_timeout_secs", &provider.idle_timeout, |d| {
            secs(*d).to_string()
        }),
        Row::new(2, "connect_timeout_secs", &provider.connect_timeout, |d| {
            secs(*d).to_string()
        }),
        Row::new(
            2,
            "max_output_tokens",
            &provider.max_output_tokens,
            ToString::to_string,
        ),
        Row::new(
            2,
            "max_event_bytes",
            &provider.max_event_bytes,
            ToString::to_string,
        ),
        Row::new(
            2,
            "context_window",
            &context_window(provider, active_model),
            |window| window.map_or_else(|| "unknown".to_string(), |tokens| tokens.to_string()),
        ),
        Row::new(2, "web_search", &provider.web_search, ToString::to_string),
        Row::new(
            2,
            "reasoning_effort",
            &provider.reasoning_effort,
            |effort| effort.map_or_else(|| "provider default".to_string(), |e| e.to_string()),
        ),
        Row::bare(
            2,
            "retry",
            format!(
                "{} · never retried: a connection a loopback address refused, an event over \
                 max_event_bytes",
                provider.retry.policy().policy_key()
            ),
        ),
    ];
    if let Some(region) = provider.region.value {
        rows.push(Row::new(2, "region", &provider.region, move |_| {
            region.as_str().to_string()
        }));
    }
    if let Some(model) = active_model {
        rows.push(Row::bare(2, "price", price_text(provider, model)));
    }
    rows.extend(retry_rows(&provider.retry));
    rows
}

/// Where the active model's price comes from, or why there is none (never a guess).
fn price_text(provider: &ResolvedProvider, model: &str) -> String {
    let profile = provider.profile();
    match keel_llm::price::price_for(&profile, model) {
        Some(price) if price.source == "user config" => {
            format!("[providers.{}.price], in {}", provider.name, price.currency)
        }
        Some(price) => format!(
            "{} (read {}), in {}{}",
            price.source,
            price.checked,
            price.currency,
            if price.tiers.is_empty() {
                ""
            } else {
                "; longer requests at their context tier's rates"
            }
        ),
        None if keel_llm::price::known_models(&profile.base_url).contains(&model) => {
            match provider.region.value {
                None => "none: set region = \"domestic\" or \"overseas\" (which official list \
                         applies)"
                    .to_string(),
                Some(region) => format!(
                    "none: keel's table has no {} list for it (set [providers.{}.price])",
                    region.as_str(),
                    provider.name
                ),
            }
        }
        None => "none known: tokens only (set [providers.NAME.price] to see amounts)".to_string(),
    }
}

/// The retry fields that did not come from the default.
fn retry_rows(retry: &ResolvedRetry) -> Vec<Row> {
    let kinds = |kinds: &Vec<FailureKind>| kind_names(kinds).join(", ");
    let ms = |delay: &Duration| millis(*delay).to_string();
    let mut rows = Vec::new();
    let mut push = |is_default: bool, row: Row| {
        if !is_default {
            rows.push(row);
        }
    };
    push(
        retry.mode.is_default(),
        Row::new(4, "mode", &retry.mode, |mode| mode.as_str().to_string()),
    );
    push(
        retry.max_retries.is_default(),
        Row::new(4, "max_retries", &retry.max_retries, ToString::to_string),
    );
    push(
        retry.retry_on.is_default(),
        Row::new(4, "retry_on", &retry.retry_on, kinds),
    );
    push(
        retry.base_delay.is_default(),
        Row::new(4, "base_delay_ms", &retry.base_delay, ms),
    );
    push(
        retry.max_delay.is_default(),
        Row::new(4, "max_delay_ms", &retry.max_delay, ms),
    );
    push(
        retry.jitter.is_default(),
        Row::new(4, "jitter", &retry.jitter, ToString::to_string),
    );
    push(
        retry.retry_after_cap.is_default(),
        Row::new(4, "retry_after_cap_ms", &retry.retry_after_cap, ms),
    );
    push(
        retry.rotate_on.is_default(),
        Row::new(4, "rotate_on", &retry.rotate_on, kinds),
    );
    rows
}

/// Values wider than this do not widen the value column (their source follows them).
const VALUE_COLUMN_MAX: usize = 40;

/// Sections separated by a blank line; keys, values and sources each in one column.
fn render(sections: &[Vec<Row>]) -> String {
    let rows = || sections.iter().flatten();
    let key_width = rows()
        .filter(|row| !row.value.is_empty())
        .map(|row| row.indent + visible_line(&row.key).width())
        .max()
        .unwrap_or(0);
    let value_width = rows()
        .filter(|row| row.source.is_some())
        .map(|row| visible_line(&row.value).width())
        .filter(|width| *width <= VALUE_COLUMN_MAX)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (index, section) in sections.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        for row in section {
            let key = visible_line(&row.key);
            let value = visible_line(&row.value);
            let mut line = format!("{}{key}", " ".repeat(row.indent));
            if !row.value.is_empty() {
                let pad = key_width.saturating_sub(row.indent + key.width());
                line.push_str(&" ".repeat(pad + 2));
                line.push_str(&value);
            }
            if let Some(source) = &row.source {
                let pad = value_width.saturating_sub(value.width());
                line.push_str(&" ".repeat(pad + 2));
                line.push_str(&visible_line(source));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out
}

/// The failures no policy retries, as `kind/sub_reason`.
fn never_retried() -> Vec<String> {
    keel_types::SubReason::NEVER_RETRIED
        .iter()
        .map(|(kind, sub)| format!("{}/{}", kind.as_str(), sub.as_str()))
        .collect()
}
