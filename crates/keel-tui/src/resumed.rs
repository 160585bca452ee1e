//! Where a resumed session was (`keel -c`, `keel --session ID`): its last turns as a person saw
//! them, printed once above the live region.
//!
//! Invariants:
//! - Pure: stored items in, lines out; every text made visible (`keel_render`).
//! - Only what the person saw: their prompts (`keel_types::person_text`: without keel's notes
//!   before and attached files after), answers rendered, each tool call one line with its
//!   state. Text written for the model is not shown: the context block, the interruption and
//!   mode notes, a recovery turn's instructions and facts (a one-line mark instead), tool
//!   results (the card's state says how each ended).
//! - The last turns that fit in `room` lines, whole; when even the last one does not, its end.
//!   A first line counts the earlier turns not shown and says Ctrl-T has them.

use crate::cards::{self, Call};
use crate::rows::wrapped;
use keel_render::{Color, Line, Span, Style, markdown_lines};
use keel_types::{AssistantPart, InputKind, Item, ReceiptState};

/// The most lines of one prompt shown (the rest are counted).
const PROMPT_LINES: usize = 6;

/// The recent conversation of `items` (each with its turn), at `width`, in at most `room`
/// lines (see the module invariants). `input_of`: how a turn began, where known;
/// `state_of`: a call's receipt state, where there is one.
pub fn recent_lines<'a>(
    items: impl IntoIterator<Item = (u64, &'a Result<Item, String>)>,
    input_of: &dyn Fn(u64) -> Option<InputKind>,
    state_of: &dyn Fn(&str) -> Option<ReceiptState>,
    width: usize,
    room: usize,
) -> Vec<Line> {
    let mut turns: Vec<(u64, Vec<Line>)> = Vec::new();
    for (turn, item) in items {
        let lines = item_lines(item, input_of(turn), state_of, width);
        if lines.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, shown)) if *last == turn => shown.extend(lines),
            _ => turns.push((turn, lines)),
        }
    }
    let room = room.max(2);
    let mut used = 0;
    let mut kept = 0;
    for (index, (_, lines)) in turns.iter().enumerate().rev() {
        // An empty line between turns; a line counting the turns before, if any are left.
        let separator = usize::from(kept > 0);
        let count_line = usize::from(index > 0);
        if kept > 0 && used + separator + lines.len() + count_line > room {
            break;
        }
        used += separator + lines.len();
        kept += 1;
    }
    let earlier = turns.len() - kept;
    let mut out = Vec::new();
    if earlier > 0 {
        out.push(Line::from_text(
            &format!(
                "… {earlier} earlier turn{} not shown · Ctrl-T shows the whole transcript",
                if earlier == 1 { "" } else { "s" }
            ),
            Style::PLAIN.dim(),
        ));
    }
    for (index, (_, lines)) in turns[earlier..].iter().enumerate() {
        if index > 0 {
            out.push(Line::empty());
        }
        out.extend(lines.iter().cloned());
    }
    // The last turn alone is longer than the room: its end.
    if out.len() > room {
        let cut = out.len() - (room - 1);
        out.drain(..cut);
        out.insert(
            0,
            Line::from_text(
                "… the start of this turn is above · Ctrl-T shows the whole transcript",
                Style::PLAIN.dim(),
            ),
        );
    }
    out
}

/// How a person saw one stored item.
fn item_lines(
    item: &Result<Item, String>,
    input: Option<InputKind>,
    state_of: &dyn Fn(&str) -> Option<ReceiptState>,
    width: usize,
) -> Vec<Line> {
    match item {
        Err(_) => vec![Line::from_text(
            "(an item that cannot be read: Ctrl-T shows it)",
            Style::fg(Color::Red),
        )],
        Ok(Item::User { text }) => prompt_lines(text, input, width),
        Ok(Item::Context(_)) | Ok(Item::ToolResult(_)) => Vec::new(),
        Ok(Item::Summary(_)) => vec![Line::from_text(
            "⟲ the earlier conversation was summarised (Ctrl-T shows it)",
            Style::PLAIN.dim(),
        )],
        Ok(Item::Assistant(assistant)) => {
            let mut lines = Vec::new();
            for part in &assistant.parts {
                match part {
                    AssistantPart::Text { text } if !text.trim().is_empty() => {
                        lines.push(Line::empty());
                        lines.extend(markdown_lines(text, width));
                    }
                    AssistantPart::ToolCall(call) => {
                        let shown = Call {
                            call_id: call.id.clone(),
                            name: call.name.clone(),
                            subject: cards::call_subject(&call.name, &call.arguments, None),
                            read_only: false,
                        };
                        let state = state_of(&call.id).unwrap_or(ReceiptState::Unknown);
                        lines.push(cards::collapsed(&shown, state, width));
                    }
                    AssistantPart::Text { .. }
                    | AssistantPart::Reasoning { .. }
                    | AssistantPart::WebSearch(_) => {}
                }
            }
            lines
        }
    }
}

/// The person's prompt, or a mark for a turn keel began itself.
fn prompt_lines(text: &str, input: Option<InputKind>, width: usize) -> Vec<Line> {
    let mark = match input {
        Some(InputKind::ProtocolRecovery) => Some("↻ recovery: the interrupted task continued"),
        Some(InputKind::FinalReadinessRecovery) => Some("↻ /continue-checks"),
        Some(InputKind::Compaction) => Some("⟲ /compact"),
        Some(InputKind::ContextRecovery) => Some("↻ recovery after the context limit"),
        Some(InputKind::User) | None => None,
    };
    if let Some(mark) = mark {
        return vec![Line::from_text(mark, Style::PLAIN.dim())];
    }
    let said = keel_types::person_text(text).trim();
    if said.is_empty() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    let body = wrapped(said, width.saturating_sub(2).max(10), Style::PLAIN);
    let hidden = body.len().saturating_sub(PROMPT_LINES);
    for (index, line) in body.into_iter().take(PROMPT_LINES).enumerate() {
        let marker = if index == 0 { "› " } else { "  " };
        lines.push(line.prefixed(&[Span::new(marker, Style::fg(Color::Cyan))]));
    }
    if hidden > 0 {
        lines.push(Line::from_text(
            &format!(
                "  … {hidden} more line{}",
                if hidden == 1 { "" } else { "s" }
            ),
            Style::PLAIN.dim(),
        ));
    }
    lines
}

#[cfg(test)]
#[path = "resumed_tests.rs"]
mod tests;
