//! Approval of tool calls that the permission policy marks `ask`.
//!
//! Invariant: without a person to ask, the answer is no (fail closed), unless the user said
//! `--yes` up front.

use std::future::Future;
use std::pin::Pin;

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
    /// What a `write_file` or `edit_file` call would change (the exact bytes before and after),
    /// for a surface to show as a diff before it asks.
    pub preview: Option<keel_tools::Preview>,
}

/// The answer to an approval request. Why a call was not approved matters to the model: a
/// person who declined is not the same as nobody being there to ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    Allow,
    /// The person asked said no.
    Declined,
    /// Nobody could be asked (a headless run without `--yes`).
    Unattended,
}

impl Approval {
    /// What the model is told about a call that was not approved; `None` when it was.
    pub fn refusal(self) -> Option<&'static str> {
        match self {
            Approval::Allow => None,
            Approval::Declined => Some(
                "denied: the user declined this call when asked; it was not run. Do not retry \
                 it as is: ask the user or take another way",
            ),
            Approval::Unattended => Some(
                "denied: this call needs approval and there was nobody to ask (headless runs \
                 need --yes or an allow rule); the call was not run",
            ),
        }
    }
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
