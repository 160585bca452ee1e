//! Projection tests: request layout snapshots per protocol and prefix stability.

use super::*;
use crate::profile::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT};
use crate::retry::RetryPolicy;
use keel_types::{
    AssistantItem, AssistantPart, ReasoningProtocol, ReplayData, ToolCall, ToolResult,
};

fn profile(protocol: WireProtocol, reasoning_protocol: ReasoningProtocol) -> ProviderProfile {
    ProviderProfile {
        name: "test".into(),
        protocol,
        base_url: "http://127.0.0.1:1".into(),
        base_url_setting: String::new(),
        accounts: vec![],
        reasoning_protocol,
        retry: RetryPolicy::default(),
        idle_timeout: DEFAULT_IDLE_TIMEOUT,
        connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        max_output_tokens: 1024,
        native_web_search: false,
        max_event_bytes: crate::profile::DEFAULT_MAX_EVENT_BYTES,
        context_window: None,
        price: None,
        region: None,
        reasoning_effort: None,
    }
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"]
        }),
    }]
}

fn call(id: &str, name: &str, arguments: &str) -> AssistantPart {
    AssistantPart::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    })
}

fn result(id: &str, name: &str, content: &str) -> Item {
    Item::ToolResult(ToolResult {
        call_id: id.into(),
        name: name.into(),
        content: content.into(),
        is_error: false,
    })
}

/// Text, reasoning, two tool rounds (the second a parallel call), then a final answer.
/// `replay` decides which opaque data the reasoning carries.
fn history(replay: impl Fn(u32) -> Option<ReplayData>) -> Vec<Item> {
    vec![
        Item::User {
            text: "Fix the bug in main.rs".into(),
        },
        Item::Assistant(AssistantItem {
            parts: vec![
                AssistantPart::Reasoning {
                    text: "Look first.".into(),
                    replay: replay(1),
                },
                AssistantPart::Text {
                    text: "Reading it.".into(),
                },
                call("call_1", "read_file", "{\"path\": \"main.rs\"}"),
            ],
        }),
        result("call_1", "read_file", "fn main() { pritnln!(); }"),
        Item::Assistant(AssistantItem {
            parts: vec![
                AssistantPart::Reasoning {
                    text: "Typo; check lib too.".into(),
                    replay: replay(2),
                },
                call("call_2", "read_file", "{\"path\":\"lib.rs\"}"),
                call("call_3", "read_file", "{\"path\":\"Cargo.toml\"}"),
            ],
        }),
        result("call_2", "read_file", "pub fn x() {}"),
        result("call_3", "read_file", "[package]"),
        Item::Assistant(AssistantItem {
            parts: vec![AssistantPart::Text {
                text: "It is a typo: pritnln.".into(),
            }],
        }),
        Item::User {
            text: "Thanks".into(),
        },
    ]
}

fn no_replay(_: u32) -> Option<ReplayData> {
    None
}

fn body_of(profile: &ProviderProfile, history: &[Item]) -> String {
    let input = ProjectionInput {
        model: "m",
        system: "You are keel.",
        tools: &tools(),
        history,
    };
    String::from_utf8(project(profile, &input).unwrap().body).unwrap()
}

#[test]
fn chat_deepseek_request_layout() {
    let body = body_of(
        &profile(WireProtocol::Chat, ReasoningProtocol::Deepseek),
        &history(no_replay),
    );
    insta::assert_snapshot!("chat_deepseek", body);
}

#[test]
fn chat_deepseek_replays_reasoning_exactly_on_tool_call_messages() {
    let body = body_of(
        &profile(WireProtocol::Chat, ReasoningProtocol::Deepseek),
        &history(no_replay),
    );
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let messages = json["messages"].as_array().unwrap();
    for message in messages.iter().filter(|m| m["role"] == "assistant") {
        let has_calls = message.get("tool_calls").is_some();
        assert_eq!(
            message.get("reasoning_content").is_some(),
            has_calls,
            "{message}"
        );
    }
    // An assistant tool-call message without any reasoning still carries "".
    let mut bare = history(no_replay);
    bare[1] = Item::Assistant(AssistantItem {
        parts: vec![call("call_1", "read_file", "{}")],
    });
    let body = body_of(&profile(WireProtocol::Chat, ReasoningProtocol::Kimi), &bare);
    assert!(
        body.contains(r#""role":"assistant","content":"","reasoning_content":"","tool_calls""#)
    );
}

#[test]
fn chat_none_never_replays_reasoning() {
    let body = body_of(
        &profile(WireProtocol::Chat, ReasoningProtocol::None),
        &history(no_replay),
    );
    assert!(!body.contains("reasoning_content"));
    insta::assert_snapshot!("chat_none", body);
}

#[test]
fn anthropic_request_layout() {
    let replay = |n: u32| {
        Some(ReplayData::AnthropicThinking {
            signature: format!("sig-{n}"),
        })
    };
    let body = body_of(
        &profile(WireProtocol::Anthropic, ReasoningProtocol::None),
        &history(replay),
    );
    insta::assert_snapshot!("anthropic", body);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let roles: Vec<&str> = json["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user"
        ]
    );
}

#[test]
fn anthropic_drops_unsigned_reasoning_and_wraps_bad_arguments() {
    let history = vec![
        Item::User { text: "hi".into() },
        Item::Assistant(AssistantItem {
            parts: vec![
                AssistantPart::Reasoning {
                    text: "unsigned".into(),
                    replay: None,
                },
                call("c1", "bash", "{\"command\": \"ls\""),
                call("c2", "list_dir", ""),
            ],
        }),
    ];
    let body = body_of(
        &profile(WireProtocol::Anthropic, ReasoningProtocol::None),
        &history,
    );
    assert!(!body.contains("unsigned"));
    assert!(
        body.contains(r#""input":{"invalid_arguments":"{\"command\": \"ls\""}"#),
        "{body}"
    );
    assert!(body.contains(r#""name":"list_dir","input":{}"#), "{body}");
}

#[test]
fn responses_request_layout() {
    let replay = |n: u32| {
        Some(ReplayData::ResponsesReasoning {
            encrypted_content: Some(format!("enc-{n}")),
            summary: vec![format!("summary {n}")],
        })
    };
    let body = body_of(
        &profile(WireProtocol::Responses, ReasoningProtocol::None),
        &history(replay),
    );
    assert!(body.contains(r#""store":false"#));
    insta::assert_snapshot!("responses", body);
}

#[test]
fn responses_deepseek_contract_replays_plain_reasoning() {
    let body = body_of(
        &profile(WireProtocol::Responses, ReasoningProtocol::Deepseek),
        &history(no_replay),
    );
    insta::assert_snapshot!("responses_deepseek", body);
    let none = body_of(
        &profile(WireProtocol::Responses, ReasoningProtocol::None),
        &history(no_replay),
    );
    assert!(!none.contains(r#""type":"reasoning""#));
}

/// Request boundaries of an append-only session: after each user message and after each
/// complete batch of tool results.
const REQUEST_BOUNDARIES: [usize; 4] = [1, 3, 6, 8];

#[test]
fn append_only_history_gives_prefix_stable_requests_for_every_protocol() {
    let cases = [
        (WireProtocol::Chat, ReasoningProtocol::Deepseek),
        (WireProtocol::Chat, ReasoningProtocol::None),
        (WireProtocol::Anthropic, ReasoningProtocol::None),
        (WireProtocol::Responses, ReasoningProtocol::Deepseek),
        (WireProtocol::Responses, ReasoningProtocol::None),
    ];
    let full = history(no_replay);
    for (protocol, reasoning) in cases {
        assert_append_only(&profile(protocol, reasoning), &full, REQUEST_BOUNDARIES);
    }
}

/// Each request of `full` cut at `boundaries` is deterministic and extends the one before.
fn assert_append_only(profile: &ProviderProfile, full: &[Item], boundaries: [usize; 4]) {
    let tools = tools();
    let mut previous: Option<ProjectedRequest> = None;
    for cut in boundaries {
        let input = ProjectionInput {
            model: "m",
            system: "You are keel.",
            tools: &tools,
            history: &full[..cut],
        };
        let request = project(profile, &input).unwrap();
        let again = project(profile, &input).unwrap();
        assert_eq!(request, again, "projection must be deterministic");
        if let Some(previous) = &previous {
            let label = (profile.protocol, profile.reasoning_protocol);
            assert!(
                request.body.starts_with(previous.stable_prefix()),
                "{label:?}: request at {cut} does not extend the previous one"
            );
            assert!(request.message_count > previous.message_count);
            assert_ne!(request.prefix_hash, previous.prefix_hash);
        }
        previous = Some(request);
    }
}

#[test]
fn prefix_hash_is_sixteen_hex_digits() {
    let profile = profile(WireProtocol::Chat, ReasoningProtocol::Deepseek);
    let history = history(no_replay);
    let input = ProjectionInput {
        model: "m",
        system: "",
        tools: &[],
        history: &history,
    };
    let request = project(&profile, &input).unwrap();
    assert_eq!(request.prefix_hash.len(), 16);
    assert!(request.prefix_hash.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(
        request.message_count, 8,
        "no system message when the prompt is empty"
    );
}

/// A fixed stand-in for the system prompt: the real one is built in keel-agent, which depends
/// on this crate.
const SYSTEM: &str = "You are keel, a coding agent. Use the tools to inspect and change the workspace; answer briefly.";

/// One tool round as a session stores it: the question, an assistant message with reasoning
/// and a `read_file` call, its result, and the final answer. `replay` is the reasoning's
/// opaque data.
fn one_tool_round(replay: Option<ReplayData>) -> Vec<Item> {
    vec![
        Item::User {
            text: "What does src/main.rs print?".into(),
        },
        Item::Assistant(AssistantItem {
            parts: vec![
                AssistantPart::Reasoning {
                    text: "Read the file first.".into(),
                    replay,
                },
                AssistantPart::Text {
                    text: "Let me look.".into(),
                },
                call("call_1", "read_file", r#"{"path":"src/main.rs"}"#),
            ],
        }),
        result(
            "call_1",
            "read_file",
            "     1\tfn main() {\n     2\t    println!(\"hello\");\n     3\t}\n",
        ),
        Item::Assistant(AssistantItem {
            parts: vec![AssistantPart::Text {
                text: "It prints `hello`.".into(),
            }],
        }),
    ]
}

/// `body` re-indented like `serde_json::to_string_pretty`, with every object key left where
/// the projection put it (going through a `serde_json::Value` would sort the keys).
fn pretty(body: &[u8]) -> String {
    let text = std::str::from_utf8(body).unwrap();
    let mut out = String::new();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = text.chars().peekable();
    let new_line = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                while chars.next_if(|next| next.is_whitespace()).is_some() {}
                let close = if c == '{' { '}' } else { ']' };
                out.push(c);
                if chars.next_if_eq(&close).is_some() {
                    out.push(close);
                } else {
                    depth += 1;
                    new_line(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth -= 1;
                new_line(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                new_line(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// The request `project()` builds for [`one_tool_round`] with the real built-in tools, pretty.
fn real_request(
    protocol: WireProtocol,
    reasoning: ReasoningProtocol,
    replay: Option<ReplayData>,
) -> String {
    let tools = keel_tools::ToolRegistry::new().unwrap().specs();
    let history = one_tool_round(replay);
    let input = ProjectionInput {
        model: "test-model",
        system: SYSTEM,
        tools: &tools,
        history: &history,
    };
    let body = project(&profile(protocol, reasoning), &input).unwrap().body;
    let pretty = pretty(&body);
    let parsed: serde_json::Value = serde_json::from_str(&pretty).unwrap();
    assert_eq!(
        parsed,
        serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
        "re-indenting changed nothing but white space"
    );
    pretty
}

#[test]
fn chat_deepseek_request_with_the_real_tools() {
    let request = real_request(WireProtocol::Chat, ReasoningProtocol::Deepseek, None);
    insta::assert_snapshot!("real_tools_chat_deepseek", request);
}

#[test]
fn anthropic_request_with_the_real_tools() {
    let replay = ReplayData::AnthropicThinking {
        signature: "sig-1".into(),
    };
    let request = real_request(
        WireProtocol::Anthropic,
        ReasoningProtocol::None,
        Some(replay),
    );
    insta::assert_snapshot!("real_tools_anthropic", request);
}

#[test]
fn responses_request_with_the_real_tools() {
    let replay = ReplayData::ResponsesReasoning {
        encrypted_content: Some("enc-1".into()),
        summary: vec!["Read the file first.".into()],
    };
    let request = real_request(
        WireProtocol::Responses,
        ReasoningProtocol::None,
        Some(replay),
    );
    insta::assert_snapshot!("real_tools_responses", request);
}

/// `history` with the session's context block before its first prompt.
fn with_context(history: Vec<Item>) -> Vec<Item> {
    let mut items = vec![Item::Context(keel_types::ContextBlock {
        text: "<context from=\"keel\">\nAlways answer in French.\n</context>".into(),
        sources: Vec::new(),
    })];
    items.extend(history);
    items
}

#[test]
fn a_context_block_heads_the_first_user_message_in_every_protocol() {
    let cases = [
        (WireProtocol::Chat, "context_chat"),
        (WireProtocol::Anthropic, "context_anthropic"),
        (WireProtocol::Responses, "context_responses"),
    ];
    let full = with_context(history(no_replay));
    for (protocol, name) in cases {
        let profile = profile(protocol, ReasoningProtocol::None);
        // The block and the first prompt: one user message, the block first.
        let body = body_of(&profile, &full[..2]);
        insta::assert_snapshot!(name, body);
        // Append-only with the block at its head: each request extends the one before.
        assert_append_only(&profile, &full, REQUEST_BOUNDARIES.map(|cut| cut + 1));
    }
}

#[test]
fn a_context_block_not_followed_by_a_prompt_stays_where_it_is() {
    let block = Item::Context(keel_types::ContextBlock {
        text: "<context from=\"keel\">b</context>".into(),
        sources: Vec::new(),
    });
    let mut full = history(no_replay);
    // A block before an assistant item (a history shaped by a rewrite): its own user message,
    // in place, in every protocol.
    full.insert(3, block);
    for protocol in [
        WireProtocol::Chat,
        WireProtocol::Responses,
        WireProtocol::Anthropic,
    ] {
        let body = body_of(&profile(protocol, ReasoningProtocol::None), &full);
        let at = body.find("<context from").unwrap();
        assert!(
            body.find("pritnln!(); }").unwrap() < at,
            "{protocol:?}: {body}"
        );
        assert!(at < body.find("lib.rs").unwrap(), "{protocol:?}: {body}");
        assert_eq!(body.matches("<context from").count(), 1);
    }
}

#[test]
fn an_effort_is_said_in_every_request_before_the_history_so_the_prefix_holds() {
    for (protocol, reasoning, said) in [
        (
            WireProtocol::Chat,
            ReasoningProtocol::Deepseek,
            r#""max_tokens":8192,"reasoning_effort":"high","thinking":{"type":"enabled"},"tools""#,
        ),
        (
            WireProtocol::Responses,
            ReasoningProtocol::None,
            r#""include":["reasoning.encrypted_content"],"reasoning":{"effort":"high"},"instructions""#,
        ),
        (
            WireProtocol::Anthropic,
            ReasoningProtocol::None,
            r#""stream":true,"thinking":{"budget_tokens":8191,"type":"enabled"},"system""#,
        ),
    ] {
        let mut with_effort = profile(protocol, reasoning);
        with_effort.max_output_tokens = 8192;
        with_effort.reasoning_effort = Some(crate::ReasoningEffort::High);
        let full = history(no_replay);
        let shorter = body_of(&with_effort, &full[..full.len() - 2]);
        let longer = body_of(&with_effort, &full);
        assert!(longer.contains(said), "{protocol:?}: {longer}");
        let cut = shorter.len() - 20;
        assert_eq!(shorter[..cut], longer[..cut], "{protocol:?}: prefix-stable");
        let without = body_of(&profile(protocol, reasoning), &full);
        assert!(
            !without.contains("effort") && !without.contains("thinking\":{"),
            "{without}"
        );
    }
}
