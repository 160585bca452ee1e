//! Approval of tool calls that the permission policy marks `ask`.
//!
//! Invariants:
//! - Without a person to ask, the answer is no (fail closed), unless the user said `--yes` up
//!   front.
//! - A question is asked first and announced second (`approval/requested`): an approver that
//!   takes answers from elsewhere (a browser) is ready for one before anyone hears of the call.

pub use keel_types::ApprovalRequest;
use std::future::Future;
use std::pin::Pin;

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

impl Approval {
    /// The call's result when it was not approved: the model's words (`refusal`) as its
    /// content, and a person's words as the summary their card shows (nothing written for the
    /// model, such as "do not retry it as is", reaches a card); `None` when it was approved.
    pub fn refused_output(self) -> Option<keel_tools::ToolOutput> {
        let summary = match &self {
            Approval::Allow | Approval::AllowSwitching(_) => return None,
            Approval::Declined => "you declined it",
            Approval::DeclinedWithNote(_) => "you declined it, with a note for the model",
            Approval::Unattended => {
                "needs approval, and nobody could be asked: rerun with --yes or an allow rule"
            }
        };
        let content = self.refusal()?;
        Some(keel_tools::ToolOutput {
            content,
            is_error: true,
            summary: summary.to_string(),
        })
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

    /// The surface moves to another session: what was answered "always" in the last one no
    /// longer holds.
    fn forget_always(&self) {}

    /// Whether `request` is answered without a question (an "always" of the asking session
    /// covers it, or nobody is ever asked): such a call never waits for another agent's
    /// question on screen.
    fn answers_without_asking(&self, _request: &ApprovalRequest) -> bool {
        false
    }
}

/// For `keel run`: nobody to ask, so deny (or allow everything with `--yes`).
pub struct HeadlessApprover {
    pub approve_all: bool,
}

impl Approver for HeadlessApprover {
    fn answers_without_asking(&self, _request: &ApprovalRequest) -> bool {
        true
    }

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

/// What "always" for `request` covers (`keel_tools::always`), or `None` when it cannot be
/// remembered: an unconfined re-run, a plan, a call asked for a reason of its own (a read
/// outside the workspace: "always" would allow every such read), a `bash` line not read in
/// full or writing a file by redirection.
pub fn always_scopes(request: &ApprovalRequest) -> Option<Vec<keel_tools::always_scope::Scope>> {
    if request.unconfined || request.plan || request.reason.is_some() {
        return None;
    }
    keel_tools::always_scope::always_scopes(&request.tool, &request.subject)
}

/// "always" for `request` in a person's words (`git status`, `edit_file`), or `None`; each
/// scope folded as the subject is (`keel_types::approval_view::fold_line`: blank runs counted,
/// invisible characters named), so no surface shows less than what is remembered.
pub fn always_label(request: &ApprovalRequest) -> Option<String> {
    always_scopes(request).map(|scopes| {
        scopes
            .iter()
            .map(|scope| keel_types::approval_view::fold_line(&scope.label()))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// `request` with what "always" would cover worded in it: every request the engine asks
/// goes through here, so every surface shows the same words.
pub(crate) fn with_always_label(mut request: ApprovalRequest) -> ApprovalRequest {
    request.always_label = always_label(&request);
    request
}

/// The calls a person said "always" to in one session: held in memory only, never saved, and
/// forgotten when the surface moves to another session (`forget`).
#[derive(Debug, Default)]
pub struct AlwaysAllowed {
    /// (asking session, tool, scope key): the asking session is empty for the session's own
    /// calls and a subagent's child session for its calls — an "always" said to one subagent
    /// covers that subagent only.
    scopes: std::sync::Mutex<std::collections::HashSet<(String, String, String)>>,
}

/// Whose an "always" is: the subagent's child session that asks, or (empty) the session's own.
fn owner(request: &ApprovalRequest) -> String {
    request
        .asked_by
        .as_ref()
        .map(|by| by.session_id.clone())
        .unwrap_or_default()
}

impl AlwaysAllowed {
    /// Whether an earlier "always" covers `request` (every scope of it).
    pub fn covers(&self, request: &ApprovalRequest) -> bool {
        let Some(scopes) = always_scopes(request) else {
            return false;
        };
        let Ok(held) = self.scopes.lock() else {
            return false;
        };
        let owner = owner(request);
        scopes
            .iter()
            .all(|scope| held.contains(&(owner.clone(), request.tool.clone(), scope.key())))
    }

    /// Forget every "always" (another session begins on this surface).
    pub fn forget(&self) {
        if let Ok(mut held) = self.scopes.lock() {
            held.clear();
        }
    }

    /// Remember "always" for `request`; what it covers, or `None` when nothing could be.
    pub fn remember(&self, request: &ApprovalRequest) -> Option<String> {
        let scopes = always_scopes(request)?;
        let mut held = self.scopes.lock().ok()?;
        let owner = owner(request);
        for scope in &scopes {
            held.insert((owner.clone(), request.tool.clone(), scope.key()));
        }
        drop(held);
        always_label(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_said_to_one_subagent_covers_that_subagent_only() {
        let always = AlwaysAllowed::default();
        let by = |session: &str| keel_types::AskedBy {
            session_id: session.into(),
            agent: "general".into(),
            description: "d".into(),
        };
        let childs = ApprovalRequest {
            asked_by: Some(by("child-1")),
            ..request("bash", "git status")
        };
        assert!(always.remember(&childs).is_some());
        assert!(always.covers(&childs));
        let sibling = ApprovalRequest {
            asked_by: Some(by("child-2")),
            ..request("bash", "git status")
        };
        assert!(!always.covers(&sibling), "another subagent is asked");
        assert!(
            !always.covers(&request("bash", "git status")),
            "the parent is asked"
        );
    }

    fn request(tool: &str, subject: &str) -> ApprovalRequest {
        ApprovalRequest {
            call_id: "call_1".into(),
            tool: tool.into(),
            subject: subject.into(),
            arguments: String::new(),
            unconfined: false,
            plan: false,
            reason: None,
            preview: None,
            always_label: None,
            asked_by: None,
        }
    }

    #[test]
    fn always_covers_what_was_said_and_nothing_wider() {
        let always = AlwaysAllowed::default();
        assert_eq!(
            always.remember(&request("bash", "git status")).as_deref(),
            Some("git status")
        );
        assert!(always.covers(&request("bash", "git status --short")));
        assert!(!always.covers(&request("bash", "git push --force")));
        assert!(!always.covers(&request("bash", "git status; rm -rf ~")));
        assert!(!always.covers(&request("bash", "git status > src/lib.rs")));
        // A scope of bash is not a scope of another tool.
        assert!(!always.covers(&request("edit_file", "git status")));
        assert_eq!(
            always.remember(&request("edit_file", "a.rs")).as_deref(),
            Some("edit_file")
        );
        assert!(always.covers(&request("edit_file", "b.rs")));
        always.forget();
        assert!(!always.covers(&request("edit_file", "b.rs")));
        assert!(!always.covers(&request("bash", "git status")));
    }

    #[test]
    fn an_unconfined_run_a_plan_and_an_unread_line_are_never_remembered() {
        let always = AlwaysAllowed::default();
        let mut unconfined = request("bash", "git status");
        unconfined.unconfined = true;
        assert_eq!(always.remember(&unconfined), None);
        let mut plan = request("propose_plan", "do it");
        plan.plan = true;
        assert_eq!(always.remember(&plan), None);
        assert_eq!(always.remember(&request("bash", "git status $(id)")), None);
        let mut outside = request("read_file", "/etc/hosts");
        outside.reason = Some("it reads outside the workspace".into());
        assert_eq!(always.remember(&outside), None);
        assert!(!always.covers(&request("bash", "git status")));
        always.remember(&request("bash", "git status"));
        assert!(!always.covers(&unconfined));
    }
}
