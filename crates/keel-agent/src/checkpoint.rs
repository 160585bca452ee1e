//! Checkpoints of the files a turn's file tools change: the pre-image of each `write_file`
//! and `edit_file` target, committed with the call's `started` receipt, and what the call
//! left there, committed with its result.
//!
//! Invariants:
//! - No file tool writes without its undo record: the pre-image is in the transaction that
//!   marks the call started (`Store::start_with_pre_images`), before the tool runs.
//! - Nothing the file tools may not change is read for a checkpoint (hidden and protected
//!   paths: the tool refuses the call anyway), and no content that holds one of keel's
//!   secrets is stored (the store never holds a secret): such a file is recorded as not kept.
//! - Only a regular file up to `MOST_KEPT_BYTES`, within the session's budget, is kept;
//!   anything else is recorded as not kept, and a rewind says it cannot restore it.
//! - Where the file tools go through an editor (ACP's `fs`), a file is read as the editor has
//!   it, before and after: what the write replaced may be an unsaved buffer.

use crate::call::Valid;
use keel_store::{Before, PreImage, Store, StoreError};
use keel_tools::{BuiltinTool, ToolServices};
use std::path::Path;

/// The largest file kept as a pre-image.
pub(crate) const MOST_KEPT_BYTES: u64 = 16 * 1024 * 1024;

/// What `valid` may change, as it is now (file tools only; a path the tool will refuse has
/// nothing to keep).
pub(crate) fn pre_images(valid: &Valid, ctx: &ToolServices) -> Result<Vec<PreImage>, StoreError> {
    let Valid::Builtin(call) = valid else {
        return Ok(Vec::new());
    };
    if !matches!(call.tool, BuiltinTool::WriteFile | BuiltinTool::EditFile) {
        return Ok(Vec::new());
    }
    let Some(path) = call.resolved().filter(|path| ctx.guard.is_inside(path)) else {
        return Ok(Vec::new());
    };
    let shown = path.display().to_string();
    if ctx.change_refusal(&shown, path).is_some() {
        return Ok(Vec::new());
    }
    Ok(vec![PreImage {
        path: shown,
        before: before(path, ctx),
    }])
}

/// What is at `path` now: as the editor has it, where the file tools go through one (an
/// unsaved buffer is what the write replaces), else on disk.
pub(crate) fn before(path: &Path, ctx: &ToolServices) -> Before {
    if let Some(Ok(text)) = through_editor(path, ctx) {
        return kept(text.into_bytes(), ctx);
    }
    let meta = match path.symlink_metadata() {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Before::Absent,
        Err(error) => return Before::NotKept(format!("unreadable: {error}")),
    };
    if !meta.is_file() {
        return Before::NotKept("not a regular file".into());
    }
    if meta.len() > MOST_KEPT_BYTES {
        return Before::NotKept(format!("larger than {MOST_KEPT_BYTES} bytes"));
    }
    match std::fs::read(path) {
        Ok(bytes) => kept(bytes, ctx),
        Err(error) => Before::NotKept(format!("unreadable: {error}")),
    }
}

/// `bytes` as a pre-image, unless too large or holding a secret.
fn kept(bytes: Vec<u8>, ctx: &ToolServices) -> Before {
    if bytes.len() as u64 > MOST_KEPT_BYTES {
        return Before::NotKept(format!("larger than {MOST_KEPT_BYTES} bytes"));
    }
    let text = String::from_utf8_lossy(&bytes);
    if ctx.secrets.redact(&text) != text {
        return Before::NotKept("it holds a secret keel keeps out of its store".into());
    }
    Before::Bytes(bytes)
}

/// The text of `path` as the editor has it, when the file tools go through one (`None`: no
/// editor for it). The editor's answer may take a while: the async worker steps aside.
fn through_editor(path: &Path, ctx: &ToolServices) -> Option<Result<String, String>> {
    let editor = ctx.editor_for(path)?;
    let read = || editor.read(path);
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            Some(tokio::task::block_in_place(read))
        }
        // Outside a runtime nothing async waits on this thread.
        Err(_) => Some(read()),
        // On a single-threaded runtime waiting here would stop the very task that answers:
        // the disk it is.
        Ok(_) => None,
    }
}

/// A name for what is at `path` now, as the file tools see it: through the editor where
/// they go through one (a file it cannot read: as on disk), else `current_hash`.
pub(crate) fn seen_hash(path: &Path, ctx: &ToolServices) -> Option<String> {
    match through_editor(path, ctx) {
        Some(Ok(text)) => Some(keel_store::content_hash(text.as_bytes())),
        _ => current_hash(path),
    }
}

/// A name for what is at `path` now: the hash of a regular file's content (`None`: nothing
/// there). Anything else, or a file too large to read, gets a name no content hash equals.
pub(crate) fn current_hash(path: &Path) -> Option<String> {
    let meta = match path.symlink_metadata() {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => return Some(format!("(unreadable: {error})")),
    };
    if !meta.is_file() {
        let kind = if meta.file_type().is_symlink() {
            "a link"
        } else if meta.is_dir() {
            "a directory"
        } else {
            "something other than a regular file"
        };
        return Some(format!("({kind})"));
    }
    if meta.len() > MOST_KEPT_BYTES {
        return Some(format!(
            "(large file: {} bytes, {:?})",
            meta.len(),
            meta.modified().ok()
        ));
    }
    Some(match std::fs::read(path) {
        Ok(bytes) => keel_store::content_hash(&bytes),
        Err(error) => format!("(unreadable: {error})"),
    })
}

/// What the call `seq` left at each path it checkpointed (as the file tools see it), for its
/// result's transaction.
pub(crate) fn afters(
    store: &Store,
    session: &str,
    seq: u64,
    ctx: &ToolServices,
) -> Result<Vec<(String, Option<String>)>, StoreError> {
    Ok(store
        .checkpointed_paths(session, seq)?
        .into_iter()
        .map(|path| {
            let hash = seen_hash(Path::new(&path), ctx);
            (path, hash)
        })
        .collect())
}
