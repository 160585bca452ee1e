//! One eval task: a directory with `task.toml`, `workdir/` (the seed every trial starts
//! from), `verify.sh` (the grader), and optionally `mock.json` (the scripted model) and
//! `reference/` (a solved workdir, which the grader must pass).
//!
//! Invariants:
//! - A task that cannot be read is an error naming the file and what is wrong; nothing runs.
//! - A task is plain files and directories, nothing else (`only_plain_files`): a suite is
//!   downloaded, untrusted input, and a link in it — the task directory, `workdir/` itself,
//!   `verify.sh`, anything below — would have keel copy what it leads to (`~/.ssh`) into a
//!   trial, its grader's copy and the run's events, or hand the grader to the model
//!   (`workdir/x -> ../verify.sh`). A link, FIFO, socket or device is refused, its path
//!   named, by `keel eval check` and before a run; files are opened without following a
//!   link all the same (`read_plain`).
//! - `{marker}` is the only placeholder: in the prompt, the scripted model and the workdir's
//!   text files it is replaced by the trial's own random marker, so no two trials (and no
//!   cached answer) can share a result.
//! - An honesty task (`no_solution`) declares the completion claims that count as a false
//!   completion; it is scored on them and kept out of the success rate.

use crate::EvalError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// What a task measures (the seed's kinds, and the two keel adds).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum TaskKind {
    Read,
    Edit,
    Verify,
    Honesty,
    Recovery,
}

impl TaskKind {
    pub fn name(self) -> &'static str {
        match self {
            TaskKind::Read => "read",
            TaskKind::Edit => "edit",
            TaskKind::Verify => "verify",
            TaskKind::Honesty => "honesty",
            TaskKind::Recovery => "recovery",
        }
    }

    /// Counted in the success rate (honesty tasks are scored on false completions instead).
    pub fn scored_on_success(self) -> bool {
        self != TaskKind::Honesty
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    kind: TaskKind,
    prompt: String,
    #[serde(default = "default_rounds")]
    max_rounds: u32,
    #[serde(default = "default_timeout")]
    timeout_secs: u64,
    /// Input and output tokens one trial may spend (counted at the proxy).
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    no_solution: bool,
    /// Phrases (any case) in a final answer that claim the impossible was done.
    #[serde(default)]
    false_completion: Vec<String>,
    #[serde(default)]
    description: Option<String>,
    /// The final answer `keel eval check` gives the grader with `reference/`.
    #[serde(default)]
    reference_answer: Option<String>,
}

fn default_rounds() -> u32 {
    12
}

fn default_timeout() -> u64 {
    120
}

/// A task as loaded.
#[derive(Clone, Debug)]
pub struct Task {
    /// The directory's name: the task's id in the matrix and the report.
    pub name: String,
    pub dir: PathBuf,
    pub kind: TaskKind,
    pub prompt: String,
    pub max_rounds: u32,
    pub timeout_secs: u64,
    pub max_tokens: Option<u64>,
    pub no_solution: bool,
    pub false_completion: Vec<String>,
    pub description: Option<String>,
    /// The final answer that goes with `reference/` when the grader is checked.
    pub reference_answer: String,
    /// The scripted model (`mock.json`), as text with its placeholders.
    pub mock: Option<String>,
}

impl Task {
    pub fn load(dir: &Path) -> Result<Task, EvalError> {
        only_plain_files(dir)?;
        let name = dir
            .file_name()
            .and_then(|name| name.to_str())
            .filter(|name| is_plain_name(name))
            .ok_or_else(|| EvalError::Task {
                path: dir.to_path_buf(),
                message: "a task directory's name must be letters, digits, `-` or `_`".into(),
            })?
            .to_string();
        let file = dir.join("task.toml");
        let text = read_text(&file)?;
        // Placed and named, never quoted: a task is someone else's file.
        let parsed: TaskFile = toml::from_str(&text).map_err(|error| {
            let (line, key, what) = keel_config::toml_error_at(&text, &error);
            EvalError::Task {
                path: file.clone(),
                message: if key.is_empty() {
                    format!("line {line}: {what}")
                } else {
                    format!("line {line}: `{key}`: {what}")
                },
            }
        })?;
        let fail = |message: String| EvalError::Task {
            path: file.clone(),
            message,
        };
        if parsed.prompt.trim().is_empty() {
            return Err(fail("`prompt` is empty".into()));
        }
        if parsed.max_rounds == 0 || parsed.timeout_secs == 0 {
            return Err(fail(
                "`max_rounds` and `timeout_secs` must be at least 1".into(),
            ));
        }
        if parsed.no_solution != (parsed.kind == TaskKind::Honesty) {
            return Err(fail(
                "`no_solution = true` goes with `kind = \"honesty\"`, and only with it".into(),
            ));
        }
        if parsed.no_solution && parsed.false_completion.is_empty() {
            return Err(fail(
                "an honesty task names its false completion claims (`false_completion`)".into(),
            ));
        }
        for (needed, directory) in [("workdir", true), ("verify.sh", false)] {
            let found = dir.join(needed).symlink_metadata();
            if !found.is_ok_and(|meta| meta.is_dir() == directory) {
                return Err(EvalError::Task {
                    path: dir.join(needed),
                    message: "missing: every task has a `workdir/` directory and a `verify.sh` \
                              file"
                        .into(),
                });
            }
        }
        let mock_file = dir.join("mock.json");
        let mock = mock_file
            .symlink_metadata()
            .is_ok()
            .then(|| read_text(&mock_file))
            .transpose()?;
        Ok(Task {
            name,
            dir: dir.to_path_buf(),
            kind: parsed.kind,
            prompt: parsed.prompt,
            max_rounds: parsed.max_rounds,
            timeout_secs: parsed.timeout_secs,
            max_tokens: parsed.max_tokens,
            no_solution: parsed.no_solution,
            false_completion: parsed.false_completion,
            description: parsed.description,
            reference_answer: parsed.reference_answer.unwrap_or_default(),
            mock,
        })
    }

    /// The prompt of a trial with `marker`.
    pub fn prompt_for(&self, marker: &str) -> String {
        self.prompt.replace("{marker}", marker)
    }

    /// Whether `answer` claims a completion this honesty task cannot have.
    pub fn claims_completion(&self, answer: &str) -> bool {
        let answer = answer.to_lowercase();
        self.false_completion
            .iter()
            .any(|claim| answer.contains(&claim.to_lowercase()))
    }

    pub fn workdir(&self) -> PathBuf {
        self.dir.join("workdir")
    }

    pub fn reference(&self) -> Option<PathBuf> {
        Some(self.dir.join("reference"))
            .filter(|dir| dir.symlink_metadata().is_ok_and(|meta| meta.is_dir()))
    }

    pub fn verify_script(&self) -> PathBuf {
        self.dir.join("verify.sh")
    }
}

/// A file or directory name keel accepts as an id: nothing a path could be tricked with.
pub(crate) fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

pub(crate) fn read_text(path: &Path) -> Result<String, EvalError> {
    String::from_utf8(read_plain(path)?).map_err(|_| EvalError::Task {
        path: path.to_path_buf(),
        message: "not UTF-8 text".into(),
    })
}

/// The bytes of the regular file at `path`, opened without following a link (a link put
/// there after the suite was checked is refused, never read through).
pub(crate) fn read_plain(path: &Path) -> Result<Vec<u8>, EvalError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags::NO_FOLLOW_NOR_BLOCK)
        .open(path)
        .map_err(|error| EvalError::io(path, error))?;
    let meta = file
        .metadata()
        .map_err(|error| EvalError::io(path, error))?;
    if !meta.is_file() {
        return Err(EvalError::Task {
            path: path.to_path_buf(),
            message: "not a plain file".into(),
        });
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|error| EvalError::io(path, error))?;
    Ok(bytes)
}

/// `O_NOFOLLOW | O_NONBLOCK` (a FIFO opened to read never blocks the harness).
mod libc_flags {
    pub(super) const NO_FOLLOW_NOR_BLOCK: i32 =
        nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits();
}

/// Refuse `dir` unless it and everything below it are plain files and directories (looked at
/// with `lstat`, never followed): the error names the first other entry and what it is.
pub fn only_plain_files(dir: &Path) -> Result<(), EvalError> {
    let refused = |path: &Path, what: &str| EvalError::Task {
        path: path.to_path_buf(),
        message: format!(
            "{what}: a task holds only plain files and directories (keel never follows a link \
             in a suite: it could lead to your keys, or hand the grader to the model)"
        ),
    };
    let meta = dir
        .symlink_metadata()
        .map_err(|error| EvalError::io(dir, error))?;
    let kind = meta.file_type();
    if !kind.is_dir() {
        return match special_kind(&kind) {
            Some(what) => Err(refused(dir, what)),
            None => Ok(()),
        };
    }
    for entry in std::fs::read_dir(dir).map_err(|error| EvalError::io(dir, error))? {
        let entry = entry.map_err(|error| EvalError::io(dir, error))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|error| EvalError::io(&path, error))?;
        if kind.is_dir() {
            only_plain_files(&path)?;
        } else if let Some(what) = special_kind(&kind) {
            return Err(refused(&path, what));
        }
    }
    Ok(())
}

/// What a file of `kind` is, unless it is a plain file or a directory.
fn special_kind(kind: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_symlink() {
        Some("a symbolic link")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_block_device() || kind.is_char_device() {
        Some("a device")
    } else if kind.is_file() || kind.is_dir() {
        None
    } else {
        Some("not a plain file")
    }
}

/// Copy `from` into `to` (created), replacing `{marker}` in every UTF-8 file; links and
/// other special files are refused (a task's seed is plain files), never followed.
pub(crate) fn copy_seed(from: &Path, to: &Path, marker: &str) -> Result<(), EvalError> {
    copy_plain_tree(from, to, Some(marker))
}

/// Copy the plain files and directories of `from` into `to` (created), their modes kept, with
/// `{marker}` replaced in every UTF-8 file where `marker` is given; anything else (a link, a
/// FIFO, …) is refused with its path named, never followed.
pub(crate) fn copy_plain_tree(
    from: &Path,
    to: &Path,
    marker: Option<&str>,
) -> Result<(), EvalError> {
    std::fs::create_dir_all(to).map_err(|error| EvalError::io(to, error))?;
    for entry in std::fs::read_dir(from).map_err(|error| EvalError::io(from, error))? {
        let entry = entry.map_err(|error| EvalError::io(from, error))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|error| EvalError::io(&source, error))?;
        if kind.is_dir() {
            copy_plain_tree(&source, &target, marker)?;
        } else if kind.is_file() {
            let bytes = read_plain(&source)?;
            let bytes = match marker {
                Some(marker) => match String::from_utf8(bytes) {
                    Ok(text) => text.replace("{marker}", marker).into_bytes(),
                    Err(raw) => raw.into_bytes(),
                },
                None => bytes,
            };
            std::fs::write(&target, bytes).map_err(|error| EvalError::io(&target, error))?;
            let mode = entry
                .metadata()
                .map_err(|error| EvalError::io(&source, error))?
                .permissions();
            std::fs::set_permissions(&target, mode)
                .map_err(|error| EvalError::io(&target, error))?;
        } else {
            only_plain_files(&source)?;
        }
    }
    Ok(())
}

/// Copy a trial's workspace from `from` into `to` (created) as it is — links as links, other
/// special files left out — but for the top-level names in `leave_out`.
pub(crate) fn copy_workspace(from: &Path, to: &Path, leave_out: &[&str]) -> Result<(), EvalError> {
    std::fs::create_dir_all(to).map_err(|error| EvalError::io(to, error))?;
    for entry in std::fs::read_dir(from).map_err(|error| EvalError::io(from, error))? {
        let entry = entry.map_err(|error| EvalError::io(from, error))?;
        if leave_out.iter().any(|name| entry.file_name() == *name) {
            continue;
        }
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|error| EvalError::io(&source, error))?;
        if kind.is_symlink() {
            let link =
                std::fs::read_link(&source).map_err(|error| EvalError::io(&source, error))?;
            std::os::unix::fs::symlink(link, &target)
                .map_err(|error| EvalError::io(&target, error))?;
        } else if kind.is_dir() {
            copy_workspace(&source, &target, &[])?;
        } else if kind.is_file() {
            std::fs::copy(&source, &target).map_err(|error| EvalError::io(&target, error))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task_dir(toml: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("t1");
        std::fs::create_dir_all(task.join("workdir")).unwrap();
        std::fs::write(task.join("verify.sh"), "exit 1\n").unwrap();
        std::fs::write(task.join("task.toml"), toml).unwrap();
        dir
    }

    #[test]
    fn a_task_loads_and_its_marker_is_replaced() {
        let dir = task_dir("kind = \"read\"\nprompt = \"say {marker}\"\n");
        let task = Task::load(&dir.path().join("t1")).unwrap();
        assert_eq!(task.prompt_for("abc"), "say abc");
        assert_eq!((task.max_rounds, task.timeout_secs), (12, 120));
    }

    #[test]
    fn bad_tasks_are_refused_saying_what_is_wrong() {
        for (toml, said) in [
            ("kind = \"read\"\nprompt = \"\"\n", "`prompt` is empty"),
            (
                "kind = \"guess\"\nprompt = \"x\"\n",
                "not an accepted value",
            ),
            (
                "kind = \"read\"\nprompt = \"x\"\nextra = 1\n",
                "unknown field",
            ),
            (
                "kind = \"honesty\"\nprompt = \"x\"\nno_solution = true\n",
                "false completion",
            ),
            (
                "kind = \"read\"\nprompt = \"x\"\nno_solution = true\n",
                "only with it",
            ),
        ] {
            let dir = task_dir(toml);
            let error = Task::load(&dir.path().join("t1")).unwrap_err().to_string();
            assert!(error.contains(said), "{toml}: {error}");
            assert!(error.contains("task.toml"), "{error}");
        }
    }

    #[test]
    fn a_false_completion_is_a_declared_claim_in_any_case() {
        let dir = task_dir(
            "kind = \"honesty\"\nprompt = \"x\"\nno_solution = true\nfalse_completion = [\"is live\"]\n",
        );
        let task = Task::load(&dir.path().join("t1")).unwrap();
        assert!(task.claims_completion("Deployed: the service IS LIVE."));
        assert!(!task.claims_completion("I could not deploy it."));
    }
}
