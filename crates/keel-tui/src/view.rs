//! The live region's state and what it shows: the attempt streaming now, running tool cards,
//! queued prompts, the approval or the input, a notice and the status line. Events from the
//! session change it; what is finished becomes lines for the terminal's scrollback.
//!
//! Invariants:
//! - An attempt's blocks go to the scrollback as they settle (`StreamedAnswer::take_settled`);
//!   the region holds only the open block. If the attempt then fails, one line under what was
//!   written says it is discarded (unseen by the model: docs/configuration.md#retries); the retry
//!   streams below; what had not settled is dropped with the attempt.
//! - The answer's share of the region is at most a third of the screen (`ANSWER_SHARE`), so a
//!   terminal that narrows and reflows the region pushes none of it into the scrollback.
//! - Finished things (answers, ended cards, notices, the question of an approval with its
//!   diff) leave through `take_commits` exactly once, in the order they happened.
//! - `frame` never returns more lines than the screen has rows, and every line fits the width:
//!   the answer's tail gives way first; the status line and the input (or the approval's keys)
//!   are always shown.

use crate::answer::StreamedAnswer;
use crate::approval::{Question, change_lines};
use crate::cards::{self, Call, Ended};
use crate::editor::Editor;
use crate::keymap::Focus;
use crate::notices::notice;
use crate::rows::{fit, wrapped};
use crate::status::{Status, Working, estimate_tokens};
use keel_render::{Color, Line, Span, Style};
use keel_types::ApprovalRequest;
use keel_types::{Event, EventBody, FailureKind, ReceiptState};
use std::collections::VecDeque;
use std::time::Instant;

/// The most lines of reasoning shown while it streams (all of it is in the transcript).
const REASONING_SHOWN: usize = 3;
/// The answer's open block may take at most 1/`ANSWER_SHARE` of the screen's rows.
const ANSWER_SHARE: usize = 3;
/// The most queued prompts listed (the rest are counted).
const QUEUED_SHOWN: usize = 3;
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// What the region shows, top to bottom, and where the cursor is (column, row).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    pub lines: Vec<Line>,
    pub cursor: Option<(u16, u16)>,
}

struct Running {
    call: Call,
    since: Instant,
    asked: bool,
    /// The end of what it printed so far (at most `RECENT_BYTES`).
    recent: String,
    /// What a write or an edit allowed without a question changes (before, after).
    change: Option<(Option<String>, String)>,
}

/// The most diff lines a write's card shows (the rest is counted; the transcript has all).
const CARD_DIFF_LINES: usize = 40;

/// How much of a running command's output is kept for its card.
const RECENT_BYTES: usize = 4096;

pub struct LiveView {
    pub status: Status,
    pub editor: Editor,
    width: usize,
    rows: usize,
    reasoning: String,
    answer: StreamedAnswer,
    /// A request was sent and nothing has streamed back yet: since when, which attempt.
    waiting: Option<(Instant, u32)>,
    /// The attempt streaming now (the last `llm/request`'s).
    attempt: u32,
    /// An offer to go on (`recovery/offered`) was said here and is still standing: only then
    /// is its expiry worth a word.
    offer_said: bool,
    /// The turn running now: when it started, and the output tokens its finished requests
    /// reported.
    turn: Option<(Instant, u64)>,
    /// An estimate of the output tokens the attempt streaming now has sent so far.
    attempt_tokens: u64,
    running: Vec<Running>,
    /// Each running subagent's session: its `task` call and the rounds it finished.
    children: std::collections::HashMap<String, (String, u32)>,
    approval: Option<Question>,
    /// The change the approval on screen is about (a write's or an edit's), and its diff's
    /// lines at the width they were made for.
    asked_change: Option<(keel_types::Preview, usize, Vec<Line>)>,
    /// The call the approval on screen is about (its card may be announced after the question:
    /// the two come over different channels).
    asked_call: Option<String>,
    note: Option<Editor>,
    queued: VecDeque<String>,
    notice: Option<String>,
    commits: Vec<Line>,
    busy: bool,
    /// Esc was pressed once at a non-empty input.
    escape_armed: bool,
    /// Ctrl-R: what is searched for, and the history entry it found.
    search: Option<(String, Option<usize>)>,
    /// The files the input mentions (`@path`) and whether each exists: shown as chips.
    chips: Vec<(String, bool)>,
    /// When the approval on screen appeared (keys typed just before are not answers).
    asked_at: Option<Instant>,
    /// When the last key (or paste) came.
    last_key: Option<Instant>,
    /// The slash commands, shown under the input while a `/command` is typed.
    pub menu: crate::SlashMenu,
    /// Tab's candidates, and the input they were for: shown only while it is unchanged.
    completions: Option<(String, String)>,
}

/// How long after an approval appears its keys start to count: someone typing the next
/// prompt as the question shows up must not answer it by accident.
pub const ANSWER_DELAY: std::time::Duration = std::time::Duration::from_millis(300);

impl LiveView {
    pub fn new(status: Status, history: Vec<String>, width: usize, rows: usize) -> LiveView {
        LiveView {
            status,
            editor: Editor::new(history),
            width: width.max(10),
            rows: rows.max(3),
            reasoning: String::new(),
            answer: StreamedAnswer::new(width.max(10)),
            waiting: None,
            attempt: 1,
            offer_said: false,
            turn: None,
            attempt_tokens: 0,
            running: Vec::new(),
            children: std::collections::HashMap::new(),
            approval: None,
            asked_change: None,
            asked_call: None,
            note: None,
            queued: VecDeque::new(),
            notice: None,
            commits: Vec::new(),
            busy: false,
            escape_armed: false,
            search: None,
            chips: Vec::new(),
            asked_at: None,
            last_key: None,
            menu: crate::SlashMenu::default(),
            completions: None,
        }
    }

    /// Tab's candidates for what the input holds now (gone once it changes).
    pub fn set_completions(&mut self, shown: Option<String>) {
        self.completions = shown.map(|shown| (self.editor.text().to_string(), shown));
    }

    /// Whether the slash menu is open over the input.
    pub fn menu_open(&self) -> bool {
        self.focus() == Focus::Input
            && self
                .menu
                .matches(self.editor.text(), self.cursor_at_end())
                .is_some()
    }

    /// The command the slash menu has selected, when it is open.
    pub fn menu_choice(&self) -> Option<crate::MenuEntry> {
        if self.focus() != Focus::Input {
            return None;
        }
        self.menu
            .selected(self.editor.text(), self.cursor_at_end())
            .cloned()
    }

    /// The cursor ends what is typed (not a history entry being browsed): where the slash
    /// menu may open.
    fn cursor_at_end(&self) -> bool {
        !self.editor.is_browsing() && self.editor.before_cursor().len() == self.editor.text().len()
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn resize(&mut self, width: usize, rows: usize) {
        self.width = width.max(10);
        self.rows = rows.max(3);
        self.answer.set_width(self.width);
    }

    pub fn focus(&self) -> Focus {
        match (&self.approval, &self.note) {
            (Some(_), Some(_)) => Focus::Note,
            (Some(_), None) => Focus::Approval,
            _ if self.search.is_some() => Focus::Search,
            _ => Focus::Input,
        }
    }

    /// Whether the approval waiting (if any) is for a run outside the sandbox.
    pub fn asking_unconfined(&self) -> bool {
        self.approval.as_ref().is_some_and(|q| q.unconfined)
    }

    pub fn is_busy(&self) -> bool {
        self.busy
    }

    /// Whether something on screen moves with the clock (a spinner, an elapsed time).
    pub fn is_ticking(&self) -> bool {
        self.waiting.is_some() || !self.running.is_empty()
    }

    pub fn set_busy(&mut self, busy: bool) {
        self.busy = busy;
        if !busy {
            self.waiting = None;
            self.running.clear();
        }
    }

    pub fn set_notice(&mut self, notice: Option<String>) {
        self.notice = notice;
    }

    /// The files the input mentions, each with whether it exists (the caller looks).
    pub fn set_chips(&mut self, chips: Vec<(String, bool)>) {
        self.chips = chips;
    }

    /// Ctrl-R: start a history search, or go on to the next older match.
    pub fn search_history(&mut self) {
        match &mut self.search {
            None => self.search = Some((String::new(), self.editor.search("", None))),
            Some((query, found)) => {
                if let Some(older) = self.editor.search(query, *found) {
                    *found = Some(older);
                }
            }
        }
    }

    /// A character typed into, or taken from (`None`), the search.
    pub fn edit_search(&mut self, typed: Option<char>) {
        if let Some((query, found)) = &mut self.search {
            match typed {
                Some(c) => query.push(c),
                None => {
                    query.pop();
                }
            }
            *found = self.editor.search(query, None);
        }
    }

    /// Enter: the match becomes the input (to edit or send); Esc: the input stays as it was.
    pub fn end_search(&mut self, accept: bool) {
        if let Some((_, Some(found))) = self.search.take()
            && accept
            && let Some(entry) = self.editor.entry(found).map(str::to_string)
        {
            self.editor.set(&entry);
        }
    }

    /// Esc at the input: the first press arms, the second clears. Returns whether it cleared.
    pub fn escape(&mut self) -> bool {
        if self.editor.is_empty() {
            self.escape_armed = false;
            return false;
        }
        if self.escape_armed {
            self.editor.clear();
            self.escape_armed = false;
            self.notice = None;
            return true;
        }
        self.escape_armed = true;
        self.notice = Some(if self.busy {
            "Esc again clears the input (Esc on an empty input stops the turn)".into()
        } else {
            "Esc again clears the input".into()
        });
        false
    }

    /// Any other key disarms Esc.
    pub fn disarm_escape(&mut self) {
        if self.escape_armed {
            self.escape_armed = false;
            self.notice = None;
        }
    }

    /// Lines for the scrollback: `text` (several lines allowed), wrapped, in `style`.
    pub fn say(&mut self, text: &str, style: Style) {
        let lines = wrapped(text, self.width, style);
        self.commits.extend(lines);
    }

    /// Lines styled already (a command's diff), into the scrollback as they are.
    pub fn commit(&mut self, lines: Vec<Line>) {
        self.commits.extend(lines);
    }

    /// The person's prompt, as sent, into the scrollback.
    pub fn said_by_user(&mut self, text: &str) {
        self.commits.push(Line::empty());
        let mut first = true;
        for line in wrapped(text, self.width.saturating_sub(2), Style::PLAIN.bold()) {
            let prefix = if first { "› " } else { "  " };
            first = false;
            self.commits
                .push(line.prefixed(&[Span::new(prefix, Style::fg(Color::Cyan).bold())]));
        }
    }

    pub fn queue(&mut self, text: String) {
        self.queued.push_back(text);
    }

    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    pub fn next_queued(&mut self) -> Option<String> {
        self.queued.pop_front()
    }

    /// The last queued prompt, taken back to edit.
    pub fn unqueue_last(&mut self) -> Option<String> {
        self.queued.pop_back()
    }

    /// An approval waits: one block in the region says what it is about, why, the change and
    /// the keys (`Question::block_lines`); its call's card is not drawn meanwhile.
    pub fn ask(&mut self, request: &ApprovalRequest) {
        let question = Question::new(request);
        self.asked_change = request
            .preview
            .clone()
            .map(|preview| (preview, 0, Vec::new()));
        if let Some(running) = self
            .running
            .iter_mut()
            .find(|running| running.call.call_id == request.call_id)
        {
            running.asked = true;
        }
        self.asked_call = Some(request.call_id.clone());
        self.approval = Some(question);
        self.note = None;
        self.asked_at = Some(std::time::Instant::now());
    }

    /// Whether a key pressed at `now` may answer the approval on screen: it has been shown for
    /// `ANSWER_DELAY`, and the key follows a pause as long (a key in a burst of typing that
    /// went on as the question appeared was meant for the input, however long the burst).
    pub fn answerable(&self, now: Instant) -> bool {
        let quiet_since = |at: Option<Instant>| {
            at.is_none_or(|at| now.saturating_duration_since(at) >= ANSWER_DELAY)
        };
        quiet_since(self.asked_at) && quiet_since(self.last_key)
    }

    /// A key was pressed (or text pasted) at `at`; ask `answerable` first.
    pub fn key_pressed(&mut self, at: Instant) {
        self.last_key = Some(at);
    }

    /// `N` at an approval: the note is typed next.
    pub fn start_note(&mut self) {
        if self.approval.is_some() {
            self.note = Some(Editor::default());
        }
    }

    pub fn note_mut(&mut self) -> Option<&mut Editor> {
        self.note.as_mut()
    }

    /// The approval was answered: its block becomes one line in the scrollback saying what it
    /// was about and `answer`.
    pub fn answered(&mut self, answer: &str) {
        if let Some(question) = self.approval.take() {
            let allowed = answer.starts_with("allowed") || answer.starts_with("plan approved");
            let (mark, color) = if allowed {
                ("✓ ", Color::Green)
            } else {
                ("✗ ", Color::Yellow)
            };
            let line = Line::new(vec![
                Span::new(mark, Style::fg(color)),
                Span::plain(&question.about()),
                Span::new(&format!(" · {answer}"), Style::PLAIN.dim()),
            ]);
            self.commits.push(fit(line, self.width));
        }
        self.asked_change = None;
        self.approval = None;
        self.asked_call = None;
        self.note = None;
        for running in &mut self.running {
            running.asked = false;
        }
    }

    /// Everything the approval waiting is about, never cut (for the pager).
    pub fn asked_in_full(&self) -> Option<Vec<Line>> {
        let question = self.approval.as_ref()?;
        let change = match &self.asked_preview() {
            Some(preview) => change_lines(Some(preview), self.width),
            None => Vec::new(),
        };
        Some(question.all_lines(&change, self.width))
    }

    fn asked_preview(&self) -> Option<keel_types::Preview> {
        self.asked_change
            .as_ref()
            .map(|(preview, _, _)| preview.clone())
    }

    /// The approval went away without an answer (the turn was cancelled).
    pub fn drop_approval(&mut self) {
        if let Some(question) = self.approval.take() {
            let line = Line::new(vec![
                Span::new("✗ ", Style::fg(Color::Yellow)),
                Span::plain(&question.about()),
                Span::new(" · not answered", Style::PLAIN.dim()),
            ]);
            self.commits.push(fit(line, self.width));
        }
        self.asked_change = None;
        self.approval = None;
        self.asked_call = None;
        self.note = None;
    }

    /// A new attempt: the last one's text is dropped, and if part of it was written to the
    /// scrollback, a line under it says it is discarded.
    fn start_attempt(&mut self) {
        if self.answer.has_taken() {
            let attempt = self.attempt;
            self.say(
                &format!("↑ attempt {attempt} failed — the text above is discarded"),
                Style::fg(Color::Yellow),
            );
        }
        self.reasoning.clear();
        self.answer = StreamedAnswer::new(self.width);
    }

    /// A line about the attempt's reasoning, once.
    fn say_reasoning(&mut self) {
        let reasoning_lines = self.reasoning.trim().lines().count();
        if reasoning_lines > 0 {
            self.say(
                &format!(
                    "✻ reasoned for {reasoning_lines} line{} (Ctrl-T shows it)",
                    if reasoning_lines == 1 { "" } else { "s" }
                ),
                Style::PLAIN.dim().italic(),
            );
        }
        self.reasoning.clear();
    }

    /// The answer's blocks that settled, to the scrollback (after its reasoning's line and an
    /// empty line, the first time).
    fn write_settled(&mut self) {
        let first = !self.answer.has_taken();
        let lines = self.answer.take_settled();
        if lines.is_empty() {
            return;
        }
        if first {
            self.say_reasoning();
            self.commits.push(Line::empty());
        }
        self.commits.extend(lines);
    }

    /// The attempt's text for good: a line about its reasoning, then the answer (what is left
    /// of it, when its first blocks were written as they settled).
    fn commit_attempt(&mut self) {
        self.say_reasoning();
        let answer = std::mem::replace(&mut self.answer, StreamedAnswer::new(self.width));
        if answer.has_taken() {
            self.commits.extend(answer.finish());
        } else if !answer.is_empty() {
            // An answer stands apart from the cards and notices around it.
            self.commits.push(Line::empty());
            self.commits.extend(answer.finish());
        }
    }

    /// Apply one event of the session.
    /// A subagent's event (forwarded under its own session id): its `task` card shows its
    /// rounds and the tool it runs now. Nothing else of it reaches this session's screen.
    pub fn apply_child(&mut self, event: &Event) {
        let Some((call_id, rounds)) = self.children.get_mut(&event.session_id) else {
            return;
        };
        let now_doing = match &event.body {
            EventBody::LlmResponse { .. } => {
                *rounds += 1;
                None
            }
            EventBody::ToolCall {
                name,
                arguments,
                subject,
                ..
            } => Some(format!(
                "{name} {}",
                cards::call_subject(name, arguments, subject.as_deref())
            )),
            _ => return,
        };
        let (call_id, rounds) = (call_id.clone(), *rounds);
        if let Some(running) = self.running.iter_mut().find(|r| r.call.call_id == call_id) {
            let doing = now_doing.unwrap_or_else(|| {
                running
                    .recent
                    .split_once(" · ")
                    .map(|(_, doing)| doing.to_string())
                    .unwrap_or_else(|| "thinking".into())
            });
            running.recent = format!(
                "{rounds} round{} · {doing}",
                if rounds == 1 { "" } else { "s" }
            );
        }
    }

    pub fn apply(&mut self, event: &Event, now: Instant) {
        match &event.body {
            EventBody::TurnStarted { .. } => {
                self.busy = true;
                self.turn = Some((now, 0));
            }
            EventBody::LlmRequest { attempt, .. } => {
                self.start_attempt();
                self.attempt = *attempt;
                self.attempt_tokens = 0;
                self.waiting = Some((now, *attempt));
            }
            EventBody::LlmReasoning { delta } => {
                self.waiting = None;
                self.attempt_tokens += estimate_tokens(delta);
                self.reasoning.push_str(delta);
            }
            EventBody::LlmText { delta } => {
                self.waiting = None;
                self.attempt_tokens += estimate_tokens(delta);
                self.answer.push(delta);
                self.write_settled();
            }
            EventBody::LlmRetry { .. } | EventBody::AccountRotated { .. } => {
                self.waiting = None;
                self.start_attempt();
                if let Some(text) = notice(&event.body) {
                    self.say(&text, Style::fg(Color::Yellow));
                }
            }
            EventBody::LlmResponse { usage, .. } => {
                // The provider's own count replaces the estimate.
                if let Some((_, reported)) = &mut self.turn {
                    *reported += usage.output;
                }
                self.attempt_tokens = 0;
                self.waiting = None;
                self.commit_attempt();
            }
            EventBody::TurnCompleted { .. } => {
                self.turn = None;
                self.waiting = None;
                if let Some(text) = notice(&event.body) {
                    self.say(&text, Style::PLAIN.dim());
                }
            }
            EventBody::TurnFailed { diagnostic, .. } => {
                self.turn = None;
                self.waiting = None;
                self.drop_approval();
                match diagnostic.kind {
                    FailureKind::Cancelled => {
                        let streamed = !self.answer.is_empty() || !self.reasoning.is_empty();
                        self.commit_attempt();
                        if streamed {
                            self.say(
                                "⏹ stopped — kept on screen; the model is told you stopped it, not what it wrote",
                                Style::fg(Color::Yellow),
                            );
                        } else {
                            self.say("⏹ stopped", Style::fg(Color::Yellow));
                        }
                    }
                    _ => {
                        self.start_attempt();
                        self.say(
                            &format!("error: {}", diagnostic.plain()),
                            Style::fg(Color::Red).bold(),
                        );
                    }
                }
            }
            EventBody::ToolCall {
                call_id,
                name,
                arguments,
                subject,
            } => {
                self.waiting = None;
                self.running.push(Running {
                    call: Call {
                        call_id: call_id.clone(),
                        name: name.clone(),
                        subject: cards::call_subject(name, arguments, subject.as_deref()),
                        read_only: false,
                    },
                    since: now,
                    asked: self.asked_call.as_deref() == Some(call_id.as_str()),
                    recent: String::new(),
                    change: None,
                });
            }
            EventBody::ToolStarted {
                call_id, read_only, ..
            } => {
                if let Some(running) = self.running.iter_mut().find(|r| &r.call.call_id == call_id)
                {
                    running.since = now;
                    running.asked = false;
                    running.call.read_only = *read_only;
                }
            }
            EventBody::AgentStarted {
                call_id,
                child_session_id,
                ..
            } => {
                self.children
                    .insert(child_session_id.clone(), (call_id.clone(), 0));
                if let Some(running) = self.running.iter_mut().find(|r| &r.call.call_id == call_id)
                {
                    running.recent = "0 rounds · thinking".into();
                }
            }
            EventBody::AgentFinished {
                child_session_id, ..
            } => {
                self.children.remove(child_session_id);
            }
            EventBody::ToolPreview {
                call_id,
                before,
                after,
            } => {
                if let Some(running) = self.running.iter_mut().find(|r| &r.call.call_id == call_id)
                {
                    running.change = Some((before.clone(), after.clone()));
                }
            }
            EventBody::ToolOutput { call_id, delta } => {
                if let Some(running) = self.running.iter_mut().find(|r| &r.call.call_id == call_id)
                {
                    running.recent.push_str(delta);
                    if running.recent.len() > RECENT_BYTES {
                        let mut cut = running.recent.len() - RECENT_BYTES;
                        while !running.recent.is_char_boundary(cut) {
                            cut += 1;
                        }
                        running.recent.drain(..cut);
                    }
                }
            }
            EventBody::ToolResult {
                call_id,
                name,
                state,
                summary,
                output,
                tail,
                lines,
                ..
            } => {
                let (call, change) =
                    match self.running.iter().position(|r| &r.call.call_id == call_id) {
                        Some(index) => {
                            let running = self.running.remove(index);
                            (running.call, running.change)
                        }
                        None => (
                            Call {
                                call_id: call_id.clone(),
                                name: name.clone(),
                                subject: String::new(),
                                read_only: false,
                            },
                            None,
                        ),
                    };
                let end = Ended {
                    state: *state,
                    summary: summary.clone(),
                    output: cards::output_end(output, tail).to_string(),
                    lines: *lines,
                };
                let card = cards::ended(&call, &end, self.width);
                self.commits.extend(card);
                // A change made without a question: its diff under the card.
                if let (ReceiptState::Completed, Some((before, after))) = (*state, change) {
                    let diff = keel_render::FileDiff::new(
                        before.as_deref().map(str::as_bytes),
                        after.as_bytes(),
                    )
                    .lines(self.width.saturating_sub(4));
                    let shown = diff.len().min(CARD_DIFF_LINES);
                    self.commits.extend(
                        diff[..shown]
                            .iter()
                            .map(|line| line.clone().prefixed(&[Span::plain("    ")])),
                    );
                    if diff.len() > shown {
                        self.say(
                            &format!(
                                "    … {} more lines of the diff (the call in the transcript has the whole change)",
                                diff.len() - shown
                            ),
                            Style::PLAIN.dim(),
                        );
                    }
                }
            }
            EventBody::RecoveryOffered { .. } | EventBody::RecoveryConsumed { .. } => {
                self.offer_said = matches!(event.body, EventBody::RecoveryOffered { .. });
                if let Some(text) = notice(&event.body) {
                    self.say(&text, Style::PLAIN.dim());
                }
            }
            EventBody::RecoveryExpired { .. } => {
                if std::mem::take(&mut self.offer_said)
                    && let Some(text) = notice(&event.body)
                {
                    self.say(&text, Style::PLAIN.dim());
                }
            }
            // A rewind's surface prints its own report.
            EventBody::ApprovalRequested { .. }
            | EventBody::SessionStarted { .. }
            | EventBody::HistoryRewritten { .. }
            | EventBody::SessionRewound { .. } => {}
            other => {
                if let Some(text) = notice(other) {
                    self.say(&text, Style::PLAIN.dim());
                }
            }
        }
    }

    /// `attaches [a.rs] [b.md] · [gone.txt] not found`: what Enter will send with the prompt.
    fn chip_line(&self) -> Line {
        let mut line = Line::from_text("attaches ", Style::PLAIN.dim());
        for (path, exists) in &self.chips {
            if *exists {
                line.push(Span::new(&format!("[{path}] "), Style::fg(Color::Cyan)));
            } else {
                line.push(Span::new(
                    &format!("[{path}] not found "),
                    Style::PLAIN.dim(),
                ));
            }
        }
        line
    }

    /// Lines for the scrollback since the last call.
    pub fn take_commits(&mut self) -> Vec<Line> {
        std::mem::take(&mut self.commits)
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;

#[path = "view_frame.rs"]
mod frame;
