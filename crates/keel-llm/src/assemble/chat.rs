//! Chat Completions stream assembly (OpenAI, DeepSeek, llama-server flavours).
//!
//! Invariants:
//! - Tool-call fragments are keyed by `index`; a fragment whose `id` differs from the id already
//!   seen at that index starts a new call (servers that reuse index 0 for parallel calls).
//! - The final usage chunk (`choices: []`) and chunks without choices are accepted anywhere.
//! - The response is complete only with a finish reason; `[DONE]` alone is not enough.

use super::template::{Templates, optional_str};
use super::unknown_finish_reason;
use super::{Completion, Delta, Progress, cut_short, finished_call, unexpected_payload};
use keel_types::Usage;
use keel_types::{AssistantItem, AssistantPart, FailureDiagnostic, FailureKind, FinishReason};
use serde::Deserialize;
use std::borrow::Cow;

#[derive(Debug)]
pub struct ChatAssembler {
    reasoning: String,
    text: String,
    calls: Vec<PartialCall>,
    finish: Option<FinishReason>,
    usage: Usage,
    /// The last chunk whose only effect was one string (see `template`).
    templates: Templates<Slot>,
}

impl Default for ChatAssembler {
    fn default() -> Self {
        Self::with_templates(true)
    }
}

/// Where a templated chunk's string goes.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Reasoning,
    Text,
    Arguments { index: Option<u32> },
}

#[derive(Debug, Default)]
struct PartialCall {
    index: u32,
    id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<ChatUsage>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: u32,
    #[serde(default, borrow)]
    delta: Option<ChoiceDelta<'a>>,
    #[serde(default, borrow, deserialize_with = "optional_str")]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct ChoiceDelta<'a> {
    #[serde(default, borrow, deserialize_with = "optional_str")]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "optional_str")]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default, borrow, deserialize_with = "optional_str")]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(default, borrow, deserialize_with = "optional_str")]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "optional_str")]
    arguments: Option<Cow<'a, str>>,
}

impl<'a> Chunk<'a> {
    /// The slot and string when this chunk's whole effect is one string (a template's chunk).
    fn single_string(&self) -> Option<(Slot, &Cow<'a, str>)> {
        let Chunk {
            choices,
            usage: None,
            error: None,
        } = self
        else {
            return None;
        };
        let [
            choice @ Choice {
                index: 0,
                finish_reason: None,
                ..
            },
        ] = choices.as_slice()
        else {
            return None;
        };
        // Every member named, so a member added later must be decided on here.
        let ChoiceDelta {
            content,
            reasoning_content,
            tool_calls,
        } = choice.delta.as_ref()?;
        match (reasoning_content, content, tool_calls) {
            (Some(reasoning), None, None) => Some((Slot::Reasoning, reasoning)),
            (None, Some(text), None) => Some((Slot::Text, text)),
            (None, None, Some(calls)) => {
                let [
                    ToolCallDelta {
                        index,
                        id: None,
                        function:
                            Some(FunctionDelta {
                                name: None,
                                arguments: Some(arguments),
                            }),
                    },
                ] = calls.as_slice()
                else {
                    return None;
                };
                Some((Slot::Arguments { index: *index }, arguments))
            }
            _ => None,
        }
    }
}

#[derive(Deserialize, Default)]
pub(super) struct ChatUsage {
    #[serde(
        default,
        deserialize_with = "super::token_count::lenient_count_or_zero"
    )]
    prompt_tokens: u64,
    #[serde(
        default,
        deserialize_with = "super::token_count::lenient_count_or_zero"
    )]
    completion_tokens: u64,
    #[serde(default, deserialize_with = "super::token_count::lenient_count")]
    prompt_cache_hit_tokens: Option<u64>,
    #[serde(default, deserialize_with = "super::token_count::lenient_count")]
    prompt_cache_miss_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    #[serde(default, deserialize_with = "super::token_count::lenient_count")]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct CompletionDetails {
    #[serde(default, deserialize_with = "super::token_count::lenient_count")]
    reasoning_tokens: Option<u64>,
}

impl ChatUsage {
    pub(super) fn to_usage(&self) -> Usage {
        let input = self.prompt_tokens;
        let (cache_hit, cache_miss) =
            match (self.prompt_cache_hit_tokens, self.prompt_cache_miss_tokens) {
                (Some(hit), Some(miss)) => (hit, miss),
                (Some(hit), None) => (hit, input.saturating_sub(hit)),
                (None, _) => {
                    let cached = self
                        .prompt_tokens_details
                        .as_ref()
                        .and_then(|d| d.cached_tokens);
                    match cached {
                        Some(hit) => (hit, input.saturating_sub(hit)),
                        None => (0, 0),
                    }
                }
            };
        Usage {
            input,
            output: self.completion_tokens,
            reasoning: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            cache_hit,
            cache_miss,
            cache_write: 0,
        }
    }
}

pub(super) fn map_finish_reason(reason: &str) -> Result<FinishReason, FailureDiagnostic> {
    match reason {
        "stop" => Ok(FinishReason::Stop),
        "length" => Ok(FinishReason::Length),
        "tool_calls" | "function_call" => Ok(FinishReason::ToolCalls),
        "content_filter" => Ok(FinishReason::ContentFilter),
        // DeepSeek: generation was interrupted because the server ran out of resources.
        "insufficient_system_resource" => Err(FailureDiagnostic::with_message(
            FailureKind::Server,
            None,
            "the provider interrupted the answer: insufficient system resources",
        )),
        other => Err(unknown_finish_reason(other)),
    }
}

impl ChatAssembler {
    /// How many events were read through a template.
    #[cfg(test)]
    pub(super) fn filled(&self) -> usize {
        self.templates.filled()
    }

    /// `templates: false` parses every chunk in full (the reference the fast path is checked
    /// against).
    pub fn with_templates(templates: bool) -> Self {
        Self {
            reasoning: String::new(),
            text: String::new(),
            calls: Vec::new(),
            finish: None,
            usage: Usage::default(),
            templates: Templates::new(templates),
        }
    }

    pub fn push(
        &mut self,
        data: &str,
        sink: &mut dyn FnMut(Delta<'_>),
    ) -> Result<Progress, FailureDiagnostic> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(Progress::Done);
        }
        if data.is_empty() {
            return Ok(Progress::Continue);
        }
        if let Some((&slot, value)) = self.templates.fill("", data) {
            self.apply_slot(slot, value, sink);
            return Ok(Progress::Continue);
        }
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|_| unexpected_payload(data))?;
        if chunk.error.is_some() {
            return Err(unexpected_payload(data));
        }
        let found = chunk.single_string();
        self.templates
            .learn("", data, found.map(|(slot, value)| (value.as_ref(), slot)));
        if let Some(usage) = &chunk.usage {
            self.usage = usage.to_usage();
        }
        for choice in chunk.choices.into_iter().filter(|choice| choice.index == 0) {
            if let Some(delta) = choice.delta {
                self.apply_delta(delta, sink);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(map_finish_reason(&reason)?);
            }
        }
        Ok(Progress::Continue)
    }

    fn apply_delta(&mut self, delta: ChoiceDelta<'_>, sink: &mut dyn FnMut(Delta<'_>)) {
        if let Some(reasoning) = delta.reasoning_content.filter(|r| !r.is_empty()) {
            sink(Delta::Reasoning(&reasoning));
            self.reasoning.push_str(&reasoning);
        }
        if let Some(content) = delta.content.filter(|c| !c.is_empty()) {
            sink(Delta::Text(&content));
            self.text.push_str(&content);
        }
        for fragment in delta.tool_calls.unwrap_or_default() {
            self.apply_tool_fragment(fragment);
        }
    }

    /// What the template's chunk did, with `value` as its string.
    fn apply_slot(&mut self, slot: Slot, value: Cow<'_, str>, sink: &mut dyn FnMut(Delta<'_>)) {
        let delta = match slot {
            Slot::Reasoning => ChoiceDelta {
                reasoning_content: Some(value),
                ..ChoiceDelta::default()
            },
            Slot::Text => ChoiceDelta {
                content: Some(value),
                ..ChoiceDelta::default()
            },
            Slot::Arguments { index } => {
                return self.apply_tool_fragment(ToolCallDelta {
                    index,
                    id: None,
                    function: Some(FunctionDelta {
                        name: None,
                        arguments: Some(value),
                    }),
                });
            }
        };
        self.apply_delta(delta, sink);
    }

    fn apply_tool_fragment(&mut self, fragment: ToolCallDelta<'_>) {
        let id = fragment.id.filter(|id| !id.is_empty());
        let index = fragment
            .index
            .unwrap_or_else(|| match (&id, self.calls.last()) {
                // No index at all: a new id starts a new call, anything else continues the last.
                (Some(id), Some(last)) if last.id != id.as_ref() => last.index + 1,
                (_, Some(last)) => last.index,
                (_, None) => 0,
            });
        let existing = self.calls.iter().rposition(|call| call.index == index);
        let position = match existing {
            Some(position) => match &id {
                Some(id)
                    if !self.calls[position].id.is_empty()
                        && self.calls[position].id != id.as_ref() =>
                {
                    self.calls.push(PartialCall {
                        index,
                        ..PartialCall::default()
                    });
                    self.calls.len() - 1
                }
                Some(_) | None => position,
            },
            None => {
                self.calls.push(PartialCall {
                    index,
                    ..PartialCall::default()
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[position];
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id.into_owned();
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty())
                && call.name.is_empty()
            {
                call.name = name.into_owned();
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    pub fn finish(self) -> Result<Completion, FailureDiagnostic> {
        let Some(finish_reason) = self.finish else {
            return Err(cut_short());
        };
        Ok(Completion {
            item: build_item(self.reasoning, self.text, self.calls)?,
            finish_reason,
            usage: self.usage,
        })
    }
}

fn build_item(
    reasoning: String,
    text: String,
    calls: Vec<PartialCall>,
) -> Result<AssistantItem, FailureDiagnostic> {
    let mut parts = Vec::with_capacity(calls.len() + 2);
    if !reasoning.is_empty() {
        parts.push(AssistantPart::Reasoning {
            text: reasoning,
            replay: None,
        });
    }
    if !text.is_empty() {
        parts.push(AssistantPart::Text { text });
    }
    for (position, call) in calls.into_iter().enumerate() {
        parts.push(finished_call(call.id, call.name, call.arguments, position)?);
    }
    Ok(AssistantItem { parts })
}

/// A non-streamed Chat Completions body.
pub(super) fn parse_complete(value: &serde_json::Value) -> Result<Completion, FailureDiagnostic> {
    let choice = value
        .get("choices")
        .and_then(|choices| choices.get(0))
        .ok_or_else(|| unexpected_payload(&value.to_string()))?;
    let message = choice.get("message").cloned().unwrap_or_default();
    let text_of = |key: &str| {
        message
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let calls = message
        .get("tool_calls")
        .and_then(|calls| calls.as_array())
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(index, call)| {
                    let function = call.get("function").cloned().unwrap_or_default();
                    let field = |v: &serde_json::Value, key: &str| {
                        v.get(key)
                            .and_then(|x| x.as_str())
                            .unwrap_or("")
                            .to_string()
                    };
                    PartialCall {
                        index: index as u32,
                        id: field(call, "id"),
                        name: field(&function, "name"),
                        arguments: field(&function, "arguments"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let reason = choice
        .get("finish_reason")
        .and_then(|r| r.as_str())
        .unwrap_or("stop");
    let usage: ChatUsage = value
        .get("usage")
        .and_then(|usage| serde_json::from_value(usage.clone()).ok())
        .unwrap_or_default();
    Ok(Completion {
        item: build_item(text_of("reasoning_content"), text_of("content"), calls)?,
        finish_reason: map_finish_reason(reason)?,
        usage: usage.to_usage(),
    })
}
