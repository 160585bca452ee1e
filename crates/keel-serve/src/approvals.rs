//! Approvals answered over HTTP: a call that asks waits until a browser decides.
//!
//! Invariants:
//! - A waiting call is keyed by the asking session and call id (a subagent asks under its own
//!   child session: call ids repeat across sessions); the first decision wins, a second one (or
//!   one for a call that is not waiting) is refused, so two browsers cannot both decide.
//! - When the turn is cancelled the waiting future is dropped: the call leaves the table and
//!   the turn records it as denied (the controller's cancel path); nothing waits for ever.
//! - "always" allows what it covers (`ApprovalRequest::always_scopes`: the tool, or for `bash`
//!   the program and subcommand of each command) for the rest of the session without asking
//!   again (a subagent's "always" covers that subagent only); where nothing can be remembered (`always` absent on the call) it allows once. A plan
//!   (`propose_plan` in plan mode) is never allowed "always": each plan is approved by itself,
//!   with the mode to carry it out in (`mode`), which no other call takes.

use keel_agent::{AlwaysAllowed, Approval, ApprovalRequest, Approver};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::oneshot;

/// A browser's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allow, switching the session to the mode given (for a plan: the mode to carry it out in).
    Allow(Option<keel_tools::PermissionMode>),
    /// Deny, with the person's note for the model when they gave one.
    Deny(Option<String>),
    Always,
}

impl Decision {
    pub fn parse(text: &str) -> Option<Decision> {
        match text {
            "allow" => Some(Decision::Allow(None)),
            "deny" => Some(Decision::Deny(None)),
            "always" => Some(Decision::Always),
            _ => None,
        }
    }
}

type Key = (String, String);

/// A call waiting for a decision, as a client shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WaitingCall {
    /// The session that asks: a subagent's child session, or the session itself.
    pub session_id: String,
    /// The subagent that asks and what it was started for (absent for the session's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The session whose approver asked (the parent of a subagent that asks).
    #[serde(skip)]
    pub asked_through: String,
    pub call_id: String,
    pub name: String,
    pub subject: String,
    /// The subject folded for a person, as the approval card shows it.
    pub view: keel_types::ApprovalView,
    /// Running it again outside the sandbox: "always" is taken as allowing it once.
    pub unconfined: bool,
    /// What "always" covers, in a person's words (`git status`); absent where it is not
    /// offered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always: Option<String>,
    /// Why it is asked where the subject alone does not say (a read outside the workspace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What a write or an edit would change, as keel-render's diff table (or why none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff_html: Option<String>,
    /// A plan to approve, rendered from its markdown by keel-render (sanitised).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_html: Option<String>,
}

/// The preview of a call as the page shows it.
fn diff_html(preview: Option<&keel_tools::Preview>) -> Option<String> {
    match preview? {
        keel_tools::Preview::Change { before, after } => {
            Some(keel_render::FileDiff::new(before.as_deref(), after).html())
        }
        keel_tools::Preview::Unavailable(why) => {
            let mut html = String::from("<p class=\"muted\">no diff to show: ");
            html.push_str(&keel_render::escaped(why));
            html.push_str("</p>");
            Some(html)
        }
    }
}

/// Calls waiting for a decision, across sessions.
#[derive(Default)]
pub struct Approvals {
    waiting: Mutex<HashMap<Key, (oneshot::Sender<Decision>, WaitingCall)>>,
    /// Each session's "always" answers.
    always: Mutex<HashMap<String, Arc<AlwaysAllowed>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Why a decision was not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("call `{call_id}` is not waiting for a decision (already decided, cancelled or unknown)")]
pub struct NotWaiting {
    pub call_id: String,
}

impl Approvals {
    /// Deliver a decision; the first one for a waiting call wins.
    pub fn decide(
        &self,
        session: &str,
        call_id: &str,
        decision: Decision,
    ) -> Result<(), NotWaiting> {
        let sender = lock(&self.waiting).remove(&(session.to_string(), call_id.to_string()));
        let delivered = sender.is_some_and(|(sender, _)| sender.send(decision).is_ok());
        if delivered {
            Ok(())
        } else {
            Err(NotWaiting {
                call_id: call_id.to_string(),
            })
        }
    }

    /// The calls of `session` waiting for a decision (a reloaded page draws their buttons).
    /// The call `call_id` of `session`, if it waits.
    pub fn waiting_call(&self, session: &str, call_id: &str) -> Option<WaitingCall> {
        lock(&self.waiting)
            .get(&(session.to_string(), call_id.to_string()))
            .map(|(_, call)| call.clone())
    }

    /// The calls of `session` and of its subagents waiting for a decision.
    pub fn waiting(&self, session: &str) -> Vec<WaitingCall> {
        let mut calls: Vec<WaitingCall> = lock(&self.waiting)
            .iter()
            .filter(|((waiting_session, _), (_, call))| {
                waiting_session == session || call.asked_through == session
            })
            .map(|(_, (_, call))| call.clone())
            .collect();
        calls.sort_by(|a, b| a.call_id.cmp(&b.call_id));
        calls
    }

    /// The approver for one session's controller; `session` is set once the session is open.
    pub fn approver(self: &Arc<Self>) -> Arc<SessionApprover> {
        Arc::new(SessionApprover {
            approvals: self.clone(),
            session: OnceLock::new(),
        })
    }
}

/// Removes a waiting call from the table when its future ends or is dropped.
struct Waiting<'a> {
    approvals: &'a Approvals,
    key: Key,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.approvals.waiting).remove(&self.key);
    }
}

pub struct SessionApprover {
    approvals: Arc<Approvals>,
    session: OnceLock<String>,
}

impl SessionApprover {
    pub fn set_session(&self, session: &str) {
        let _ = self.session.set(session.to_string());
    }
}

impl SessionApprover {
    /// The asking session's "always" answers (a subagent's own, for its calls).
    fn always_of(&self, session: &str, request: &ApprovalRequest) -> Arc<AlwaysAllowed> {
        let asking = request
            .asked_by
            .as_ref()
            .map_or(session, |by| by.session_id.as_str())
            .to_string();
        lock(&self.approvals.always)
            .entry(asking)
            .or_default()
            .clone()
    }
}

impl Approver for SessionApprover {
    fn answers_without_asking(&self, request: &ApprovalRequest) -> bool {
        self.session
            .get()
            .is_some_and(|session| self.always_of(session, request).covers(request))
    }

    /// Registers the call as waiting at once (when called, not when first polled), so a
    /// decision that arrives right after the call is announced finds it.
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        let Some(session) = self.session.get() else {
            return Box::pin(async { Approval::Unattended });
        };
        let approvals = &self.approvals;
        let plan = request.plan;
        // A subagent asks under its own session: its calls, and its "always", are its own.
        let asking = request
            .asked_by
            .as_ref()
            .map_or(session.as_str(), |by| by.session_id.as_str())
            .to_string();
        let always = lock(&approvals.always)
            .entry(asking.clone())
            .or_default()
            .clone();
        // An unconfined run is asked about every time, and so is every plan (`covers`).
        if always.covers(request) {
            return Box::pin(async { Approval::Allow });
        }
        let (sender, receiver) = oneshot::channel();
        let key = (asking.clone(), request.call_id.clone());
        let call = WaitingCall {
            session_id: asking,
            agent: request.asked_by.as_ref().map(|by| by.agent.clone()),
            description: request.asked_by.as_ref().map(|by| by.description.clone()),
            asked_through: session.clone(),
            call_id: request.call_id.clone(),
            name: request.tool.clone(),
            subject: request.subject.clone(),
            view: keel_types::approval_view(&request.subject),
            unconfined: request.unconfined,
            always: request.always_label.clone(),
            reason: request.reason.clone(),
            diff_html: diff_html(request.preview.as_ref()),
            plan_html: plan.then(|| keel_render::markdown_html(&request.subject)),
        };
        lock(&approvals.waiting).insert(key.clone(), (sender, call));
        let waiting = Waiting { approvals, key };
        Box::pin(async move {
            let _waiting = waiting;
            match receiver.await {
                Ok(Decision::Allow(None)) => Approval::Allow,
                Ok(Decision::Allow(Some(mode))) if plan => Approval::AllowSwitching(mode),
                Ok(Decision::Allow(Some(_))) => Approval::Allow,
                Ok(Decision::Always) => {
                    always.remember(request);
                    Approval::Allow
                }
                Ok(Decision::Deny(None)) => Approval::Declined,
                Ok(Decision::Deny(Some(note))) => Approval::DeclinedWithNote(note),
                Err(_) => Approval::Unattended,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn still_waiting(waiting: &mut Pin<&mut impl Future<Output = Approval>>) -> bool {
        tokio::time::timeout(std::time::Duration::from_millis(20), waiting.as_mut())
            .await
            .is_err()
    }

    fn request(call_id: &str) -> ApprovalRequest {
        ApprovalRequest {
            call_id: call_id.into(),
            tool: "bash".into(),
            subject: "ls".into(),
            arguments: "{}".into(),
            unconfined: false,
            plan: false,
            reason: None,
            preview: None,
            always_label: Some("ls".into()),
            asked_by: None,
        }
    }

    #[tokio::test]
    async fn the_first_decision_wins_and_a_second_is_refused() {
        let approvals = Arc::new(Approvals::default());
        let approver = approvals.approver();
        approver.set_session("s1");
        let call = request("c1");
        let waiting = approver.approve(&call);
        tokio::pin!(waiting);
        assert!(still_waiting(&mut waiting).await);
        assert_eq!(approvals.decide("s1", "c1", Decision::Deny(None)), Ok(()));
        assert!(approvals.decide("s1", "c1", Decision::Allow(None)).is_err());
        assert_eq!(waiting.await, Approval::Declined);
        assert!(
            approvals.decide("s2", "c1", Decision::Allow(None)).is_err(),
            "other session"
        );
    }

    #[tokio::test]
    async fn a_dropped_wait_leaves_nothing_to_decide_and_always_sticks() {
        let approvals = Arc::new(Approvals::default());
        let approver = approvals.approver();
        approver.set_session("s1");
        {
            let call = request("c1");
            let waiting = approver.approve(&call);
            tokio::pin!(waiting);
            assert!(still_waiting(&mut waiting).await);
        }
        assert!(approvals.decide("s1", "c1", Decision::Allow(None)).is_err());
        let call = request("c2");
        let waiting = approver.approve(&call);
        tokio::pin!(waiting);
        assert!(still_waiting(&mut waiting).await);
        approvals.decide("s1", "c2", Decision::Always).unwrap();
        assert_eq!(waiting.await, Approval::Allow);
        assert_eq!(approver.approve(&request("c3")).await, Approval::Allow);
    }

    fn command(call_id: &str, line: &str) -> ApprovalRequest {
        let request = ApprovalRequest {
            tool: "bash".into(),
            subject: line.into(),
            ..request(call_id)
        };
        // Worded as the engine words it for every request it asks.
        ApprovalRequest {
            always_label: keel_agent::always_label(&request),
            ..request
        }
    }

    #[tokio::test]
    async fn always_for_a_command_covers_its_program_and_subcommand_in_its_session_only() {
        let approvals = Arc::new(Approvals::default());
        let approver = approvals.approver();
        approver.set_session("s1");
        let call = command("c1", "git status");
        let waiting = approver.approve(&call);
        tokio::pin!(waiting);
        assert!(still_waiting(&mut waiting).await);
        assert_eq!(
            approvals
                .waiting_call("s1", "c1")
                .unwrap()
                .always
                .as_deref(),
            Some("git status")
        );
        approvals.decide("s1", "c1", Decision::Always).unwrap();
        assert_eq!(waiting.await, Approval::Allow);
        assert_eq!(
            approver.approve(&command("c2", "git status -s")).await,
            Approval::Allow
        );
        for (call_id, line) in [("c3", "git push"), ("c4", "git status && rm -rf ~")] {
            let call = command(call_id, line);
            let waiting = approver.approve(&call);
            tokio::pin!(waiting);
            assert!(still_waiting(&mut waiting).await, "{line}");
        }
        // Another session has its own answers.
        let other = approvals.approver();
        other.set_session("s2");
        let call = command("c5", "git status");
        let waiting = other.approve(&call);
        tokio::pin!(waiting);
        assert!(still_waiting(&mut waiting).await);
    }

    #[tokio::test]
    async fn a_line_keel_cannot_read_offers_no_always_and_always_allows_it_once() {
        let approvals = Arc::new(Approvals::default());
        let approver = approvals.approver();
        approver.set_session("s1");
        let call = command("c1", "echo $(id)");
        let waiting = approver.approve(&call);
        tokio::pin!(waiting);
        assert!(still_waiting(&mut waiting).await);
        assert_eq!(approvals.waiting_call("s1", "c1").unwrap().always, None);
        approvals.decide("s1", "c1", Decision::Always).unwrap();
        assert_eq!(waiting.await, Approval::Allow);
        let again = command("c2", "echo $(id)");
        let waiting = approver.approve(&again);
        tokio::pin!(waiting);
        assert!(still_waiting(&mut waiting).await);
    }
}
