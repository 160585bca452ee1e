//! The built-in tools' names, descriptions and JSON schemas, and `todo_write`.
//!
//! Invariant: these texts are part of every request; changing one changes the request prefix
//! of every session, so they change only deliberately (the snapshot test shows it).

use crate::ToolOutput;
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BuiltinTool {
    ReadFile,
    WriteFile,
    EditFile,
    ListDir,
    Glob,
    Grep,
    Bash,
    TodoWrite,
    WebFetch,
    ProposePlan,
    Task,
    JobOutput,
    JobKill,
    Skill,
}

impl BuiltinTool {
    pub const ALL: [BuiltinTool; 14] = [
        Self::ReadFile,
        Self::WriteFile,
        Self::EditFile,
        Self::ListDir,
        Self::Glob,
        Self::Grep,
        Self::Bash,
        Self::TodoWrite,
        Self::WebFetch,
        Self::ProposePlan,
        Self::Task,
        Self::JobOutput,
        Self::JobKill,
        Self::Skill,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::ReadFile => "read_file",
            Self::WriteFile => "write_file",
            Self::EditFile => "edit_file",
            Self::ListDir => "list_dir",
            Self::Glob => "glob",
            Self::Grep => "grep",
            Self::Bash => "bash",
            Self::TodoWrite => "todo_write",
            Self::WebFetch => "web_fetch",
            Self::ProposePlan => "propose_plan",
            Self::Task => "task",
            Self::JobOutput => "job_output",
            Self::JobKill => "job_kill",
            Self::Skill => "skill",
        }
    }

    /// Whether the tool can change files, run arbitrary commands, or reach the network (a
    /// request can carry data out): such calls are asked about in `ask` mode.
    pub fn changes_things(self) -> bool {
        match self {
            Self::WriteFile | Self::EditFile | Self::Bash | Self::WebFetch => true,
            Self::ReadFile
            | Self::ListDir
            | Self::Glob
            | Self::Grep
            | Self::TodoWrite
            | Self::ProposePlan
            | Self::Task
            | Self::JobOutput
            | Self::JobKill
            | Self::Skill => false,
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Self::ReadFile => {
                "Read a text file of the workspace, with line numbers. Use offset and limit (lines) for large files."
            }
            Self::WriteFile => {
                "Create or replace a file with the given content. Parent directories are created."
            }
            Self::EditFile => {
                "Replace an exact string in a file. old_string must match exactly once unless replace_all is true; include enough context to make it unique."
            }
            Self::ListDir => "List the entries of a directory (default: the workspace root).",
            Self::Glob => {
                "Find paths matching a glob pattern such as **/*.rs, respecting .gitignore."
            }
            Self::Grep => {
                "Search file contents with a regular expression, respecting .gitignore. Returns path:line:text."
            }
            Self::Bash => {
                "Run a bash command in the workspace. Output (stdout and stderr together) is capped; the exit code is reported. For a command that keeps running (a server, a watcher), set run_in_background: it starts as a job and its id returns at once."
            }
            Self::TodoWrite => {
                "Replace the task plan: a list of items, each pending, in_progress or completed."
            }
            Self::WebFetch => {
                "Fetch an http(s) URL and return its content as text (HTML converted), with the final URL and content type."
            }
            Self::ProposePlan => {
                "In plan mode, present your plan (markdown) for the user to approve before changing anything. Research first with read-only tools. Outside plan mode it only answers that you may proceed."
            }
            Self::JobOutput => {
                "Read a background job's output since the last read, and whether it still runs or how it ended. wait_seconds: wait up to that long for new output or its end."
            }
            Self::JobKill => "Stop a background job and everything it started.",
            Self::Skill => {
                "Load a skill the context lists: its instructions and its directory, whose files you read and whose scripts you run with your other tools. Load one when a task matches its description."
            }
            Self::Task => {
                "Delegate a self-contained task to a subagent and get its final answer back. agent: one of the agents the context lists (explore researches read-only; general has your tools). description: a few words on what it is for. prompt: everything the subagent needs, since it sees the context but not this conversation. Several task calls in one response run at the same time."
            }
        }
    }

    pub fn schema(self) -> Value {
        let string = json!({"type": "string"});
        match self {
            Self::ReadFile => object(
                json!({"path": string, "offset": {"type": "integer", "minimum": 1}, "limit": {"type": "integer", "minimum": 1}}),
                &["path"],
            ),
            Self::WriteFile => object(
                json!({"path": string, "content": string}),
                &["path", "content"],
            ),
            Self::EditFile => object(
                json!({"path": string, "old_string": string, "new_string": string, "replace_all": {"type": "boolean"}}),
                &["path", "old_string", "new_string"],
            ),
            Self::ListDir => object(json!({"path": string}), &[]),
            Self::Glob => object(json!({"pattern": string, "path": string}), &["pattern"]),
            Self::Grep => object(
                json!({"pattern": string, "path": string, "glob": string, "case_insensitive": {"type": "boolean"}}),
                &["pattern"],
            ),
            Self::Bash => object(
                json!({"command": string, "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 600}, "run_in_background": {"type": "boolean"}}),
                &["command"],
            ),
            Self::TodoWrite => object(
                json!({"todos": {"type": "array", "items": object(
                    json!({"content": string, "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}}),
                    &["content", "status"],
                )}}),
                &["todos"],
            ),
            Self::WebFetch => object(json!({"url": string}), &["url"]),
            Self::ProposePlan => object(
                json!({"plan": {"type": "string", "minLength": 1}}),
                &["plan"],
            ),
            Self::JobOutput => object(
                json!({"job": string, "wait_seconds": {"type": "integer", "minimum": 0, "maximum": 300}}),
                &["job"],
            ),
            Self::JobKill => object(json!({"job": string}), &["job"]),
            Self::Skill => object(
                json!({"name": {"type": "string", "minLength": 1}}),
                &["name"],
            ),
            Self::Task => object(
                json!({"agent": {"type": "string", "minLength": 1}, "description": {"type": "string", "minLength": 1}, "prompt": {"type": "string", "minLength": 1}}),
                &["agent", "description", "prompt"],
            ),
        }
    }
}

/// What `propose_plan` answers outside plan mode.
pub const NOT_IN_PLAN_MODE: &str =
    "not in plan mode: nothing needs approving; proceed with the task";

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// `todo_write`: the plan lives in the call's arguments (and so in history); the result
/// renders it back.
pub fn todo_write(args: &Value) -> ToolOutput {
    let todos = args
        .get("todos")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut open = 0;
    let lines: Vec<String> = todos
        .iter()
        .map(|todo| {
            let status = todo
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("pending");
            let mark = match status {
                "completed" => "[x]",
                "in_progress" => "[~]",
                _ => "[ ]",
            };
            if status != "completed" {
                open += 1;
            }
            format!(
                "{mark} {}",
                todo.get("content").and_then(Value::as_str).unwrap_or("")
            )
        })
        .collect();
    ToolOutput::ok(
        if lines.is_empty() {
            "the plan is empty".into()
        } else {
            lines.join("\n")
        },
        format!("{} items, {open} open", lines.len()),
    )
}
