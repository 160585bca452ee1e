//! Rendering scripted answers in each protocol's wire format, streamed or whole.
//!
//! Invariants:
//! - The streamed formats follow the real providers: DeepSeek-style Chat chunks (role chunk,
//!   `reasoning_content`, tool calls fragmented by `index`, a keep-alive comment, a finish chunk,
//!   a final usage chunk with `choices: []`, `[DONE]`), Anthropic events (thinking with a
//!   signature, `input_json_delta`), Responses items (reasoning with `encrypted_content`,
//!   `function_call_arguments.delta`).
//! - Text is cut into several deltas so clients really assemble.

use serde_json::{Value, json};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Chat,
    Anthropic,
    Responses,
}

/// One piece of a streamed body.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    Bytes(String),
    Sleep(Duration),
    /// Cut the connection without finishing the body.
    Abort,
}

/// A tool call an answering step makes.
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptedCall {
    pub name: String,
    /// The raw argument text sent to the client (valid JSON unless `tool_args_raw` was used).
    pub arguments: String,
}

/// What one answer says.
#[derive(Clone, Debug)]
pub struct Answer<'a> {
    pub search: Option<(&'a str, &'a [String])>,
    pub reason: Option<&'a str>,
    pub text: Option<&'a str>,
    pub calls: &'a [ScriptedCall],
    pub finish_reason: Option<&'a str>,
    /// Distinguishes ids across requests.
    pub request_number: usize,
    /// The usage object to send instead of the computed one.
    pub usage: Option<&'a Value>,
}

/// The owned content of an answering step.
#[derive(Clone, Debug, Default)]
pub struct ScriptedAnswer {
    /// A native web search (query, source URLs) before the text.
    pub search: Option<(String, Vec<String>)>,
    pub reason: Option<String>,
    pub text: Option<String>,
    pub calls: Vec<ScriptedCall>,
    pub finish_reason: Option<String>,
    /// The usage object to send instead of the computed one.
    pub usage: Option<Value>,
}

impl ScriptedAnswer {
    pub fn answer(&self, request_number: usize) -> Answer<'_> {
        Answer {
            search: self
                .search
                .as_ref()
                .map(|(query, sources)| (query.as_str(), sources.as_slice())),
            reason: self.reason.as_deref(),
            text: self.text.as_deref(),
            calls: &self.calls,
            finish_reason: self.finish_reason.as_deref(),
            usage: self.usage.as_ref(),
            request_number,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MockUsage {
    pub prompt: u64,
    pub completion: u64,
    pub reasoning: u64,
    pub cache_hit: u64,
}

/// Pieces of at most 12 characters, cut on character boundaries.
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(12)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// Argument text cut into three fragments (or fewer when short).
fn fragments(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(3).max(1);
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

fn data(value: &Value) -> Frame {
    Frame::Bytes(format!("data: {value}\n\n"))
}

fn event(name: &str, value: &Value) -> Frame {
    Frame::Bytes(format!("event: {name}\ndata: {value}\n\n"))
}

fn call_id(answer: &Answer<'_>, position: usize) -> String {
    format!("call_{:04}_{position}", answer.request_number)
}

pub fn stream_frames(protocol: Protocol, answer: &Answer<'_>, usage: MockUsage) -> Vec<Frame> {
    match protocol {
        Protocol::Chat => chat_frames(answer, usage),
        Protocol::Anthropic => anthropic_frames(answer, usage),
        Protocol::Responses => responses_frames(answer, usage),
    }
}

fn chat_usage(usage: MockUsage) -> Value {
    json!({
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.completion,
        "total_tokens": usage.prompt + usage.completion,
        "prompt_tokens_details": {"cached_tokens": usage.cache_hit},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
        "prompt_cache_hit_tokens": usage.cache_hit,
        "prompt_cache_miss_tokens": usage.prompt - usage.cache_hit,
    })
}

fn chat_finish(answer: &Answer<'_>) -> String {
    answer.finish_reason.map(String::from).unwrap_or_else(|| {
        if answer.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
        .into()
    })
}

fn chat_frames(answer: &Answer<'_>, usage: MockUsage) -> Vec<Frame> {
    let id = format!("chatcmpl-mock-{}", answer.request_number);
    let chunk = |delta: Value, finish: Value| {
        data(&json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": "mock",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    };
    let mut frames = vec![
        chunk(
            json!({"role": "assistant", "content": null, "reasoning_content": ""}),
            Value::Null,
        ),
        Frame::Bytes(": keep-alive\n\n".into()),
    ];
    for piece in answer.reason.map(pieces).unwrap_or_default() {
        frames.push(chunk(
            json!({"content": null, "reasoning_content": piece}),
            Value::Null,
        ));
    }
    for piece in answer.text.map(pieces).unwrap_or_default() {
        frames.push(chunk(
            json!({"content": piece, "reasoning_content": null}),
            Value::Null,
        ));
    }
    for (index, call) in answer.calls.iter().enumerate() {
        frames.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call_id(answer, index), "type": "function",
                "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        for fragment in fragments(&call.arguments) {
            frames.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
                Value::Null,
            ));
        }
    }
    frames.push(chunk(json!({}), json!(chat_finish(answer))));
    frames.push(data(&json!({
        "id": id, "object": "chat.completion.chunk", "created": 0, "model": "mock",
        "choices": [], "usage": answer.usage.cloned().unwrap_or_else(|| chat_usage(usage)),
    })));
    frames.push(Frame::Bytes("data: [DONE]\n\n".into()));
    frames
}

fn anthropic_stop(answer: &Answer<'_>) -> String {
    match answer.finish_reason {
        Some("stop") => "end_turn".into(),
        Some("length") => "max_tokens".into(),
        Some("tool_calls") => "tool_use".into(),
        Some(other) => other.into(),
        None if answer.calls.is_empty() => "end_turn".into(),
        None => "tool_use".into(),
    }
}

fn anthropic_frames(answer: &Answer<'_>, usage: MockUsage) -> Vec<Frame> {
    let mut frames = vec![
        event(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": format!("msg_mock_{}", answer.request_number), "type": "message",
                "role": "assistant", "content": [], "model": "mock", "stop_reason": null,
                "usage": {"input_tokens": usage.prompt - usage.cache_hit,
                          "cache_read_input_tokens": usage.cache_hit, "output_tokens": 1}}}),
        ),
        event("ping", &json!({"type": "ping"})),
    ];
    let mut index = 0;
    let mut block = |frames: &mut Vec<Frame>, start: Value, deltas: Vec<Value>| {
        frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for delta in deltas {
            frames.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        frames.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    };
    if let Some(reason) = answer.reason {
        let mut deltas: Vec<Value> = pieces(reason)
            .into_iter()
            .map(|piece| json!({"type": "thinking_delta", "thinking": piece}))
            .collect();
        deltas.push(json!({"type": "signature_delta",
            "signature": format!("mock-signature-{}", answer.request_number)}));
        block(
            &mut frames,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            deltas,
        );
    }
    if let Some((query, sources)) = answer.search {
        let id = format!("srvtoolu_mock_{}", answer.request_number);
        let input = json!({ "query": query }).to_string();
        let deltas = fragments(&input)
            .into_iter()
            .map(|f| json!({"type": "input_json_delta", "partial_json": f}));
        let start = json!({"type": "server_tool_use", "id": id, "name": "web_search", "input": {}});
        block(&mut frames, start, deltas.collect());
        block(
            &mut frames,
            anthropic_search_result(&id, sources),
            Vec::new(),
        );
    }
    if let Some(text) = answer.text {
        let deltas = pieces(text)
            .into_iter()
            .map(|p| json!({"type": "text_delta", "text": p}));
        block(
            &mut frames,
            json!({"type": "text", "text": ""}),
            deltas.collect(),
        );
    }
    for (position, call) in answer.calls.iter().enumerate() {
        let deltas = fragments(&call.arguments)
            .into_iter()
            .map(|fragment| json!({"type": "input_json_delta", "partial_json": fragment}));
        block(
            &mut frames,
            json!({"type": "tool_use", "id": call_id(answer, position), "name": call.name, "input": {}}),
            deltas.collect(),
        );
    }
    frames.push(event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": anthropic_stop(answer),
            "stop_sequence": null}, "usage": answer.usage.cloned()
                .unwrap_or_else(|| json!({"output_tokens": usage.completion}))}),
    ));
    frames.push(event("message_stop", &json!({"type": "message_stop"})));
    frames
}

fn anthropic_search_result(tool_use_id: &str, sources: &[String]) -> Value {
    let results: Vec<Value> = sources
        .iter()
        .enumerate()
        .map(|(i, url)| {
            json!({"type": "web_search_result", "url": url, "title": format!("Source {}", i + 1),
            "encrypted_content": format!("mock-page-{i}"), "page_age": null})
        })
        .collect();
    json!({"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": results})
}

fn responses_items(answer: &Answer<'_>) -> Vec<Value> {
    let mut items = Vec::new();
    if let Some((query, sources)) = answer.search {
        let mut action = json!({"type": "search", "query": query});
        if !sources.is_empty() {
            action["sources"] = json!(
                sources
                    .iter()
                    .map(|url| json!({"type": "url", "url": url}))
                    .collect::<Vec<_>>()
            );
        }
        items.push(
            json!({"type": "web_search_call", "id": format!("ws_mock_{}", answer.request_number),
            "status": "completed", "action": action}),
        );
    }
    if let Some(reason) = answer.reason {
        items.push(
            json!({"type": "reasoning", "id": format!("rs_mock_{}", answer.request_number),
            "summary": [{"type": "summary_text", "text": reason}],
            "encrypted_content": format!("mock-encrypted-{}", answer.request_number)}),
        );
    }
    if let Some(text) = answer.text {
        items.push(
            json!({"type": "message", "id": format!("msg_mock_{}", answer.request_number),
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
        );
    }
    for (position, call) in answer.calls.iter().enumerate() {
        items.push(json!({"type": "function_call",
            "id": format!("fc_mock_{}_{position}", answer.request_number),
            "call_id": call_id(answer, position), "name": call.name,
            "arguments": call.arguments, "status": "completed"}));
    }
    items
}

fn responses_body(answer: &Answer<'_>, usage: MockUsage, output: Vec<Value>) -> Value {
    let incomplete = answer.finish_reason == Some("length");
    json!({
        "id": format!("resp_mock_{}", answer.request_number), "object": "response",
        "status": if incomplete { "incomplete" } else { "completed" },
        "incomplete_details": if incomplete { json!({"reason": "max_output_tokens"}) } else { Value::Null },
        "output": output,
        "usage": answer.usage.cloned().unwrap_or_else(|| json!({"input_tokens": usage.prompt,
            "output_tokens": usage.completion, "total_tokens": usage.prompt + usage.completion,
            "input_tokens_details": {"cached_tokens": usage.cache_hit},
            "output_tokens_details": {"reasoning_tokens": usage.reasoning}})),
    })
}

fn responses_frames(answer: &Answer<'_>, usage: MockUsage) -> Vec<Frame> {
    let id = format!("resp_mock_{}", answer.request_number);
    let typed = |kind: &str, mut value: Value| {
        value["type"] = json!(kind);
        event(kind, &value)
    };
    let mut frames = vec![typed(
        "response.created",
        json!({"response": {"id": id, "object": "response", "status": "in_progress"}}),
    )];
    let items = responses_items(answer);
    for (output_index, item) in items.iter().enumerate() {
        let item_id = item["id"].clone();
        let mut added = item.clone();
        match item["type"].as_str() {
            Some("reasoning") => {
                added["summary"] = json!([]);
                frames.push(typed(
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": added}),
                ));
                let text = item["summary"][0]["text"].as_str().unwrap_or("");
                for piece in pieces(text) {
                    frames.push(typed("response.reasoning_summary_text.delta",
                        json!({"item_id": item_id, "output_index": output_index, "summary_index": 0, "delta": piece})));
                }
            }
            Some("message") => {
                added["content"] = json!([]);
                frames.push(typed(
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": added}),
                ));
                let text = item["content"][0]["text"].as_str().unwrap_or("");
                for piece in pieces(text) {
                    frames.push(typed("response.output_text.delta",
                        json!({"item_id": item_id, "output_index": output_index, "content_index": 0, "delta": piece})));
                }
            }
            Some("web_search_call") => {
                added["status"] = json!("in_progress");
                frames.push(typed(
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": added}),
                ));
            }
            Some(_) | None => {
                added["arguments"] = json!("");
                frames.push(typed(
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": added}),
                ));
                for fragment in fragments(item["arguments"].as_str().unwrap_or("")) {
                    frames.push(typed("response.function_call_arguments.delta",
                        json!({"item_id": item_id, "output_index": output_index, "delta": fragment})));
                }
            }
        }
        frames.push(typed(
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
        ));
    }
    let kind = if answer.finish_reason == Some("length") {
        "response.incomplete"
    } else {
        "response.completed"
    };
    frames.push(typed(
        kind,
        json!({"response": responses_body(answer, usage, items)}),
    ));
    frames
}

/// A whole (non-streamed) body for a server that ignores `stream: true`.
pub fn whole_body(protocol: Protocol, answer: &Answer<'_>, usage: MockUsage) -> Value {
    match protocol {
        Protocol::Chat => {
            let calls: Vec<Value> = answer
                .calls
                .iter()
                .enumerate()
                .map(|(i, call)| {
                    json!({"id": call_id(answer, i), "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments}})
                })
                .collect();
            let mut message = json!({"role": "assistant", "content": answer.text.unwrap_or("")});
            if let Some(reason) = answer.reason {
                message["reasoning_content"] = json!(reason);
            }
            if !calls.is_empty() {
                message["tool_calls"] = json!(calls);
            }
            json!({"id": format!("chatcmpl-mock-{}", answer.request_number), "object": "chat.completion",
                "created": 0, "model": "mock",
                "choices": [{"index": 0, "message": message, "finish_reason": chat_finish(answer)}],
                "usage": chat_usage(usage)})
        }
        Protocol::Anthropic => {
            let mut content = Vec::new();
            if let Some(reason) = answer.reason {
                content.push(json!({"type": "thinking", "thinking": reason,
                    "signature": format!("mock-signature-{}", answer.request_number)}));
            }
            if let Some((query, sources)) = answer.search {
                let id = format!("srvtoolu_mock_{}", answer.request_number);
                content.push(json!({"type": "server_tool_use", "id": id, "name": "web_search", "input": {"query": query}}));
                content.push(anthropic_search_result(&id, sources));
            }
            if let Some(text) = answer.text {
                content.push(json!({"type": "text", "text": text}));
            }
            for (i, call) in answer.calls.iter().enumerate() {
                let input: Value = serde_json::from_str(&call.arguments).unwrap_or(json!({}));
                content.push(json!({"type": "tool_use", "id": call_id(answer, i), "name": call.name, "input": input}));
            }
            json!({"id": format!("msg_mock_{}", answer.request_number), "type": "message",
                "role": "assistant", "model": "mock", "content": content,
                "stop_reason": anthropic_stop(answer),
                "usage": {"input_tokens": usage.prompt - usage.cache_hit,
                    "cache_read_input_tokens": usage.cache_hit, "output_tokens": usage.completion}})
        }
        Protocol::Responses => responses_body(answer, usage, responses_items(answer)),
    }
}

/// The start of a stream, used by faults that break off early.
pub fn opening_frame(protocol: Protocol, request_number: usize) -> Frame {
    let answer = Answer {
        search: None,
        reason: None,
        text: None,
        calls: &[],
        finish_reason: None,
        request_number,
        usage: None,
    };
    stream_frames(protocol, &answer, MockUsage::default()).swap_remove(0)
}

/// A chunk that is not valid JSON, framed as the protocol frames content.
pub fn broken_frame(protocol: Protocol) -> Frame {
    Frame::Bytes(match protocol {
        Protocol::Chat => "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"oops\n\n".into(),
        Protocol::Anthropic => "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_de\n\n".into(),
        Protocol::Responses => "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"oo\n\n".into(),
    })
}
