//! Putting a file back as a checkpoint says it was (for a rewind), under the rules every
//! write keel makes follows.
//!
//! Invariants:
//! - The path is resolved by the guard now and must be exactly the path recorded: a link
//!   swapped into the way since (a parent made a link to `~/.ssh`) is refused, never followed.
//! - A path the file tools may not change (hidden, protected: `.git/hooks`, `keel.toml`) is
//!   refused whatever the checkpoint says.
//! - Content is written atomically (a temporary file renamed over the target); removal takes
//!   a regular file only, through the parent's directory handle. With an editor (ACP's `fs`)
//!   text goes back through it, after the same checks, so its open buffer is what is restored.

use crate::ToolServices;
use crate::below_root::{FileBeneath, MissingParents};
use std::path::Path;

/// Write `content` at `path`, or remove what is there (`None`: it did not exist).
pub fn restore_file(ctx: &ToolServices, path: &str, content: Option<&[u8]>) -> Result<(), String> {
    let target = ctx
        .guard
        .write_target(path)
        .map_err(|error| error.to_string())?;
    if target.resolved != Path::new(path) {
        return Err(format!(
            "`{path}` now leads to {} (a link is on the way): not followed",
            target.resolved.display()
        ));
    }
    if let Some(refusal) = ctx.change_refusal(path, &target.resolved) {
        return Err(refusal.content);
    }
    let missing = if content.is_some() {
        MissingParents::Create
    } else {
        MissingParents::Refuse
    };
    let file = match FileBeneath::open(&target, path, missing) {
        Ok(file) => file,
        // Removing a file whose directory is gone: nothing to remove.
        Err(crate::below_root::BeneathError::Missing { .. }) if content.is_none() => return Ok(()),
        Err(error) => return Err(error.to_string()),
    };
    // A text file the editor may have open goes back through the editor, so its buffer
    // shows it (the editor owns the write); anything else, and a removal, on disk.
    if let (Some(editor), Some(text)) = (
        ctx.editor_for(&target.resolved),
        content.and_then(|bytes| std::str::from_utf8(bytes).ok()),
    ) {
        return editor
            .write(&target.resolved, text)
            .map_err(|error| format!("the editor did not take it back: {error}"));
    }
    match content {
        Some(bytes) => file.write_atomically(bytes).map(|_| ()),
        None => file.remove_regular(),
    }
    .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkspaceGuard;

    #[test]
    fn a_link_on_the_way_is_refused_and_nothing_else_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("inner")).unwrap();
        std::fs::write(root.join("inner/x.txt"), "inner\n").unwrap();
        std::os::unix::fs::symlink(root.join("inner"), root.join("link")).unwrap();
        let ctx = ToolServices::new(WorkspaceGuard::new(&root, &[]).unwrap());
        let through = root.join("link/x.txt").display().to_string();
        for content in [Some(&b"new\n"[..]), None] {
            let refused = restore_file(&ctx, &through, content).unwrap_err();
            assert!(refused.contains("a link is on the way"), "{refused}");
        }
        assert_eq!(
            std::fs::read_to_string(root.join("inner/x.txt")).unwrap(),
            "inner\n"
        );
        // The plain path works: written in place, then removed.
        let plain = root.join("inner/x.txt").display().to_string();
        restore_file(&ctx, &plain, Some(b"back\n")).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("inner/x.txt")).unwrap(),
            "back\n"
        );
        restore_file(&ctx, &plain, None).unwrap();
        assert!(!root.join("inner/x.txt").exists());
        restore_file(&ctx, &plain, None).unwrap();
    }
}
