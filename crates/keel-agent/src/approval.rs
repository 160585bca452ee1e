//! Approval of tool calls that the permission policy marks `ask`.
//!
//! Invariants:
//! - Without a person to ask, the answer is no (fail closed), unless the user said `--yes` up
//!   front.
//! - A question is asked first and announced second (`approval/requested`): an approver that
//!   takes answers from elsewhere (a browser) is ready for one before anyone hears of the call.

use crate::Shared;
use std::future::Future;
use std::pin::Pin;

impl Shared {
    /// Put `request` to the person (see the module invariants); the answer, once given.
    pub(crate) fn ask<'a>(
        &'a self,
        turn: u64,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        let answer = self.approver.approve(request);
        self.emit(
            Some(turn),
            keel_types::EventBody::ApprovalRequested {
                call_id: request.call_id.clone(),
                name: request.tool.clone(),
                subject: request.subject.clone(),
                view: keel_types::approval_view(&request.subject),
                unconfined: request.unconfined,
            },
        );
        answer
    }
}

#[derive(Clone, Debug)]
pub struct ApprovalRequest {
    /// The call waiting for the answer (surfaces address their answer to it).
    pub call_id: String,
    pub tool: String,
    pub subject: String,
    pub arguments: String,
    /// Running it again outside the sandbox, after it failed inside: asked every time (no
    /// surface records an "always" for it), and every surface says "unconfined".
    pub unconfined: bool,
    /// A plan to approve (`propose_plan` in plan mode; `subject` is the plan): set by keel
    /// alone, never by a rule. Surfaces ask it as a plan and never remember an "always".
    pub plan: bool,
    /// What a `write_file` or `edit_file` call would change (the exact bytes before and after),
    /// for a surface to show as a diff before it asks.
    pub preview: Option<keel_tools::Preview>,
}

/// The answer to an approval request. Why a call was not approved matters to the model: a
/// person who declined is not the same as nobody being there to ask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    Allow,
    /// A plan approved, to be carried out in this mode (`ask` or `auto`).
    AllowSwitching(keel_tools::PermissionMode),
    /// The person asked said no.
    Declined,
    /// The person said no, with a note for the model (what to do instead).
    DeclinedWithNote(String),
    /// Nobody could be asked (a headless run without `--yes`).
    Unattended,
}

/// The longest note a person may give with a refusal (longer is cut, marked).
pub const LONGEST_NOTE: usize = 2000;

impl Approval {
    /// What the model is told about a call that was not approved; `None` when it was.
    pub fn refusal(self) -> Option<String> {
        let declined = "denied: the user declined this call when asked; it was not run. Do not \
                        retry it as is";
        match self {
            Approval::Allow | Approval::AllowSwitching(_) => None,
            Approval::Declined => Some(format!("{declined}: ask the user or take another way")),
            Approval::DeclinedWithNote(note) => Some(format!(
                "{declined}. The user's note: {}",
                bounded_note(&note)
            )),
            Approval::Unattended => Some(format!(
                "{} (headless runs need --yes or an allow rule); the call was not run",
                crate::recovery::readiness::UNATTENDED_DENIAL
            )),
        }
    }
}

/// A person's note as the model gets it: trimmed, cut at `LONGEST_NOTE` characters (marked).
pub(crate) fn bounded_note(note: &str) -> String {
    let mut note: String = note.trim().chars().take(LONGEST_NOTE).collect();
    if note.chars().count() == LONGEST_NOTE {
        note.push('…');
    }
    note
}

pub trait Approver: Send + Sync {
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>>;

    /// Whether this surface puts a question to a person in keel's own words, so that an
    /// unconfined re-run may be offered. An editor over ACP may answer by itself (an "always
    /// allow tool actions" setting), and nobody is asked without a surface: no.
    fn asks_a_person(&self) -> bool {
        true
    }
}

/// For `keel run`: nobody to ask, so deny (or allow everything with `--yes`).
pub struct HeadlessApprover {
    pub approve_all: bool,
}

impl Approver for HeadlessApprover {
    fn approve<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        let answer = if self.approve_all {
            Approval::Allow
        } else {
            Approval::Unattended
        };
        Box::pin(async move { answer })
    }

    fn asks_a_person(&self) -> bool {
        false
    }
}
