//! `keel eval check SUITE`: prove every grader before it is trusted. A grader must fail on
//! the pristine workdir (one that cannot fail measures nothing) and pass on `reference/`,
//! the solved workdir, with `reference_answer` as the final answer. An honesty task has no
//! solution, so it needs no reference, but its grader must still fail on the pristine one.
//!
//! Invariant: a grader runs exactly as in a trial (`trial::Grader`: a copy of the seed with
//! its own marker, a clean environment, the sandbox), so what is proved is what is used.

use crate::EvalError;
use crate::suite::Suite;
use crate::task::{Task, TaskKind, copy_seed};
use crate::trial::Grader;
use std::path::{Path, PathBuf};

/// What checking one task found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Fails on the pristine workdir, passes on the reference.
    Proved,
    /// An honesty task's: fails on the pristine workdir (it has no solution to pass on).
    ProvedNoSolution,
    /// Passes on the pristine workdir: it cannot fail, so it is refused.
    CannotFail,
    /// Fails on the reference: it refuses a correct solution.
    RefusesReference,
    /// An edit or verify task's grader passes the pristine workdir given the reference answer:
    /// it grades what the answer claims, not what was done.
    TrustsTheClaim,
    /// No `reference/` (only honesty tasks may have none).
    NoReference,
}

impl Verdict {
    pub fn is_ok(&self) -> bool {
        matches!(self, Verdict::Proved | Verdict::ProvedNoSolution)
    }

    pub fn says(&self) -> &'static str {
        match self {
            Verdict::Proved => "fails on the pristine workdir and passes on the reference",
            Verdict::ProvedNoSolution => {
                "fails on the pristine workdir (an honesty task: no solution to pass on)"
            }
            Verdict::CannotFail => {
                "REFUSED: passes on the pristine workdir — a grader that cannot fail measures nothing"
            }
            Verdict::RefusesReference => "REFUSED: fails on reference/, the solved workdir",
            Verdict::TrustsTheClaim => {
                "REFUSED: passes on the pristine workdir given the reference answer — it grades the claim, not the change"
            }
            Verdict::NoReference => "REFUSED: no reference/ (only honesty tasks may have none)",
        }
    }
}

/// How graders run while a suite is checked.
#[derive(Clone, Debug)]
pub struct CheckSetup {
    /// Confined (the run's own choice: `--sandbox off` is not).
    pub sandbox: bool,
    /// Hidden from graders as from a trial's (`TrialSetup::hidden`): the user's `$KEEL_HOME`
    /// and `forbid_read`; the suite and the scratch directory are added here.
    pub hidden: Vec<PathBuf>,
}

/// Check every task of `suite`, using `scratch` for the copies.
pub fn check_suite(
    suite: &Suite,
    scratch: &Path,
    setup: &CheckSetup,
) -> Result<Vec<(String, Verdict)>, EvalError> {
    let mut hidden = setup.hidden.clone();
    hidden.extend([suite.dir.clone(), scratch.to_path_buf()]);
    let setup = CheckSetup {
        sandbox: setup.sandbox,
        hidden,
    };
    suite
        .tasks
        .iter()
        .map(|task| {
            Ok((
                task.name.clone(),
                check_task(task, &scratch.join(&task.name), &setup)?,
            ))
        })
        .collect()
}

fn check_task(task: &Task, scratch: &Path, setup: &CheckSetup) -> Result<Verdict, EvalError> {
    let marker = "0c4ec4ec4ec4";
    if grade(
        task,
        &task.workdir(),
        "",
        &scratch.join("pristine"),
        marker,
        setup,
    )? {
        return Ok(Verdict::CannotFail);
    }
    // A task that changes files must be graded on them, not on the answer's claim: the
    // pristine workdir with the reference answer must fail too.
    let claim = task.reference_answer.replace("{marker}", marker);
    let claimed = scratch.join("claimed");
    if matches!(task.kind, TaskKind::Edit | TaskKind::Verify)
        && grade(task, &task.workdir(), &claim, &claimed, marker, setup)?
    {
        return Ok(Verdict::TrustsTheClaim);
    }
    if task.kind == TaskKind::Honesty {
        return Ok(Verdict::ProvedNoSolution);
    }
    let Some(reference) = task.reference() else {
        return Ok(Verdict::NoReference);
    };
    let answer = task.reference_answer.replace("{marker}", marker);
    if grade(
        task,
        &reference,
        &answer,
        &scratch.join("reference"),
        marker,
        setup,
    )? {
        Ok(Verdict::Proved)
    } else {
        Ok(Verdict::RefusesReference)
    }
}

/// Grade a copy of `seed` with `answer`: whether the grader passes.
fn grade(
    task: &Task,
    seed: &Path,
    answer: &str,
    scratch: &Path,
    marker: &str,
    setup: &CheckSetup,
) -> Result<bool, EvalError> {
    let _ = std::fs::remove_dir_all(scratch);
    let work = scratch.join("work");
    let home = scratch.join("home");
    std::fs::create_dir_all(&home).map_err(|error| EvalError::io(&home, error))?;
    copy_seed(seed, &work, marker)?;
    let answer_file = scratch.join("answer.txt");
    std::fs::write(&answer_file, answer).map_err(|error| EvalError::io(&answer_file, error))?;
    let grader = Grader {
        work,
        home,
        marker: marker.to_string(),
        sandbox: setup.sandbox,
        hidden: setup.hidden.clone(),
    };
    grader.copy_in(&task.verify_script(), &answer_file)?;
    grader.run()
}
