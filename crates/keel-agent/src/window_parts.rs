//! What fills the model's window, by part, for `/context`: the system prompt, the tool specs,
//! the project instructions, the conversation and the tool results of the next request.
//!
//! Invariants:
//! - Read from the request the next turn would send (`Agent::project` on the provider's view
//!   of the history), so the parts add up to what is sent; nothing is changed or stored.
//! - Figures are estimates (bytes through the session's calibrated bytes-per-token), said so
//!   wherever they are shown.

use crate::agent::Agent;
use crate::error::AgentError;
use keel_types::Item;
use serde_json::Value;

/// Estimated tokens of each part of the next request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowParts {
    pub system: u64,
    pub tools: u64,
    /// The context block (project instructions and the environment), once it was sent.
    pub instructions: u64,
    /// Prompts, answers and summaries.
    pub conversation: u64,
    pub tool_results: u64,
    /// The model's window, when known.
    pub window: Option<u64>,
}

impl WindowParts {
    pub fn total(&self) -> u64 {
        self.system + self.tools + self.instructions + self.conversation + self.tool_results
    }
}

impl Agent {
    /// The parts of the next request (refused while a turn runs).
    pub(crate) fn window_parts(&self) -> Result<WindowParts, AgentError> {
        let agent = self;
        let Ok(state) = agent.state.try_lock() else {
            return Err(AgentError::Busy(agent.session.id.clone()));
        };
        let history = agent.provider_view(&state)?;
        let request = agent
            .project(&history, &state.mcp_tools)
            .map_err(|error| AgentError::Projection(error.to_string()))?;
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let tools = body.get("tools").map_or(0, |tools| tools.to_string().len());
        let system = system_bytes(&body);
        let item_bytes = |wanted: fn(&Item) -> bool| -> usize {
            history
                .iter()
                .filter(|item| wanted(item))
                .map(|item| serde_json::to_string(item).map_or(0, |text| text.len()))
                .sum()
        };
        let instructions = item_bytes(|item| matches!(item, Item::Context(_)));
        let tool_results = item_bytes(|item| matches!(item, Item::ToolResult(_)));
        let conversation = request
            .body
            .len()
            .saturating_sub(tools + system + instructions + tool_results);
        let tokens = |bytes: usize| state.meter.tokens_of_bytes(bytes);
        Ok(WindowParts {
            system: tokens(system),
            tools: tokens(tools),
            instructions: tokens(instructions),
            conversation: tokens(conversation),
            tool_results: tokens(tool_results),
            window: crate::compaction::window(agent),
        })
    }
}

/// The system prompt's bytes in a request body of any of the three protocols: Chat's system
/// message, Anthropic's `system`, Responses' `instructions`.
fn system_bytes(body: &Value) -> usize {
    if let Some(system) = body.get("system").or_else(|| body.get("instructions")) {
        return system.to_string().len();
    }
    body.get("messages")
        .and_then(Value::as_array)
        .map_or(0, |messages| {
            messages
                .iter()
                .filter(|message| message.get("role").and_then(Value::as_str) == Some("system"))
                .map(|message| message.to_string().len())
                .sum()
        })
}
