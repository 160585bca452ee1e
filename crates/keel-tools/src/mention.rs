//! `@path` in a prompt: the file's content attached to that prompt.
//!
//! Invariants:
//! - A mention is a word that starts with `@` (at the start of the prompt or after
//!   whitespace), so an address such as `user@example.com` is not one; trailing punctuation
//!   (`,.;:!?)`) is not part of the path.
//! - What is attached is exactly what `read_file` would return for the path, through the same
//!   guard (`forbid_read`, the kernel's process files, the workspace's symlink rules),
//!   bounds and redaction: a mention can read nothing a tool call could not.
//! - A word naming nothing that exists is left as text; a file that exists but may not be
//!   read is reported as not attached, with the reason.

use crate::ToolServices;

/// The paths a prompt mentions, in order, each once.
pub fn mentions(prompt: &str) -> Vec<&str> {
    let mut found: Vec<&str> = Vec::new();
    for word in prompt.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        let path = path.trim_end_matches([',', '.', ';', ':', '!', '?', ')']);
        if !path.is_empty() && !found.contains(&path) {
            found.push(path);
        }
    }
    found
}

/// Whether a mention of `path` names something that exists (as the guard resolves it): what
/// decides whether it is attached (or its refusal named) or ignored.
pub fn names_something(path: &str, ctx: &ToolServices) -> bool {
    ctx.guard
        .resolve(path)
        .is_ok_and(|resolved| std::fs::symlink_metadata(resolved).is_ok())
}

/// The content to attach for a mention of `path`: `None` when it names nothing that exists,
/// else what `read_file` returns, or why it may not be read.
pub fn attachment(path: &str, ctx: &ToolServices) -> Option<Result<String, String>> {
    if !names_something(path, ctx) {
        return None;
    }
    let output = crate::files::read_file(&serde_json::json!({ "path": path }), ctx);
    Some(if output.is_error {
        Err(output.content)
    } else {
        Ok(output.content)
    })
}

/// The bytes of an instruction file (`AGENTS.md` and kin) at `path`, read under the rules of
/// `read_file` (the sandbox's forbid_read after every link is followed, a regular file only),
/// at most `cap` of them; and the file's size. With `owner`, the file opened must belong to
/// that user or to root (another local user's file gives no instructions).
pub fn instruction_file(
    path: &std::path::Path,
    ctx: &ToolServices,
    cap: u64,
    owner: Option<u32>,
) -> Result<(Vec<u8>, u64), String> {
    use std::io::Read;
    let shown = path.display().to_string();
    let resolved = ctx
        .guard
        .resolve(&shown)
        .map_err(|error| error.to_string())?;
    if let Some(refusal) = ctx.read_refusal(&shown, &resolved) {
        return Err(refusal.content);
    }
    if let Some(tree) = crate::special_files::kernel_tree(&resolved) {
        return Err(format!(
            "`{shown}` is in {tree}; keel does not read instructions there"
        ));
    }
    let file =
        crate::special_files::open_regular(&resolved, &shown).map_err(|error| error.to_string())?;
    if let Some(owner) = owner {
        use std::os::unix::fs::MetadataExt;
        // The file opened, not the name: nothing can be swapped in between.
        let uid = file
            .metadata()
            .map_err(|error| format!("cannot read `{shown}`: {error}"))?
            .uid();
        if uid != owner && uid != 0 {
            return Err(format!(
                "it belongs to another user (uid {uid}): keel reads instructions only from \
                 files of the workspace's owner or root"
            ));
        }
    }
    let size = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    let mut bytes = Vec::new();
    file.take(cap)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read `{shown}`: {error}"))?;
    let size = size.max(bytes.len() as u64);
    Ok((bytes, size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkspaceGuard;

    #[test]
    fn mentions_are_words_starting_with_an_at_sign() {
        assert_eq!(
            mentions("look at @src/lib.rs, then @README.md. mail a@b.c @src/lib.rs @"),
            ["src/lib.rs", "README.md"]
        );
    }

    #[test]
    fn an_attachment_is_what_read_file_returns_and_a_refusal_says_why() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
        let ctx = ToolServices::new(WorkspaceGuard::new(dir.path(), &[]).unwrap());
        let attached = attachment("notes.txt", &ctx).unwrap().unwrap();
        assert!(attached.contains("hello"), "{attached}");
        assert_eq!(attachment("missing.txt", &ctx), None);
        let refused = attachment("/proc/self/environ", &ctx).unwrap().unwrap_err();
        assert!(refused.contains("kernel"), "{refused}");
    }
}
