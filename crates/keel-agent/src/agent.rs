//! One agent: a session's history, events, cancellation, spend and permission mode, run on
//! services it shares with every other agent of the session.
//!
//! Invariants:
//! - An agent holds its session's lease and its host's claim until it is dropped
//!   (`opening.rs` takes both).
//! - Every request, estimate and preview is projected by `Agent::project`: the system prompt,
//!   the registry's built-in tools, then the turn's MCP tools — one prefix for every agent
//!   on the same model and services.

use crate::agent_state::AgentState;
use crate::approval::{Approval, ApprovalRequest};
use crate::cancellation::Cancellation;
use crate::claim::OpenSession;
use crate::confinement::{self, SandboxSetup};
use crate::error::AgentError;
use crate::event_bus::EventBus;
use crate::mode_notes::ModeState;
use crate::prompt;
use crate::request_prefix::RequestPrefix;
use crate::services::Services;
use crate::settings::AgentSettings;
use crate::snapshot::Snapshots;
use crate::spend::Spend;
use keel_store::{Lease, SessionInfo};
use keel_tools::PermissionPolicy;
use keel_types::{EventBody, Item};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// One agent of a session (see the module invariants).
pub(crate) struct Agent {
    pub services: Services,
    pub settings: AgentSettings,
    pub session: SessionInfo,
    pub(crate) _lease: Lease,
    pub(crate) _open: OpenSession,
    pub events: Arc<EventBus>,
    pub cancellation: Arc<Cancellation>,
    pub state: Arc<tokio::sync::Mutex<AgentState>>,
    pub spend: Spend,
    /// The permission mode in force (the person may change it during the session).
    pub(crate) modes: Arc<Mutex<ModeState>>,
    pub resumed: bool,
    /// Git snapshots of the workspace at each turn's start and end (in a repository).
    pub snapshots: Option<Snapshots>,
    /// What this agent is when a `task` started it (its agent, its tools); `None` otherwise.
    pub role: Option<crate::agent_role::AgentRole>,
    /// Its background jobs (they end with it: `jobs.rs`).
    pub jobs: Arc<keel_tools::jobs::Jobs>,
}

impl Agent {
    /// What this agent's requests begin with: its system prompt, the built-in tools, then the
    /// turn's `mcp_tools`.
    pub(crate) fn request_prefix(&self, mcp_tools: &[keel_types::ToolSpec]) -> RequestPrefix {
        let settings = &self.settings;
        let system = prompt::system_prompt(
            settings.action_policy,
            &settings.model,
            settings.profile.reasoning_protocol,
        );
        RequestPrefix::new(system, self.services.registry.specs(), mcp_tools)
    }

    /// The request for `history` with this session's system prompt and tool specs: the one
    /// projection every request, estimate and preview goes through (prefix-stable).
    pub(crate) fn project(
        &self,
        history: &[Item],
        mcp_tools: &[keel_types::ToolSpec],
    ) -> Result<keel_llm::ProjectedRequest, keel_llm::projection::ProjectionError> {
        self.request_prefix(mcp_tools).project(
            &self.settings.profile,
            &self.settings.model,
            history,
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
        let mut sandbox = self.services.tool_services.sandbox.clone()?;
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

    /// Put `request` to the person (see the module invariants); the answer, once given. The
    /// agents of a session ask one at a time (a subagent's question waits for the one on
    /// screen), and a subagent's says which agent asks and for what.
    pub(crate) fn ask<'a>(
        &'a self,
        turn: u64,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async move {
            let mut request = request.clone();
            request.asked_by = self.role.as_ref().map(|role| keel_types::AskedBy {
                session_id: self.session.id.clone(),
                agent: role.agent.clone(),
                description: role.description.clone(),
            });
            let approver = &self.services.surface.approver;
            // A call an "always" covers is answered at once: it never waits behind another
            // agent's question.
            let _one_at_a_time = if approver.answers_without_asking(&request) {
                None
            } else {
                Some(self.services.one_question.lock().await)
            };
            let answer = approver.approve(&request);
            self.emit(
                Some(turn),
                keel_types::EventBody::ApprovalRequested {
                    call_id: request.call_id.clone(),
                    name: request.tool.clone(),
                    subject: request.subject.clone(),
                    view: keel_types::approval_view(&request.subject),
                    unconfined: request.unconfined,
                    reason: request.reason.clone(),
                    agent: request.asked_by.as_ref().map(|by| by.agent.clone()),
                    description: request.asked_by.as_ref().map(|by| by.description.clone()),
                },
            );
            answer.await
        })
    }

    /// The history as the provider sees it: the canonical history, with the fault projection
    /// applied to the repaired prefix when a consumed recovery put one in force.
    pub(crate) fn provider_view<'s>(
        &self,
        state: &'s AgentState,
    ) -> Result<std::borrow::Cow<'s, [Item]>, AgentError> {
        Ok(match state.repair {
            Some(boundary) => {
                let receipts = self.services.store.receipts(&self.session.id)?;
                std::borrow::Cow::Owned(crate::recovery::apply_repair(
                    &state.history,
                    boundary,
                    &receipts,
                ))
            }
            None => std::borrow::Cow::Borrowed(&state.history),
        })
    }
}
