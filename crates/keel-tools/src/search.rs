//! Search tools: `glob` and `grep`, on the ripgrep libraries; `.gitignore` is respected.
//!
//! Invariants:
//! - Results are bounded (`MAX_RESULTS` paths, `MAX_MATCHES` lines) and the output says when
//!   more were found; paths that are not UTF-8 are shown lossily, never dropped.
//! - Nothing blocks on a special file: `grep` reads regular files only, each opened without
//!   blocking and checked on the open descriptor (FIFOs, sockets and devices are skipped);
//!   `/proc`, `/sys` and `/dev` are refused as a search root and skipped when a walk meets
//!   them (e.g. from `/`). Symlinks are not followed during a walk.
//! - A path the sandbox hides (`forbid_read`) is refused as a root and never entered.

use crate::output::{OUTPUT_CAP, truncate_middle};
use crate::special_files::{FileKind, kernel_tree, open_regular};
use crate::{ToolOutput, ToolServices};
use grep_matcher::Matcher;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use serde_json::Value;
use std::path::{Path, PathBuf};

const MAX_RESULTS: usize = 500;
const MAX_MATCHES: usize = 200;

fn root(args: &Value, ctx: &ToolServices) -> Result<PathBuf, ToolOutput> {
    let path = args.get("path").and_then(Value::as_str).unwrap_or(".");
    let resolved = ctx
        .guard
        .resolve(path)
        .map_err(|error| ToolOutput::error(error.to_string()))?;
    if let Some(refusal) = ctx.read_refusal(path, &resolved) {
        return Err(refusal);
    }
    if let Some(tree) = kernel_tree(&resolved) {
        return Err(ToolOutput::error(format!(
            "`{path}` is in {tree}, a kernel tree whose files can block forever; keel does not \
             search /proc, /sys or /dev"
        )));
    }
    let kind = match resolved.metadata() {
        Ok(meta) => FileKind::of(&meta.file_type()),
        Err(_) => return Err(ToolOutput::error(format!("`{path}` does not exist"))),
    };
    match kind {
        FileKind::Regular | FileKind::Directory => Ok(resolved),
        FileKind::Fifo
        | FileKind::Socket
        | FileKind::Device
        | FileKind::Symlink
        | FileKind::Other => Err(ToolOutput::error(format!(
            "`{path}` is {kind}, not a regular file; keel reads regular files only"
        ))),
    }
}

/// A walk of `root` that never enters a kernel tree or a path the sandbox hides.
fn walker(root: &Path, ctx: &ToolServices) -> ignore::Walk {
    let hidden = ctx.sandbox.as_ref().map(crate::CommandSandbox::walk_policy);
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .git_ignore(true)
        .require_git(false)
        .filter_entry(move |entry| {
            kernel_tree(entry.path()).is_none()
                && hidden
                    .as_ref()
                    .is_none_or(|policy| policy.forbids_reading(entry.path()).is_none())
        })
        .build()
}

pub fn glob(args: &Value, ctx: &ToolServices) -> ToolOutput {
    let pattern = args.get("pattern").and_then(Value::as_str).unwrap_or("");
    let matcher = match globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
    {
        Ok(glob) => glob.compile_matcher(),
        Err(error) => return ToolOutput::error(format!("bad glob pattern `{pattern}`: {error}")),
    };
    let root = match root(args, ctx) {
        Ok(root) => root,
        Err(output) => return output,
    };
    let mut found = Vec::new();
    let mut total = 0usize;
    for entry in walker(&root, ctx).filter_map(Result::ok) {
        if entry.path().components().any(|c| c.as_os_str() == ".git") {
            continue;
        }
        let relative = entry.path().strip_prefix(&root).unwrap_or(entry.path());
        if relative.as_os_str().is_empty() || !matcher.is_match(relative) {
            continue;
        }
        total += 1;
        if found.len() < MAX_RESULTS {
            found.push(ctx.guard.display(entry.path()));
        }
    }
    found.sort();
    let mut content = if found.is_empty() {
        format!("no paths match `{pattern}`")
    } else {
        found.join("\n")
    };
    if total > found.len() {
        content.push_str(&format!(
            "\n[… {} more matches not shown]",
            total - found.len()
        ));
    }
    ToolOutput::ok(content, format!("{total} paths match {pattern}"))
}

pub fn grep(args: &Value, ctx: &ToolServices) -> ToolOutput {
    let pattern = args.get("pattern").and_then(Value::as_str).unwrap_or("");
    let case_insensitive = args
        .get("case_insensitive")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let matcher = match RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        .build(pattern)
    {
        Ok(matcher) => matcher,
        Err(error) => {
            return ToolOutput::error(format!("bad regular expression `{pattern}`: {error}"));
        }
    };
    let file_filter = match args.get("glob").and_then(Value::as_str) {
        Some(glob) => match globset::Glob::new(glob) {
            Ok(glob) => Some(glob.compile_matcher()),
            Err(error) => return ToolOutput::error(format!("bad glob `{glob}`: {error}")),
        },
        None => None,
    };
    let root = match root(args, ctx) {
        Ok(root) => root,
        Err(output) => return output,
    };
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let mut lines = Vec::new();
    let mut total = 0usize;
    for entry in walker(&root, ctx).filter_map(Result::ok) {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if let Some(filter) = &file_filter {
            let name = entry
                .path()
                .file_name()
                .map(PathBuf::from)
                .unwrap_or_default();
            if !filter.is_match(&name)
                && !filter.is_match(entry.path().strip_prefix(&root).unwrap_or(entry.path()))
            {
                continue;
            }
        }
        let shown = ctx.guard.display(entry.path());
        let Ok(file) = open_regular(entry.path(), &shown) else {
            continue;
        };
        let _ = searcher.search_file(
            &matcher,
            &file,
            Lossy(|line_number, line| {
                // Searched as if files held keel's secrets redacted: a line matches only if its
                // redacted text does, so a pattern cannot probe a key a character at a time.
                let redacted = ctx.secrets.redact(line);
                if matches!(redacted, std::borrow::Cow::Owned(_))
                    && !matcher.is_match(redacted.as_bytes()).unwrap_or(false)
                {
                    return Ok(true);
                }
                total += 1;
                if lines.len() < MAX_MATCHES {
                    lines.push(format!("{shown}:{line_number}:{}", redacted.trim_end()));
                }
                Ok(true)
            }),
        );
    }
    let mut content = if lines.is_empty() {
        format!("no matches for `{pattern}`")
    } else {
        lines.join("\n")
    };
    if total > lines.len() {
        content.push_str(&format!(
            "\n[… {} more matches not shown]",
            total - lines.len()
        ));
    }
    ToolOutput::ok(
        // Redacted before the cut: a cut never leaves part of a secret.
        truncate_middle(&ctx.secrets.redact(&content), OUTPUT_CAP),
        format!("{total} matches for {pattern}"),
    )
}
