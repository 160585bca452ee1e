//! What the config files say about hooks, read from their raw tables and texts: what a trusted
//! project may not set, what an untrusted workspace's Claude Code settings asked for, and the
//! commands a project's hooks run (for trust). Nothing here resolves a hook (`hooks.rs` does).
//!
//! Invariant: every value a project may not have is taken out and reported, never dropped
//! silently.

use crate::ignored::{IgnoredBecause, IgnoredValue, VALUE_SHOWN_CHARS};
use crate::layer::Layer;
use std::path::Path;

/// The 1-based line where `"name"` is first written in `text` (1 when it is not found).
pub(crate) fn line_of(text: &str, name: &str) -> usize {
    text.find(&format!("\"{name}\""))
        .map_or(1, |at| text[..at].matches('\n').count() + 1)
}

/// What an untrusted workspace's `.claude/settings.json` asked for: each event's hooks, not run.
pub(crate) fn ignored_claude_hooks(path: &Path, text: &str) -> Vec<IgnoredValue> {
    let Ok(settings) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let Some(events) = settings.get("hooks").and_then(serde_json::Value::as_object) else {
        return Vec::new();
    };
    events
        .iter()
        .map(|(name, groups)| IgnoredValue {
            file: path.to_path_buf(),
            line: line_of(text, name),
            key: format!("hooks.{name}"),
            value: groups.to_string().chars().take(VALUE_SHOWN_CHARS).collect(),
            why: IgnoredBecause::Closed,
        })
        .collect()
}

/// What a trusted project may not set about hooks: `hooks_from_claude` (whether another
/// agent's settings run commands is the user's choice) and a hook's `sandbox` (only the user's
/// own hooks may run unconfined). Each is taken out and reported.
pub(crate) fn limit_trusted_project(layer: &mut Layer) -> Vec<IgnoredValue> {
    let mut ignored = Vec::new();
    if let Some(value) = layer.raw.hooks_from_claude.take() {
        ignored.push(crate::sandbox::refused(
            layer,
            "hooks_from_claude",
            &value,
            "whether Claude Code's settings run hooks is set in your own config only",
        ));
    }
    let mut unconfined = Vec::new();
    for (name, groups) in &mut layer.raw.hooks {
        let span = groups.span();
        let mut asked = false;
        for group in groups.get_mut() {
            for command in &mut group.hooks {
                asked |= command.sandbox.take().is_some();
            }
        }
        if asked {
            unconfined.push((name.clone(), span));
        }
    }
    for (name, span) in unconfined {
        ignored.push(IgnoredValue {
            file: layer.path.clone(),
            line: layer.line(&span),
            key: format!("hooks.{name}.hooks.sandbox"),
            value: "off".into(),
            why: IgnoredBecause::NeverFromProject(
                "a project's hooks run under the session's sandbox",
            ),
        });
    }
    ignored
}

/// The commands of a project's hooks (its `keel.toml` text and its Claude Code settings),
/// for finding the script files trust covers.
pub(crate) fn project_hook_commands(keel_toml: Option<&str>, claude: Option<&str>) -> Vec<String> {
    let mut commands = Vec::new();
    if let Some(table) = keel_toml.and_then(|text| text.parse::<toml::Table>().ok())
        && let Some(events) = table.get("hooks").and_then(toml::Value::as_table)
    {
        for groups in events.values().filter_map(toml::Value::as_array) {
            for group in groups {
                let hooks = group.get("hooks").and_then(toml::Value::as_array);
                for hook in hooks.into_iter().flatten() {
                    if let Some(command) = hook.get("command").and_then(toml::Value::as_str) {
                        commands.push(command.to_string());
                    }
                }
            }
        }
    }
    if let Some(settings) =
        claude.and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        && let Some(events) = settings.get("hooks").and_then(serde_json::Value::as_object)
    {
        for group in events
            .values()
            .filter_map(serde_json::Value::as_array)
            .flatten()
        {
            let hooks = group.get("hooks").and_then(serde_json::Value::as_array);
            for hook in hooks.into_iter().flatten() {
                if let Some(command) = hook.get("command").and_then(serde_json::Value::as_str) {
                    commands.push(command.to_string());
                }
            }
        }
    }
    commands
}

/// Whether a project's `keel.toml` text declares hooks.
pub(crate) fn has_hooks_table(keel_toml: &str) -> bool {
    keel_toml
        .parse::<toml::Table>()
        .ok()
        .and_then(|table| table.get("hooks").cloned())
        .and_then(|hooks| hooks.as_table().map(|events| !events.is_empty()))
        .unwrap_or(false)
}

/// Whether a Claude Code settings text declares hooks.
pub(crate) fn claude_settings_have_hooks(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|settings| {
            settings
                .get("hooks")
                .and_then(serde_json::Value::as_object)
                .map(|events| !events.is_empty())
        })
        .unwrap_or(false)
}
