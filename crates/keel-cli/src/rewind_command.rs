//! `keel session rewind ID --to TURN`, and `/undo` and `/rewind` in the interactive session:
//! files and conversation as they were before a turn.
//!
//! Invariant: what could not be restored is always said (conflicts, commands, files not
//! kept), each path and command escaped; a conflict makes the command exit 1.

use crate::cli::CommonArgs;
use crate::session_setup::{open_controller, prepare};
use crate::{Outcome, UsageError};
use keel_agent::{Controller, HeadlessApprover, RewindReport, RewindScope};
use keel_render::visible_line;
use std::sync::Arc;

/// Rewind session `id` from turn `to` on.
pub fn run(
    common: &CommonArgs,
    id: &str,
    to: u64,
    scope: RewindScope,
    force: bool,
) -> anyhow::Result<Outcome> {
    let mut common = common.clone();
    common.session = Some(id.to_string());
    // The session's files are in its own workspace, wherever this runs from.
    if common.cwd.is_none()
        && let Ok(Some(session)) = crate::session_setup::open_host()?.session(id)
    {
        common.cwd = Some(std::path::PathBuf::from(session.workspace));
    }
    let mut setup = prepare(&common, "keel session rewind")?;
    // A rewind runs no tool: no MCP server is started for it.
    setup.mcp_servers.clear();
    let controller = open_controller(setup, Arc::new(HeadlessApprover { approve_all: false }))?;
    let report = controller
        .rewind(to, scope, force)
        .map_err(|error| UsageError(error.to_string()))?;
    print_report(&report, to);
    Ok(if report.conflicts.is_empty() {
        Outcome::Completed
    } else {
        Outcome::Stopped(1)
    })
}

/// `keel session fork ID [--at TURN]`: the new session's id on stdout, what to do with it on
/// stderr.
pub fn fork(id: &str, at: Option<u64>) -> anyhow::Result<Outcome> {
    let host = crate::session_setup::open_host()?;
    let forked = host.fork(id, at).map_err(|error| match error {
        keel_agent::AgentError::CannotFork(_) => anyhow::Error::from(UsageError(error.to_string())),
        keel_agent::AgentError::Store(store) if store.is_for_the_user() => {
            UsageError(store.to_string()).into()
        }
        other => other.into(),
    })?;
    println!("{}", forked.id);
    eprintln!(
        "forked {id}{} as {}: continue it with `keel --session {}`. Files are as they are now \
         (`keel session rewind` restores them).",
        at.map(|turn| format!(" at turn {turn}"))
            .unwrap_or_default(),
        forked.id,
        forked.id
    );
    Ok(Outcome::Completed)
}

/// Rewind from the interactive session (`/undo`: the last turn).
pub fn interactive(controller: &Controller, to: Option<u64>, scope: RewindScope, force: bool) {
    let last = match controller.last_turn_in_history() {
        Ok(last) => last,
        Err(error) => {
            eprintln!("error: {}", visible_line(&error.to_string()));
            return;
        }
    };
    let Some(to) = to.or(last) else {
        eprintln!("nothing to undo: the conversation holds no turn");
        return;
    };
    match controller.rewind(to, scope, force) {
        Ok(report) => print_report(&report, to),
        Err(error) => eprintln!("error: {}", visible_line(&error.to_string())),
    }
}

fn print_report(report: &RewindReport, to: u64) {
    for path in &report.restored {
        eprintln!("restored {}", visible_line(path));
    }
    for (path, why) in &report.conflicts {
        eprintln!("conflict {}: {}", visible_line(path), visible_line(why));
    }
    for what in &report.not_restorable {
        eprintln!("not restored: {}", visible_line(what));
    }
    match report.revision {
        Some(revision) => eprintln!(
            "conversation: back to before turn {to} (history revision {revision}; the earlier one stays readable)"
        ),
        None => eprintln!("conversation: unchanged"),
    }
}
