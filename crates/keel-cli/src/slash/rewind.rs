//! `keel session rewind ID --to TURN`, and `/undo` and `/rewind` in the interactive session:
//! files and conversation as they were before a turn.
//!
//! Invariant: what could not be restored is always said (conflicts, commands, files not
//! kept), each path and command escaped; a conflict makes the command exit 1.

use crate::cli::CommonArgs;
use crate::session_setup::{open_controller, prepare};
use crate::terminal::shown::{Answered, Question, Reply, Shown};
use crate::{Outcome, UsageError};
use keel_agent::SurfaceCommand;
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
    let mut shown = Shown::new();
    report_lines(&report, to, &mut shown);
    shown.print(keel_render::Colors::None);
    Ok(if report.conflicts.is_empty() {
        Outcome::Completed
    } else {
        Outcome::Stopped(1)
    })
}

/// `keel session fork ID [--at TURN]`: the new session's id on stdout, what to do with it on
/// stderr.
pub fn fork(common: &CommonArgs, id: &str, at: Option<u64>, code: bool) -> anyhow::Result<Outcome> {
    // `--code`: first the files, as the turns after `at` found them (in the original session:
    // it is the one whose checkpoints and snapshots know them).
    let host = crate::session_setup::open_host()?;
    if let Some(at) = at.filter(|_| code) {
        let later = host
            .session(id)?
            .is_some_and(|_| at < host.transcript(id).map_or(0, |t| last_turn(&t)));
        if later {
            let scope = RewindScope {
                code: true,
                conversation: false,
            };
            if let Outcome::Stopped(code) = run(common, id, at + 1, scope, false)? {
                eprintln!(
                    "not forked: resolve the conflicts above first (or `keel session rewind {id} --to {} --code --force`)",
                    at + 1
                );
                return Ok(Outcome::Stopped(code));
            }
        }
    }
    let forked = host.fork(id, at).map_err(|error| match error {
        keel_agent::AgentError::CannotFork(_) => anyhow::Error::from(UsageError(error.to_string())),
        keel_agent::AgentError::Store(store) if store.is_for_the_user() => {
            UsageError(store.to_string()).into()
        }
        other => other.into(),
    })?;
    println!("{}", forked.id);
    let files = if code {
        "Files are as they were after that turn."
    } else {
        "Files are as they are now (`--code` puts them back as they were after that turn)."
    };
    eprintln!(
        "forked {id}{} as {}: continue it with `keel --session {}`. {files}",
        at.map(|turn| format!(" at turn {turn}"))
            .unwrap_or_default(),
        forked.id,
        forked.id
    );
    Ok(Outcome::Completed)
}

/// The latest turn a transcript's history holds.
fn last_turn(transcript: &keel_agent::Transcript) -> u64 {
    transcript
        .items
        .iter()
        .filter(|stored| !matches!(stored.item, Ok(keel_types::Item::Context(_))))
        .map(|stored| stored.turn)
        .max()
        .unwrap_or(0)
}

/// The turns the conversation holds, each with the first line of its prompt, to pick one
/// from (Enter: the last; `q` keeps all); the answer rewinds with `scope` and `force`.
pub fn pick_turn(controller: &Controller, scope: RewindScope, force: bool) -> Reply {
    let mut shown = Shown::new();
    let transcript = match controller.transcript() {
        Ok(transcript) => transcript,
        Err(error) => {
            shown.error(visible_line(&error.to_string()));
            return Reply::Done(shown, None);
        }
    };
    let mut turns: Vec<(u64, String)> = Vec::new();
    for stored in &transcript.items {
        if let Ok(keel_types::Item::User { text }) = &stored.item
            && turns.last().is_none_or(|(turn, _)| *turn != stored.turn)
        {
            // keel's own notes lead some prompts: the person's words follow them.
            let said = text
                .lines()
                .find(|line| !line.starts_with("[keel: ") && !line.trim().is_empty())
                .unwrap_or("");
            let said: String = said.chars().take(70).collect();
            turns.push((stored.turn, said));
        }
    }
    let Some((last, _)) = turns.last().cloned() else {
        shown.say("nothing to rewind: the conversation holds no turn");
        return Reply::Done(shown, None);
    };
    shown.say("turns of this conversation (a rewind undoes the turn picked and every later one):");
    for (turn, said) in &turns {
        shown.say(format!("  {turn:>3}  {}", visible_line(said)));
    }
    let prompt =
        format!("rewind to before turn [{last}] (a number, Enter for {last}, q to keep all): ");
    Reply::Ask(Question::new(shown, prompt, move |answer| {
        let rewind = |turn: u64| {
            Answered::Run(SurfaceCommand::Rewind {
                to: Some(turn),
                code: scope.code,
                conversation: scope.conversation,
                force,
                pick: false,
            })
        };
        let mut shown = Shown::new();
        match answer.map(str::trim) {
            None | Some("q" | "Q") => {}
            Some("") => return rewind(last),
            Some(typed) => match typed.parse::<u64>() {
                Ok(turn) if turns.iter().any(|(known, _)| *known == turn) => return rewind(turn),
                _ => shown.say(format!(
                    "no turn `{}` to rewind to: nothing was changed",
                    visible_line(typed)
                )),
            },
        }
        Answered::Show(shown)
    }))
}

/// Rewind from the interactive session (`/undo`: the last turn).
pub fn interactive(
    controller: &Controller,
    to: Option<u64>,
    scope: RewindScope,
    force: bool,
    shown: &mut Shown,
) {
    let last = match controller.last_turn_in_history() {
        Ok(last) => last,
        Err(error) => {
            shown.error(visible_line(&error.to_string()));
            return;
        }
    };
    let Some(to) = to.or(last) else {
        shown.say("nothing to undo: the conversation holds no turn");
        return;
    };
    match controller.rewind(to, scope, force) {
        Ok(report) => report_lines(&report, to, shown),
        Err(error) => shown.error(visible_line(&error.to_string())),
    }
}

fn report_lines(report: &RewindReport, to: u64, shown: &mut Shown) {
    for path in &report.restored {
        shown.say(format!("restored {}", visible_line(path)));
    }
    for (path, retrieve) in &report.saved {
        shown.say(format!(
            "restored {} — it changed while a command ran; what it held is kept: {}",
            visible_line(path),
            visible_line(retrieve)
        ));
    }
    for (path, why) in &report.conflicts {
        shown.say(format!(
            "conflict {}: {}",
            visible_line(path),
            visible_line(why)
        ));
    }
    for what in &report.not_restorable {
        shown.say(format!("not restored: {}", visible_line(what)));
    }
    match report.revision {
        Some(revision) => shown.say(format!(
            "conversation: back to before turn {to} (history revision {revision}; the earlier one stays readable)"
        )),
        None => shown.say("conversation: unchanged"),
    }
}
