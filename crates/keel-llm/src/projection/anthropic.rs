//! Anthropic Messages projection.
//!
//! Invariants:
//! - Thinking blocks go back unmodified, signature included, in their original position;
//!   reasoning without a signature cannot be replayed and is left out.
//! - Consecutive user-side items (user text, tool results) form one `user` message, so roles
//!   alternate as the API requires.

use super::{ProjectionError, ProjectionInput, arguments_as_object};
use crate::profile::ProviderProfile;
use keel_types::{AssistantPart, Item, ReplayData, ToolSpec};
use serde::Serialize;
use serde_json::value::RawValue;

#[derive(Serialize)]
struct AnthropicRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    /// `reasoning_effort` as this protocol says it (nothing when unset).
    #[serde(flatten)]
    effort: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: Vec<ToolEntry<'a>>,
    messages: Vec<AnthropicMessage<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ToolEntry<'a> {
    Function(AnthropicTool<'a>),
    /// The provider's own server tool (native web search).
    Native(serde_json::Value),
}

#[derive(Serialize)]
struct AnthropicTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a serde_json::Value,
}

#[derive(Serialize)]
struct AnthropicMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Box<RawValue>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// A provider block replayed as received (native web search).
    #[serde(untagged)]
    Raw(&'a serde_json::Value),
}

pub(super) fn project(
    profile: &ProviderProfile,
    input: &ProjectionInput<'_>,
) -> Result<(Vec<u8>, usize), ProjectionError> {
    let mut messages: Vec<AnthropicMessage<'_>> = Vec::with_capacity(input.history.len());
    for item in input.history {
        // A context block is a text block of the user message after it (same-role items
        // merge below).
        let (role, blocks) = match item {
            Item::User { text }
            | Item::Summary(keel_types::Summary { text, .. })
            | Item::Context(keel_types::ContextBlock { text, .. }) => {
                ("user", vec![Block::Text { text }])
            }
            Item::ToolResult(result) => (
                "user",
                vec![Block::ToolResult {
                    tool_use_id: &result.call_id,
                    content: &result.content,
                    is_error: result.is_error,
                }],
            ),
            Item::Assistant(assistant) => (
                "assistant",
                assistant.parts.iter().flat_map(assistant_blocks).collect(),
            ),
        };
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            Some(_) | None => messages.push(AnthropicMessage {
                role,
                content: blocks,
            }),
        }
    }
    let count = messages.len();
    let request = AnthropicRequest {
        model: input.model,
        max_tokens: profile.max_output_tokens,
        stream: true,
        effort: profile.effort_fields(),
        system: input.system,
        tools: input
            .tools
            .iter()
            .map(|spec| ToolEntry::Function(anthropic_tool(spec)))
            .chain(profile.native_web_search.then(|| {
                ToolEntry::Native(serde_json::json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 5}))
            }))
            .collect(),
        messages,
    };
    Ok((serde_json::to_vec(&request)?, count))
}

fn anthropic_tool(spec: &ToolSpec) -> AnthropicTool<'_> {
    AnthropicTool {
        name: &spec.name,
        description: &spec.description,
        input_schema: &spec.parameters,
    }
}

fn assistant_blocks(part: &AssistantPart) -> Vec<Block<'_>> {
    match part {
        AssistantPart::WebSearch(search) => search.replay.iter().map(Block::Raw).collect(),
        other => assistant_block(other).into_iter().collect(),
    }
}

fn assistant_block(part: &AssistantPart) -> Option<Block<'_>> {
    match part {
        AssistantPart::WebSearch(_) => None,
        AssistantPart::Text { text } => (!text.is_empty()).then_some(Block::Text { text }),
        AssistantPart::ToolCall(call) => Some(Block::ToolUse {
            id: &call.id,
            name: &call.name,
            input: arguments_as_object(&call.arguments),
        }),
        AssistantPart::Reasoning { text, replay } => match replay {
            Some(ReplayData::AnthropicThinking { signature }) => Some(Block::Thinking {
                thinking: text,
                signature,
            }),
            Some(ReplayData::AnthropicRedactedThinking { data }) => {
                Some(Block::RedactedThinking { data })
            }
            Some(ReplayData::ResponsesReasoning { .. }) | None => None,
        },
    }
}
