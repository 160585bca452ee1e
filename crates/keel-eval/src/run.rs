//! Running a matrix into a directory: admission in matrix order, `concurrency` trials at a
//! time, every admission and result logged before the run goes on, and the report written
//! from the log at the end — after the last trial, after a SIGINT, or on `--resume`.
//!
//! Invariants:
//! - A directory holds one run: its manifest is written first, and a run (or resume) whose
//!   inputs differ from it is refused, naming what differs.
//! - Nothing finished runs again. An `infra_failed` trial gets one more attempt; one that a
//!   stop or a crash interrupted runs again on resume.
//! - A stop admits nothing more, settles the trials running as `infra_failed: interrupted`
//!   (their processes die with them), and still writes the report.
//! - `--max-spend` stops admitting once the estimated spend reaches it; what was not run is
//!   recorded as `budget_exhausted` (`--max-spend`), never silently left out.

use crate::EvalError;
use crate::log::{
    Attempt, AttemptsLog, BinaryId, Cost, INTERRUPTED, Manifest, NOT_RUN_MAX_SPEND, Outcome,
    TrialResult,
};
use crate::matrix::{MatrixSpec, Shard, TrialKey};
use crate::report::{Report, final_results};
use crate::suite::Suite;
use crate::trial::{ProviderTarget, TrialSetup, run_trial};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What to run.
#[derive(Clone, Debug)]
pub struct RunPlan {
    pub suite: Suite,
    pub targets: Vec<ProviderTarget>,
    pub matrix: MatrixSpec,
    pub shard: Shard,
    pub concurrency: u32,
    pub faults: String,
    pub sandbox: bool,
    pub max_spend: Option<f64>,
    pub seed: Option<u64>,
    pub keel: PathBuf,
    pub binary: BinaryId,
    pub out: PathBuf,
    /// What the user's own keel hides that no trial may see either: the user's `$KEEL_HOME`
    /// and `[sandbox] forbid_read` (a trial's own home is another one).
    pub users_hidden: Vec<PathBuf>,
    /// The user's `$KEEL_HOME`: a real model's trial gets the key `keel auth login` stored
    /// there when its variable is not set (the trial's own home holds none).
    pub keys_from: Option<PathBuf>,
}

/// Progress, after each trial.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    pub done: u32,
    pub total: u32,
    pub failures: u32,
    pub spend: f64,
}

/// How a run ended.
#[derive(Clone, Debug)]
pub struct Finished {
    pub report: Report,
    pub markdown: String,
    pub interrupted: bool,
}

impl RunPlan {
    /// The manifest this plan writes (and compares against one already there).
    pub fn manifest(&self) -> Manifest {
        Manifest {
            version: 1,
            suite: self.suite.name.clone(),
            suite_sha256: self.suite.sha256.clone(),
            binary: self.binary.clone(),
            matrix: self.matrix.clone(),
            shard: self.shard,
            faults: self.faults.clone(),
            sandbox: if self.sandbox { "enforced" } else { "off" }.to_string(),
            settings: serde_json::json!({
                "permission_mode": "auto",
                "targets": self.targets,
                "seed": self.seed,
            }),
            max_spend: self.max_spend,
            concurrency: self.concurrency,
        }
    }
}

/// Where the log leaves each trial.
#[derive(Debug, Default)]
struct Settled {
    /// Trials that never run again.
    done: BTreeSet<String>,
    /// The attempt number each trial reached.
    reached: BTreeMap<String, u32>,
    /// Harness failures (not interruptions) per trial: one gets a retry, two end the trial.
    failures: BTreeMap<String, u32>,
    /// The estimated spend of the finished trials.
    spend: f64,
}

impl Settled {
    fn of(attempts: &[Attempt]) -> Settled {
        let mut settled = Settled::default();
        for attempt in attempts {
            match attempt {
                Attempt::Admitted { trial, attempt } => {
                    let entry = settled.reached.entry(trial.clone()).or_default();
                    *entry = (*entry).max(*attempt);
                }
                Attempt::Finished(result) => {
                    settled.finish(result);
                }
            }
        }
        settled
    }

    /// Count `result`; whether its trial runs again.
    fn finish(&mut self, result: &TrialResult) -> bool {
        self.spend += result.cost.as_ref().map_or(0.0, |cost| cost.amount);
        if result.is_retryable_failure() {
            *self.failures.entry(result.trial.clone()).or_default() += 1;
        }
        let again = result.outcome == Outcome::InfraFailed
            && self.failures.get(&result.trial).copied().unwrap_or(0) < 2;
        if again {
            self.done.remove(&result.trial);
        } else {
            self.done.insert(result.trial.clone());
        }
        again
    }
}

/// Run (or go on with) `plan` in its directory until done or `stop` turns true.
pub async fn run(
    plan: RunPlan,
    mut stop: tokio::sync::watch::Receiver<bool>,
    progress: impl Fn(&Progress),
) -> Result<Finished, EvalError> {
    std::fs::create_dir_all(&plan.out).map_err(|error| EvalError::io(&plan.out, error))?;
    // One run in a directory at a time (two resumes would run the same trials).
    let _held = hold_directory(&plan.out)?;
    let manifest = plan.manifest();
    match Manifest::read(&plan.out)? {
        Some(existing) => {
            let differ = existing.differences(&manifest);
            if !differ.is_empty() {
                return Err(EvalError::Usage(format!(
                    "{} holds another run ({} differ); use a new --out directory",
                    plan.out.display(),
                    differ.join(", ")
                )));
            }
        }
        None => manifest.write(&plan.out)?,
    }
    let attempts = AttemptsLog::read(&plan.out)?;
    let mut settled = Settled::of(&attempts);
    let trials = plan.matrix.shard(plan.shard);
    let total = trials.len() as u32;
    let mut queue: VecDeque<TrialKey> = trials
        .into_iter()
        .filter(|trial| !settled.done.contains(&trial.id()))
        .collect();
    let mut log = AttemptsLog::open(&plan.out)?;
    let mut state = Progress {
        done: total - queue.len() as u32,
        total,
        // A resumed run's budget counts what it already spent.
        spend: settled.spend,
        ..Progress::default()
    };
    let targets: BTreeMap<String, ProviderTarget> = plan
        .targets
        .iter()
        .map(|target| (target.name.clone(), target.clone()))
        .collect();
    let plan = Arc::new(plan);
    let mut running = tokio::task::JoinSet::new();
    let mut in_flight: BTreeMap<tokio::task::Id, (TrialKey, u32)> = BTreeMap::new();
    let mut stopping = *stop.borrow();
    let mut interrupted = false;
    let mut spend_reached = false;
    loop {
        while !stopping
            && !spend_reached
            && running.len() < plan.concurrency.max(1) as usize
            && let Some(key) = queue.pop_front()
        {
            let attempt = settled.reached.get(&key.id()).copied().unwrap_or(0) + 1;
            settled.reached.insert(key.id(), attempt);
            let setup = setup_for(&plan, &targets, &key, attempt)?;
            log.append(&Attempt::Admitted {
                trial: key.id(),
                attempt,
            })?;
            let handle = running.spawn(run_trial(setup));
            in_flight.insert(handle.id(), (key, attempt));
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            joined = running.join_next_with_id() => {
                let Some(joined) = joined else { break };
                match joined {
                    Ok((id, mut result)) => {
                        let key = in_flight.remove(&id).map(|(key, _)| key);
                        result.cost = priced(&targets, &result);
                        state.spend += result.cost.as_ref().map_or(0.0, |cost| cost.amount);
                        // The harness failed it: one more attempt, next.
                        let again = settled.finish(&result);
                        log.append(&Attempt::Finished(Box::new(result.clone())))?;
                        match key {
                            Some(key) if again => queue.push_front(key),
                            _ => {
                                state.failures += u32::from(result.outcome != Outcome::Passed);
                                state.done += 1;
                            }
                        }
                        progress(&state);
                        if plan.max_spend.is_some_and(|most| state.spend >= most) {
                            spend_reached = true;
                        }
                    }
                    Err(error) => {
                        if let Some((key, attempt)) = in_flight.remove(&error.id()) {
                            log.append(&Attempt::Finished(Box::new(unfinished(
                                &plan, &key, attempt, "the trial's task stopped",
                            ))))?;
                        }
                    }
                }
            }
            changed = stop.changed(), if !stopping => {
                if changed.is_err() || *stop.borrow() {
                    stopping = true;
                    interrupted = true;
                    running.abort_all();
                }
            }
        }
        if stopping && interrupted {
            // What was running is settled as interrupted; it runs again on resume.
            while let Some(joined) = running.join_next_with_id().await {
                let id = match &joined {
                    Ok((id, _)) => *id,
                    Err(error) => error.id(),
                };
                if let Some((key, attempt)) = in_flight.remove(&id) {
                    let result = match joined {
                        Ok((_, result)) => result,
                        Err(_) => unfinished(&plan, &key, attempt, INTERRUPTED),
                    };
                    log.append(&Attempt::Finished(Box::new(result)))?;
                }
            }
            break;
        }
    }
    if spend_reached {
        for key in queue.drain(..) {
            let attempt = settled.reached.get(&key.id()).copied().unwrap_or(0);
            let mut result = unfinished(&plan, &key, attempt, NOT_RUN_MAX_SPEND);
            result.outcome = Outcome::BudgetExhausted;
            log.append(&Attempt::Finished(Box::new(result)))?;
        }
    }
    let report = write_report(&plan.out, &plan.manifest())?;
    Ok(Finished {
        markdown: report.1,
        report: report.0,
        interrupted,
    })
}

/// Hold `dir`'s lock for as long as the value lives; refused while another keel eval holds it.
fn hold_directory(dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, EvalError> {
    let path = dir.join(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|error| EvalError::io(&path, error))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|_| {
        EvalError::Usage(format!(
            "{}: another keel eval is running in this directory",
            dir.display()
        ))
    })
}

/// Compute the report from `dir`'s log and write `report.md` and `report.json`.
pub fn write_report(dir: &Path, manifest: &Manifest) -> Result<(Report, String), EvalError> {
    let results = final_results(&AttemptsLog::read_only(dir)?);
    let report = Report::from_results(&results, manifest.matrix.reps);
    let (suite, shard) = (&manifest.suite, manifest.shard);
    let title = if shard.is_whole() {
        format!("keel eval — suite `{suite}`")
    } else {
        format!("keel eval — suite `{suite}`, shard {shard}")
    };
    let markdown = report.markdown(&title, &context_line(manifest));
    let md = dir.join("report.md");
    std::fs::write(&md, &markdown).map_err(|error| EvalError::io(&md, error))?;
    let json = dir.join("report.json");
    let text = serde_json::to_string_pretty(&report).map_err(|error| EvalError::Io {
        path: json.clone(),
        message: error.to_string(),
    })?;
    std::fs::write(&json, text + "\n").map_err(|error| EvalError::io(&json, error))?;
    Ok((report, markdown))
}

/// What a report says first about how its trials ran.
pub(crate) fn context_line(manifest: &Manifest) -> String {
    let sandbox = if manifest.sandbox == "enforced" {
        "in the enforced sandbox".to_string()
    } else {
        "**unsandboxed** (`--sandbox off`)".to_string()
    };
    let faults = if manifest.faults.is_empty() {
        String::new()
    } else {
        format!(", faults `{}` injected at the proxy", manifest.faults)
    };
    format!(
        "keel {} · suite sha256 {}… · trials ran {sandbox}{faults}, auto permissions, {} {} \
         per cell.",
        manifest.binary.version,
        manifest.suite_sha256.get(..12).unwrap_or(""),
        manifest.matrix.reps,
        if manifest.matrix.reps == 1 {
            "repetition"
        } else {
            "repetitions"
        }
    )
}

fn setup_for(
    plan: &RunPlan,
    targets: &BTreeMap<String, ProviderTarget>,
    key: &TrialKey,
    attempt: u32,
) -> Result<TrialSetup, EvalError> {
    let task = plan
        .suite
        .task(&key.task)
        .ok_or_else(|| EvalError::Usage(format!("the suite has no task `{}`", key.task)))?;
    let target = targets
        .get(&key.model)
        .ok_or_else(|| EvalError::Usage(format!("no model `{}` to run", key.model)))?;
    Ok(TrialSetup {
        key: key.clone(),
        task: task.clone(),
        attempt,
        target: target.clone(),
        keel: plan.keel.clone(),
        dir: plan
            .out
            .join("trials")
            .join(key.id())
            .join(attempt.to_string()),
        sandbox: plan.sandbox,
        faults: plan.faults.clone(),
        // The whole run directory: the trial's own workspace and temp dir are attached back
        // inside it by the sandbox; nothing else of it — another trial, one started later,
        // the log — is there for the trial's commands or its grader.
        hidden: [plan.suite.dir.clone(), plan.out.clone()]
            .into_iter()
            .chain(plan.users_hidden.iter().cloned())
            .collect(),
        keys_from: plan.keys_from.clone(),
        seed: plan.seed,
    })
}

/// A result for a trial that did not finish (`detail` says why).
fn unfinished(plan: &RunPlan, key: &TrialKey, attempt: u32, detail: &str) -> TrialResult {
    let kind = plan
        .suite
        .task(&key.task)
        .map_or(crate::task::TaskKind::Read, |task| task.kind);
    TrialResult {
        detail: Some(detail.to_string()),
        ..TrialResult::not_finished(key, kind, attempt, String::new())
    }
}

/// What a trial's tokens cost by the provider's published price, and its currency (an
/// estimate: all input is priced as cache misses); `None` where no price is known.
fn priced(targets: &BTreeMap<String, ProviderTarget>, result: &TrialResult) -> Option<Cost> {
    let target = targets.get(&result.key.model)?;
    let price = keel_llm::price::known_price(target.base_url.as_deref()?, &target.model, None)?;
    let input = result
        .metered
        .input_tokens
        .unwrap_or(result.keel_input_tokens);
    let output = result
        .metered
        .output_tokens
        .unwrap_or(result.keel_output_tokens);
    let usage = keel_types::Usage {
        input,
        output,
        reasoning: 0,
        cache_hit: 0,
        cache_miss: input,
        cache_write: 0,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    Some(Cost {
        amount: price.cost(&usage, now),
        currency: price.currency.clone(),
    })
}
