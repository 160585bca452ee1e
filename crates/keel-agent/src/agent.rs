//! One agent: a session's history, events, cancellation, spend and permission mode, run on
//! services it shares with every other agent of the session.
//!
//! Invariants:
//! - One process per session (the store lease) and one agent per session in this process
//!   (the host's claim), both held until the agent is dropped.
//! - Loading a session settles interrupted receipts (`started` → `unknown`, `pending` →
//!   `not_started`) and gives every unanswered tool call a result that says so; nothing is
//!   re-run.
//! - Every request, estimate and preview is projected by `Agent::project`: the system prompt,
//!   the registry's built-in tools, then the turn's MCP tools — one prefix for every agent
//!   on the same model and services.

use crate::agent_state::AgentState;
use crate::cancellation::Cancellation;
use crate::confinement::{self, SandboxSetup};
use crate::error::AgentError;
use crate::event_bus::EventBus;
use crate::host::OpenSession;
use crate::modes::{self, ModeState};
use crate::services::{Services, SurfaceServices};
use crate::settings::{AgentSettings, SessionChoice};
use crate::snapshot::{CommandBracket, Snapshots};
use crate::spend::Spend;
use crate::{load, project_context, prompt, recovery};
use keel_llm::client::HttpClient;
use keel_store::{Lease, SessionInfo, Store};
use keel_tools::{PermissionMode, PermissionPolicy, ToolContext, ToolRegistry, WorkspaceGuard};
use keel_types::{EventBody, Item};
use std::sync::{Arc, Mutex};

/// One agent of a session (see the module invariants).
pub(crate) struct Agent {
    pub services: Services,
    pub settings: AgentSettings,
    pub session: SessionInfo,
    _lease: Lease,
    _open: OpenSession,
    pub events: Arc<EventBus>,
    pub cancellation: Arc<Cancellation>,
    pub state: Arc<tokio::sync::Mutex<AgentState>>,
    pub spend: Spend,
    /// The permission mode in force (the person may change it during the session).
    pub(crate) modes: Mutex<ModeState>,
    pub resumed: bool,
    /// Git snapshots of the workspace at each turn's start and end (in a repository).
    pub snapshots: Option<Snapshots>,
}

/// A session row made or found, and the claim and lease that hold it for this agent.
struct Held {
    session: SessionInfo,
    resumed: bool,
    open: OpenSession,
    lease: Lease,
}

fn hold(
    store: &Store,
    choice: SessionChoice,
    settings: &AgentSettings,
    claim: impl Fn(&str) -> Result<OpenSession, AgentError>,
) -> Result<Held, AgentError> {
    let workspace = settings.workspace.display().to_string();
    let (session, resumed) = match choice {
        SessionChoice::New => {
            let id = new_session_id();
            (
                store.create_session(&id, &workspace, &settings.profile.name, &settings.model)?,
                false,
            )
        }
        SessionChoice::Resume(id) => (store.require_session(&id)?, true),
    };
    keel_types::startup_trace::mark("session row");
    let open = claim(&session.id)?;
    let lease = store.acquire_lease(&session.id, &settings.holder)?;
    keel_types::startup_trace::mark("lease");
    if resumed {
        store.set_session_model(&session.id, &settings.profile.name, &settings.model)?;
    }
    Ok(Held {
        session,
        resumed,
        open,
        lease,
    })
}

impl Agent {
    /// The first agent of a session: its services are built here (the client, the tool
    /// schemas, the sandbox with the session's temp dir).
    pub(crate) fn open_first(
        store: Store,
        choice: SessionChoice,
        settings: AgentSettings,
        surface: SurfaceServices,
        claim: impl Fn(&str) -> Result<OpenSession, AgentError>,
    ) -> Result<Agent, AgentError> {
        // Off the critical path: the TLS roots (an https provider) and the tool schemas load
        // on other threads while the store is read and written.
        let client = HttpClient::new(settings.profile.connect_timeout)?;
        client.prepare_for(&settings.profile.endpoint());
        let registry = std::thread::spawn(ToolRegistry::new);
        keel_types::startup_trace::mark("client");
        let held = hold(&store, choice, &settings, claim)?;
        let mut loaded = load_state(&store, &held.session, &settings)?;
        loaded.mcp_tools = surface.mcp.specs();
        let guard =
            WorkspaceGuard::new(&settings.workspace, &settings.extra_dirs).map_err(|source| {
                AgentError::Workspace {
                    workspace: settings.workspace.display().to_string(),
                    source,
                }
            })?;
        keel_types::startup_trace::mark("session loaded");
        // A panic there is a panic here, as if the schemas had been built inline.
        let registry = registry
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        keel_types::startup_trace::mark("tool schemas");
        // `web_fetch` reaches an internal address only for a host the user's rules allow.
        let rules = settings.policy.clone();
        let (sandbox, temp) = match &settings.sandbox {
            Some(setup) => {
                let (sandbox, temp) = confinement::open(
                    setup,
                    guard.workspace(),
                    &settings.extra_dirs,
                    &held.session.id,
                    settings.policy.mode,
                )
                .map_err(|cause| AgentError::SessionTemp {
                    dir: setup.keel_home.join("tmp").display().to_string(),
                    cause,
                })?;
                (Some(sandbox), Some(temp))
            }
            None => (None, None),
        };
        let tool_context = ToolContext {
            sandbox,
            secrets: settings.secrets.clone(),
            editor: surface.editor.clone(),
            internal_hosts: keel_tools::HostRule(Arc::new(move |host| {
                rules.names_subject("web_fetch", host)
            })),
            ..ToolContext::new(guard)
        };
        let services = Services::new(store, client, registry, tool_context, surface, temp);
        let agent = Agent::assemble(services, settings, held, loaded);
        keel_types::startup_trace::mark("controller ready");
        Ok(agent)
    }

    /// Another agent on `services` (a session of its own, in the same workspace, sharing the
    /// client, the sandbox, the store and the approver).
    pub(crate) fn open_on(
        services: Services,
        choice: SessionChoice,
        settings: AgentSettings,
        claim: impl Fn(&str) -> Result<OpenSession, AgentError>,
    ) -> Result<Agent, AgentError> {
        let held = hold(&services.store, choice, &settings, claim)?;
        let mut loaded = load_state(&services.store, &held.session, &settings)?;
        loaded.mcp_tools = services.surface.mcp.specs();
        Ok(Agent::assemble(services, settings, held, loaded))
    }

    fn assemble(
        services: Services,
        settings: AgentSettings,
        held: Held,
        mut loaded: AgentState,
    ) -> Agent {
        let tool_context = &services.tool_context;
        let snapshots = settings.sandbox.as_ref().and_then(|setup| {
            Snapshots::for_session(
                tool_context.guard.workspace(),
                &setup.keel_home,
                &held.session.id,
                tool_context.sandbox.clone(),
            )
            .map(|snapshots| snapshots.keeping_out(tool_context.secrets.clone()))
        });
        if !loaded
            .history
            .iter()
            .any(|item| matches!(item, Item::Context(_)))
        {
            let block = project_context::read(&settings, tool_context, settings.policy.mode);
            loaded.pending_context = Some(block);
        }
        loaded.bracket = CommandBracket::new(snapshots.clone(), tool_context.secrets.clone());
        let modes = Mutex::new(ModeState {
            now: settings.policy.mode,
            // A resumed session is told of a mode that differs from the one it last heard of.
            told: modes::last_told(&loaded.history).unwrap_or(settings.policy.mode),
            before_plan: PermissionMode::Ask,
        });
        Agent {
            events: Arc::new(EventBus::new(&held.session.id, services.store.clone())),
            services,
            settings,
            session: held.session,
            _lease: held.lease,
            _open: held.open,
            cancellation: Cancellation::new(),
            state: Arc::new(tokio::sync::Mutex::new(loaded)),
            spend: Spend::default(),
            modes,
            resumed: held.resumed,
            snapshots,
        }
    }

    /// The request for `history` with this session's system prompt and tool specs: the one
    /// projection every request, estimate and preview goes through (prefix-stable).
    pub(crate) fn project(
        &self,
        history: &[Item],
        mcp_tools: &[keel_types::ToolSpec],
    ) -> Result<keel_llm::ProjectedRequest, keel_llm::project::ProjectionError> {
        let settings = &self.settings;
        // Built-in tools first, then the turn's MCP tools by server and name: a stable order.
        let mut specs = self.services.registry.specs();
        specs.extend_from_slice(mcp_tools);
        let system = prompt::system_prompt(
            settings.action_policy,
            &settings.model,
            settings.profile.reasoning_protocol,
        );
        keel_llm::project(
            &settings.profile,
            &keel_llm::ProjectionInput {
                model: &settings.model,
                system: &system,
                tools: &specs,
                history,
            },
        )
    }

    /// The permission rules with the mode in force now.
    pub(crate) fn policy_now(&self) -> PermissionPolicy {
        let mut policy = self.settings.policy.clone();
        policy.mode = self.permission_mode();
        policy
    }

    /// The command sandbox as the mode in force now confines commands.
    pub(crate) fn sandbox_now(&self) -> Option<keel_tools::CommandSandbox> {
        let mut sandbox = self.services.tool_context.sandbox.clone()?;
        let configured = self
            .settings
            .sandbox
            .as_ref()
            .map_or(keel_sandbox::SandboxMode::Off, |setup: &SandboxSetup| {
                setup.settings.mode
            });
        sandbox.mode = confinement::effective_mode(configured, self.permission_mode());
        Some(sandbox)
    }

    /// Send an event from this agent (see `event_bus.rs`).
    pub(crate) fn emit(&self, turn: Option<u64>, body: EventBody) {
        self.events.emit(turn, body);
    }
}

/// The state of session `session` as stored, with what its recovery records put in force.
fn load_state(
    store: &Store,
    session: &SessionInfo,
    settings: &AgentSettings,
) -> Result<AgentState, AgentError> {
    let mut loaded = load::load_session(store, &session.id)?;
    let records: Vec<recovery::record::StoredRecord> = store
        .recovery_records(&session.id)?
        .into_iter()
        .map(|(id, raw)| recovery::record::decode(&id, &raw))
        .collect();
    loaded.repair = recovery::admission::repair_in_force(&records, &loaded.history);
    let scope = recovery::admission::settings_scope(&session.id, settings);
    if let Some(tokens) = recovery::admission::rejected_tokens(&records, &scope) {
        loaded.meter.rejected(tokens);
    }
    Ok(loaded)
}

/// A new session's id: 16 hex digits.
pub(crate) fn new_session_id() -> String {
    use rand::Rng;
    let bytes: [u8; 8] = rand::rng().random();
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
