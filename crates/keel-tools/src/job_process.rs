//! A background job's process: started (`bash -c`, a process group of its own, confined as a
//! job when the session has a sandbox), its output read into its spool, and signalled.
//!
//! Invariants:
//! - The job's output is read on a thread of its own, never the runtime's blocking pool (the
//!   output may stay open for as long as keel runs), through two redactors: the fixed-hold one
//!   for the spool the model reads, the at-once one for what people see.
//! - A signal for a confined job's command goes to the group of the namespace's PID 1 (found by
//!   its parent and its session), never guessed: without it, the job's own group is signalled.

use crate::ToolServices;
use keel_sandbox::SandboxMode;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::Arc;

/// The namespace init a confined job's process (`stub`) started: its child that leads a
/// session of its own (it called `setsid`).
pub(crate) fn namespace_init(stub: i32) -> Option<i32> {
    let entries = std::fs::read_dir("/proc").ok()?;
    entries.flatten().find_map(|entry| {
        let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command name (which may hold spaces): state, ppid, pgrp, session.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        let parent: i32 = fields.get(1)?.parse().ok()?;
        let session: i32 = fields.get(3)?.parse().ok()?;
        (parent == stub && session == pid).then_some(pid)
    })
}

pub(crate) fn signal_group(pgid: i32, signal: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), signal);
}

pub(crate) struct Spawned {
    pub child: tokio::process::Child,
    pub reader: std::io::PipeReader,
    pub confinement: Option<keel_sandbox::Confinement>,
    pub pgid: i32,
}

/// Start `bash -c command` in a process group of its own, its output to a pipe, confined as a
/// job when the session has a sandbox (spawned from the sandbox's lasting thread).
pub(crate) fn spawn(command: &str, ctx: &ToolServices) -> Result<Spawned, String> {
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
    let sandbox = ctx
        .sandbox
        .as_ref()
        .filter(|sandbox| sandbox.mode != SandboxMode::Off);
    let (child, confinement) = match sandbox {
        None => {
            keel_sandbox::keep_file_limit(&mut process);
            let child = tokio::process::Command::from(process)
                .spawn()
                .map_err(|error| format!("cannot start bash: {error}; nothing was started"))?;
            (child, None)
        }
        Some(sandbox) => {
            let confinement = sandbox
                .sandbox
                .confine_job(&mut process, sandbox.mode)
                .map_err(|error| format!("{error}; the job did not start"))?;
            let runtime = tokio::runtime::Handle::current();
            let spawned = keel_sandbox::on_lasting_thread(move || {
                let _entered = runtime.enter();
                tokio::process::Command::from(process).spawn()
            })
            .and_then(|spawned| spawned);
            match spawned {
                Ok(child) => (child, Some(confinement)),
                Err(error) => {
                    return Err(format!(
                        "{}; the job did not start",
                        confinement.explain(error)
                    ));
                }
            }
        }
    };
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| "the job's process ended before keel saw it start".to_string())?;
    Ok(Spawned {
        child,
        reader,
        confinement,
        pgid,
    })
}

/// Where a job's output goes as it is read.
pub(crate) trait OutputSink: Send + Sync + 'static {
    /// `for_model`: released by the fixed-hold redactor (`held` bytes still wait);
    /// `for_people`: redacted at once, on its own.
    fn printed(&self, for_model: &[u8], for_people: &[u8], held: usize);
}

/// Read the job's output into `sink` through the redactors, on a thread of its own named
/// `name` (never the runtime's blocking pool: a job's output may stay open for as long as keel
/// runs); the receiver hears when the output closed.
pub(crate) fn read_output(
    reader: std::io::PipeReader,
    sink: Arc<dyn OutputSink>,
    secrets: &keel_types::Secrets,
    name: String,
) -> tokio::sync::oneshot::Receiver<()> {
    let mut redactor = secrets.stream();
    let mut for_people = secrets.live_stream();
    let (closed, closing) = tokio::sync::oneshot::channel();
    let read = move || {
        let mut reader = reader;
        let mut buffer = [0u8; 8192];
        let mut safe = Vec::with_capacity(buffer.len());
        let mut shown = Vec::with_capacity(buffer.len());
        loop {
            match reader.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    shown.clear();
                    for_people.push(&buffer[..n], &mut shown);
                    safe.clear();
                    redactor.push(&buffer[..n], &mut safe);
                    sink.printed(&safe, &shown, redactor.holding());
                }
            }
        }
        shown.clear();
        for_people.finish(&mut shown);
        safe.clear();
        redactor.finish(&mut safe);
        sink.printed(&safe, &shown, 0);
        let _ = closed.send(());
    };
    // Without a thread the output is not read: the job's writes would block once the pipe is
    // full, and its end still comes.
    let _ = std::thread::Builder::new().name(name).spawn(read);
    closing
}
