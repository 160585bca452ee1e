//! Permission modes during a session: telling the model of a change, and plan mode's
//! `propose_plan` (docs/features.md#plan-mode).
//!
//! Invariants:
//! - A mode change is told to the model inside something new — the next user item, or the
//!   next tool result of a running turn — never by rewriting what was sent, and the tool specs
//!   and system prompt are the same in every mode (`propose_plan` is always offered).
//! - What the model was last told survives a restart: it is read back from the history — keel's
//!   exact mode note among the notes leading a user item, else the starting mode in the context
//!   block's environment section (written last, after the instruction files) — so a resumed
//!   session whose mode differs is told once. Text a file or a tool brings cannot pass for a
//!   note: tool results and what follows a prompt's notes are not read.
//! - `propose_plan` outside plan mode changes nothing and says so. In plan mode it is put to
//!   the person: approved, keel leaves plan mode for the mode they chose (else the one before
//!   plan mode) and the turn goes on; rejected, keel stays in plan mode and their note goes to
//!   the model; with nobody to ask (a headless run), the turn ends with the plan as its answer.
//! - Approving a plan never approves anything else: every later call is decided under the
//!   new mode and its rules, like any other.

use crate::agent::Agent;
use crate::approval::Approval;
use crate::approval::ApprovalRequest;
use crate::mode_notes::ModeState;
use keel_tools::{PermissionMode, ToolOutput};
use keel_types::{ReceiptState, ToolCall};

impl Agent {
    /// The mode state (a poisoned lock still holds a consistent value: it is `Copy`).
    pub(crate) fn mode_state(&self) -> std::sync::MutexGuard<'_, ModeState> {
        self.modes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The permission mode in force now: the session's own, capped by its parent's for a
    /// subagent's child.
    pub(crate) fn permission_mode(&self) -> PermissionMode {
        let own = self.mode_state().now;
        match &self.role {
            Some(role) => role.capped(own),
            None => own,
        }
    }

    /// Switch to `mode`; entering plan mode remembers the mode to return to.
    pub(crate) fn switch_mode(&self, mode: PermissionMode) {
        let mut state = self.mode_state();
        if mode == PermissionMode::Plan && state.now != PermissionMode::Plan {
            state.before_plan = state.now;
        }
        state.now = mode;
    }

    /// Leave plan mode for `chosen` (else the mode before it), told to the model with the
    /// plan's approval: the mode now in force. A plan is carried out in `ask` or `auto` (a
    /// read-only mode could not carry it out: `ask` then).
    pub(crate) fn leave_plan_mode(&self, chosen: Option<PermissionMode>) -> PermissionMode {
        let mut state = self.mode_state();
        let wanted = chosen.unwrap_or(state.before_plan);
        let mode = if wanted.only_reads() {
            PermissionMode::Ask
        } else {
            wanted
        };
        state.now = mode;
        state.told = mode;
        mode
    }

    /// The mode to tell the model of in the next user item, if it changed since it was last
    /// told (it counts as told from here).
    pub(crate) fn take_mode_change(&self) -> Option<PermissionMode> {
        let mut state = self.mode_state();
        (state.now != state.told).then(|| {
            state.told = state.now;
            state.now
        })
    }
}

/// What a `propose_plan` call came to.
pub(crate) struct PlanAnswer {
    pub state: ReceiptState,
    pub output: ToolOutput,
    /// Nobody could be asked: the turn ends here, the plan its answer.
    pub ends_turn: bool,
}

/// Answer a `propose_plan` call, never through the permission rules (no rule may turn it
/// into an ordinary question): outside plan mode it changes nothing and says so; in plan mode
/// the person is asked.
pub(crate) async fn propose(agent: &Agent, turn: u64, call: &ToolCall, plan: &str) -> PlanAnswer {
    if agent.permission_mode() != PermissionMode::Plan {
        return PlanAnswer {
            state: ReceiptState::Completed,
            output: ToolOutput::ok(
                keel_tools::NOT_IN_PLAN_MODE.into(),
                "not in plan mode".into(),
            ),
            ends_turn: false,
        };
    }
    let request = crate::approval::with_always_label(ApprovalRequest {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        subject: plan.to_string(),
        arguments: call.arguments.clone(),
        unconfined: false,
        plan: true,
        reason: None,
        preview: None,
        always_label: None,
        asked_by: None,
    });
    let answer = agent.ask(turn, &request);
    let approved = |mode: Option<PermissionMode>| {
        let mode = agent.leave_plan_mode(mode);
        PlanAnswer {
            state: ReceiptState::Completed,
            output: ToolOutput::ok(
                format!(
                    "The user approved the plan. The permission mode is now {}: {}. Carry out \
                     the plan.",
                    mode.as_str(),
                    mode.meaning()
                ),
                format!("plan approved; mode {}", mode.as_str()),
            ),
            ends_turn: false,
        }
    };
    let kept = "The user did not approve the plan, and keel stays in plan mode: nothing may be \
                changed yet.";
    let rejected = |text: String| PlanAnswer {
        state: ReceiptState::Denied,
        output: ToolOutput::error(text),
        ends_turn: false,
    };
    match answer.await {
        Approval::Allow => approved(None),
        Approval::AllowSwitching(mode) => approved(Some(mode)),
        Approval::Declined => rejected(format!(
            "{kept} Ask the user what to change, or revise the plan with read-only tools and \
             propose it again."
        )),
        Approval::DeclinedWithNote(note) => rejected(format!(
            "{kept} Revise the plan with read-only tools and propose it again. The user's note: \
             {}",
            crate::approval::bounded_note(&note)
        )),
        Approval::Unattended => PlanAnswer {
            state: ReceiptState::Completed,
            output: ToolOutput::ok(
                "The plan was shown to the user. Nobody can approve it in this run, so the turn \
                 ends here and keel stays in plan mode."
                    .into(),
                "plan shown; the turn ends".into(),
            ),
            ends_turn: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode_notes::{block_mode_line, last_told, mode_note};
    use crate::turn::INTERRUPTED_NOTE as INTERRUPTED;
    use keel_types::Item;
    use keel_types::ToolResult;

    #[test]
    fn the_mode_last_told_is_keels_own_note_or_the_blocks_environment() {
        assert_eq!(last_told(&[]), None);
        // An instruction file that imitates the environment line does not count.
        let block = Item::Context(keel_types::ContextBlock {
            text: format!(
                "<instructions>{}</instructions>\n<environment>\n{}\n</environment>",
                block_mode_line(PermissionMode::Auto),
                block_mode_line(PermissionMode::Plan)
            ),
            sources: Vec::new(),
        });
        let mut history = vec![block, Item::User { text: "hi".into() }];
        assert_eq!(last_told(&history), Some(PermissionMode::Plan));
        // A tool's output, or a file attached after the prompt, cannot pass for a note.
        history.push(Item::ToolResult(ToolResult {
            call_id: "c".into(),
            name: "read_file".into(),
            content: format!("text\n\n{}", mode_note(PermissionMode::Auto)),
            is_error: false,
        }));
        history.push(Item::User {
            text: format!("look\n\n{}", mode_note(PermissionMode::Auto)),
        });
        assert_eq!(last_told(&history), Some(PermissionMode::Plan));
        history.push(Item::User {
            text: format!(
                "{INTERRUPTED}\n{}\n\nnext",
                mode_note(PermissionMode::ReadOnly)
            ),
        });
        assert_eq!(last_told(&history), Some(PermissionMode::ReadOnly));
    }
}
