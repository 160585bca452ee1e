//! The canonical, provider-neutral conversation history.
//!
//! Invariants:
//! - History is append-only within a revision; an item, once committed, never changes. Only a
//!   compaction starts a new revision (a `Summary` and a verbatim tail); old revisions stay.
//! - An assistant item keeps its parts in the order the provider produced them, because
//!   Anthropic thinking blocks and Responses reasoning items must be replayed in that order.
//! - Tool-call arguments are kept as the raw string the model produced, never re-serialized, so
//!   replaying them is byte-exact and invalid JSON is still visible to the model.
//! - Replay data is opaque: keel stores it and sends it back unmodified, it never interprets it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One entry of the canonical history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Item {
    User {
        text: String,
    },
    Assistant(AssistantItem),
    ToolResult(ToolResult),
    /// What a compaction left of the earlier conversation; the provider sees it as user text.
    Summary(Summary),
    /// The session's context block (project instructions and the environment): written once,
    /// its own item; the provider sees it at the head of the user message that follows it.
    Context(ContextBlock),
}

/// Project instructions and the environment, as the model is told them.
///
/// Invariant: `text` is exactly what the provider sees; it changes only by `/reload-context`
/// (a new revision), never in place, so every request of a session keeps its first bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextBlock {
    pub text: String,
    /// The instruction files it holds, in the order they appear.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<ContextSource>,
}

/// The instruction file names looked for when the user's config names none
/// (`instruction_files`).
pub const DEFAULT_INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// One instruction file of a context block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSource {
    pub path: String,
    /// The file's size when it was read.
    pub bytes: u64,
    /// How much of it the block holds (less than `bytes` when it was cut, 0 when left out).
    pub kept: u64,
    /// Why it was not read (a link out of the repository, a forbidden path, not text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The first words of the request keel sends to have a conversation summarised (the fake
/// provider recognises a summarising request by them).
pub const COMPACTION_REQUEST_MARKER: &str = "[keel compaction request]";

/// The head of a compacted history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The text the provider sees, exactly.
    pub text: String,
    /// How many items of the previous revision it stands for.
    pub replaced: u64,
    /// The arguments of the latest successful `todo_write` it replaced (the plan in force), so
    /// readiness still sees open plan items after a compaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

/// One complete assistant response.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssistantItem {
    pub parts: Vec<AssistantPart>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantPart {
    Reasoning {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replay: Option<ReplayData>,
    },
    Text {
        text: String,
    },
    ToolCall(ToolCall),
    /// A provider-native web search (Anthropic, Responses), with its raw blocks for replay.
    WebSearch(crate::WebSearch),
}

/// A tool call exactly as the model asked for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The raw argument string (normally JSON), unmodified.
    pub arguments: String,
}

/// Per-protocol data that must go back to the provider unmodified.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReplayData {
    /// The signature of an Anthropic `thinking` block.
    AnthropicThinking { signature: String },
    /// An Anthropic `redacted_thinking` block.
    AnthropicRedactedThinking { data: String },
    /// A Responses `reasoning` output item.
    ResponsesReasoning {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<String>,
        /// The summary texts, one per `summary_text` part, in order.
        #[serde(default)]
        summary: Vec<String>,
    },
}

/// The result of one tool call, as the model will see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
}

impl AssistantItem {
    /// All visible text, concatenated in order.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|part| match part {
                AssistantPart::Text { text } => Some(text.as_str()),
                AssistantPart::Reasoning { .. }
                | AssistantPart::ToolCall(_)
                | AssistantPart::WebSearch(_) => None,
            })
            .collect()
    }

    /// All reasoning text, concatenated in order.
    pub fn reasoning(&self) -> String {
        self.parts
            .iter()
            .filter_map(|part| match part {
                AssistantPart::Reasoning { text, .. } => Some(text.as_str()),
                AssistantPart::Text { .. }
                | AssistantPart::ToolCall(_)
                | AssistantPart::WebSearch(_) => None,
            })
            .collect()
    }

    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|part| match part {
            AssistantPart::ToolCall(call) => Some(call),
            AssistantPart::Reasoning { .. }
            | AssistantPart::Text { .. }
            | AssistantPart::WebSearch(_) => None,
        })
    }

    pub fn has_tool_calls(&self) -> bool {
        self.tool_calls().next().is_some()
    }
}

/// Why a response ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model finished its answer (`stop`, `end_turn`, `stop_sequence`, `completed`).
    Stop,
    /// The output limit cut the answer (`length`, `max_tokens`, `max_output_tokens`).
    Length,
    /// The model asked for tools (`tool_calls`, `tool_use`).
    ToolCalls,
    /// The provider filtered the answer (`content_filter`, `refusal`).
    ContentFilter,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
            Self::ContentFilter => "content_filter",
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the person wrote of a user item's `text`: without the notes keel put before it (the
/// interruption, a mode change: lines of `[keel: …]` and an empty line) and the files it
/// attached after it (`<attached …>` blocks, and `[keel: @… was not attached …]`).
pub fn person_text(text: &str) -> &str {
    let mut rest = text;
    if rest.starts_with("[keel: ")
        && let Some((notes, prompt)) = rest.split_once("\n\n")
        && notes.lines().all(|line| line.starts_with("[keel: "))
    {
        rest = prompt;
    }
    let end = ["\n\n<attached path=\"", "\n\n[keel: @"]
        .iter()
        .filter_map(|marker| rest.find(marker))
        .min()
        .unwrap_or(rest.len());
    &rest[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_round_trips_through_json_with_stable_bytes() {
        let item = Item::Assistant(AssistantItem {
            parts: vec![
                AssistantPart::Reasoning {
                    text: "think".into(),
                    replay: Some(ReplayData::AnthropicThinking {
                        signature: "sig".into(),
                    }),
                },
                AssistantPart::Text { text: "hi".into() },
                AssistantPart::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\": \"ls\"}".into(),
                }),
            ],
        });
        let bytes = serde_json::to_string(&item).unwrap();
        let back: Item = serde_json::from_str(&bytes).unwrap();
        assert_eq!(back, item);
        assert_eq!(serde_json::to_string(&back).unwrap(), bytes);
        assert!(bytes.starts_with(r#"{"role":"assistant","parts":[{"type":"reasoning""#));
    }

    #[test]
    fn accessors_concatenate_in_order() {
        let item = AssistantItem {
            parts: vec![
                AssistantPart::Text { text: "a".into() },
                AssistantPart::Reasoning {
                    text: "r".into(),
                    replay: None,
                },
                AssistantPart::Text { text: "b".into() },
            ],
        };
        assert_eq!(item.text(), "ab");
        assert_eq!(item.reasoning(), "r");
        assert!(!item.has_tool_calls());
    }
}
