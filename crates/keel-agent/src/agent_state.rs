//! The state one agent's turns hold while they run: its history and revision, its context
//! meter, the MCP tools of its turn, its pending snapshot.
//!
//! Invariants:
//! - One turn at a time holds it (behind the agent's async mutex); a reader between turns
//!   holds it for moments only.
//! - `history` is the store's canonical history at `revision`: nothing is in it that is not
//!   committed. A subagent's final answer waits in `held_answer` (outside `history`) until its
//!   parent commits it with the `task` result.

use keel_types::Item;

/// What an agent's turns read and change.
pub(crate) struct AgentState {
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
    pub meter: crate::token_meter::ContextMeter,
    /// The MCP tools every request of the current turn offers (taken at the turn boundary).
    pub mcp_tools: Vec<keel_types::ToolSpec>,
    /// No turn boundary has passed in this process: the first takes the MCP tools as the
    /// session's own (servers may still have been starting when it opened), not as a change
    /// of a prefix already sent — nothing was sent yet.
    pub mcp_opening: bool,
    /// The built-in tool specs were checked against the ones the session's requests last
    /// carried (once per agent: `turn::check_tools`).
    pub tools_checked: bool,
    /// The person stopped the model's last answer while it streamed: the next prompt tells
    /// the model so, inside its user item (this process only).
    pub interrupted: bool,
    /// The context block read when the session opened without one: committed with the next
    /// user item.
    pub pending_context: Option<keel_types::ContextBlock>,
    /// Skills found since a resumed session's context block was written: told once, leading
    /// the next prompt (never by rewriting the block).
    pub skills_note: Option<String>,
    /// The workspace snapshots around command batches (their "after" may still be being taken
    /// while the next request is out).
    pub bracket: crate::snapshot::CommandBracket,
    /// A subagent's final answer and its turn, not committed yet: its parent commits it with
    /// the `task` result, in one transaction (`tool_results::finish_with`).
    pub held_answer: Option<(u64, Item)>,
    /// The turn runs a subagent for its parent's `task` call: its final answer is held
    /// (`held_answer`), not committed by the turn.
    pub hold_answer: bool,
    /// Responses committed (or held) in this process: a subagent's rounds.
    pub replies: u32,
    /// Why the last turn stopped at a budget (`max_rounds`, `max_child_tokens`), in words for
    /// a subagent's parent.
    pub budget_stop: Option<String>,
}
