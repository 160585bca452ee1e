//! keel's controller and turn engine. One `Controller` per session, shared by every front end.
//!
//! Invariants:
//! - One turn at a time per session (a second `submit` is refused as busy), and one process
//!   per session (the store lease).
//! - Cancellation bumps a generation counter; whatever belongs to an older generation (a late
//!   reply, a tool result) is never committed and never starts a tool.
//! - Loading a session settles interrupted receipts (`started` → `unknown`, `pending` →
//!   `not_started`) and gives every unanswered tool call a result that says so; nothing is
//!   re-run.
//! - Events reach every subscriber in one order; all but the streaming deltas are also indexed
//!   in the store for replay.

mod admitted;
mod approval;
mod call;
mod checkpoint;
mod command_steps;
mod compaction;
mod confinement;
mod context;
mod context_parts;
mod custom_commands;
mod error;
mod exchange;
mod host;
mod input;
mod kept_versions;
mod leftovers;
mod load;
mod modes;
mod progress;
mod project_context;
mod prompt;
mod recovery;
mod rewind;
mod rewrite;
mod session_diff;
mod snapshot;
mod subscribers;
mod tools_round;
mod turn;
mod turn_run;
mod unconfined;

pub use admitted::AdmittedTurn;
mod spend;
pub use approval::{
    AlwaysAllowed, Approval, ApprovalRequest, Approver, HeadlessApprover, LONGEST_NOTE,
};
pub use confinement::SandboxSetup;
pub use context_parts::ContextParts;
pub use custom_commands::{CommandLayer, CustomCommand, CustomCommands};
pub use error::AgentError;
pub use host::{Host, Transcript};
pub use input::{INIT_PROMPT, Input, Line, SLASH_COMMANDS, SurfaceCommand, builtin_names};
pub use keel_store::{RevisionInfo, SessionInfo, SessionOverview, StoreError, StoredItem};
pub use project_context::{
    ContextReport, ContextSettings, DEFAULT_INSTRUCTION_BYTES, Reloaded, instruction_paths,
};
pub use prompt::{KIMI_ACTION_POLICY, SYSTEM_PROMPT, action_policy_for};
pub use recovery::readiness::{RERUN_WITH_YES, Readiness};
pub use recovery::record::{RecordState, RecoveryRecord, StoredRecord};
/// How a stored recovery record is read and written (the fuzz targets check both).
pub use recovery::record::{decode as decode_record, encode as encode_record};
pub use recovery::refusal::RecoveryRefusal;
pub use rewind::{RewindReport, RewindScope, SessionLease};
pub use session_diff::{ChangedFile, SessionDiff};
pub use snapshot::retire_old_stores as retire_old_snapshot_stores;
pub use spend::SessionSpend;
pub use turn::{TurnOutcome, person_text};

use keel_llm::client::HttpClient;
use keel_llm::{KeySource, ProviderProfile};
use keel_store::{Lease, Store};
use keel_tools::{PermissionMode, PermissionPolicy, ToolContext, ToolRegistry, WorkspaceGuard};
use keel_types::{Event, EventBody, Item};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use subscribers::Subscriber;
use tokio::sync::{mpsc, watch};

/// Everything a session needs besides its history.
pub struct AgentSettings {
    pub profile: ProviderProfile,
    pub model: String,
    pub policy: PermissionPolicy,
    pub max_rounds: u32,
    /// Compact when a request reaches this share of the usable window (`compact_at`).
    pub compact_at: f64,
    pub workspace: PathBuf,
    pub extra_dirs: Vec<PathBuf>,
    /// Who holds the session lease, for the error another process sees.
    pub holder: String,
    /// keel's secrets: kept out of tool environments and redacted from tool results.
    pub secrets: keel_types::Secrets,
    /// An editor the file tools go through (ACP clients with the `fs` capability).
    pub editor: Option<Arc<dyn keel_tools::EditorFiles>>,
    /// The session's MCP servers (started by the surface; empty when none is declared).
    pub mcp: Arc<keel_mcp::McpHub>,
    /// What the workspace's untrusted project files asked for and did not get: announced as
    /// `trust/ignored` events after `session/started`.
    pub untrusted: Vec<keel_types::IgnoredSetting>,
    /// How commands are confined (`None`: unconfined, as in tests of the engine alone).
    pub sandbox: Option<SandboxSetup>,
    /// Where the session's project instructions come from.
    pub context: ContextSettings,
    /// The session's custom slash commands (`.keel/commands/`, `$KEEL_HOME/commands/`).
    pub commands: Arc<CustomCommands>,
    /// The most bytes of file checkpoints the session keeps, and of the workspace's snapshot
    /// store (`checkpoint_max_bytes`).
    pub checkpoint_max_bytes: u64,
    /// The model's action policy goes into the system prompt where one applies (`keel eval`'s
    /// `policy` variant only; never a config key).
    pub action_policy: bool,
}

pub enum SessionChoice {
    New,
    Resume(String),
}

pub(crate) struct SessionState {
    pub history: Vec<Item>,
    /// The store's history revision `history` is (a compaction names it as the one it replaces).
    pub revision: u64,
    pub next_seq: u64,
    pub last_turn: u64,
    /// `history[..n]` is projected with the fault projection (a consumed recovery).
    pub repair: Option<usize>,
    /// Recovery ids consumed by this process (kept even if the persist was uncertain).
    pub spent: std::collections::HashSet<String>,
    /// Tokens of the context, measured and estimated.
    pub meter: context::ContextMeter,
    /// The MCP tools every request of the current turn offers (taken at the turn boundary).
    pub mcp_tools: Vec<keel_types::ToolSpec>,
    /// No turn boundary has passed in this process: the first takes the MCP tools as the
    /// session's own (servers may still have been starting when it opened), not as a change
    /// of a prefix already sent — nothing was sent yet.
    pub mcp_opening: bool,
    /// The person stopped the model's last answer while it streamed: the next prompt tells
    /// the model so, inside its user item (this process only).
    pub interrupted: bool,
    /// The context block read when the session opened without one: committed with the next
    /// user item.
    pub pending_context: Option<keel_types::ContextBlock>,
    /// The "after" snapshot of the last command batch, taken while the next request is out:
    /// awaited before the next snapshot and before the turn ends.
    pub pending_snapshot: Option<snapshot::PendingSnapshot>,
    /// This turn bracketed a command: the snapshot store is kept within budget at its end.
    pub snapshots_taken: bool,
}

impl SessionState {
    /// The history as the provider sees it: the canonical history, with the fault projection
    /// applied to the repaired prefix when a consumed recovery put one in force.
    pub(crate) fn provider_view(
        &self,
        shared: &Shared,
    ) -> Result<std::borrow::Cow<'_, [Item]>, AgentError> {
        Ok(match self.repair {
            Some(boundary) => {
                let receipts = shared.store.receipts(&shared.session.id)?;
                std::borrow::Cow::Owned(recovery::apply_repair(&self.history, boundary, &receipts))
            }
            None => std::borrow::Cow::Borrowed(&self.history),
        })
    }
}

pub(crate) struct Shared {
    pub store: Store,
    pub session: SessionInfo,
    _lease: Lease,
    _open: host::OpenSession,
    pub settings: AgentSettings,
    pub client: HttpClient,
    pub registry: ToolRegistry,
    pub tool_context: ToolContext,
    /// The permission mode in force (the person may change it during the session).
    permission: Mutex<modes::ModeState>,
    pub keys: Arc<dyn KeySource>,
    pub approver: Arc<dyn Approver>,
    subscribers: Mutex<Vec<Subscriber>>,
    pub generation: AtomicU64,
    pub cancel_signal: watch::Sender<u64>,
    pub state: Arc<tokio::sync::Mutex<SessionState>>,
    pub resumed: bool,
    /// Tokens of the turns completed through this controller.
    usage: Mutex<keel_types::Usage>,
    /// The session's totals from its stored turns, and the last event they counted.
    session_usage: Mutex<(u64, SessionSpend)>,
    /// What the running turn's responses used so far, for a turn that ends on an error or a
    /// panic (its `turn/failed` still says it).
    turn_spent: Mutex<(Option<keel_types::Usage>, Option<keel_types::Cost>)>,
    /// The session's temp dir, removed with the controller.
    _temp: Option<keel_sandbox::TempDir>,
    /// Git snapshots of the workspace at each turn's start and end (in a repository).
    pub snapshots: Option<snapshot::Snapshots>,
}

#[derive(Clone)]
pub struct Controller {
    shared: Arc<Shared>,
}

impl Controller {
    pub(crate) fn open(
        store: Store,
        choice: SessionChoice,
        settings: AgentSettings,
        keys: Arc<dyn KeySource>,
        approver: Arc<dyn Approver>,
        claim: impl Fn(&str) -> Result<host::OpenSession, AgentError>,
    ) -> Result<Controller, AgentError> {
        // Off the critical path: the TLS roots (an https provider) and the tool schemas load
        // on other threads while the store is read and written.
        let client = HttpClient::new(settings.profile.connect_timeout)?;
        client.prepare_for(&settings.profile.endpoint());
        let registry = std::thread::spawn(ToolRegistry::new);
        keel_types::startup_trace::mark("client");
        let workspace = settings.workspace.display().to_string();
        let (session, resumed) = match choice {
            SessionChoice::New => {
                let id = new_session_id();
                (
                    store.create_session(
                        &id,
                        &workspace,
                        &settings.profile.name,
                        &settings.model,
                    )?,
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
        let mut loaded = load::load_session(&store, &session.id)?;
        let records: Vec<recovery::record::StoredRecord> = store
            .recovery_records(&session.id)?
            .into_iter()
            .map(|(id, raw)| recovery::record::decode(&id, &raw))
            .collect();
        loaded.repair = recovery::admission::repair_in_force(&records, &loaded.history);
        let scope = recovery::admission::settings_scope(&session.id, &settings);
        if let Some(tokens) = recovery::admission::rejected_tokens(&records, &scope) {
            loaded.meter.rejected(tokens);
        }
        loaded.mcp_tools = settings.mcp.specs();
        let guard =
            WorkspaceGuard::new(&settings.workspace, &settings.extra_dirs).map_err(|source| {
                AgentError::Workspace {
                    workspace: workspace.clone(),
                    source,
                }
            })?;
        keel_types::startup_trace::mark("session loaded");
        // A panic there is a panic here, as if the schemas had been built inline.
        let registry = registry
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        keel_types::startup_trace::mark("tool schemas");
        let (cancel_signal, _) = watch::channel(0);
        // `web_fetch` reaches an internal address only for a host the user's rules allow.
        let rules = settings.policy.clone();
        let (sandbox, temp) = match &settings.sandbox {
            Some(setup) => {
                let (sandbox, temp) = confinement::open(
                    setup,
                    guard.workspace(),
                    &settings.extra_dirs,
                    &session.id,
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
            editor: settings.editor.clone(),
            internal_hosts: keel_tools::HostRule(Arc::new(move |host| {
                rules.names_subject("web_fetch", host)
            })),
            ..ToolContext::new(guard)
        };
        let snapshots = settings.sandbox.as_ref().and_then(|setup| {
            snapshot::Snapshots::for_session(
                tool_context.guard.workspace(),
                &setup.keel_home,
                &session.id,
                tool_context.sandbox.clone(),
            )
            .map(|snapshots| snapshots.keeping_out(tool_context.secrets.clone()))
        });
        if !loaded
            .history
            .iter()
            .any(|item| matches!(item, Item::Context(_)))
        {
            let block = project_context::read(&settings, &tool_context, settings.policy.mode);
            loaded.pending_context = Some(block);
        }
        let permission = Mutex::new(modes::ModeState {
            now: settings.policy.mode,
            // A resumed session is told of a mode that differs from the one it last heard of.
            told: modes::last_told(&loaded.history).unwrap_or(settings.policy.mode),
            before_plan: PermissionMode::Ask,
        });
        let shared = Shared {
            permission,
            store,
            session,
            _lease: lease,
            _open: open,
            settings,
            client,
            registry,
            tool_context,
            keys,
            approver,
            subscribers: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
            cancel_signal,
            state: Arc::new(tokio::sync::Mutex::new(loaded)),
            resumed,
            usage: Mutex::new(keel_types::Usage::default()),
            session_usage: Mutex::new((0, SessionSpend::default())),
            turn_spent: Mutex::new((None, None)),
            _temp: temp,
            snapshots,
        };
        keel_types::startup_trace::mark("controller ready");
        Ok(Controller {
            shared: Arc::new(shared),
        })
    }

    pub fn session(&self) -> &SessionInfo {
        &self.shared.session
    }

    /// The files `prompt` mentions (`@path`), each with whether it names something that
    /// exists, as the attachment will see it (the same guard).
    pub fn mentions(&self, prompt: &str) -> Vec<(String, bool)> {
        keel_tools::mentions(prompt)
            .into_iter()
            .map(|path| {
                let found = keel_tools::names_something(path, &self.shared.tool_context);
                (path.to_string(), found)
            })
            .collect()
    }

    /// The permission mode in force.
    pub fn permission_mode(&self) -> PermissionMode {
        self.shared.permission_mode()
    }

    /// Change the permission mode for the rest of the session: later tool calls are decided
    /// (and commands confined) under it, and the model is told in the next user item. Nothing
    /// sent before changes, so the requests stay prefix-stable.
    pub fn set_permission_mode(&self, mode: PermissionMode) {
        self.shared.switch_mode(mode);
    }

    /// What a typed line means in this session (its custom commands included).
    pub fn parse_line(&self, text: &str) -> Line {
        Line::parse_with(text, &self.shared.settings.commands)
    }

    pub fn settings(&self) -> &AgentSettings {
        &self.shared.settings
    }

    /// How this session's commands are confined, in one line (`None`: no sandbox is set up).
    pub fn sandbox_summary(&self) -> Option<String> {
        let sandbox = self.shared.sandbox_now()?;
        let enforcement = sandbox.enforcement();
        let mut line = enforcement.summary(sandbox.mode);
        if let keel_sandbox::Enforcement::BelowMinimum { .. } = enforcement {
            line.push_str("; every command is asked about");
        }
        Some(line)
    }

    /// A new event stream: every event from now on, in order, never dropped.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Event> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.shared
            .lock_subscribers()
            .push(Subscriber::Unbounded(sender));
        receiver
    }

    /// The stored events after `after_event_id`, then every live event: no gap and no duplicate
    /// at the seam (the log is read and the stream registered under the lock `emit` holds).
    /// Streaming deltas are live only.
    pub fn subscribe_after(
        &self,
        after_event_id: u64,
    ) -> Result<mpsc::UnboundedReceiver<Event>, AgentError> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut subscribers = self.shared.lock_subscribers();
        for stored in self
            .shared
            .store
            .events_after(&self.shared.session.id, after_event_id)?
        {
            let _ = sender.send(stored.event);
        }
        subscribers.push(Subscriber::Unbounded(sender));
        Ok(receiver)
    }

    /// `subscribe_after` for a consumer that may fall behind: at most `capacity` live events
    /// wait for it; past that it is dropped (its stream ends) and it can resume from the last
    /// event id it saw. The turn never waits for a subscriber.
    pub fn subscribe_after_bounded(
        &self,
        after_event_id: u64,
        capacity: usize,
    ) -> Result<mpsc::Receiver<Event>, AgentError> {
        let mut subscribers = self.shared.lock_subscribers();
        let stored = self
            .shared
            .store
            .events_after(&self.shared.session.id, after_event_id)?;
        let (sender, receiver) = mpsc::channel(capacity.max(1) + stored.len());
        for stored in stored {
            let _ = sender.try_send(stored.event);
        }
        subscribers.push(Subscriber::Bounded(sender));
        Ok(receiver)
    }

    /// Announce the session to subscribers (`session/started`, then a `trust/ignored` for each
    /// project value that was not applied).
    pub fn announce(&self) {
        let session = &self.shared.session;
        self.shared.emit(
            None,
            EventBody::SessionStarted {
                workspace: session.workspace.clone(),
                model: format!(
                    "{}/{}",
                    self.shared.settings.profile.name, self.shared.settings.model
                ),
                provider: self.shared.settings.profile.name.clone(),
                resumed: self.shared.resumed,
            },
        );
        for ignored in &self.shared.settings.untrusted {
            self.shared
                .emit(None, EventBody::TrustIgnored(ignored.clone()));
        }
    }

    /// Run one turn to its end (completed, failed or cancelled): a prompt, or an explicit
    /// recovery action, which is admitted (every check, the id bound first) before it runs.
    pub async fn submit(&self, input: Input) -> Result<TurnOutcome, AgentError> {
        self.begin(input)?.run().await
    }

    /// Admit a turn without running it yet: the session is taken (a second `begin` is refused
    /// as busy) and a recovery action is checked and consumed now, so a surface can answer
    /// "accepted" or "refused" before the turn runs (`AdmittedTurn::run`, e.g. in a task).
    pub fn begin(&self, input: Input) -> Result<AdmittedTurn, AgentError> {
        let shared = &self.shared;
        let generation = turn::current_generation(shared);
        let Some(mut state) = admitted::lock_between_turns(&shared.state) else {
            return Err(match input {
                Input::Prompt(_) => AgentError::Busy(shared.session.id.clone()),
                Input::ProtocolRecovery { .. }
                | Input::FinalReadinessRecovery { .. }
                | Input::Compact { .. } => {
                    AgentError::RecoveryRefused(RecoveryRefusal::TurnRunning)
                }
            });
        };
        let input = match input {
            Input::Prompt(text) => turn_run::TurnInput {
                text,
                kind: keel_types::InputKind::User,
                focus: None,
            },
            Input::Compact { recovery_id, focus } => recovery::admission::admit_compaction(
                shared,
                &mut state,
                recovery_id.as_deref(),
                focus.as_deref(),
            )?,
            Input::ProtocolRecovery {
                recovery_id,
                guidance,
            } => recovery::admission::admit_recovery(
                shared,
                &mut state,
                recovery_id.as_deref(),
                guidance.as_deref(),
            )?,
            Input::FinalReadinessRecovery { recovery_id } => {
                recovery::admission::admit_readiness(shared, &mut state, recovery_id.as_deref())?
            }
        };
        Ok(AdmittedTurn {
            shared: self.shared.clone(),
            state,
            input,
            generation,
        })
    }

    /// The id of the pending recovery, if one is pending and no turn is running.
    pub fn pending_recovery(&self) -> Option<String> {
        self.pending_action().map(|pending| pending.recovery_id)
    }

    /// The one admission token every surface renders: the pending recovery action, if one is
    /// pending and no turn is running.
    pub fn pending_action(&self) -> Option<PendingAction> {
        recovery::admission::pending(&self.shared)
    }

    /// The latest recovery record of this session (any state), decoded.
    pub fn latest_recovery(&self) -> Result<Option<StoredRecord>, AgentError> {
        Ok(recovery::stored::load_records(&self.shared)?.pop())
    }

    /// How each turn began (its `turn/started` event's `input_kind`), by turn number; a turn
    /// whose event is not stored (one a fork copied) is missing.
    pub fn turn_inputs(
        &self,
    ) -> Result<std::collections::HashMap<u64, keel_types::InputKind>, AgentError> {
        let events = self.shared.store.events_after(&self.shared.session.id, 0)?;
        Ok(events
            .into_iter()
            .filter_map(|stored| match (stored.event.turn, stored.event.body) {
                (Some(turn), EventBody::TurnStarted { input_kind }) => Some((turn, input_kind)),
                _ => None,
            })
            .collect())
    }

    /// The session's history and receipts as stored.
    pub fn transcript(&self) -> Result<Transcript, AgentError> {
        host::transcript(&self.shared.store, &self.shared.session.id)
    }

    /// The id of the latest stored event: a surface that shows the transcript read after this
    /// call follows events after it (it may see an event whose effect it already shows).
    pub fn last_event_id(&self) -> Result<u64, AgentError> {
        Ok(self.shared.store.last_event_id(&self.shared.session.id)?)
    }

    /// The stored events after `after_event_id` (streaming deltas are never stored).
    pub fn events_after(&self, after_event_id: u64) -> Result<Vec<Event>, AgentError> {
        Ok(self
            .shared
            .store
            .events_after(&self.shared.session.id, after_event_id)?
            .into_iter()
            .map(|stored| stored.event)
            .collect())
    }

    /// Tokens used by the turns this controller completed.
    pub fn usage(&self) -> keel_types::Usage {
        *self.shared.lock_usage()
    }

    /// Tokens used by every turn of the session, in any process, from its stored
    /// `turn/completed` and `turn/failed` events (a failed or stopped turn's responses are
    /// billed too); each call reads only the events stored since the last. The cost is
    /// `partial` where some of those tokens have no price (another model, another currency).
    pub fn session_usage(&self) -> Result<SessionSpend, AgentError> {
        let mut counted = self
            .shared
            .session_usage
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (last, spend) = &mut *counted;
        for stored in self
            .shared
            .store
            .events_after(&self.shared.session.id, *last)?
        {
            let (turn, cost) = match &stored.event.body {
                keel_types::EventBody::TurnCompleted {
                    usage: turn, cost, ..
                } => (Some(turn), cost),
                keel_types::EventBody::TurnFailed {
                    usage: turn, cost, ..
                } => (turn.as_ref(), cost),
                _ => (None, &None),
            };
            if let Some(turn) = turn {
                spend.add(turn, cost.as_ref());
            }
            *last = (*last).max(stored.event.id.unwrap_or(*last));
        }
        Ok(spend.clone())
    }

    /// How full the model's context is (after the last response, or estimated after a
    /// compaction), when the window is known; `None` while a turn runs. Before anything was
    /// counted in this process (a resumed session, say) it is the next request's size as the
    /// meter estimates it, kept until a response counts it.
    pub fn context_use(&self) -> Option<keel_types::ContextUse> {
        let mut state = self.shared.state.try_lock().ok()?;
        let window = compaction::window(&self.shared)?;
        if let Some(known) = state.meter.last_use(Some(window)) {
            return Some(known);
        }
        let history = state.provider_view(&self.shared).ok()?;
        let request = self.shared.project(&history, &state.mcp_tools).ok()?;
        let estimate = state.meter.tokens_of_bytes(request.body.len());
        state.meter.set_estimate(estimate);
        state.meter.last_use(Some(window))
    }

    /// The request the next turn starts from: system prompt, tools and the provider's view of
    /// the history, projected exactly as it would be sent (refused while a turn runs).
    pub fn next_request(&self) -> Result<keel_llm::ProjectedRequest, AgentError> {
        let shared = &self.shared;
        let Ok(state) = shared.state.try_lock() else {
            return Err(AgentError::Busy(shared.session.id.clone()));
        };
        let history = state.provider_view(shared)?;
        shared
            .project(&history, &state.mcp_tools)
            .map_err(|error| AgentError::Projection(error.to_string()))
    }

    /// The revisions of this session's history, oldest first.
    pub fn revisions(&self) -> Result<Vec<keel_store::RevisionInfo>, AgentError> {
        Ok(self.shared.store.revisions(&self.shared.session.id)?)
    }

    /// Cancel the running turn, if any: its stream and tools stop, nothing late is committed.
    pub fn cancel(&self) {
        let next = self.shared.generation.fetch_add(1, Ordering::SeqCst) + 1;
        self.shared.cancel_signal.send_replace(next);
    }

    pub fn is_busy(&self) -> bool {
        self.shared.state.try_lock().is_err()
    }
}

impl Shared {
    /// The request for `history` with this session's system prompt and tool specs: the one
    /// projection every request, estimate and preview goes through (prefix-stable).
    pub(crate) fn project(
        &self,
        history: &[Item],
        mcp_tools: &[keel_types::ToolSpec],
    ) -> Result<keel_llm::ProjectedRequest, keel_llm::project::ProjectionError> {
        let settings = &self.settings;
        // Built-in tools first, then the turn's MCP tools by server and name: a stable order.
        let mut specs = self.registry.specs();
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

    fn lock_subscribers(&self) -> std::sync::MutexGuard<'_, Vec<Subscriber>> {
        self.subscribers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock_usage(&self) -> std::sync::MutexGuard<'_, keel_types::Usage> {
        self.usage
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The permission rules with the mode in force now.
    pub(crate) fn policy_now(&self) -> PermissionPolicy {
        let mut policy = self.settings.policy.clone();
        policy.mode = self.permission_mode();
        policy
    }

    /// The command sandbox as the mode in force now confines commands.
    pub(crate) fn sandbox_now(&self) -> Option<keel_tools::CommandSandbox> {
        let mut sandbox = self.tool_context.sandbox.clone()?;
        let configured = self
            .settings
            .sandbox
            .as_ref()
            .map_or(keel_sandbox::SandboxMode::Off, |setup| setup.settings.mode);
        sandbox.mode = confinement::effective_mode(configured, self.permission_mode());
        Some(sandbox)
    }

    /// Send an event to every subscriber; index all but streaming deltas in the store, and
    /// stamp them with their index. Indexing and sending happen under the subscribers' lock,
    /// so a replaying subscriber never misses or repeats an event.
    pub(crate) fn emit(&self, turn: Option<u64>, body: EventBody) {
        let mut event = Event {
            id: None,
            session_id: self.session.id.clone(),
            turn,
            body,
        };
        let mut subscribers = self.lock_subscribers();
        if !event.body.is_transient() {
            // The event index is derived data: a failed write must not fail the turn.
            event.id = self.store.append_event(&event).ok();
        }
        subscribers.retain(|subscriber| subscriber.deliver(&event));
    }
}

/// The recovery action a surface may offer now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingAction {
    pub recovery_id: String,
    /// `ProtocolRecovery` or `FinalReadinessRecovery`.
    pub action: keel_types::InputKind,
}

fn new_session_id() -> String {
    use rand::Rng;
    let bytes: [u8; 8] = rand::rng().random();
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
