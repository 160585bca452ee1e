//! `keel` on a terminal: the live TUI (`keel_tui`). The session's finished output goes into the
//! terminal's scrollback; the live region at the foot holds the streaming tail, running tools,
//! the approval (one key), queued prompts, the multi-line input and the status line.
//!
//! Invariants:
//! - The terminal is put back (raw mode off, cursor shown) on every way out, a panic included
//!   (its hook does it before the message is printed); the region is cleared on every way out
//!   but a panic, before the resume hint is printed. Leaving while a turn runs cancels it and
//!   waits (bounded) for it to settle.
//! - One turn at a time: what is typed while a turn runs is queued (shown, editable with Up,
//!   cancellable with Esc twice) and sent when the turn ends, unless the turn offered a recovery
//!   (then it waits, shown, for Enter).
//! - Esc on an empty input, or Ctrl-C, during a turn cancels it; what streamed stays on screen,
//!   marked interrupted (never committed). Esc on a typed input clears it (twice), during a turn
//!   too. Ctrl-C twice on an empty input, or Ctrl-D, quits.
//! - An approval is answered by one key, but not by keys pressed in its first `ANSWER_DELAY`
//!   or in a burst of typing that went on as it appeared (typed for the input: only a key
//!   after a pause answers); an approval abandoned by its turn disappears.
//! - A slash command's output is drawn through the view into the scrollback, in the words line
//!   mode prints; only a command's question (a picker) puts the region away while it is asked.

use crate::cli::CommonArgs;
use crate::session_setup::{McpStart, mcp_notes, open_controller_with, prepare, print_notices};
use crate::signals::StopSignals;
use crate::terminal::approval_prompt::TuiApprover;
use crate::terminal::completion::LineHelper;
use crate::terminal::raw_terminal::{
    OSC9_APPROVAL, RawMode, load_history, osc9_supported, read_keys, save_history, screen_size,
};
use crate::terminal::session_driver::SessionDriver;
use crate::{Outcome, settings};
use crossterm::event::{Event as TermEvent, KeyEvent};
use keel_agent::{
    AgentError, Approval, ApprovalRequest, Controller, Line as Parsed, SurfaceCommand, TurnOutcome,
};
use keel_render::{Colors, Style};
use keel_tui::{Action, Focus, InlineSurface, LiveView, Status, action};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

mod answers;
mod programs;
mod slash_commands;

/// Whether the interactive session should be the live TUI.
pub fn wanted(common: &CommonArgs) -> bool {
    use std::io::IsTerminal;
    !common.plain
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal()
        && std::env::var("TERM").map_or(true, |term| term != "dumb")
}

struct Session {
    driver: SessionDriver,
    view: LiveView,
    surface: InlineSurface<std::io::Stdout>,
    colors: Colors,
    events: mpsc::UnboundedReceiver<keel_types::Event>,
    turn: Option<tokio::task::JoinHandle<Result<TurnOutcome, AgentError>>>,
    question: Option<(ApprovalRequest, oneshot::Sender<Approval>)>,
    approver: Arc<TuiApprover>,
    completion: LineHelper,
    paused: Arc<AtomicBool>,
    quit_armed: bool,
    interrupts: u8,
    last_draw: Instant,
    /// Something changed since the last frame.
    dirty: bool,
}

/// The shortest time between two frames (60 a second).
const FRAME: Duration = Duration::from_millis(16);

/// The interactive session; `first` (from `keel "PROMPT"`) is sent as if typed.
pub async fn run(common: &CommonArgs, first: Option<String>) -> anyhow::Result<Outcome> {
    let asked = crate::terminal::session_driver::ask_trust_first(common)?;
    let setup = prepare(common, "keel (interactive)")?;
    print_notices(&setup);
    let (questions, mut asked_rx) = mpsc::unbounded_channel();
    let approver = Arc::new(TuiApprover {
        always: keel_agent::AlwaysAllowed::default(),
        questions,
    });
    // The first frame waits for no MCP server: they start behind it, the first request waits
    // for them, and how they came up is said when it is known.
    let controller = open_controller_with(setup, approver.clone(), McpStart::Background)?;
    // Watched, not held: `/new` or `/resume` drops this session's hub, and its servers with it.
    let mut mcp_starting = (!controller.services().mcp().statuses().is_empty())
        .then(|| Arc::downgrade(controller.services().mcp()));
    let events = controller.subscribe();
    let signals = StopSignals::register()?;
    let driver = SessionDriver::new(common, controller.clone(), approver.clone(), signals, None);
    driver.banner().print(Colors::None);
    eprintln!("Enter sends · Alt+Enter newline · Esc stops · Shift+Tab mode · Ctrl-T transcript");
    let history_path = settings::keel_home()?.join("history.txt");
    let colors = Colors::from_env();
    crate::terminal::session_driver::print_where_you_were(&controller, common, colors);
    let raw = RawMode::enter()?;
    // A panic puts the terminal back before its message is printed.
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = crossterm::terminal::disable_raw_mode();
        let _ = crossterm::execute!(
            std::io::stdout(),
            crossterm::event::DisableBracketedPaste,
            crossterm::cursor::Show
        );
        eprint!("\r\n");
        previous_hook(info);
    }));
    let (columns, rows) = screen_size();
    let row = crossterm::cursor::position().map_or(rows.saturating_sub(1), |(_, row)| row);
    let paused = Arc::new(AtomicBool::new(false));
    let mut keys = read_keys(paused.clone());
    let mut session = Session {
        view: LiveView::new(
            Status::default(),
            load_history(&history_path),
            usize::from(columns),
            usize::from(rows),
        ),
        surface: InlineSurface::new(std::io::stdout(), (columns, rows), row, colors),
        colors,
        driver,
        events,
        turn: None,
        question: None,
        approver,
        completion: LineHelper::for_session(&controller),
        paused,
        quit_armed: false,
        interrupts: 0,
        last_draw: Instant::now()
            .checked_sub(FRAME)
            .unwrap_or_else(Instant::now),
        dirty: true,
    };
    session.view.menu =
        keel_tui::SlashMenu::new(crate::terminal::completion::menu_entries(&controller));
    session.refresh_status();
    if !asked {
        controller.announce();
    }
    // From here the session is the REPL's: `/new` or `/resume` drops it, and its MCP servers.
    drop(controller);
    // `keel "PROMPT"`: sent as if typed (and in the input's history like a typed line).
    let mut ended_at_once = None;
    if let Some(first) = first {
        session.view.editor.set(&first);
        let first = session.view.editor.submit();
        if let Some(command) = session.send(first) {
            ended_at_once = session.run_command(command).await;
        }
    }
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let outcome = loop {
        if let Some(outcome) = ended_at_once.take() {
            break outcome;
        }
        session.drain_events();
        let mcp_hub = mcp_starting.as_ref().and_then(std::sync::Weak::upgrade);
        if mcp_hub.is_none() {
            mcp_starting = None;
        }
        // Only what changed is drawn, at most one frame per `FRAME`: a fast stream is drawn at
        // the screen's pace, not once per delta; the sleep below draws what arrived meanwhile.
        let wait = FRAME.saturating_sub(session.last_draw.elapsed());
        if session.dirty && wait.is_zero() {
            session.draw();
        }
        let pending = session.dirty && !wait.is_zero();
        tokio::select! {
            () = tokio::time::sleep(wait), if pending => {}
            key = keys.recv() => {
                session.dirty = true;
                match key {
                    Some((key, cursor)) => if let Some(outcome) = session.on_terminal_event(key, cursor).await {
                        break outcome;
                    },
                    None => break Outcome::Completed,
                }
            }
            event = session.events.recv() => {
                if let Some(event) = event {
                    session.take_event(&event);
                }
            }
            question = asked_rx.recv() => {
                session.dirty = true;
                if let Some((request, answer)) = question {
                    session.view.ask(&request);
                    session.question = Some((request, answer));
                    // Someone may be in another window: the bell, and a desktop notification
                    // where the terminal shows OSC 9 (fixed text: nothing from the model).
                    // Flushed at once: it rings now, not with the next line of output.
                    use std::io::Write as _;
                    let mut out = std::io::stdout();
                    let _ = write!(out, "{}\u{7}", if osc9_supported() { OSC9_APPROVAL } else { "" });
                    let _ = out.flush();
                }
            }
            finished = async {
                match session.turn.as_mut() {
                    Some(turn) => turn.await,
                    None => std::future::pending().await,
                }
            } => {
                session.turn = None;
                session.dirty = true;
                if let Some(command) = session.turn_ended(finished)
                    && let Some(outcome) = session.run_command(command).await
                {
                    break outcome;
                }
            }
            stop = session.driver.signals.next_terminating() => {
                if let Some(controller) = &session.driver.controller {
                    controller.cancel();
                }
                if let Some(turn) = session.turn.take() {
                    let _ = tokio::time::timeout(Duration::from_secs(5), turn).await;
                }
                session.drain_events();
                session.draw();
                break Outcome::Stopped(stop.exit_code());
            }
            notes = async move {
                match mcp_hub {
                    Some(hub) => {
                        hub.first_start().await;
                        mcp_notes(&hub)
                    }
                    None => std::future::pending().await,
                }
            }, if mcp_starting.is_some() => {
                mcp_starting = None;
                for note in notes {
                    session.view.say(&format!("note: {note}"), Style::fg(keel_render::Color::Yellow));
                }
                session.dirty = true;
            }
            _ = tick.tick() => {
                if session.question.as_ref().is_some_and(|(_, answer)| answer.is_closed()) {
                    session.question = None;
                    session.view.drop_approval();
                    session.dirty = true;
                }
                // A spinner or a running tool's clock moves.
                session.dirty |= session.view.is_ticking();
            }
        }
    };
    // Leaving while a turn runs: it is cancelled and given time to settle its receipts, and
    // what it streamed stays on screen, marked.
    if let Some(turn) = session.turn.take() {
        if let Some(controller) = session.controller() {
            controller.cancel();
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), turn).await;
    }
    // The session ends here, and its background jobs with it (said on its stream).
    if let Some(controller) = session.controller() {
        controller.end_jobs();
    }
    session.drain_events();
    session.draw();
    let _ = session.surface.finish();
    drop(raw);
    save_history(&history_path, session.view.editor.history());
    if let Some(controller) = &session.driver.controller {
        let id = &controller.session().id;
        eprintln!("session {id} is saved · resume it with: keel -c   (or: keel --session {id})");
    }
    Ok(outcome)
}

impl Session {
    fn controller(&self) -> Option<Controller> {
        self.driver.controller.clone()
    }

    fn drain_events(&mut self) {
        while let Ok(event) = self.events.try_recv() {
            self.take_event(&event);
        }
    }

    /// An event of the session: to the view, and to the status line where it changes it.
    fn take_event(&mut self, event: &keel_types::Event) {
        use keel_types::EventBody;
        // A subagent's events come forwarded under its own session id: they are not this
        // session's turn (its busy state, its spend, its scrollback).
        if self
            .driver
            .controller
            .as_ref()
            .is_some_and(|controller| event.session_id != controller.session().id)
        {
            // Its responses count in this turn's spend (the turn's end counts them too); its
            // card shows how far it got.
            if let EventBody::LlmResponse { usage, .. } = &event.body {
                self.count_response(usage);
            }
            self.view.apply_child(event);
            self.dirty = true;
            return;
        }
        match &event.body {
            EventBody::LlmResponse { usage, .. } => self.count_response(usage),
            // Stored now: the session's totals hold the turn.
            EventBody::TurnCompleted { .. } | EventBody::TurnFailed { .. } => {
                self.driver.spend.turn_ended();
                self.refresh_status();
            }
            // A job started or ended: the status line counts the running ones.
            EventBody::JobStarted { .. } | EventBody::JobExited { .. } => self.refresh_status(),
            // An approved plan changed the mode: the status line says so at once.
            EventBody::ToolResult { name, .. }
                if name == keel_tools::BuiltinTool::ProposePlan.name() =>
            {
                self.refresh_status();
            }
            _ => {}
        }
        self.view.apply(event, Instant::now());
        self.dirty = true;
    }

    /// A response of the running turn: its tokens (and cost, priced now) on the status line.
    fn count_response(&mut self, usage: &keel_types::Usage) {
        let Some(controller) = self.controller() else {
            return;
        };
        let settings = controller.settings();
        self.driver
            .spend
            .response(usage, &settings.profile, &settings.model);
        let context_percent = self.view.status.context_percent;
        self.refresh_status();
        // The context is measured between turns; the last figure stays until then.
        if self.view.status.context_percent.is_none() {
            self.view.status.context_percent = context_percent;
        }
    }

    fn draw(&mut self) {
        self.last_draw = Instant::now();
        self.dirty = false;
        let commits = self.view.take_commits();
        let frame = self.view.frame(Instant::now());
        let _ = self.surface.draw(&commits, &frame);
    }

    /// The status line from the controller's figures.
    fn refresh_status(&mut self) {
        let Some(controller) = self.controller() else {
            return;
        };
        let settings = controller.settings();
        let mut status = Status {
            model: format!("{}/{}", settings.profile.name, settings.model),
            mode: controller.permission_mode().as_str().to_string(),
            context_percent: controller
                .window_use()
                .map(|context| u8::try_from(context.percent()).unwrap_or(100)),
            jobs: controller.running_jobs(),
            ..Status::default()
        };
        let busy = self.view.is_busy();
        let spend = self
            .driver
            .spend
            .now(busy, || controller.session_usage().ok());
        if let Some(spend) = spend {
            status.tokens_in = spend.usage.input;
            status.tokens_out = spend.usage.output;
            if spend.usage.cache_hit + spend.usage.cache_miss > 0 {
                status.cache_hit_percent = Some(
                    (spend.usage.cache_hit_ratio() * 100.0)
                        .round()
                        .clamp(0.0, 100.0) as u8,
                );
            }
            status.cost = spend.cost_display();
        }
        self.view.status = status;
    }

    /// The turn ended: say how if it failed, and send the next queued prompt (a queued slash
    /// command is returned, to run).
    fn turn_ended(
        &mut self,
        finished: Result<Result<TurnOutcome, AgentError>, tokio::task::JoinError>,
    ) -> Option<SurfaceCommand> {
        self.drain_events();
        self.view.set_busy(false);
        self.interrupts = 0;
        // "Ctrl-C again quits" was about the turn that just ended.
        self.view.set_notice(None);
        match finished {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => self.view.say(
                &format!("error: {error}"),
                Style::fg(keel_render::Color::Red),
            ),
            Err(error) => self.view.say(
                &format!("error: the turn stopped: {error}"),
                Style::fg(keel_render::Color::Red),
            ),
        }
        self.refresh_status();
        if self.view.queued() > 0 {
            let offered = self
                .controller()
                .is_some_and(|controller| controller.pending_recovery().is_some());
            if offered {
                self.view.set_notice(Some(
                    "the queued prompt waits: this turn offers a recovery (above); Enter on an empty input sends it"
                        .into(),
                ));
            } else if let Some(next) = self.view.next_queued() {
                return self.send(next);
            }
        }
        None
    }

    /// Start a turn with `input` (`shown`: the line as the person typed it).
    fn start_turn(&mut self, input: keel_agent::Input, shown: &str) {
        let Some(controller) = self.controller() else {
            self.view
                .say("error: no session is open; /resume one", Style::PLAIN);
            return;
        };
        self.view.said_by_user(shown);
        self.view.set_busy(true);
        self.view.set_notice(None);
        self.turn = Some(tokio::spawn(async move { controller.submit(input).await }));
    }

    /// Send a prompt (or run a slash command).
    fn send(&mut self, text: String) -> Option<SurfaceCommand> {
        let trimmed = text.trim().to_string();
        let parsed = match self.controller() {
            Some(controller) => controller.parse_line(&trimmed),
            None => Parsed::parse(&trimmed),
        };
        match parsed {
            Parsed::Empty => None,
            Parsed::Input(input) => {
                self.start_turn(input, &trimmed);
                None
            }
            Parsed::Command(SurfaceCommand::Plan(prompt)) => {
                self.enter_plan_mode(prompt, &trimmed);
                None
            }
            Parsed::Command(command) => {
                // Its output goes under the command that made it.
                self.view.said_by_user(&trimmed);
                Some(command)
            }
            Parsed::Unknown(name) => {
                self.view.say(
                    &format!("unknown command `{name}`; /help lists them"),
                    Style::fg(keel_render::Color::Yellow),
                );
                None
            }
        }
    }

    /// Put the region away and give the terminal back in line mode (for `$EDITOR` or a pager).
    fn suspend(&mut self) {
        self.put_region_away();
        crate::terminal::raw_terminal::plain_keys();
        let _ = crossterm::terminal::disable_raw_mode();
    }

    /// Put the region away and stop reading keys, the terminal left raw: the key reader
    /// finishes a poll in progress first.
    fn put_region_away(&mut self) {
        self.draw();
        self.paused.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(60));
        let _ = self.surface.finish();
    }

    fn resume(&mut self) {
        let _ = crossterm::terminal::enable_raw_mode();
        self.take_region_back();
    }

    /// Draw the region again where the cursor now is, and read keys again.
    fn take_region_back(&mut self) {
        // An editor or pager may have turned bracketed paste off as it left.
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableBracketedPaste);
        self.dirty = true;
        let (columns, rows) = screen_size();
        let row = crossterm::cursor::position().map_or(rows.saturating_sub(1), |(_, row)| row);
        self.paused.store(false, Ordering::SeqCst);
        crate::terminal::raw_terminal::enhanced_keys();
        self.surface = InlineSurface::new(std::io::stdout(), (columns, rows), row, self.colors);
        self.view.resize(usize::from(columns), usize::from(rows));
    }

    fn complete(&mut self) {
        // The slash menu's choice, its name (and a space when it takes arguments).
        if let Some(entry) = self.view.menu_choice() {
            let space = if entry.arguments.is_empty() { "" } else { " " };
            self.view.editor.set(&format!("{}{space}", entry.name));
            return;
        }
        let before = self.view.editor.before_cursor().to_string();
        let controller = self.controller();
        let arguments = |command: &str| match &controller {
            Some(controller) => {
                crate::terminal::completion::argument_candidates(controller, command)
            }
            None => Vec::new(),
        };
        let (start, found) = self
            .completion
            .candidates_with(&before, before.len(), &arguments);
        match found.as_slice() {
            [] => {}
            [(_, replacement)] => {
                let replacement = replacement.clone();
                self.view.editor.complete_with(start, &replacement);
                self.view.set_completions(None);
            }
            many => {
                let common = crate::terminal::completion::common_prefix(
                    many.iter().map(|(_, r)| r.as_str()),
                );
                if common.len() > before.len() - start {
                    self.view.editor.complete_with(start, &common);
                }
                let shown: Vec<&str> = many.iter().take(8).map(|(d, _)| d.as_str()).collect();
                let more = if many.len() > 8 {
                    format!(" … {} more", many.len() - 8)
                } else {
                    String::new()
                };
                self.view
                    .set_completions(Some(format!("{}{more}", shown.join("  "))));
            }
        }
    }

    /// One event from the terminal; returns how keel ends if it should.
    async fn on_terminal_event(
        &mut self,
        event: TermEvent,
        cursor: Option<u16>,
    ) -> Option<Outcome> {
        match event {
            TermEvent::Resize(columns, rows) => {
                // Where the terminal moved the cursor as it reflowed the screen.
                self.surface.resize((columns, rows), cursor);
                self.view.resize(usize::from(columns), usize::from(rows));
                None
            }
            TermEvent::Paste(text) => {
                self.view.key_pressed(Instant::now());
                match self.view.focus() {
                    Focus::Note => {
                        if let Some(note) = self.view.note_mut() {
                            note.insert_str(&text.replace('\n', " "));
                        }
                    }
                    Focus::Input => {
                        self.view.editor.paste(&text);
                        self.update_chips();
                    }
                    Focus::Approval | Focus::Search => {}
                }
                None
            }
            TermEvent::Key(key) => self.on_key(&key).await,
            _ => None,
        }
    }

    /// The chips of the files the input mentions (`@path`), looked up in the workspace.
    fn update_chips(&mut self) {
        let Some(controller) = self.controller() else {
            return;
        };
        let chips = controller.mentions(self.view.editor.text());
        self.view.set_chips(chips);
    }

    async fn on_key(&mut self, key: &KeyEvent) -> Option<Outcome> {
        let outcome = self.on_key_action(key).await;
        self.update_chips();
        outcome
    }

    async fn on_key_action(&mut self, key: &KeyEvent) -> Option<Outcome> {
        let focus = self.view.focus();
        let act = action(
            key,
            focus,
            self.view.editor.is_empty(),
            self.view.asking_unconfined(),
        );
        let now = Instant::now();
        let answerable = self.view.answerable(now);
        if act != Action::Ignore {
            self.view.key_pressed(now);
        }
        if !matches!(act, Action::Escape | Action::Ignore) {
            self.view.disarm_escape();
        }
        if !matches!(act, Action::Interrupt | Action::Ignore) {
            self.quit_armed = false;
        }
        if focus == Focus::Search {
            match act {
                Action::Insert(c) => self.view.edit_search(Some(c)),
                Action::Backspace => self.view.edit_search(None),
                Action::HistorySearch => self.view.search_history(),
                Action::Submit => self.view.end_search(true),
                Action::Escape | Action::Interrupt => self.view.end_search(false),
                _ => {}
            }
            return None;
        }
        if focus == Focus::Note {
            self.on_note_key(act);
            return None;
        }
        // Keys typed just as the question appeared were meant for the input, not as answers.
        if focus == Focus::Approval
            && matches!(
                act,
                Action::Allow | Action::Deny | Action::DenyWithNote | Action::Always
            )
            && !answerable
        {
            self.view.set_notice(Some(
                "that key came with others or as the question appeared: press it again to answer"
                    .into(),
            ));
            return None;
        }
        match act {
            Action::Allow | Action::Deny | Action::DenyWithNote | Action::Always => {
                self.on_answer_key(act);
            }
            Action::ShowAll => self.question_in_pager(),
            Action::Insert(c) => self.view.editor.insert(c),
            Action::Newline => self.view.editor.newline(),
            Action::Backspace => self.view.editor.backspace(),
            Action::Delete => self.view.editor.delete(),
            Action::Left => self.view.editor.left(),
            Action::Right => self.view.editor.right(),
            Action::Home => self.view.editor.home(),
            Action::End => self.view.editor.end(),
            Action::KillToStart => self.view.editor.kill_to_start(),
            Action::Up if self.view.menu_open() => {
                let text = self.view.editor.text().to_string();
                self.view.menu.step(&text, -1);
            }
            Action::Down if self.view.menu_open() => {
                let text = self.view.editor.text().to_string();
                self.view.menu.step(&text, 1);
            }
            Action::Escape if self.view.menu_open() => {
                let text = self.view.editor.text().to_string();
                self.view.menu.close(&text);
            }
            Action::Up => {
                if self.view.editor.is_empty()
                    && let Some(last) = self.view.unqueue_last()
                {
                    self.view.editor.set(&last);
                } else {
                    self.view.editor.up();
                }
            }
            Action::Down => self.view.editor.down(),
            Action::Complete => self.complete(),
            Action::Submit => {
                // With the menu open, Enter takes its choice (`/st` Enter runs `/status`); a
                // command typed whole is that command.
                if let Some(entry) = self.view.menu_choice()
                    && !self.view.menu.knows(self.view.editor.text())
                {
                    self.view.editor.set(&entry.name);
                }
                let text = self.view.editor.submit();
                if text.trim().is_empty() {
                    if !self.view.is_busy()
                        && let Some(next) = self.view.next_queued()
                    {
                        self.view.set_notice(None);
                        if let Some(command) = self.send(next) {
                            return self.run_command(command).await;
                        }
                    }
                    return None;
                }
                // `/jobs` answers during a turn too (it only reads the jobs, or stops one).
                if self.view.is_busy() && !is_jobs_command(&text) {
                    self.view.queue(text);
                    return None;
                }
                if let Some(command) = self.send(text) {
                    return self.run_command(command).await;
                }
            }
            // Typing: Esc clears the input (twice), also while a turn runs; on an empty input
            // it stops the running turn.
            Action::Escape => {
                if self.view.is_busy() && self.view.editor.is_empty() {
                    self.cancel_turn();
                } else {
                    self.view.escape();
                }
            }
            Action::Interrupt => {
                if self.view.is_busy() {
                    self.interrupts += 1;
                    if self.interrupts >= 2 {
                        return Some(Outcome::Cancelled);
                    }
                    self.cancel_turn();
                    self.view
                        .set_notice(Some("stopping the turn… (Ctrl-C again quits)".into()));
                } else if !self.view.editor.is_empty() {
                    self.view.editor.clear();
                } else if self.quit_armed {
                    return Some(Outcome::Completed);
                } else {
                    self.quit_armed = true;
                    self.view
                        .set_notice(Some("Ctrl-C again (or Ctrl-D) quits".into()));
                }
            }
            Action::Quit => return Some(Outcome::Completed),
            Action::Transcript => self.transcript(),
            Action::HistorySearch => self.view.search_history(),
            Action::ExternalEditor => self.external_editor(),
            Action::CycleMode => self.cycle_mode(),
            Action::Ignore => {}
        }
        None
    }

    fn cancel_turn(&mut self) {
        if let Some(controller) = self.controller() {
            controller.cancel();
        }
    }
}

/// Whether a typed line is `/jobs` (which runs at once, even while a turn runs).
fn is_jobs_command(text: &str) -> bool {
    let trimmed = text.trim();
    trimmed == "/jobs" || trimmed.starts_with("/jobs ")
}
