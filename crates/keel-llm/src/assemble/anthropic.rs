//! Anthropic Messages stream assembly.
//!
//! Invariants:
//! - Content blocks are kept by their `index` and returned in index order, so thinking blocks
//!   (with their signatures) stay before the text and tool use that followed them.
//! - Usage follows Anthropic's split: total input = `input_tokens` + cache read + cache write.
//! - The response is complete only after `message_stop` (or a `stop_reason` when the server
//!   closes without it).

use super::template::{Templates, optional_str};
use super::unknown_finish_reason;
use super::{Completion, Delta, Progress, cut_short, finished_call, unexpected_payload};
use crate::classify::classify_stream_error;
use keel_types::Usage;
use keel_types::{AssistantItem, AssistantPart, FailureDiagnostic, FinishReason, ReplayData};
use serde::Deserialize;
use std::borrow::Cow;

#[derive(Debug)]
pub struct AnthropicAssembler {
    blocks: Vec<(u32, Block)>,
    stop_reason: Option<FinishReason>,
    usage: AnthropicUsage,
    /// The last `content_block_delta` (see `template`).
    templates: Templates<(u32, DeltaKind)>,
}

impl Default for AnthropicAssembler {
    fn default() -> Self {
        Self::with_templates(true)
    }
}

/// Which string of a `content_block_delta` a template carries.
#[derive(Debug, Clone, Copy)]
enum DeltaKind {
    Text,
    Thinking,
    Signature,
    InputJson,
}

#[derive(Debug)]
enum Block {
    /// A native web search call (`server_tool_use`) and its streamed input.
    ServerToolUse {
        start: serde_json::Value,
        json: String,
    },
    /// A native web search result (`web_search_tool_result`), complete at its start.
    SearchResult(serde_json::Value),
    Text(String),
    Thinking {
        text: String,
        signature: String,
    },
    Redacted(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        initial: Option<String>,
    },
    Ignored,
}

/// The events the assembler acts on.
enum StreamEvent<'a> {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: u32,
        content_block: serde_json::Value,
    },
    ContentBlockDelta {
        index: u32,
        delta: BlockDelta<'a>,
    },
    MessageDelta {
        stop_reason: Option<Cow<'a, str>>,
        usage: Option<AnthropicUsage>,
    },
    MessageStop,
    Error,
    /// `content_block_stop`, `ping` and types keel does not know.
    Ignored,
}

/// One event as it is on the wire, read in one pass (serde's internally tagged enums would
/// buffer every event whole and read it twice): the members of every event type side by side,
/// deltas borrowed where they have no escapes.
#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: Option<u32>,
    #[serde(default, borrow)]
    delta: Option<WireDelta<'a>>,
    #[serde(default)]
    content_block: Option<serde_json::Value>,
    #[serde(default)]
    message: Option<MessageStart>,
    #[serde(default)]
    usage: Option<AnthropicUsage>,
}

/// A `content_block_delta`'s or a `message_delta`'s `delta`.
#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "optional_str")]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "optional_str")]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "optional_str")]
    signature: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "optional_str")]
    partial_json: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "optional_str")]
    stop_reason: Option<Cow<'a, str>>,
}

impl<'a> WireEvent<'a> {
    /// The event, or `None` when a member its type requires is missing.
    fn into_event(self) -> Option<StreamEvent<'a>> {
        Some(match self.kind.as_ref() {
            "message_start" => StreamEvent::MessageStart {
                message: self.message?,
            },
            "content_block_start" => StreamEvent::ContentBlockStart {
                index: self.index?,
                content_block: self.content_block?,
            },
            "content_block_delta" => StreamEvent::ContentBlockDelta {
                index: self.index?,
                delta: self.delta?.into_block_delta()?,
            },
            "message_delta" => StreamEvent::MessageDelta {
                stop_reason: self.delta.and_then(|delta| delta.stop_reason),
                usage: self.usage,
            },
            "message_stop" => StreamEvent::MessageStop,
            "error" => StreamEvent::Error,
            _ => StreamEvent::Ignored,
        })
    }
}

impl<'a> WireDelta<'a> {
    fn into_block_delta(self) -> Option<BlockDelta<'a>> {
        Some(match self.kind?.as_ref() {
            "text_delta" => BlockDelta::TextDelta { text: self.text? },
            "thinking_delta" => BlockDelta::ThinkingDelta {
                thinking: self.thinking?,
            },
            "signature_delta" => BlockDelta::SignatureDelta {
                signature: self.signature?,
            },
            "input_json_delta" => BlockDelta::InputJsonDelta {
                partial_json: self.partial_json?,
            },
            _ => BlockDelta::Unknown,
        })
    }
}

#[derive(Deserialize)]
struct MessageStart {
    #[serde(default)]
    usage: Option<AnthropicUsage>,
}

enum BlockDelta<'a> {
    TextDelta { text: Cow<'a, str> },
    ThinkingDelta { thinking: Cow<'a, str> },
    SignatureDelta { signature: Cow<'a, str> },
    InputJsonDelta { partial_json: Cow<'a, str> },
    Unknown,
}

impl<'a> BlockDelta<'a> {
    fn string(&self) -> Option<(DeltaKind, &Cow<'a, str>)> {
        match self {
            Self::TextDelta { text } => Some((DeltaKind::Text, text)),
            Self::ThinkingDelta { thinking } => Some((DeltaKind::Thinking, thinking)),
            Self::SignatureDelta { signature } => Some((DeltaKind::Signature, signature)),
            Self::InputJsonDelta { partial_json } => Some((DeltaKind::InputJson, partial_json)),
            Self::Unknown => None,
        }
    }

    fn of(kind: DeltaKind, value: Cow<'a, str>) -> Self {
        match kind {
            DeltaKind::Text => Self::TextDelta { text: value },
            DeltaKind::Thinking => Self::ThinkingDelta { thinking: value },
            DeltaKind::Signature => Self::SignatureDelta { signature: value },
            DeltaKind::InputJson => Self::InputJsonDelta {
                partial_json: value,
            },
        }
    }
}

#[derive(Debug, Deserialize, Default, Clone, Copy)]
struct AnthropicUsage {
    #[serde(default, deserialize_with = "super::token_count::lenient_count")]
    input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "super::token_count::lenient_count")]
    output_tokens: Option<u64>,
    #[serde(default, deserialize_with = "super::token_count::lenient_count")]
    cache_read_input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "super::token_count::lenient_count")]
    cache_creation_input_tokens: Option<u64>,
}

impl AnthropicUsage {
    /// Later reports override earlier ones field by field (`message_delta` repeats totals).
    fn merge(&mut self, newer: &AnthropicUsage) {
        self.input_tokens = newer.input_tokens.or(self.input_tokens);
        self.output_tokens = newer.output_tokens.or(self.output_tokens);
        self.cache_read_input_tokens = newer
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
        self.cache_creation_input_tokens = newer
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
    }

    fn to_usage(self) -> Usage {
        let uncached = self.input_tokens.unwrap_or(0);
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let written = self.cache_creation_input_tokens.unwrap_or(0);
        Usage {
            input: uncached + read + written,
            output: self.output_tokens.unwrap_or(0),
            reasoning: 0,
            cache_hit: read,
            cache_miss: uncached + written,
            cache_write: written,
        }
    }
}

fn map_stop_reason(reason: &str) -> Result<FinishReason, FailureDiagnostic> {
    match reason {
        "end_turn" | "stop_sequence" | "pause_turn" => Ok(FinishReason::Stop),
        "max_tokens" | "model_context_window_exceeded" => Ok(FinishReason::Length),
        "tool_use" => Ok(FinishReason::ToolCalls),
        "refusal" => Ok(FinishReason::ContentFilter),
        other => Err(unknown_finish_reason(other)),
    }
}

fn block_from_start(start: &serde_json::Value) -> Block {
    let text = |key: &str| {
        start
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    match start.get("type").and_then(|t| t.as_str()).unwrap_or("") {
        "text" => Block::Text(text("text")),
        "thinking" => Block::Thinking {
            text: text("thinking"),
            signature: text("signature"),
        },
        "redacted_thinking" => Block::Redacted(text("data")),
        "server_tool_use" => Block::ServerToolUse {
            start: start.clone(),
            json: String::new(),
        },
        "web_search_tool_result" => Block::SearchResult(start.clone()),
        "tool_use" => Block::ToolUse {
            id: text("id"),
            name: text("name"),
            json: String::new(),
            initial: start
                .get("input")
                .filter(|input| input.as_object().is_some_and(|map| !map.is_empty()))
                .map(|input| input.to_string()),
        },
        _ => Block::Ignored,
    }
}

impl AnthropicAssembler {
    /// How many events were read through a template.
    #[cfg(test)]
    pub(super) fn filled(&self) -> usize {
        self.templates.filled()
    }

    /// `templates: false` parses every event in full.
    pub fn with_templates(templates: bool) -> Self {
        Self {
            blocks: Vec::new(),
            stop_reason: None,
            usage: AnthropicUsage::default(),
            templates: Templates::new(templates),
        }
    }

    pub fn push(
        &mut self,
        event: &str,
        data: &str,
        sink: &mut dyn FnMut(Delta<'_>),
    ) -> Result<Progress, FailureDiagnostic> {
        if event == "error" {
            return Err(error_event(data));
        }
        if let Some((&(index, kind), value)) = self.templates.fill(event, data) {
            self.apply_delta(index, BlockDelta::of(kind, value), sink)?;
            return Ok(Progress::Continue);
        }
        let parsed = serde_json::from_str::<WireEvent<'_>>(data)
            .ok()
            .and_then(WireEvent::into_event)
            .ok_or_else(|| unexpected_payload(data))?;
        let found = match &parsed {
            StreamEvent::ContentBlockDelta { index, delta } => delta
                .string()
                .map(|(kind, value)| (value.as_ref(), (*index, kind))),
            _ => None,
        };
        self.templates.learn(event, data, found);
        match parsed {
            StreamEvent::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.usage.merge(&usage);
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                self.blocks.push((index, block_from_start(&content_block)));
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                self.apply_delta(index, delta, sink)?
            }
            StreamEvent::Ignored => {}
            StreamEvent::MessageDelta { stop_reason, usage } => {
                if let Some(reason) = stop_reason {
                    self.stop_reason = Some(map_stop_reason(&reason)?);
                }
                if let Some(usage) = usage {
                    self.usage.merge(&usage);
                }
            }
            StreamEvent::MessageStop => {
                return Ok(Progress::Done);
            }
            StreamEvent::Error => return Err(error_event(data)),
        }
        Ok(Progress::Continue)
    }

    fn apply_delta(
        &mut self,
        index: u32,
        delta: BlockDelta<'_>,
        sink: &mut dyn FnMut(Delta<'_>),
    ) -> Result<(), FailureDiagnostic> {
        let Some((_, block)) = self.blocks.iter_mut().rev().find(|(i, _)| *i == index) else {
            return Err(unexpected_payload("{}"));
        };
        match (block, delta) {
            (Block::Text(text), BlockDelta::TextDelta { text: piece }) => {
                sink(Delta::Text(&piece));
                text.push_str(&piece);
            }
            (Block::Thinking { text, .. }, BlockDelta::ThinkingDelta { thinking }) => {
                sink(Delta::Reasoning(&thinking));
                text.push_str(&thinking);
            }
            (
                Block::Thinking { signature, .. },
                BlockDelta::SignatureDelta { signature: piece },
            ) => {
                signature.push_str(&piece);
            }
            (Block::ServerToolUse { json, .. }, BlockDelta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
            }
            (Block::ToolUse { json, .. }, BlockDelta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
            }
            (Block::Ignored, _) | (_, BlockDelta::Unknown) => {}
            (_, _) => return Err(unexpected_payload("{}")),
        }
        Ok(())
    }

    pub fn finish(mut self) -> Result<Completion, FailureDiagnostic> {
        let Some(finish_reason) = self.stop_reason else {
            return Err(cut_short());
        };
        // A server that closed without `message_stop` but after a stop reason did finish.
        self.blocks.sort_by_key(|(index, _)| *index);
        Ok(Completion {
            item: build_item(self.blocks.into_iter().map(|(_, block)| block))?,
            finish_reason,
            usage: self.usage.to_usage(),
        })
    }
}

/// An `error` event, in Anthropic's shape or llama-server's.
fn error_event(data: &str) -> FailureDiagnostic {
    match serde_json::from_str::<serde_json::Value>(data) {
        Ok(value) => classify_stream_error(&value),
        Err(_) => unexpected_payload(data),
    }
}

fn build_item(blocks: impl Iterator<Item = Block>) -> Result<AssistantItem, FailureDiagnostic> {
    let mut parts = Vec::new();
    for (position, block) in blocks.enumerate() {
        match block {
            Block::Text(text) => {
                if !text.is_empty() {
                    parts.push(AssistantPart::Text { text });
                }
            }
            Block::Thinking { text, signature } => parts.push(AssistantPart::Reasoning {
                text,
                replay: (!signature.is_empty())
                    .then_some(ReplayData::AnthropicThinking { signature }),
            }),
            Block::Redacted(data) => parts.push(AssistantPart::Reasoning {
                text: String::new(),
                replay: Some(ReplayData::AnthropicRedactedThinking { data }),
            }),
            Block::ToolUse {
                id,
                name,
                json,
                initial,
            } => {
                let arguments = if json.is_empty() {
                    initial.unwrap_or_default()
                } else {
                    json
                };
                parts.push(finished_call(id, name, arguments, position)?);
            }
            Block::ServerToolUse { start, json } => {
                parts.push(super::search::anthropic_search_started(start, &json));
            }
            Block::SearchResult(block) => super::search::anthropic_search_result(&mut parts, block),
            Block::Ignored => {}
        }
    }
    Ok(AssistantItem { parts })
}

/// A non-streamed Messages body.
pub(super) fn parse_complete(value: &serde_json::Value) -> Result<Completion, FailureDiagnostic> {
    let content = value
        .get("content")
        .and_then(|c| c.as_array())
        .ok_or_else(|| unexpected_payload(&value.to_string()))?;
    let blocks = content.iter().map(|start| match block_from_start(start) {
        Block::ToolUse { id, name, .. } => Block::ToolUse {
            id,
            name,
            json: start
                .get("input")
                .map(|i| i.to_string())
                .unwrap_or_default(),
            initial: None,
        },
        other => other,
    });
    let reason = value
        .get("stop_reason")
        .and_then(|r| r.as_str())
        .unwrap_or("end_turn");
    let usage: AnthropicUsage = value
        .get("usage")
        .and_then(|usage| serde_json::from_value(usage.clone()).ok())
        .unwrap_or_default();
    Ok(Completion {
        item: build_item(blocks)?,
        finish_reason: map_stop_reason(reason)?,
        usage: usage.to_usage(),
    })
}
