//! What a child agent is (a subagent a `task` started): the agent it runs, its parent, and the
//! tools its agent may use.
//!
//! Invariant: a call to a tool outside `only_tools` is refused before any rule, with a result
//! that names the tools the agent has (`AgentRole::refuses`, asked by the tool round).

use std::collections::BTreeSet;

/// What a child agent is: the agent it runs and the tools that agent may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentRole {
    /// The agent's name (`explore`, a custom one).
    pub agent: String,
    /// The session whose `task` started it.
    pub parent: String,
    /// `None`: every tool the parent has.
    pub only_tools: Option<BTreeSet<String>>,
}

impl AgentRole {
    /// Why the agent may not call `tool`, as its result says; `None` when it may.
    pub(crate) fn refuses(&self, tool: &str) -> Option<String> {
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
}
