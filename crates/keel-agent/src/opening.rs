//! Opening an agent: the session row made or found, the claim and the lease taken, the history
//! loaded and settled, and for a session's first agent the services built.
//!
//! Invariants:
//! - One process per session (the store lease) and one agent per session in this process
//!   (the host's claim), both taken before anything is loaded and held until the agent is
//!   dropped.
//! - A subagent's child session is never opened on its own (it runs with its agent's tools and
//!   mode, for its parent's task only): resuming one is refused, naming its parent.
//! - Loading a session settles interrupted receipts (`started` → `unknown`, `pending` →
//!   `not_started`) and gives every unanswered tool call a result that says so; nothing is
//!   re-run.
//! - The slow parts of a first open (TLS roots, tool schemas) load on other threads while the
//!   store is read and written.

use crate::agent::Agent;
use crate::agent_state::AgentState;
use crate::cancellation::Cancellation;
use crate::claim::OpenSession;
use crate::confinement;
use crate::error::AgentError;
use crate::event_bus::EventBus;
use crate::mode_notes::{ModeState, last_told};
use crate::services::{Place, Services, SurfaceServices};
use crate::settings::{AgentSettings, SessionChoice};
use crate::snapshot::{CommandBracket, Snapshots};
use crate::spend::Spend;
use crate::{instructions, load, recovery};
use keel_llm::client::HttpClient;
use keel_store::{Lease, SessionInfo, Store};
use keel_tools::{PermissionMode, ToolRegistry, ToolServices, WorkspaceGuard};
use keel_types::Item;
use std::sync::{Arc, Mutex};

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
        SessionChoice::Resume(id) => {
            let session = store.require_session(&id)?;
            // A child runs for its parent's task only, with its agent's tools and mode.
            if let (Some(parent), Some(agent)) = (&session.parent, &session.agent) {
                return Err(AgentError::Agents(format!(
                    "session {id} is the `{agent}` subagent's session of {parent}: it is not \
                     continued on its own (open {parent}, or fork it: `keel session fork {id}`)"
                )));
            }
            (session, true)
        }
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
        let tool_services = ToolServices {
            sandbox,
            secrets: settings.secrets.clone(),
            editor: surface.editor.clone(),
            internal_hosts: keel_tools::HostRule(Arc::new(move |host| {
                rules.names_subject("web_fetch", host)
            })),
            ..ToolServices::new(guard)
        };
        let place = Place::of(&settings);
        let services = Services::new(store, client, registry, tool_services, surface, place, temp);
        let agent = Agent::assemble(services, settings, held, loaded, None);
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
        let asked = Place::of(&settings);
        if asked != services.place {
            return Err(AgentError::Agents(format!(
                "an agent on this session's services works in {} ({:?}); one was asked for in \
                 {} ({:?})",
                services.place.workspace.display(),
                services.place.sandbox.as_ref().map(|(mode, _)| mode),
                asked.workspace.display(),
                asked.sandbox.as_ref().map(|(mode, _)| mode),
            )));
        }
        let held = hold(&services.store, choice, &settings, claim)?;
        let mut loaded = load_state(&services.store, &held.session, &settings)?;
        loaded.mcp_tools = services.surface.mcp.specs();
        Ok(Agent::assemble(services, settings, held, loaded, None))
    }

    /// A child of `parent` in the session row `session` made for it (`child_agent.rs`): on the
    /// parent's services and claimed on its host, with `context` (the parent's block, byte for
    /// byte) as the block its first prompt sends.
    pub(crate) fn open_child(
        parent: &Agent,
        session: SessionInfo,
        settings: AgentSettings,
        context: keel_types::ContextBlock,
        role: crate::agent_role::AgentRole,
    ) -> Result<Agent, AgentError> {
        let services = parent.services.clone();
        let open = parent._open.claim_another(&session.id)?;
        let lease = services
            .store
            .acquire_lease(&session.id, &settings.holder)?;
        let held = Held {
            session,
            resumed: false,
            open,
            lease,
        };
        let mut loaded = load_state(&services.store, &held.session, &settings)?;
        loaded.mcp_tools = services.surface.mcp.specs();
        let mut agent = Agent::assemble(services, settings, held, loaded, Some(context));
        agent.role = Some(role);
        // The parent's snapshots bracket its `task` batch (a rewind of the parent's turn undoes
        // what its children changed); children take none of their own, which would race for
        // the same repository.
        agent.snapshots = None;
        if let Ok(mut state) = agent.state.try_lock() {
            state.bracket = CommandBracket::new(None, agent.services.tool_services.secrets.clone());
        }
        Ok(agent)
    }

    /// The agent on a session held and loaded; `context`: the block its first prompt sends
    /// (`None`: read from the workspace when the history has none).
    fn assemble(
        services: Services,
        settings: AgentSettings,
        held: Held,
        mut loaded: AgentState,
        context: Option<keel_types::ContextBlock>,
    ) -> Agent {
        let tool_services = &services.tool_services;
        let snapshots = settings.sandbox.as_ref().and_then(|setup| {
            Snapshots::for_session(
                tool_services.guard.workspace(),
                &setup.keel_home,
                &held.session.id,
                tool_services.sandbox.clone(),
            )
            .map(|snapshots| snapshots.keeping_out(tool_services.secrets.clone()))
        });
        if !loaded
            .history
            .iter()
            .any(|item| matches!(item, Item::Context(_)))
        {
            let block = context.unwrap_or_else(|| {
                instructions::read(
                    &settings,
                    tool_services,
                    settings.policy.mode,
                    &services.context_lists(),
                )
            });
            loaded.pending_context = Some(block);
        } else {
            // A resumed session hears of skills found since, once, with its next prompt.
            loaded.skills_note = services.skills().new_since(&loaded.history);
        }
        loaded.bracket = CommandBracket::new(snapshots.clone(), tool_services.secrets.clone());
        let modes = Arc::new(Mutex::new(ModeState {
            now: settings.policy.mode,
            // A resumed session is told of a mode that differs from the one it last heard of.
            told: last_told(&loaded.history).unwrap_or(settings.policy.mode),
            before_plan: PermissionMode::Ask,
        }));
        let events = Arc::new(EventBus::new(&held.session.id, services.store.clone()));
        let jobs = crate::jobs::open(&services.store, &held.session.id, events.clone());
        Agent {
            events,
            jobs,
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
            role: None,
        }
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
