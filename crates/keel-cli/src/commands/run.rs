//! `keel run`: one turn (with all its tool rounds), headless.
//!
//! Invariants:
//! - Approvals fail closed: a call that needs approval is denied unless `--yes` (mode `auto`).
//! - Ctrl-C, SIGTERM and SIGHUP cancel the turn (exit 130, 143, 129); the controller
//!   guarantees the tools are stopped, receipts settled and nothing late is committed.
//! - Every event reaches the renderer in order; `--json` prints them all.

use crate::cli::CommonArgs;
use crate::render::Renderer;
use crate::session_setup::{open_controller, prepare, print_notices};
use crate::signals::{Stop, StopSignals};
use crate::{Outcome, UsageError};
use keel_agent::{
    Controller, HeadlessApprover, Input, Line, RERUN_WITH_YES, Readiness, SurfaceCommand,
    TurnOutcome,
};
use keel_tools::PermissionMode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// The most bytes of a prompt read from stdin.
const MOST_STDIN_PROMPT: u64 = 4 * 1024 * 1024;

/// The prompt `keel run` was given, and what was piped in with it.
pub struct RunPrompt {
    pub text: String,
    /// Text piped into `keel run "PROMPT"` (`crate::commands::piped_input`): it follows the prompt.
    pub piped: Option<String>,
}

/// The prompt `keel run` was given: as an argument (with what is piped in), or from stdin for
/// `-` (or none, with stdin not a terminal).
pub fn prompt_of(argument: Option<String>) -> anyhow::Result<RunPrompt> {
    use std::io::{IsTerminal, Read};
    let from_stdin = match argument.as_deref() {
        Some("-") => true,
        Some(_) => false,
        None if !std::io::stdin().is_terminal() => true,
        None => {
            return Err(UsageError(
                "keel run needs a PROMPT: `keel run \"what to do\"`, or pipe one in \
                 (`keel run - < prompt.txt`)"
                    .into(),
            )
            .into());
        }
    };
    if !from_stdin {
        return Ok(RunPrompt {
            text: argument.unwrap_or_default(),
            piped: crate::commands::piped_input::piped_input()?,
        });
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(MOST_STDIN_PROMPT + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MOST_STDIN_PROMPT {
        return Err(UsageError(format!(
            "the prompt on stdin is longer than {} MiB",
            MOST_STDIN_PROMPT / 1024 / 1024
        ))
        .into());
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| UsageError("the prompt on stdin is not UTF-8 text".into()))?;
    Ok(RunPrompt { text, piped: None })
}

pub async fn run_command(common: &CommonArgs, given: &RunPrompt) -> anyhow::Result<Outcome> {
    let prompt = given.text.as_str();
    let unknown = || {
        let name = prompt.split_whitespace().next().unwrap_or("");
        UsageError(format!(
            "unknown slash command `{}`: `keel run` knows `/recover-context [ID] [guidance]`, \
             `/continue-checks [ID]`, `/compact [focus]`, `/init [guidance]`, `/plan PROMPT` \
             and the custom commands of `.keel/commands/` and `$KEEL_HOME/commands/`",
            keel_render::visible_line(name)
        ))
    };
    // A `/NAME` no built-in command takes may be a custom one: known once the session is set up.
    let mut plan = false;
    let built_in = match Line::parse(prompt) {
        Line::Input(input) => Some(input),
        // A run in plan mode: it ends with the plan as its answer.
        Line::Command(SurfaceCommand::Plan(Some(text))) => {
            plan = true;
            Some(Input::Prompt(text))
        }
        Line::Empty => {
            return Err(UsageError("the prompt is empty: say what keel should do".into()).into());
        }
        Line::Command(_) => return Err(unknown().into()),
        Line::Unknown(_) => None,
    };
    let is_action = built_in
        .as_ref()
        .is_some_and(|input| !matches!(input, Input::Prompt(_)));
    if is_action && common.session.is_none() && !common.continue_latest {
        return Err(UsageError(
            "/recover-context, /continue-checks and /compact need the session: keel run --session ID \"/recover-context\""
                .into(),
        )
        .into());
    }
    let mut setup = prepare(common, "keel run")?;
    if plan {
        setup.settings.policy.mode = PermissionMode::Plan;
    }
    // First: why a command file was left out is part of what an unknown name means.
    print_notices(&setup);
    let input = match built_in {
        Some(input) => input,
        None => match Line::parse_with(prompt, &setup.commands) {
            Line::Input(input) => input,
            Line::Empty | Line::Command(_) | Line::Unknown(_) => return Err(unknown().into()),
        },
    };
    // Piped text follows a prompt (redacted like an attached file); a slash command gets none.
    let input = match (input, &given.piped) {
        (Input::Prompt(text), Some(piped)) if !plan && !prompt.trim_start().starts_with('/') => {
            let piped = setup.settings.secrets.redact(piped);
            Input::Prompt(crate::commands::piped_input::with_piped(&text, &piped))
        }
        (input, Some(_)) => {
            eprintln!("note: the piped input is not added to a slash command");
            input
        }
        (input, None) => input,
    };
    if setup
        .settings
        .sandbox
        .as_ref()
        .is_some_and(|sandbox| sandbox.settings.mode == keel_sandbox::SandboxMode::Off)
    {
        eprintln!("note: sandbox off: commands run unconfined (your own setting)");
    }
    let approve_all = setup.settings.policy.mode == PermissionMode::Auto;
    if approve_all {
        crate::session_setup::require_confinement(&setup.settings)?;
    }
    let controller = open_controller(setup, Arc::new(HeadlessApprover { approve_all }))?;
    let renderer = Renderer::new(common.json).plans_as_answers();
    run_turn(controller, renderer, input).await
}

/// Render a controller's events while one turn runs; Ctrl-C cancels it.
pub async fn run_turn(
    controller: Controller,
    renderer: Renderer,
    input: Input,
) -> anyhow::Result<Outcome> {
    let session = controller.session().id.clone();
    let mut renderer = renderer.for_session(&session);
    let mut events = controller.subscribe();
    let rendering = tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            renderer.emit(&event);
        }
        renderer
    });
    controller.announce();
    let canceller = controller.clone();
    // Registered now, before anything is sent: from here on Ctrl-C, SIGTERM and SIGHUP cancel
    // the turn (tools killed, receipts settled), never kill keel outright.
    let mut signals = StopSignals::register()?;
    // The exit code of the signal that stopped the turn (0: none).
    let stopped = Arc::new(AtomicU8::new(0));
    let stopped_by = stopped.clone();
    let stops = tokio::spawn(async move {
        let mut last = None;
        loop {
            let stop = signals.next().await;
            canceller.cancel();
            // SIGTERM / SIGHUP decide the exit code over an earlier Ctrl-C.
            if last.is_none() || stop != Stop::Interrupt {
                last = Some(stop);
            }
            stopped_by.store(last.map_or(0, Stop::exit_code), Ordering::SeqCst);
        }
    });
    let outcome = controller.submit(input).await;
    let pending = controller.pending_action();
    stops.abort();
    let _ = stops.await;
    // The run ends here, and its session's background jobs with it (said on its stream).
    controller.end_jobs();
    drop(controller);
    let renderer = rendering.await?;
    match outcome? {
        TurnOutcome::Completed { readiness, .. } => {
            let continue_line =
                format!("continue with: keel run --session {session} \"/continue-checks\"");
            // Not ready: exit 1, next step on stderr always (docs/configuration.md#exit-codes).
            match readiness {
                Readiness::Ready => Ok(Outcome::Completed),
                // Nobody could approve a call: going on needs someone who can.
                Readiness::OpenWork(reason) if reason.ends_with(RERUN_WITH_YES) => {
                    if renderer.session_hints() {
                        eprintln!(
                            "continue with: keel run --session {session} --yes \"/continue-checks\" \
                             (or add an allow rule)"
                        );
                    }
                    Ok(Outcome::TurnFailed)
                }
                Readiness::OpenWork(_) => {
                    if renderer.session_hints() {
                        eprintln!("{continue_line}");
                    }
                    Ok(Outcome::TurnFailed)
                }
                Readiness::CutOff(_) => {
                    if renderer.session_hints() {
                        eprintln!("{continue_line}");
                    }
                    Ok(Outcome::TurnFailed)
                }
            }
        }
        TurnOutcome::Failed {
            recovery_id,
            diagnostic,
        } => {
            if renderer.session_hints() {
                if recovery_id.is_some() {
                    let command = match pending.map(|pending| pending.action) {
                        Some(keel_types::InputKind::ContextRecovery) => "/compact",
                        _ => "/recover-context",
                    };
                    // Printed in every mode, on stderr (docs/configuration.md#exit-codes).
                    eprintln!("recovery available: keel run --session {session} \"{command}\"");
                } else {
                    renderer.hint(&format!(
                        "session {session}: `keel run --session {session} \"…\"` continues it"
                    ));
                }
            }
            if diagnostic.kind == keel_types::FailureKind::Auth {
                Ok(Outcome::KeyRefused)
            } else {
                Ok(Outcome::TurnFailed)
            }
        }
        TurnOutcome::Cancelled => match stopped.load(Ordering::SeqCst) {
            0 | 130 => Ok(Outcome::Cancelled),
            code => Ok(Outcome::Stopped(code)),
        },
    }
}
