//! Explicit protocol recovery (docs/recovery.md): fingerprints, the fault projection, the command.
//!
//! Invariants:
//! - Fingerprints are SHA-256 over the canonical JSON of the items, so the same history always
//!   gives the same fingerprint, across restarts.
//! - The fault projection is used only for a consumed, projected record's prefix: tool facts
//!   (states such as `unknown` and `not_started`) never appear in a healthy request.
//! - Guidance is plain text appended to the prompt; it is never parsed as a command.

pub mod admission;
pub mod readiness;
pub mod record;
pub mod refusal;
pub mod stored;

use keel_types::{Item, ReceiptState, ToolReceipt};
use sha2::{Digest, Sha256};

pub const RECOVERY_PROMPT: &str = "Continue the interrupted task from valid history. Preserve completed tool results. Do not repeat completed actions or actions with unknown outcomes; inspect unknown effects with permitted read-only tools first.";

const EXCERPT_CHARS: usize = 300;

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn item_json(item: &Item) -> String {
    serde_json::to_string(item).unwrap_or_default()
}

/// SHA-256 over the items' canonical JSON, one per line.
pub fn fingerprint(items: &[Item]) -> String {
    let mut hasher = Sha256::new();
    for item in items {
        hasher.update(item_json(item).as_bytes());
        hasher.update(b"\n");
    }
    hex(&hasher.finalize())
}

pub fn anchor(items: &[Item]) -> String {
    items
        .last()
        .map(|item| hex(&Sha256::digest(item_json(item).as_bytes())))
        .unwrap_or_default()
}

pub fn evidence(receipts: &[ToolReceipt]) -> String {
    let mut hasher = Sha256::new();
    for receipt in receipts {
        hasher.update(
            format!(
                "{}|{}|{}|{}\n",
                receipt.seq, receipt.call_id, receipt.tool, receipt.state
            )
            .as_bytes(),
        );
    }
    hex(&hasher.finalize())
}

pub fn scope(session: &str, provider: &str, endpoint: &str, model: &str) -> String {
    hex(&Sha256::digest(
        format!("{session}\n{provider}\n{endpoint}\n{model}").as_bytes(),
    ))
}

/// The length `n` such that `fingerprint(&history[..n]) == wanted`, if any.
pub fn boundary_of(history: &[Item], wanted: &str) -> Option<usize> {
    let mut hasher = Sha256::new();
    if hex(&hasher.clone().finalize()) == wanted {
        return Some(0);
    }
    for (index, item) in history.iter().enumerate() {
        hasher.update(item_json(item).as_bytes());
        hasher.update(b"\n");
        if hex(&hasher.clone().finalize()) == wanted {
            return Some(index + 1);
        }
    }
    None
}

/// Whether a different projection could change the request: it replays a tool round.
pub fn projection_could_change(items: &[Item]) -> bool {
    items
        .iter()
        .any(|item| matches!(item, Item::Assistant(assistant) if assistant.has_tool_calls()))
}

/// The fault projection: inside `history[..boundary]`, assistant tool-call messages are not
/// replayed; their text stays, and their tool facts (rebuilt from receipts by call id and tool
/// name) follow as one plain user message. Everything after `boundary` is unchanged.
pub fn apply_repair(history: &[Item], boundary: usize, receipts: &[ToolReceipt]) -> Vec<Item> {
    let boundary = boundary.min(history.len());
    let mut projected = Vec::with_capacity(history.len() + 1);
    let mut facts = Vec::new();
    for item in &history[..boundary] {
        match item {
            Item::User { .. } | Item::Summary(_) | Item::Context(_) => projected.push(item.clone()),
            Item::Assistant(assistant) if assistant.has_tool_calls() => {
                let text = assistant.text();
                if !text.is_empty() {
                    projected.push(Item::Assistant(keel_types::AssistantItem {
                        parts: vec![keel_types::AssistantPart::Text { text }],
                    }));
                }
                for call in assistant.tool_calls() {
                    facts.push(tool_fact(history, receipts, &call.id, &call.name));
                }
            }
            Item::Assistant(_) => projected.push(item.clone()),
            Item::ToolResult(_) => {}
        }
    }
    if !facts.is_empty() {
        projected.push(Item::User {
            text: format!(
                "Tool facts of the interrupted task, from keel's local receipts (the tool calls \
                 themselves are not replayed):\n{}",
                facts.join("\n")
            ),
        });
    }
    projected.extend_from_slice(&history[boundary..]);
    projected
}

fn tool_fact(history: &[Item], receipts: &[ToolReceipt], call_id: &str, tool: &str) -> String {
    let matching: Vec<&ToolReceipt> = receipts
        .iter()
        .filter(|r| r.call_id == call_id && r.tool == tool)
        .collect();
    // Ambiguous duplicate ids: the outcome cannot be attributed, so it is unknown.
    let state = match matching.as_slice() {
        [only] => only.state,
        [] | [_, _, ..] => ReceiptState::Unknown,
    };
    let excerpt: String = history
        .iter()
        .filter_map(|item| match item {
            Item::ToolResult(result) if result.call_id == call_id && result.name == tool => {
                Some(result.content.as_str())
            }
            Item::ToolResult(_)
            | Item::User { .. }
            | Item::Assistant(_)
            | Item::Summary(_)
            | Item::Context(_) => None,
        })
        .next_back()
        .unwrap_or("")
        .chars()
        .take(EXCERPT_CHARS)
        .collect();
    let excerpt = excerpt.replace('\n', " ⏎ ");
    format!(
        "- call {call_id} `{tool}`: {state}{}",
        if excerpt.is_empty() {
            String::new()
        } else {
            format!(" — {excerpt}")
        }
    )
}

/// `/recover-context [id] [guidance]`: the first word is an id when it looks like one.
pub fn parse_command(text: &str) -> Option<(Option<String>, Option<String>)> {
    let rest = text.trim_start().strip_prefix("/recover-context")?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim();
    let (first, remainder) = match rest.split_once(char::is_whitespace) {
        Some((first, remainder)) => (first, remainder.trim()),
        None => (rest, ""),
    };
    if looks_like_id(first) {
        let guidance = (!remainder.is_empty()).then(|| remainder.to_string());
        Some((Some(first.to_string()), guidance))
    } else {
        let guidance = (!rest.is_empty()).then(|| rest.to_string());
        Some((None, guidance))
    }
}

/// `/continue-checks [id]`: the final-readiness action.
pub fn parse_continue_command(text: &str) -> Option<Option<String>> {
    let rest = text.trim_start().strip_prefix("/continue-checks")?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let first = rest.split_whitespace().next();
    Some(first.filter(|word| looks_like_id(word)).map(str::to_string))
}

pub fn looks_like_id(word: &str) -> bool {
    word.len() == 18 && word.starts_with("r-") && word[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

pub fn new_record_id() -> String {
    use rand::Rng;
    let bytes: [u8; 8] = rand::rng().random();
    format!("r-{}", hex(&bytes))
}

/// The prompt of a recovery turn, with guidance appended as plain text.
pub fn recovery_prompt(guidance: Option<&str>) -> String {
    match guidance {
        Some(guidance) => format!("{RECOVERY_PROMPT}\n\nUser guidance: {guidance}"),
        None => RECOVERY_PROMPT.to_string(),
    }
}

#[cfg(test)]
mod tests;
