//! What a person is asked about a tool call, as every surface draws it: the request, the
//! change a file tool would make (`Preview`), and the change a stored call's arguments state
//! (`StatedChange`).
//!
//! Invariants:
//! - Plain data: the engine fills every field (keel's secrets already redacted, "always"
//!   already worded); a surface only draws it and sends back an answer.
//! - `stated_change` reads nothing but the arguments: it never touches a file.

use serde_json::Value;

/// A tool call put to the person: what every surface draws and answers.
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
    pub preview: Option<Preview>,
    /// Why it is asked where the subject alone does not say (`it reads outside the workspace`).
    pub reason: Option<String>,
    /// What "always" for this call covers, in a person's words (`git status`, `edit_file`),
    /// filled in by the engine; `None` when it cannot be remembered. Each scope is folded as
    /// the subject is, so no surface shows less than what is remembered.
    pub always_label: Option<String>,
    /// A subagent's call: which agent asks, and for what (`None`: the session's own). Filled
    /// in by the engine as the question is put; every surface says it with the question.
    pub asked_by: Option<AskedBy>,
}

/// The subagent a question comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AskedBy {
    /// The child session (call ids repeat across sessions: an answer names both).
    pub session_id: String,
    /// The agent it runs (`explore`, a custom one).
    pub agent: String,
    /// What its parent's `task` call said it is for.
    pub description: String,
}

/// What a call would do to a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Preview {
    /// The file's bytes before (`None`: it does not exist yet) and after.
    Change {
        before: Option<Vec<u8>>,
        after: Vec<u8>,
    },
    /// Why no change can be shown.
    Unavailable(String),
}

/// What an `edit_file` or `write_file` call's arguments say it changes, read from nothing but
/// the arguments (a stored call, whose file may have changed since): for a surface to show
/// where the file itself is not at hand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatedChange {
    pub path: String,
    /// The text an edit replaces (`None` for a write: its whole content is new).
    pub replaced: Option<String>,
    pub with: String,
}

/// The change a call's raw `arguments` state, for `edit_file` and `write_file` (else `None`,
/// and for arguments that do not name it).
pub fn stated_change(tool: &str, arguments: &str) -> Option<StatedChange> {
    let args: Value = serde_json::from_str(arguments).ok()?;
    let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_string);
    let (replaced, with) = match tool {
        "edit_file" => (Some(text("old_string")?), text("new_string")?),
        "write_file" => (None, text("content")?),
        _ => return None,
    };
    Some(StatedChange {
        path: text("path")?,
        replaced,
        with,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stated_change_is_what_the_arguments_say() {
        let edit = stated_change(
            "edit_file",
            r#"{"path":"a.rs","old_string":"x","new_string":"y"}"#,
        )
        .unwrap();
        assert_eq!(
            (
                edit.path.as_str(),
                edit.replaced.as_deref(),
                edit.with.as_str()
            ),
            ("a.rs", Some("x"), "y")
        );
        let write = stated_change("write_file", r#"{"path":"n","content":"c"}"#).unwrap();
        assert_eq!(write.replaced, None);
        assert_eq!(stated_change("bash", r#"{"command":"ls"}"#), None);
        assert_eq!(stated_change("edit_file", r#"{"path":"a.rs"}"#), None);
        assert_eq!(stated_change("write_file", "not json"), None);
    }
}
