//! Hooks: `[[hooks.EVENT]]` tables of the config files and, with `hooks_from_claude`, the
//! `hooks` of Claude Code's settings files (docs/hooks.md).
//!
//! Invariants:
//! - Hooks add up across layers: the user's own first (keel's file, then Claude Code's user
//!   settings), then a trusted project's (its `keel.toml`, then its `.claude/settings.json`). A
//!   project can add hooks, never remove or change the user's.
//! - An untrusted project's hooks never reach here: `trust::restrict` drops each event's table
//!   and reports it, and its `.claude/settings.json` is reported by `ignored_claude_hooks`.
//! - `hooks_from_claude` and a hook's `sandbox = "off"` count only from the user's own file; a
//!   trusted project's are dropped and reported (`limit_trusted_project`).
//! - In the user's own file a mistake (an unknown event, a matcher that is not a regex, a bad
//!   value) is an error naming the file and line; in a project's file, or in a Claude Code
//!   settings file, it is a notice and that hook is left out — a repository cannot stop keel.

use crate::config::KeelConfig;
use crate::error::ConfigError;
use crate::hook_tables::line_of;
use crate::ignored::VALUE_SHOWN_CHARS;
use crate::layer::{Layer, LayerKind, RawHookCommand};
use crate::trust::WorkspaceTrust;
use crate::workspace_files::WorkspaceFile;
use keel_types::hooks::{
    ConfiguredHook, DEFAULT_HOOK_TIMEOUT_SECS, HookEvent, HookLayer, HookOnError,
    MAX_HOOK_TIMEOUT_SECS,
};
use std::path::Path;

/// The hooks in force and what was left out, said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedHooks {
    pub hooks: Vec<ConfiguredHook>,
    /// Each hook or file left out, and why (`/hooks` and the session's start show them).
    pub notices: Vec<String>,
}

/// Where Claude Code keeps a user's settings, under the home directory.
pub const CLAUDE_USER_SETTINGS: &str = ".claude/settings.json";

impl KeelConfig {
    /// Whether the user's file at `home_file` turns on `hooks_from_claude` (read before the
    /// workspace's files, which then include Claude Code's settings); any failure reads as
    /// off (loading the file for real says what is wrong).
    pub fn user_reads_claude_hooks(home_file: &Path) -> bool {
        std::fs::read_to_string(home_file)
            .ok()
            .and_then(|text| text.parse::<toml::Table>().ok())
            .and_then(|table| {
                table
                    .get("hooks_from_claude")
                    .and_then(toml::Value::as_bool)
            })
            .unwrap_or(false)
    }

    /// Whether the user's own layers turn on `hooks_from_claude`.
    pub fn hooks_from_claude(&self) -> bool {
        self.layers
            .iter()
            .filter(|layer| layer.kind == LayerKind::User)
            .find_map(|layer| layer.raw.hooks_from_claude.as_ref())
            .is_some_and(|on| *on.get_ref())
    }

    /// Every hook in force: the user's, then a trusted project's; with `hooks_from_claude`,
    /// Claude Code's settings files too (`home` is the user's home directory, for
    /// `~/.claude/settings.json`).
    pub fn hooks(&self, home: Option<&Path>) -> Result<ResolvedHooks, ConfigError> {
        let mut resolved = ResolvedHooks::default();
        let from_claude = self.hooks_from_claude();
        for kind in [LayerKind::User, LayerKind::Project] {
            for layer in self.layers.iter().filter(|layer| layer.kind == kind) {
                keel_hooks(layer, &mut resolved)?;
            }
            if !from_claude {
                continue;
            }
            match kind {
                LayerKind::User => {
                    let Some(home) = home else { continue };
                    let path = home.join(CLAUDE_USER_SETTINGS);
                    match crate::workspace_files::read_bounded(&path) {
                        Ok(Some(file)) => {
                            claude_hooks(&file, HookLayer::User, &mut resolved);
                        }
                        Ok(None) => {}
                        Err(error) => resolved.notices.push(format!(
                            "{}: its hooks were not read: {error}",
                            path.display()
                        )),
                    }
                }
                LayerKind::Project => {
                    if self.trust == WorkspaceTrust::Trusted
                        && let Some(file) = &self.project.claude_settings
                    {
                        claude_hooks(file, HookLayer::Project, &mut resolved);
                    }
                }
            }
        }
        Ok(resolved)
    }
}

/// A matcher as compiled: anchored, case-sensitive; `None` for "everything".
pub fn matcher_regex(matcher: Option<&str>) -> Result<Option<regex::Regex>, String> {
    match matcher.map(str::trim) {
        None | Some("" | "*") => Ok(None),
        Some(pattern) => regex::Regex::new(&format!("^(?:{pattern})$"))
            .map(Some)
            .map_err(|error| format!("`matcher` is not a regular expression: {error}")),
    }
}

fn keel_hooks(layer: &Layer, resolved: &mut ResolvedHooks) -> Result<(), ConfigError> {
    let user = layer.kind == LayerKind::User;
    let hook_layer = if user {
        HookLayer::User
    } else {
        HookLayer::Project
    };
    for (name, groups) in &layer.raw.hooks {
        let line = layer.line(&groups.span());
        let origin = format!("{}:{line}", layer.path.display());
        let Some(event) = HookEvent::parse(name) else {
            let known: Vec<&str> = HookEvent::ALL.iter().map(|event| event.name()).collect();
            let message = match keel_types::names::closest(name, known.iter().copied()) {
                Some(close) => format!(
                    "keel runs no hooks on `{}`; did you mean `{close}`?",
                    shown(name)
                ),
                None => format!(
                    "keel runs no hooks on `{}`; the events are {}",
                    shown(name),
                    known.join(", ")
                ),
            };
            if user {
                return Err(layer.error_for_key(groups.span(), format!("hooks.{name}"), message));
            }
            resolved
                .notices
                .push(format!("{origin}: {message}; left out"));
            continue;
        };
        for group in groups.get_ref() {
            if let Err(message) = matcher_regex(group.matcher.as_deref()) {
                if user {
                    return Err(layer.error_for_key(
                        groups.span(),
                        format!("hooks.{name}.matcher"),
                        message,
                    ));
                }
                resolved
                    .notices
                    .push(format!("{origin}: {message}; left out"));
                continue;
            }
            for command in &group.hooks {
                match keel_hook(command, user) {
                    Ok(Some((command, timeout_secs, on_error, unconfined))) => {
                        resolved.hooks.push(ConfiguredHook {
                            event,
                            matcher: group.matcher.clone(),
                            command,
                            timeout_secs,
                            on_error,
                            unconfined,
                            layer: hook_layer,
                            claude: false,
                            origin: origin.clone(),
                        });
                    }
                    Ok(None) => resolved.notices.push(format!(
                        "{origin}: a `{name}` hook of type `{}` is not run: keel runs hooks \
                         of type `command` only",
                        command.kind.as_deref().unwrap_or_default()
                    )),
                    Err(message) if user => {
                        return Err(layer.error_for_key(
                            groups.span(),
                            format!("hooks.{name}.hooks"),
                            message,
                        ));
                    }
                    Err(message) => resolved
                        .notices
                        .push(format!("{origin}: {message}; left out")),
                }
            }
        }
    }
    Ok(())
}

type HookParts = (String, u64, Option<HookOnError>, bool);

/// One `[[hooks.EVENT.hooks]]` table: `None` for a type keel does not run.
fn keel_hook(raw: &RawHookCommand, user: bool) -> Result<Option<HookParts>, String> {
    if raw.kind.as_deref().is_some_and(|kind| kind != "command") {
        return Ok(None);
    }
    let command = raw
        .command
        .as_deref()
        .map(str::trim)
        .filter(|command| !command.is_empty())
        .ok_or("a hook needs a `command`")?
        .to_string();
    let timeout_secs = timeout(raw.timeout)?;
    let on_error = match raw.on_error.as_deref() {
        None => None,
        Some("deny") => Some(HookOnError::Deny),
        Some("allow") => Some(HookOnError::Allow),
        Some(other) => {
            return Err(format!(
                "`on_error` is `deny` or `allow`, not `{}`",
                shown(other)
            ));
        }
    };
    let unconfined = match raw.sandbox.as_deref() {
        None => false,
        Some("off") => user,
        Some(other) => {
            return Err(format!(
                "a hook's `sandbox` can only be `off` (it runs under the session's sandbox \
                 otherwise), not `{}`",
                shown(other)
            ));
        }
    };
    Ok(Some((command, timeout_secs, on_error, unconfined)))
}

fn timeout(seconds: Option<u64>) -> Result<u64, String> {
    match seconds {
        None => Ok(DEFAULT_HOOK_TIMEOUT_SECS),
        Some(seconds) if (1..=MAX_HOOK_TIMEOUT_SECS).contains(&seconds) => Ok(seconds),
        Some(seconds) => Err(format!(
            "`timeout` is seconds from 1 to {MAX_HOOK_TIMEOUT_SECS}, not {seconds}"
        )),
    }
}

fn shown(value: &str) -> String {
    value.escape_debug().take(VALUE_SHOWN_CHARS).collect()
}

/// The hooks of a Claude Code settings file (`{"hooks": {"EVENT": [{"matcher", "hooks":
/// [{"type", "command", "timeout"}]}]}}`); what keel does not run is a notice.
fn claude_hooks(file: &WorkspaceFile, layer: HookLayer, resolved: &mut ResolvedHooks) {
    let place = file.path.display().to_string();
    let settings: serde_json::Value = match serde_json::from_str(&file.text) {
        Ok(settings) => settings,
        Err(error) => {
            resolved.notices.push(format!(
                "{place}:{}: not JSON ({}); its hooks were not read",
                error.line(),
                keel_types::parse_error::without_values(&error.to_string())
            ));
            return;
        }
    };
    let Some(events) = settings.get("hooks").and_then(serde_json::Value::as_object) else {
        return;
    };
    for (name, groups) in events {
        let origin = format!("{place}:{}", line_of(&file.text, name));
        let Some(event) = HookEvent::parse(name) else {
            resolved.notices.push(format!(
                "{origin}: keel runs no `{}` hooks; left out",
                shown(name)
            ));
            continue;
        };
        for group in groups.as_array().into_iter().flatten() {
            let matcher = group
                .get("matcher")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string);
            if let Err(message) = matcher_regex(matcher.as_deref()) {
                resolved
                    .notices
                    .push(format!("{origin}: {message}; left out"));
                continue;
            }
            for hook in group
                .get("hooks")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
            {
                let kind = hook.get("type").and_then(serde_json::Value::as_str);
                let command = hook.get("command").and_then(serde_json::Value::as_str);
                match (kind, command.map(str::trim)) {
                    (Some("command") | None, Some(command)) if !command.is_empty() => {
                        let seconds = hook.get("timeout").and_then(serde_json::Value::as_u64);
                        match timeout(seconds) {
                            Ok(timeout_secs) => resolved.hooks.push(ConfiguredHook {
                                event,
                                matcher: matcher.clone(),
                                command: command.to_string(),
                                timeout_secs,
                                on_error: None,
                                unconfined: false,
                                layer,
                                claude: true,
                                origin: origin.clone(),
                            }),
                            Err(message) => resolved
                                .notices
                                .push(format!("{origin}: {message}; left out")),
                        }
                    }
                    (Some(kind), _) if kind != "command" => resolved.notices.push(format!(
                        "{origin}: a `{name}` hook of type `{}` is not run: keel runs hooks of \
                         type `command` only",
                        shown(kind)
                    )),
                    _ => resolved.notices.push(format!(
                        "{origin}: a `{name}` hook without a `command`; left out"
                    )),
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
