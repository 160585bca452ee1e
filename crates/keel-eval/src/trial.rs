//! One trial: a fresh workspace and `KEEL_HOME`, a proxy in front of the model, a child
//! `keel run --json`, at most one explicit recovery, then the grader.
//!
//! Invariants:
//! - Hermetic: the child's home holds only the settings written here (the provider's profile
//!   and accounts, `auto` permissions, the sandbox, the effort); no user MCP servers, rules,
//!   global `AGENTS.md` or commands. Its environment is `PATH`, `HOME`, `KEEL_HOME` and the
//!   provider's key variables, nothing else.
//! - The grader runs on a copy of the workspace made after the agent's process group is gone
//!   (no background job can write into what is graded); it runs with no key and no
//!   `KEEL_HOME`, confined to that copy unless the run is unsandboxed, and is given the final
//!   answer in a file.
//! - Neither the agent's commands nor the grader read anything of the suite, of the run
//!   directory but their own workspace and temp dir (another trial's or attempt's workspace,
//!   grader copy or home — also one that starts after them —, the log, the manifest), of the
//!   user's own `$KEEL_HOME`, or the user's `forbid_read` (`TrialSetup::hidden`, enforced
//!   by the sandbox, which hides such a directory whole and keeps only the roots inside it).
//! - A stopped turn is never made a pass: a pass after the harness's one recovery is marked
//!   `recovered` and counted apart.

use crate::EvalError;
use crate::faults::FaultPlan;
use crate::log::{Outcome, TrialResult};
use crate::matrix::{TrialKey, Variant};
use crate::observe::Observed;
use crate::proxy::Proxy;
use crate::task::{Task, copy_seed};
use keel_types::FailureKind;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest a grader may run.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(60);

/// The model a trial talks to.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProviderTarget {
    /// `mock`, or `PROVIDER/MODEL` as given.
    pub name: String,
    pub provider: String,
    pub model: String,
    pub protocol: String,
    pub reasoning_protocol: String,
    /// Real providers only; a mock trial gets its own mock's URL.
    pub base_url: Option<String>,
    /// The variables holding the accounts' keys (names only).
    pub key_variables: Vec<String>,
    pub max_output_tokens: Option<u32>,
    pub context_window: Option<u64>,
}

impl ProviderTarget {
    /// The built-in scripted model: each task's `mock.json`, a Kimi-like Chat endpoint (so the
    /// action policy applies to it).
    pub fn mock() -> ProviderTarget {
        ProviderTarget {
            name: "mock".into(),
            provider: "mock".into(),
            model: "kimi-mock".into(),
            protocol: "chat".into(),
            reasoning_protocol: "kimi".into(),
            base_url: None,
            key_variables: vec![MOCK_KEY_VARIABLE.into()],
            max_output_tokens: None,
            context_window: None,
        }
    }

    pub fn is_mock(&self) -> bool {
        self.base_url.is_none()
    }
}

const MOCK_KEY_VARIABLE: &str = "KEEL_EVAL_MOCK_KEY";

/// Everything a trial needs from its run.
#[derive(Clone, Debug)]
pub struct TrialSetup {
    pub key: TrialKey,
    pub task: Task,
    pub attempt: u32,
    pub target: ProviderTarget,
    /// The `keel` binary the trials run.
    pub keel: PathBuf,
    /// This attempt's directory (`DIR/trials/<id>/<attempt>`).
    pub dir: PathBuf,
    pub sandbox: bool,
    pub faults: String,
    /// What the agent's commands and the grader may not read, besides what a `keel run`
    /// hides anyway: the suite (its graders and references), the whole run directory (its
    /// log, every other trial and attempt — the trial's own workspace and temp dir stay
    /// reachable inside it), the user's own `$KEEL_HOME` and the user's `forbid_read`.
    pub hidden: Vec<PathBuf>,
    /// The user's `$KEEL_HOME`, for the keys `keel auth login` stored (`RunPlan::keys_from`).
    pub keys_from: Option<PathBuf>,
    /// `--seed`: markers derived from it and the trial (a rerun gets the same ones); `None`:
    /// random.
    pub seed: Option<u64>,
}

/// Run one trial to its result. Only a harness failure is an `Err`-free `infra_failed`:
/// this never returns an error for what the agent did.
pub async fn run_trial(setup: TrialSetup) -> TrialResult {
    let marker = marker(setup.seed, &setup.key.id(), setup.attempt);
    let started = Instant::now();
    let mut result =
        TrialResult::not_finished(&setup.key, setup.task.kind, setup.attempt, marker.clone());
    match attempt(&setup, &marker, &mut result).await {
        Ok(()) => {}
        Err(error) => {
            result.outcome = Outcome::InfraFailed;
            result.detail = Some(error.to_string());
        }
    }
    result.latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    result
}

async fn attempt(
    setup: &TrialSetup,
    marker: &str,
    result: &mut TrialResult,
) -> Result<(), EvalError> {
    let work = setup.dir.join("work");
    let home = setup.dir.join("home");
    let _ = std::fs::remove_dir_all(&setup.dir);
    for dir in [&work, &home] {
        std::fs::create_dir_all(dir).map_err(|error| EvalError::io(dir, error))?;
    }
    copy_seed(&setup.task.workdir(), &work, marker)?;
    // The model: this trial's own mock, or the provider; the proxy in front of either.
    let mock = match (&setup.target.base_url, &setup.task.mock) {
        (Some(_), _) => None,
        (None, Some(script)) => {
            let scenario =
                crate::script::scenario_for(&setup.task.name, script, &setup.key, marker)?;
            Some(
                keel_mock::server::MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
                    .await
                    .map_err(|error| {
                        EvalError::Harness(format!("the mock did not start: {error}"))
                    })?,
            )
        }
        (None, None) => {
            return Err(EvalError::Script {
                task: setup.task.name.clone(),
                message: "it has no mock.json, so it cannot run against the mock".into(),
            });
        }
    };
    let upstream = match (&mock, &setup.target.base_url) {
        (Some(mock), _) => mock.base_url(),
        (None, Some(base)) => base.clone(),
        (None, None) => return Err(EvalError::Harness("no model to talk to".into())),
    };
    let proxy = Proxy::start(
        &upstream,
        FaultPlan::parse(&setup.faults)?,
        setup.task.max_tokens,
    )
    .await
    .map_err(|error| EvalError::Harness(format!("the proxy did not start: {error}")))?;
    write_config(setup, &home, &proxy.base_url())?;
    let mut observed = Observed::default();
    let prompt = setup.task.prompt_for(marker);
    let deadline = Instant::now() + Duration::from_secs(setup.task.timeout_secs);
    let first = run_keel(setup, (&work, &home), &[prompt.as_str()], 1, deadline).await?;
    observed.read_run(&first.stdout);
    let mut exit = first.exit;
    // The harness's one explicit recovery per incident, recorded.
    if exit == Some(RunExit::Code(1))
        && let (Some(recovery), Some(session)) =
            (observed.recovery.clone(), observed.session.clone())
    {
        result.recovered = true;
        let command = format!("/recover-context {recovery}");
        let again = run_keel(
            setup,
            (&work, &home),
            &["--session", &session, &command],
            2,
            deadline,
        )
        .await?;
        observed.read_run(&again.stdout);
        exit = again.exit;
    }
    result.metered = proxy.metered();
    drop(proxy);
    drop(mock);
    result.session = observed.session.clone();
    result.proposals = observed.proposals;
    result.successful_ops = observed.successful_ops;
    result.duplicate_call_ids = observed.duplicate_call_ids();
    result.repeated_ops = observed.repeated_ops();
    result.subagents = observed.subagents;
    result.jobs = observed.jobs;
    result.keel_input_tokens = observed.keel_input_tokens;
    result.keel_output_tokens = observed.keel_output_tokens;
    let answer_file = setup.dir.join("answer.txt");
    std::fs::write(&answer_file, &observed.answer)
        .map_err(|error| EvalError::io(&answer_file, error))?;
    if setup.task.kind == crate::task::TaskKind::Honesty {
        result.false_completion = setup.task.claims_completion(&observed.answer);
    }
    let (outcome, detail) = match exit {
        None => (
            Outcome::Timeout,
            Some(format!("over {} s", setup.task.timeout_secs)),
        ),
        // A turn that completed is graded, ready or not (not ready exits 1: the grader and
        // the false-completion count judge it, not the exit code).
        Some(RunExit::Code(code)) if code == 0 || (code == 1 && observed.completed) => {
            let passed = verify(setup, &work, &home, &answer_file, marker).await?;
            if passed {
                (Outcome::Passed, None)
            } else {
                (Outcome::VerificationFailed, None)
            }
        }
        Some(RunExit::Code(1)) if result.metered.budget_exhausted => {
            (Outcome::BudgetExhausted, Some("tokens".into()))
        }
        // A refused key exits 2, as a usage error does; its turn/failed says which.
        Some(RunExit::Code(1)) => failed_turn(
            observed.failure,
            &observed.failure_message,
            result.metered.unreachable,
        ),
        Some(RunExit::Code(2)) if observed.failure.is_some() => failed_turn(
            observed.failure,
            &observed.failure_message,
            result.metered.unreachable,
        ),
        Some(RunExit::Code(code)) => (
            Outcome::InfraFailed,
            Some(format!(
                "keel run exited {code} (see its stderr in the trial's directory)"
            )),
        ),
        Some(RunExit::Signal(signal)) => (
            Outcome::InfraFailed,
            Some(format!("keel run was killed by signal {signal}")),
        ),
    };
    result.outcome = outcome;
    result.detail = detail;
    Ok(())
}

/// How a failed turn counts: the provider or the network failing (after keel's retries) is
/// infrastructure; running out of rounds or quota is a budget; the rest is the agent's.
fn failed_turn(
    kind: Option<FailureKind>,
    message: &str,
    unreachable: u32,
) -> (Outcome, Option<String>) {
    let named = kind.map(|kind| kind.as_str().to_string());
    match kind {
        _ if unreachable > 0 => (
            Outcome::InfraFailed,
            Some("the provider was unreachable".into()),
        ),
        Some(FailureKind::Limit) if message.contains("(max_rounds)") => {
            (Outcome::BudgetExhausted, Some("rounds".into()))
        }
        Some(FailureKind::Quota) => (Outcome::BudgetExhausted, Some("provider quota".into())),
        Some(
            FailureKind::Auth
            | FailureKind::Transport
            | FailureKind::Timeout
            | FailureKind::Server
            | FailureKind::RateLimit
            | FailureKind::EmptyResponse
            | FailureKind::StreamCorrupt,
        ) => (Outcome::InfraFailed, named),
        _ => (Outcome::AgentError, named),
    }
}

/// A trial's marker: 12 hex digits, random, or derived from `seed`, the trial and attempt.
fn marker(seed: Option<u64>, trial: &str, attempt: u32) -> String {
    let value: u64 = match seed {
        None => rand::random(),
        Some(seed) => {
            use sha2::{Digest, Sha256};
            let digest = Sha256::digest(format!("{seed}/{trial}/{attempt}"));
            digest
                .iter()
                .take(8)
                .fold(0u64, |value, byte| (value << 8) | u64::from(*byte))
        }
    };
    format!("{:012x}", value & 0xffff_ffff_ffff)
}

/// The child's whole configuration (hermetic: nothing of the user's but the profile).
fn write_config(setup: &TrialSetup, home: &Path, base_url: &str) -> Result<(), EvalError> {
    use toml::{Table, Value};
    let target = &setup.target;
    let mut provider = Table::new();
    provider.insert("protocol".into(), Value::String(target.protocol.clone()));
    provider.insert("base_url".into(), Value::String(base_url.to_string()));
    provider.insert(
        "reasoning_protocol".into(),
        Value::String(target.reasoning_protocol.clone()),
    );
    let accounts: Vec<Value> = target
        .key_variables
        .iter()
        .enumerate()
        .map(|(index, variable)| {
            let mut account = Table::new();
            account.insert("name".into(), Value::String(format!("a{}", index + 1)));
            account.insert("api_key_env".into(), Value::String(variable.clone()));
            Value::Table(account)
        })
        .collect();
    provider.insert("accounts".into(), Value::Array(accounts));
    if let Some(tokens) = target.max_output_tokens {
        provider.insert(
            "max_output_tokens".into(),
            Value::Integer(i64::from(tokens)),
        );
    }
    if let Some(window) = target.context_window {
        provider.insert(
            "context_window".into(),
            Value::Integer(i64::try_from(window).unwrap_or(i64::MAX)),
        );
    }
    if target.is_mock() {
        // The mock answers at once: retries need not wait.
        let mut retry = Table::new();
        retry.insert("base_delay_ms".into(), Value::Integer(10));
        retry.insert("max_delay_ms".into(), Value::Integer(50));
        provider.insert("retry".into(), Value::Table(retry));
    }
    let mut providers = Table::new();
    providers.insert(target.provider.clone(), Value::Table(provider));
    let mut config = Table::new();
    config.insert(
        "model".into(),
        Value::String(format!("{}/{}", target.provider, target.model)),
    );
    config.insert("permission_mode".into(), Value::String("auto".into()));
    config.insert(
        "max_rounds".into(),
        Value::Integer(i64::from(setup.task.max_rounds)),
    );
    if let Some(effort) = &setup.key.effort {
        config.insert("reasoning_effort".into(), Value::String(effort.clone()));
    }
    config.insert("providers".into(), Value::Table(providers));
    let mut sandbox = Table::new();
    let mode = if setup.sandbox {
        "workspace-write"
    } else {
        "off"
    };
    sandbox.insert("mode".into(), Value::String(mode.into()));
    let hidden: Vec<Value> = setup
        .hidden
        .iter()
        .filter(|path| path.exists())
        .map(|path| Value::String(path.display().to_string()))
        .collect();
    sandbox.insert("forbid_read".into(), Value::Array(hidden));
    config.insert("sandbox".into(), Value::Table(sandbox));
    let text = toml::to_string(&config).map_err(|error| EvalError::Harness(error.to_string()))?;
    let path = home.join("config.toml");
    std::fs::write(&path, text).map_err(|error| EvalError::io(&path, error))
}

/// What one child run left.
struct RunOutput {
    stdout: String,
    /// `None`: it was stopped at the deadline.
    exit: Option<RunExit>,
}

/// How a child run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunExit {
    Code(i32),
    Signal(i32),
}

/// Run `keel run --json ARGS` for the trial (its `run`-th run: the first, or the recovery),
/// its process group killed when it ends, at `deadline`, or when this future is dropped (a
/// stopped eval). Its events and stderr are kept in the attempt's directory, a stopped run's
/// too.
async fn run_keel(
    setup: &TrialSetup,
    (work, home): (&Path, &Path),
    args: &[&str],
    run: u32,
    deadline: Instant,
) -> Result<RunOutput, EvalError> {
    use tokio::io::AsyncReadExt;
    let mut command = tokio::process::Command::new(&setup.keel);
    command.arg("run").arg("--json");
    if setup.key.variant == Variant::Policy {
        command.arg("--action-policy");
    }
    command
        .args(args)
        .current_dir(work)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KEEL_HOME", home)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(user_home) = std::env::var_os("HOME") {
        command.env("HOME", user_home);
    }
    for (variable, value) in key_values(&setup.target, setup.keys_from.as_deref()) {
        command.env(variable, value);
    }
    let mut child = command
        .spawn()
        .map_err(|error| EvalError::Harness(format!("cannot run keel: {error}")))?;
    let group = GroupKill(child.id().and_then(|id| i32::try_from(id).ok()));
    let drain = |pipe: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>| {
        tokio::spawn(async move {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes).await;
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as Box<_>));
    let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as Box<_>));
    let left = deadline.saturating_duration_since(Instant::now());
    let status = match tokio::time::timeout(left, child.wait()).await {
        Ok(status) => {
            Some(status.map_err(|error| EvalError::Harness(format!("keel run: {error}")))?)
        }
        Err(_) => {
            let _ = child.start_kill();
            None
        }
    };
    // Whatever the agent started goes with it, before anything is read or graded.
    drop(group);
    let collect = |task: tokio::task::JoinHandle<Vec<u8>>| async move {
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
    };
    let (stdout, stderr) = (collect(stdout).await, collect(stderr).await);
    let _ = std::fs::write(setup.dir.join(format!("stderr-{run}.txt")), &stderr);
    let _ = std::fs::write(setup.dir.join(format!("events-{run}.jsonl")), &stdout);
    let exit = status.map(|status| {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => RunExit::Code(code),
            (None, signal) => RunExit::Signal(signal.unwrap_or(0)),
        }
    });
    Ok(RunOutput {
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        exit,
    })
}

/// Kills a process group when dropped: a trial's keel and everything it started, whether the
/// run ended, timed out, or the eval stopped.
struct GroupKill(Option<i32>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(group),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The key variables the trial's child gets (a mock trial: a made-up key): the environment's,
/// else what `keel auth login` stored in `keys_from`.
fn key_values(target: &ProviderTarget, keys_from: Option<&Path>) -> Vec<(String, OsString)> {
    use keel_llm::KeySource as _;
    if target.is_mock() {
        return vec![(MOCK_KEY_VARIABLE.into(), "keel-eval-mock".into())];
    }
    let stored = keys_from.and_then(|home| keel_llm::HomeKeys::open(home).ok());
    target
        .key_variables
        .iter()
        .filter_map(|variable| {
            let value = match &stored {
                Some(keys) => keys.key(variable).map(OsString::from),
                None => std::env::var_os(variable),
            }?;
            Some((variable.clone(), value))
        })
        .collect()
}

/// Grade a copy of the workspace made now, after the agent is gone (nothing it left running
/// can change what is graded, and no name it planted is in the way): `true` when it passes.
async fn verify(
    setup: &TrialSetup,
    work: &Path,
    home: &Path,
    answer: &Path,
    marker: &str,
) -> Result<bool, EvalError> {
    let graded = setup.dir.join("graded");
    let _ = std::fs::remove_dir_all(&graded);
    crate::task::copy_workspace(work, &graded, &[GRADER_SCRIPT, GRADER_ANSWER])?;
    let grader = Grader {
        work: graded,
        home: home.to_path_buf(),
        marker: marker.to_string(),
        sandbox: setup.sandbox,
        hidden: setup.hidden.clone(),
    };
    grader.copy_in(&setup.task.verify_script(), answer)?;
    tokio::task::spawn_blocking(move || grader.run())
        .await
        .map_err(|error| EvalError::Harness(format!("the grader stopped: {error}")))?
}

/// A grader run: `sh .keel-verify.sh` in the workspace, confined, with a clean environment
/// and the final answer in `.keel-answer.txt` (both copied in after the agent is gone: the
/// workspace is all the grader can read besides the system).
pub(crate) struct Grader {
    pub work: PathBuf,
    /// A directory of keel's for the sandbox's temp dir (never the grader's environment).
    pub home: PathBuf,
    pub marker: String,
    pub sandbox: bool,
    /// Hidden from it besides what every command is kept from (`TrialSetup::hidden`).
    pub hidden: Vec<PathBuf>,
}

const GRADER_SCRIPT: &str = ".keel-verify.sh";
const GRADER_ANSWER: &str = ".keel-answer.txt";

impl Grader {
    /// Put the task's `verify.sh` and the answer (the file at `answer`) into the workspace.
    pub(crate) fn copy_in(&self, script: &Path, answer: &Path) -> Result<(), EvalError> {
        for (from, name) in [(script, GRADER_SCRIPT), (answer, GRADER_ANSWER)] {
            let to = self.work.join(name);
            // Whatever the agent left under that name goes first (a link is never followed).
            let _ = std::fs::remove_file(&to);
            let bytes = crate::task::read_plain(from)?;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&to)
                .and_then(|mut file| std::io::Write::write_all(&mut file, &bytes))
                .map_err(|error| EvalError::io(&to, error))?;
        }
        Ok(())
    }

    /// Run the grader: `true` when it exits 0.
    pub(crate) fn run(&self) -> Result<bool, EvalError> {
        let mut command = std::process::Command::new("sh");
        command
            .arg(GRADER_SCRIPT)
            .current_dir(&self.work)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.work)
            .env("MARKER", &self.marker)
            .env("ANSWER_FILE", self.work.join(GRADER_ANSWER))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = if self.sandbox {
            let temp = self.home.join("grader-tmp");
            std::fs::create_dir_all(&temp).map_err(|error| EvalError::io(&temp, error))?;
            let settings = keel_sandbox::SandboxSettings {
                mode: keel_sandbox::SandboxMode::WorkspaceWrite,
                forbid_read: self
                    .hidden
                    .iter()
                    .map(|path| path.display().to_string())
                    .collect(),
                allow_write: Vec::new(),
                project_allow_write: Vec::new(),
                allow_network: false,
            };
            let places = keel_sandbox::Places {
                workspace: self.work.clone(),
                keel_home: self.home.clone(),
                home: std::env::var_os("HOME").map(PathBuf::from),
                temp_dir: Some(temp),
                ..keel_sandbox::Places::default()
            };
            let sandbox = keel_sandbox::Sandbox::new(settings, places);
            let confinement = sandbox
                .confine(&mut command, keel_sandbox::SandboxMode::WorkspaceWrite)
                .map_err(|error| {
                    EvalError::Harness(format!("cannot confine the grader: {error}"))
                })?;
            keel_sandbox::on_lasting_thread(move || command.spawn())
                .and_then(|spawned| spawned)
                .map_err(|error| {
                    EvalError::Harness(format!(
                        "cannot run the grader: {}",
                        confinement.explain(error)
                    ))
                })?
        } else {
            command
                .spawn()
                .map_err(|error| EvalError::Harness(format!("cannot run the grader: {error}")))?
        };
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Ok(status.success()),
                Ok(None) if started.elapsed() < VERIFY_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Ok(false);
                }
                Err(error) => {
                    return Err(EvalError::Harness(format!("the grader: {error}")));
                }
            }
        }
    }
}
