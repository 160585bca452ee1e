//! Responses projection, always stateless (`store: false`).
//!
//! Invariants:
//! - Reasoning items are replayed in order, with their `encrypted_content`, directly before the
//!   item that followed them; item ids are never sent (nothing is stored server-side).
//! - Under `reasoning_protocol = deepseek | mimo | kimi`, an assistant turn with function calls
//!   always carries a reasoning item (an empty one where there was none); under `none`, only
//!   reasoning items the provider produced are replayed.

use super::{ProjectionError, ProjectionInput};
use crate::profile::ProviderProfile;
use keel_types::{AssistantItem, AssistantPart, Item, ReplayData, ToolSpec};
use serde::Serialize;

#[derive(Serialize)]
struct ResponsesRequest<'a> {
    model: &'a str,
    store: bool,
    stream: bool,
    max_output_tokens: u32,
    include: [&'static str; 1],
    /// `reasoning_effort` as this protocol says it (nothing when unset).
    #[serde(flatten)]
    effort: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "str::is_empty")]
    instructions: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: Vec<ToolEntry<'a>>,
    input: Vec<InputItem<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ToolEntry<'a> {
    Function(ResponsesTool<'a>),
    /// The provider's own tool (native web search).
    Native(serde_json::Value),
}

#[derive(Serialize)]
struct ResponsesTool<'a> {
    r#type: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InputItem<'a> {
    Message {
        role: &'static str,
        content: Vec<ContentPart<'a>>,
    },
    Reasoning {
        summary: Vec<SummaryPart<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<&'a str>,
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: &'a str,
    },
    /// A provider item replayed as received (native web search).
    #[serde(untagged)]
    Raw(&'a serde_json::Value),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentPart<'a> {
    InputText { text: &'a str },
    OutputText { text: &'a str },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum SummaryPart<'a> {
    SummaryText { text: &'a str },
}

pub(super) fn project(
    profile: &ProviderProfile,
    input: &ProjectionInput<'_>,
) -> Result<(Vec<u8>, usize), ProjectionError> {
    let mut items = Vec::with_capacity(input.history.len() * 2);
    // A context block is the first text part of the user message after it.
    let mut context: Option<&str> = None;
    for item in input.history {
        // Only a user message right after it takes the block; otherwise it stands alone.
        if let Some(text) =
            context.take_if(|_| !matches!(item, Item::User { .. } | Item::Summary(_)))
        {
            items.push(InputItem::Message {
                role: "user",
                content: vec![ContentPart::InputText { text }],
            });
        }
        match item {
            Item::Context(block) => context = Some(&block.text),
            Item::User { text } | Item::Summary(keel_types::Summary { text, .. }) => {
                let mut content = Vec::with_capacity(2);
                if let Some(head) = context.take() {
                    content.push(ContentPart::InputText { text: head });
                }
                content.push(ContentPart::InputText { text });
                items.push(InputItem::Message {
                    role: "user",
                    content,
                })
            }
            Item::ToolResult(result) => items.push(InputItem::FunctionCallOutput {
                call_id: &result.call_id,
                output: &result.content,
            }),
            Item::Assistant(assistant) => push_assistant(profile, assistant, &mut items),
        }
    }
    if let Some(text) = context {
        items.push(InputItem::Message {
            role: "user",
            content: vec![ContentPart::InputText { text }],
        });
    }
    let count = items.len();
    let request = ResponsesRequest {
        model: input.model,
        store: false,
        stream: true,
        max_output_tokens: profile.max_output_tokens,
        include: ["reasoning.encrypted_content"],
        effort: profile.effort_fields(),
        instructions: input.system,
        tools: input
            .tools
            .iter()
            .map(|spec| ToolEntry::Function(responses_tool(spec)))
            .chain(
                profile
                    .native_web_search
                    .then(|| ToolEntry::Native(serde_json::json!({"type": "web_search"}))),
            )
            .collect(),
        input: items,
    };
    Ok((serde_json::to_vec(&request)?, count))
}

fn responses_tool(spec: &ToolSpec) -> ResponsesTool<'_> {
    ResponsesTool {
        r#type: "function",
        name: &spec.name,
        description: &spec.description,
        parameters: &spec.parameters,
    }
}

fn push_assistant<'a>(
    profile: &ProviderProfile,
    assistant: &'a AssistantItem,
    items: &mut Vec<InputItem<'a>>,
) {
    let contract_replays = assistant.has_tool_calls()
        && profile
            .reasoning_protocol
            .replays_reasoning_with_tool_calls();
    let has_reasoning = assistant
        .parts
        .iter()
        .any(|part| matches!(part, AssistantPart::Reasoning { .. }));
    if contract_replays && !has_reasoning {
        items.push(InputItem::Reasoning {
            summary: Vec::new(),
            encrypted_content: None,
        });
    }
    for part in &assistant.parts {
        match part {
            AssistantPart::Reasoning { text, replay } => match replay {
                Some(ReplayData::ResponsesReasoning {
                    encrypted_content,
                    summary,
                }) => {
                    items.push(InputItem::Reasoning {
                        summary: summary
                            .iter()
                            .map(|text| SummaryPart::SummaryText { text })
                            .collect(),
                        encrypted_content: encrypted_content.as_deref(),
                    });
                }
                Some(ReplayData::AnthropicThinking { .. })
                | Some(ReplayData::AnthropicRedactedThinking { .. })
                | None => {
                    if contract_replays {
                        let summary = if text.is_empty() {
                            Vec::new()
                        } else {
                            vec![SummaryPart::SummaryText { text }]
                        };
                        items.push(InputItem::Reasoning {
                            summary,
                            encrypted_content: None,
                        });
                    }
                }
            },
            AssistantPart::Text { text } => {
                if !text.is_empty() {
                    items.push(InputItem::Message {
                        role: "assistant",
                        content: vec![ContentPart::OutputText { text }],
                    });
                }
            }
            AssistantPart::WebSearch(search) => {
                items.extend(search.replay.iter().map(InputItem::Raw))
            }
            AssistantPart::ToolCall(call) => items.push(InputItem::FunctionCall {
                call_id: &call.id,
                name: &call.name,
                arguments: &call.arguments,
            }),
        }
    }
}
