//! The live TUI's answers to a question (one key, or a note typed for the model) and its
//! permission-mode changes (Shift+Tab, `/plan`).
//!
//! Invariants:
//! - A plan's keys say what they do: `y` approves into `ask`, `a` into `auto` (never an
//!   "always"), `n`/Esc keeps planning, `N` keeps planning with a note.
//! - "Always" is remembered for this session only, never written to a file.

use super::Session;
use keel_agent::Approval;
use keel_tui::Action;

impl Session {
    /// A key while a note for the model is typed.
    pub(super) fn on_note_key(&mut self, act: Action) {
        let refused = if self.asking_plan() {
            "still planning"
        } else {
            "denied"
        };
        let Some(note) = self.view.note_mut() else {
            return;
        };
        match act {
            Action::Insert(c) => note.insert(c),
            Action::Backspace => note.backspace(),
            Action::Left => note.left(),
            Action::Right => note.right(),
            Action::Submit => {
                let text = note.text().trim().to_string();
                let text: String = text.chars().take(keel_agent::LONGEST_NOTE).collect();
                if text.is_empty() {
                    self.answer(Approval::Declined, refused);
                } else {
                    let said = format!("{refused}, with a note: {text}");
                    self.answer(Approval::DeclinedWithNote(text), &said);
                }
            }
            Action::Escape | Action::Interrupt => self.answer(Approval::Declined, refused),
            _ => {}
        }
    }

    /// Whether the question waiting is a plan.
    fn asking_plan(&self) -> bool {
        self.question
            .as_ref()
            .is_some_and(|(request, _)| keel_tui::approval::is_plan(request))
    }

    /// `y`, `n`/Esc, `N` or `a` at a question.
    pub(super) fn on_answer_key(&mut self, act: Action) {
        let plan = self.asking_plan();
        match act {
            Action::Allow if plan => self.answer(
                Approval::AllowSwitching(keel_tools::PermissionMode::Ask),
                "plan approved: mode ask",
            ),
            Action::Always if plan => self.answer(
                Approval::AllowSwitching(keel_tools::PermissionMode::Auto),
                "plan approved: mode auto",
            ),
            Action::Deny if plan => self.answer(Approval::Declined, "still planning"),
            Action::Allow => self.answer(Approval::Allow, "allowed"),
            Action::Deny => self.answer(Approval::Declined, "denied"),
            Action::DenyWithNote => self.view.start_note(),
            Action::Always => {
                // Offered only where something can be remembered (`Question::always`).
                let covered = self
                    .question
                    .as_ref()
                    .and_then(|(request, _)| self.approver.always.remember(request));
                if let Some(covered) = covered {
                    let covered = keel_render::visible_line(&covered).into_owned();
                    self.answer(
                        Approval::Allow,
                        &format!(
                            "allowed, and {covered} is allowed for the rest of this session \
                             (never saved)"
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    pub(super) fn answer(&mut self, approval: Approval, said: &str) {
        if let Some((_, sender)) = self.question.take() {
            let _ = sender.send(approval);
        }
        self.view.set_notice(None);
        self.view.answered(said);
    }

    /// `/plan [PROMPT]`: plan mode, and the prompt (as typed: `shown`) planned in it.
    pub(super) fn enter_plan_mode(&mut self, prompt: Option<String>, shown: &str) {
        if let Some(controller) = self.controller() {
            controller.set_permission_mode(keel_tools::PermissionMode::Plan);
            self.refresh_status();
        }
        match prompt {
            Some(prompt) => self.start_turn(keel_agent::Input::Prompt(prompt), shown),
            None => self.view.set_notice(Some(
                crate::terminal::session_driver::PLAN_MODE_NOTICE.to_string(),
            )),
        }
    }

    /// Shift+Tab: ask → auto → plan → read-only → ask. Later calls are decided under the new
    /// mode; the model is told with the next prompt (or the next tool result of a running
    /// turn).
    pub(super) fn cycle_mode(&mut self) {
        use keel_tools::PermissionMode;
        let Some(controller) = self.controller() else {
            return;
        };
        let next = match controller.permission_mode() {
            PermissionMode::Ask => PermissionMode::Auto,
            PermissionMode::Auto => PermissionMode::Plan,
            PermissionMode::Plan => PermissionMode::ReadOnly,
            PermissionMode::ReadOnly => PermissionMode::Ask,
        };
        controller.set_permission_mode(next);
        let meaning = match next {
            PermissionMode::ReadOnly => "nothing is changed, commands run read-only",
            PermissionMode::Plan => {
                "nothing is changed until you approve the plan the model proposes"
            }
            PermissionMode::Ask => "changes wait for your approval",
            PermissionMode::Auto => "changes inside the workspace run without asking",
        };
        self.view.set_notice(Some(format!(
            "mode {}: {meaning} (Shift+Tab cycles; the model is told with your next prompt)",
            next.as_str()
        )));
        self.refresh_status();
    }
}
