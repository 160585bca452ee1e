//! Every input in the committed fuzz corpus (`fuzz/corpus/TARGET/`), replayed through the same
//! target functions libFuzzer runs, on the stable toolchain; plus differential property tests on
//! generated event streams: the SSE framer against `eventsource-stream`, and each assembler's
//! repeated-envelope fast path against a full parse of every event.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_fuzz::TARGETS;
use proptest::prelude::*;
use std::path::PathBuf;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

#[test]
fn every_corpus_input_passes_its_target() {
    for (name, target) in TARGETS {
        let dir = corpus_dir(name);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect::<Vec<_>>();
        assert!(
            entries.len() >= 10,
            "{name}: the corpus has only {} inputs",
            entries.len()
        );
        for path in entries {
            let input = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&input));
            assert!(outcome.is_ok(), "{name}: {} fails", path.display());
        }
    }
}

/// Streams built from the pieces event streams are made of, so most inputs mean something.
fn event_stream() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just("data".to_string()),
        Just("event".to_string()),
        Just("id".to_string()),
        Just("retry".to_string()),
        Just(":".to_string()),
        Just(" ".to_string()),
        Just("\n".to_string()),
        Just("\r".to_string()),
        Just("\r\n".to_string()),
        Just("\u{feff}".to_string()),
        Just("\0".to_string()),
        Just("é".to_string()),
        "[a-z0-9{}\"]{0,6}",
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat().into_bytes())
}

/// Per protocol (in `assembler`'s order): events that open the answer, delta events with `@`
/// where the changing string goes, and events that end the answer.
type Envelopes = (
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
);

const ENVELOPES: [Envelopes; 3] = [
    (
        &[],
        &[
            (
                "message",
                r#"{"choices":[{"delta":{"content":null,"reasoning_content":"@"},"finish_reason":null,"index":0}],"id":"c","model":"m"}"#,
            ),
            (
                "message",
                r#"{"id":"c","choices":[{"index":0,"delta":{"content":"@"},"logprobs":null}]}"#,
            ),
            (
                "message",
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":"@"}}]},"index":0}]}"#,
            ),
            (
                "message",
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"@"}}]},"index":0}]}"#,
            ),
            (
                "message",
                r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"@"}}]}}]}"#,
            ),
            (
                "message",
                r#"{"choices":[{"delta":{"content":"@"},"index":1}]}"#,
            ),
            (
                "message",
                r#"{"choices":[{"delta":{"content":"@"},"finish_reason":"length","index":0}]}"#,
            ),
            (
                "message",
                r#"{"choices":[],"usage":{"prompt_tokens":3},"id":"@"}"#,
            ),
            (
                "message",
                r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"@","function":{"name":"grep","arguments":"{}"}}]},"index":0}]}"#,
            ),
        ],
        &[
            (
                "message",
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls","index":0}]}"#,
            ),
            ("message", "[DONE]"),
        ],
    ),
    (
        &[
            (
                "message_start",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":3}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t","name":"bash","input":{}}}"#,
            ),
        ],
        &[
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"@"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"@"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"@"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"@"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"text":"@","type":"thinking_delta","thinking":"x"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":5,"delta":{"type":"text_delta","text":"@"}}"#,
            ),
            ("ping", r#"{"type":"ping","note":"@"}"#),
        ],
        &[
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ],
    ),
    (
        &[
            (
                "response.output_item.added",
                r#"{"type":"response.output_item.added","item":{"type":"reasoning","id":"r1","summary":[]}}"#,
            ),
            (
                "response.output_item.added",
                r#"{"type":"response.output_item.added","item":{"type":"message","id":"m1","content":[]}}"#,
            ),
            (
                "response.output_item.added",
                r#"{"type":"response.output_item.added","item":{"type":"function_call","id":"f1","call_id":"c1","name":"bash","arguments":""}}"#,
            ),
        ],
        &[
            (
                "response.reasoning_text.delta",
                r#"{"type":"response.reasoning_text.delta","item_id":"r1","delta":"@"}"#,
            ),
            (
                "response.output_text.delta",
                r#"{"type":"response.output_text.delta","item_id":"m1","output_index":1,"delta":"@"}"#,
            ),
            (
                "response.function_call_arguments.delta",
                r#"{"type":"response.function_call_arguments.delta","item_id":"f1","delta":"@"}"#,
            ),
            (
                "response.output_text.delta",
                r#"{"delta":"@","type":"response.output_text.delta","item_id":"nobody"}"#,
            ),
            (
                "response.output_text.delta",
                r#"{"type":"response.output_text.delta","item_id":"@","delta":"x"}"#,
            ),
            (
                "response.in_progress",
                r#"{"type":"response.in_progress","response":{"id":"@"}}"#,
            ),
        ],
        &[(
            "response.completed",
            r#"{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":3,"output_tokens":9}}}"#,
        )],
    ),
];

/// Streams that repeat a few envelopes around a changing string, as providers send them, with
/// now and then one byte changed anywhere in an event: the ground of the repeated-envelope fast
/// path, which must assemble exactly what a full parse of every event does.
fn repeated_envelope_stream() -> impl Strategy<Value = (u8, Vec<u8>)> {
    // Mostly what a JSON string may hold (escapes included), now and then what it may not.
    let token = prop_oneof![
        12 => prop::sample::select(&["a", "é", "}", ",", ":", "\\\"", "\\\\", "\\n", "\\u00e9"][..]),
        1 => prop::sample::select(&["\"", "\\", "\u{1}", "\\x"][..]),
    ];
    let piece = prop::collection::vec(token, 0..6).prop_map(|tokens| tokens.concat());
    let change = prop::option::weighted(
        0.15,
        (any::<usize>(), prop::sample::select(&b"\"\\1} ,x"[..])),
    );
    let step = (any::<usize>(), 1..4usize, piece, change);
    (0..3u8, prop::collection::vec(step, 0..30)).prop_map(|(choice, steps)| {
        let (opening, deltas, closing) = ENVELOPES[usize::from(choice)];
        let mut events: Vec<(String, String)> = opening
            .iter()
            .map(|(name, data)| (name.to_string(), data.to_string()))
            .collect();
        for (which, repeat, piece, change) in steps {
            let (name, envelope) = deltas[which % deltas.len()];
            for _ in 0..repeat {
                let mut data = envelope.replace('@', &piece).into_bytes();
                if let Some((at, byte)) = change {
                    let at = at % data.len();
                    data[at] = byte;
                }
                events.push((
                    name.to_string(),
                    String::from_utf8_lossy(&data).into_owned(),
                ));
            }
        }
        events.extend(
            closing
                .iter()
                .map(|(name, data)| (name.to_string(), data.to_string())),
        );
        let stream: String = events
            .iter()
            .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
            .collect();
        (choice, stream.into_bytes())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn repeated_envelopes_assemble_as_a_full_parse_of_every_event_does(
        (choice, stream) in repeated_envelope_stream(),
        first in any::<u8>(),
        second in any::<u8>(),
    ) {
        let input = [&[choice, first, second][..], &stream].concat();
        keel_fuzz::assembler(&input);
    }

    #[test]
    fn the_framer_agrees_with_the_oracle_on_any_split(
        stream in event_stream(),
        first in any::<u8>(),
        second in any::<u8>(),
    ) {
        let input = [&[first, second][..], &stream].concat();
        keel_fuzz::sse_framer(&input);
    }

    #[test]
    fn every_protocol_assembles_generated_streams_the_same_on_any_split(
        stream in event_stream(),
        choice in any::<u8>(),
        first in any::<u8>(),
        second in any::<u8>(),
    ) {
        let input = [&[choice, first, second][..], &stream].concat();
        keel_fuzz::assembler(&input);
    }
}
