//! Responses stream assembly.
//!
//! Invariants:
//! - Output items are kept in the order they were added; `output_item.done` carries the full
//!   item and replaces what the deltas built (servers may send no `arguments.done`).
//! - Reasoning items keep `encrypted_content` and their summaries for stateless replay.
//! - The response is complete only with `response.completed` or `response.incomplete`.

use super::template::{Templates, optional_str};
use super::unknown_finish_reason;
use super::{Completion, Delta, Progress, cut_short, finished_call, unexpected_payload};
use crate::classify::classify_stream_error;
use keel_types::Usage;
use keel_types::{AssistantItem, AssistantPart, FailureDiagnostic, FinishReason, ReplayData};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

#[derive(Debug)]
pub struct ResponsesAssembler {
    items: Vec<OutputItem>,
    finish: Option<FinishReason>,
    usage: Usage,
    /// The last delta event (see `template`).
    templates: Templates<DeltaSlot>,
}

impl Default for ResponsesAssembler {
    fn default() -> Self {
        Self::with_templates(true)
    }
}

/// What a templated delta event fed: its kind and the item it names.
#[derive(Debug)]
struct DeltaSlot {
    kind: DeltaKind,
    item_id: String,
}

#[derive(Debug, Clone, Copy)]
enum DeltaKind {
    Text,
    Reasoning,
    Arguments,
}

#[derive(Debug, Default, Deserialize)]
struct OutputItem {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    call_id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
    #[serde(default)]
    content: Vec<ContentPart>,
    #[serde(default)]
    summary: Vec<ContentPart>,
    #[serde(default)]
    encrypted_content: Option<String>,
    /// Text gathered from deltas, for items whose `done` event never came.
    #[serde(skip)]
    streamed_text: String,
    /// The item as the provider sent it (replayed for native web search).
    #[serde(skip)]
    raw: serde_json::Value,
}

impl OutputItem {
    fn from_raw(raw: serde_json::Value) -> OutputItem {
        let mut item: OutputItem = serde_json::from_value(raw.clone()).unwrap_or_default();
        item.raw = raw;
        item
    }
}

#[derive(Debug, Default, Deserialize)]
struct ContentPart {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    text: String,
}

/// The events the assembler acts on.
enum StreamEvent<'a> {
    ItemAdded {
        item: serde_json::Value,
    },
    ItemDone {
        item: serde_json::Value,
    },
    TextDelta {
        item_id: Cow<'a, str>,
        delta: Cow<'a, str>,
    },
    ReasoningDelta {
        item_id: Cow<'a, str>,
        delta: Cow<'a, str>,
    },
    ArgumentsDelta {
        item_id: Cow<'a, str>,
        delta: Cow<'a, str>,
    },
    Completed {
        response: ResponseBody,
    },
    Failed {
        response: serde_json::Value,
    },
    Error,
    Other,
}

/// One event as it is on the wire, read in one pass: the deltas are borrowed where they have
/// no escapes, and the rare large members (`item`, `response`) are only delimited here and read
/// once more only by the events that use them. (serde's internally tagged enums would buffer
/// every event whole and read it twice.)
#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    item_id: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "optional_str")]
    delta: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    item: Option<&'a RawValue>,
    #[serde(default, borrow)]
    response: Option<&'a RawValue>,
}

impl<'a> WireEvent<'a> {
    /// The event, or `None` when a member its type requires is missing or malformed.
    fn into_event(self) -> Option<StreamEvent<'a>> {
        let value = |raw: Option<&RawValue>| -> Option<serde_json::Value> {
            serde_json::from_str(raw?.get()).ok()
        };
        Some(match self.kind.as_ref() {
            "response.output_item.added" => StreamEvent::ItemAdded {
                item: value(self.item)?,
            },
            "response.output_item.done" => StreamEvent::ItemDone {
                item: value(self.item)?,
            },
            "response.output_text.delta" => StreamEvent::TextDelta {
                item_id: self.item_id,
                delta: self.delta?,
            },
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                StreamEvent::ReasoningDelta {
                    item_id: self.item_id,
                    delta: self.delta?,
                }
            }
            "response.function_call_arguments.delta" => StreamEvent::ArgumentsDelta {
                item_id: self.item_id,
                delta: self.delta?,
            },
            "response.completed" | "response.incomplete" => StreamEvent::Completed {
                response: serde_json::from_str(self.response?.get()).ok()?,
            },
            "response.failed" => StreamEvent::Failed {
                response: value(self.response)?,
            },
            "error" => StreamEvent::Error,
            _ => StreamEvent::Other,
        })
    }
}

impl<'a> StreamEvent<'a> {
    /// A delta event's kind, item and string (what a template re-enacts).
    fn delta(&self) -> Option<(DeltaKind, &str, &Cow<'a, str>)> {
        match self {
            Self::TextDelta { item_id, delta } => Some((DeltaKind::Text, item_id, delta)),
            Self::ReasoningDelta { item_id, delta } => Some((DeltaKind::Reasoning, item_id, delta)),
            Self::ArgumentsDelta { item_id, delta } => Some((DeltaKind::Arguments, item_id, delta)),
            _ => None,
        }
    }
}

#[derive(Deserialize, Default)]
struct ResponseBody {
    #[serde(default)]
    usage: Option<ResponsesUsage>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
    #[serde(default)]
    output: Vec<serde_json::Value>,
    #[serde(default)]
    status: Option<String>,
}

#[derive(Deserialize, Default)]
struct IncompleteDetails {
    #[serde(default)]
    reason: String,
}

#[derive(Deserialize, Default)]
struct ResponsesUsage {
    #[serde(
        default,
        deserialize_with = "super::token_count::lenient_count_or_zero"
    )]
    input_tokens: u64,
    #[serde(
        default,
        deserialize_with = "super::token_count::lenient_count_or_zero"
    )]
    output_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize, Default)]
struct InputDetails {
    #[serde(
        default,
        deserialize_with = "super::token_count::lenient_count_or_zero"
    )]
    cached_tokens: u64,
}

#[derive(Deserialize, Default)]
struct OutputDetails {
    #[serde(
        default,
        deserialize_with = "super::token_count::lenient_count_or_zero"
    )]
    reasoning_tokens: u64,
}

impl ResponsesUsage {
    fn to_usage(&self) -> Usage {
        let cached = self.input_tokens_details.as_ref().map(|d| d.cached_tokens);
        Usage {
            input: self.input_tokens,
            output: self.output_tokens,
            reasoning: self
                .output_tokens_details
                .as_ref()
                .map_or(0, |d| d.reasoning_tokens),
            cache_hit: cached.unwrap_or(0),
            cache_miss: cached.map_or(0, |hit| self.input_tokens.saturating_sub(hit)),
            cache_write: 0,
        }
    }
}

impl ResponsesAssembler {
    /// How many events were read through a template.
    #[cfg(test)]
    pub(super) fn filled(&self) -> usize {
        self.templates.filled()
    }

    /// `templates: false` parses every event in full.
    pub fn with_templates(templates: bool) -> Self {
        Self {
            items: Vec::new(),
            finish: None,
            usage: Usage::default(),
            templates: Templates::new(templates),
        }
    }

    pub fn push(
        &mut self,
        event: &str,
        data: &str,
        sink: &mut dyn FnMut(Delta<'_>),
    ) -> Result<Progress, FailureDiagnostic> {
        if let Some((slot, value)) = self.templates.fill(event, data) {
            apply_delta(&mut self.items, slot.kind, &slot.item_id, &value, sink);
            return Ok(Progress::Continue);
        }
        // llama-server sends a bare `data: {"error":…}` with no type.
        let parsed = serde_json::from_str::<WireEvent<'_>>(data)
            .ok()
            .and_then(WireEvent::into_event)
            .ok_or_else(|| unexpected_payload(data))?;
        let found = parsed.delta().map(|(kind, item_id, value)| {
            let item_id = item_id.to_owned();
            (value.as_ref(), DeltaSlot { kind, item_id })
        });
        self.templates.learn(event, data, found);
        match parsed {
            StreamEvent::ItemAdded { item } => self.items.push(OutputItem::from_raw(item)),
            StreamEvent::ItemDone { item } => self.replace_item(OutputItem::from_raw(item)),
            StreamEvent::TextDelta { item_id, delta } => {
                apply_delta(&mut self.items, DeltaKind::Text, &item_id, &delta, sink)
            }
            StreamEvent::ReasoningDelta { item_id, delta } => apply_delta(
                &mut self.items,
                DeltaKind::Reasoning,
                &item_id,
                &delta,
                sink,
            ),
            StreamEvent::ArgumentsDelta { item_id, delta } => apply_delta(
                &mut self.items,
                DeltaKind::Arguments,
                &item_id,
                &delta,
                sink,
            ),
            StreamEvent::Completed { response } => {
                self.complete(response)?;
                return Ok(Progress::Done);
            }
            StreamEvent::Failed { response } => {
                let error = response.get("error").cloned().unwrap_or(response);
                return Err(classify_stream_error(
                    &serde_json::json!({ "error": error }),
                ));
            }
            StreamEvent::Error => return Err(error_event(data)),
            StreamEvent::Other => {}
        }
        Ok(Progress::Continue)
    }

    fn replace_item(&mut self, done: OutputItem) {
        match self
            .items
            .iter()
            .position(|item| !done.id.is_empty() && item.id == done.id)
        {
            Some(position) => {
                let streamed = std::mem::take(&mut self.items[position].streamed_text);
                self.items[position] = OutputItem {
                    streamed_text: streamed,
                    ..done
                };
            }
            None => self.items.push(done),
        }
    }

    fn complete(&mut self, response: ResponseBody) -> Result<(), FailureDiagnostic> {
        if let Some(usage) = &response.usage {
            self.usage = usage.to_usage();
        }
        if self.items.is_empty() {
            self.items = response
                .output
                .into_iter()
                .map(OutputItem::from_raw)
                .collect();
        }
        let has_calls = self.items.iter().any(|item| item.kind == "function_call");
        self.finish = Some(match response.incomplete_details {
            Some(details)
                if response.status.as_deref() == Some("incomplete")
                    || !details.reason.is_empty() =>
            {
                match details.reason.as_str() {
                    "max_output_tokens" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    other => return Err(unknown_finish_reason(other)),
                }
            }
            Some(_) | None if has_calls => FinishReason::ToolCalls,
            Some(_) | None => FinishReason::Stop,
        });
        Ok(())
    }

    pub fn finish(self) -> Result<Completion, FailureDiagnostic> {
        let Some(finish_reason) = self.finish else {
            return Err(cut_short());
        };
        Ok(Completion {
            item: build_item(self.items)?,
            finish_reason,
            usage: self.usage,
        })
    }
}

/// A delta for the item named `item_id` (or the latest of its kind).
fn apply_delta(
    items: &mut Vec<OutputItem>,
    kind: DeltaKind,
    item_id: &str,
    delta: &str,
    sink: &mut dyn FnMut(Delta<'_>),
) {
    match kind {
        DeltaKind::Text => {
            sink(Delta::Text(delta));
            item_for(items, item_id, "message")
                .streamed_text
                .push_str(delta);
        }
        DeltaKind::Reasoning => {
            sink(Delta::Reasoning(delta));
            item_for(items, item_id, "reasoning")
                .streamed_text
                .push_str(delta);
        }
        DeltaKind::Arguments => {
            item_for(items, item_id, "function_call")
                .arguments
                .push_str(delta);
        }
    }
}

fn item_for<'i>(items: &'i mut Vec<OutputItem>, item_id: &str, kind: &str) -> &'i mut OutputItem {
    let position = items
        .iter()
        .rposition(|item| !item_id.is_empty() && item.id == item_id)
        .or_else(|| items.iter().rposition(|item| item.kind == kind));
    match position {
        Some(position) => &mut items[position],
        None => {
            items.push(OutputItem {
                kind: kind.to_string(),
                id: item_id.to_string(),
                ..OutputItem::default()
            });
            let last = items.len() - 1;
            &mut items[last]
        }
    }
}

fn error_event(data: &str) -> FailureDiagnostic {
    match serde_json::from_str::<serde_json::Value>(data) {
        Ok(value) => classify_stream_error(&value),
        Err(_) => unexpected_payload(data),
    }
}

fn joined(parts: &[ContentPart], kind: &str) -> String {
    parts
        .iter()
        .filter(|part| part.kind == kind)
        .map(|part| part.text.as_str())
        .collect()
}

fn build_item(items: Vec<OutputItem>) -> Result<AssistantItem, FailureDiagnostic> {
    let mut parts = Vec::new();
    for (position, item) in items.into_iter().enumerate() {
        match item.kind.as_str() {
            "message" => {
                let text = joined(&item.content, "output_text");
                let text = if text.is_empty() {
                    item.streamed_text
                } else {
                    text
                };
                if !text.is_empty() {
                    parts.push(AssistantPart::Text { text });
                }
            }
            "reasoning" => {
                let summary: Vec<String> = item
                    .summary
                    .iter()
                    .filter(|part| part.kind == "summary_text")
                    .map(|part| part.text.clone())
                    .collect();
                let content = joined(&item.content, "reasoning_text");
                let text = if !item.streamed_text.is_empty() {
                    item.streamed_text
                } else if !content.is_empty() {
                    content
                } else {
                    summary.concat()
                };
                parts.push(AssistantPart::Reasoning {
                    text,
                    replay: Some(ReplayData::ResponsesReasoning {
                        encrypted_content: item.encrypted_content,
                        summary,
                    }),
                });
            }
            "web_search_call" => parts.push(super::search::responses_search(item.raw)),
            "function_call" => {
                let id = if item.call_id.is_empty() {
                    item.id
                } else {
                    item.call_id
                };
                parts.push(finished_call(id, item.name, item.arguments, position)?);
            }
            _ => {}
        }
    }
    Ok(AssistantItem { parts })
}

/// A non-streamed Responses body.
pub(super) fn parse_complete(value: &serde_json::Value) -> Result<Completion, FailureDiagnostic> {
    let response: ResponseBody = serde_json::from_value(value.clone())
        .map_err(|_| unexpected_payload(&value.to_string()))?;
    let mut assembler = ResponsesAssembler::default();
    assembler.complete(response)?;
    assembler.finish()
}
