//! Tools the engine answers itself instead of running them (`propose_plan`, `skill`): a new
//! one is one more case of `EngineTool`, not another special case in the round.
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
    /// `skill`: a skill's instructions, from the session's skills (`skills.rs`).
    Skill,
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
            Valid::Builtin(builtin) if builtin.tool == keel_tools::BuiltinTool::Skill => {
                Some(EngineTool::Skill)
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
            EngineTool::Skill => {
                let name = match valid {
                    Valid::Builtin(builtin) => {
                        builtin.args.get("name").and_then(serde_json::Value::as_str)
                    }
                    Valid::Mcp { .. } => None,
                };
                let output = load_skill(agent, name.unwrap_or(""));
                EngineAnswer {
                    state: if output.is_error {
                        ReceiptState::Failed
                    } else {
                        ReceiptState::Completed
                    },
                    output,
                    ends_turn: false,
                }
            }
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

/// The skill `name`'s instructions and directory, for the model; a skill it may not load is
/// refused saying which there are.
fn load_skill(agent: &Agent, name: &str) -> ToolOutput {
    // A deny rule on `skill` (`skill(NAME)`) holds; nothing else is asked about.
    if let keel_tools::Decision::Deny(reason) =
        agent
            .policy_now()
            .decide("skill", name, keel_tools::Reach::ReadsWorkspace)
    {
        return ToolOutput::error(format!("{reason}; the skill was not loaded"));
    }
    let skills = agent.services.skills();
    let Some(skill) = skills.get(name).filter(|skill| skill.model_invocable) else {
        let known: Vec<&str> = skills
            .list()
            .filter(|skill| skill.model_invocable)
            .map(|skill| skill.name.as_str())
            .collect();
        return ToolOutput::error(if known.is_empty() {
            format!("there is no skill `{name}`: this session has no skills")
        } else {
            format!(
                "there is no skill `{name}`; the skills: {}",
                known.join(", ")
            )
        });
    };
    // Its SKILL.md was read at the session's start, from inside a skill directory only (a link
    // out of them was refused then): the body given is that text, never a file read now.
    ToolOutput::ok(
        format!(
            "Skill `{}` — its files are in {}\n\n{}",
            skill.name,
            skill.dir.display(),
            skill.body.trim()
        ),
        format!("loaded {}", skill.name),
    )
}
