//! Claude Code's names for keel's tools and their arguments, both ways: for `.claude/agents`
//! tool lists and for hooks from Claude Code's settings (docs/hooks.md#claude-code-hooks).
//!
//! Invariants:
//! - One table: a keel tool is shown to a Claude Code hook under its first Claude name, and
//!   every Claude name in the table reads back as its keel tool.
//! - Arguments are renamed key by key (`path` ↔ `file_path`, …); a key neither side renames
//!   passes as it is, so nothing a hook sends is dropped. A file path goes out absolute, as
//!   Claude Code sends it, and comes back as given (keel's tools resolve and check it again).

use keel_tools::BuiltinTool;
use serde_json::{Map, Value};
use std::path::Path;

/// Claude Code's tool names and keel's for them (a `.claude/agents` file's `tools`).
pub(crate) const CLAUDE_TOOLS: [(&str, BuiltinTool); 14] = [
    ("Read", BuiltinTool::ReadFile),
    ("Write", BuiltinTool::WriteFile),
    ("Edit", BuiltinTool::EditFile),
    ("MultiEdit", BuiltinTool::EditFile),
    ("Glob", BuiltinTool::Glob),
    ("Grep", BuiltinTool::Grep),
    ("LS", BuiltinTool::ListDir),
    ("Bash", BuiltinTool::Bash),
    ("WebFetch", BuiltinTool::WebFetch),
    ("TodoWrite", BuiltinTool::TodoWrite),
    ("BashOutput", BuiltinTool::JobOutput),
    ("TaskOutput", BuiltinTool::JobOutput),
    ("KillShell", BuiltinTool::JobKill),
    ("KillBash", BuiltinTool::JobKill),
];

/// The tools a hook sees under Claude Code's names beyond `CLAUDE_TOOLS` (never a subagent's
/// tool list: a subagent starts no subagent).
const HOOK_ONLY_TOOLS: [(&str, BuiltinTool); 3] = [
    ("Task", BuiltinTool::Task),
    ("Skill", BuiltinTool::Skill),
    ("ExitPlanMode", BuiltinTool::ProposePlan),
];

/// Argument names: (keel's tool, keel's argument, Claude Code's argument).
const RENAMED_ARGUMENTS: [(BuiltinTool, &str, &str); 8] = [
    (BuiltinTool::ReadFile, "path", "file_path"),
    (BuiltinTool::WriteFile, "path", "file_path"),
    (BuiltinTool::EditFile, "path", "file_path"),
    (BuiltinTool::Grep, "case_insensitive", "-i"),
    (BuiltinTool::Task, "agent", "subagent_type"),
    (BuiltinTool::JobOutput, "job", "bash_id"),
    (BuiltinTool::JobKill, "job", "shell_id"),
    (BuiltinTool::Bash, "timeout_secs", "timeout"),
];

fn keel_tool(name: &str) -> Option<BuiltinTool> {
    BuiltinTool::ALL
        .into_iter()
        .find(|tool| tool.name() == name)
}

/// The name a Claude Code hook sees for keel's tool `name` (an MCP tool's, or one without a
/// Claude name, as it is).
pub(crate) fn to_claude(name: &str) -> String {
    keel_tool(name)
        .and_then(|tool| {
            CLAUDE_TOOLS
                .iter()
                .chain(HOOK_ONLY_TOOLS.iter())
                .find(|(_, keel)| *keel == tool)
                .map(|(claude, _)| (*claude).to_string())
        })
        .unwrap_or_else(|| name.to_string())
}

/// keel's tool for a Claude Code tool name (hooks and agent files alike).
#[cfg(test)]
pub(crate) fn from_claude(name: &str) -> Option<BuiltinTool> {
    CLAUDE_TOOLS
        .iter()
        .chain(HOOK_ONLY_TOOLS.iter())
        .find(|(claude, _)| *claude == name)
        .map(|(_, keel)| *keel)
}

/// keel's arguments of `tool` as a Claude Code hook sees them.
pub(crate) fn arguments_to_claude(tool: &str, arguments: &Value, workspace: &Path) -> Value {
    let Some(tool) = keel_tool(tool) else {
        return arguments.clone();
    };
    rename(arguments, |key| {
        RENAMED_ARGUMENTS
            .iter()
            .find(|(of, keel, _)| *of == tool && *keel == key)
            .map(|(_, _, claude)| *claude)
    })
    .map_or_else(
        || arguments.clone(),
        |mut renamed| {
            if let Some(path) = renamed.get("file_path").and_then(Value::as_str)
                && Path::new(path).is_relative()
            {
                let absolute = workspace.join(path).display().to_string();
                renamed.insert("file_path".into(), Value::String(absolute));
            }
            if tool == BuiltinTool::Bash
                && let Some(seconds) = renamed.get("timeout").and_then(Value::as_u64)
            {
                // Claude Code's is in milliseconds.
                renamed.insert("timeout".into(), Value::from(seconds.saturating_mul(1000)));
            }
            Value::Object(renamed)
        },
    )
}

/// A Claude Code hook's `updatedInput` for keel's `tool`, in keel's argument names.
pub(crate) fn arguments_from_claude(tool: &str, arguments: &Value) -> Value {
    let Some(tool) = keel_tool(tool) else {
        return arguments.clone();
    };
    rename(arguments, |key| {
        RENAMED_ARGUMENTS
            .iter()
            .find(|(of, _, claude)| *of == tool && *claude == key)
            .map(|(_, keel, _)| *keel)
    })
    .map_or_else(
        || arguments.clone(),
        |mut renamed| {
            if tool == BuiltinTool::Bash
                && let Some(millis) = renamed.get("timeout_secs").and_then(Value::as_u64)
            {
                renamed.insert("timeout_secs".into(), Value::from(millis.div_ceil(1000)));
            }
            Value::Object(renamed)
        },
    )
}

fn rename(
    arguments: &Value,
    new_name: impl Fn(&str) -> Option<&'static str>,
) -> Option<Map<String, Value>> {
    let object = arguments.as_object()?;
    Some(
        object
            .iter()
            .map(|(key, value)| {
                let key = new_name(key).map_or_else(|| key.clone(), str::to_string);
                (key, value.clone())
            })
            .collect(),
    )
}

/// keel's permission mode as Claude Code names its nearest one.
pub(crate) fn permission_mode(mode: keel_tools::PermissionMode) -> &'static str {
    match mode {
        keel_tools::PermissionMode::Ask => "default",
        keel_tools::PermissionMode::Plan | keel_tools::PermissionMode::ReadOnly => "plan",
        keel_tools::PermissionMode::Auto => "acceptEdits",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_and_arguments_go_both_ways() {
        assert_eq!(to_claude("bash"), "Bash");
        assert_eq!(to_claude("edit_file"), "Edit");
        assert_eq!(to_claude("task"), "Task");
        assert_eq!(to_claude("mcp__gh__issue"), "mcp__gh__issue");
        for (claude, _) in CLAUDE_TOOLS.iter().chain(HOOK_ONLY_TOOLS.iter()) {
            let keel = from_claude(claude).unwrap();
            assert_eq!(from_claude(&to_claude(keel.name())), Some(keel), "{claude}");
        }
        let workspace = Path::new("/w");
        let out = arguments_to_claude(
            "write_file",
            &json!({"path": "a.txt", "content": "x"}),
            workspace,
        );
        assert_eq!(out, json!({"file_path": "/w/a.txt", "content": "x"}));
        let back = arguments_from_claude(
            "write_file",
            &json!({"file_path": "/w/b.txt", "content": "y"}),
        );
        assert_eq!(back, json!({"path": "/w/b.txt", "content": "y"}));
        let bash = arguments_to_claude(
            "bash",
            &json!({"command": "ls", "timeout_secs": 5}),
            workspace,
        );
        assert_eq!(bash, json!({"command": "ls", "timeout": 5000}));
        let bash = arguments_from_claude(
            "bash",
            &json!({"command": "ls", "timeout": 1500, "description": "d"}),
        );
        assert_eq!(
            bash,
            json!({"command": "ls", "timeout_secs": 2, "description": "d"})
        );
    }
}
