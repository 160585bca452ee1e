//! The `bash` tool.
//!
//! Invariants:
//! - The command runs in the workspace, in its own process group; a timeout, or dropping the
//!   future (cancellation), kills the whole group, so no grandchild survives.
//! - stdout and stderr are captured together in order; the output is capped with middle
//!   truncation that says how much was cut; binary output is described, not dumped.
//! - The result always states the exit code (or the signal, or the timeout).
//! - The command's environment has none of keel's secrets (`ToolServices::secrets`), and its
//!   output passes a stream redactor before anything is kept: whole values are replaced, the
//!   cut comes after, and nothing about the kept bytes depends on whether they are part of a
//!   secret. Output still held by the redactor when the output stays open past the grace
//!   period is not shown.
//! - The tool returns at most `OUTPUT_GRACE` after the command ends, even when a process that
//!   left the group keeps the output open.
//! - With a session sandbox (not `off`) the command runs confined (`keel-sandbox`), spawned
//!   from the sandbox's spawner thread; if the sandbox cannot be set up, the command does not
//!   run and the result says which step failed. A failed confined command's result ends with
//!   a note of what the sandbox forbids (never a claim that it caused the failure).

use crate::bash_process::{self, GroupKiller, PlantedUndo, Purpose};
use crate::output::{OUTPUT_CAP, looks_binary, truncate_middle};
use crate::{ToolOutput, ToolServices};
use serde_json::Value;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

fn lock(capture: &Mutex<Capture>) -> std::sync::MutexGuard<'_, Capture> {
    capture
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Bytes kept from a stream: the head and the tail, with the total seen.
struct Capture {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: usize,
    half: usize,
}

impl Capture {
    fn new(cap: usize) -> Capture {
        Capture {
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            total: 0,
            half: cap / 2,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len();
        for byte in bytes {
            if self.head.len() < self.half {
                self.head.push(*byte);
            } else {
                if self.tail.len() == self.half {
                    self.tail.pop_front();
                }
                self.tail.push_back(*byte);
            }
        }
    }

    /// The output as text (already redacted: bytes reach the capture through the redactor).
    fn render(&self) -> String {
        let kept = self.head.len() + self.tail.len();
        if kept < self.total {
            let cut = self.total - kept;
            let tail: Vec<u8> = self.tail.iter().copied().collect();
            return format!(
                "{}\n[… {cut} bytes cut from the middle of {} …]\n{}",
                String::from_utf8_lossy(&self.head),
                self.total,
                String::from_utf8_lossy(&tail)
            );
        }
        let mut bytes = self.head.clone();
        bytes.extend(self.tail.iter());
        if looks_binary(&bytes) {
            return format!("[binary output, {} bytes, not shown]", bytes.len());
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// How long the output may stay open after the command ended or was killed: a process that
/// left the command's process group (`setsid … &`) can hold it open for ever.
const OUTPUT_GRACE: Duration = Duration::from_secs(1);

pub async fn bash(args: &Value, ctx: &ToolServices) -> ToolOutput {
    let command = args.get("command").and_then(Value::as_str).unwrap_or("");
    let timeout = args
        .get("timeout_secs")
        .and_then(Value::as_u64)
        .map_or(ctx.bash_timeout, Duration::from_secs)
        .min(MAX_TIMEOUT);
    let (process, reader) = match bash_process::bash_command(command, ctx) {
        Ok(built) => built,
        Err(message) => return ToolOutput::error(message),
    };
    let confined = bash_process::confining(ctx.sandbox.as_ref());
    let absent_before = confined.map(|sandbox| sandbox.sandbox.planted_absent_now());
    let (mut child, confinement) =
        match bash_process::spawn(process, ctx.sandbox.as_ref(), Purpose::Command) {
            Ok(spawned) => spawned,
            Err(message) => return ToolOutput::error(message),
        };
    // Declared before the killer, so dropped after it: a cancelled or timed-out command is
    // stopped first, then what it left behind in the sandbox is killed, then what it left for
    // git and the shell is undone.
    let mut undo = PlantedUndo(
        confined
            .map(|sandbox| sandbox.sandbox.clone())
            .zip(absent_before),
    );
    let mut confinement = confinement;
    let killer = GroupKiller(child.id().and_then(|id| i32::try_from(id).ok()));
    // Recorded so that a keel killed outright can stop this group when it restarts.
    if let (Some(log), Some(pgid)) = (&ctx.process_log, killer.0)
        && let Some(identity) = crate::process::ProcessIdentity::of(pgid)
    {
        log.started(&identity);
    }
    let capture = Arc::new(Mutex::new(Capture::new(OUTPUT_CAP)));
    let filling = capture.clone();
    // Every byte passes the redactor before it is kept, so the cut comes after redaction.
    let mut redactor = ctx.secrets.stream();
    // The live view is redacted on its own: its redactor releases output at once, which the
    // model's must not (what it holds would depend on whether an end begins a secret).
    let live = ctx.live_output.clone();
    let mut live_redactor = ctx.secrets.live_stream();
    let reading = tokio::task::spawn_blocking(move || {
        let mut reader = reader;
        let mut buffer = [0u8; 8192];
        let mut safe = Vec::with_capacity(buffer.len());
        let mut live_safe = Vec::with_capacity(buffer.len());
        let mut carry = crate::live::Utf8Carry::default();
        let hand_on = |text: String| {
            if let Some(live) = &live
                && !text.is_empty()
            {
                (live.0)(&text);
            }
        };
        loop {
            match reader.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    safe.clear();
                    redactor.push(&buffer[..n], &mut safe);
                    lock(&filling).push(&safe);
                    if live.is_some() {
                        live_safe.clear();
                        live_redactor.push(&buffer[..n], &mut live_safe);
                        hand_on(carry.push(&live_safe));
                    }
                }
            }
        }
        safe.clear();
        redactor.finish(&mut safe);
        lock(&filling).push(&safe);
        live_safe.clear();
        live_redactor.finish(&mut live_safe);
        hand_on(carry.push(&live_safe));
        hand_on(carry.finish());
    });
    let status = tokio::time::timeout(timeout, child.wait()).await;
    drop(killer); // ends the group: on timeout the command, and any background leftovers
    // And what left the group, in the session's namespaces (a sweep may wait a little: not on
    // the runtime's thread).
    if let Some(confinement) = confinement.take() {
        let ended_on_its_own = matches!(status, Ok(Ok(_)));
        let _ = tokio::task::spawn_blocking(move || {
            if ended_on_its_own {
                confinement.ended();
            }
        })
        .await;
    }
    let complete = tokio::time::timeout(OUTPUT_GRACE, reading).await.is_ok();
    let mut output = lock(&capture).render();
    if !complete {
        output.push_str(
            "\n[a background process that left the command's process group still holds the \
             output open; it was left running and its further output is not shown]",
        );
    }
    let output = truncate_middle(&output, OUTPUT_CAP + 400);
    let (ending, is_error, summary) = match status {
        Err(_) => (
            format!(
                "[timed out after {} s; the command and its children were killed]",
                timeout.as_secs()
            ),
            true,
            format!("timed out after {} s", timeout.as_secs()),
        ),
        Ok(Err(error)) => (
            format!("[could not wait for bash: {error}]"),
            true,
            "failed".into(),
        ),
        Ok(Ok(status)) => match status.code() {
            Some(0) => ("[exit code 0]".to_string(), false, "exit 0".to_string()),
            Some(code) => (format!("[exit code {code}]"), true, format!("exit {code}")),
            None => {
                use std::os::unix::process::ExitStatusExt;
                let signal = status.signal().unwrap_or(0);
                (
                    format!("[killed by signal {signal}]"),
                    true,
                    format!("signal {signal}"),
                )
            }
        },
    };
    let mut content = if output.is_empty() {
        ending
    } else {
        format!("{}\n{ending}", output.trim_end())
    };
    for undone in undo.report() {
        content.push_str(&format!("\n[keel sandbox: {}]", undone.describe()));
    }
    if let Some(sandbox) = confined
        && is_error
    {
        content.push('\n');
        content.push_str(&sandbox.failure_note());
    }
    ToolOutput {
        content,
        is_error,
        summary,
    }
}
