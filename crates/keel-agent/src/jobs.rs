//! An agent's background jobs as the engine keeps them: recorded in the store's jobs table,
//! announced as `job/started` and `job/exited`, restored (and stopped, when a dead keel left
//! them running) when a session is opened again. The jobs themselves: `keel_tools::jobs`.
//!
//! Invariants:
//! - A job's row is written before the call that started it returns (a row that cannot be
//!   written stops the job); its end is written once, the first seen.
//! - Opening a session stops every job of it that is still recorded as running and provably
//!   still the recorded process group (pid, start time, boot id), before its first turn.
//! - Every agent has its own set: a subagent's jobs end with it; a session's end with it —
//!   except across a model switch, which keeps them (`JobsKept`) for the agent that reopens
//!   the session (found in this process's live sets, never restored from the store).
//! - Spools live in keel's private state beside the store (`jobs/SESSION/`), hidden from every
//!   confined command.

use crate::event_bus::EventBus;
use keel_store::{JobEnd, RecordedJob, Store};
use keel_tools::jobs::{EndCause, JobEnding, JobRecorder, JobStart, Jobs, PastJob};
use keel_tools::process::ProcessIdentity;
use keel_types::EventBody;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The store and the event stream of one agent, as its jobs' recorder.
struct AgentJobs {
    store: Store,
    session: String,
    /// The stream of the agent that holds the jobs now (a model switch reopens the session
    /// with the jobs kept: `JobsKept`).
    events: Mutex<Arc<EventBus>>,
}

impl AgentJobs {
    fn events(&self) -> Arc<EventBus> {
        self.events
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// The jobs of each session open in this process, so an agent that reopens a session whose
/// jobs are kept alive (`JobsKept`) takes them over instead of finding them "left by a dead
/// keel".
type Live = std::collections::HashMap<String, (Weak<Jobs>, Weak<AgentJobs>)>;

fn live() -> std::sync::MutexGuard<'static, Live> {
    static LIVE: OnceLock<Mutex<Live>> = OnceLock::new();
    LIVE.get_or_init(|| Mutex::new(Live::new()))
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A session's jobs held alive while its agent is replaced (a model switch): dropped once the
/// new agent has them, or the jobs end with it.
pub struct JobsKept {
    _jobs: Arc<Jobs>,
}

/// Keep `jobs` alive across a reopening of their session.
pub(crate) fn keep(jobs: &Arc<Jobs>) -> JobsKept {
    JobsKept {
        _jobs: jobs.clone(),
    }
}

impl std::fmt::Debug for AgentJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentJobs")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl JobRecorder for AgentJobs {
    fn next_id(&self) -> Result<String, String> {
        self.store
            .next_job_id(&self.session)
            .map_err(|error| error.to_string())
    }

    fn started(&self, job: &JobStart) -> Result<(), String> {
        self.store
            .record_job(
                &self.session,
                &RecordedJob {
                    job: job.job.clone(),
                    call_id: job.call_id.clone(),
                    command: job.command.clone(),
                    pgid: job.identity.pgid,
                    start_ticks: job.identity.start_ticks,
                    boot_id: job.identity.boot_id.clone(),
                    started_at: job.started_at_ms,
                    ended: None,
                    told: false,
                },
            )
            .map_err(|error| error.to_string())?;
        self.events().emit(
            None,
            EventBody::JobStarted {
                job: job.job.clone(),
                call_id: job.call_id.clone(),
                command: job.command.clone(),
                pid: u32::try_from(job.identity.pgid).unwrap_or(0),
            },
        );
        Ok(())
    }

    fn ended(&self, job: &JobStart, ending: &JobEnding) {
        // A store that fails here leaves the row running: the next open finds the process
        // gone (or stops it) and records the end then.
        let _ = self.store.end_job(
            &self.session,
            &job.job,
            JobEnd {
                at: ending.at_ms,
                exit_code: ending.exit_code,
                signal: ending.signal,
            },
        );
        self.events().emit(
            None,
            EventBody::JobExited {
                job: job.job.clone(),
                call_id: job.call_id.clone(),
                command: job.command.clone(),
                exit_code: ending.exit_code,
                signal: ending.signal,
            },
        );
    }

    fn told(&self, job: &str) {
        let _ = self.store.job_told(&self.session, job);
    }
}

/// The jobs of the agent of `session`: those an earlier keel recorded taken in (any still
/// running stopped now).
pub(crate) fn open(store: &Store, session: &str, events: Arc<EventBus>) -> Arc<Jobs> {
    {
        let mut live = live();
        live.retain(|_, (jobs, _)| jobs.strong_count() > 0);
        // Still alive in this process (kept across a model switch): this agent takes them
        // over.
        if let Some((jobs, recorder)) = live.get(session)
            && let (Some(jobs), Some(recorder)) = (jobs.upgrade(), recorder.upgrade())
        {
            *recorder
                .events
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = events;
            return jobs;
        }
    }
    let spool_dir = store
        .path()
        .parent()
        .unwrap_or_else(|| std::path::Path::new("."))
        .join("jobs")
        .join(session);
    let recorder = Arc::new(AgentJobs {
        store: store.clone(),
        session: session.to_string(),
        events: Mutex::new(events),
    });
    let jobs = Jobs::new(recorder.clone(), spool_dir);
    // A store that cannot be read here cannot be used for the session either: its open fails
    // at the next read, saying why.
    let past = store.jobs(session).unwrap_or_default();
    jobs.restore(past.into_iter().map(past_job).collect());
    let jobs = Arc::new(jobs);
    // The session's lease keeps any other agent from opening it meanwhile.
    live().insert(
        session.to_string(),
        (Arc::downgrade(&jobs), Arc::downgrade(&recorder)),
    );
    jobs
}

fn past_job(recorded: RecordedJob) -> PastJob {
    PastJob {
        start: JobStart {
            job: recorded.job,
            call_id: recorded.call_id,
            command: recorded.command,
            identity: ProcessIdentity {
                pgid: recorded.pgid,
                start_ticks: recorded.start_ticks,
                boot_id: recorded.boot_id,
            },
            started_at_ms: recorded.started_at,
        },
        ending: recorded.ended.map(|end| JobEnding {
            exit_code: end.exit_code,
            signal: end.signal,
            at_ms: end.at,
            cause: EndCause::Exited,
        }),
        told: recorded.told,
    }
}
