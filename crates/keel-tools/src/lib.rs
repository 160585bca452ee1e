//! keel's tools: the registry of built-in tools with their JSON schemas, argument validation,
//! the workspace guard, the permission policy, and the tools themselves.
//!
//! Invariants:
//! - Arguments are checked (JSON, then schema: types and required fields) before anything
//!   runs; a failure is a specific message meant for the model, which may correct the call.
//! - Tool schemas are constants: the tool part of every request is byte-stable.
//! - A tool never panics on any input; every failure is a `ToolOutput` with `is_error`.
//! - A file tool never holds its caller longer than `ToolServices::file_timeout`: past it, the
//!   call returns an error (the blocked thread is abandoned).
//! - A call's permission subject for a path tool is the path it will really touch (resolved
//!   like the tool resolves it), so `./x`, `a/../x` and symlinks cannot dodge a path rule.

pub mod always_scope;
mod bash;
mod bash_process;
mod below_root;
mod command_line;
mod command_words;
mod fetch;
mod files;
pub mod guard;
pub mod hook_process;
mod job_process;
pub mod job_spool;
pub mod jobs;
mod live;
mod mention;
pub mod output;
pub mod permission;
mod preview;
pub mod process;
pub mod read_only_commands;
mod read_only_paths;
mod restore;
mod sandboxed;
mod search;
mod special_files;
pub use special_files::open_regular;
mod specs;

pub use fetch::{MAX_BODY as WEB_FETCH_MAX_BODY, MAX_REDIRECTS as WEB_FETCH_MAX_REDIRECTS};
pub use guard::{GuardError, WorkspaceGuard, WriteTarget};
pub use keel_types::approval_request::{StatedChange, stated_change};
pub use live::LiveOutput;
pub use mention::{attachment, instruction_file, mentions, names_something};
pub use permission::{
    Decision, PermissionMode, PermissionPolicy, PermissionRule, Reach, RuleError,
};
pub use preview::{Preview, preview};
pub use restore::restore_file;
pub use sandboxed::CommandSandbox;
pub use specs::{BuiltinTool, NOT_IN_PLAN_MODE};

use keel_types::ToolSpec;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// What a tool hands back to the model (and a one-line summary for people).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    pub summary: String,
}

/// The summary of an error: its first line, cut at 120 characters. (A caller that redacts an
/// error redacts the message first and cuts after: `error_summary` of the redacted message.)
pub fn error_summary(message: &str) -> String {
    let line = message.lines().next().unwrap_or("");
    if line.chars().count() <= SUMMARY_CHARS {
        return line.to_string();
    }
    // Cut at the last space that fits (never inside a word), and say it was cut.
    let fits: String = line.chars().take(SUMMARY_CHARS).collect();
    let cut = fits
        .rfind(char::is_whitespace)
        .filter(|at| *at > SUMMARY_CHARS / 2)
        .map_or(fits.as_str(), |at| &fits[..at]);
    format!("{}…", cut.trim_end_matches([',', ';', ':', ' ']))
}

/// The most characters of a result's one-line summary.
const SUMMARY_CHARS: usize = 120;

#[cfg(test)]
mod summary_tests {
    #[test]
    fn a_long_summary_is_cut_between_words_and_says_so() {
        let long = "denied: this call needs approval and there was nobody to ask (headless runs \
                    need --yes or an allow rule); the call was not run and nothing changed";
        let summary = super::error_summary(long);
        assert!(summary.ends_with('…'), "{summary}");
        let kept = summary.trim_end_matches('…');
        assert!(long.starts_with(kept), "{summary}");
        let next = long[kept.len()..].chars().next();
        assert!(
            next.is_some_and(|c| c == ' ' || c == ';'),
            "cut between words: {summary}"
        );
        assert_eq!(super::error_summary("short\nsecond line"), "short");
    }
}

impl ToolOutput {
    pub fn ok(content: String, summary: String) -> ToolOutput {
        ToolOutput {
            content,
            is_error: false,
            summary,
        }
    }

    pub fn error(message: String) -> ToolOutput {
        let summary = error_summary(&message);
        ToolOutput {
            content: message,
            is_error: true,
            summary,
        }
    }
}

/// How long a file tool (read, write, edit, list, glob, grep) may take before its caller is
/// given an error.
pub const DEFAULT_FILE_TIMEOUT: Duration = Duration::from_secs(120);

/// Where and how tools run.
#[derive(Clone, Debug)]
pub struct ToolServices {
    pub guard: WorkspaceGuard,
    pub bash_timeout: Duration,
    /// keel's secrets: removed from every command's environment.
    pub secrets: keel_types::Secrets,
    /// The longest a file tool may run (`DEFAULT_FILE_TIMEOUT` unless changed).
    pub file_timeout: Duration,
    /// An editor that reads and writes workspace files for the tools (ACP's `fs`).
    pub editor: Option<std::sync::Arc<dyn EditorFiles>>,
    /// Which hosts `web_fetch` may reach at a loopback, private or link-local address (those a
    /// permission rule names); none by default.
    pub internal_hosts: HostRule,
    /// Told the process group of each command a tool starts (`None`: nobody records them).
    pub process_log: Option<process::SharedProcessLog>,
    /// How commands are confined, and the paths file tools may not use (`None`: commands run
    /// unconfined and every path is open, as in the tools' own unit tests).
    pub sandbox: Option<CommandSandbox>,
    /// Where a command's output goes as it arrives (redacted), for a live view (`None`: only
    /// the result has it).
    pub live_output: Option<LiveOutput>,
    /// The background jobs of the agent the call belongs to, and the call (`None`: no job can
    /// start, as in the tools' own unit tests).
    pub jobs: Option<jobs::JobSlot>,
}

/// A test on host names (the hosts the user's rules allow).
#[derive(Clone)]
pub struct HostRule(pub std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl HostRule {
    pub fn none() -> HostRule {
        HostRule(std::sync::Arc::new(|_| false))
    }
}

impl std::ops::Deref for HostRule {
    type Target = dyn Fn(&str) -> bool + Send + Sync;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl std::fmt::Debug for HostRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostRule")
    }
}

/// Files read and written through an editor: it sees unsaved buffers and owns the write.
/// Called from a blocking thread; each call may wait for the editor.
pub trait EditorFiles: Send + Sync + std::fmt::Debug {
    fn read(&self, path: &std::path::Path) -> Result<String, String>;
    fn write(&self, path: &std::path::Path, content: &str) -> Result<(), String>;
}

impl ToolServices {
    pub fn new(guard: WorkspaceGuard) -> ToolServices {
        ToolServices {
            guard,
            bash_timeout: bash::DEFAULT_TIMEOUT,
            secrets: keel_types::Secrets::default(),
            file_timeout: DEFAULT_FILE_TIMEOUT,
            editor: None,
            internal_hosts: HostRule::none(),
            process_log: None,
            sandbox: None,
            live_output: None,
            jobs: None,
        }
    }

    /// The editor a file at `resolved` is read and written through, if any (ACP's `fs`, for
    /// a path inside the workspace). Its calls may wait for the editor: never make them on
    /// an async runtime's worker without `block_in_place`.
    pub fn editor_for(&self, resolved: &std::path::Path) -> Option<&dyn EditorFiles> {
        files::editor_for(self, resolved)
    }

    /// Why a tool may not read `resolved` (asked for as `path`), as its result.
    pub fn read_refusal(&self, path: &str, resolved: &std::path::Path) -> Option<ToolOutput> {
        let sandbox = self.sandbox.as_ref()?;
        sandbox.read_refusal(path, resolved).map(ToolOutput::error)
    }

    /// Why a tool may not write `resolved` (asked for as `path`), as its result.
    pub fn change_refusal(&self, path: &str, resolved: &std::path::Path) -> Option<ToolOutput> {
        let sandbox = self.sandbox.as_ref()?;
        sandbox
            .change_refusal(path, resolved)
            .map(ToolOutput::error)
    }

    /// The same context, telling `log` the process group of each command it starts.
    pub fn with_process_log(&self, log: process::SharedProcessLog) -> ToolServices {
        ToolServices {
            process_log: Some(log),
            ..self.clone()
        }
    }

    /// The same context, handing a command's output to `live` as it arrives.
    pub fn with_live_output(self, live: LiveOutput) -> ToolServices {
        ToolServices {
            live_output: Some(live),
            ..self
        }
    }

    /// The same context, starting background jobs in `jobs` for its call.
    pub fn with_jobs(self, jobs: jobs::JobSlot) -> ToolServices {
        ToolServices {
            jobs: Some(jobs),
            ..self
        }
    }

    /// The same context with another file-tool timeout.
    pub fn with_file_timeout(self, file_timeout: Duration) -> ToolServices {
        ToolServices {
            file_timeout,
            ..self
        }
    }
}

/// A call whose arguments passed validation.
#[derive(Clone, Debug)]
pub struct ValidCall {
    pub tool: BuiltinTool,
    pub args: Value,
    /// The path this call acts on, resolved once (`pinned`): the subject rules see and the
    /// path the tool uses are then the same.
    resolved: Option<PathBuf>,
}

impl ValidCall {
    /// Resolve this call's path once, now, and make the tool use exactly that path: the
    /// subject permission rules match and the file the tool touches cannot drift apart if the
    /// workspace changes in between (a write through a symlink swapped in later is refused by
    /// the directory-handle walk).
    pub fn pinned(mut self, ctx: &ToolServices) -> ValidCall {
        let Some(path) = self.path_arg().map(str::to_string) else {
            return self;
        };
        if let Ok(resolved) = ctx.guard.resolve(&path) {
            if let (Some(args), Some(text)) = (self.args.as_object_mut(), resolved.to_str()) {
                args.insert("path".into(), Value::String(text.to_string()));
            }
            self.resolved = Some(resolved);
        }
        self
    }

    /// The path this call acts on, as pinned (see `pinned`).
    pub fn resolved(&self) -> Option<&std::path::Path> {
        self.resolved.as_deref()
    }

    /// The `path` argument of the path tools (`"."` when absent); `None` for other tools.
    fn path_arg(&self) -> Option<&str> {
        match self.tool {
            BuiltinTool::Bash
            | BuiltinTool::TodoWrite
            | BuiltinTool::WebFetch
            | BuiltinTool::ProposePlan
            | BuiltinTool::Task
            | BuiltinTool::JobOutput
            | BuiltinTool::JobKill
            | BuiltinTool::Skill => None,
            BuiltinTool::ReadFile
            | BuiltinTool::WriteFile
            | BuiltinTool::EditFile
            | BuiltinTool::ListDir
            | BuiltinTool::Glob
            | BuiltinTool::Grep => {
                Some(self.args.get("path").and_then(Value::as_str).unwrap_or("."))
            }
        }
    }

    /// What permission rules match against. For `bash`, the command line as given (the policy
    /// splits it into simple commands). For the path tools (`read_file`, `write_file`,
    /// `edit_file`, `list_dir`, and `glob`/`grep`, whose subject is their `path`, default
    /// `.`), the path resolved the way the tool resolves it (`..` applied, symlinks followed),
    /// shown relative to the workspace, or absolute when outside it. A path that does not
    /// resolve keeps its raw text: the tool resolves it the same way and fails, so nothing runs
    /// on it, and the raw text still meets deny rules written for it. `todo_write` has none.
    pub fn subject(&self, ctx: &ToolServices) -> String {
        match self.tool {
            BuiltinTool::Bash => self
                .args
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            BuiltinTool::TodoWrite | BuiltinTool::ProposePlan => String::new(),
            // Rules may name the job (`job_kill(job-2)`) or the skill (`skill(pdf)`).
            BuiltinTool::JobOutput | BuiltinTool::JobKill => self
                .args
                .get("job")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            BuiltinTool::Skill => self
                .args
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            // Deny rules name the agent: `task(general)`.
            BuiltinTool::Task => self
                .args
                .get("agent")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            // Rules name the host: `web_fetch(docs.rs)`, `web_fetch(*.example.com)`.
            BuiltinTool::WebFetch => fetch::host_of(&self.args).unwrap_or_default(),
            BuiltinTool::ReadFile
            | BuiltinTool::WriteFile
            | BuiltinTool::EditFile
            | BuiltinTool::ListDir
            | BuiltinTool::Glob
            | BuiltinTool::Grep => {
                if let Some(resolved) = &self.resolved {
                    return ctx.guard.display(resolved);
                }
                let path = self.path_arg().unwrap_or(".");
                match ctx.guard.resolve(path) {
                    Ok(resolved) => ctx.guard.display(&resolved),
                    Err(_) => path.to_string(),
                }
            }
        }
    }

    /// Whether the call needs permission beyond reading the workspace: it changes things, or
    /// it reads outside the workspace.
    pub fn is_sensitive(&self, ctx: &ToolServices) -> bool {
        if self.tool.changes_things() {
            return true;
        }
        match self.tool {
            BuiltinTool::ReadFile
            | BuiltinTool::ListDir
            | BuiltinTool::Glob
            | BuiltinTool::Grep => self.reads_outside_workspace(ctx),
            BuiltinTool::WriteFile
            | BuiltinTool::EditFile
            | BuiltinTool::Bash
            | BuiltinTool::TodoWrite
            | BuiltinTool::WebFetch
            | BuiltinTool::ProposePlan
            | BuiltinTool::Task
            | BuiltinTool::JobOutput
            | BuiltinTool::JobKill
            | BuiltinTool::Skill => false,
        }
    }

    /// Why keel's own policy refuses this call before it runs, if it does: a write or an edit
    /// of a path outside the workspace and the added directories (keel only writes inside).
    /// The words are the model's; a person's card says `outside the workspace`.
    pub fn refused_by_policy(&self, ctx: &ToolServices) -> Option<String> {
        if !matches!(self.tool, BuiltinTool::WriteFile | BuiltinTool::EditFile) {
            return None;
        }
        let path = self.path_arg()?;
        match ctx.guard.check_write(path) {
            Err(error @ GuardError::Outside { .. }) => Some(format!("denied: {error}")),
            Ok(_) | Err(GuardError::Invalid(_)) => None,
        }
    }

    /// Whether a read-only file tool reads outside the workspace (or where keel cannot tell).
    pub fn reads_outside_workspace(&self, ctx: &ToolServices) -> bool {
        match self.tool {
            BuiltinTool::ReadFile
            | BuiltinTool::ListDir
            | BuiltinTool::Glob
            | BuiltinTool::Grep => {
                let path = self.args.get("path").and_then(Value::as_str).unwrap_or(".");
                ctx.guard
                    .resolve(path)
                    .map(|p| !ctx.guard.is_inside(&p))
                    .unwrap_or(true)
            }
            _ => false,
        }
    }

    /// Whether this is a `bash` call that starts a background job.
    pub fn runs_in_background(&self) -> bool {
        self.tool == BuiltinTool::Bash
            && self
                .args
                .get("run_in_background")
                .and_then(Value::as_bool)
                .unwrap_or(false)
    }

    /// Run the call. Dropping the future cancels it (a running command is killed; a
    /// background job it started runs on).
    pub async fn run(&self, ctx: &ToolServices) -> ToolOutput {
        match self.tool {
            BuiltinTool::Bash if self.runs_in_background() => {
                let command = self
                    .args
                    .get("command")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match &ctx.jobs {
                    Some(slot) => slot.jobs.start(&slot.call_id, command, ctx).await,
                    None => ToolOutput::error(
                        "background jobs are not available here; run the command without \
                         run_in_background"
                            .into(),
                    ),
                }
            }
            BuiltinTool::Bash => bash::bash(&self.args, ctx).await,
            BuiltinTool::JobOutput | BuiltinTool::JobKill => {
                let job = self.args.get("job").and_then(Value::as_str).unwrap_or("");
                let Some(slot) = &ctx.jobs else {
                    return ToolOutput::error(format!("there is no job `{job}` here"));
                };
                if self.tool == BuiltinTool::JobKill {
                    slot.jobs.kill(job, Some(&slot.call_id)).await
                } else {
                    let wait = self
                        .args
                        .get("wait_seconds")
                        .and_then(Value::as_u64)
                        .map_or(Duration::ZERO, Duration::from_secs);
                    slot.jobs.output(job, wait, Some(&slot.call_id)).await
                }
            }
            BuiltinTool::TodoWrite => specs::todo_write(&self.args),
            // In plan mode the agent answers the call itself (it asks the person).
            BuiltinTool::ProposePlan => {
                ToolOutput::ok(specs::NOT_IN_PLAN_MODE.into(), "not in plan mode".into())
            }
            BuiltinTool::WebFetch => fetch::web_fetch(&self.args, ctx).await,
            // The agent answers `skill` from the session's skills (`engine_tools.rs`).
            BuiltinTool::Skill => ToolOutput::error(
                "internal: a skill is loaded by the agent, not run as a tool".into(),
            ),
            // The agent runs a task's subagent itself (`task_tool.rs` in keel-agent).
            BuiltinTool::Task => ToolOutput::error(
                "internal: a subagent is started by the agent, not run as a tool".into(),
            ),
            BuiltinTool::ReadFile
            | BuiltinTool::WriteFile
            | BuiltinTool::EditFile
            | BuiltinTool::ListDir
            | BuiltinTool::Glob
            | BuiltinTool::Grep => {
                let (tool, args, owned) = (self.tool, self.args.clone(), ctx.clone());
                let work = tokio::task::spawn_blocking(move || match tool {
                    BuiltinTool::ReadFile => files::read_file(&args, &owned),
                    BuiltinTool::WriteFile => files::write_file(&args, &owned),
                    BuiltinTool::EditFile => files::edit_file(&args, &owned),
                    BuiltinTool::ListDir => files::list_dir(&args, &owned),
                    BuiltinTool::Glob => search::glob(&args, &owned),
                    BuiltinTool::Grep => search::grep(&args, &owned),
                    BuiltinTool::Bash
                    | BuiltinTool::TodoWrite
                    | BuiltinTool::WebFetch
                    | BuiltinTool::ProposePlan
                    | BuiltinTool::Task
                    | BuiltinTool::JobOutput
                    | BuiltinTool::JobKill
                    | BuiltinTool::Skill => {
                        ToolOutput::error("internal: not a blocking tool".into())
                    }
                });
                // The deadline is checked first, so a deadline that has passed always wins.
                let finished = tokio::select! {
                    biased;
                    () = tokio::time::sleep(ctx.file_timeout) => None,
                    result = work => Some(result),
                };
                match finished {
                    Some(Ok(output)) => output,
                    Some(Err(error)) => {
                        ToolOutput::error(format!("the tool stopped unexpectedly: {error}"))
                    }
                    None => ToolOutput::error(format!(
                        "`{}` timed out after {} and was abandoned (a file that never answers, \
                         such as a device, a pipe or a stalled network mount?); if it was a \
                         write, check the file before retrying",
                        self.tool.name(),
                        shown_duration(ctx.file_timeout)
                    )),
                }
            }
        }
    }
}

/// `d` for people: whole seconds, or milliseconds below one second.
fn shown_duration(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// A built-in tool's schema could not be compiled (a bug in keel, caught at start-up).
#[derive(Debug, thiserror::Error)]
#[error("the schema of tool `{tool}` does not compile: {reason}")]
pub struct SchemaError {
    pub tool: &'static str,
    pub reason: String,
}

/// Why a call's name or arguments were refused. The message is what the model is told, so it
/// can correct the call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    #[error("there is no tool named `{name}`; available: {}", available.join(", "))]
    UnknownTool {
        name: String,
        available: Vec<&'static str>,
    },
    #[error("the arguments of `{tool}` are not valid JSON ({reason}); send one JSON object")]
    NotJson { tool: String, reason: String },
    #[error("invalid arguments for `{tool}`: {}", problems.join("; "))]
    Schema { tool: String, problems: Vec<String> },
}

/// The built-in tools with compiled schema validators.
pub struct ToolRegistry {
    tools: Vec<(BuiltinTool, jsonschema::Validator)>,
}

impl ToolRegistry {
    pub fn new() -> Result<ToolRegistry, SchemaError> {
        let tools = BuiltinTool::ALL
            .iter()
            .map(|tool| {
                jsonschema::validator_for(&tool.schema())
                    .map(|validator| (*tool, validator))
                    .map_err(|error| SchemaError {
                        tool: tool.name(),
                        reason: error.to_string(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ToolRegistry { tools })
    }

    /// The tool list sent to the model, in a fixed order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|(tool, _)| ToolSpec {
                name: tool.name().to_string(),
                description: tool.description().to_string(),
                parameters: tool.schema(),
            })
            .collect()
    }

    /// Check a call's name and raw arguments.
    pub fn validate(&self, name: &str, raw_arguments: &str) -> Result<ValidCall, ValidationError> {
        let Some((tool, validator)) = self.tools.iter().find(|(tool, _)| tool.name() == name)
        else {
            return Err(ValidationError::UnknownTool {
                name: name.to_string(),
                available: self.tools.iter().map(|(tool, _)| tool.name()).collect(),
            });
        };
        Ok(ValidCall {
            tool: *tool,
            args: check_arguments(name, validator, raw_arguments)?,
            resolved: None,
        })
    }
}

/// A call's raw arguments checked against its tool's schema (empty means `{}`): the parsed
/// arguments, or every problem, each with where it is, for the model to correct.
pub fn check_arguments(
    tool: &str,
    validator: &jsonschema::Validator,
    raw_arguments: &str,
) -> Result<Value, ValidationError> {
    let text = if raw_arguments.trim().is_empty() {
        "{}"
    } else {
        raw_arguments
    };
    let args: Value = serde_json::from_str(text).map_err(|error| ValidationError::NotJson {
        tool: tool.to_string(),
        reason: error.to_string(),
    })?;
    let problems: Vec<String> = validator
        .iter_errors(&args)
        .map(|error| {
            let at = error.instance_path().to_string();
            if at.is_empty() {
                error.to_string()
            } else {
                format!("{at}: {error}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(args)
    } else {
        Err(ValidationError::Schema {
            tool: tool.to_string(),
            problems,
        })
    }
}

#[cfg(test)]
mod jobs_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trust_tests;
