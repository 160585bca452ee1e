//! Rendering events for a person (terminal or pipe) or for a program (`--json`).
//!
//! Invariants:
//! - `--json` prints every event, one JSON object per line, in the order received.
//! - Provisional text never survives a failed attempt: on a terminal it is erased when the
//!   retry is announced; on a pipe nothing is printed until the attempt's `llm/response`.
//! - The answer goes to stdout; reasoning (when piped), notices, usage and errors to stderr,
//!   so `keel run … > answer.txt` captures exactly the answer.
//! - Styling only on a terminal, and never when `NO_COLOR` is set.
//! - Text from the model, tools and providers goes through `keel_render` first: no control
//!   sequence of theirs reaches the terminal.

use crate::live_answer::LiveAnswer;
use crossterm::style::{Attribute, SetAttribute};
use keel_render::{Colors, visible, visible_line};
use keel_types::{Event, EventBody, FailureKind, InputKind, SourcesStatus, Usage};
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
            spinner: None,
        }
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
        self.stop_spinner();
        match &event.body {
            EventBody::LlmRequest { attempt, .. } => {
                self.start_attempt();
                self.start_spinner(*attempt);
            }
            EventBody::LlmReasoning { delta } => self.delta(Shown::Reasoning, delta),
            EventBody::LlmText { delta } => self.delta(Shown::Text, delta),
            EventBody::LlmRetry {
                attempt,
                max_retries,
                kind,
                status,
                delay_ms,
            } => {
                self.discard_attempt();
                let status = status.map(|s| format!(", HTTP {s}")).unwrap_or_default();
                eprintln!(
                    "↻ retry {attempt}/{max_retries} in {:.1} s: {} ({kind}{status})",
                    *delay_ms as f64 / 1000.0,
                    kind.describe()
                );
            }
            EventBody::AccountRotated {
                provider,
                from,
                to,
                reason,
            } => {
                self.discard_attempt();
                eprintln!(
                    "⇄ {}: account `{}` failed ({reason}); switching to `{}`",
                    visible_line(provider),
                    visible_line(from),
                    visible_line(to)
                );
            }
            EventBody::LlmResponse { .. } => self.commit_attempt(),
            EventBody::TurnCompleted {
                usage,
                cache_hit_ratio,
                not_ready_reason,
                context,
                cost,
                ..
            } => {
                self.end_live_line();
                if let Some(reason) = not_ready_reason {
                    eprintln!("not ready: {}", visible(reason));
                }
                let context = context
                    .map(|context| format!(" · ctx {}%", context.percent()))
                    .unwrap_or_default();
                let cost = cost
                    .as_ref()
                    .map(|cost| format!(" · {}", cost.display()))
                    .unwrap_or_default();
                eprintln!("{}{cost}{context}", usage_line(usage, *cache_hit_ratio));
            }
            EventBody::TurnFailed { diagnostic } => match diagnostic.kind {
                FailureKind::Cancelled => {
                    // What streamed stays on screen, marked (it is never committed).
                    let streamed = self.keep_attempt();
                    if streamed {
                        eprintln!("⏹ interrupted: the answer above is incomplete and not kept");
                    } else {
                        eprintln!("cancelled");
                    }
                }
                _ => {
                    self.discard_attempt();
                    eprintln!("error: {}", visible(&diagnostic.to_string()));
                }
            },
            EventBody::ToolCall {
                name,
                arguments,
                subject,
                ..
            } => {
                self.end_live_line();
                let shown = call_subject(name, arguments, subject.as_deref());
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
                eprintln!("  ⎿ {state} · {}", visible_line(summary));
                if name == "bash" {
                    let shown = folded_tail(if tail.is_empty() { output } else { tail }, *lines);
                    if !shown.is_empty() {
                        let dim =
                            matches!(self.mode, Mode::Live { colors } if colors != Colors::None);
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
            }
            EventBody::RecoveryOffered {
                recovery_id,
                action,
            } => match action {
                InputKind::FinalReadinessRecovery => {
                    eprintln!("/continue-checks ({recovery_id}) goes on from here")
                }
                InputKind::ContextRecovery | InputKind::Compaction => eprintln!(
                    "recovery {recovery_id} is available: /compact summarises the history so the task can go on"
                ),
                InputKind::ProtocolRecovery | InputKind::User => eprintln!(
                    "recovery {recovery_id} is available: /recover-context replays the task from valid history"
                ),
            },
            EventBody::ContextCompacted {
                revision,
                tokens_before,
                tokens_after,
                reason,
            } => {
                self.end_live_line();
                eprintln!(
                    "⟲ context compacted ({}): about {tokens_before} → {tokens_after} tokens, history revision {revision}",
                    visible_line(reason)
                );
            }
            EventBody::RecoveryConsumed { recovery_id } => eprintln!("recovering ({recovery_id})…"),
            EventBody::RecoveryExpired { recovery_id } => {
                eprintln!("recovery {recovery_id} expired (new input or a new history)")
            }
            EventBody::SearchResult {
                query,
                sources_status,
                sources,
            } => {
                self.end_live_line();
                let about = match sources_status {
                    Some(SourcesStatus::Available) => format!("{sources} source(s)"),
                    Some(SourcesStatus::NotProvided) => {
                        "the provider gave no structured sources; its summary is kept".to_string()
                    }
                    None => "sources status not recorded".to_string(),
                };
                eprintln!("⌕ web search `{}` — {about}", visible_line(query));
            }
            // The terminal's approver prints its own prompt.
            EventBody::PrefixChanged { reason } if reason == "mcp_tools_changed" => {
                self.end_live_line();
                eprintln!("⟲ MCP tools changed: this turn's requests offer the new list");
            }
            EventBody::TrustIgnored(ignored) => eprintln!(
                "note: {}:{}: `{}` {}",
                visible_line(&ignored.file),
                ignored.line,
                visible_line(&ignored.key),
                ignored.reason
            ),
            EventBody::SessionStarted { .. }
            | EventBody::HistoryRewritten { .. }
            | EventBody::PrefixChanged { .. }
            | EventBody::TurnStarted { .. }
            | EventBody::ApprovalRequested { .. }
            | EventBody::ToolStarted { .. } => {}
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

/// The most lines of a command's output shown under its card (the rest is counted).
const TAIL_LINES: usize = 5;

/// The last lines of a command's output (its closing `[exit code …]` line left out: the card
/// says it), each on one line, cut at the terminal's width, after a count of those hidden.
fn folded_tail(text: &str, total_lines: u64) -> Vec<String> {
    let mut body: Vec<&str> = text.trim_end_matches('…').lines().collect();
    // The closing `[exit code N]`: the card says it.
    let closing = body
        .last()
        .is_some_and(|line| line.starts_with("[exit code ") && line.ends_with(']'));
    if closing {
        body.pop();
    }
    let shown: Vec<&str> = body.iter().rev().take(TAIL_LINES).rev().copied().collect();
    let width = terminal_width().saturating_sub(4).max(10);
    let mut out = Vec::new();
    let notes = text
        .lines()
        .filter(|line| line.starts_with('[') && line.ends_with(']'))
        .count();
    let hidden = (total_lines as usize).saturating_sub(shown.len() + notes);
    if hidden > 0 {
        out.push(format!(
            "    … {hidden} line{} above",
            if hidden == 1 { "" } else { "s" }
        ));
    }
    for line in shown {
        let line = visible_line(line);
        let cut: String = line.chars().take(width).collect();
        let more = if cut.chars().count() < line.chars().count() {
            "…"
        } else {
            ""
        };
        out.push(format!("    {cut}{more}"));
    }
    out
}

/// The one thing a person wants to see of a call: the command, the resolved path, or the
/// pattern and where it searches; on one line with every control character shown (the
/// approval prompt shows the whole command).
fn call_subject(name: &str, arguments: &str, resolved: Option<&str>) -> String {
    let subject = match (name, resolved) {
        ("web_fetch", _) => argument_subject(name, arguments),
        ("glob" | "grep", Some(path)) => {
            format!("{} in {path}", argument_subject(name, arguments))
        }
        (_, Some(resolved)) => resolved.to_string(),
        (_, None) => argument_subject(name, arguments),
    };
    let lines = subject.lines().count();
    let first_line = visible_line(subject.lines().next().unwrap_or(""));
    let mut shown: String = first_line.chars().take(100).collect();
    if shown.chars().count() < first_line.chars().count() {
        shown.push('…');
    }
    if lines > 1 {
        shown.push_str(&format!(" [+{} more lines]", lines - 1));
    }
    shown
}

/// The subject of a call as the model wrote it in its arguments (not yet made visible).
fn argument_subject(name: &str, arguments: &str) -> String {
    let parsed: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    let key = match name {
        "bash" => "command",
        "glob" | "grep" => "pattern",
        "web_fetch" => "url",
        _ => "path",
    };
    match parsed.get(key).and_then(serde_json::Value::as_str) {
        Some(subject) => subject.to_string(),
        None => arguments.to_string(),
    }
}

/// How many terminal rows `text` occupies, wrapping at the terminal width.
fn screen_rows(text: &str) -> usize {
    let width = terminal_size().0;
    text.split('\n')
        .map(|line| line.width().div_ceil(width).max(1))
        .sum()
}

pub fn usage_line(usage: &Usage, cache_hit_ratio: f64) -> String {
    let mut line = format!("tokens: {} in", usage.input);
    if usage.cache_hit + usage.cache_miss > 0 {
        line.push_str(&format!(
            " ({} cache hit, {:.0}%)",
            usage.cache_hit,
            cache_hit_ratio * 100.0
        ));
    }
    line.push_str(&format!(" · {} out", usage.output));
    if usage.reasoning > 0 {
        line.push_str(&format!(" ({} reasoning)", usage.reasoning));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commands_output_is_folded_to_its_last_lines() {
        let output: String =
            (1..=20).map(|n| format!("line {n}\n")).collect::<String>() + "[exit code 0]";
        let shown = folded_tail(&output, 21);
        assert_eq!(
            shown,
            [
                "    … 15 lines above",
                "    line 16",
                "    line 17",
                "    line 18",
                "    line 19",
                "    line 20"
            ]
        );
        assert_eq!(folded_tail("one\n[exit code 1]", 2), ["    one"]);
        assert!(folded_tail("[exit code 0]", 1).is_empty());
        let hostile = folded_tail("\u{1b}]0;pwned\u{7}", 1);
        assert_eq!(hostile, ["    ␛]0;pwned␇"]);
    }

    #[test]
    fn usage_line_shows_cache_hits_only_when_reported() {
        let usage = Usage {
            input: 200,
            output: 30,
            reasoning: 10,
            cache_hit: 150,
            cache_miss: 50,
        };
        assert_eq!(
            usage_line(&usage, usage.cache_hit_ratio()),
            "tokens: 200 in (150 cache hit, 75%) · 30 out (10 reasoning)"
        );
        let bare = Usage {
            input: 5,
            output: 1,
            ..Usage::default()
        };
        assert_eq!(usage_line(&bare, 0.0), "tokens: 5 in · 1 out");
    }
}
