//! What keel asks of the editor: permission for a call (`session/request_permission`) and,
//! when it offers them, its files (`fs/read_text_file`, `fs/write_text_file`).
//!
//! Invariants:
//! - Anything but an explicit allow is a decline. "Allow always" covers what
//!   `ApprovalRequest::always_scopes` says (the tool; for `bash` a read-only subcommand or the
//!   exact command), is named by it, and is not offered where nothing can be remembered;
//!   "reject always" refuses the whole tool. Both last for the session (one approver a session).
//! - A plan (`propose_plan` in plan mode) is asked with its whole text and two approvals that
//!   name the mode it is carried out in; neither is remembered.
//! - File calls go to the editor only after the workspace guard (the tools do that); they are
//!   made from the file tools' blocking threads and wait for the editor's answer.

use crate::lock;
use crate::rpc::Connection;
use keel_agent::{AlwaysAllowed, Approval, ApprovalRequest, Approver};
use keel_tools::EditorFiles;
use serde_json::{Value, json};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Mutex;

/// Asks the editor through `session/request_permission`.
pub(crate) struct AcpApprover {
    pub(crate) connection: Connection,
    pub(crate) session: Mutex<Option<String>>,
    /// The session's working directory (a relative path in a request is below it).
    pub(crate) cwd: std::path::PathBuf,
    /// What "allow always" covers for the rest of the session.
    pub(crate) always: AlwaysAllowed,
    /// Tools refused for the rest of the session ("reject always"), by the asking session
    /// (empty: the session's own calls; a subagent's child session for its calls).
    pub(crate) never: Mutex<Vec<(String, String)>>,
}

impl Approver for AcpApprover {
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async move {
            if request.plan {
                return self.approve_plan(request).await;
            }
            let Some(session) = lock(&self.session).clone() else {
                return Approval::Unattended;
            };
            // Folded like the terminal's question: nothing can push the command out of sight.
            let view = keel_types::approval_view(&request.subject);
            let mut title = match view.line_count {
                1 => format!("{} {}", request.tool, view.head),
                n => format!("{} {} ({n} lines)", request.tool, view.head),
            };
            if view.hidden_chars > 0 {
                title.push_str(&format!(
                    " — {} characters of long lines not shown",
                    view.hidden_chars
                ));
            }
            // A subagent's call: its own session's id names it (call ids repeat across
            // sessions), its question says which agent asks and for what, and it is announced
            // as a tool call first (the editor sees only the parent's stream).
            let call_id = match &request.asked_by {
                Some(by) => {
                    title = format!(
                        "[{} agent, for “{}”] {title}",
                        by.agent,
                        by.description.escape_debug()
                    );
                    let id = crate::updates::child_call_id(&by.session_id, &request.call_id);
                    let mut announced = crate::updates::tool_call(
                        &self.cwd,
                        &id,
                        &request.tool,
                        &request.arguments,
                        Some(&request.subject),
                    );
                    announced["title"] = Value::String(title.clone());
                    self.connection.notify(
                        "session/update",
                        json!({"sessionId": session, "update": announced}),
                    );
                    id
                }
                None => request.call_id.clone(),
            };
            // Answered without a question where an "always" of the asking session (a
            // subagent's own, for its calls) covers it; a subagent's call was announced above
            // all the same, so its end is reported for a call the editor knows.
            let whose = request
                .asked_by
                .as_ref()
                .map_or(String::new(), |by| by.session_id.clone());
            // An unconfined run is asked about every time.
            if self.always.covers(request) {
                return Approval::Allow;
            }
            if !request.unconfined
                && lock(&self.never).contains(&(whose.clone(), request.tool.clone()))
            {
                return Approval::Declined;
            }
            let options = if request.unconfined {
                title = format!(
                    "It failed inside keel's sandbox: run it again OUTSIDE, unconfined? {title}"
                );
                json!([
                    {"optionId": "allow_once", "name": "Run unconfined once", "kind": "allow_once"},
                    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                ])
            } else {
                let mut options = vec![
                    json!({"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"}),
                ];
                if let Some(label) = request.always_label.clone() {
                    options.push(json!({"optionId": "allow_always",
                        "name": format!("Allow always: {label} (this session)"),
                        "kind": "allow_always"}));
                }
                options.push(
                    json!({"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}),
                );
                options.push(json!({"optionId": "reject_always",
                    "name": format!("Reject {} always (this session)", request.tool),
                    "kind": "reject_always"}));
                Value::Array(options)
            };
            let mut content = vec![
                json!({"type": "content", "content": {"type": "text", "text": view.lines.join("\n")}}),
            ];
            // The exact change, as the terminal and the browser show it before they ask
            // (keel's secrets already redacted in it: `keel_tools::preview`).
            if let Some(diff) = preview_diff(request, &self.cwd) {
                content.push(diff);
            }
            let params = json!({
                "sessionId": session,
                "toolCall": {"toolCallId": call_id, "title": title, "status": "pending",
                    "content": content},
                "options": options,
            });
            match self.ask(params).await.as_deref() {
                Some("allow_once") => Approval::Allow,
                // Where nothing can be remembered it was not offered: an editor that sends
                // it anyway gets a yes for this call only.
                Some("allow_always") => {
                    self.always.remember(request);
                    Approval::Allow
                }
                Some("reject_always") if !request.unconfined => {
                    lock(&self.never).push((whose, request.tool.clone()));
                    Approval::Declined
                }
                // Rejected, cancelled by the client, or no answer: not approved.
                Some(_) | None => Approval::Declined,
            }
        })
    }

    fn answers_without_asking(&self, request: &ApprovalRequest) -> bool {
        let whose = request
            .asked_by
            .as_ref()
            .map_or(String::new(), |by| by.session_id.clone());
        !request.plan
            && (self.always.covers(request)
                || (!request.unconfined
                    && lock(&self.never).contains(&(whose, request.tool.clone()))))
    }

    /// An editor may answer permission requests by itself: no unconfined re-run is offered.
    fn asks_a_person(&self) -> bool {
        false
    }
}

impl AcpApprover {
    /// The option the editor chose (`None`: cancelled, or no answer).
    async fn ask(&self, params: Value) -> Option<String> {
        let answer = self
            .connection
            .request("session/request_permission", params)
            .await;
        answer.ok().and_then(|result| {
            let outcome = result.get("outcome")?;
            (outcome.get("outcome")?.as_str()? == "selected")
                .then(|| outcome.get("optionId")?.as_str().map(str::to_string))?
        })
    }

    /// A plan: approved into `ask` or `auto`, or not (keel stays in plan mode).
    async fn approve_plan(&self, request: &ApprovalRequest) -> Approval {
        let Some(session) = lock(&self.session).clone() else {
            return Approval::Unattended;
        };
        let params = json!({
            "sessionId": session,
            "toolCall": {"toolCallId": request.call_id,
                "title": "Plan: approve it to leave plan mode (nothing has been changed)",
                "status": "pending",
                "content": [{"type": "content", "content": {"type": "text", "text": request.subject}}]},
            "options": [
                {"optionId": "plan_ask", "name": "Approve, then ask before changes", "kind": "allow_once"},
                {"optionId": "plan_auto", "name": "Approve, then change without asking", "kind": "allow_once"},
                {"optionId": "reject_once", "name": "Keep planning", "kind": "reject_once"},
            ],
        });
        match self.ask(params).await.as_deref() {
            Some("plan_ask") => Approval::AllowSwitching(keel_tools::PermissionMode::Ask),
            Some("plan_auto") => Approval::AllowSwitching(keel_tools::PermissionMode::Auto),
            Some(_) | None => Approval::Declined,
        }
    }
}

/// The longest keel waits for the editor to answer one file call (a turn, or a rewind, holds
/// the session while it waits).
const EDITOR_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The editor's files: `fs/read_text_file` and `fs/write_text_file` to the client, so it sees
/// unsaved buffers and owns the write. Called from the file tools' blocking threads.
pub(crate) struct AcpEditor {
    pub(crate) connection: Connection,
    pub(crate) session: Mutex<Option<String>>,
    pub(crate) runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for AcpEditor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AcpEditor")
    }
}

impl AcpEditor {
    fn call(&self, method: &str, mut params: Value) -> Result<Value, String> {
        let session = lock(&self.session)
            .clone()
            .ok_or_else(|| "the session is not open yet".to_string())?;
        params["sessionId"] = Value::String(session);
        self.runtime
            .block_on(tokio::time::timeout(
                EDITOR_CALL_TIMEOUT,
                self.connection.request(method, params),
            ))
            .map_err(|_| {
                format!(
                    "the editor did not answer `{method}` in {} s",
                    EDITOR_CALL_TIMEOUT.as_secs()
                )
            })?
            .map_err(|error| error.message)
    }
}

impl EditorFiles for AcpEditor {
    fn read(&self, path: &Path) -> Result<String, String> {
        let result = self.call(
            "fs/read_text_file",
            json!({"path": path.display().to_string()}),
        )?;
        result
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| "the editor answered without `content`".to_string())
    }

    fn write(&self, path: &Path, content: &str) -> Result<(), String> {
        self.call(
            "fs/write_text_file",
            json!({"path": path.display().to_string(), "content": content}),
        )
        .map(|_| ())
    }
}

/// The `diff` content (ACP's `{type, path, oldText, newText}`) of an edit's or a write's
/// preview, where it has one in text and a path an editor can show (absolute).
fn preview_diff(request: &ApprovalRequest, cwd: &Path) -> Option<Value> {
    let Some(keel_tools::Preview::Change { before, after }) = &request.preview else {
        return None;
    };
    // As large as a preview event may be, no larger (the terminal shows its own cut).
    let limit = keel_types::event::PREVIEW_EVENT_BYTES;
    if after.len() > limit || before.as_ref().is_some_and(|before| before.len() > limit) {
        return None;
    }
    let path = cwd.join(&request.subject);
    let old_text = match before {
        Some(bytes) => Value::String(String::from_utf8(bytes.clone()).ok()?),
        None => Value::Null,
    };
    let new_text = String::from_utf8(after.clone()).ok()?;
    Some(
        json!({"type": "diff", "path": path.display().to_string(), "oldText": old_text,
        "newText": new_text}),
    )
}
