//! Chat Completions projection, DeepSeek flavour.
//!
//! Invariants:
//! - Under `reasoning_protocol = deepseek | mimo | kimi`, every assistant message that carried
//!   tool calls has `reasoning_content` (an empty string where there was none), in every later
//!   request; assistant messages without tool calls never carry it. Under `none`, never.
//! - Tool results follow their assistant message in history order, one `tool` message each.

use super::{ProjectionError, ProjectionInput};
use crate::profile::ProviderProfile;
use keel_types::{AssistantItem, Item, ToolSpec};
use serde::Serialize;

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    stream: bool,
    stream_options: StreamOptions,
    max_tokens: u32,
    /// `reasoning_effort` as this protocol says it (nothing when unset).
    #[serde(flatten)]
    effort: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: Vec<ChatTool<'a>>,
    messages: Vec<ChatMessage<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct ChatTool<'a> {
    r#type: &'static str,
    function: ChatFunction<'a>,
}

#[derive(Serialize)]
struct ChatFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum ChatMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: std::borrow::Cow<'a, str>,
    },
    Assistant {
        content: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ChatToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct ChatToolCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: ChatCallFunction<'a>,
}

#[derive(Serialize)]
struct ChatCallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

pub(super) fn project(
    profile: &ProviderProfile,
    input: &ProjectionInput<'_>,
) -> Result<(Vec<u8>, usize), ProjectionError> {
    let mut messages = Vec::with_capacity(input.history.len() + 1);
    if !input.system.is_empty() {
        messages.push(ChatMessage::System {
            content: input.system,
        });
    }
    // A context block goes at the head of the user message after it (one message: some
    // providers refuse two user messages in a row).
    let mut context: Option<&str> = None;
    for item in input.history {
        // Only a user message right after it takes the block; otherwise it stands alone, in
        // place (it never moves into a later message).
        if let Some(head) =
            context.take_if(|_| !matches!(item, Item::User { .. } | Item::Summary(_)))
        {
            messages.push(ChatMessage::User {
                content: head.into(),
            });
        }
        messages.push(match item {
            Item::Context(block) => {
                context = Some(&block.text);
                continue;
            }
            Item::User { text } | Item::Summary(keel_types::Summary { text, .. }) => {
                ChatMessage::User {
                    content: match context.take() {
                        Some(head) => format!("{head}\n\n{text}").into(),
                        None => text.as_str().into(),
                    },
                }
            }
            Item::Assistant(assistant) => assistant_message(profile, assistant),
            Item::ToolResult(result) => ChatMessage::Tool {
                tool_call_id: &result.call_id,
                content: &result.content,
            },
        });
    }
    if let Some(head) = context {
        messages.push(ChatMessage::User {
            content: head.into(),
        });
    }
    let count = messages.len();
    let request = ChatRequest {
        model: input.model,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        max_tokens: profile.max_output_tokens,
        effort: profile.effort_fields(),
        tools: input.tools.iter().map(chat_tool).collect(),
        messages,
    };
    Ok((serde_json::to_vec(&request)?, count))
}

fn chat_tool(spec: &ToolSpec) -> ChatTool<'_> {
    ChatTool {
        r#type: "function",
        function: ChatFunction {
            name: &spec.name,
            description: &spec.description,
            parameters: &spec.parameters,
        },
    }
}

fn assistant_message<'a>(
    profile: &ProviderProfile,
    assistant: &'a AssistantItem,
) -> ChatMessage<'a> {
    let tool_calls: Vec<ChatToolCall<'a>> = assistant
        .tool_calls()
        .map(|call| ChatToolCall {
            id: &call.id,
            r#type: "function",
            function: ChatCallFunction {
                name: &call.name,
                arguments: &call.arguments,
            },
        })
        .collect();
    let replay = !tool_calls.is_empty()
        && profile
            .reasoning_protocol
            .replays_reasoning_with_tool_calls();
    ChatMessage::Assistant {
        content: assistant.text(),
        reasoning_content: replay.then(|| assistant.reasoning()),
        tool_calls,
    }
}
