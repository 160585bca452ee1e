//! `keel`: the interactive session.
//!
//! Invariants:
//! - One controller at a time; switching model or session drops the old one first (releasing
//!   its lease) and resumes through the same loading path as `--session`.
//! - Ctrl-C during a turn cancels the turn; a second Ctrl-C before it ends exits (130). At the
//!   prompt, Ctrl-C clears the line and Ctrl-D quits.
//! - Slash commands are parsed only at the start of a line; anything else goes to the model.

use crate::cli::CommonArgs;
use crate::render::{Renderer, usage_line};
use crate::run::TurnRequest;
use crate::session_setup::{Setup, open_controller, open_store, prepare, session_choice};
use crate::{Outcome, settings};
use keel_agent::{Approval, ApprovalRequest, Approver, Controller, SessionChoice, TurnOutcome};
use keel_types::Usage;
use rustyline::error::ReadlineError;
use std::collections::HashSet;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// Asks on the terminal; "always" remembers the tool for the rest of the session.
struct TerminalApprover {
    always: Mutex<HashSet<String>>,
}

impl Approver for TerminalApprover {
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async move {
            if self
                .always
                .lock()
                .map(|set| set.contains(&request.tool))
                .unwrap_or(false)
            {
                return Approval::Allow;
            }
            let question = format!(
                "? allow {} `{}`? [y]es / [n]o / [a]lways for {}: ",
                request.tool, request.subject, request.tool
            );
            let answer = tokio::task::spawn_blocking(move || {
                eprint!("{question}");
                let _ = std::io::stderr().flush();
                let mut line = String::new();
                std::io::stdin()
                    .read_line(&mut line)
                    .map(|_| line)
                    .unwrap_or_default()
            })
            .await
            .unwrap_or_default();
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => Approval::Allow,
                "a" | "always" => {
                    if let Ok(mut set) = self.always.lock() {
                        set.insert(request.tool.clone());
                    }
                    Approval::Allow
                }
                _ => Approval::Deny,
            }
        })
    }
}

struct Repl {
    common: CommonArgs,
    /// `None` only while switching.
    controller: Option<Controller>,
    approver: Arc<TerminalApprover>,
    usage: Usage,
    rendering: tokio::task::JoinHandle<()>,
}

fn start_rendering(controller: &Controller) -> tokio::task::JoinHandle<()> {
    let mut events = controller.subscribe();
    tokio::spawn(async move {
        let mut renderer = Renderer::new(false);
        while let Some(event) = events.recv().await {
            renderer.emit(&event);
        }
    })
}

const HELP: &str = "commands:
  /help                 this list
  /model [PROVIDER/ID]  show or switch the model (the session continues)
  /sessions             sessions of this workspace
  /resume ID            continue another session
  /cost                 tokens used in this session so far
  /recover-context [ID] [guidance]
                        recover from a rejected replay, from valid history
  /continue-checks [ID] continue a turn that ended with open work
  /quit                 leave (Ctrl-D too)
Ctrl-C cancels a running turn; a second Ctrl-C quits.";

pub async fn run(common: &CommonArgs) -> anyhow::Result<Outcome> {
    let setup = prepare(common, "keel (interactive)")?;
    let choice = session_choice(common, &setup.store, &setup.workspace)?;
    let approver = Arc::new(TerminalApprover {
        always: Mutex::new(HashSet::new()),
    });
    let controller = open_controller(setup, choice, approver.clone())?;
    let rendering = start_rendering(&controller);
    let mut repl = Repl {
        common: common.clone(),
        controller: Some(controller),
        approver,
        usage: Usage::default(),
        rendering,
    };
    repl.banner();
    let history_path = settings::keel_home()?.join("history.txt");
    let mut editor = rustyline::DefaultEditor::new()?;
    let _ = editor.load_history(&history_path);
    loop {
        let (returned, line) = tokio::task::spawn_blocking(move || {
            let line = editor.readline("› ");
            (editor, line)
        })
        .await?;
        editor = returned;
        match line {
            Ok(line) => {
                let text = line.trim();
                if text.is_empty() {
                    continue;
                }
                let _ = editor.add_history_entry(text);
                if text.starts_with('/') {
                    if !repl.command(text).await? {
                        break;
                    }
                } else if repl.turn(TurnRequest::Prompt(text.to_string())).await? {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => return Err(error.into()),
        }
    }
    let _ = editor.save_history(&history_path);
    repl.rendering.abort();
    Ok(Outcome::Completed)
}

impl Repl {
    fn banner(&self) {
        let Some(controller) = &self.controller else {
            return;
        };
        let settings = controller.settings();
        eprintln!(
            "keel · {}/{} · {} · session {}\n/help for commands, Ctrl-D to quit",
            settings.profile.name,
            settings.model,
            settings.workspace.display(),
            controller.session().id
        );
    }

    /// Run one turn; returns true if the user asked to quit (second Ctrl-C).
    async fn turn(&mut self, request: TurnRequest) -> anyhow::Result<bool> {
        let Some(controller) = self.controller.clone() else {
            eprintln!("error: no session is open; /resume one");
            return Ok(false);
        };
        let mut interrupt =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        let submit = request.submit(&controller);
        tokio::pin!(submit);
        let mut interrupts = 0;
        let outcome = loop {
            tokio::select! {
                outcome = &mut submit => break outcome,
                _ = interrupt.recv() => {
                    interrupts += 1;
                    if interrupts >= 2 {
                        eprintln!("\nquitting");
                        return Ok(true);
                    }
                    eprintln!("\ncancelling… (Ctrl-C again to quit)");
                    controller.cancel();
                }
            }
        };
        // Let the renderer catch up before the next prompt.
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        match outcome {
            Ok(TurnOutcome::Completed { usage }) => self.usage.add(&usage),
            Ok(TurnOutcome::Failed(_)) | Ok(TurnOutcome::Cancelled) => {}
            Err(error) => eprintln!("error: {error}"),
        }
        Ok(false)
    }

    /// Handle a slash command; returns false to quit.
    async fn command(&mut self, text: &str) -> anyhow::Result<bool> {
        let mut words = text.split_whitespace();
        let name = words.next().unwrap_or("");
        let argument = words.next();
        match name {
            "/quit" | "/exit" => return Ok(false),
            "/continue-checks" => {
                if let Some(id) = keel_agent::recovery::parse_continue_command(text) {
                    return Ok(!self.turn(TurnRequest::Readiness { id }).await?);
                }
            }
            "/recover-context" => {
                if let Some((id, guidance)) = keel_agent::recovery::parse_command(text) {
                    return Ok(!self.turn(TurnRequest::Recovery { id, guidance }).await?);
                }
            }
            "/help" => eprintln!("{HELP}"),
            "/cost" => eprintln!("{}", usage_line(&self.usage, self.usage.cache_hit_ratio())),
            "/sessions" => {
                let store = open_store()?;
                let Some(controller) = &self.controller else {
                    return Ok(true);
                };
                let workspace = controller.settings().workspace.display().to_string();
                for session in store.sessions_for_workspace(&workspace)? {
                    let mark = if session.id == controller.session().id {
                        "*"
                    } else {
                        " "
                    };
                    eprintln!(
                        "{mark} {}  {}/{}",
                        session.id, session.provider, session.model
                    );
                }
            }
            "/model" => match argument {
                None => {
                    if let Some(controller) = &self.controller {
                        let settings = controller.settings();
                        eprintln!("model: {}/{}", settings.profile.name, settings.model);
                    }
                }
                Some(model) => {
                    let Some(id) = self.controller.as_ref().map(|c| c.session().id.clone()) else {
                        eprintln!("error: no session is open; /resume one");
                        return Ok(true);
                    };
                    let mut common = self.common.clone();
                    common.model = Some(model.to_string());
                    self.switch(&common, SessionChoice::Resume(id)).await;
                }
            },
            "/resume" => match argument {
                None => eprintln!("usage: /resume ID (see /sessions)"),
                Some(id) => {
                    let common = self.common.clone();
                    self.switch(&common, SessionChoice::Resume(id.to_string()))
                        .await;
                }
            },
            other => eprintln!("unknown command `{other}`; /help lists them"),
        }
        Ok(true)
    }

    /// Replace the controller (model or session change); on failure reopen the current one.
    async fn switch(&mut self, common: &CommonArgs, choice: SessionChoice) {
        let setup: Setup = match prepare(common, "keel (interactive)") {
            Ok(setup) => setup,
            Err(error) => {
                eprintln!("error: {error:#}");
                return;
            }
        };
        if let SessionChoice::Resume(id) = &choice
            && !matches!(setup.store.session(id), Ok(Some(_)))
        {
            eprintln!("error: no session `{id}`");
            return;
        }
        let previous_id = self.controller.as_ref().map(|c| c.session().id.clone());
        // Drop the current controller first: it releases the session lease.
        self.controller = None;
        self.rendering.abort();
        match open_controller(setup, choice, self.approver.clone()) {
            Ok(controller) => {
                self.controller = Some(controller);
                self.common = common.clone();
            }
            Err(error) => {
                eprintln!("error: {error:#}");
                let Some(previous_id) = previous_id else {
                    return;
                };
                let reopened = prepare(&self.common, "keel (interactive)").and_then(|setup| {
                    open_controller(
                        setup,
                        SessionChoice::Resume(previous_id),
                        self.approver.clone(),
                    )
                });
                match reopened {
                    Ok(controller) => self.controller = Some(controller),
                    Err(error) => {
                        eprintln!("error: cannot reopen the session: {error:#}");
                        return;
                    }
                }
            }
        }
        if let Some(controller) = &self.controller {
            self.rendering = start_rendering(controller);
        }
        self.banner();
    }
}
