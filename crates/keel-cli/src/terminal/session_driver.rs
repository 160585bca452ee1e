//! The terminal session both terminal surfaces drive: one controller at a time, switched by
//! `/model`, `/resume`, `/fork` and `/clear`, the slash commands run on it, and the turns line
//! mode sends. Line mode (`line_mode.rs`) and the live TUI (`live.rs`) read keys and draw; what
//! a session does is here, once. A command returns what to show (`Shown`), or a question to
//! ask first (`Reply::Ask`); it never writes to the terminal itself.
//!
//! Invariants:
//! - One controller at a time; switching model or session drops the old one first (releasing
//!   its lease) and resumes through the same loading path as `--session`; a switch that fails
//!   reopens the session it left.
//! - "always" lasts for one session: a switch forgets it.
//! - Ctrl-C during a turn cancels the turn; a second Ctrl-C before it ends exits (130).
//! - The tokens of every controller the session left still count in `/cost`.

use crate::cli::CommonArgs;
use crate::render::usage_line;
use crate::session_setup::{McpStart, Setup, mcp_notes, open_controller_with, open_host, prepare};
use crate::signals::{Stop, StopSignals};
use crate::terminal::shown::{Reply, Shown};
use crate::{Outcome, settings};
use keel_agent::{
    Approver, Controller, Input, SLASH_COMMANDS, SurfaceCommand, SurfaceSpend, TurnOutcome,
};
use keel_render::{visible, visible_line};
use std::sync::Arc;

/// One terminal session: its controller (switched by `/model`, `/resume`, `/fork`, `/clear`),
/// the tokens of the controllers it left, the signals that stop it, and the slash commands.
pub(crate) struct SessionDriver {
    pub(crate) common: CommonArgs,
    /// `None` only while switching.
    pub(crate) controller: Option<Controller>,
    approver: Arc<dyn Approver>,
    /// What this terminal shows of the session's spend, with the tokens of the controllers it
    /// switched away from.
    pub(crate) spend: SurfaceSpend,
    /// What follows the controller's events for the surface, started again for each controller
    /// (line mode's renderer; the live TUI reads them itself).
    follow: Option<fn(&Controller) -> tokio::task::JoinHandle<()>>,
    following: Option<tokio::task::JoinHandle<()>>,
    pub(crate) signals: StopSignals,
    /// The last turn failed (`keel "PROMPT"` in a script exits 1 then, as `keel run` would).
    pub(crate) last_turn_failed: bool,
}

/// What a person is told on entering plan mode.
pub(crate) const PLAN_MODE_NOTICE: &str = "plan mode: the model researches with read-only tools \
     and proposes a plan; nothing is changed until you approve it";

impl SessionDriver {
    /// A session on `controller`; `follow` (if any) is started on it now and on every
    /// controller a switch opens.
    pub(crate) fn new(
        common: &CommonArgs,
        controller: Controller,
        approver: Arc<dyn Approver>,
        signals: StopSignals,
        follow: Option<fn(&Controller) -> tokio::task::JoinHandle<()>>,
    ) -> SessionDriver {
        SessionDriver {
            common: common.clone(),
            following: follow.map(|start| start(&controller)),
            follow,
            controller: Some(controller),
            approver,
            spend: SurfaceSpend::default(),
            last_turn_failed: false,
            signals,
        }
    }

    /// Stop following the controller's events (the session ends).
    pub(crate) fn stop_following(&mut self) {
        if let Some(following) = self.following.take() {
            following.abort();
        }
    }
}

/// The help text, from the controller's list of slash commands.
fn help_text() -> String {
    let mut text = String::from("commands:\n");
    for (usage, what) in SLASH_COMMANDS {
        if usage.len() <= 20 {
            text.push_str(&format!("  {usage:<22}{what}\n"));
        } else {
            text.push_str(&format!("  {usage}\n  {:<22}{what}\n", ""));
        }
    }
    text.push_str("Ctrl-C cancels a running turn; a second Ctrl-C quits.");
    text
}

/// The session's custom commands, for `/help` (names, descriptions and paths are files'
/// text: shown escaped).
fn custom_help(controller: &Controller, shown: &mut Shown) {
    let commands: Vec<_> = controller.services().commands().list().collect();
    if commands.is_empty() {
        return;
    }
    shown.say("custom commands (prompts; $ARGUMENTS and $1…$9 are what follows the name):");
    for command in commands {
        let what = match &command.description {
            Some(description) => visible_line(description).into_owned(),
            None => visible_line(&command.path.display().to_string()).into_owned(),
        };
        let usage = format!("/{}", command.name);
        shown.say(format!("  {usage:<22}{what}"));
    }
}

/// Every prompt, reasoning block, answer and whole tool result of the session, as lines.
pub(crate) fn transcript_lines(
    controller: &Controller,
    width: usize,
) -> Result<Vec<keel_render::Line>, keel_agent::AgentError> {
    let transcript = controller.transcript()?;
    // The last receipt of each call id (ids may repeat across providers; the latest counts).
    let states: std::collections::HashMap<&str, keel_types::ReceiptState> = transcript
        .receipts
        .iter()
        .map(|receipt| (receipt.call_id.as_str(), receipt.state))
        .collect();
    Ok(keel_tui::transcript_lines(
        transcript.items.iter().map(|stored| &stored.item),
        &|call_id| states.get(call_id).copied(),
        width,
    ))
}

/// A resumed session's recent turns as the person saw them (`keel_tui::resumed`), printed
/// under the banner; nothing for a new session or one with no turn yet.
pub(crate) fn print_where_you_were(
    controller: &Controller,
    common: &CommonArgs,
    colors: keel_render::Colors,
) {
    if common.session.is_none() && !common.continue_latest {
        return;
    }
    let (Ok(transcript), Ok(inputs)) = (controller.transcript(), controller.turn_inputs()) else {
        return;
    };
    let states: std::collections::HashMap<&str, keel_types::ReceiptState> = transcript
        .receipts
        .iter()
        .map(|receipt| (receipt.call_id.as_str(), receipt.state))
        .collect();
    let (columns, rows) = crate::terminal::raw_terminal::screen_size();
    // The banner above and the live region (or the prompt) below keep about eight rows.
    let room = usize::from(rows).saturating_sub(8).max(4);
    let lines = keel_tui::resumed::recent_lines(
        transcript
            .items
            .iter()
            .map(|stored| (stored.turn, &stored.item)),
        &|turn| inputs.get(&turn).copied(),
        &|call_id| states.get(call_id).copied(),
        usize::from(columns),
        room,
    );
    if !lines.is_empty() {
        // Apart from the banner, as each prompt stands apart in the session.
        eprintln!();
        eprint!("{}", keel_render::to_ansi(&lines, colors));
    }
}

/// A new session in a workspace whose files ask for more than the user's settings: ask once,
/// before anything starts; whether the question was asked.
pub(crate) fn ask_trust_first(common: &CommonArgs) -> anyhow::Result<bool> {
    if common.session.is_none() && !common.continue_latest {
        crate::commands::trust::ask_at_start(common, &settings::workspace(common)?)
    } else {
        Ok(false)
    }
}

impl SessionDriver {
    /// The lines a session starts with: model, workspace, session, sandbox, instructions.
    pub(crate) fn banner(&self) -> Shown {
        let mut shown = Shown::new();
        let Some(controller) = &self.controller else {
            return shown;
        };
        let settings = controller.settings();
        // The workspace path and the model name come from outside (a cloned directory, a
        // project file): shown escaped like model text.
        shown.say(format!(
            "keel · {} · {} · session {}",
            visible_line(&format!("{}/{}", settings.profile.name, settings.model)),
            visible_line(&settings.workspace.display().to_string()),
            controller.session().id
        ));
        if let Some(sandbox) = controller.sandbox_summary() {
            shown.say(sandbox);
        }
        // Which instructions the model is given (paths are the repository's text: escaped).
        if let Ok(report) = controller.context_report() {
            let read: Vec<String> = report
                .sources
                .iter()
                .filter(|source| source.kept > 0)
                .map(|source| visible_line(&source.path).into_owned())
                .collect();
            if !read.is_empty() {
                shown.say(format!("instructions {} (/context)", read.join(", ")));
            }
        }
        shown.say("/help for commands, Ctrl-D to quit");
        shown
    }

    /// Run one turn; returns how keel ends if the user asked to quit (a second Ctrl-C) or a
    /// SIGTERM / SIGHUP stopped it (after the turn was cancelled cleanly).
    pub(crate) async fn turn(&mut self, input: Input) -> anyhow::Result<Option<Outcome>> {
        let Some(controller) = self.controller.clone() else {
            eprintln!("error: no session is open; /resume one");
            return Ok(None);
        };
        self.signals.forget_interrupts().await;
        let submit = controller.submit(input);
        tokio::pin!(submit);
        let mut interrupts = 0;
        let mut stopped = None;
        let outcome = loop {
            tokio::select! {
                outcome = &mut submit => break outcome,
                stop = self.signals.next() => {
                    match stop {
                        Stop::Interrupt => {
                            interrupts += 1;
                            if interrupts >= 2 {
                                eprintln!("\nquitting");
                                return Ok(Some(Outcome::Cancelled));
                            }
                            eprintln!("\ncancelling… (Ctrl-C again to quit)");
                        }
                        Stop::Terminate | Stop::Hangup => {
                            eprintln!("\n{} received: cancelling the turn, then exiting", stop.name());
                            stopped = Some(stop);
                        }
                    }
                    controller.cancel();
                }
            }
        };
        // Let the renderer catch up before the next prompt.
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        self.last_turn_failed = !matches!(outcome, Ok(TurnOutcome::Completed { .. }));
        match outcome {
            Ok(TurnOutcome::Completed { .. })
            | Ok(TurnOutcome::Failed { .. })
            | Ok(TurnOutcome::Cancelled) => {}
            Err(error) => eprintln!("error: {}", visible(&error.to_string())),
        }
        Ok(stopped.map(|stop| Outcome::Stopped(stop.exit_code())))
    }

    /// Run a surface command: what to show and how keel ends if it should, a turn to run
    /// (`/plan PROMPT`), or a question to ask first.
    pub(crate) async fn command(&mut self, command: SurfaceCommand) -> anyhow::Result<Reply> {
        let mut shown = Shown::new();
        match command {
            SurfaceCommand::Quit => return Ok(Reply::Done(shown, Some(Outcome::Completed))),
            SurfaceCommand::Plan(prompt) => {
                let Some(controller) = &self.controller else {
                    shown.say("no session is open");
                    return Ok(Reply::Done(shown, None));
                };
                controller.set_permission_mode(keel_tools::PermissionMode::Plan);
                shown.say(PLAN_MODE_NOTICE);
                if let Some(prompt) = prompt {
                    return Ok(Reply::Turn(shown, Input::Prompt(prompt)));
                }
            }
            SurfaceCommand::Status => match &self.controller {
                Some(controller) => crate::slash::reports::status(controller, &mut shown),
                None => shown.say("no session is open"),
            },
            SurfaceCommand::Diff => match &self.controller {
                Some(controller) => crate::slash::reports::diff(controller, &mut shown),
                None => shown.say("no session is open"),
            },
            SurfaceCommand::Permissions => match &self.controller {
                Some(controller) => {
                    crate::slash::reports::permissions(controller, &self.common, &mut shown)
                }
                None => shown.say("no session is open"),
            },
            SurfaceCommand::Clear => {
                let Some(controller) = &self.controller else {
                    shown.say("no session is open");
                    return Ok(Reply::Done(shown, None));
                };
                let old = controller.session().id.clone();
                let mut common = self.common.clone();
                common.session = None;
                common.continue_latest = false;
                common.cwd = Some(controller.settings().workspace.clone());
                self.switch(common, &mut shown).await;
                if let Some(controller) = &self.controller
                    && controller.session().id != old
                {
                    shown.say(format!(
                        "a new session: {}; the last one is kept (/resume {old}, or keel \
                         --session {old})",
                        controller.session().id
                    ));
                }
            }
            SurfaceCommand::Help => {
                shown.say(help_text());
                if let Some(controller) = &self.controller {
                    custom_help(controller, &mut shown);
                }
            }
            SurfaceCommand::Transcript => {
                let width = crate::render::terminal_width();
                match self.controller.as_ref().map(|c| transcript_lines(c, width)) {
                    Some(Ok(lines)) => shown.lines(lines),
                    Some(Err(error)) => {
                        shown.say(format!("error: cannot read the transcript: {error}"))
                    }
                    None => shown.say("no session is open"),
                }
            }
            SurfaceCommand::Cost => {
                let mut usage = self.spend.left_behind();
                let mut context = None;
                let mut spent = None;
                if let Some(controller) = &self.controller {
                    usage.add(&controller.usage());
                    context = controller.window_use();
                    if let Ok(spend) = controller.session_usage() {
                        spent = Some(spend);
                    }
                }
                shown.say(format!(
                    "this terminal: {}",
                    usage_line(&usage, usage.cache_hit_ratio())
                ));
                if let Some(spend) = spent {
                    let money = match spend.cost_display() {
                        Some(cost) => cost,
                        None => "no price known for this model (tokens only; set [providers.NAME.price])".into(),
                    };
                    shown.say(format!(
                        "this session: {} · {money}",
                        usage_line(&spend.usage, spend.usage.cache_hit_ratio())
                    ));
                }
                let by_agent = self.controller.as_ref().map(|c| c.spend_by_agent());
                for (agent, count, spend) in by_agent.and_then(Result::ok).unwrap_or_default() {
                    let money = spend
                        .cost_display()
                        .unwrap_or_else(|| "no price known".into());
                    shown.say(format!(
                        "  of it, subagent {agent} ×{count}: {} · {money}",
                        usage_line(&spend.usage, spend.usage.cache_hit_ratio())
                    ));
                }
                match context {
                    Some(context) => shown.say(format!(
                        "context: {}% of the window ({} of {} tokens); /compact frees it",
                        context.percent(),
                        context.used,
                        context.window
                    )),
                    None => {
                        shown.say("context: not measured yet (or the model's window is unknown)")
                    }
                }
            }
            SurfaceCommand::Fork(at) => {
                let Some(controller) = &self.controller else {
                    shown.say("no session is open");
                    return Ok(Reply::Done(shown, None));
                };
                let id = controller.session().id.clone();
                match open_host()?.fork(&id, at) {
                    Ok(forked) => {
                        shown.say(format!(
                            "forked {id} as {}; now in the fork (files are as they are now)",
                            forked.id
                        ));
                        let common = self.resuming(&forked.id);
                        self.switch(common, &mut shown).await;
                    }
                    Err(error) => shown.error(visible_line(&error.to_string())),
                }
            }
            SurfaceCommand::Rewind {
                to,
                code,
                conversation,
                force,
                pick,
            } => match &self.controller {
                Some(controller) => {
                    let to = match to {
                        None if pick => {
                            let scope = keel_agent::RewindScope { code, conversation };
                            return Ok(crate::slash::rewind::pick_turn(controller, scope, force));
                        }
                        to => to,
                    };
                    crate::slash::rewind::interactive(
                        controller,
                        to,
                        keel_agent::RewindScope { code, conversation },
                        force,
                        &mut shown,
                    );
                }
                None => shown.say("no session is open"),
            },
            SurfaceCommand::Context | SurfaceCommand::ReloadContext => match &self.controller {
                Some(controller) => crate::slash::context::run(
                    controller,
                    command == SurfaceCommand::Context,
                    &mut shown,
                ),
                None => shown.say("no session is open"),
            },
            SurfaceCommand::Jobs(kill) => match &self.controller {
                Some(controller) => match kill {
                    Some(job) => match controller.kill_job(&job).await {
                        Ok(said) => shown.say(visible_line(&said).into_owned()),
                        Err(why) => shown.error(visible_line(&why)),
                    },
                    None => crate::slash::reports::jobs(controller, &mut shown),
                },
                None => shown.say("no session is open"),
            },
            SurfaceCommand::Skills => match &self.controller {
                Some(controller) => crate::slash::reports::skills(controller, &mut shown),
                None => shown.say("no session is open"),
            },
            SurfaceCommand::Agents => match &self.controller {
                Some(controller) => crate::slash::reports::agents(controller, &mut shown),
                None => shown.say("no session is open"),
            },
            SurfaceCommand::Mcp => match &self.controller {
                Some(controller) => {
                    let statuses = controller.services().mcp().statuses();
                    if statuses.is_empty() {
                        shown.say("no MCP servers in this session ([mcp_servers.NAME] in keel.toml, or .mcp.json)");
                    }
                    for status in statuses {
                        shown.say(format!(
                            "{} {} — {}",
                            visible_line(&status.name),
                            status.state,
                            match &status.reason {
                                Some(reason) if status.state != "running" =>
                                    visible_line(reason).into_owned(),
                                _ => format!("{} tools", status.tools.len()),
                            }
                        ));
                    }
                }
                None => shown.say("no session is open"),
            },
            SurfaceCommand::Sessions => {
                let host = open_host()?;
                let Some(controller) = &self.controller else {
                    return Ok(Reply::Done(shown, None));
                };
                let workspace = controller.settings().workspace.display().to_string();
                let sessions = crate::commands::sessions::listed(&host, &workspace)?;
                if sessions.is_empty() {
                    shown.say("no other session here yet: this one is listed once it answered");
                }
                let current = &controller.session().id;
                for (overview, row) in sessions
                    .iter()
                    .zip(crate::commands::sessions::rows(&sessions))
                {
                    let mark = if overview.info.id == *current {
                        "*"
                    } else {
                        " "
                    };
                    shown.say(format!("{mark} {row}"));
                }
                shown.say("/resume ID continues one");
            }
            SurfaceCommand::Model(argument) => match argument {
                None => {
                    // A person at a terminal picks one; otherwise the model is said.
                    if let Some(controller) = &self.controller {
                        return Ok(crate::slash::reports::pick_model(controller, &self.common));
                    }
                }
                Some(model) => {
                    let Some(id) = self.controller.as_ref().map(|c| c.session().id.clone()) else {
                        shown.say("error: no session is open; /resume one");
                        return Ok(Reply::Done(shown, None));
                    };
                    let mut common = self.resuming(&id);
                    common.model = Some(model);
                    common.model_named_by = Some("/model");
                    self.switch(common, &mut shown).await;
                }
            },
            SurfaceCommand::Resume(argument) => match argument {
                None => shown.say("usage: /resume ID (see /sessions)"),
                Some(id) => {
                    let mut common = self.resuming(&id);
                    // Another session keeps its own model unless one is asked for.
                    common.model = None;
                    self.switch(common, &mut shown).await;
                }
            },
        }
        Ok(Reply::Done(shown, None))
    }

    /// The flags of this session with `id` as the session to resume.
    fn resuming(&self, id: &str) -> CommonArgs {
        let mut common = self.common.clone();
        common.session = Some(id.to_string());
        common.continue_latest = false;
        // The session's own workspace decides; the one this REPL started in must not contradict it.
        common.cwd = None;
        common
    }

    /// Replace the controller (model or session change); on failure reopen the current one.
    /// What happened goes into `shown`, ending with the banner of the session now open.
    async fn switch(&mut self, common: CommonArgs, shown: &mut Shown) {
        let setup: Setup = match prepare(&common, "keel (interactive)") {
            Ok(setup) => setup,
            Err(error) => {
                shown.error(visible(&format!("{error:#}")));
                return;
            }
        };
        for notice in &setup.notices {
            shown.say(format!("note: {}", visible(notice)));
        }
        let previous = self
            .controller
            .as_ref()
            .map(|c| self.resuming(&c.session().id));
        if let Some(controller) = &self.controller {
            self.spend.left(&controller.usage());
        }
        // The same session reopened (a model switch) keeps its background jobs; another
        // session's switch ends them with the controller.
        let _kept_jobs = self
            .controller
            .as_ref()
            .filter(|controller| common.session.as_deref() == Some(&*controller.session().id))
            .map(Controller::keep_jobs);
        // Drop the current controller first: it releases the session lease.
        self.controller = None;
        self.stop_following();
        // "always" lasts for one session.
        self.approver.forget_always();
        match self.open(setup, shown) {
            Ok(controller) => {
                self.controller = Some(controller);
                self.common = common;
            }
            Err(error) => {
                shown.error(visible(&format!("{error:#}")));
                let Some(previous) = previous else {
                    return;
                };
                let reopened = prepare(&previous, "keel (interactive)")
                    .and_then(|setup| self.open(setup, shown));
                match reopened {
                    Ok(controller) => self.controller = Some(controller),
                    Err(error) => {
                        shown.say(format!(
                            "error: cannot reopen the session: {}",
                            visible(&format!("{error:#}"))
                        ));
                        return;
                    }
                }
            }
        }
        if let (Some(controller), Some(start)) = (&self.controller, self.follow) {
            self.following = Some(start(controller));
        }
        shown.append(self.banner());
    }

    /// Open a controller on `setup` for this session, saying how its MCP servers came up.
    fn open(&self, setup: Setup, shown: &mut Shown) -> anyhow::Result<Controller> {
        let controller = open_controller_with(setup, self.approver.clone(), McpStart::Wait)?;
        for note in mcp_notes(controller.services().mcp()) {
            shown.say(format!("note: {note}"));
        }
        Ok(controller)
    }
}
