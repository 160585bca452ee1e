//! What a child agent is (a subagent a `task` started): the agent it runs, its parent, and the
//! tools its agent may use.
//!
//! Invariants:
//! - A call to a tool outside `only_tools` (and `propose_plan`, whatever the agent's tools:
//!   only the session the person works in puts a plan to them; and `task`: depth 1) is refused before any rule,
//!   with a result that names the tools the agent has (`AgentRole::refuses`, asked by the tool
//!   round for every call, batched or not).
//! - A child's mode is never looser than its parent's mode now (`AgentRole::capped`): a switch
//!   the person makes on the parent while a child runs holds for the child at its next call.

use crate::mode_notes::ModeState;
use keel_tools::{BuiltinTool, PermissionMode};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// What a child agent is: the agent it runs and the tools that agent may use.
#[derive(Clone, Debug)]
pub struct AgentRole {
    /// The agent's name (`explore`, a custom one).
    pub agent: String,
    /// The session whose `task` started it.
    pub parent: String,
    /// What the `task` call said it is for (every question it asks says so).
    pub description: String,
    /// `None`: every tool the parent has.
    pub only_tools: Option<BTreeSet<String>>,
    /// The input + output tokens it may use (`[agents] max_child_tokens`; `None`: no limit).
    pub max_tokens: Option<u64>,
    /// The parent's mode as the person sets it.
    pub(crate) parent_modes: Arc<Mutex<ModeState>>,
}

/// How loose a mode is: lower is stricter (read-only < plan < ask < auto).
fn looseness(mode: PermissionMode) -> usize {
    PermissionMode::ALL
        .iter()
        .position(|known| *known == mode)
        .unwrap_or(PermissionMode::ALL.len())
}

impl AgentRole {
    /// Why the agent may not call `tool`, as its result says; `None` when it may.
    pub(crate) fn refuses(&self, tool: &str) -> Option<String> {
        if tool == BuiltinTool::Task.name() {
            return Some(format!(
                "a subagent cannot start subagents (the `{}` agent runs at depth 1); do the \
                 work yourself; the call was not run",
                self.agent
            ));
        }
        if tool == BuiltinTool::ProposePlan.name() {
            return Some(format!(
                "a subagent does not propose plans (the `{}` agent answers its parent); the \
                 call was not run",
                self.agent
            ));
        }
        let only = self.only_tools.as_ref()?;
        if only.contains(tool) {
            return None;
        }
        let allowed: Vec<&str> = only.iter().map(String::as_str).collect();
        Some(format!(
            "the `{}` agent may not use `{tool}` (its tools: {}); the call was not run",
            self.agent,
            allowed.join(", ")
        ))
    }

    /// `own` (the child's mode), or the parent's mode now where that is stricter.
    pub(crate) fn capped(&self, own: PermissionMode) -> PermissionMode {
        let parent = self
            .parent_modes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .now;
        if looseness(parent) < looseness(own) {
            parent
        } else {
            own
        }
    }
}
