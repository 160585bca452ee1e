//! The agents a session can delegate to (docs/agents.md): the built-ins `explore` and
//! `general`, the user's `$KEEL_HOME/agents/NAME.md`, and the project's `.keel/agents/NAME.md`
//! and `.claude/agents/NAME.md` (Claude Code's files, read as they are).
//!
//! Invariants:
//! - Built-ins win over every file, the user's file over the project's, `.keel/agents/` over
//!   `.claude/agents/`; every file that loses, or is left out, is a notice naming it.
//! - A definition only narrows what its parent has. Its tools are a subset of the parent's (a
//!   name keel does not know is reported and left out; `task` is left out, since a subagent
//!   cannot start subagents). Its permission mode applies only when it is as strict as the
//!   parent's or stricter (`mode_under`): no file, the user's included, loosens a session.
//! - Its model must be one the configuration knows (`load`'s `model_known`); otherwise the
//!   parent's model is used, and the notice says so.
//! - Nothing here runs or changes anything: a definition is data the `task` tool reads.

use crate::markdown_files::{self, MarkdownFile};
use keel_tools::{BuiltinTool, PermissionMode};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Where a definition comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentSource {
    BuiltIn,
    /// `$KEEL_HOME/agents/`
    User,
    /// The workspace's `.keel/agents/`
    Project,
    /// The workspace's `.claude/agents/` (Claude Code's format)
    ClaudeProject,
}

impl AgentSource {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentSource::BuiltIn => "built in",
            AgentSource::User => "yours",
            AgentSource::Project => "the project's",
            AgentSource::ClaudeProject => "the project's (.claude/agents)",
        }
    }
}

/// Which tools an agent may call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentTools {
    /// Every tool its parent has.
    Parent,
    /// Only these (keel names, MCP tools as `mcp__server__tool`), and only those of them the
    /// parent has.
    Only(BTreeSet<String>),
}

/// One agent a `task` call may start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentDefinition {
    pub name: String,
    pub description: String,
    pub tools: AgentTools,
    /// `PROVIDER/ID`; `None`: the parent's.
    pub model: Option<String>,
    /// `None`: the parent's.
    pub permission_mode: Option<PermissionMode>,
    /// What the agent is told before the delegated prompt (the file's body).
    pub instructions: String,
    pub source: AgentSource,
    pub path: Option<PathBuf>,
}

/// How strict a mode is: lower is stricter (read-only < plan < ask < auto).
fn looseness(mode: PermissionMode) -> usize {
    PermissionMode::ALL
        .iter()
        .position(|known| *known == mode)
        .unwrap_or(PermissionMode::ALL.len())
}

impl AgentDefinition {
    /// Whether the agent may call `tool` (its parent's own rules still apply after this).
    pub fn allows_tool(&self, tool: &str) -> bool {
        match &self.tools {
            AgentTools::Parent => tool != BuiltinTool::ProposePlan.name(),
            AgentTools::Only(tools) => tools.contains(tool),
        }
    }

    /// The mode a child of this agent runs in under a parent in `parent`: the agent's own
    /// when it is as strict or stricter, else the parent's; `true` when the agent asked for a
    /// looser one (refused, to be reported).
    pub fn mode_under(&self, parent: PermissionMode) -> (PermissionMode, bool) {
        match self.permission_mode {
            Some(own) if looseness(own) <= looseness(parent) => (own, false),
            Some(_) => (parent, true),
            None => (parent, false),
        }
    }

    /// Whether its requests can share the parent's cached prefix: the same model (and so the
    /// same profile, effort and account).
    pub fn shares_cache_with(&self, parent_model: &str) -> bool {
        self.model
            .as_deref()
            .is_none_or(|model| model == parent_model)
    }

    /// Whether it only reads: its commands run under the read-only sandbox.
    pub fn is_read_only(&self) -> bool {
        self.permission_mode == Some(PermissionMode::ReadOnly)
    }
}

/// The read-only tools `explore` has.
const EXPLORE_TOOLS: [BuiltinTool; 9] = [
    BuiltinTool::ReadFile,
    BuiltinTool::ListDir,
    BuiltinTool::Glob,
    BuiltinTool::Grep,
    BuiltinTool::Bash,
    BuiltinTool::WebFetch,
    BuiltinTool::JobOutput,
    BuiltinTool::JobKill,
    BuiltinTool::Skill,
];

fn built_ins() -> [AgentDefinition; 2] {
    [
        AgentDefinition {
            name: "explore".into(),
            description: "Researches the codebase read-only (reads, searches, runs read-only \
                          commands) and reports what it found; changes nothing."
                .into(),
            tools: AgentTools::Only(EXPLORE_TOOLS.iter().map(|t| t.name().to_string()).collect()),
            model: None,
            permission_mode: Some(PermissionMode::ReadOnly),
            instructions: "You research for another agent: find and read what the task needs, \
                           change nothing, and answer with what you found, citing paths."
                .into(),
            source: AgentSource::BuiltIn,
            path: None,
        },
        AgentDefinition {
            name: "general".into(),
            description: "Does a self-contained part of the work with the same tools and mode \
                          as you, and reports what it did."
                .into(),
            tools: AgentTools::Parent,
            model: None,
            permission_mode: None,
            instructions: "You do one part of a larger task for another agent: do it, then \
                           answer with what you did and what is left."
                .into(),
            source: AgentSource::BuiltIn,
            path: None,
        },
    ]
}

/// Claude Code's permission modes as keel's (`None`: no keel mode is that).
fn claude_mode(name: &str) -> Option<PermissionMode> {
    match name {
        "default" => Some(PermissionMode::Ask),
        "plan" => Some(PermissionMode::Plan),
        "acceptEdits" | "bypassPermissions" => Some(PermissionMode::Auto),
        _ => None,
    }
}

/// The front matter keys keel reads.
const KEEL_KEYS: [&str; 6] = [
    "name",
    "description",
    "tools",
    "model",
    "permission_mode",
    "permissionMode",
];

/// The most agents the block lists, and the most characters of each one's description.
const LISTED_AGENTS: usize = 32;
const AGENT_DESCRIPTION_CHARS: usize = 300;

/// The agents of a session, by name, and what loading them had to say.
#[derive(Clone, Debug)]
pub struct AgentDefinitions {
    agents: BTreeMap<String, AgentDefinition>,
    /// The provider profile of each model an agent names (`PROVIDER/ID` → its provider's
    /// profile), as the configuration resolves it (`set_profile`).
    profiles: BTreeMap<String, keel_llm::ProviderProfile>,
    /// Files left out, values not applied and keys ignored, said once at session start.
    pub notices: Vec<String>,
}

impl Default for AgentDefinitions {
    /// The built-ins alone.
    fn default() -> AgentDefinitions {
        AgentDefinitions {
            agents: built_ins()
                .into_iter()
                .map(|agent| (agent.name.clone(), agent))
                .collect(),
            profiles: BTreeMap::new(),
            notices: Vec::new(),
        }
    }
}

impl AgentDefinitions {
    /// The built-ins, then the project's files (`.claude/agents/` first, `.keel/agents/` over
    /// it), then the user's over both. `model_known` says whether a `PROVIDER/ID` is configured.
    pub fn load(
        workspace: &Path,
        keel_home: Option<&Path>,
        model_known: &dyn Fn(&str) -> bool,
    ) -> AgentDefinitions {
        let mut loaded = AgentDefinitions::default();
        let mut unknown_keys = BTreeSet::new();
        let reserved = |name: &str| {
            built_ins()
                .iter()
                .any(|agent| agent.name == name)
                .then(|| format!("`{name}` is a built-in agent, which always wins"))
        };
        let mut layers: Vec<(Vec<MarkdownFile>, AgentSource)> = Vec::new();
        for (relative, source) in [
            (".claude/agents", AgentSource::ClaudeProject),
            (".keel/agents", AgentSource::Project),
        ] {
            let users = keel_home.map(|home| home.join("agents"));
            if let Some(dir) =
                markdown_files::project_dir(workspace, relative, "agent", &mut loaded.notices)
                && !users
                    .as_deref()
                    .is_some_and(|users| markdown_files::same_dir(&dir, users))
            {
                let files = markdown_files::read_dir(
                    &dir,
                    Some(workspace),
                    "agent",
                    &reserved,
                    &mut loaded.notices,
                );
                layers.push((files, source));
            }
        }
        if let Some(home) = keel_home {
            let files = markdown_files::read_dir(
                &home.join("agents"),
                None,
                "agent",
                &reserved,
                &mut loaded.notices,
            );
            layers.push((files, AgentSource::User));
        }
        for (files, source) in layers {
            for file in files {
                let Some(agent) = loaded.definition(&file, source, model_known, &mut unknown_keys)
                else {
                    continue;
                };
                if let Some(replaced) = loaded.agents.insert(agent.name.clone(), agent) {
                    let name = &replaced.name;
                    loaded.notices.push(format!(
                        "agent `{name}` of {} ({}) is replaced by {} ({})",
                        replaced.source.as_str(),
                        shown_path(replaced.path.as_deref()),
                        source.as_str(),
                        file.path.display()
                    ));
                }
            }
        }
        if !unknown_keys.is_empty() {
            let keys: Vec<String> = unknown_keys.iter().map(|key| format!("`{key}`")).collect();
            loaded.notices.push(format!(
                "agent files: {} ignored (keel reads name, description, tools, model and \
                 permission_mode)",
                keys.join(", ")
            ));
        }
        loaded
    }

    /// The definition `file` makes; `None` (with a notice) when it cannot make one.
    fn definition(
        &mut self,
        file: &MarkdownFile,
        source: AgentSource,
        model_known: &dyn Fn(&str) -> bool,
        unknown_keys: &mut BTreeSet<String>,
    ) -> Option<AgentDefinition> {
        let shown = file.path.display().to_string();
        let read = markdown_files::front_matter(&file.text);
        for field in &read.fields {
            if !KEEL_KEYS.contains(&field.key.as_str()) {
                unknown_keys.insert(field.key.clone());
            }
        }
        if !read.bad_lines.is_empty() {
            let lines: Vec<String> = read.bad_lines.iter().map(ToString::to_string).collect();
            self.notices.push(format!(
                "agent file {shown}: line{} {} of its front matter ignored (not `key: value`)",
                if lines.len() == 1 { "" } else { "s" },
                lines.join(", ")
            ));
        }
        // The file's `name` is the agent's, as in Claude Code; else the file's name.
        let name = read.get("name").unwrap_or(file.name.as_str()).to_string();
        if !markdown_files::usable_name(&name) || built_ins().iter().any(|b| b.name == name) {
            self.notices.push(format!(
                "agent file {shown} ignored: `{}` cannot name an agent (letters, digits, `-` \
                 and `_`; not a built-in's name)",
                name.chars().take(64).collect::<String>()
            ));
            return None;
        }
        let Some(description) = read.get("description").filter(|d| !d.is_empty()) else {
            self.notices.push(format!(
                "agent file {shown} ignored: it has no description (the model picks an agent by it)"
            ));
            return None;
        };
        let tools = match read.get("tools") {
            None => AgentTools::Parent,
            Some(listed) => AgentTools::Only(self.tools(&shown, listed)),
        };
        let model = match read.get("model") {
            None | Some("inherit") | Some("") => None,
            Some(model) if model_known(model) => Some(model.to_string()),
            Some(model) => {
                self.notices.push(format!(
                    "agent file {shown}: model `{}` is not one keel is configured for; the \
                     agent uses its parent's",
                    model.chars().take(80).collect::<String>()
                ));
                None
            }
        };
        let asked_mode = read.get("permission_mode").or(read.get("permissionMode"));
        let permission_mode = match asked_mode {
            None => None,
            Some(mode) => match PermissionMode::parse(mode).or_else(|| claude_mode(mode)) {
                Some(mode) => Some(mode),
                None => {
                    self.notices.push(format!(
                        "agent file {shown}: permission mode `{}` is not one keel has \
                         (read-only, plan, ask, auto); the agent uses its parent's",
                        mode.chars().take(40).collect::<String>()
                    ));
                    None
                }
            },
        };
        Some(AgentDefinition {
            name,
            description: description.chars().take(400).collect(),
            tools,
            model,
            permission_mode,
            instructions: read.body.trim().to_string(),
            source,
            path: Some(file.path.clone()),
        })
    }

    /// The keel tools a `tools` list names; what it names that keel has not is a notice.
    fn tools(&mut self, shown: &str, listed: &str) -> BTreeSet<String> {
        let mut tools = BTreeSet::new();
        let mut unknown = Vec::new();
        for tool in markdown_files::list(listed) {
            let keel = BuiltinTool::ALL
                .iter()
                .find(|builtin| builtin.name() == tool)
                .copied()
                .or_else(|| {
                    crate::claude_names::CLAUDE_TOOLS
                        .iter()
                        .find(|(claude, _)| *claude == tool)
                        .map(|(_, keel)| *keel)
                });
            match keel {
                Some(BuiltinTool::ProposePlan) => unknown.push(tool),
                Some(builtin) => {
                    tools.insert(builtin.name().to_string());
                }
                None if tool.starts_with("mcp__") && tool.len() > "mcp__".len() => {
                    tools.insert(tool);
                }
                None => unknown.push(tool),
            }
        }
        if !unknown.is_empty() {
            let named: Vec<String> = unknown
                .iter()
                .map(|tool| format!("`{}`", tool.chars().take(64).collect::<String>()))
                .collect();
            self.notices.push(format!(
                "agent file {shown}: tools {} left out (keel has no such tool for a subagent)",
                named.join(", ")
            ));
        }
        tools
    }

    /// The agents a `task` call may start, one line each, as the context block lists them
    /// (descriptions cut, their control characters blanked: one line each, whatever a file
    /// says).
    pub(crate) fn context_section(&self) -> String {
        // The built-ins first: no number of a project's files pushes them out.
        let (built_in, others): (Vec<_>, Vec<_>) = self
            .list()
            .partition(|agent| agent.source == AgentSource::BuiltIn);
        let lines: Vec<String> = built_in
            .into_iter()
            .chain(others)
            .take(LISTED_AGENTS)
            .map(|agent| {
                let description: String = agent
                    .description
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .take(AGENT_DESCRIPTION_CHARS)
                    .collect();
                format!("- {}: {}", agent.name, description.trim())
            })
            .collect();
        format!(
            "\n<agents>\nThe agents the task tool can start:\n{}\n</agents>\n",
            lines.join("\n")
        )
    }

    /// The models the agents name that are not `parent_model` (each needs its provider's
    /// profile: `set_profile`).
    pub fn other_models(&self, parent_model: &str) -> Vec<String> {
        let mut models: Vec<String> = self
            .agents
            .values()
            .filter_map(|agent| agent.model.clone())
            .filter(|model| model != parent_model)
            .collect();
        models.sort();
        models.dedup();
        models
    }

    /// The provider profile a subagent on `model` (`PROVIDER/ID`) runs with.
    pub fn set_profile(&mut self, model: &str, profile: keel_llm::ProviderProfile) {
        self.profiles.insert(model.to_string(), profile);
    }

    /// The profile `set_profile` gave `model`, if any.
    pub(crate) fn profile_for(&self, model: &str) -> Option<&keel_llm::ProviderProfile> {
        self.profiles.get(model)
    }

    pub fn get(&self, name: &str) -> Option<&AgentDefinition> {
        self.agents.get(name)
    }

    /// The agents, by name.
    pub fn list(&self) -> impl Iterator<Item = &AgentDefinition> {
        self.agents.values()
    }
}

fn shown_path(path: Option<&Path>) -> String {
    path.map_or_else(|| "built in".to_string(), |path| path.display().to_string())
}

#[cfg(test)]
#[path = "agent_definitions_tests.rs"]
mod tests;
