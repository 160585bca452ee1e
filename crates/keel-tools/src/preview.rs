//! What a write or an edit would change, for the person asked to approve it.
//!
//! Invariants:
//! - Computed the way the tool computes it: the same guard, the same handles below the root
//!   (`FileBeneath`, no symlink followed), the same edit (`files::edited`). Nothing is written.
//! - A file larger than `LARGEST_PREVIEWED` is not read; a file an editor holds (ACP) is not
//!   previewed (its contents are the editor's); either way the reason is given instead.
//! - A preview is what the file holds when the question is asked: `write_file` then writes
//!   exactly the approved bytes; `edit_file` applies the approved replacement to the file as
//!   it is when it runs.
//! - A preview never holds one of keel's secrets: both sides are redacted as a tool result is
//!   (`[redacted $NAME]`) before any surface gets them — the terminal's question, the
//!   browser's card, serve's waiting list, an editor's request all show this one value. Bytes
//!   that are not text and hold a secret are not shown at all. The write itself is unchanged.

use crate::ToolServices;
use crate::below_root::{FileBeneath, MissingParents};
use crate::files::{Edited, edited};
use serde_json::Value;

/// Files larger than this are not read for a preview.
const LARGEST_PREVIEWED: u64 = 4 << 20;

pub use keel_types::approval_request::Preview;

fn text_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The preview of a `write_file` or `edit_file` call, redacted; `None` for any other tool.
pub fn preview(tool: &str, args: &Value, ctx: &ToolServices) -> Option<Preview> {
    unredacted(tool, args, ctx).map(|preview| redacted(preview, &ctx.secrets))
}

/// `preview` with keel's secrets shown as `[redacted $NAME]`.
fn redacted(preview: Preview, secrets: &keel_types::Secrets) -> Preview {
    let Preview::Change { before, after } = preview else {
        return preview;
    };
    let clean = |bytes: Vec<u8>| -> Result<Vec<u8>, ()> {
        match String::from_utf8(bytes) {
            Ok(text) => Ok(secrets.redact(&text).into_owned().into_bytes()),
            Err(raw) => {
                let lossy = String::from_utf8_lossy(raw.as_bytes()).into_owned();
                if secrets.redact(&lossy) == lossy {
                    Ok(raw.into_bytes())
                } else {
                    Err(())
                }
            }
        }
    };
    match (before.map(clean).transpose(), clean(after)) {
        (Ok(before), Ok(after)) => Preview::Change { before, after },
        (Err(()), _) | (_, Err(())) => Preview::Unavailable(
            "the file holds one of keel's secrets in bytes that are not text".into(),
        ),
    }
}

fn unredacted(tool: &str, args: &Value, ctx: &ToolServices) -> Option<Preview> {
    if tool != "write_file" && tool != "edit_file" {
        return None;
    }
    let path = text_arg(args, "path");
    let target = match ctx.guard.write_target(path) {
        Ok(target) => target,
        Err(error) => return Some(Preview::Unavailable(error.to_string())),
    };
    if crate::files::editor_for(ctx, &target.resolved).is_some() {
        return Some(Preview::Unavailable(
            "the editor holds this file's contents".into(),
        ));
    }
    let before = match FileBeneath::open(&target, path, MissingParents::Refuse) {
        Ok(file) => match file.current(LARGEST_PREVIEWED) {
            Ok(None) => None,
            Ok(Some(Ok(bytes))) => Some(bytes),
            Ok(Some(Err(size))) => {
                return Some(Preview::Unavailable(format!(
                    "the file is {size} bytes, too large to show a change"
                )));
            }
            Err(error) => return Some(Preview::Unavailable(error.to_string())),
        },
        // Parents that do not exist yet: write_file makes them, and a new file.
        Err(crate::below_root::BeneathError::Missing { .. }) => None,
        Err(error) => return Some(Preview::Unavailable(error.to_string())),
    };
    if tool == "write_file" {
        return Some(Preview::Change {
            before,
            after: text_arg(args, "content").as_bytes().to_vec(),
        });
    }
    let Some(before) = before else {
        return Some(Preview::Unavailable(format!("`{path}` does not exist")));
    };
    let Ok(text) = String::from_utf8(before) else {
        return Some(Preview::Unavailable(format!(
            "`{path}` is not UTF-8 text; edit_file cannot change it"
        )));
    };
    let replace_all = args
        .get("replace_all")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let old = text_arg(args, "old_string");
    let new = text_arg(args, "new_string");
    if old.is_empty() {
        return Some(Preview::Unavailable("`old_string` is empty".into()));
    }
    Some(match edited(path, &text, old, new, replace_all) {
        Ok(Edited { text: after, .. }) => Preview::Change {
            before: Some(text.into_bytes()),
            after: after.into_bytes(),
        },
        Err(why) => Preview::Unavailable(format!("the edit would fail: {why}")),
    })
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::{ToolRegistry, WorkspaceGuard};

    fn context() -> (tempfile::TempDir, ToolServices) {
        let dir = tempfile::tempdir().unwrap();
        let guard = WorkspaceGuard::new(dir.path(), &[]).unwrap();
        (dir, ToolServices::new(guard))
    }

    fn args(json: &str) -> Value {
        serde_json::from_str(json).unwrap()
    }

    #[tokio::test]
    async fn the_previewed_edit_is_the_edit_the_tool_makes() {
        let (dir, ctx) = context();
        std::fs::write(dir.path().join("a.rs"), "let x = 1;\nlet x = 1;\nend\n").unwrap();
        let call = r#"{"path": "a.rs", "old_string": "x = 1", "new_string": "y = 2", "replace_all": true}"#;
        let Some(Preview::Change { before, after }) = preview("edit_file", &args(call), &ctx)
        else {
            panic!("a change")
        };
        assert_eq!(
            before.as_deref(),
            Some(&b"let x = 1;\nlet x = 1;\nend\n"[..])
        );
        let valid = ToolRegistry::new()
            .unwrap()
            .validate("edit_file", call)
            .unwrap();
        assert!(!valid.run(&ctx).await.is_error);
        assert_eq!(std::fs::read(dir.path().join("a.rs")).unwrap(), after);
    }

    #[test]
    fn a_preview_never_holds_a_secret() {
        let (dir, ctx) = context();
        let ctx = ToolServices {
            secrets: keel_types::Secrets::from_names(["CANARY_KEY".to_string()], |_| {
                Some("sk-canary-0123456789".to_string())
            }),
            ..ctx
        };
        std::fs::write(dir.path().join("a.sh"), "K=sk-canary-0123456789\nb\n").unwrap();
        let edit = r#"{"path": "a.sh", "old_string": "b", "new_string": "c"}"#;
        let Some(Preview::Change { before, after }) = preview("edit_file", &args(edit), &ctx)
        else {
            panic!("a change")
        };
        assert_eq!(before.unwrap(), b"K=[redacted $CANARY_KEY]\nb\n");
        assert_eq!(after, b"K=[redacted $CANARY_KEY]\nc\n");
        let mut binary = b"\xff\xfe".to_vec();
        binary.extend_from_slice(b"sk-canary-0123456789");
        std::fs::write(dir.path().join("b.bin"), binary).unwrap();
        let write = r#"{"path": "b.bin", "content": "x"}"#;
        assert!(matches!(
            preview("write_file", &args(write), &ctx),
            Some(Preview::Unavailable(_))
        ));
    }

    #[test]
    fn a_new_file_has_no_before_and_an_existing_one_its_bytes() {
        let (dir, ctx) = context();
        let new = preview(
            "write_file",
            &args(r#"{"path": "deep/new.txt", "content": "hi\n"}"#),
            &ctx,
        );
        assert_eq!(
            new,
            Some(Preview::Change {
                before: None,
                after: b"hi\n".to_vec()
            })
        );
        assert!(
            !dir.path().join("deep").exists(),
            "a preview writes nothing"
        );
        std::fs::write(dir.path().join("old.txt"), "was\n").unwrap();
        let replaced = preview(
            "write_file",
            &args(r#"{"path": "old.txt", "content": "now\n"}"#),
            &ctx,
        );
        assert_eq!(
            replaced,
            Some(Preview::Change {
                before: Some(b"was\n".to_vec()),
                after: b"now\n".to_vec()
            })
        );
        assert_eq!(preview("bash", &args(r#"{"command": "ls"}"#), &ctx), None);
    }

    #[test]
    fn what_cannot_be_previewed_says_why() {
        let (dir, ctx) = context();
        let why = |tool: &str, call: &str| match preview(tool, &args(call), &ctx) {
            Some(Preview::Unavailable(why)) => why,
            other => panic!("{other:?}"),
        };
        assert!(
            why(
                "edit_file",
                r#"{"path": "none.rs", "old_string": "a", "new_string": "b"}"#
            )
            .contains("does not exist")
        );
        std::fs::write(dir.path().join("a.rs"), "abc").unwrap();
        assert!(
            why(
                "edit_file",
                r#"{"path": "a.rs", "old_string": "zzz", "new_string": "b"}"#
            )
            .starts_with("the edit would fail")
        );
        assert!(why("write_file", r#"{"path": "/etc/passwd", "content": ""}"#).contains("outside"));
        std::os::unix::fs::symlink("/etc", dir.path().join("link")).unwrap();
        let through_link = why("write_file", r#"{"path": "link/x", "content": ""}"#);
        assert!(!through_link.is_empty());
        let big = std::fs::File::create(dir.path().join("big.bin")).unwrap();
        big.set_len(LARGEST_PREVIEWED + 1).unwrap();
        assert!(why("write_file", r#"{"path": "big.bin", "content": ""}"#).contains("too large"));
    }
}
