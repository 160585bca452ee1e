//! The process behind `bash` and a background job: `bash -c COMMAND` in the workspace, its own
//! process group, stdout and stderr on one pipe, and spawned confined when the session has a
//! sandbox.
//!
//! Invariants:
//! - The command's environment has none of keel's secrets (`ToolServices::secrets`).
//! - A confined process is spawned from the sandbox's lasting thread (so it dies with keel),
//!   and its confinement is handed back to be kept until it has ended; when the sandbox cannot
//!   be set up nothing runs, and the error names the step that failed.

use crate::{CommandSandbox, ToolServices};
use keel_sandbox::SandboxMode;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

/// What the process is for: a command the call waits on, or a job with a kill domain of its own.
#[derive(Clone, Copy)]
pub(crate) enum Purpose {
    Command,
    Job,
}

impl Purpose {
    fn nothing_ran(self) -> &'static str {
        match self {
            Purpose::Command => "the command did not run",
            Purpose::Job => "the job did not start",
        }
    }
}

/// `bash -c command` in the workspace, in a process group of its own, with stdin closed, its
/// output (both streams, in order) on the returned pipe, and keel's secrets removed.
pub(crate) fn bash_command(
    command: &str,
    ctx: &ToolServices,
) -> Result<(std::process::Command, std::io::PipeReader), String> {
    let (reader, writer) =
        std::io::pipe().map_err(|error| format!("cannot create a pipe: {error}"))?;
    let writer_for_stderr = writer
        .try_clone()
        .map_err(|error| format!("cannot create a pipe: {error}"))?;
    let mut process = std::process::Command::new("bash");
    process
        .arg("-c")
        .arg(command)
        .current_dir(ctx.guard.workspace())
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer_for_stderr)
        .process_group(0);
    for name in ctx.secrets.env_names() {
        process.env_remove(name);
    }
    Ok((process, reader))
}

/// The session's sandbox when commands run confined (any mode but `off`).
pub(crate) fn confining(sandbox: Option<&CommandSandbox>) -> Option<&CommandSandbox> {
    sandbox.filter(|sandbox| sandbox.mode != SandboxMode::Off)
}

/// Start `process`, confined for `purpose` when the session has a sandbox, with its
/// confinement; the error says what failed and that nothing ran.
pub(crate) fn spawn(
    mut process: std::process::Command,
    sandbox: Option<&CommandSandbox>,
    purpose: Purpose,
) -> Result<(tokio::process::Child, Option<keel_sandbox::Confinement>), String> {
    let confinement = confine(&mut process, sandbox, purpose)?;
    start(process, confinement, purpose)
}

/// Arrange for `process` to run confined for `purpose` (nothing without a sandbox); change
/// nothing of it after this but what `start` does.
pub(crate) fn confine(
    process: &mut std::process::Command,
    sandbox: Option<&CommandSandbox>,
    purpose: Purpose,
) -> Result<Option<keel_sandbox::Confinement>, String> {
    let Some(sandbox) = confining(sandbox) else {
        keel_sandbox::keep_file_limit(process);
        return Ok(None);
    };
    match purpose {
        Purpose::Command => sandbox.sandbox.confine(process, sandbox.mode),
        Purpose::Job => sandbox.sandbox.confine_job(process, sandbox.mode),
    }
    .map(Some)
    .map_err(|error| format!("{error}; {}", purpose.nothing_ran()))
}

/// Start `process` as `confine` arranged it: a confined one from the sandbox's lasting thread.
pub(crate) fn start(
    process: std::process::Command,
    confinement: Option<keel_sandbox::Confinement>,
    purpose: Purpose,
) -> Result<(tokio::process::Child, Option<keel_sandbox::Confinement>), String> {
    let Some(confinement) = confinement else {
        return tokio::process::Command::from(process)
            .spawn()
            .map(|child| (child, None))
            .map_err(|error| format!("cannot start bash: {error}; {}", purpose.nothing_ran()));
    };
    let runtime = tokio::runtime::Handle::current();
    let spawned = keel_sandbox::on_lasting_thread(move || {
        let _entered = runtime.enter();
        tokio::process::Command::from(process).spawn()
    })
    .and_then(|spawned| spawned);
    match spawned {
        Ok(child) => Ok((child, Some(confinement))),
        Err(error) => Err(format!(
            "{}; {}",
            confinement.explain(error),
            purpose.nothing_ran()
        )),
    }
}

/// Kills the process group when dropped (on timeout and on cancellation alike).
pub(crate) struct GroupKiller(pub(crate) Option<i32>);

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Undoes the git redirect and startup files a confined command made (of those absent just
/// before it) when dropped: also when the call is cancelled or times out, or keel unwinds (the
/// normal path takes it, to report them).
pub(crate) struct PlantedUndo(
    pub(crate) Option<(std::sync::Arc<keel_sandbox::Sandbox>, keel_sandbox::Planted)>,
);

impl PlantedUndo {
    /// What was undone, said (nothing more to undo when dropped).
    pub(crate) fn report(&mut self) -> Vec<keel_sandbox::Undone> {
        self.0
            .take()
            .map(|(sandbox, absent)| sandbox.undo_planted(&absent))
            .unwrap_or_default()
    }
}

impl Drop for PlantedUndo {
    fn drop(&mut self) {
        self.report();
    }
}
