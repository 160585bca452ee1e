//! Assembly of streamed deltas into one assistant item, per protocol.
//!
//! Invariants:
//! - Deltas handed to the sink are provisional; only `finish` returns a `Completion`, and only
//!   when the stream reached the protocol's end marker or a finish reason. A stream cut short
//!   (including one whose tool-call deltas were already sent) is an error, never a completion.
//! - The result does not depend on how the bytes were split into reads (property-tested).
//! - Error payloads are classified, never quoted.

mod anthropic;
mod chat;
mod responses;
pub mod search;
pub mod sse;
mod template;
mod token_count;

use crate::classify::classify_stream_error;
use keel_types::{AssistantItem, AssistantPart, FailureDiagnostic, FailureKind, FinishReason};
use keel_types::{Usage, WireProtocol};

pub use anthropic::AnthropicAssembler;
pub use chat::ChatAssembler;
pub use responses::ResponsesAssembler;

/// A provisional piece of the answer, for live display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta<'a> {
    Text(&'a str),
    Reasoning(&'a str),
}

/// A complete assistant response.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub item: AssistantItem,
    pub finish_reason: FinishReason,
    pub usage: Usage,
}

/// Whether the stream has reached its protocol end marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    Continue,
    Done,
}

/// One assembler per attempt.
#[derive(Debug)]
pub enum Assembler {
    Chat(ChatAssembler),
    Anthropic(AnthropicAssembler),
    Responses(ResponsesAssembler),
}

impl Assembler {
    pub fn new(protocol: WireProtocol) -> Self {
        Self::with_templates(protocol, true)
    }

    /// `templates: false` parses every event in full: the reference the repeated-envelope fast
    /// path (`template`) is checked against.
    pub fn with_templates(protocol: WireProtocol, templates: bool) -> Self {
        match protocol {
            WireProtocol::Chat => Self::Chat(ChatAssembler::with_templates(templates)),
            WireProtocol::Anthropic => {
                Self::Anthropic(AnthropicAssembler::with_templates(templates))
            }
            WireProtocol::Responses => {
                Self::Responses(ResponsesAssembler::with_templates(templates))
            }
        }
    }

    /// Feed one SSE event (its `event:` name, `message` when absent, and its data).
    pub fn push(
        &mut self,
        event: &str,
        data: &str,
        sink: &mut dyn FnMut(Delta<'_>),
    ) -> Result<Progress, FailureDiagnostic> {
        match self {
            Self::Chat(assembler) => assembler.push(data, sink),
            Self::Anthropic(assembler) => assembler.push(event, data, sink),
            Self::Responses(assembler) => assembler.push(event, data, sink),
        }
    }

    /// How many events were read through a template (the repeated-envelope fast path).
    #[cfg(test)]
    fn filled(&self) -> usize {
        match self {
            Self::Chat(assembler) => assembler.filled(),
            Self::Anthropic(assembler) => assembler.filled(),
            Self::Responses(assembler) => assembler.filled(),
        }
    }

    /// The completed response, or why the stream does not amount to one.
    pub fn finish(self) -> Result<Completion, FailureDiagnostic> {
        let completion = match self {
            Self::Chat(assembler) => assembler.finish()?,
            Self::Anthropic(assembler) => assembler.finish()?,
            Self::Responses(assembler) => assembler.finish()?,
        };
        check_not_empty(completion)
    }
}

/// Parse a whole non-streamed JSON response (a server that ignored `stream: true`).
pub fn parse_complete_response(
    protocol: WireProtocol,
    body: &[u8],
) -> Result<Completion, FailureDiagnostic> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|_| {
        FailureDiagnostic::with_message(
            FailureKind::Transport,
            None,
            "the provider's JSON response could not be parsed",
        )
    })?;
    if value.get("error").is_some_and(|error| !error.is_null()) {
        return Err(classify_stream_error(&value));
    }
    let completion = match protocol {
        WireProtocol::Chat => chat::parse_complete(&value)?,
        WireProtocol::Anthropic => anthropic::parse_complete(&value)?,
        WireProtocol::Responses => responses::parse_complete(&value)?,
    };
    check_not_empty(completion)
}

fn check_not_empty(completion: Completion) -> Result<Completion, FailureDiagnostic> {
    let has_content = completion.item.parts.iter().any(|part| match part {
        AssistantPart::Text { text } => !text.is_empty(),
        AssistantPart::Reasoning { text, replay } => !text.is_empty() || replay.is_some(),
        AssistantPart::ToolCall(_) | AssistantPart::WebSearch(_) => true,
    });
    if has_content {
        Ok(completion)
    } else {
        Err(FailureDiagnostic::new(FailureKind::EmptyResponse, None))
    }
}

/// A data payload that is not valid JSON: the bytes were damaged on the way.
fn malformed_chunk() -> FailureDiagnostic {
    FailureDiagnostic::with_message(
        FailureKind::StreamCorrupt,
        None,
        "the stream carried a chunk that is not valid JSON",
    )
}

/// Valid JSON that does not fit the protocol: an error payload if it holds one, otherwise a
/// protocol violation.
fn unexpected_payload(data: &str) -> FailureDiagnostic {
    match serde_json::from_str::<serde_json::Value>(data) {
        Err(_) => malformed_chunk(),
        Ok(value) if value.get("error").is_some_and(|e| !e.is_null()) => {
            classify_stream_error(&value)
        }
        Ok(_) => FailureDiagnostic::with_message(
            FailureKind::StreamCorrupt,
            None,
            "the stream carried an event that does not fit the protocol",
        ),
    }
}

fn cut_short() -> FailureDiagnostic {
    FailureDiagnostic::with_message(
        FailureKind::Transport,
        None,
        "the stream ended before the response was complete",
    )
}

fn unknown_finish_reason(reason: &str) -> FailureDiagnostic {
    let shown: String = reason
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(40)
        .collect();
    FailureDiagnostic::with_message(
        FailureKind::Unknown,
        None,
        format!("the provider ended the response with an unrecognised finish reason `{shown}`"),
    )
}

/// A name every tool call must have; an id is made up only when the provider sent none.
fn finished_call(
    id: String,
    name: String,
    arguments: String,
    position: usize,
) -> Result<AssistantPart, FailureDiagnostic> {
    if name.is_empty() {
        return Err(FailureDiagnostic::with_message(
            FailureKind::StreamCorrupt,
            None,
            "the stream carried a tool call without a name",
        ));
    }
    let id = if id.is_empty() {
        format!("call_{position}")
    } else {
        id
    };
    Ok(AssistantPart::ToolCall(keel_types::ToolCall {
        id,
        name,
        arguments,
    }))
}

#[cfg(test)]
mod tests;
