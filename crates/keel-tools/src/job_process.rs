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
use crate::bash_process::{self, Purpose};
use std::io::Read;
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
/// job when the session has a sandbox.
pub(crate) fn spawn(command: &str, ctx: &ToolServices) -> Result<Spawned, String> {
    let (process, reader) = bash_process::bash_command(command, ctx)?;
    let (child, confinement) = bash_process::spawn(process, ctx.sandbox.as_ref(), Purpose::Job)?;
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
