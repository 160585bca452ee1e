//! Tool cards: what a person sees of each call, while it runs and once it ended.
//!
//! Invariants:
//! - Every line fits the width it was made for, and everything from the model or a tool goes
//!   through `keel_render`'s `Span`s (made visible), so no text of theirs is a control sequence.
//! - The state's colour is distinct for each end (completed, failed, denied, cancelled,
//!   unknown), and the state's name is always written too (colour is never the only signal).
//! - A command's output is folded to its last `TAIL_LINES` lines after a count of the lines
//!   hidden; the whole output is in the history (and the transcript pager).

use crate::rows::{cut, fit};
use keel_render::{Color, Line, Span, Style, visible_line};
use keel_types::ReceiptState;
use std::time::Duration;

/// The most lines of a command's output shown under its card (the rest is counted).
pub const TAIL_LINES: usize = 5;

/// The colour of a call in `state`.
pub fn state_color(state: ReceiptState) -> Color {
    match state {
        ReceiptState::Completed => Color::Green,
        ReceiptState::Failed => Color::Red,
        ReceiptState::Denied => Color::Yellow,
        ReceiptState::Unknown => Color::Magenta,
        ReceiptState::Cancelled | ReceiptState::NotStarted => Color::Gray,
        ReceiptState::Pending | ReceiptState::Started => Color::Cyan,
    }
}

/// The last lines of a command's output (its closing `[exit code …]` line left out: the card
/// says it), each on one line cut to `width`, after a count of those hidden.
pub fn folded_tail(text: &str, total_lines: u64, width: usize) -> Vec<String> {
    let mut body: Vec<&str> = text.trim_end_matches('…').lines().collect();
    let closing = body
        .last()
        .is_some_and(|line| line.starts_with("[exit code ") && line.ends_with(']'));
    if closing {
        body.pop();
    }
    let shown: Vec<&str> = body.iter().rev().take(TAIL_LINES).rev().copied().collect();
    let width = width.saturating_sub(4).max(10);
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
        out.push(format!("    {}", cut(&visible_line(line), width)));
    }
    out
}

/// What a card folds of a result event: the end of the output (`tail`) when the event's
/// excerpt (`output`) does not reach it, else the excerpt.
pub fn output_end<'a>(output: &'a str, tail: &'a str) -> &'a str {
    if tail.is_empty() { output } else { tail }
}

/// The one thing a person wants to see of a call: the command, the resolved path, or the
/// pattern and where it searches; on one line with every control character shown (the
/// approval shows the whole command).
pub fn call_subject(name: &str, arguments: &str, resolved: Option<&str>) -> String {
    let subject = match (name, resolved) {
        // The plan itself is shown rendered where it is asked about.
        ("propose_plan", _) => {
            let parsed: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
            let lines = parsed
                .get("plan")
                .and_then(serde_json::Value::as_str)
                .map_or(0, |plan| plan.lines().count());
            return format!(
                "a plan of {lines} line{}",
                if lines == 1 { "" } else { "s" }
            );
        }
        // The plan's result line counts its items; the card names what comes next.
        ("todo_write", _) => {
            let parsed: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
            let todos = parsed
                .get("todos")
                .and_then(serde_json::Value::as_array)
                .cloned()
                .unwrap_or_default();
            let next = todos.iter().find(|todo| {
                todo.get("status").and_then(serde_json::Value::as_str) != Some("completed")
            });
            match next.and_then(|todo| todo.get("content")?.as_str()) {
                Some(content) => format!("next: {content}"),
                None if todos.is_empty() => "the plan".to_string(),
                None => "every item done".to_string(),
            }
        }
        ("web_fetch", _) => argument_subject(name, arguments),
        // A subagent's card: its agent and what it is for.
        ("task", _) => {
            let parsed: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
            let text = |key: &str| {
                parsed
                    .get(key)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            format!("{}: {}", text("agent"), text("description"))
        }
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

/// The tools whose completed card is one line.
const READS: [&str; 4] = ["read_file", "list_dir", "glob", "grep"];

/// A call the model made, as its card shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub call_id: String,
    pub name: String,
    /// `call_subject` of the call.
    pub subject: String,
    /// A read-only command run without a question, confined to reading (`tool/started`).
    pub read_only: bool,
}

/// How a call ended, as its card shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    pub state: ReceiptState,
    pub summary: String,
    /// The end of the output (or all of it when short).
    pub output: String,
    /// How many lines the whole output has.
    pub lines: u64,
}

/// The card's first line: `● name subject`, the dot in the state's colour; `· read-only`
/// after the subject when the command ran confined to reading without a question.
fn header(call: &Call, state: ReceiptState, suffix: &str, width: usize) -> Line {
    let suffix = if call.read_only {
        format!(" · read-only{suffix}")
    } else {
        suffix.to_string()
    };
    let suffix = suffix.as_str();
    let name = visible_line(&call.name).into_owned();
    let mut line = Line::new(vec![
        Span::new("● ", Style::fg(state_color(state))),
        Span::new(&name, Style::PLAIN.bold()),
    ]);
    let room = width.saturating_sub(name.chars().count() + 3 + suffix.chars().count());
    if !call.subject.is_empty() {
        line.push(Span::plain(" "));
        line.push(Span::plain(&cut(&call.subject, room)));
    }
    if !suffix.is_empty() {
        line.push(Span::new(suffix, Style::PLAIN.dim()));
    }
    // A name too long for the width (a hostile MCP tool's) is cut too.
    fit(line, width)
}

/// A call's card folded to its one line, its state after it (a resumed session's recent
/// turns).
pub fn collapsed(call: &Call, state: ReceiptState, width: usize) -> Line {
    let said = format!(" · {}", state.as_str().replace('_', " "));
    header(call, state, &said, width)
}

/// The most lines of a running command's output shown under its card.
pub const LIVE_LINES: usize = 4;

/// The card of a call still running: its header with the time it has taken, then the last
/// lines of what it printed so far (a line rewritten with `\r`, as a progress bar does, shows
/// as it stands now).
pub fn running(
    call: &Call,
    elapsed: Duration,
    waiting: bool,
    recent: &str,
    width: usize,
) -> Vec<Line> {
    let suffix = if waiting {
        " · waiting for your answer".to_string()
    } else {
        format!(" · {:.1} s", elapsed.as_secs_f64())
    };
    let mut lines = vec![header(call, ReceiptState::Started, &suffix, width)];
    let shown: Vec<&str> = recent
        .lines()
        .map(|line| line.rsplit('\r').next().unwrap_or(""))
        .filter(|line| !line.trim().is_empty())
        .collect();
    let room = width.saturating_sub(4).max(10);
    for line in &shown[shown.len().saturating_sub(LIVE_LINES)..] {
        lines.push(Line::from_text(
            &format!("    {}", cut(&visible_line(line), room)),
            Style::PLAIN.dim(),
        ));
    }
    lines
}

/// The card of a call that ended: header, state and summary, and a command's folded output.
/// A result's summary as shown after its state: keel's denial text starts by saying "denied",
/// which the state already says.
pub fn result_summary(state: ReceiptState, summary: &str) -> &str {
    match state {
        ReceiptState::Denied => summary.strip_prefix("denied: ").unwrap_or(summary),
        _ => summary,
    }
}

/// Whether a result's card shows its output: a command's, when it ran (a refused one has
/// none; its result is the refusal, said in the summary).
pub fn shows_output(name: &str, state: ReceiptState) -> bool {
    name == "bash" && !matches!(state, ReceiptState::Denied | ReceiptState::NotStarted)
}

pub fn ended(call: &Call, end: &Ended, width: usize) -> Vec<Line> {
    // A read that went well is one line: what was read, and how much.
    if end.state == ReceiptState::Completed && READS.contains(&call.name.as_str()) {
        let summary = format!(" · {}", visible_line(&end.summary));
        let room =
            width.saturating_sub(call.name.chars().count() + 3 + call.subject.chars().count());
        return vec![header(call, end.state, &cut(&summary, room.max(12)), width)];
    }
    let mut lines = vec![header(call, end.state, "", width)];
    let state = end.state.as_str();
    let summary = cut(
        &visible_line(result_summary(end.state, &end.summary)),
        width.saturating_sub(7 + state.len()),
    );
    lines.push(Line::new(vec![
        Span::plain("  ⎿ "),
        Span::new(state, Style::fg(state_color(end.state))),
        Span::plain(" · "),
        Span::plain(&summary),
    ]));
    if shows_output(&call.name, end.state) {
        for row in folded_tail(&end.output, end.lines, width) {
            lines.push(Line::from_text(&row, Style::PLAIN.dim()));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commands_output_is_folded_to_its_last_lines() {
        let output: String =
            (1..=20).map(|n| format!("line {n}\n")).collect::<String>() + "[exit code 0]";
        let shown = folded_tail(&output, 21, 80);
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
        assert_eq!(folded_tail("one\n[exit code 1]", 2, 80), ["    one"]);
        assert!(folded_tail("[exit code 0]", 1, 80).is_empty());
        let hostile = folded_tail("\u{1b}]0;pwned\u{7}", 1, 80);
        assert_eq!(hostile, ["    ␛]0;pwned␇"]);
        assert_eq!(
            folded_tail(&"x".repeat(50), 1, 20),
            ["    xxxxxxxxxxxxxxx…"]
        );
    }

    #[test]
    fn a_plan_card_names_its_next_item_not_its_json() {
        let plan = |second: &str| {
            format!(
                r#"{{"todos":[{{"content":"edit","status":"completed"}},{{"content":"run the tests","status":"{second}"}}]}}"#
            )
        };
        assert_eq!(
            call_subject("todo_write", &plan("pending"), None),
            "next: run the tests"
        );
        assert_eq!(
            call_subject("todo_write", &plan("completed"), None),
            "every item done"
        );
        assert_eq!(
            call_subject(
                "todo_write",
                r#"{"todos":[{"content":"a\u001b[2Jb","status":"pending"}]}"#,
                None
            ),
            "next: a␛[2Jb"
        );
    }

    #[test]
    fn cut_keeps_short_text_and_marks_a_cut() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "ab…");
        assert_eq!(cut("日本語", 4), "日…");
    }

    #[test]
    fn every_card_line_fits_its_width() {
        let call = Call {
            call_id: "c".into(),
            name: "bash".into(),
            subject: "x".repeat(300),
            read_only: true,
        };
        let end = Ended {
            state: ReceiptState::Failed,
            summary: "y".repeat(300),
            output: format!("{}\n[exit code 1]", "z".repeat(300)),
            lines: 2,
        };
        for width in [20, 40, 80] {
            for line in ended(&call, &end, width).iter().chain(&running(
                &call,
                Duration::from_millis(1500),
                false,
                &format!("{}\n日本語{}\n", "w".repeat(300), "x".repeat(300)),
                width,
            )) {
                assert!(line.width() <= width, "{width}: {}", line.plain());
            }
        }
    }
}
