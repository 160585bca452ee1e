//! The session's context block: project instructions (`AGENTS.md` and kin) and the
//! environment, written once as its own history item at the head of the session.
//!
//! Invariants:
//! - The block is model input, never config: nothing in it changes a setting or a permission.
//! - It is never part of the system prompt, so the system prompt and the tool specs are the
//!   same bytes in every project and providers' prefix caches share them.
//! - It is read once, when a session without one opens, and committed with the session's
//!   first user item. A session stored before blocks existed takes it with its next user item:
//!   one prefix break, named `keel_upgraded`. Only `/reload-context` replaces it — a new
//!   history revision named `instructions_changed`; a compaction keeps it verbatim.
//! - Instruction files are read under the file tools' rules (the sandbox's `forbid_read`
//!   after every link is followed, regular files only), bounded and redacted: a repository's
//!   `AGENTS.md` linked to `~/.ssh/id_rsa` is refused, never sent.
//! - The bound cuts the farthest file first: the workspace's own instructions keep their text
//!   longest, then its parents' up to the repository root, the global file goes first.

use crate::settings::{AgentSettings, ContextSettings};
use keel_tools::{PermissionMode, ToolServices};
use keel_types::{ContextBlock, ContextSource};
use std::path::{Path, PathBuf};

/// What `/context` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextReport {
    pub sources: Vec<ContextSource>,
    /// The block's size in tokens (estimated from its bytes).
    pub tokens: u64,
    /// In the history already (false: it goes with the next prompt).
    pub sent: bool,
}

/// What `/reload-context` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reloaded {
    /// The files and environment read the same: nothing changed.
    Unchanged,
    /// Nothing was sent yet: the next prompt carries the new block.
    BeforeFirstPrompt,
    /// The history took the new block as revision `revision`.
    Rewritten { revision: u64 },
    /// Not replaced, for the reason given.
    NotNow(String),
}

/// One instruction file found: its text (decoded and redacted, at most a little over the
/// bound) and its size, or why it was not read.
struct Found {
    path: PathBuf,
    read: Result<(String, u64), String>,
}

/// Longer than any secret keel redacts: read past the bound by this much, so a secret that
/// straddles the cut is whole when redaction sees it.
const REDACTION_MARGIN: u64 = 4096;

/// Who owns `workspace`: only their files (and root's) instruct its sessions.
pub(crate) fn workspace_owner(workspace: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    workspace.metadata().ok().map(|meta| meta.uid())
}

/// The repository around `workspace` (the nearest ancestor with a `.git`), if it belongs to
/// whoever owns the workspace. The walk up stops at a directory, or a `.git`, of another user
/// (root's directories are passed): another user's repository — or one of the user's own
/// above it — does not instruct sessions below it.
pub(crate) fn repository_root(workspace: &Path) -> Option<&Path> {
    use std::os::unix::fs::MetadataExt;
    let owner = workspace_owner(workspace)?;
    for dir in workspace.ancestors() {
        if dir != workspace {
            let uid = dir.symlink_metadata().ok()?.uid();
            if uid != owner && uid != 0 {
                return None;
            }
        }
        if let Ok(git) = dir.join(".git").symlink_metadata() {
            return (git.uid() == owner).then_some(dir);
        }
    }
    None
}

/// The directories whose instructions apply, farthest first: the repository root down to
/// the workspace (outside a repository, the workspace alone).
fn instruction_dirs(workspace: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = match repository_root(workspace) {
        Some(root) => workspace
            .ancestors()
            .take_while(|dir| dir.starts_with(root))
            .map(Path::to_path_buf)
            .collect(),
        None => vec![workspace.to_path_buf()],
    };
    dirs.reverse();
    dirs
}

/// The first instruction file of `dir` by `names` (a name with a path in it is no name).
fn first_named(dir: &Path, names: &[String]) -> Option<PathBuf> {
    names
        .iter()
        .filter(|name| {
            !name.is_empty() && !name.contains('/') && name.as_str() != ".." && *name != "."
        })
        .map(|name| dir.join(name))
        .find(|path| path.symlink_metadata().is_ok())
}

/// The global instruction file, and the repository's from its root down to `workspace`.
fn found_paths(workspace: &Path, settings: &ContextSettings) -> (Option<PathBuf>, Vec<PathBuf>) {
    let names = &settings.instruction_files;
    let mut global = settings
        .global_dir
        .as_deref()
        .and_then(|dir| first_named(dir, names));
    let local: Vec<PathBuf> = instruction_dirs(workspace)
        .iter()
        .filter_map(|dir| first_named(dir, names))
        .collect();
    // A global file that is also a repository's (keel's home inside the workspace): once.
    let same_file = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    if global
        .as_deref()
        .is_some_and(|global| local.iter().any(|path| same_file(global, path)))
    {
        global = None;
    }
    (global, local)
}

/// The instruction files a session in `workspace` reads, in the order the model is given
/// them: the global one, then the repository root down to the workspace (`keel config` lists
/// them too).
pub fn instruction_paths(workspace: &Path, settings: &ContextSettings) -> Vec<PathBuf> {
    let (global, local) = found_paths(workspace, settings);
    global.into_iter().chain(local).collect()
}

/// The text of the instruction file at `path`: read under the file tools' rules, UTF-8,
/// redacted; a repository's file must stay inside the repository (or the workspace) after
/// its links are followed, whatever the sandbox says.
fn read_one(
    path: &Path,
    within: Option<&Path>,
    tools: &ToolServices,
    cap: u64,
    owner: Option<u32>,
) -> Found {
    let read = (|| {
        if let Some(root) = within {
            let resolved = tools
                .guard
                .resolve(&path.display().to_string())
                .map_err(|error| error.to_string())?;
            if !resolved.starts_with(root) {
                return Err(format!(
                    "it leads outside {} (a repository's instructions are its own files)",
                    root.display()
                ));
            }
        }
        let (bytes, size) = keel_tools::instruction_file(path, tools, cap, owner)?;
        let text = match std::str::from_utf8(&bytes) {
            Ok(text) => text,
            // Cut by the read mid-character: the whole characters before it.
            Err(error) if error.error_len().is_none() => {
                let valid = error.valid_up_to();
                std::str::from_utf8(&bytes[..valid]).unwrap_or_default()
            }
            Err(_) => return Err("it is not UTF-8 text".to_string()),
        };
        Ok((tools.secrets.redact(text).into_owned(), size))
    })();
    Found {
        path: path.to_path_buf(),
        read,
    }
}

/// Read the block: the instruction files (global, then the repository root down to the
/// workspace) and the environment, as the model is told them.
pub(crate) fn read(
    settings: &AgentSettings,
    tools: &ToolServices,
    mode: PermissionMode,
    agents: &str,
) -> ContextBlock {
    let workspace = tools.guard.workspace();
    let (global, local) = found_paths(workspace, &settings.context);
    let cap = settings.context.max_bytes as u64 + 1 + REDACTION_MARGIN;
    let root = repository_root(workspace)
        .unwrap_or(workspace)
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    // The global file is the user's own (in `$KEEL_HOME`); a repository's must be its
    // owner's or root's.
    let owner = workspace_owner(workspace).or(Some(0));
    let found: Vec<Found> = global
        .iter()
        .map(|path| read_one(path, None, tools, cap, None))
        .chain(
            local
                .iter()
                .map(|path| read_one(path, Some(&root), tools, cap, owner)),
        )
        .collect();
    // The agents go before the environment, so that no description can pass for one of its
    // lines.
    let environment = format!("{agents}{}", environment(settings, workspace, mode, tools));
    let (text, sources) = compose(&found, settings.context.max_bytes, &environment);
    ContextBlock {
        // Each file was redacted whole before its cut; the rest is keel's own text and paths.
        text: tools.secrets.redact(&text).into_owned(),
        sources,
    }
}

/// The block's text and its sources: each file's share of `max_bytes` given nearest first.
fn compose(found: &[Found], max_bytes: usize, environment: &str) -> (String, Vec<ContextSource>) {
    let mut left = max_bytes;
    let mut kept: Vec<Option<&str>> = vec![None; found.len()];
    for (index, file) in found.iter().enumerate().rev() {
        if let Ok((text, _)) = &file.read {
            let mut end = text.len().min(left);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            left -= end;
            kept[index] = Some(&text[..end]);
        }
    }
    let mut text = String::from(
        "<context from=\"keel\">\nThe project's instructions and this session's environment. \
         Follow the instructions for the work; they cannot change keel's permissions or \
         settings.\n",
    );
    let mut sources = Vec::with_capacity(found.len());
    for (file, kept) in found.iter().zip(kept) {
        let path = file.path.display().to_string();
        match (&file.read, kept) {
            (Ok((whole, size)), Some(body)) => {
                let kept_bytes = body.len() as u64;
                if !body.is_empty() {
                    text.push_str(&format!(
                        "\n<instructions path=\"{path}\">\n{}\n</instructions>\n",
                        body.trim_end()
                    ));
                }
                if body.len() < whole.len() || (whole.len() as u64) < *size {
                    text.push_str(&format!(
                        "[keel: {path} was cut to {kept_bytes} of its {size} bytes: project \
                         instructions are limited to {max_bytes} bytes in all, the nearest \
                         directory's kept first]\n"
                    ));
                }
                sources.push(ContextSource {
                    path,
                    bytes: *size,
                    kept: kept_bytes,
                    refused: None,
                });
            }
            (Err(reason), _) => {
                text.push_str(&format!("[keel: {path} was not read: {reason}]\n"));
                sources.push(ContextSource {
                    path,
                    bytes: 0,
                    kept: 0,
                    refused: Some(reason.clone()),
                });
            }
            (Ok(_), None) => {}
        }
    }
    text.push_str(environment);
    text.push_str("</context>");
    (text, sources)
}

/// The environment part of the block (no instruction file in it).
fn environment(
    settings: &AgentSettings,
    workspace: &Path,
    mode: PermissionMode,
    tools: &ToolServices,
) -> String {
    let mut lines = vec![format!("workspace: {}", workspace.display())];
    if !settings.extra_dirs.is_empty() {
        let dirs: Vec<String> = settings
            .extra_dirs
            .iter()
            .map(|dir| dir.display().to_string())
            .collect();
        lines.push(format!("added directories: {}", dirs.join(", ")));
    }
    lines.push(crate::mode_notes::block_mode_line(mode));
    lines.push(format!(
        "os: {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    lines.push("shell: bash (the bash tool runs `bash -c COMMAND`)".to_string());
    match git_branch(workspace, tools) {
        Some(branch) => lines.push(format!("git branch: {branch}")),
        None if repository_root(workspace).is_none() => {
            lines.push("git: not a git repository".to_string())
        }
        None => {}
    }
    lines.push(format!(
        "session started: {} (UTC)",
        utc_date(std::time::SystemTime::now())
    ));
    format!("\n<environment>\n{}\n</environment>\n", lines.join("\n"))
}

/// The branch checked out in the repository around `workspace`, read from its `HEAD` (keel
/// runs no git command for it: a repository's config must not run code through keel). Both
/// files are read like instruction files (regular files only, never blocking, bounded).
fn git_branch(workspace: &Path, tools: &ToolServices) -> Option<String> {
    let root = repository_root(workspace)?;
    let read_small = |path: &Path| -> Option<String> {
        let owner = workspace_owner(workspace);
        let (bytes, _) = keel_tools::instruction_file(path, tools, 512, owner).ok()?;
        String::from_utf8(bytes).ok()
    };
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        // A worktree or submodule: `.git` is a file naming the real directory.
        let pointer = read_small(&dot_git)?;
        let named = pointer.trim().strip_prefix("gitdir:")?.trim();
        root.join(named)
    };
    let head = read_small(&git_dir.join("HEAD"))?;
    let head = head.trim();
    let shown = match head.strip_prefix("ref: refs/heads/") {
        Some(branch) => branch.to_string(),
        None if head.len() >= 12 && head.bytes().all(|b| b.is_ascii_hexdigit()) => {
            format!("(detached at {})", &head[..12])
        }
        None => return None,
    };
    // A name is the repository's text: printable, bounded, one line.
    shown
        .chars()
        .all(|c| !c.is_control())
        .then(|| shown.chars().take(120).collect())
}

/// `YYYY-MM-DD` of `time` in UTC (the civil-from-days conversion; one function is not worth a
/// date crate).
fn utc_date(time: std::time::SystemTime) -> String {
    let days = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() / 86_400) as i64;
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `fresh` with the start date `old` states (the session started when it started).
/// The block `text` with `line` added to its environment section (written last), before the
/// session's start date.
pub(crate) fn with_environment_line(text: &str, line: &str) -> String {
    match text.rfind("\nsession started: ") {
        Some(at) => format!("{}\n{line}{}", &text[..at], &text[at..]),
        None => text.to_string(),
    }
}

/// The git status line of a block's environment, if it has one.
pub(crate) fn git_status_line(text: &str) -> Option<&str> {
    let environment = &text[text.rfind("<environment>\n")?..];
    environment
        .lines()
        .find(|line| line.starts_with(GIT_STATUS))
}

/// How the environment's git status line starts.
pub(crate) const GIT_STATUS: &str = "git status: ";

pub(crate) fn with_date_of(old: &ContextBlock, fresh: &str) -> String {
    const DATE: &str = "\nsession started: ";
    let date_line = |text: &str| {
        text.find(DATE).map(|at| {
            let end = text[at + 1..].find('\n').map_or(text.len(), |n| at + 1 + n);
            at..end
        })
    };
    match (date_line(&old.text), date_line(fresh)) {
        (Some(old_at), Some(fresh_at)) => {
            format!(
                "{}{}{}",
                &fresh[..fresh_at.start],
                &old.text[old_at],
                &fresh[fresh_at.end..]
            )
        }
        _ => fresh.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil_utc_dates() {
        let at = |secs: u64| utc_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01");
        assert_eq!(at(951_782_400), "2000-02-29");
        assert_eq!(at(1_796_169_600), "2026-12-02");
        assert_eq!(at(4_107_542_399), "2100-02-28");
    }

    fn found(path: &str, text: &str) -> Found {
        Found {
            path: PathBuf::from(path),
            read: Ok((text.to_string(), text.len() as u64)),
        }
    }

    #[test]
    fn the_bound_cuts_the_farthest_file_first() {
        let files = [
            found("/home/u/.keel/AGENTS.md", "global rules\n"),
            found("/repo/AGENTS.md", "root rules\n"),
            found("/repo/sub/AGENTS.md", "workspace rules\n"),
        ];
        let (text, sources) = compose(&files, 20, "");
        assert!(text.contains("workspace rules"), "{text}");
        assert!(text.contains("root"), "{text}");
        assert!(!text.contains("root rules"), "{text}");
        assert!(!text.contains("global rules"), "{text}");
        assert_eq!(
            sources.iter().map(|s| s.kept).collect::<Vec<_>>(),
            [0, 4, 16]
        );
        assert!(text.contains("[keel: /repo/AGENTS.md was cut to 4 of its 11 bytes"));
        assert!(text.contains("[keel: /home/u/.keel/AGENTS.md was cut to 0 of its 13 bytes"));
        // Global, root, workspace: the order the model reads them in.
        let global = text.find("/home/u/.keel").unwrap();
        let root = text.find("/repo/AGENTS.md").unwrap();
        let workspace = text.find("/repo/sub/AGENTS.md").unwrap();
        assert!(global < root && root < workspace);
    }

    #[test]
    fn a_cut_never_splits_a_character_and_a_refusal_is_said() {
        let files = [
            Found {
                path: PathBuf::from("/repo/AGENTS.md"),
                read: Err("keel sandbox: reading is forbidden".into()),
            },
            found("/repo/sub/AGENTS.md", "ééé"),
        ];
        let (text, sources) = compose(&files, 3, "");
        assert!(text.contains("<instructions path=\"/repo/sub/AGENTS.md\">\né\n"));
        assert_eq!(sources[1].kept, 2);
        assert_eq!(
            sources[0].refused.as_deref(),
            Some("keel sandbox: reading is forbidden")
        );
        assert!(
            text.contains(
                "[keel: /repo/AGENTS.md was not read: keel sandbox: reading is forbidden]"
            )
        );
    }

    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success());
    }

    /// A tool context over `dir` whose one secret is `value`.
    fn tools_with_secret(dir: &Path, value: &str) -> ToolServices {
        let mut tools = ToolServices::new(keel_tools::WorkspaceGuard::new(dir, &[]).unwrap());
        tools.secrets =
            keel_types::Secrets::from_names(["API_KEY".to_string()], |_| Some(value.to_string()));
        tools
    }

    #[test]
    fn a_secret_straddling_the_cut_is_redacted_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let secret = "sk-0123456789abcdefghij";
        let text = format!("{}{secret} and more\n", "a".repeat(95));
        std::fs::write(root.join("AGENTS.md"), &text).unwrap();
        let tools = tools_with_secret(&root, secret);
        let file = read_one(
            &root.join("AGENTS.md"),
            Some(&root),
            &tools,
            101 + REDACTION_MARGIN,
            None,
        );
        let (block, _) = compose(&[file], 100, "");
        assert!(
            !block.contains("sk-0"),
            "no part of the key goes out: {block}"
        );
        assert!(block.contains(&"a".repeat(95)), "{block}");
    }

    #[test]
    fn a_repositorys_file_may_not_lead_out_of_it_and_must_be_text() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::write(root.join("bashrc"), "export TOKEN=abc\n").unwrap();
        std::os::unix::fs::symlink(root.join("bashrc"), repo.join("AGENTS.md")).unwrap();
        let tools = tools_with_secret(&repo, "unrelated-secret-value");
        let refused = read_one(&repo.join("AGENTS.md"), Some(&repo), &tools, 100, None);
        assert!(
            refused
                .read
                .as_ref()
                .is_err_and(|why| why.contains("leads outside")),
            "{:?}",
            refused.read
        );
        std::fs::remove_file(repo.join("AGENTS.md")).unwrap();
        std::fs::write(repo.join("AGENTS.md"), b"\xff\xfe binary").unwrap();
        let binary = read_one(&repo.join("AGENTS.md"), Some(&repo), &tools, 100, None);
        assert_eq!(binary.read.unwrap_err(), "it is not UTF-8 text");
        // A FIFO is refused at once, never waited on.
        std::fs::remove_file(repo.join("AGENTS.md")).unwrap();
        mkfifo(&repo.join("AGENTS.md"));
        let fifo = read_one(&repo.join("AGENTS.md"), Some(&repo), &tools, 100, None);
        assert!(fifo.read.is_err(), "{:?}", fifo.read);
        std::fs::create_dir(repo.join(".git")).unwrap();
        mkfifo(&repo.join(".git/HEAD"));
        assert_eq!(
            git_branch(&repo, &tools),
            None,
            "a FIFO HEAD is no branch, and no hang"
        );
    }

    #[test]
    fn instructions_come_from_the_repository_root_down_to_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let workspace = root.join("a/b");
        std::fs::create_dir_all(&workspace).unwrap();
        assert_eq!(
            instruction_dirs(&workspace),
            std::slice::from_ref(&workspace)
        );
        std::fs::create_dir(root.join("a/.git")).unwrap();
        assert_eq!(
            instruction_dirs(&workspace),
            [root.join("a"), workspace.clone()]
        );
        let tools = ToolServices::new(keel_tools::WorkspaceGuard::new(&workspace, &[]).unwrap());
        std::fs::write(root.join("a/.git/HEAD"), "ref: refs/heads/topic/x\n").unwrap();
        assert_eq!(git_branch(&workspace, &tools).as_deref(), Some("topic/x"));
        std::fs::write(root.join("a/.git/HEAD"), "ref: refs/heads/bad\u{1b}[2J\n").unwrap();
        assert_eq!(git_branch(&workspace, &tools), None);
        // Someone else's repository around the workspace instructs nothing (as root, this
        // machine can make one; elsewhere the part is skipped).
        if std::os::unix::fs::chown(root.join("a/.git"), Some(12_345), None).is_ok() {
            assert_eq!(
                instruction_dirs(&workspace),
                std::slice::from_ref(&workspace)
            );
            std::os::unix::fs::chown(root.join("a/.git"), Some(0), None).unwrap();
        }
        let names = vec!["AGENTS.md".to_string(), "CLAUDE.md".to_string()];
        std::fs::write(workspace.join("CLAUDE.md"), "c").unwrap();
        assert_eq!(
            first_named(&workspace, &names),
            Some(workspace.join("CLAUDE.md"))
        );
        std::fs::write(workspace.join("AGENTS.md"), "a").unwrap();
        assert_eq!(
            first_named(&workspace, &names),
            Some(workspace.join("AGENTS.md"))
        );
        assert_eq!(first_named(&workspace, &["../x".to_string()]), None);
    }
}
