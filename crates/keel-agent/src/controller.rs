//! The `Controller`: the one face every surface drives a session through. Its methods
//! delegate to the modules that do the work; it holds one agent and nothing else.
//!
//! Invariants:
//! - One turn at a time per session: a second `begin` is refused as busy (a recovery action
//!   as refused, the turn running).
//! - Cancellation moves the agent's generation on: whatever belongs to an older generation (a
//!   late reply, a tool result) is never committed and never starts a tool.
//! - Events reach every subscriber in one order; all but the streaming deltas are also indexed
//!   in the store for replay.

use crate::admitted::{self, AdmittedTurn};
use crate::agent::Agent;
use crate::claim::OpenSession;
use crate::error::AgentError;
use crate::input::{Input, Line};
use crate::instructions::{ContextReport, Reloaded};
use crate::recovery::admission::PendingAction;
use crate::recovery::record::StoredRecord;
use crate::recovery::refusal::RecoveryRefusal;
use crate::request_prefix::RequestPrefix;
use crate::rewind::{BetweenTurns, RewindReport, RewindScope};
use crate::services::{Services, SurfaceServices};
use crate::session_diff::SessionDiff;
use crate::settings::{AgentSettings, SessionChoice};
use crate::spend::SessionSpend;
use crate::transcript::{self, Transcript};
use crate::turn_run::TurnOutcome;
use crate::window_parts::WindowParts;
use crate::{compaction, recovery, turn_run};
use keel_store::{SessionInfo, Store};
use keel_tools::PermissionMode;
use keel_types::{Event, EventBody};
use std::sync::Arc;
use tokio::sync::mpsc;

/// A session's controller (cheap to clone: every clone drives the same agent).
#[derive(Clone)]
pub struct Controller {
    agent: Arc<Agent>,
}

/// A child opened: its controller, and the mode its agent asked for and did not get (looser
/// than its parent's), to be said.
pub struct ChildOpened {
    pub controller: Controller,
    pub mode_refused: Option<PermissionMode>,
}

impl Controller {
    /// The first agent of a session, with services built for it.
    pub(crate) fn open(
        store: Store,
        choice: SessionChoice,
        settings: AgentSettings,
        surface: SurfaceServices,
        claim: impl Fn(&str) -> Result<OpenSession, AgentError>,
    ) -> Result<Controller, AgentError> {
        let agent = Agent::open_first(store, choice, settings, surface, claim)?;
        Ok(Controller {
            agent: Arc::new(agent),
        })
    }

    /// Another agent on `services`: a session of its own sharing the client, the sandbox, the
    /// store and the approver.
    pub(crate) fn open_on(
        services: Services,
        choice: SessionChoice,
        settings: AgentSettings,
        claim: impl Fn(&str) -> Result<OpenSession, AgentError>,
    ) -> Result<Controller, AgentError> {
        let agent = Agent::open_on(services, choice, settings, claim)?;
        Ok(Controller {
            agent: Arc::new(agent),
        })
    }

    /// What this session shares with every agent opened on it.
    pub fn services(&self) -> &Services {
        &self.agent.services
    }

    /// From now on, `parent`'s subscribers also see this session's events (stamped with this
    /// session's id), and cancelling `parent` cancels this session's turn.
    /// Refused where `parent` is this session or already follows it.
    pub fn follow(&self, parent: &Controller) -> Result<(), AgentError> {
        if !self.agent.events.forward_to(parent.agent.events.clone()) {
            return Err(AgentError::Agents(format!(
                "session {} cannot follow session {}: it would follow itself",
                self.agent.session.id, parent.agent.session.id
            )));
        }
        parent.agent.cancellation.adopt(&self.agent.cancellation);
        Ok(())
    }

    /// Open a child session running `definition` — a subagent for `description`, at most
    /// `max_rounds` rounds a turn — that follows this one (`child_agent.rs`).
    pub async fn open_child(
        &self,
        definition: &crate::agent_definitions::AgentDefinition,
        description: &str,
        max_rounds: u32,
    ) -> Result<ChildOpened, AgentError> {
        // Between turns: a running turn holds the state (the engine opens its children with
        // the state in hand).
        let context = crate::child_agent::parents_block(&*self.agent.state.lock().await)?;
        let (child, mode_refused) =
            crate::child_agent::open(&self.agent, context, definition, description, max_rounds)?;
        let controller = Controller {
            agent: Arc::new(child),
        };
        controller.follow(self)?;
        Ok(ChildOpened {
            controller,
            mode_refused,
        })
    }

    pub fn session(&self) -> &SessionInfo {
        &self.agent.session
    }

    /// The session's background jobs, in the order they started (any time, during a turn
    /// too: nothing here waits for the turn).
    pub fn jobs(&self) -> Vec<keel_tools::jobs::JobView> {
        self.agent.jobs.list()
    }

    /// The last lines a background job printed (up to 2 KB, redacted), for a surface to show;
    /// `None` when keel has none of its output.
    pub fn job_tail(&self, job: &str) -> Option<String> {
        self.agent.jobs.tail(job, 2048)
    }

    /// How many of the session's background jobs run now.
    pub fn running_jobs(&self) -> usize {
        self.agent.jobs.running()
    }

    /// Stop a background job, as `job_kill` does; what happened, in words. The model hears
    /// of its end with the next note.
    pub async fn kill_job(&self, job: &str) -> Result<String, String> {
        let output = self.agent.jobs.kill_for_person(job).await;
        if output.is_error {
            Err(output.content)
        } else {
            Ok(output.content)
        }
    }

    /// Hold the session's background jobs alive while this controller is replaced by one on the
    /// same session (a model switch): the next agent of the session takes them over.
    pub fn keep_jobs(&self) -> crate::jobs::JobsKept {
        crate::jobs::keep(&self.agent.jobs)
    }

    /// End the session's background jobs now (the session ends: exit, `/clear`, a switch,
    /// serve's shutdown). Dropping the last controller does it too.
    pub fn end_jobs(&self) {
        self.agent
            .jobs
            .end_all(keel_tools::jobs::EndCause::SessionEnded);
    }

    /// The files `prompt` mentions (`@path`), each with whether it names something that
    /// exists, as the attachment will see it (the same guard).
    pub fn mentions(&self, prompt: &str) -> Vec<(String, bool)> {
        keel_tools::mentions(prompt)
            .into_iter()
            .map(|path| {
                let found = keel_tools::names_something(path, &self.agent.services.tool_services);
                (path.to_string(), found)
            })
            .collect()
    }

    /// The permission mode in force.
    pub fn permission_mode(&self) -> PermissionMode {
        self.agent.permission_mode()
    }

    /// Change the permission mode for the rest of the session: later tool calls are decided
    /// (and commands confined) under it, and the model is told in the next user item. Nothing
    /// sent before changes, so the requests stay prefix-stable.
    pub fn set_permission_mode(&self, mode: PermissionMode) {
        self.agent.switch_mode(mode);
    }

    /// What a typed line means in this session (its custom commands included).
    pub fn parse_line(&self, text: &str) -> Line {
        Line::parse_with(text, &self.agent.services.surface.commands)
    }

    pub fn settings(&self) -> &AgentSettings {
        &self.agent.settings
    }

    /// How this session's commands are confined, in one line (`None`: no sandbox is set up).
    pub fn sandbox_summary(&self) -> Option<String> {
        let sandbox = self.agent.sandbox_now()?;
        let enforcement = sandbox.enforcement();
        let mut line = enforcement.summary(sandbox.mode);
        if let keel_sandbox::Enforcement::BelowMinimum { .. } = enforcement {
            line.push_str("; every command is asked about");
        }
        Some(line)
    }

    /// A new event stream: every event from now on, in order, never dropped.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Event> {
        self.agent.events.subscribe()
    }

    /// The stored events after `after_event_id`, then every live event: no gap and no duplicate
    /// at the seam. Streaming deltas are live only.
    pub fn subscribe_after(
        &self,
        after_event_id: u64,
    ) -> Result<mpsc::UnboundedReceiver<Event>, AgentError> {
        Ok(self.agent.events.subscribe_after(after_event_id)?)
    }

    /// `subscribe_after` for a consumer that may fall behind: at most `capacity` live events
    /// wait for it; past that it is dropped (its stream ends) and it can resume from the last
    /// event id it saw. The turn never waits for a subscriber.
    pub fn subscribe_after_bounded(
        &self,
        after_event_id: u64,
        capacity: usize,
    ) -> Result<mpsc::Receiver<Event>, AgentError> {
        Ok(self
            .agent
            .events
            .subscribe_after_bounded(after_event_id, capacity)?)
    }

    /// Announce the session to subscribers (`session/started`, then a `trust/ignored` for each
    /// project value that was not applied).
    pub fn announce(&self) {
        let session = &self.agent.session;
        self.agent.emit(
            None,
            EventBody::SessionStarted {
                workspace: session.workspace.clone(),
                model: format!(
                    "{}/{}",
                    self.agent.settings.profile.name, self.agent.settings.model
                ),
                provider: self.agent.settings.profile.name.clone(),
                resumed: self.agent.resumed,
            },
        );
        for ignored in &self.agent.settings.untrusted {
            self.agent
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
        let agent = &self.agent;
        let generation = agent.cancellation.generation();
        let Some(mut state) = admitted::lock_between_turns(&agent.state) else {
            return Err(match input {
                Input::Prompt(_) => AgentError::Busy(agent.session.id.clone()),
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
                agent,
                &mut state,
                recovery_id.as_deref(),
                focus.as_deref(),
            )?,
            Input::ProtocolRecovery {
                recovery_id,
                guidance,
            } => recovery::admission::admit_recovery(
                agent,
                &mut state,
                recovery_id.as_deref(),
                guidance.as_deref(),
            )?,
            Input::FinalReadinessRecovery { recovery_id } => {
                recovery::admission::admit_readiness(agent, &mut state, recovery_id.as_deref())?
            }
        };
        Ok(AdmittedTurn {
            agent: self.agent.clone(),
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
        recovery::admission::pending(&self.agent)
    }

    /// The latest recovery record of this session (any state), decoded.
    pub fn latest_recovery(&self) -> Result<Option<StoredRecord>, AgentError> {
        Ok(recovery::stored::load_records(&self.agent)?.pop())
    }

    /// How each turn began (its `turn/started` event's `input_kind`), by turn number; a turn
    /// whose event is not stored (one a fork copied) is missing.
    pub fn turn_inputs(
        &self,
    ) -> Result<std::collections::HashMap<u64, keel_types::InputKind>, AgentError> {
        let events = self
            .agent
            .services
            .store
            .events_after(&self.agent.session.id, 0)?;
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
        transcript::transcript(&self.agent.services.store, &self.agent.session.id)
    }

    /// The id of the latest stored event: a surface that shows the transcript read after this
    /// call follows events after it (it may see an event whose effect it already shows).
    pub fn last_event_id(&self) -> Result<u64, AgentError> {
        Ok(self
            .agent
            .services
            .store
            .last_event_id(&self.agent.session.id)?)
    }

    /// The stored events after `after_event_id` (streaming deltas are never stored).
    pub fn events_after(&self, after_event_id: u64) -> Result<Vec<Event>, AgentError> {
        Ok(self
            .agent
            .services
            .store
            .events_after(&self.agent.session.id, after_event_id)?
            .into_iter()
            .map(|stored| stored.event)
            .collect())
    }

    /// Tokens used by the turns this controller completed.
    pub fn usage(&self) -> keel_types::Usage {
        self.agent.spend.completed()
    }

    /// Tokens used by every turn of the session, in any process, from its stored
    /// `turn/completed` and `turn/failed` events (a failed or stopped turn's responses are
    /// billed too); each call reads only the events stored since the last. The cost is
    /// `partial` where some of those tokens have no price (another model, another currency).
    pub fn session_usage(&self) -> Result<SessionSpend, AgentError> {
        Ok(self
            .agent
            .spend
            .session_totals(&self.agent.services.store, &self.agent.session.id)?)
    }

    /// What this session's subagents spent, by agent (already counted in `session_usage`,
    /// which holds every turn of the parent and so its `task` calls): each agent's name, how
    /// many of its children the session started, and their totals from their stored events.
    pub fn spend_by_agent(&self) -> Result<Vec<(String, usize, SessionSpend)>, AgentError> {
        let store = &self.agent.services.store;
        let mut by_agent: Vec<(String, usize, SessionSpend)> = Vec::new();
        for child in store.children(&self.agent.session.id)? {
            let spend = crate::spend::Spend::default().session_totals(store, &child.id)?;
            let agent = child.agent.unwrap_or_default();
            match by_agent.iter_mut().find(|(name, _, _)| *name == agent) {
                Some((_, count, total)) => {
                    *count += 1;
                    total.merge(&spend);
                }
                None => by_agent.push((agent, 1, spend)),
            }
        }
        Ok(by_agent)
    }

    /// How full the model's context is (after the last response, or estimated after a
    /// compaction), when the window is known; `None` while a turn runs. Before anything was
    /// counted in this process (a resumed session, say) it is the next request's size as the
    /// meter estimates it, kept until a response counts it.
    pub fn window_use(&self) -> Option<keel_types::WindowUse> {
        let mut state = self.agent.state.try_lock().ok()?;
        let window = compaction::window(&self.agent)?;
        if let Some(known) = state.meter.last_use(Some(window)) {
            return Some(known);
        }
        let history = self.agent.provider_view(&state).ok()?;
        let request = self.agent.project(&history, &state.mcp_tools).ok()?;
        let estimate = state.meter.tokens_of_bytes(request.body.len());
        state.meter.set_estimate(estimate);
        state.meter.last_use(Some(window))
    }

    /// The request the next turn starts from: system prompt, tools and the provider's view of
    /// the history, projected exactly as it would be sent (refused while a turn runs).
    pub fn next_request(&self) -> Result<keel_llm::ProjectedRequest, AgentError> {
        let agent = &self.agent;
        let Ok(state) = agent.state.try_lock() else {
            return Err(AgentError::Busy(agent.session.id.clone()));
        };
        let history = agent.provider_view(&state)?;
        agent
            .project(&history, &state.mcp_tools)
            .map_err(|error| AgentError::Projection(error.to_string()))
    }

    /// What this session's next request begins with: its system prompt and tools (the MCP
    /// tools of the turn last begun). Refused while a turn runs.
    pub fn request_prefix(&self) -> Result<RequestPrefix, AgentError> {
        let Ok(state) = self.agent.state.try_lock() else {
            return Err(AgentError::Busy(self.agent.session.id.clone()));
        };
        Ok(self.agent.request_prefix(&state.mcp_tools))
    }

    /// The revisions of this session's history, oldest first.
    pub fn revisions(&self) -> Result<Vec<keel_store::RevisionInfo>, AgentError> {
        Ok(self
            .agent
            .services
            .store
            .revisions(&self.agent.session.id)?)
    }

    /// Cancel the running turn, if any: its stream and tools stop, nothing late is committed.
    pub fn cancel(&self) {
        self.agent.cancellation.cancel();
    }

    pub fn is_busy(&self) -> bool {
        self.agent.state.try_lock().is_err()
    }

    /// Hold the session for a rewind; refused while a turn (or another rewind) runs.
    pub fn hold_between_turns(&self) -> Result<BetweenTurns, AgentError> {
        self.agent.hold_between_turns()
    }

    /// The latest turn the conversation still holds (what `/undo` undoes); none when every
    /// turn was undone or there was none.
    pub fn last_turn_in_history(&self) -> Result<Option<u64>, AgentError> {
        self.agent.last_turn_in_history()
    }

    /// `last_turn_in_history`, with the session held.
    pub fn last_turn_held(&self, held: &BetweenTurns) -> Result<Option<u64>, AgentError> {
        self.agent.last_turn_held(held)
    }

    /// Undo turn `to` and every turn after it: files, conversation, or both (`force`: also
    /// files changed since).
    pub fn rewind(
        &self,
        to: u64,
        scope: RewindScope,
        force: bool,
    ) -> Result<RewindReport, AgentError> {
        self.agent.rewind(to, scope, force)
    }

    /// `rewind`, with the session held.
    pub fn rewind_held(
        &self,
        lease: &mut BetweenTurns,
        to: u64,
        scope: RewindScope,
        force: bool,
    ) -> Result<RewindReport, AgentError> {
        self.agent.rewind_held(lease, to, scope, force)
    }

    /// The parts of the next request (refused while a turn runs).
    pub fn window_parts(&self) -> Result<WindowParts, AgentError> {
        self.agent.window_parts()
    }

    /// The context block this session holds or will send with its next prompt.
    pub fn context_report(&self) -> Result<ContextReport, AgentError> {
        self.agent.context_report()
    }

    /// Read the instruction files and the environment again; a block already sent is
    /// replaced in a new history revision (`instructions_changed`: the prefix changes there).
    pub fn reload_context(&self) -> Result<Reloaded, AgentError> {
        self.agent.reload_context()
    }

    /// What the session changed (refused while a turn runs).
    pub fn session_diff(&self) -> Result<SessionDiff, AgentError> {
        self.agent.session_diff()
    }
}
