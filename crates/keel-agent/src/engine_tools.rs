//! Tools the engine answers itself instead of running them: a new one is one more case of
//! `EngineTool`, not another special case in the round.
//!
//! Invariants:
//! - An engine tool is answered before any permission rule (no rule may turn it into an
//!   ordinary question), never batched with another call, never confined: nothing runs.
//! - Its answer is a result like any other: committed with its final receipt.

use crate::agent::Agent;
use crate::call::Valid;
use keel_tools::ToolOutput;
use keel_types::{ReceiptState, ToolCall};

/// Tools keel answers itself instead of running: decided by the engine (or put to the person
/// by it) before any permission rule, never batched with another call, never confined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EngineTool {
    /// `propose_plan`: in plan mode the plan is put to the person (`modes::propose`).
    ProposePlan,
}

/// What the engine answered a call with.
pub(crate) struct EngineAnswer {
    pub state: ReceiptState,
    pub output: ToolOutput,
    /// The turn ends here (a plan shown with nobody to approve it): the answer is its end.
    pub ends_turn: bool,
}

impl EngineTool {
    pub(crate) fn of(valid: &Valid) -> Option<EngineTool> {
        match valid {
            Valid::Builtin(builtin) if builtin.tool == keel_tools::BuiltinTool::ProposePlan => {
                Some(EngineTool::ProposePlan)
            }
            _ => None,
        }
    }

    pub(crate) async fn answer(
        self,
        agent: &Agent,
        turn: u64,
        call: &ToolCall,
        valid: &Valid,
    ) -> EngineAnswer {
        match self {
            EngineTool::ProposePlan => {
                let plan = match valid {
                    Valid::Builtin(builtin) => {
                        builtin.args.get("plan").and_then(serde_json::Value::as_str)
                    }
                    Valid::Mcp { .. } => None,
                };
                let answer = crate::modes::propose(agent, turn, call, plan.unwrap_or("")).await;
                EngineAnswer {
                    state: answer.state,
                    output: answer.output,
                    ends_turn: answer.ends_turn,
                }
            }
        }
    }
}
