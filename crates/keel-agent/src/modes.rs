//! Permission modes during a session: telling the model of a change, and plan mode's
//! `propose_plan` (PRODUCT.md §4e).
//!
//! Invariants:
//! - A mode change is told to the model inside something new — the next user item, or the
//!   next tool result of a running turn — never by rewriting what was sent, and the tool specs
//!   and system prompt are the same in every mode (`propose_plan` is always offered).
//! - What the model was last told survives a restart: it is read back from the history (the
//!   last mode note, else the context block's starting mode), so a resumed session whose mode
//!   differs is told once.
//! - `propose_plan` outside plan mode changes nothing and says so. In plan mode it is put to
//!   the person: approved, keel leaves plan mode for the mode they chose (else the one before
//!   plan mode) and the turn goes on; rejected, keel stays in plan mode and their note goes to
//!   the model; with nobody to ask (a headless run), the turn ends with the plan as its answer.
//! - Approving a plan never approves anything else: every later call is decided under the
//!   new mode and its rules, like any other.

use crate::{Approval, ApprovalRequest, Shared};
use keel_tools::{PermissionMode, ToolOutput};
use keel_types::{Item, ReceiptState, ToolCall};

/// The start of the note that tells the model of a mode the user chose.
const MODE_NOTE_START: &str = "[keel: the user switched the permission mode to ";

/// The context block's line naming the mode the session started in.
const BLOCK_MODE_LINE: &str = "permission mode at the start: ";

/// What the model is told, in a user item or a tool result, after the mode changed.
pub(crate) fn mode_note(mode: PermissionMode) -> String {
    format!("{MODE_NOTE_START}{}: {}.]", mode.as_str(), mode.meaning())
}

/// The line of the context block that states the starting mode.
pub(crate) fn block_mode_line(mode: PermissionMode) -> String {
    format!("{BLOCK_MODE_LINE}{}", mode.as_str())
}

/// The mode the model was last told of in `history`: the last mode note of a user item or a
/// tool result, else the starting mode its context block states; `None` when it never was.
pub(crate) fn last_told(history: &[Item]) -> Option<PermissionMode> {
    history.iter().rev().find_map(|item| {
        let (text, marker) = match item {
            Item::User { text } => (text.as_str(), MODE_NOTE_START),
            // keel puts it last: a result that merely quotes one earlier is not a note.
            Item::ToolResult(result) => (result.content.lines().last()?, MODE_NOTE_START),
            Item::Context(block) => (block.text.as_str(), BLOCK_MODE_LINE),
            _ => return None,
        };
        let start = text.rfind(marker)? + marker.len();
        let name: String = text[start..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        PermissionMode::parse(&name)
    })
}

/// The permission mode in force, and the one the model was last told of (a change is told
/// inside the next user item, never by rewriting what was sent).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ModeState {
    pub now: PermissionMode,
    pub told: PermissionMode,
    /// The mode to return to when a plan is approved without choosing one: the last mode
    /// before plan mode (`ask` for a session that started in it).
    pub before_plan: PermissionMode,
}

impl Shared {
    /// The mode state (a poisoned lock still holds a consistent value: it is `Copy`).
    pub(crate) fn mode_state(&self) -> std::sync::MutexGuard<'_, ModeState> {
        self.permission
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The permission mode in force now.
    pub(crate) fn permission_mode(&self) -> PermissionMode {
        self.mode_state().now
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
    /// plan's approval: the mode now in force.
    pub(crate) fn leave_plan_mode(&self, chosen: Option<PermissionMode>) -> PermissionMode {
        let mut state = self.mode_state();
        let mode = chosen
            .filter(|mode| *mode != PermissionMode::Plan)
            .unwrap_or(state.before_plan);
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

/// Answer a `propose_plan` call: outside plan mode, `None` (the tool says so itself); in plan
/// mode, ask the person.
pub(crate) async fn propose(
    shared: &Shared,
    turn: u64,
    call: &ToolCall,
    plan: &str,
) -> Option<PlanAnswer> {
    if shared.permission_mode() != PermissionMode::Plan {
        return None;
    }
    let request = ApprovalRequest {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        subject: plan.to_string(),
        arguments: call.arguments.clone(),
        unconfined: false,
        preview: None,
    };
    let answer = shared.ask(turn, &request);
    let approved = |mode: Option<PermissionMode>| {
        let mode = shared.leave_plan_mode(mode);
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
    Some(match answer.await {
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::ToolResult;

    #[test]
    fn the_mode_last_told_is_read_back_from_notes_results_and_the_block() {
        assert_eq!(last_told(&[]), None);
        let block = Item::Context(keel_types::ContextBlock {
            text: format!(
                "<environment>\n{}\n</environment>",
                block_mode_line(PermissionMode::Plan)
            ),
            sources: Vec::new(),
        });
        let mut history = vec![block, Item::User { text: "hi".into() }];
        assert_eq!(last_told(&history), Some(PermissionMode::Plan));
        history.push(Item::ToolResult(ToolResult {
            call_id: "c".into(),
            name: "read_file".into(),
            content: format!("text\n\n{}", mode_note(PermissionMode::Auto)),
            is_error: false,
        }));
        assert_eq!(last_told(&history), Some(PermissionMode::Auto));
        history.push(Item::User {
            text: format!("{}\n\nnext", mode_note(PermissionMode::ReadOnly)),
        });
        assert_eq!(last_told(&history), Some(PermissionMode::ReadOnly));
    }
}
