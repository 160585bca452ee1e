//! What a run leaves in its directory: `manifest.json` (what was run, with digests) and
//! `attempts.jsonl` (every admission and every result, append-only).
//!
//! Invariants:
//! - Each line is written whole and fsynced before the run goes on: a crash loses at most the
//!   line being written, and a torn last line is dropped (and cut off) on resume.
//! - A trial is admitted before it starts; one admitted and never finished was interrupted and
//!   runs again on resume. A finished trial never runs again, but an `infra_failed` one gets
//!   one more attempt.
//! - A directory holds one run: a rerun into it with other inputs is refused.

use crate::EvalError;
use crate::matrix::{MatrixSpec, Shard, TrialKey};
use crate::proxy::Metered;
use crate::task::TaskKind;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// How a trial ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Passed,
    VerificationFailed,
    AgentError,
    Timeout,
    BudgetExhausted,
    /// The harness, the machine or the network failed, not the agent: retried once, and kept
    /// out of every rate.
    InfraFailed,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::VerificationFailed => "verification_failed",
            Outcome::AgentError => "agent_error",
            Outcome::Timeout => "timeout",
            Outcome::BudgetExhausted => "budget_exhausted",
            Outcome::InfraFailed => "infra_failed",
        }
    }
}

/// One finished attempt of a trial, with everything the report counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    pub trial: String,
    pub key: TrialKey,
    pub kind: TaskKind,
    pub attempt: u32,
    pub outcome: Outcome,
    /// Why, in a few words (a failure's kind, what timed out, which budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// It passed only after the harness's one explicit recovery: never a pass@1.
    #[serde(default)]
    pub recovered: bool,
    /// An honesty task's answer claimed what could not be done.
    #[serde(default)]
    pub false_completion: bool,
    /// Tool calls the model proposed, and those that completed.
    pub proposals: u32,
    pub successful_ops: u32,
    /// Call ids that ran more than once (must be 0).
    pub duplicate_call_ids: u32,
    /// The same tool with the same arguments completing more than once.
    pub repeated_ops: u32,
    /// Subagents the trial's session started, and background jobs.
    #[serde(default)]
    pub subagents: u32,
    #[serde(default)]
    pub jobs: u32,
    /// What the proxy saw (the provider's own counts).
    pub metered: Metered,
    /// What keel reported (its own usage).
    pub keel_input_tokens: u64,
    pub keel_output_tokens: u64,
    pub latency_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub marker: String,
    /// What its tokens cost by the provider's published price when it finished (an
    /// estimate: all input priced as cache misses); `None` where no price is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

/// An amount of money.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub amount: f64,
    pub currency: String,
}

/// Why a trial that never ran is `budget_exhausted`: the run's `--max-spend` was reached.
pub const NOT_RUN_MAX_SPEND: &str = "--max-spend reached before it ran";

impl TrialResult {
    /// A result that says nothing happened yet: `infra_failed` until the attempt says more.
    pub fn not_finished(
        key: &TrialKey,
        kind: TaskKind,
        attempt: u32,
        marker: String,
    ) -> TrialResult {
        TrialResult {
            trial: key.id(),
            key: key.clone(),
            kind,
            attempt,
            outcome: Outcome::InfraFailed,
            detail: None,
            recovered: false,
            false_completion: false,
            proposals: 0,
            successful_ops: 0,
            duplicate_call_ids: 0,
            repeated_ops: 0,
            subagents: 0,
            jobs: 0,
            metered: Default::default(),
            keel_input_tokens: 0,
            keel_output_tokens: 0,
            latency_ms: 0,
            session: None,
            marker,
            cost: None,
        }
    }

    /// Counted in rates: neither a harness failure nor a trial `--max-spend` kept from running.
    pub fn is_counted(&self) -> bool {
        self.outcome != Outcome::InfraFailed && !self.never_ran()
    }

    /// Kept from running by `--max-spend`.
    pub fn never_ran(&self) -> bool {
        self.outcome == Outcome::BudgetExhausted
            && self.detail.as_deref() == Some(NOT_RUN_MAX_SPEND)
    }

    /// A harness failure that counts toward the one retry (an interrupted attempt does not).
    pub fn is_retryable_failure(&self) -> bool {
        self.outcome == Outcome::InfraFailed && self.detail.as_deref() != Some(INTERRUPTED)
    }
}

/// Why a trial's attempt ended without a result: the run was stopped (it runs again).
pub const INTERRUPTED: &str = "interrupted";

/// One line of `attempts.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Attempt {
    Admitted { trial: String, attempt: u32 },
    Finished(Box<TrialResult>),
}

/// The append-only attempts log.
pub struct AttemptsLog {
    file: std::fs::File,
}

impl AttemptsLog {
    pub const FILE: &'static str = "attempts.jsonl";

    /// Open `dir`'s log for appending (created if new).
    pub fn open(dir: &Path) -> Result<AttemptsLog, EvalError> {
        let path = dir.join(Self::FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|error| io(&path, error))?;
        Ok(AttemptsLog { file })
    }

    /// Write `attempt` as one line and wait until it is on disk.
    pub fn append(&mut self, attempt: &Attempt) -> Result<(), EvalError> {
        let mut line = serde_json::to_vec(attempt).map_err(|error| EvalError::Io {
            path: PathBuf::from(Self::FILE),
            message: error.to_string(),
        })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.sync_data())
            .map_err(|error| io(Path::new(Self::FILE), error))
    }

    /// The lines of `dir`'s log, for a run about to append to it: a torn last line (no
    /// newline, or not JSON) is dropped and cut off the file; a bad line anywhere else is an
    /// error naming it.
    pub fn read(dir: &Path) -> Result<Vec<Attempt>, EvalError> {
        Self::read_lines(dir, true)
    }

    /// The lines of `dir`'s log, the file left as it is (a run may be writing to it).
    pub fn read_only(dir: &Path) -> Result<Vec<Attempt>, EvalError> {
        Self::read_lines(dir, false)
    }

    fn read_lines(dir: &Path, cut_torn: bool) -> Result<Vec<Attempt>, EvalError> {
        let path = dir.join(Self::FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io(&path, error)),
        };
        let mut attempts = Vec::new();
        let mut good_end = 0;
        let mut start = 0;
        let lines: Vec<&[u8]> = bytes.split_inclusive(|byte| *byte == b'\n').collect();
        let count = lines.len();
        for (index, line) in lines.into_iter().enumerate() {
            let last = index + 1 == count;
            let whole = line.ends_with(b"\n");
            match serde_json::from_slice::<Attempt>(line) {
                Ok(attempt) if whole => {
                    attempts.push(attempt);
                    good_end = start + line.len();
                }
                _ if last => break,
                Ok(_) | Err(_) => {
                    return Err(EvalError::Io {
                        path: path.clone(),
                        message: format!("line {} is not an attempt record", index + 1),
                    });
                }
            }
            start += line.len();
        }
        if cut_torn && good_end < bytes.len() {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|error| io(&path, error))?;
            file.set_len(good_end as u64)
                .and_then(|()| file.sync_data())
                .map_err(|error| io(&path, error))?;
        }
        Ok(attempts)
    }
}

/// The binary that ran the trials.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinaryId {
    pub version: String,
    /// The git commit it was built from, when known.
    pub commit: Option<String>,
    pub sha256: String,
}

/// What a run is: written once, compared on every rerun into the same directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub suite: String,
    pub suite_sha256: String,
    pub binary: BinaryId,
    pub matrix: MatrixSpec,
    pub shard: Shard,
    pub faults: String,
    /// Whether trials ran in the enforced sandbox (`off` only when asked for).
    pub sandbox: String,
    /// The settings every trial ran with, providers' included (no key: variable names only).
    pub settings: serde_json::Value,
    pub max_spend: Option<f64>,
    pub concurrency: u32,
}

impl Manifest {
    pub const FILE: &'static str = "manifest.json";

    pub fn read(dir: &Path) -> Result<Option<Manifest>, EvalError> {
        let path = dir.join(Self::FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|error| EvalError::Io {
                    path,
                    message: format!("not a keel eval manifest: {error}"),
                }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io(&path, error)),
        }
    }

    /// Write it whole (a temporary file renamed into place).
    pub fn write(&self, dir: &Path) -> Result<(), EvalError> {
        let path = dir.join(Self::FILE);
        let partial = dir.join("manifest.json.partial");
        let text = serde_json::to_string_pretty(self).map_err(|error| EvalError::Io {
            path: path.clone(),
            message: error.to_string(),
        })?;
        std::fs::write(&partial, text + "\n")
            .and_then(|()| std::fs::rename(&partial, &path))
            .map_err(|error| io(&path, error))
    }

    /// What differs from `other` in what decides the trials' outcomes (how many run at once
    /// does not).
    pub fn differences(&self, other: &Manifest) -> Vec<&'static str> {
        let mut differ = Vec::new();
        let mut check = |same: bool, what: &'static str| {
            if !same {
                differ.push(what);
            }
        };
        check(self.suite_sha256 == other.suite_sha256, "the suite");
        check(self.binary.sha256 == other.binary.sha256, "the keel binary");
        check(self.matrix == other.matrix, "the matrix");
        check(self.shard == other.shard, "the shard");
        check(self.faults == other.faults, "the faults");
        check(self.sandbox == other.sandbox, "the sandbox");
        check(self.settings == other.settings, "the settings");
        check(self.max_spend == other.max_spend, "--max-spend");
        differ
    }
}

fn io(path: &Path, error: std::io::Error) -> EvalError {
    EvalError::Io {
        path: path.to_path_buf(),
        message: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(n: u32) -> Attempt {
        Attempt::Admitted {
            trial: format!("t{n}"),
            attempt: 1,
        }
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_cut_off_and_the_log_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = AttemptsLog::open(dir.path()).unwrap();
        log.append(&admitted(1)).unwrap();
        log.append(&admitted(2)).unwrap();
        drop(log);
        let path = dir.path().join(AttemptsLog::FILE);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"event\":\"admitted\",\"tri");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(
            AttemptsLog::read(dir.path()).unwrap(),
            [admitted(1), admitted(2)]
        );
        let mut log = AttemptsLog::open(dir.path()).unwrap();
        log.append(&admitted(3)).unwrap();
        assert_eq!(
            AttemptsLog::read(dir.path()).unwrap(),
            [admitted(1), admitted(2), admitted(3)],
            "the next line starts on a line of its own"
        );
    }

    #[test]
    fn a_bad_line_in_the_middle_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(AttemptsLog::FILE),
            "{\"event\":\"admitted\",\"trial\":\"a\",\"attempt\":1}\nnot json\n{\"event\":\"admitted\",\"trial\":\"b\",\"attempt\":1}\n",
        )
        .unwrap();
        let error = AttemptsLog::read(dir.path()).unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
    }
}
