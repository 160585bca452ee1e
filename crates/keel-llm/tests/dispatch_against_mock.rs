//! The provider layer against the fake provider, in process: replay contracts, prefix cache
//! accounting, attempt isolation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_llm::client::HttpClient;
use keel_llm::profile::{Account, DEFAULT_CONNECT_TIMEOUT};
use keel_llm::{
    AccountCursor, Dispatcher, KeySource, ProjectionInput, ProviderProfile, RetryPolicy,
};
use keel_mock::{MockServer, Scenario, Step};
use keel_types::{
    AssistantItem, AssistantPart, EventBody, FailureKind, Item, ReasoningProtocol, ToolCall,
    ToolResult, WireProtocol,
};
use std::time::Duration;

struct FixedKey;
impl KeySource for FixedKey {
    fn key(&self, _: &str) -> Option<String> {
        Some("k".into())
    }
}

fn profile(
    server: &MockServer,
    protocol: WireProtocol,
    reasoning: ReasoningProtocol,
) -> ProviderProfile {
    ProviderProfile {
        name: "mock".into(),
        protocol,
        base_url: server.base_url(),
        base_url_setting: String::new(),
        accounts: vec![Account {
            name: "default".into(),
            api_key_env: "K".into(),
        }],
        reasoning_protocol: reasoning,
        retry: RetryPolicy {
            base_delay: Duration::from_millis(5),
            ..RetryPolicy::default()
        },
        idle_timeout: Duration::from_secs(5),
        connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        max_output_tokens: 256,
        native_web_search: false,
        max_event_bytes: keel_llm::profile::DEFAULT_MAX_EVENT_BYTES,
        context_window: None,
        price: None,
        region: None,
        reasoning_effort: None,
    }
}

fn say(text: &str) -> Step {
    Step::Say {
        text: text.into(),
        reason: Some("thinking".into()),
        finish_reason: None,
        usage: None,
    }
}

/// A history that replays one tool round whose reasoning was "r".
fn tool_round_history() -> Vec<Item> {
    vec![
        Item::User {
            text: "list files".into(),
        },
        Item::Assistant(AssistantItem {
            parts: vec![
                AssistantPart::Reasoning {
                    text: "r".into(),
                    replay: None,
                },
                AssistantPart::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "list_dir".into(),
                    arguments: "{}".into(),
                }),
            ],
        }),
        Item::ToolResult(ToolResult {
            call_id: "c1".into(),
            name: "list_dir".into(),
            content: "a.rs".into(),
            is_error: false,
        }),
    ]
}

async fn complete(
    profile: &ProviderProfile,
    history: &[Item],
) -> (
    Result<keel_llm::DispatchOutcome, keel_types::FailureDiagnostic>,
    Vec<EventBody>,
) {
    let client = HttpClient::new(DEFAULT_CONNECT_TIMEOUT).unwrap();
    let dispatcher = Dispatcher {
        client: &client,
        profile,
        keys: &FixedKey,
        secrets: &keel_types::Secrets::default(),
    };
    let mut accounts = AccountCursor::new(profile);
    let input = ProjectionInput {
        model: "mock-model",
        system: "sys",
        tools: &[],
        history,
    };
    let mut events = Vec::new();
    let result = dispatcher
        .complete(&input, &mut accounts, &mut |event| events.push(event))
        .await;
    (result, events)
}

#[tokio::test]
async fn deepseek_rejects_tool_replay_without_reasoning_content_and_keel_classifies_it() {
    let server = MockServer::start(
        ([127, 0, 0, 1], 0).into(),
        Scenario::from_steps(vec![say("ok")]),
    )
    .await
    .unwrap();
    let wrong = profile(&server, WireProtocol::Chat, ReasoningProtocol::None);
    let (result, events) = complete(&wrong, &tool_round_history()).await;
    let diagnostic = result.unwrap_err();
    assert_eq!(diagnostic.kind, FailureKind::ReasoningReplay);
    assert_eq!(diagnostic.status, Some(400));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, EventBody::LlmRetry { .. })),
        "never retried"
    );
    assert_eq!(server.requests().len(), 1);
    assert_eq!(
        server.requests()[0].step,
        None,
        "the mock rejected it without consuming a step"
    );

    let right = profile(&server, WireProtocol::Chat, ReasoningProtocol::Deepseek);
    let (result, _) = complete(&right, &tool_round_history()).await;
    assert_eq!(result.unwrap().completion.item.text(), "ok");
}

#[tokio::test]
async fn appended_history_hits_the_prefix_cache_for_every_protocol() {
    for protocol in WireProtocol::ALL {
        let server = MockServer::start(
            ([127, 0, 0, 1], 0).into(),
            Scenario::from_steps(vec![say("first"), say("second")]),
        )
        .await
        .unwrap();
        let profile = profile(&server, protocol, ReasoningProtocol::Deepseek);
        let mut history = vec![Item::User {
            text: "a question long enough to be worth caching, repeated. ".repeat(8),
        }];
        let (first, _) = complete(&profile, &history).await;
        let first = first.unwrap();
        assert_eq!(
            first.completion.usage.cache_hit, 0,
            "{protocol}: nothing cached yet"
        );
        history.push(Item::Assistant(first.completion.item.clone()));
        history.push(Item::User {
            text: "and a follow-up".into(),
        });
        let (second, _) = complete(&profile, &history).await;
        let second = second.unwrap();
        let usage = second.completion.usage;
        let first_input = first.completion.usage.input;
        // Everything the first request sent is cached, up to its closing bracket.
        assert!(
            usage.cache_hit + 1 >= first_input && usage.cache_hit < usage.input,
            "{protocol}: {usage:?}, first {first_input}"
        );
        assert_eq!(
            usage.cache_hit + usage.cache_miss,
            usage.input,
            "{protocol}"
        );
        let bodies: Vec<String> = server.requests().into_iter().map(|r| r.body).collect();
        assert!(
            bodies[1]
                .as_bytes()
                .starts_with(first.request.stable_prefix()),
            "{protocol}: request 2 extends request 1"
        );
    }
}

#[tokio::test]
async fn replayed_reasoning_round_trips_through_each_protocol() {
    // Anthropic signatures and Responses encrypted content come back exactly as received.
    for protocol in [WireProtocol::Anthropic, WireProtocol::Responses] {
        let server = MockServer::start(
            ([127, 0, 0, 1], 0).into(),
            Scenario::from_steps(vec![say("one"), say("two")]),
        )
        .await
        .unwrap();
        let profile = profile(&server, protocol, ReasoningProtocol::None);
        let mut history = vec![Item::User { text: "q".into() }];
        let (first, _) = complete(&profile, &history).await;
        history.push(Item::Assistant(first.unwrap().completion.item));
        history.push(Item::User { text: "q2".into() });
        complete(&profile, &history).await.0.unwrap();
        let second = &server.requests()[1].body;
        let needle = match protocol {
            WireProtocol::Anthropic => "\"signature\":\"mock-signature-1\"",
            _ => "\"encrypted_content\":\"mock-encrypted-1\"",
        };
        assert!(second.contains(needle), "{protocol}: {second}");
    }
}

#[tokio::test]
async fn provisional_text_of_a_dropped_attempt_is_not_in_the_completion() {
    let scenario = Scenario::from_steps(vec![
        Step::Fault(keel_mock::Fault::DropAfterContent),
        say("The whole answer."),
    ]);
    let server = MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
        .await
        .unwrap();
    for protocol in [WireProtocol::Chat] {
        let profile = profile(&server, protocol, ReasoningProtocol::Deepseek);
        let (result, events) = complete(&profile, &[Item::User { text: "q".into() }]).await;
        let outcome = result.unwrap();
        assert_eq!(outcome.completion.item.text(), "The whole answer.");
        assert_eq!(outcome.attempts, 2);
        let retry_at = events
            .iter()
            .position(|e| matches!(e, EventBody::LlmRetry { .. }))
            .unwrap();
        let provisional: String = events[..retry_at]
            .iter()
            .filter_map(|e| match e {
                EventBody::LlmText { delta } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert!(!provisional.is_empty() && "The whole answer.".starts_with(&provisional));
    }
}
