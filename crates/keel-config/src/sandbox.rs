//! `[sandbox]`: what each layer may set (docs/sandbox.md#what-a-repository-may-set).
//!
//! | key | user layers | trusted project | untrusted project |
//! |---|---|---|---|
//! | `mode` | any | stricter than the user's only, never `off` | ignored |
//! | `forbid_read` | added to the built-in list | added | ignored |
//! | `allow_write` | added | entries inside its workspace only, judged by where their links lead (`project_allow_write`) | ignored |
//! | `allow_network` | any | any | ignored |
//! | `mcp_servers.X.sandbox` | any | not `off` | (the server is ignored) |
//!
//! Invariants:
//! - `--sandbox MODE` (a flag: the user's) wins over every file.
//! - Lists add up over the layers; single values take the highest-precedence layer's.
//! - What a trusted project may not set is reported like an untrusted project's values
//!   (`IgnoredValue`), never dropped silently; an untrusted project's `[sandbox]` is taken
//!   apart in `trust::restrict` and never reaches here.

use crate::ignored::{IgnoredBecause, IgnoredValue, VALUE_SHOWN_CHARS};
use crate::layer::{Layer, LayerKind, RawSandbox};
use crate::source::{Source, Sourced};
use keel_sandbox::{SandboxMode, SandboxSettings, ServerConfinement};
use std::path::{Component, Path};
use toml::Spanned;

/// The resolved `[sandbox]`, with where the mode came from.
#[derive(Clone, Debug)]
pub struct ResolvedSandbox {
    pub settings: SandboxSettings,
    pub mode: Sourced<SandboxMode>,
}

/// The mode the user's own layers give (the default when none sets it).
pub(crate) fn user_mode(layers: &[Layer]) -> SandboxMode {
    layers
        .iter()
        .filter(|layer| layer.kind == LayerKind::User)
        .find_map(|layer| layer.raw.sandbox.mode.as_ref().map(|mode| *mode.get_ref()))
        .unwrap_or_default()
}

pub(crate) fn refused<T>(
    layer: &Layer,
    key: &str,
    value: &Spanned<T>,
    why: &'static str,
) -> IgnoredValue {
    crate::ignored::not_applied(layer, key, value, IgnoredBecause::NeverFromProject(why))
}

/// Whether `entry` (relative to `workspace`, or absolute) stays inside `workspace`, judged on
/// the words alone: no `..` may climb out, `~` is never inside.
fn inside(workspace: &Path, entry: &str) -> bool {
    if entry.starts_with('~') {
        return false;
    }
    let path = Path::new(entry);
    let relative = match path.strip_prefix(workspace) {
        Ok(rest) => rest.to_path_buf(),
        Err(_) if path.is_absolute() => return false,
        Err(_) => path.to_path_buf(),
    };
    let mut depth = 0i32;
    for component in relative.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => depth -= 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}

/// Why a project's `ask_read_only_commands = false` is not applied.
pub(crate) const ONLY_ASK_MORE: &str =
    "a project file may only set it to true (ask about read-only commands too)";

/// Take from a trusted project layer what no project may set; the reports.
pub(crate) fn limit_trusted_project(layer: &mut Layer, user: SandboxMode) -> Vec<IgnoredValue> {
    let mut ignored = Vec::new();
    let workspace = layer
        .path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    if let Some(ask) = layer
        .raw
        .ask_read_only_commands
        .take_if(|ask| !*ask.get_ref())
    {
        ignored.push(refused(
            layer,
            "ask_read_only_commands",
            &ask,
            ONLY_ASK_MORE,
        ));
    }
    // Which files instruct the model is the user's choice, like the sandbox.
    if let Some(names) = layer.raw.instruction_files.take() {
        ignored.push(refused(
            layer,
            "instruction_files",
            &names,
            "which files instruct the model is set in your own config only",
        ));
    }
    let RawSandbox {
        mode,
        forbid_read,
        allow_write,
        allow_network,
    } = std::mem::take(&mut layer.raw.sandbox);
    let mode = mode.and_then(|mode| {
        let value = *mode.get_ref();
        if value == SandboxMode::Off {
            ignored.push(refused(
                layer,
                "sandbox.mode",
                &mode,
                "no project file may turn the sandbox off",
            ));
            None
        } else if value.looseness() > user.looseness() {
            ignored.push(refused(
                layer,
                "sandbox.mode",
                &mode,
                "a project file may only make the sandbox stricter than yours",
            ));
            None
        } else {
            Some(mode)
        }
    });
    let allow_write = allow_write.map(|list| {
        let span = list.span();
        let kept: Vec<String> = list
            .get_ref()
            .iter()
            .filter(|entry| inside(&workspace, entry))
            .cloned()
            .collect();
        if kept.len() < list.get_ref().len() {
            ignored.push(refused(
                layer,
                "sandbox.allow_write",
                &list,
                "a project file may only let commands write inside its workspace",
            ));
        }
        // The words are inside; where a link on the way leads is what counts (the sandbox
        // checks it again when the session starts, and refuses it there too).
        let mut absolute = Vec::new();
        for entry in kept {
            let path = workspace.join(&entry);
            match keel_sandbox::project_write_target(&path, &workspace) {
                keel_sandbox::ProjectWrite::Outside(target) => ignored.push(IgnoredValue {
                    file: layer.path.clone(),
                    line: layer.line(&span),
                    key: "sandbox.allow_write".to_string(),
                    value: format!("{entry} → {}", target.display())
                        .chars()
                        .take(VALUE_SHOWN_CHARS)
                        .collect(),
                    why: IgnoredBecause::NeverFromProject(
                        "it leads outside the workspace (through a link): a project file may \
                         only let commands write inside its workspace",
                    ),
                }),
                keel_sandbox::ProjectWrite::Inside(_) | keel_sandbox::ProjectWrite::Missing => {
                    absolute.push(path.display().to_string());
                }
            }
        }
        Spanned::new(span, absolute)
    });
    layer.raw.sandbox = RawSandbox {
        mode,
        forbid_read,
        allow_write,
        allow_network,
    };
    // A trusted project's MCP servers start, confined: never unconfined on its say.
    let mut unconfined = Vec::new();
    for (name, server) in &mut layer.raw.mcp_servers {
        let span = server.span();
        if server.get_ref().sandbox == Some(ServerConfinement::Off) {
            unconfined.push((name.clone(), span));
            let mut kept = server.get_ref().clone();
            kept.sandbox = None;
            *server = Spanned::new(server.span(), kept);
        }
    }
    for (name, span) in unconfined {
        ignored.push(refused(
            layer,
            &format!("mcp_servers.{name}.sandbox"),
            &Spanned::new(span, ()),
            "no project file may run an MCP server outside the sandbox",
        ));
    }
    ignored
}

/// Where the `allow_write` entries of the project file in `workspace` lead, for those whose
/// real path is not the path written (a link on the way): ` (cache → /home/u: outside the
/// workspace, refused even when trusted)`. Empty when every entry is what it says.
pub(crate) fn where_writes_lead(workspace: &Path, entries: &[String]) -> String {
    let mut said = Vec::new();
    for entry in entries {
        if entry.starts_with('~') {
            continue;
        }
        let path = workspace.join(entry);
        let written = std::path::absolute(&path).unwrap_or(path.clone());
        match keel_sandbox::project_write_target(&path, workspace) {
            keel_sandbox::ProjectWrite::Outside(target) => said.push(format!(
                "{entry} → {}: outside the workspace, refused even when trusted",
                target.display()
            )),
            keel_sandbox::ProjectWrite::Inside(target) if target != written => {
                said.push(format!("{entry} → {}", target.display()));
            }
            keel_sandbox::ProjectWrite::Inside(_) | keel_sandbox::ProjectWrite::Missing => {}
        }
    }
    if said.is_empty() {
        String::new()
    } else {
        format!(" ({})", said.join("; "))
    }
}

/// `[sandbox]` over `layers` (highest precedence first), with the `--sandbox` flag.
pub(crate) fn resolve(layers: &[Layer], flag: Option<SandboxMode>) -> ResolvedSandbox {
    let mode = match flag {
        Some(mode) => Sourced::new(mode, Source::Flag("--sandbox")),
        None => layers
            .iter()
            .find_map(|layer| layer.raw.sandbox.mode.as_ref().map(|v| layer.sourced(v)))
            .unwrap_or(Sourced::default_value(SandboxMode::default())),
    };
    let lists = |pick: fn(&RawSandbox) -> Option<&Spanned<Vec<String>>>,
                 kinds: &[LayerKind]|
     -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        for layer in layers.iter().filter(|layer| kinds.contains(&layer.kind)) {
            for entry in pick(&layer.raw.sandbox)
                .map(Spanned::get_ref)
                .into_iter()
                .flatten()
            {
                if !all.contains(entry) {
                    all.push(entry.clone());
                }
            }
        }
        all
    };
    let allow_network = layers
        .iter()
        .find_map(|layer| {
            layer
                .raw
                .sandbox
                .allow_network
                .as_ref()
                .map(|v| *v.get_ref())
        })
        .unwrap_or(false);
    ResolvedSandbox {
        settings: SandboxSettings {
            mode: mode.value,
            forbid_read: lists(
                |raw| raw.forbid_read.as_ref(),
                &[LayerKind::User, LayerKind::Project],
            ),
            // Each keeps where it came from: a project's entries are opened only inside its
            // workspace's real path (`keel_sandbox::project_write_target`).
            allow_write: lists(|raw| raw.allow_write.as_ref(), &[LayerKind::User]),
            project_allow_write: lists(|raw| raw.allow_write.as_ref(), &[LayerKind::Project]),
            allow_network,
        },
        mode,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn inside_is_judged_on_the_words() {
        let workspace = PathBuf::from("/w");
        assert!(inside(&workspace, "target"));
        assert!(inside(&workspace, "./a/../b"));
        assert!(inside(&workspace, "/w/cache"));
        assert!(!inside(&workspace, "../x"));
        assert!(!inside(&workspace, "a/../../x"));
        assert!(!inside(&workspace, "/etc"));
        assert!(!inside(&workspace, "~/.cargo"));
        assert!(!inside(&workspace, "/wx"));
    }
}
