//! A subagent's child session, opened from its parent (docs/agents.md): the session a `task`
//! call runs its agent in.
//!
//! Invariants:
//! - The child works on its parent's services (client, sandbox, store, approver, MCP hub) in
//!   the parent's place; its session row names the parent and the agent, with the agent's tools
//!   and mode as JSON; it is never resumed on its own (`opening.rs` refuses it).
//! - Its history begins with a byte copy of the parent's context item (never read again: the
//!   mode and date lines in it would differ), sent with its first prompt as any session's is;
//!   its system prompt and tool specs are the parent's (`Agent::request_prefix`). So its first
//!   request shares the parent's prefix through the context block.
//! - Its mode is the agent's when that is as strict as the parent's or stricter, else the
//!   parent's (`AgentDefinition::mode_under`); a mode that differs from the one the context
//!   block names is told with its first prompt, like any mode change.
//! - A call to a tool its agent may not use is refused before any rule, with a result that
//!   names the agent's tools (`agent_role.rs`).
//! - Its events reach the parent's subscribers stamped with its own session id, and cancelling
//!   the parent cancels it (`Controller::follow`).

use crate::agent::Agent;
use crate::agent_definitions::{AgentDefinition, AgentSource, AgentTools};
use crate::agent_state::AgentState;
use crate::error::AgentError;
use keel_store::SessionInfo;
use keel_tools::PermissionMode;
use keel_types::{ContextBlock, Item};

/// The agent's tools and mode as the child's session row keeps them.
fn agent_settings(definition: &AgentDefinition, mode: PermissionMode) -> String {
    let tools = match &definition.tools {
        AgentTools::Parent => serde_json::Value::String("parent".into()),
        AgentTools::Only(tools) => serde_json::json!(tools),
    };
    serde_json::json!({"agent": definition.name, "tools": tools, "mode": mode.as_str()}).to_string()
}

/// The context block a child of a session with `state` starts from: the one its history
/// holds, or (before its first prompt) the one it will send.
pub(crate) fn parents_block(state: &AgentState) -> Result<ContextBlock, AgentError> {
    state
        .history
        .iter()
        .find_map(|item| match item {
            Item::Context(block) => Some(block.clone()),
            _ => None,
        })
        .or_else(|| state.pending_context.clone())
        .ok_or_else(|| AgentError::Agents("the parent session has no context block".into()))
}

/// A child of `parent` running `definition` (at most `max_rounds` rounds a turn), starting
/// from `context` (`parents_block`, taken by the caller that holds the parent's state: a
/// running turn holds it); with the mode its agent asked for and did not get.
pub(crate) fn open(
    parent: &Agent,
    context: ContextBlock,
    definition: &AgentDefinition,
    description: &str,
    max_rounds: u32,
) -> Result<(Agent, Option<PermissionMode>), AgentError> {
    let (mode, refused) = definition.mode_under(parent.permission_mode());
    let mut settings = parent.settings.clone();
    // An agent on a model of its own runs with that model's provider profile (its requests
    // cannot share the parent's cache).
    let parent_model = format!("{}/{}", parent.settings.profile.name, parent.settings.model);
    if let Some(model) = definition
        .model
        .as_deref()
        .filter(|_| !definition.shares_cache_with(&parent_model))
    {
        // A repository's agent file never sends the session's context to a provider the
        // person did not choose for it: only one of its own provider's models.
        let provider = model
            .split_once('/')
            .map_or(model, |(provider, _)| provider);
        let from_project = matches!(
            definition.source,
            AgentSource::Project | AgentSource::ClaudeProject
        );
        if from_project && provider != parent.settings.profile.name {
            return Err(AgentError::Agents(format!(
                "the `{}` agent is the project's and names `{model}`: a project's agent runs \
                 only on a model of this session's provider (`{}`), so that no repository \
                 sends the session to another; put it in $KEEL_HOME/agents/ to use it",
                definition.name, parent.settings.profile.name
            )));
        }
        let profile = parent.services.surface.agents.profile_for(model);
        let (Some(profile), Some((_, id))) = (profile, model.split_once('/')) else {
            return Err(AgentError::Agents(format!(
                "the `{}` agent's model `{model}` has no provider configured in this session",
                definition.name
            )));
        };
        settings.profile = profile.clone();
        settings.model = id.to_string();
    }
    settings.policy.mode = mode;
    settings.max_rounds = max_rounds;
    // The parent's notes are said already; a child says nothing of them again.
    settings.untrusted.clear();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        });
    let info = SessionInfo {
        id: crate::opening::new_session_id(),
        workspace: parent.session.workspace.clone(),
        provider: settings.profile.name.clone(),
        model: settings.model.clone(),
        created_at: now,
        updated_at: now,
        parent: Some(parent.session.id.clone()),
        agent: Some(definition.name.clone()),
    };
    parent
        .services
        .store
        .create_child_session(&info, &agent_settings(definition, mode))?;
    let role = crate::agent_role::AgentRole {
        agent: definition.name.clone(),
        parent: parent.session.id.clone(),
        description: description.chars().take(200).collect(),
        only_tools: match &definition.tools {
            AgentTools::Parent => None,
            AgentTools::Only(tools) => Some(tools.clone()),
        },
        max_tokens: parent.settings.subagents.max_child_tokens,
        parent_modes: parent.modes.clone(),
    };
    let id = info.id.clone();
    let child = match Agent::open_child(parent, info, settings, context, role) {
        Ok(child) => child,
        Err(error) => {
            // No child session nobody runs: its row goes with the failed open.
            let _ = parent.services.store.remove_session(&id);
            return Err(error);
        }
    };
    Ok((
        child,
        refused.then_some(definition.permission_mode).flatten(),
    ))
}
