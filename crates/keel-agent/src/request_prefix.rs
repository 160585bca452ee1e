//! What begins every request of an agent: its system prompt and its tool specs.
//!
//! Invariants:
//! - The tools are the registry's built-in tools in their fixed order, then the turn's MCP
//!   tools by server and name: the same inputs give the same bytes.
//! - A prefix is a value: handed to another agent on the same model (a subagent), its requests
//!   begin with the same bytes as the parent's, so the provider's cache serves them.

use keel_types::{Item, ToolSpec};
use std::borrow::Cow;

/// The system prompt and tool specs a request begins with.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestPrefix {
    pub system: Cow<'static, str>,
    pub tools: Vec<ToolSpec>,
}

impl RequestPrefix {
    /// `system` and the built-in tools `builtin`, with the turn's `mcp_tools` after them.
    pub(crate) fn new(
        system: Cow<'static, str>,
        builtin: Vec<ToolSpec>,
        mcp_tools: &[ToolSpec],
    ) -> Self {
        let mut tools = builtin;
        tools.extend_from_slice(mcp_tools);
        RequestPrefix { system, tools }
    }

    /// The request for `history` after this prefix, on `model` of `profile`.
    pub(crate) fn project(
        &self,
        profile: &keel_llm::ProviderProfile,
        model: &str,
        history: &[Item],
    ) -> Result<keel_llm::ProjectedRequest, keel_llm::projection::ProjectionError> {
        keel_llm::project(
            profile,
            &keel_llm::ProjectionInput {
                model,
                system: &self.system,
                tools: &self.tools,
                history,
            },
        )
    }
}
