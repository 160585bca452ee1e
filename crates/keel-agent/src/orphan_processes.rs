//! Commands a keel that died (SIGKILL, a crash) left running: each tool's process group is
//! recorded when its command starts, and the next load of the session stops the groups of the
//! calls it finds interrupted — only when they are provably the same processes.
//!
//! Invariants:
//! - A group is killed only for a call whose receipt was `started` at load (so no live keel is
//!   running it: the lease is held), and only if `ProcessIdentity::kill_group_if_same` finds the
//!   recorded start time and boot id again (a reused pid is left alone).
//! - After the load, the session has no recorded groups; a finished call's group is forgotten
//!   with its result.

use crate::error::AgentError;
use keel_store::{RecordedProcess, Store};
use keel_tools::ToolServices;
use keel_tools::process::{ProcessIdentity, ProcessLog};
use std::sync::Arc;

/// Records the process group of one call's command in the store.
#[derive(Debug)]
struct CallProcesses {
    store: Store,
    session: String,
    call_id: String,
}

impl ProcessLog for CallProcesses {
    fn started(&self, identity: &ProcessIdentity) {
        // Best effort: a group that could not be recorded is one a restart cannot stop.
        let _ = self.store.record_tool_process(
            &self.session,
            &RecordedProcess {
                call_id: self.call_id.clone(),
                pgid: identity.pgid,
                start_ticks: identity.start_ticks,
                boot_id: identity.boot_id.clone(),
            },
        );
    }
}

/// The tool context for one call: its commands' groups are recorded under the call's id.
pub(crate) fn context_for_call(
    base: &ToolServices,
    store: &Store,
    session: &str,
    call_id: &str,
) -> ToolServices {
    base.with_process_log(Arc::new(CallProcesses {
        store: store.clone(),
        session: session.to_string(),
        call_id: call_id.to_string(),
    }))
}

/// Stop the groups of the calls in `interrupted` that are still running; forget every group of
/// the session. Returns how many groups were killed.
pub(crate) fn stop_leftovers(
    store: &Store,
    session: &str,
    interrupted: &[String],
) -> Result<usize, AgentError> {
    let mut killed = 0;
    for process in store.tool_processes(session)? {
        if !interrupted.contains(&process.call_id) {
            continue;
        }
        let identity = ProcessIdentity {
            pgid: process.pgid,
            start_ticks: process.start_ticks,
            boot_id: process.boot_id,
        };
        if identity.kill_group_if_same() {
            killed += 1;
        }
    }
    store.forget_tool_processes(session, None)?;
    Ok(killed)
}
