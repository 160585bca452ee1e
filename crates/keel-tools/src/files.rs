//! File tools: `read_file`, `write_file`, `edit_file`, `list_dir`.
//!
//! Invariants:
//! - Writes go through the workspace guard, then through directory handles below the root the
//!   guard resolved them to (`beneath`), so a path swapped after the check cannot carry them
//!   out; they land atomically (temp file + rename), so a killed process never leaves a
//!   half-written file.
//! - Only regular files are read, opened without blocking (`special`): a FIFO or a device is
//!   refused at once, never waited on.
//! - `edit_file` replaces an exact string that must match exactly once (unless `replace_all`);
//!   otherwise nothing changes and the error shows where the text nearly matched.
//! - With an editor (`ToolServices::editor`, ACP's `fs` capability) files inside the workspace
//!   are read and written through it (it sees unsaved buffers and owns the write), after the
//!   same guard checks; files outside, and everything without an editor, go to the disk.
//! - Reads are bounded: a line range on any file size, at most `MAX_LINES` lines and
//!   `OUTPUT_CAP` bytes per call; binary files are described, not dumped.

use crate::below_root::{FileBeneath, MissingParents, Written};
use crate::output::{OUTPUT_CAP, looks_binary, truncate_middle};
use crate::special_files::open_regular;
use crate::{EditorFiles, ToolOutput, ToolServices};
use serde_json::Value;
use std::io::BufRead;

const MAX_LINES: usize = 2000;
const MAX_LIST: usize = 500;

fn text_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

pub fn read_file(args: &Value, ctx: &ToolServices) -> ToolOutput {
    let path = text_arg(args, "path");
    let resolved = match ctx.guard.resolve(path) {
        Ok(resolved) => resolved,
        Err(error) => return ToolOutput::error(error.to_string()),
    };
    if let Some(refusal) = ctx.read_refusal(path, &resolved) {
        return refusal;
    }
    // keel's own process files (its environment, its memory) are not for a tool to read.
    if let Some(tree) = crate::special_files::kernel_tree(&resolved) {
        return ToolOutput::error(format!(
            "`{path}` is in {tree}, the kernel's view of processes and devices (keel's own \
             among them); read_file does not read there — a command can"
        ));
    }
    let offset = args
        .get("offset")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1) as usize;
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(MAX_LINES, |l| l as usize)
        .min(MAX_LINES);
    if let Some(editor) = editor_for(ctx, &resolved) {
        return match editor.read(&resolved) {
            Ok(text) => numbered(
                std::io::Cursor::new(text.into_bytes()),
                path,
                (offset, limit),
                &ctx.secrets,
            ),
            Err(error) => {
                ToolOutput::error(format!("cannot read `{path}` through the editor: {error}"))
            }
        };
    }
    let file = match open_regular(&resolved, path) {
        Ok(file) => file,
        Err(refusal) => return ToolOutput::error(refusal.to_string()),
    };
    let size = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    let mut reader = std::io::BufReader::new(file);
    let head = match reader.fill_buf() {
        Ok(head) => head,
        Err(error) => return ToolOutput::error(format!("cannot read `{path}`: {error}")),
    };
    if looks_binary(head) {
        return ToolOutput::ok(
            format!("`{path}` is a binary file ({size} bytes); its content is not shown"),
            format!("binary file, {size} bytes"),
        );
    }
    numbered(reader, path, (offset, limit), &ctx.secrets)
}

/// The editor to go through for `resolved`, when there is one and the path is in a root.
pub(crate) fn editor_for<'a>(
    ctx: &'a ToolServices,
    resolved: &std::path::Path,
) -> Option<&'a dyn EditorFiles> {
    ctx.editor
        .as_deref()
        .filter(|_| ctx.guard.is_inside(resolved))
}

/// Lines `offset..offset+limit` of `reader`, numbered, within the output cap.
fn numbered(
    mut reader: impl BufRead,
    path: &str,
    (offset, limit): (usize, usize),
    secrets: &keel_types::Secrets,
) -> ToolOutput {
    let mut shown = String::new();
    let mut total_lines = 0usize;
    let mut last_shown = 0usize;
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        match reader.read_until(b'\n', &mut buffer) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => return ToolOutput::error(format!("cannot read `{path}`: {error}")),
        }
        total_lines += 1;
        if total_lines >= offset && total_lines < offset + limit && shown.len() < OUTPUT_CAP {
            let line = String::from_utf8_lossy(&buffer);
            shown.push_str(&format!(
                "{total_lines:>6}\t{}",
                line.trim_end_matches(['\n', '\r'])
            ));
            shown.push('\n');
            last_shown = total_lines;
        }
    }
    if total_lines == 0 {
        return ToolOutput::ok(format!("`{path}` is empty"), "empty file".into());
    }
    if offset > total_lines {
        return ToolOutput::error(format!(
            "`{path}` has {total_lines} lines; offset {offset} is past the end"
        ));
    }
    // Redacted before the cut: a cut never leaves part of a secret.
    let mut content = truncate_middle(&secrets.redact(&shown), OUTPUT_CAP);
    if last_shown < total_lines {
        content.push_str(&format!(
            "[lines {offset}–{last_shown} of {total_lines}; read more with offset={}]\n",
            last_shown + 1
        ));
    }
    ToolOutput::ok(
        content,
        format!("lines {offset}–{last_shown} of {total_lines}"),
    )
}

pub fn write_file(args: &Value, ctx: &ToolServices) -> ToolOutput {
    let path = text_arg(args, "path");
    let content = text_arg(args, "content");
    let target = match ctx.guard.write_target(path) {
        Ok(target) => target,
        Err(error) => return ToolOutput::error(error.to_string()),
    };
    if let Some(refusal) = ctx.change_refusal(path, &target.resolved) {
        return refusal;
    }
    let written = match editor_for(ctx, &target.resolved) {
        Some(editor) => {
            let existed = target.resolved.exists();
            editor
                .write(&target.resolved, content)
                .map(|()| {
                    if existed {
                        Written::Replaced
                    } else {
                        Written::Created
                    }
                })
                .map_err(|error| format!("cannot write `{path}` through the editor: {error}"))
        }
        None => FileBeneath::open(&target, path, MissingParents::Create)
            .and_then(|file| file.write_atomically(content.as_bytes()))
            .map_err(|error| error.to_string()),
    };
    match written {
        Ok(written) => {
            let verb = match written {
                Written::Created => "created",
                Written::Replaced => "replaced",
            };
            let shown = ctx.guard.display(&target.resolved);
            ToolOutput::ok(
                format!(
                    "{verb} `{shown}` ({} bytes, {} lines)",
                    content.len(),
                    content.lines().count()
                ),
                format!("{verb} {shown}"),
            )
        }
        Err(error) => ToolOutput::error(error),
    }
}

pub fn edit_file(args: &Value, ctx: &ToolServices) -> ToolOutput {
    let path = text_arg(args, "path");
    let old = text_arg(args, "old_string");
    let new = text_arg(args, "new_string");
    let replace_all = args
        .get("replace_all")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if old.is_empty() {
        return ToolOutput::error(
            "`old_string` must not be empty: use write_file to create a file".into(),
        );
    }
    if old == new {
        return ToolOutput::error(
            "`old_string` and `new_string` are the same: nothing to change".into(),
        );
    }
    let target = match ctx.guard.write_target(path) {
        Ok(target) => target,
        Err(error) => return ToolOutput::error(error.to_string()),
    };
    if let Some(refusal) = ctx.change_refusal(path, &target.resolved) {
        return refusal;
    }
    let editor = editor_for(ctx, &target.resolved);
    let file = match editor {
        Some(_) => None,
        None => match FileBeneath::open(&target, path, MissingParents::Refuse) {
            Ok(file) => Some(file),
            Err(error) => return ToolOutput::error(error.to_string()),
        },
    };
    let text = match (editor, &file) {
        (Some(editor), _) => match editor.read(&target.resolved) {
            Ok(text) => text,
            Err(error) => {
                return ToolOutput::error(format!(
                    "cannot read `{path}` through the editor: {error}"
                ));
            }
        },
        (None, Some(file)) => match file.read().map(String::from_utf8) {
            Ok(Ok(text)) => text,
            Ok(Err(_)) => {
                return ToolOutput::error(format!(
                    "`{path}` is not UTF-8 text; edit_file cannot change it"
                ));
            }
            Err(error) => return ToolOutput::error(error.to_string()),
        },
        (None, None) => return ToolOutput::error(format!("cannot open `{path}`")),
    };
    match edited(path, &text, old, new, replace_all) {
        Err(message) => ToolOutput::error(message),
        Ok(Edited {
            text: updated,
            replacements: n,
            first_line,
        }) => {
            let saved = match (editor, &file) {
                (Some(editor), _) => editor
                    .write(&target.resolved, &updated)
                    .map_err(|error| format!("cannot write `{path}` through the editor: {error}")),
                (None, Some(file)) => file
                    .write_atomically(updated.as_bytes())
                    .map(|_| ())
                    .map_err(|error| error.to_string()),
                (None, None) => Err(format!("cannot open `{path}`")),
            };
            if let Err(error) = saved {
                return ToolOutput::error(error);
            }
            let shown = ctx.guard.display(&target.resolved);
            ToolOutput::ok(
                format!("edited `{shown}`: {n} replacement(s), first at line {first_line}"),
                format!("edited {shown} ({n}×)"),
            )
        }
    }
}

/// A file's text after an edit.
pub(crate) struct Edited {
    pub text: String,
    pub replacements: usize,
    /// The line of the first replacement.
    pub first_line: usize,
}

/// `text` with `old` replaced by `new` (once, or everywhere with `replace_all`), exactly as
/// `edit_file` writes it; or why the edit cannot apply. The approval's preview uses it too, so
/// the diff a person approves is the change the tool makes.
pub(crate) fn edited(
    path: &str,
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Edited, String> {
    let positions: Vec<usize> = text.match_indices(old).map(|(at, _)| at).collect();
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    match positions.len() {
        0 => Err(no_match_message(path, text, old)),
        n if n > 1 && !replace_all => {
            let lines: Vec<String> = positions
                .iter()
                .map(|at| line_of(*at).to_string())
                .collect();
            Err(format!(
                "`old_string` matches {n} times in `{path}` (lines {}); include more surrounding \
                 text to make it unique, or set replace_all",
                lines.join(", ")
            ))
        }
        n => Ok(Edited {
            text: if replace_all {
                text.replace(old, new)
            } else {
                text.replacen(old, new, 1)
            },
            replacements: n,
            first_line: positions.first().map_or(0, |at| line_of(*at)),
        }),
    }
}

/// Explain a failed match: the lines that come closest to `old`'s first line.
fn no_match_message(path: &str, text: &str, old: &str) -> String {
    let needle = old
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let mut candidates: Vec<(f32, usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            let ratio = similar::TextDiff::from_chars(needle, line.trim()).ratio();
            (ratio, index + 1, line)
        })
        .filter(|(ratio, _, _)| *ratio >= 0.6)
        .collect();
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut message = format!("`old_string` was not found in `{path}`.");
    if candidates.is_empty() {
        message.push_str(" No line resembles its first line; read the file again before editing.");
    } else {
        message.push_str(" Closest lines (check whitespace and exact characters):");
        for (_, line_number, line) in candidates.iter().take(3) {
            message.push_str(&format!("\n{line_number:>6}\t{line}"));
        }
    }
    message
}

pub fn list_dir(args: &Value, ctx: &ToolServices) -> ToolOutput {
    let path = args.get("path").and_then(Value::as_str).unwrap_or(".");
    let resolved = match ctx.guard.resolve(path) {
        Ok(resolved) => resolved,
        Err(error) => return ToolOutput::error(error.to_string()),
    };
    if let Some(refusal) = ctx.read_refusal(path, &resolved) {
        return refusal;
    }
    let entries = match std::fs::read_dir(&resolved) {
        Ok(entries) => entries,
        Err(error) => return ToolOutput::error(format!("cannot list `{path}`: {error}")),
    };
    let mut lines: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let meta = entry.metadata().ok();
            match meta {
                Some(meta) if meta.is_dir() => format!("{name}/"),
                Some(meta) => format!("{name}  ({} bytes)", meta.len()),
                None => name,
            }
        })
        .collect();
    lines.sort();
    let total = lines.len();
    lines.truncate(MAX_LIST);
    let mut content = lines.join("\n");
    if total > MAX_LIST {
        content.push_str(&format!(
            "\n[… {} more entries not shown]",
            total - MAX_LIST
        ));
    }
    if total == 0 {
        content = format!("`{path}` is empty");
    }
    ToolOutput::ok(
        content,
        format!("{total} entries in {}", ctx.guard.display(&resolved)),
    )
}
