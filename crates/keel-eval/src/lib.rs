//! `keel eval`: the seed's reliability study as a command anyone can rerun (docs/eval.md).
//!
//! A suite is a directory of tasks (`task`); the matrix crosses models, efforts, tasks,
//! variants and repetitions (`matrix`); each trial runs a child `keel run --json` in a fresh
//! workspace and home behind a metering, fault-injecting proxy (`trial`, `proxy`, `faults`)
//! and is graded by the task's `verify.sh`; every admission and result goes to an fsynced
//! log (`log`), from which the report is computed (`report`), resumable and shardable
//! (`run`, `merge`).
//!
//! Invariants (each module states its own):
//! - Numbers come from outside the agent: the proxy's counts, the event stream, the grader.
//! - Only `infra_failed` is retried, and it is kept out of every rate; a stopped turn is never
//!   turned into a pass, and a pass after an explicit recovery is counted apart.
//! - Arms are never mixed: a run directory holds one manifest's trials.

pub mod builtin;
pub mod check;
pub mod faults;
pub mod log;
pub mod matrix;
pub mod merge;
pub mod observe;
pub mod proxy;
pub mod report;
mod report_text;
pub mod run;
mod script;
pub mod suite;
pub mod task;
pub mod trial;

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{}: {message}", path.display())]
    Task { path: PathBuf, message: String },
    #[error("task `{task}`: mock.json: {message}")]
    Script { task: String, message: String },
    #[error("{}: {message}", path.display())]
    Io { path: PathBuf, message: String },
    #[error("{0}")]
    Usage(String),
    #[error("keel eval: {0}")]
    Harness(String),
}

impl EvalError {
    /// The user's to fix (a bad argument, task or script): exit 2.
    pub fn is_for_the_user(&self) -> bool {
        matches!(
            self,
            EvalError::Usage(_) | EvalError::Task { .. } | EvalError::Script { .. }
        )
    }

    pub(crate) fn io(path: &Path, error: std::io::Error) -> EvalError {
        EvalError::Io {
            path: path.to_path_buf(),
            message: error.to_string(),
        }
    }
}
