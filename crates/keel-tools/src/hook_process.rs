//! A hook's process (docs/hooks.md#where-hooks-run): `bash -c COMMAND` in the workspace, the
//! event's JSON on its stdin, its stdout and stderr read apart, under the session's sandbox
//! unless the user's own config says otherwise.
//!
//! Invariants:
//! - The environment is the one `bash` gets (none of keel's secrets) plus what the caller adds
//!   (`CLAUDE_PROJECT_DIR`); confined, it runs as a command of the session (its mode, its
//!   namespaces, what it planted for git undone).
//! - Its process group is killed when it times out, when the caller drops the run, and once it
//!   ended (what it left behind goes with it); the run returns at most `OUTPUT_GRACE` after.
//! - At most `HOOK_OUTPUT_CAP` bytes of each stream are kept (the rest is read and dropped, so
//!   a noisy hook never blocks), both redacted of keel's secrets before they are returned.

use crate::ToolServices;
use crate::bash_process::{self, GroupKiller, PlantedUndo, Purpose};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most bytes of a hook's stdout, and of its stderr, kept.
pub const HOOK_OUTPUT_CAP: usize = 64 * 1024;

/// How long the output may stay open once the hook ended.
const OUTPUT_GRACE: Duration = Duration::from_secs(1);

/// How a hook ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookEnd {
    Exited(i32),
    Signalled(i32),
    TimedOut,
    /// It could not start (the message says why).
    NotStarted(String),
}

/// What a hook did.
#[derive(Clone, Debug)]
pub struct HookRun {
    pub end: HookEnd,
    /// Redacted, at most `HOOK_OUTPUT_CAP` bytes (lossy UTF-8).
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
}

/// What a hook reads on its stdin, given the directory where it sees the session's temp dir
/// (`None`: where keel sees it).
pub type HookInput = Box<dyn FnOnce(Option<&std::path::Path>) -> Vec<u8> + Send>;

/// What a hook is run with.
pub struct HookCommand<'a> {
    pub command: &'a str,
    pub stdin: HookInput,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    /// Run outside the session's sandbox (the user's own `sandbox = "off"`).
    pub unconfined: bool,
}

/// Run a hook in `ctx`'s workspace under `ctx`'s sandbox (as its mode is now).
pub async fn run_hook(hook: HookCommand<'_>, ctx: &ToolServices) -> HookRun {
    let started = Instant::now();
    let not_started = |message: String| HookRun {
        end: HookEnd::NotStarted(message),
        stdout: String::new(),
        stderr: String::new(),
        duration: started.elapsed(),
    };
    let mut process = std::process::Command::new("bash");
    process
        .arg("-c")
        .arg(hook.command)
        .current_dir(ctx.guard.workspace())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut process, 0);
    for name in ctx.secrets.env_names() {
        process.env_remove(name);
    }
    for (name, value) in &hook.env {
        process.env(name, value);
    }
    let sandbox = if hook.unconfined {
        None
    } else {
        bash_process::confining(ctx.sandbox.as_ref())
    };
    let absent_before = sandbox.map(|sandbox| sandbox.sandbox.planted_absent_now());
    let confinement = match bash_process::confine(&mut process, sandbox, Purpose::Command) {
        Ok(confinement) => confinement,
        Err(message) => return not_started(message),
    };
    // Confined, the session's temp dir may be seen elsewhere (on /tmp): where TMPDIR says.
    let temp_inside = confinement.as_ref().and_then(|_| {
        process
            .get_envs()
            .find(|(name, _)| *name == "TMPDIR")
            .and_then(|(_, value)| value.map(std::path::PathBuf::from))
    });
    let payload = (hook.stdin)(temp_inside.as_deref());
    let (mut child, confinement) = match bash_process::start(process, confinement, Purpose::Command)
    {
        Ok(spawned) => spawned,
        Err(message) => return not_started(message),
    };
    let mut undo = PlantedUndo(
        sandbox
            .map(|sandbox| sandbox.sandbox.clone())
            .zip(absent_before),
    );
    let killer = GroupKiller(child.id().and_then(|id| i32::try_from(id).ok()));
    let stdin = child.stdin.take();
    let feeding = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input closes the pipe: that is its right.
            let _ = stdin.write_all(&payload).await;
            let _ = stdin.shutdown().await;
        }
    });
    let stdout = tokio::spawn(read_capped(child.stdout.take()));
    let stderr = tokio::spawn(read_capped(child.stderr.take()));
    let status = tokio::time::timeout(hook.timeout, child.wait()).await;
    drop(killer);
    feeding.abort();
    if let Some(confinement) = confinement {
        let ended_on_its_own = matches!(status, Ok(Ok(_)));
        let _ = tokio::task::spawn_blocking(move || {
            if ended_on_its_own {
                confinement.ended();
            }
        })
        .await;
    }
    undo.report();
    let collect = |handle: tokio::task::JoinHandle<Vec<u8>>| async move {
        match tokio::time::timeout(OUTPUT_GRACE, handle).await {
            Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            _ => String::new(),
        }
    };
    let stdout = ctx.secrets.redact(&collect(stdout).await).into_owned();
    let stderr = ctx.secrets.redact(&collect(stderr).await).into_owned();
    let end = match status {
        Err(_) => HookEnd::TimedOut,
        Ok(Err(error)) => HookEnd::NotStarted(format!("cannot wait for the hook: {error}")),
        Ok(Ok(status)) => match status.code() {
            Some(code) => HookEnd::Exited(code),
            None => {
                use std::os::unix::process::ExitStatusExt;
                HookEnd::Signalled(status.signal().unwrap_or(0))
            }
        },
    };
    HookRun {
        end,
        stdout,
        stderr,
        duration: started.elapsed(),
    }
}

/// Everything `stream` gives, the first `HOOK_OUTPUT_CAP` bytes kept.
async fn read_capped(stream: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
    let Some(mut stream) = stream else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = HOOK_OUTPUT_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
        }
    }
}
