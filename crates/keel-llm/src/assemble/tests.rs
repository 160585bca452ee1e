//! Assembly tests: llama-server captures, DeepSeek/Anthropic/Responses streams, faults, and
//! splits at every byte boundary.

use super::sse::assemble_chunks;
use super::*;
use keel_types::{ReplayData, ToolCall};
use proptest::prelude::*;

macro_rules! fixture {
    ($case:literal, $file:literal) => {
        include_bytes!(concat!(
            "../../tests/fixtures/llama-server/",
            $case,
            "/",
            $file
        ))
        .as_slice()
    };
}

/// Assemble in one piece, collecting provisional deltas.
fn assemble(
    protocol: WireProtocol,
    bytes: &[u8],
) -> (Result<Completion, FailureDiagnostic>, String) {
    let mut streamed = String::new();
    let result = assemble_chunks(protocol, [bytes], &mut |delta| match delta {
        Delta::Text(text) | Delta::Reasoning(text) => streamed.push_str(text),
    });
    (result, streamed)
}

/// Each event pushed on its own: the deltas, the outcome, and how many events were read
/// through a template.
fn assemble_events(
    protocol: WireProtocol,
    templates: bool,
    bytes: &[u8],
) -> (Vec<String>, Result<Completion, FailureDiagnostic>, usize) {
    let mut framer = crate::sse::SseFramer::new(1 << 20);
    let mut assembler = Assembler::with_templates(protocol, templates);
    let mut deltas = Vec::new();
    let framed = framer.feed(bytes, &mut |event: crate::sse::SseEvent<'_>| {
        let progress = assembler.push(event.event, event.data, &mut |delta| match delta {
            Delta::Text(text) | Delta::Reasoning(text) => deltas.push(text.to_owned()),
        })?;
        Ok::<_, FailureDiagnostic>(match progress {
            Progress::Done => std::ops::ControlFlow::Break(()),
            Progress::Continue => std::ops::ControlFlow::Continue(()),
        })
    });
    let filled = assembler.filled();
    let outcome = framed.and_then(|_| assembler.finish());
    (deltas, outcome, filled)
}

#[test]
fn captured_streams_take_the_fast_path_and_assemble_as_a_full_parse_does() {
    for (protocol, bytes, least) in [
        (
            WireProtocol::Chat,
            fixture!("chat-stream-usage", "response.body"),
            20,
        ),
        (
            WireProtocol::Chat,
            fixture!("tools-chat-stream", "response.body"),
            5,
        ),
        (
            WireProtocol::Anthropic,
            fixture!("anthropic-stream", "response.body"),
            20,
        ),
        (
            WireProtocol::Responses,
            fixture!("responses-stream", "response.body"),
            20,
        ),
    ] {
        let (deltas, outcome, templated) = assemble_events(protocol, true, bytes);
        let (full_deltas, full_outcome, none) = assemble_events(protocol, false, bytes);
        assert_eq!(none, 0);
        assert!(
            templated >= least,
            "{protocol:?}: {templated} events on the fast path"
        );
        assert_eq!(deltas, full_deltas, "{protocol:?}");
        assert_eq!(outcome.unwrap(), full_outcome.unwrap(), "{protocol:?}");
    }
}

fn calls(completion: &Completion) -> Vec<ToolCall> {
    completion.item.tool_calls().cloned().collect()
}

#[test]
fn llama_chat_stream_with_usage() {
    let (result, streamed) = assemble(
        WireProtocol::Chat,
        fixture!("chat-stream-usage", "response.body"),
    );
    let completion = result.unwrap();
    assert!(!completion.item.text().is_empty());
    assert_eq!(completion.item.text(), streamed);
    assert!(completion.usage.input > 0 && completion.usage.output > 0);
    assert_eq!(
        completion.usage.cache_hit + completion.usage.cache_miss,
        completion.usage.input
    );
}

#[test]
fn llama_chat_stream_length_and_no_usage() {
    let (result, _) = assemble(
        WireProtocol::Chat,
        fixture!("chat-stream-length", "response.body"),
    );
    assert_eq!(result.unwrap().finish_reason, FinishReason::Length);
    let (result, _) = assemble(
        WireProtocol::Chat,
        fixture!("chat-stream-no-usage", "response.body"),
    );
    assert_eq!(result.unwrap().usage, Usage::default());
}

#[test]
fn llama_chat_tool_calls_stream() {
    let (result, _) = assemble(
        WireProtocol::Chat,
        fixture!("tools-chat-stream-prefill", "response.body"),
    );
    let completion = result.unwrap();
    let calls = calls(&completion);
    assert!(!calls.is_empty());
    for call in &calls {
        assert_eq!(call.name, "bash");
        assert_eq!(call.id.len(), 32);
        let arguments: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
        assert!(arguments["command"].is_string());
    }
}

#[test]
fn llama_anthropic_streams() {
    let (result, streamed) = assemble(
        WireProtocol::Anthropic,
        fixture!("anthropic-stream", "response.body"),
    );
    let completion = result.unwrap();
    assert_eq!(completion.item.text(), streamed);
    assert!(completion.usage.input >= completion.usage.cache_hit);
    let (result, _) = assemble(
        WireProtocol::Anthropic,
        fixture!("tools-anthropic-stream-prefill", "response.body"),
    );
    let completion = result.unwrap();
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    let calls = calls(&completion);
    assert_eq!(calls.len(), 2, "both interleaved tool_use blocks");
    assert_eq!(calls[1].arguments, "{\"command\": \"sh\"}");
    assert_eq!(completion.usage.cache_hit, 230);
}

#[test]
fn llama_responses_streams() {
    let (result, streamed) = assemble(
        WireProtocol::Responses,
        fixture!("responses-stream", "response.body"),
    );
    let completion = result.unwrap();
    assert_eq!(completion.item.text(), streamed);
    assert_eq!(completion.finish_reason, FinishReason::Stop);
    assert!(completion.usage.input > 0);
    let (result, _) = assemble(
        WireProtocol::Responses,
        fixture!("tools-responses-stream-prefill", "response.body"),
    );
    let completion = result.unwrap();
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    let calls = calls(&completion);
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|call| call.id.starts_with("call_")));
    for call in calls {
        serde_json::from_str::<serde_json::Value>(&call.arguments).unwrap();
    }
}

#[test]
fn llama_midstream_errors_are_server_failures_for_every_protocol() {
    let cases = [
        (
            WireProtocol::Chat,
            fixture!("error-midstream-chat", "response.body"),
        ),
        (
            WireProtocol::Anthropic,
            fixture!("error-midstream-anthropic", "response.body"),
        ),
        (
            WireProtocol::Responses,
            fixture!("error-midstream-responses", "response.body"),
        ),
    ];
    for (protocol, body) in cases {
        let (result, _) = assemble(protocol, body);
        let diagnostic = result.unwrap_err();
        assert_eq!(diagnostic.kind, FailureKind::Server, "{protocol}");
        assert!(
            !diagnostic.message.contains("peg-native"),
            "the body is never quoted"
        );
    }
}

#[test]
fn llama_non_streamed_bodies() {
    let chat = parse_complete_response(
        WireProtocol::Chat,
        fixture!("chat-nonstream", "response.body"),
    )
    .unwrap();
    assert!(!chat.item.text().is_empty());
    let tools = parse_complete_response(
        WireProtocol::Chat,
        fixture!("tools-chat-nonstream-prefill", "response.body"),
    )
    .unwrap();
    assert!(tools.item.has_tool_calls());
    let anthropic = parse_complete_response(
        WireProtocol::Anthropic,
        fixture!("anthropic-nonstream", "response.body"),
    )
    .unwrap();
    assert!(!anthropic.item.text().is_empty());
    let responses = parse_complete_response(
        WireProtocol::Responses,
        fixture!("responses-nonstream", "response.body"),
    )
    .unwrap();
    assert!(!responses.item.text().is_empty());
    assert!(responses.usage.input > 0);
}

/// DeepSeek's wire format: reasoning deltas, fragmented parallel tool calls, keep-alive
/// comments, CRLF line ends, and a final usage chunk with `choices: []`.
const DEEPSEEK_STREAM: &str = concat!(
    ": keep-alive\r\n\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"\"}}]}\r\n\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"Let me \"}}]}\r\n\r\n",
    ": keep-alive\r\n\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"look — ünïcödé 🙂\"}}]}\r\n\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Reading \"}}]}\r\n\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"files.\"}}]}\r\n\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]}}]}\r\n\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\":\"}}]}}]}\r\n\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"arguments\":\"{}\"}}]}}]}\r\n\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\" \\\"a.rs\\\"}\"}}]}}]}\r\n\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\r\n\r\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"prompt_cache_hit_tokens\":64,\"prompt_cache_miss_tokens\":36,\"completion_tokens_details\":{\"reasoning_tokens\":7}}}\r\n\r\n",
    "data: [DONE]\r\n\r\n",
);

fn deepseek_expected() -> Completion {
    Completion {
        item: AssistantItem {
            parts: vec![
                AssistantPart::Reasoning {
                    text: "Let me look — ünïcödé 🙂".into(),
                    replay: None,
                },
                AssistantPart::Text {
                    text: "Reading files.".into(),
                },
                AssistantPart::ToolCall(ToolCall {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\": \"a.rs\"}".into(),
                }),
                AssistantPart::ToolCall(ToolCall {
                    id: "call_b".into(),
                    name: "list_dir".into(),
                    arguments: "{}".into(),
                }),
            ],
        },
        finish_reason: FinishReason::ToolCalls,
        usage: Usage {
            input: 100,
            output: 20,
            reasoning: 7,
            cache_hit: 64,
            cache_miss: 36,
            cache_write: 0,
        },
    }
}

#[test]
fn deepseek_stream_assembles_reasoning_text_and_parallel_calls() {
    let (result, streamed) = assemble(WireProtocol::Chat, DEEPSEEK_STREAM.as_bytes());
    assert_eq!(result.unwrap(), deepseek_expected());
    assert_eq!(streamed, "Let me look — ünïcödé 🙂Reading files.");
}

#[test]
fn split_at_every_byte_boundary_gives_the_same_item() {
    let bytes = DEEPSEEK_STREAM.as_bytes();
    let expected = deepseek_expected();
    for cut in 0..=bytes.len() {
        let result = assemble_chunks(
            WireProtocol::Chat,
            [&bytes[..cut], &bytes[cut..]],
            &mut |_| {},
        );
        assert_eq!(result.as_ref(), Ok(&expected), "split at byte {cut}");
    }
}

const ANTHROPIC_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":90,\"output_tokens\":1}}}\n\n",
    "event: ping\ndata: {\"type\":\"ping\"}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Think \"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hard.\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Running.\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"bash\",\"input\":{}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\": \\\"ls\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":33}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[test]
fn anthropic_thinking_signature_and_tool_json() {
    let (result, streamed) = assemble(WireProtocol::Anthropic, ANTHROPIC_STREAM.as_bytes());
    let completion = result.unwrap();
    assert_eq!(streamed, "Think hard.Running.");
    assert_eq!(
        completion.item.parts[0],
        AssistantPart::Reasoning {
            text: "Think hard.".into(),
            replay: Some(ReplayData::AnthropicThinking {
                signature: "EqQBCgIYAhIM".into()
            }),
        }
    );
    assert_eq!(calls(&completion)[0].arguments, "{\"command\": \"ls\"}");
    assert_eq!(
        completion.usage,
        Usage {
            input: 100,
            output: 33,
            reasoning: 0,
            cache_hit: 90,
            cache_miss: 10,
            cache_write: 0,
        }
    );
    let bytes = ANTHROPIC_STREAM.as_bytes();
    for cut in 0..=bytes.len() {
        let split = assemble_chunks(
            WireProtocol::Anthropic,
            [&bytes[..cut], &bytes[cut..]],
            &mut |_| {},
        );
        assert_eq!(split.as_ref(), Ok(&completion), "split at byte {cut}");
    }
}

#[test]
fn anthropic_cache_writes_are_counted_as_misses_and_as_writes() {
    let stream = ANTHROPIC_STREAM.replace(
        "\"cache_read_input_tokens\":90,",
        "\"cache_read_input_tokens\":90,\"cache_creation_input_tokens\":500,",
    );
    let (result, _) = assemble(WireProtocol::Anthropic, stream.as_bytes());
    let usage = result.unwrap().usage;
    assert_eq!(
        (
            usage.input,
            usage.cache_hit,
            usage.cache_miss,
            usage.cache_write
        ),
        (600, 90, 510, 500)
    );
}

const RESPONSES_STREAM: &str = concat!(
    "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n",
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[]}}\n\n",
    "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":\"rs_1\",\"summary_index\":0,\"delta\":\"Plan it.\"}\n\n",
    "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"Plan it.\"}],\"encrypted_content\":\"gAAAAB-opaque\"}}\n\n",
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"grep\",\"arguments\":\"\"}}\n\n",
    "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\",\"delta\":\"{\\\"pattern\\\":\"}\n\n",
    "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\",\"delta\":\"\\\"x\\\"}\"}\n\n",
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":50,\"output_tokens\":9,\"input_tokens_details\":{\"cached_tokens\":40},\"output_tokens_details\":{\"reasoning_tokens\":4}}}}\n\n",
);

#[test]
fn responses_reasoning_keeps_encrypted_content_and_calls_finish_without_done() {
    let (result, streamed) = assemble(WireProtocol::Responses, RESPONSES_STREAM.as_bytes());
    let completion = result.unwrap();
    assert_eq!(streamed, "Plan it.");
    assert_eq!(
        completion.item.parts[0],
        AssistantPart::Reasoning {
            text: "Plan it.".into(),
            replay: Some(ReplayData::ResponsesReasoning {
                encrypted_content: Some("gAAAAB-opaque".into()),
                summary: vec!["Plan it.".into()],
            }),
        }
    );
    assert_eq!(calls(&completion)[0].arguments, "{\"pattern\":\"x\"}");
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        completion.usage,
        Usage {
            input: 50,
            output: 9,
            reasoning: 4,
            cache_hit: 40,
            cache_miss: 10,
            cache_write: 0,
        }
    );
}

#[test]
fn index_zero_reused_with_new_ids_gives_separate_calls() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"x\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"b\",\"function\":{\"name\":\"y\",\"arguments\":\"{\\\"k\\\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let (result, _) = assemble(WireProtocol::Chat, stream.as_bytes());
    let completion = result.unwrap();
    let calls = calls(&completion);
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].arguments.as_str()),
        ("a", "{}")
    );
    assert_eq!(
        (calls[1].id.as_str(), calls[1].arguments.as_str()),
        ("b", "{\"k\":1}")
    );
    assert_eq!(
        completion.finish_reason,
        FinishReason::Stop,
        "calls with `stop` are kept"
    );
}

#[test]
fn multi_line_data_is_joined() {
    let stream = "data: {\"choices\":[{\"index\":0,\n data: \"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let stream = stream.replace("\n data:", "\ndata:");
    let (result, _) = assemble(WireProtocol::Chat, stream.as_bytes());
    assert_eq!(result.unwrap().item.text(), "hi");
}

#[test]
fn incomplete_streams_never_return_tool_calls() {
    let bytes = DEEPSEEK_STREAM.as_bytes();
    let finish_at = DEEPSEEK_STREAM
        .find("\"finish_reason\":\"tool_calls\"")
        .unwrap();
    let cut_before_finish = DEEPSEEK_STREAM[..finish_at].rfind("data:").unwrap();
    let (result, streamed) = assemble(WireProtocol::Chat, &bytes[..cut_before_finish]);
    let diagnostic = result.unwrap_err();
    assert_eq!(diagnostic.kind, FailureKind::Transport);
    assert!(
        diagnostic
            .message
            .contains("before the response was complete")
    );
    assert!(!streamed.is_empty(), "deltas were streamed provisionally");
    for (protocol, stream) in [
        (WireProtocol::Anthropic, ANTHROPIC_STREAM),
        (WireProtocol::Responses, RESPONSES_STREAM),
    ] {
        let cut = stream.len() * 3 / 4;
        let (result, _) = assemble(protocol, &stream.as_bytes()[..cut]);
        assert_eq!(
            result.unwrap_err().kind,
            FailureKind::Transport,
            "{protocol}"
        );
    }
}

#[test]
fn bad_json_chunk_is_a_corrupt_stream() {
    let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"ind\n\n";
    let (result, _) = assemble(WireProtocol::Chat, stream.as_bytes());
    let diagnostic = result.unwrap_err();
    assert_eq!(diagnostic.kind, FailureKind::StreamCorrupt);
    assert!(diagnostic.message.contains("not valid JSON"));
}

#[test]
fn unknown_finish_reason_is_a_clear_error() {
    let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"cosmic_ray\"}]}\n\ndata: [DONE]\n\n";
    let (result, _) = assemble(WireProtocol::Chat, stream.as_bytes());
    let diagnostic = result.unwrap_err();
    assert_eq!(diagnostic.kind, FailureKind::Unknown);
    assert!(
        diagnostic.message.contains("`cosmic_ray`"),
        "{}",
        diagnostic.message
    );
    let anthropic = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"weird\"}}\n\n";
    let (result, _) = assemble(WireProtocol::Anthropic, anthropic.as_bytes());
    assert_eq!(result.unwrap_err().kind, FailureKind::Unknown);
}

#[test]
fn empty_answer_is_an_empty_response() {
    let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let (result, _) = assemble(WireProtocol::Chat, stream.as_bytes());
    assert_eq!(result.unwrap_err().kind, FailureKind::EmptyResponse);
}

#[test]
fn unknown_events_and_fields_are_ignored() {
    let stream = concat!(
        "event: whatever\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\",\"extra\":1}}],\"novel\":true}\n\n",
        "id: 5\nretry: 100\ndata: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    let (result, _) = assemble(WireProtocol::Chat, stream.as_bytes());
    assert_eq!(result.unwrap().item.text(), "ok");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any number of splits anywhere (including inside UTF-8 sequences and CRLF pairs).
    #[test]
    fn arbitrary_splits_give_the_same_item(mut cuts in proptest::collection::vec(0usize..DEEPSEEK_STREAM.len(), 0..12)) {
        cuts.sort_unstable();
        let bytes = DEEPSEEK_STREAM.as_bytes();
        let mut chunks = Vec::new();
        let mut start = 0;
        for cut in cuts {
            chunks.push(&bytes[start..cut]);
            start = cut;
        }
        chunks.push(&bytes[start..]);
        let result = assemble_chunks(WireProtocol::Chat, chunks, &mut |_| {});
        prop_assert_eq!(result, Ok(deepseek_expected()));
    }
}
