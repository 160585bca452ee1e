//! What every agent of a session shares: the provider client and tool registry, the store,
//! the sandbox and its tool context, the keys, the approver, the MCP hub, the editor and the
//! custom commands.
//!
//! Invariants:
//! - `Services` is built once, when a session's first agent opens, and cloned (an `Arc`) into
//!   every agent opened on it: one HTTP client (one connection pool), one approver (one
//!   person asked), one sandbox with one temp dir (removed when the last clone is dropped).
//! - Nothing per agent lives here: history, events, cancellation, spend and the permission
//!   mode are each agent's own (`agent.rs`).
//! - Every agent on these services works in their place (`Place`: workspace, extra
//!   directories, sandbox): the tool context and its sandbox are built for it once.
//! - The temp dir is named after the first agent's session and removed with the last clone:
//!   agents opened on a session's services are dropped before the agent that made them.
//! - Built-in tool specs come from one registry, so every agent's requests offer them in the
//!   same bytes (a subagent's requests share the parent's cached prefix).

use crate::agent_definitions::AgentDefinitions;
use crate::approval::Approver;
use crate::custom_commands::CustomCommands;
use keel_llm::KeySource;
use keel_llm::client::HttpClient;
use keel_store::Store;
use keel_tools::{ToolRegistry, ToolServices};
use std::sync::Arc;

/// The live services a surface hands to the session it opens.
#[derive(Clone)]
pub struct SurfaceServices {
    /// Where the provider's keys come from.
    pub keys: Arc<dyn KeySource>,
    /// Who is asked about tool calls (a terminal, a browser, an editor, or nobody).
    pub approver: Arc<dyn Approver>,
    /// The session's MCP servers (started by the surface; empty when none is declared).
    pub mcp: Arc<keel_mcp::McpHub>,
    /// An editor the file tools go through (ACP clients with the `fs` capability).
    pub editor: Option<Arc<dyn keel_tools::EditorFiles>>,
    /// The session's custom slash commands (`.keel/commands/`, `$KEEL_HOME/commands/`).
    pub commands: Arc<CustomCommands>,
    /// The agents a `task` may start (built in, `.keel/agents/`, `$KEEL_HOME/agents/`).
    pub agents: Arc<AgentDefinitions>,
    /// The skills the `skill` tool loads (`.keel/skills/`, `$KEEL_HOME/skills/`, …).
    pub skills: Arc<crate::skills::Skills>,
    /// The hooks in force (docs/hooks.md).
    pub hooks: Arc<crate::hook_set::Hooks>,
}

impl SurfaceServices {
    /// `keys` and `approver`, with no MCP server, no editor and no custom command.
    pub fn new(keys: Arc<dyn KeySource>, approver: Arc<dyn Approver>) -> SurfaceServices {
        SurfaceServices {
            keys,
            approver,
            mcp: Arc::new(keel_mcp::McpHub::empty()),
            editor: None,
            commands: Arc::new(CustomCommands::default()),
            agents: Arc::new(AgentDefinitions::default()),
            skills: Arc::new(crate::skills::Skills::default()),
            hooks: Arc::new(crate::hook_set::Hooks::default()),
        }
    }
}

/// What every agent of a session shares (cheap to clone).
#[derive(Clone)]
pub struct Services {
    inner: Arc<ServiceSet>,
}

/// The services themselves, behind `Services`' `Arc` (their fields are the engine's own).
pub struct ServiceSet {
    pub(crate) store: Store,
    pub(crate) client: HttpClient,
    pub(crate) registry: ToolRegistry,
    /// The workspace guard, the sandbox, the secrets and the editor the tools run with.
    pub(crate) tool_services: ToolServices,
    pub(crate) surface: SurfaceServices,
    /// Where the tool context works and how it confines: an agent opened on these services
    /// must work there too.
    pub(crate) place: Place,
    /// The session's temp dir, removed with the last agent.
    _temp: Option<keel_sandbox::TempDir>,
    /// Held while a question is put to the person: the agents of a session (a parent and its
    /// subagents) ask one at a time, in the order they asked.
    pub(crate) one_question: tokio::sync::Mutex<()>,
    /// How many history items each session's hook transcript holds (`hook_transcript`).
    pub(crate) transcripts: std::sync::Mutex<std::collections::HashMap<String, usize>>,
}

impl std::ops::Deref for Services {
    type Target = ServiceSet;

    fn deref(&self) -> &ServiceSet {
        &self.inner
    }
}

impl Services {
    pub(crate) fn new(
        store: Store,
        client: HttpClient,
        registry: ToolRegistry,
        tool_services: ToolServices,
        surface: SurfaceServices,
        place: Place,
        temp: Option<keel_sandbox::TempDir>,
    ) -> Services {
        Services {
            inner: Arc::new(ServiceSet {
                store,
                client,
                registry,
                tool_services,
                surface,
                place,
                _temp: temp,
                one_question: tokio::sync::Mutex::new(()),
                transcripts: std::sync::Mutex::default(),
            }),
        }
    }

    /// The session's MCP servers.
    pub fn mcp(&self) -> &Arc<keel_mcp::McpHub> {
        &self.surface.mcp
    }

    /// The session's custom slash commands.
    pub fn commands(&self) -> &Arc<CustomCommands> {
        &self.surface.commands
    }

    /// The agents a `task` may start.
    pub fn agents(&self) -> &Arc<AgentDefinitions> {
        &self.surface.agents
    }

    /// What the context block lists before its environment: the agents, then the skills (none
    /// when there are no skills, so such a session's block is as before skills).
    pub(crate) fn context_lists(&self) -> String {
        format!(
            "{}{}",
            self.surface.agents.context_section(),
            self.surface.skills.context_section()
        )
    }

    /// The hooks in force.
    pub fn hooks(&self) -> &Arc<crate::hook_set::Hooks> {
        &self.surface.hooks
    }

    /// The session's temp dir, where there is one.
    pub(crate) fn temp_dir(&self) -> Option<&std::path::Path> {
        self._temp.as_ref().map(|temp| temp.path())
    }

    /// The skills the `skill` tool loads.
    pub fn skills(&self) -> &Arc<crate::skills::Skills> {
        &self.surface.skills
    }

    /// Who is asked about tool calls.
    pub fn approver(&self) -> &Arc<dyn Approver> {
        &self.surface.approver
    }

    /// Whether `other` is these very services (agents opened on one session share them).
    pub fn same_as(&self, other: &Services) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// Where a session's services work: its workspace and extra directories as its settings named
/// them, and how its commands are confined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub workspace: std::path::PathBuf,
    pub extra_dirs: Vec<std::path::PathBuf>,
    /// The sandbox's mode and keel's home (`None`: commands unconfined).
    pub sandbox: Option<(keel_sandbox::SandboxMode, std::path::PathBuf)>,
}

impl Place {
    pub(crate) fn of(settings: &crate::settings::AgentSettings) -> Place {
        Place {
            workspace: settings.workspace.clone(),
            extra_dirs: settings.extra_dirs.clone(),
            sandbox: settings
                .sandbox
                .as_ref()
                .map(|setup| (setup.settings.mode, setup.keel_home.clone())),
        }
    }
}
