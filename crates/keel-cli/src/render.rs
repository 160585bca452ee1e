//! Rendering events for a person (terminal or pipe) or for a program (`--json`).
//!
//! Invariants:
//! - `--json` prints every event, one JSON object per line, in the order received.
//! - Provisional text never survives a failed attempt: on a terminal it is erased when the
//!   retry is announced; on a pipe nothing is printed until the attempt's `llm/response`.
//! - The answer goes to stdout; reasoning (when piped), notices, usage and errors to stderr,
//!   so `keel run … > answer.txt` captures exactly the answer. A headless run in plan mode
//!   ends with the plan the model proposed: that plan is its answer.
//! - Styling only on a terminal, and never when `NO_COLOR` is set.
//! - Text from the model, tools and providers goes through `keel_render` first: no control
//!   sequence of theirs reaches the terminal.

use crate::terminal::live_answer::LiveAnswer;
use crossterm::style::{Attribute, SetAttribute};
use keel_render::{Colors, visible, visible_line};
use keel_types::{Event, EventBody, FailureKind};
use std::io::{IsTerminal, Write};
use unicode_width::UnicodeWidthStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Json,
    /// Stream deltas as they come (the answer rendered as markdown) and erase them if the
    /// attempt fails.
    Live {
        colors: Colors,
    },
    /// Print each answer once it is complete.
    Committed,
}

pub struct Renderer {
    mode: Mode,
    /// The reasoning this attempt printed live (and the gap after it), to erase it on a retry.
    shown: String,
    shown_kind: Option<Shown>,
    /// The answer this attempt printed live, rendered.
    answer: LiveAnswer,
    pending_text: String,
    pending_reasoning: String,
    /// Whether to print how to continue the session (not for the demo's private session).
    session_hints: bool,
    /// Shown on a terminal while waiting for the provider's first byte.
    spinner: Option<indicatif::ProgressBar>,
    /// Nobody is asked (`keel run`): a proposed plan is printed as the answer.
    plans_as_answers: bool,
    /// An offer to go on was printed and still stands (only then is its expiry said).
    offer_said: bool,
    /// The session whose turn this prints; another's events are a subagent's (`--json` prints
    /// them as they are; people see one line per tool call it makes).
    own_session: Option<String>,
    /// Each subagent's session and its agent, as `agent/started` said.
    children: std::collections::HashMap<String, String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shown {
    Reasoning,
    Text,
}

impl Renderer {
    pub fn new(json: bool) -> Renderer {
        let mode = if json {
            Mode::Json
        } else if std::io::stdout().is_terminal() {
            Mode::Live {
                colors: Colors::from_env(),
            }
        } else {
            Mode::Committed
        };
        Renderer {
            mode,
            shown: String::new(),
            shown_kind: None,
            answer: LiveAnswer::new(Colors::None),
            pending_text: String::new(),
            pending_reasoning: String::new(),
            session_hints: true,
            offer_said: false,
            spinner: None,
            plans_as_answers: false,
            own_session: None,
            children: std::collections::HashMap::new(),
        }
    }

    /// The renderer of session `id`'s turns: events of other sessions (its subagents') are
    /// shown as theirs.
    pub fn for_session(mut self, id: &str) -> Renderer {
        self.own_session = Some(id.to_string());
        self
    }

    /// A subagent's event, for a person: one dim line per tool call it makes, under its
    /// `task` card (its answer comes back as the card's result).
    fn child_event(&mut self, event: &Event) {
        if let EventBody::ToolCall {
            name,
            arguments,
            subject,
            ..
        } = &event.body
        {
            self.end_live_line();
            let agent = self
                .children
                .get(&event.session_id)
                .map_or("subagent", String::as_str);
            let shown = keel_tui::cards::call_subject(name, arguments, subject.as_deref());
            eprintln!(
                "  · [{}] {} {shown}",
                visible_line(agent),
                visible_line(name)
            );
        }
    }

    /// For a run nobody is asked in: a plan the model proposes is printed as the answer, and
    /// an offered recovery is said as the command that runs it (after the turn), not as a
    /// slash command.
    pub fn plans_as_answers(mut self) -> Renderer {
        self.plans_as_answers = true;
        self
    }

    /// For sessions the user cannot reach with `--session` (the demo's).
    pub fn without_session_hints(mut self) -> Renderer {
        self.session_hints = false;
        self
    }

    pub fn session_hints(&self) -> bool {
        self.session_hints
    }

    /// A hint for people (stderr, never in `--json` mode).
    pub fn hint(&self, text: &str) {
        if self.mode != Mode::Json {
            eprintln!("{text}");
        }
    }

    pub fn emit(&mut self, event: &Event) {
        if self.mode == Mode::Json {
            if let Ok(line) = serde_json::to_string(event) {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{line}");
                let _ = stdout.flush();
            }
            return;
        }
        if self
            .own_session
            .as_ref()
            .is_some_and(|own| *own != event.session_id)
        {
            self.child_event(event);
            return;
        }
        if let EventBody::AgentStarted {
            child_session_id,
            agent,
            ..
        } = &event.body
        {
            self.children
                .insert(child_session_id.clone(), agent.clone());
        }
        self.stop_spinner();
        match &event.body {
            EventBody::RecoveryOffered { .. } => {
                self.offer_said = !(self.plans_as_answers && self.session_hints);
            }
            EventBody::RecoveryConsumed { .. } => self.offer_said = false,
            _ => {}
        }
        match &event.body {
            EventBody::LlmRequest { attempt, .. } => {
                self.start_attempt();
                self.start_spinner(*attempt);
            }
            EventBody::LlmReasoning { delta } => self.delta(Shown::Reasoning, delta),
            EventBody::LlmText { delta } => self.delta(Shown::Text, delta),
            EventBody::LlmRetry { .. } | EventBody::AccountRotated { .. } => {
                self.discard_attempt();
                if let Some(text) = keel_tui::notice(&event.body) {
                    eprintln!("{text}");
                }
            }
            EventBody::LlmResponse { .. } => self.commit_attempt(),
            EventBody::TurnCompleted { .. } => {
                self.end_live_line();
                if let Some(text) = keel_tui::notice(&event.body) {
                    eprintln!("{text}");
                }
            }
            EventBody::TurnFailed { diagnostic, .. } => match diagnostic.kind {
                FailureKind::Cancelled => {
                    // What streamed stays on screen, marked (it is never committed).
                    let streamed = self.keep_attempt();
                    if streamed {
                        eprintln!("⏹ stopped — kept on screen; the model is told you stopped it, not what it wrote");
                    } else {
                        eprintln!("⏹ stopped");
                    }
                }
                _ => {
                    self.discard_attempt();
                    eprintln!("error: {}", visible(&diagnostic.plain()));
                }
            },
            EventBody::ToolCall {
                name,
                arguments,
                subject,
                ..
            } => {
                self.end_live_line();
                let shown = keel_tui::cards::call_subject(name, arguments, subject.as_deref());
                eprintln!("● {} {shown}", visible_line(name));
            }
            EventBody::ToolResult {
                name,
                state,
                summary,
                output,
                tail,
                lines,
                ..
            } => {
                let said = keel_tui::cards::result_summary(*state, summary);
                eprintln!("  ⎿ {state} · {}", visible_line(said));
                if keel_tui::cards::shows_output(name, *state) {
                    let text = keel_tui::cards::output_end(output, tail);
                    let shown = keel_tui::cards::folded_tail(text, *lines, terminal_width());
                    let dim = matches!(self.mode, Mode::Live { colors } if colors != Colors::None);
                    for line in shown {
                        if dim {
                            eprintln!(
                                "{}{line}{}",
                                SetAttribute(Attribute::Dim),
                                SetAttribute(Attribute::Reset)
                            );
                        } else {
                            eprintln!("{line}");
                        }
                    }
                }
            }
            EventBody::ContextCompacted { .. }
            | EventBody::SearchResult { .. }
            | EventBody::PrefixChanged { .. } => {
                self.end_live_line();
                if let Some(text) = keel_tui::notice(&event.body) {
                    eprintln!("{text}");
                }
            }
            // A headless run prints the exact command to run it when the turn ends.
            EventBody::RecoveryOffered { .. } if self.plans_as_answers && self.session_hints => {}
            // The expiry of an offer nobody saw is not news.
            EventBody::RecoveryExpired { .. } if !std::mem::take(&mut self.offer_said) => {}
            EventBody::RecoveryOffered { .. }
            | EventBody::RecoveryConsumed { .. }
            | EventBody::RecoveryExpired { .. }
            | EventBody::SnapshotFailed { .. }
            | EventBody::SnapshotPruned { .. }
            | EventBody::ProviderSaid { .. }
            | EventBody::JobStarted { .. }
            | EventBody::JobExited { .. }
            | EventBody::HookRan { .. }
            | EventBody::TrustIgnored(_) => {
                self.end_live_line();
                if let Some(text) = keel_tui::notice(&event.body) {
                    eprintln!("{text}");
                }
            }
            EventBody::ApprovalRequested { name, subject, .. }
                if self.plans_as_answers
                    && name == keel_tools::BuiltinTool::ProposePlan.name() =>
            {
                self.start_attempt();
                self.delta(Shown::Text, subject);
                self.commit_attempt();
            }
            EventBody::ToolStarted {
                read_only: true, ..
            } => {
                self.end_live_line();
                eprintln!("  · read-only: runs confined to reading");
            }
            EventBody::SessionStarted { .. }
            | EventBody::HistoryRewritten { .. }
            | EventBody::SessionRewound { .. }
            // A subagent is its `task` call's card: the call and its result say it.
            | EventBody::AgentStarted { .. }
            | EventBody::AgentFinished { .. }
            | EventBody::TurnStarted { .. }
            | EventBody::ApprovalRequested { .. }
            | EventBody::ToolStarted { .. }
            // Line mode shows a command's output under its card when it ends.
            | EventBody::ToolOutput { .. }
            | EventBody::ToolPreview { .. } => {}
        }
    }

    fn start_spinner(&mut self, attempt: u32) {
        if matches!(self.mode, Mode::Live { .. }) {
            let spinner = indicatif::ProgressBar::new_spinner();
            spinner.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            let waiting = if attempt > 1 {
                format!("waiting for the model (attempt {attempt})")
            } else {
                "waiting for the model".into()
            };
            spinner.set_message(waiting);
            spinner.enable_steady_tick(std::time::Duration::from_millis(100));
            self.spinner = Some(spinner);
        }
    }

    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    fn start_attempt(&mut self) {
        self.shown.clear();
        self.shown_kind = None;
        if let Mode::Live { colors } = self.mode {
            self.answer = LiveAnswer::new(colors);
        }
        self.pending_text.clear();
        self.pending_reasoning.clear();
    }

    fn delta(&mut self, kind: Shown, delta: &str) {
        match self.mode {
            Mode::Json => {}
            // Piped: stdout gets the answer as text (newlines and tabs kept, every other
            // control character visible); reasoning goes to stderr, which may be a terminal.
            Mode::Committed => match kind {
                Shown::Reasoning => self.pending_reasoning.push_str(&visible(delta)),
                Shown::Text => self.pending_text.push_str(&visible(delta)),
            },
            Mode::Live { colors } => {
                let mut out = String::new();
                if self.shown_kind == Some(Shown::Reasoning) && kind == Shown::Text {
                    out.push_str("\n\n");
                    self.shown.push_str("\n\n");
                }
                match kind {
                    Shown::Reasoning => {
                        let text = visible(delta);
                        let dim = colors != Colors::None;
                        if dim {
                            out.push_str(&SetAttribute(Attribute::Dim).to_string());
                        }
                        out.push_str(&text);
                        if dim {
                            out.push_str(&SetAttribute(Attribute::Reset).to_string());
                        }
                        self.shown.push_str(&text);
                    }
                    Shown::Text => {
                        let (width, height) = terminal_size();
                        out.push_str(&self.answer.push(delta, width, height));
                    }
                }
                let mut stdout = std::io::stdout().lock();
                let _ = write!(stdout, "{out}");
                let _ = stdout.flush();
                self.shown_kind = Some(kind);
            }
        }
    }

    /// Drop what the failed attempt streamed.
    fn discard_attempt(&mut self) {
        let streamed = !self.shown.is_empty() || !self.answer.is_empty();
        if matches!(self.mode, Mode::Live { .. }) && streamed {
            let rows = screen_rows(&self.shown) - 1 + self.answer.rows();
            let mut stdout = std::io::stdout().lock();
            let _ = crossterm::queue!(stdout, crossterm::cursor::MoveToColumn(0));
            if rows > 0 {
                let up = u16::try_from(rows).unwrap_or(u16::MAX);
                let _ = crossterm::queue!(stdout, crossterm::cursor::MoveUp(up));
            }
            let _ = crossterm::queue!(
                stdout,
                crossterm::terminal::Clear(crossterm::terminal::ClearType::FromCursorDown)
            );
            let _ = stdout.flush();
        }
        self.start_attempt();
    }

    /// Leave what the attempt streamed on screen, the answer's open block rendered for good;
    /// whether anything had streamed.
    fn keep_attempt(&mut self) -> bool {
        let streamed = !self.shown.is_empty() || !self.answer.is_empty();
        if matches!(self.mode, Mode::Live { .. }) {
            let (width, height) = terminal_size();
            let rest = self.answer.finish(width, height);
            let mut stdout = std::io::stdout().lock();
            let _ = write!(stdout, "{rest}");
            let _ = stdout.flush();
        }
        self.end_live_line();
        self.start_attempt();
        streamed
    }

    /// The attempt completed: what it streamed is now the answer.
    fn commit_attempt(&mut self) {
        if self.mode == Mode::Committed {
            if !self.pending_reasoning.is_empty() {
                eprintln!("{}", self.pending_reasoning);
            }
            if !self.pending_text.is_empty() {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{}", self.pending_text);
                let _ = stdout.flush();
            }
        }
        self.keep_attempt();
    }

    /// End a line of reasoning left open (the answer always ends at the start of a row).
    fn end_live_line(&mut self) {
        if matches!(self.mode, Mode::Live { .. }) && self.shown_kind == Some(Shown::Reasoning) {
            println!();
            self.shown.clear();
            self.shown_kind = None;
        }
    }
}

/// The terminal's columns (80 when it cannot say).
pub fn terminal_width() -> usize {
    terminal_size().0
}

/// The terminal's columns and rows (80 × 24 when it cannot say, or says 0).
fn terminal_size() -> (usize, usize) {
    match crossterm::terminal::size() {
        Ok((width, height)) if width > 0 && height > 0 => (usize::from(width), usize::from(height)),
        _ => (80, 24),
    }
}

/// How many terminal rows `text` occupies, wrapping at the terminal width.
fn screen_rows(text: &str) -> usize {
    let width = terminal_size().0;
    text.split('\n')
        .map(|line| line.width().div_ceil(width).max(1))
        .sum()
}

pub use keel_tui::usage_line;

/// Styles on stderr only where it is a terminal that shows them.
pub fn stderr_colors() -> Colors {
    if std::io::stderr().is_terminal() {
        Colors::from_env()
    } else {
        Colors::None
    }
}
