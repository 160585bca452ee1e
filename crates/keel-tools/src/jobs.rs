//! Background jobs (`bash` with `run_in_background`, `job_output`, `job_kill`): commands that
//! outlive the call that started them, one agent's set at a time.
//!
//! Invariants:
//! - A job runs under the session's sandbox in its own kill domain (`Sandbox::confine_job`: the
//!   session's network, a PID namespace of its own), in a process group of its own: the end of
//!   a foreground command never touches it, and nothing but `job_kill`, its own end or the end
//!   of its agent (`Jobs::end_all`, also on drop) stops it. Esc cancels calls, never jobs.
//! - A job is recorded (`JobRecorder::started`: the store's jobs table, durably) before the call
//!   that started it returns; a job keel cannot record is killed at once and the call fails.
//! - Its output passes the secret redactor before it reaches the spool (`job_spool.rs`), which
//!   lives in keel's private state, outside everything a command can write. A read says how
//!   many bytes are held back for redaction (a length, never whether they begin a secret).
//! - Every end is recorded exactly once (the first seen: the process's exit, `job_kill`, the
//!   agent's end), with its exit code or signal, and told to the model exactly once: by the
//!   `job_output` or `job_kill` result that saw it, or else by `exit_notes` (a note the
//!   engine commits with the next user item or tool result, then marks `told`).

use crate::job_process::{OutputSink, Spawned, namespace_init, read_output, signal_group, spawn};
use crate::job_spool::Spool;
use crate::process::ProcessIdentity;
use crate::{ToolOutput, ToolServices};
use keel_sandbox::SandboxMode;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a `job_output` call waits for new output.
pub const MAX_WAIT: Duration = Duration::from_secs(300);
/// How long `job_kill` waits after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);
/// How long the output may stay open after the job's process ended.
const OUTPUT_GRACE: Duration = Duration::from_secs(1);
/// How much of a job's latest output is kept for people.
const PEOPLE_TAIL_BYTES: usize = 4096;
/// The most output one `job_output` result carries (the newest, when there is more).
const READ_CAP: usize = crate::output::OUTPUT_CAP;

/// How a job was started (and is recorded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobStart {
    /// `job-N`.
    pub job: String,
    pub call_id: String,
    /// The command, redacted of keel's secrets.
    pub command: String,
    pub identity: ProcessIdentity,
    /// Milliseconds since the Unix epoch.
    pub started_at_ms: i64,
}

/// Why a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndCause {
    /// Its process ended on its own.
    Exited,
    /// `job_kill`.
    Killed,
    /// The person stopped it (`/jobs`, the browser's jobs panel).
    StoppedByUser,
    /// Its agent's session ended (exit, `/clear`, a switch, serve's shutdown, a subagent's end).
    SessionEnded,
    /// Found running at load, left by a keel process that died; killed then.
    KeelDied,
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobEnding {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub at_ms: i64,
    pub cause: EndCause,
}

impl JobEnding {
    /// "exited with code 0", "was killed by signal 15 (job_kill)", …
    pub fn describe(&self) -> String {
        let how = match (self.exit_code, self.signal) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => "ended".to_string(),
        };
        match self.cause {
            EndCause::Exited => how,
            EndCause::Killed => format!("{how} (job_kill)"),
            EndCause::StoppedByUser => format!("{how}: the user stopped it"),
            EndCause::SessionEnded => format!("{how}: its session ended"),
            EndCause::KeelDied if self.signal.is_some() => {
                format!("{how}: the keel process that ran it had ended, so keel stopped it")
            }
            EndCause::KeelDied => {
                "ended while no keel process watched it (how is not known)".to_string()
            }
        }
    }
}

/// Where jobs are recorded and announced (the agent: its store and its events).
pub trait JobRecorder: Send + Sync + std::fmt::Debug {
    /// The id the next job takes.
    fn next_id(&self) -> Result<String, String>;
    /// A job's process started: record it durably and announce it.
    fn started(&self, job: &JobStart) -> Result<(), String>;
    /// A job ended: record and announce it.
    fn ended(&self, job: &JobStart, ending: &JobEnding);
    /// The model has been told how the job ended.
    fn told(&self, job: &str);
}

/// A job as `/jobs` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobView {
    pub job: String,
    pub call_id: String,
    pub command: String,
    /// How long it ran (runs, while it runs); `None` for a job of an earlier keel process.
    pub elapsed: Option<Duration>,
    pub last_line: Option<String>,
    pub ending: Option<JobEnding>,
}

/// One job.
#[derive(Debug)]
struct Job {
    start: JobStart,
    /// When it started in this process (`None`: restored from the store).
    began: Option<Instant>,
    spool: Option<Arc<Spool>>,
    /// Bytes the redactor holds back now.
    held: Arc<AtomicUsize>,
    /// The last bytes it printed for people (`/jobs`, a surface's card): redacted on their own,
    /// at once (`Secrets::live_stream`), never given to the model.
    people_tail: Mutex<std::collections::VecDeque<u8>>,
    /// Where the model's next read starts.
    read_to: Mutex<u64>,
    ending: Mutex<Option<JobEnding>>,
    /// The cause a kill in progress gives the end.
    kill_cause: Mutex<Option<EndCause>>,
    told: AtomicBool,
    /// Bumped on new output and at the end.
    changed: tokio::sync::watch::Sender<u64>,
    /// Kept while the job runs.
    confinement: Mutex<Option<keel_sandbox::Confinement>>,
    /// Runs in a PID namespace of its own (its command is PID 1's child, in PID 1's session).
    confined: bool,
    /// Its process was reaped: its group id may be reused, so nothing signals it any more.
    reaped: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

impl Job {
    fn ending(&self) -> Option<JobEnding> {
        *lock(&self.ending)
    }

    /// Record the end, if none was yet; whether this was the first.
    fn finish(&self, ending: JobEnding, recorder: &dyn JobRecorder) -> bool {
        {
            let mut slot = lock(&self.ending);
            if slot.is_some() {
                return false;
            }
            *slot = Some(ending);
        }
        lock(&self.confinement).take();
        recorder.ended(&self.start, &ending);
        self.changed.send_modify(|count| *count += 1);
        true
    }

    fn mark_told(&self, recorder: &dyn JobRecorder) {
        if !self.told.swap(true, Ordering::SeqCst) {
            recorder.told(&self.start.job);
        }
    }

    fn view(&self) -> JobView {
        let ending = self.ending();
        JobView {
            job: self.start.job.clone(),
            call_id: self.start.call_id.clone(),
            command: self.start.command.clone(),
            elapsed: self.began.map(|began| match ending {
                Some(ending) => Duration::from_millis(
                    u64::try_from(ending.at_ms - self.start.started_at_ms).unwrap_or(0),
                ),
                None => began.elapsed(),
            }),
            last_line: {
                let tail = self.people_text();
                tail.lines()
                    .rev()
                    .find(|line| !line.trim().is_empty())
                    .map(|line| line.trim_end().chars().take(120).collect())
            },
            ending,
        }
    }

    /// Send `signal` to the job's process group, unless its process was reaped (the group id
    /// could belong to someone else by now).
    fn signal(&self, signal: nix::sys::signal::Signal) {
        if !self.reaped.load(Ordering::SeqCst) {
            signal_group(self.start.identity.pgid, signal);
        }
    }

    /// Ask the job to end: SIGTERM to its command. A confined job's command runs under the
    /// namespace's PID 1, in PID 1's session: the signal goes to that group (PID 1 itself
    /// ignores it and ends with the command), never to keel's child, whose end would SIGKILL
    /// the whole namespace at once.
    fn terminate(&self) {
        if self.reaped.load(Ordering::SeqCst) {
            return;
        }
        let pgid = self.start.identity.pgid;
        match self.confined.then(|| namespace_init(pgid)).flatten() {
            Some(init) => signal_group(init, nix::sys::signal::Signal::SIGTERM),
            None => signal_group(pgid, nix::sys::signal::Signal::SIGTERM),
        }
    }

    /// What people may see of its last output (complete characters only).
    fn people_text(&self) -> String {
        let tail: Vec<u8> = lock(&self.people_tail).iter().copied().collect();
        let start = tail
            .iter()
            .position(|byte| (*byte as i8) >= -0x40)
            .unwrap_or(tail.len());
        String::from_utf8_lossy(&tail[start..]).into_owned()
    }

    fn keep_for_people(&self, bytes: &[u8]) {
        let mut tail = lock(&self.people_tail);
        tail.extend(bytes);
        let excess = tail.len().saturating_sub(PEOPLE_TAIL_BYTES);
        tail.drain(..excess);
    }

    /// "job-1 (`python3 -m http.server`)"
    fn named(&self) -> String {
        let command: String = self.start.command.chars().take(80).collect();
        let cut = if command.len() < self.start.command.len() {
            "…"
        } else {
            ""
        };
        format!("{} (`{command}{cut}`)", self.start.job)
    }
}

/// One agent's jobs (see the module invariants).
#[derive(Debug)]
pub struct Jobs {
    recorder: Arc<dyn JobRecorder>,
    spool_dir: PathBuf,
    jobs: Mutex<Vec<Arc<Job>>>,
    /// What each model call read or was told, applied once its result is committed
    /// (`confirm`): a result lost to a crash or a cancel is read again, never missed.
    unconfirmed: Mutex<std::collections::HashMap<String, Vec<Seen>>>,
}

/// What a `job_output` or `job_kill` result showed the model.
#[derive(Debug)]
enum Seen {
    /// Its output up to this offset.
    ReadTo(Arc<Job>, u64),
    /// How it ended.
    Told(Arc<Job>),
}

/// The jobs of the agent a call belongs to, and the call (what a tool's context carries).
#[derive(Clone, Debug)]
pub struct JobSlot {
    pub jobs: Arc<Jobs>,
    pub call_id: String,
}

/// A job found in the store when its session is opened again.
#[derive(Clone, Debug)]
pub struct PastJob {
    pub start: JobStart,
    pub ending: Option<JobEnding>,
    pub told: bool,
}

impl Jobs {
    /// No jobs yet; spools go under `spool_dir`.
    pub fn new(recorder: Arc<dyn JobRecorder>, spool_dir: PathBuf) -> Jobs {
        Jobs {
            recorder,
            spool_dir,
            jobs: Mutex::new(Vec::new()),
            unconfirmed: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Take in the jobs an earlier keel process recorded for this session: one still running
    /// (it outlived its keel) is killed now, if it is provably the recorded process group; an
    /// end the model was not told of is told with the next note.
    pub fn restore(&self, past: Vec<PastJob>) {
        // The spools of an earlier process are no one's now.
        let _ = std::fs::remove_dir_all(&self.spool_dir);
        let mut restored = Vec::new();
        for past in past {
            let (changed, _) = tokio::sync::watch::channel(0);
            let job = Arc::new(Job {
                start: past.start,
                began: None,
                spool: None,
                held: Arc::new(AtomicUsize::new(0)),
                people_tail: Mutex::new(std::collections::VecDeque::new()),
                read_to: Mutex::new(0),
                ending: Mutex::new(past.ending),
                kill_cause: Mutex::new(None),
                told: AtomicBool::new(past.told),
                changed,
                confinement: Mutex::new(None),
                confined: false,
                reaped: AtomicBool::new(true),
            });
            if past.ending.is_none() {
                let killed = job.start.identity.kill_group_if_same();
                job.finish(
                    JobEnding {
                        exit_code: None,
                        signal: killed.then_some(nix::libc::SIGKILL),
                        at_ms: now_ms(),
                        cause: EndCause::KeelDied,
                    },
                    &*self.recorder,
                );
            }
            restored.push(job);
        }
        lock(&self.jobs).extend(restored);
    }

    fn find(&self, id: &str) -> Result<Arc<Job>, ToolOutput> {
        let jobs = lock(&self.jobs);
        if let Some(job) = jobs.iter().find(|job| job.start.job == id) {
            return Ok(job.clone());
        }
        let known: Vec<&str> = jobs.iter().map(|job| job.start.job.as_str()).collect();
        Err(ToolOutput::error(if known.is_empty() {
            format!("there is no job `{id}`: this session has started no background job")
        } else {
            format!(
                "there is no job `{id}`; this session's jobs: {}",
                known.join(", ")
            )
        }))
    }

    /// Every job, in the order they started.
    pub fn list(&self) -> Vec<JobView> {
        lock(&self.jobs).iter().map(|job| job.view()).collect()
    }

    /// The last lines a job printed, up to `max` bytes, for people (redacted at once, on
    /// their own); the model's next read is not moved.
    pub fn tail(&self, id: &str, max: usize) -> Option<String> {
        let job = self.find(id).ok()?;
        let text = job.people_text();
        let mut from = text.len().saturating_sub(max);
        while !text.is_char_boundary(from) {
            from += 1;
        }
        let text = &text[from..];
        let text = match text.find('\n') {
            Some(at) if from > 0 => &text[at + 1..],
            _ => text,
        };
        (!text.is_empty()).then(|| text.to_string())
    }

    /// How many jobs run now.
    pub fn running(&self) -> usize {
        lock(&self.jobs)
            .iter()
            .filter(|job| job.ending().is_none())
            .count()
    }

    /// Notes for the model of the jobs that ended and that it was not told of, each with its
    /// job's id: the engine commits them with the next user item or tool result, then calls
    /// `told` (a commit that fails leaves them to be told with the next one).
    pub fn exit_notes(&self) -> Vec<(String, String)> {
        let jobs: Vec<Arc<Job>> = lock(&self.jobs).clone();
        jobs.iter()
            .filter(|job| !job.told.load(Ordering::SeqCst))
            .filter_map(|job| {
                let ending = job.ending()?;
                Some((
                    job.start.job.clone(),
                    format!(
                        "[keel: background job {} {}.]",
                        job.named(),
                        ending.describe()
                    ),
                ))
            })
            .collect()
    }

    /// The model has been told how `ids` ended (their notes are committed).
    pub fn told(&self, ids: &[String]) {
        let jobs: Vec<Arc<Job>> = lock(&self.jobs).clone();
        for job in jobs.iter().filter(|job| ids.contains(&job.start.job)) {
            job.mark_told(&*self.recorder);
        }
    }

    /// Stop every running job now (SIGKILL to each group), recording each end as `cause`.
    pub fn end_all(&self, cause: EndCause) {
        let jobs: Vec<Arc<Job>> = lock(&self.jobs).clone();
        for job in jobs.iter().filter(|job| job.ending().is_none()) {
            *lock(&job.kill_cause) = Some(cause);
            job.signal(nix::sys::signal::Signal::SIGKILL);
            job.finish(
                JobEnding {
                    exit_code: None,
                    signal: Some(nix::libc::SIGKILL),
                    at_ms: now_ms(),
                    cause,
                },
                &*self.recorder,
            );
        }
    }

    /// `bash` with `run_in_background`: start `command` as a job of the call `call_id`.
    pub async fn start(&self, call_id: &str, command: &str, ctx: &ToolServices) -> ToolOutput {
        if command.trim().is_empty() {
            return ToolOutput::error("the command is empty; nothing was started".into());
        }
        let id = match self.recorder.next_id() {
            Ok(id) => id,
            Err(error) => {
                return ToolOutput::error(format!(
                    "cannot start a job: {error}; nothing was started"
                ));
            }
        };
        let spool = match Spool::create(self.spool_dir.join(format!("{id}.log"))) {
            Ok(spool) => Arc::new(spool),
            Err(error) => {
                return ToolOutput::error(format!(
                    "cannot make the job's output spool in {}: {error}; nothing was started",
                    self.spool_dir.display()
                ));
            }
        };
        let spawned = match spawn(command, ctx) {
            Ok(spawned) => spawned,
            Err(message) => return ToolOutput::error(message),
        };
        let Spawned {
            mut child,
            reader,
            confinement,
            pgid,
        } = spawned;
        let identity = ProcessIdentity::of(pgid).unwrap_or(ProcessIdentity {
            pgid,
            start_ticks: 0,
            boot_id: String::new(),
        });
        let start = JobStart {
            job: id.clone(),
            call_id: call_id.to_string(),
            command: ctx.secrets.redact(command).into_owned(),
            identity,
            started_at_ms: now_ms(),
        };
        if let Err(error) = self.recorder.started(&start) {
            signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait().await;
            return ToolOutput::error(format!(
                "the job was stopped at once: keel could not record it ({error}), and a job \
                 keel cannot find again after a crash is not left running"
            ));
        }
        let (changed, _) = tokio::sync::watch::channel(0);
        let job = Arc::new(Job {
            start,
            began: Some(Instant::now()),
            spool: Some(spool.clone()),
            held: Arc::new(AtomicUsize::new(0)),
            people_tail: Mutex::new(std::collections::VecDeque::new()),
            read_to: Mutex::new(0),
            ending: Mutex::new(None),
            kill_cause: Mutex::new(None),
            told: AtomicBool::new(false),
            changed,
            confined: confinement.is_some(),
            confinement: Mutex::new(confinement),
            reaped: AtomicBool::new(false),
        });
        lock(&self.jobs).push(job.clone());
        let reading = read_output(
            reader,
            job.clone(),
            &ctx.secrets,
            format!("keel-{id}-output"),
        );
        let recorder = self.recorder.clone();
        let waiting = job.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            // What the job left in its group goes with it (confined: its PID namespace went
            // with its process already); then nothing signals the group again.
            signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
            waiting.reaped.store(true, Ordering::SeqCst);
            let _ = tokio::time::timeout(OUTPUT_GRACE, reading).await;
            let cause = lock(&waiting.kill_cause).unwrap_or(EndCause::Exited);
            let (exit_code, signal) = match status {
                Ok(status) => {
                    use std::os::unix::process::ExitStatusExt;
                    (status.code(), status.signal())
                }
                Err(_) => (None, None),
            };
            waiting.finish(
                JobEnding {
                    exit_code,
                    signal,
                    at_ms: now_ms(),
                    cause,
                },
                &*recorder,
            );
        });
        // No pid: it means nothing inside the job's own PID namespace, and the result's bytes
        // are the same every run.
        let confined = ctx
            .sandbox
            .as_ref()
            .filter(|sandbox| sandbox.mode != SandboxMode::Off)
            .map_or("unconfined".to_string(), |sandbox| {
                format!("confined {}", sandbox.mode.name())
            });
        ToolOutput::ok(
            format!(
                "{id} started in the background ({confined}). It runs until it ends, job_kill \
                 stops it, or the session ends. Read its output with job_output \
                 {{\"job\": \"{id}\"}}; keel tells you when it exits."
            ),
            format!("{id} started"),
        )
    }

    /// What the result of `call` (`None`: nobody's, applied now) showed: applied once the
    /// result is committed.
    fn saw(&self, call: Option<&str>, seen: Seen) {
        match call {
            Some(call) => lock(&self.unconfirmed)
                .entry(call.to_string())
                .or_default()
                .push(seen),
            None => self.apply(seen),
        }
    }

    fn apply(&self, seen: Seen) {
        match seen {
            Seen::ReadTo(job, next) => {
                let mut read_to = lock(&job.read_to);
                *read_to = (*read_to).max(next);
            }
            Seen::Told(job) => job.mark_told(&*self.recorder),
        }
    }

    /// The result of model call `call` is committed: what it showed counts as read and told.
    pub fn confirm(&self, call: &str) {
        let seen = lock(&self.unconfirmed).remove(call).unwrap_or_default();
        for seen in seen {
            self.apply(seen);
        }
    }

    /// `job_output` for model call `call` (`None`: read now, for no call): what the job
    /// printed since the last committed read, and how it is.
    pub async fn output(&self, id: &str, wait: Duration, call: Option<&str>) -> ToolOutput {
        let job = match self.find(id) {
            Ok(job) => job,
            Err(refusal) => return refusal,
        };
        let Some(spool) = job.spool.clone() else {
            self.saw(call, Seen::Told(job.clone()));
            let how = job
                .ending()
                .map_or("ended".to_string(), |ending| ending.describe());
            return ToolOutput::ok(
                format!(
                    "{} {how}. It was started by an earlier keel process; its output is not \
                     kept across restarts.",
                    job.named()
                ),
                format!("{id} {how}"),
            );
        };
        // Wait for something new: output, or the end.
        let wait = wait.min(MAX_WAIT);
        let mut changes = job.changed.subscribe();
        let nothing_new = || job.ending().is_none() && spool.written() <= *lock(&job.read_to);
        if !wait.is_zero() && nothing_new() {
            let _ = tokio::time::timeout(wait, async {
                while nothing_new() {
                    if changes.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
        }
        let ending = job.ending();
        let read = spool.read_from(*lock(&job.read_to), READ_CAP);
        self.saw(call, Seen::ReadTo(job.clone(), read.next));
        if ending.is_some() {
            self.saw(call, Seen::Told(job.clone()));
        }
        let status = match (ending, job.began) {
            (Some(ending), _) => format!("{id} {}", ending.describe()),
            (None, Some(began)) => {
                format!("{id} is running ({} s)", began.elapsed().as_secs())
            }
            (None, None) => format!("{id} is running"),
        };
        let mut content = String::new();
        if read.missed > 0 {
            content.push_str(&format!(
                "[… {} earlier bytes not kept or not shown …]\n",
                read.missed
            ));
        }
        if read.text.is_empty() {
            content.push_str("(no new output)\n");
        } else {
            content.push_str(&read.text);
            if !read.text.ends_with('\n') {
                content.push('\n');
            }
        }
        let held = job.held.load(Ordering::SeqCst);
        if held > 0 && ending.is_none() {
            content.push_str(&format!(
                "[the last {held} bytes are held back until the job prints more or ends: keel \
                 checks them for secrets first]\n"
            ));
        }
        content.push_str(&format!("[{status}]"));
        ToolOutput::ok(content, status)
    }

    /// `job_kill`: stop the job (SIGTERM to its group, SIGKILL if it is still there after a
    /// grace period).
    pub async fn kill(&self, id: &str, call: Option<&str>) -> ToolOutput {
        self.stop(id, EndCause::Killed, call).await
    }

    /// The person stops a job: as `job_kill`, but the model is told with the next note.
    pub async fn kill_for_person(&self, id: &str) -> ToolOutput {
        self.stop(id, EndCause::StoppedByUser, None).await
    }

    async fn stop(&self, id: &str, cause: EndCause, call: Option<&str>) -> ToolOutput {
        let by_model = cause == EndCause::Killed;
        let job = match self.find(id) {
            Ok(job) => job,
            Err(refusal) => return refusal,
        };
        if let Some(ending) = job.ending() {
            if by_model {
                self.saw(call, Seen::Told(job.clone()));
            }
            return ToolOutput::ok(
                format!(
                    "{} had already ended: it {}.",
                    job.named(),
                    ending.describe()
                ),
                format!("{id} had already ended"),
            );
        }
        *lock(&job.kill_cause) = Some(cause);
        let mut changes = job.changed.subscribe();
        let ended = async {
            while job.ending().is_none() {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        };
        tokio::pin!(ended);
        job.terminate();
        if tokio::time::timeout(TERM_GRACE, &mut ended).await.is_err() {
            job.signal(nix::sys::signal::Signal::SIGKILL);
            if tokio::time::timeout(TERM_GRACE, &mut ended).await.is_err() {
                // The process is gone from keel's view only when it is reaped; say so.
                return ToolOutput::error(format!(
                    "{} was sent SIGTERM, then SIGKILL, and has not ended yet",
                    job.named()
                ));
            }
        }
        if by_model {
            self.saw(call, Seen::Told(job.clone()));
        }
        let how = job
            .ending()
            .map_or("ended".to_string(), |ending| ending.describe());
        ToolOutput::ok(format!("{} {how}.", job.named()), format!("{id} killed"))
    }
}

impl Drop for Jobs {
    /// An agent's jobs end with it.
    fn drop(&mut self) {
        self.end_all(EndCause::SessionEnded);
        // Their output is for this session's agent only: gone with it.
        let _ = std::fs::remove_dir_all(&self.spool_dir);
    }
}

impl OutputSink for Job {
    fn printed(&self, for_model: &[u8], for_people: &[u8], held: usize) {
        self.keep_for_people(for_people);
        if let Some(spool) = &self.spool {
            spool.append(for_model);
        }
        self.held.store(held, Ordering::SeqCst);
        self.changed.send_modify(|count| *count += 1);
    }
}
