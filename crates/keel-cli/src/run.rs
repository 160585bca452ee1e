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
use keel_agent::{AgentError, Controller, HeadlessApprover, Readiness, TurnOutcome};
use keel_tools::PermissionMode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// The exit code of the signal that stopped the running turn (0: none).
static STOPPED: AtomicU8 = AtomicU8::new(0);

pub async fn run_command(common: &CommonArgs, prompt: &str) -> anyhow::Result<Outcome> {
    let recovery = keel_agent::recovery::parse_command(prompt)
        .map(|(id, guidance)| TurnRequest::Recovery { id, guidance })
        .or_else(|| {
            keel_agent::recovery::parse_continue_command(prompt)
                .map(|id| TurnRequest::Readiness { id })
        });
    if recovery.is_none()
        && let Some(command) = prompt.strip_prefix('/')
    {
        let name = command.split_whitespace().next().unwrap_or("");
        return Err(UsageError(format!(
            "unknown slash command `/{name}`: `keel run` knows `/recover-context [ID] [guidance]` \
             and `/continue-checks [ID]`"
        ))
        .into());
    }
    if recovery.is_some() && common.session.is_none() && !common.continue_latest {
        return Err(UsageError(
            "/recover-context and /continue-checks need the session: keel run --session ID \"/recover-context\""
                .into(),
        )
        .into());
    }
    if prompt.trim().is_empty() {
        return Err(UsageError("the prompt is empty: say what keel should do".into()).into());
    }
    let setup = prepare(common, "keel run")?;
    print_notices(&setup);
    let approve_all = setup.settings.policy.mode == PermissionMode::Auto;
    let controller = open_controller(setup, Arc::new(HeadlessApprover { approve_all }))?;
    let renderer = Renderer::new(common.json);
    match recovery {
        Some(request) => run_turn_with(controller, renderer, request).await,
        None => run_turn(controller, renderer, prompt).await,
    }
}

/// What a turn is started with.
pub enum TurnRequest {
    Prompt(String),
    Recovery {
        id: Option<String>,
        guidance: Option<String>,
    },
    Readiness {
        id: Option<String>,
    },
}

impl TurnRequest {
    /// Start the turn this request asks for and run it to its end.
    pub async fn submit(&self, controller: &Controller) -> Result<TurnOutcome, AgentError> {
        match self {
            TurnRequest::Prompt(prompt) => controller.submit(prompt).await,
            TurnRequest::Recovery { id, guidance } => {
                controller
                    .submit_recovery(id.as_deref(), guidance.as_deref())
                    .await
            }
            TurnRequest::Readiness { id } => controller.submit_readiness(id.as_deref()).await,
        }
    }
}

pub async fn run_turn(
    controller: Controller,
    renderer: Renderer,
    prompt: &str,
) -> anyhow::Result<Outcome> {
    run_turn_with(
        controller,
        renderer,
        TurnRequest::Prompt(prompt.to_string()),
    )
    .await
}

/// Render a controller's events while one turn runs; Ctrl-C cancels it.
pub async fn run_turn_with(
    controller: Controller,
    mut renderer: Renderer,
    request: TurnRequest,
) -> anyhow::Result<Outcome> {
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
    let stops = tokio::spawn(async move {
        let mut last = None;
        loop {
            let stop = signals.next().await;
            canceller.cancel();
            // SIGTERM / SIGHUP decide the exit code over an earlier Ctrl-C.
            if last.is_none() || stop != Stop::Interrupt {
                last = Some(stop);
            }
            STOPPED.store(last.map_or(0, Stop::exit_code), Ordering::SeqCst);
        }
    });
    let outcome = request.submit(&controller).await;
    stops.abort();
    let _ = stops.await;
    drop(controller);
    let renderer = rendering.await?;
    let session = renderer.session_id().map(str::to_string);
    match outcome? {
        TurnOutcome::Completed {
            readiness: Readiness::CutOff(_),
            ..
        } => Ok(Outcome::TurnFailed),
        TurnOutcome::Completed {
            readiness: Readiness::Ready | Readiness::OpenWork(_),
            ..
        } => Ok(Outcome::Completed),
        TurnOutcome::Failed(_) => {
            if let Some(session) = session.filter(|_| renderer.session_hints()) {
                if renderer.recovery_offered() {
                    // CONTRACT.md: printed in every mode (stderr, so --json stdout stays JSON).
                    eprintln!(
                        "recovery available: keel run --session {session} \"/recover-context\""
                    );
                } else {
                    renderer.hint(&format!(
                        "session {session}: `keel run --session {session} \"…\"` continues it"
                    ));
                }
            }
            Ok(Outcome::TurnFailed)
        }
        TurnOutcome::Cancelled => match STOPPED.load(Ordering::SeqCst) {
            0 | 130 => Ok(Outcome::Cancelled),
            code => Ok(Outcome::Stopped(code)),
        },
    }
}
