//! Conversations scripted apart, over real HTTP on loopback: concurrent requests each take
//! their own conversation's steps, delayed answers overlap in time, and every other request
//! takes the default steps.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_mock::{MockServer, Scenario};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn chat_request(text: &str) -> Value {
    json!({"model": "m", "stream": false, "messages": [
        {"role": "system", "content": "You are keel. MARK-A is not in a message here."},
        {"role": "user", "content": text}
    ]})
}

async fn ask(client: &reqwest::Client, base: &str, text: &str) -> (String, Instant) {
    let response: Value = client
        .post(format!("{base}/chat/completions"))
        .json(&chat_request(text))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let said = response["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("{response}"))
        .to_string();
    (said, Instant::now())
}

#[tokio::test]
async fn each_conversation_answers_its_own_requests_and_delays_overlap() {
    let scenario = Scenario::parse(
        r#"{"steps": [{"say": "default one"}, {"say": "default two"}],
            "conversations": [
              {"when": {"contains": "MARK-A"}, "steps": [{"say": "a first", "delay_ms": 1000}, {"say": "a second"}]},
              {"when": {"contains": "MARK-B"}, "steps": [{"say": "b first", "delay_ms": 1000}]}
            ]}"#,
    )
    .unwrap();
    let server = MockServer::start("127.0.0.1:0".parse().unwrap(), scenario)
        .await
        .unwrap();
    let base = server.base_url();
    // reqwest is built without a default TLS provider (keel-llm installs this one).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let started = Instant::now();
    let ((a, a_done), (b, b_done)) = tokio::join!(
        ask(&client, &base, "MARK-A look at the parser"),
        ask(&client, &base, "MARK-B look at the tests"),
    );
    assert_eq!((a.as_str(), b.as_str()), ("a first", "b first"));
    // Each answer waited 1 s; one after the other they would take 2 s: they overlapped.
    let both = a_done.max(b_done) - started;
    assert!(both >= Duration::from_millis(1000), "{both:?}");
    assert!(
        both < Duration::from_millis(2000),
        "not concurrent: {both:?}"
    );
    // The default steps are untouched by the conversations, and a marker only in the system
    // prompt does not count.
    assert_eq!(ask(&client, &base, "plain").await.0, "default one");
    assert_eq!(ask(&client, &base, "MARK-A again").await.0, "a second");
    assert_eq!(ask(&client, &base, "plain again").await.0, "default two");
    let requests = server.requests();
    let conversations: Vec<Option<usize>> = requests.iter().map(|r| r.conversation).collect();
    assert_eq!(
        conversations.iter().filter(|c| **c == Some(1)).count(),
        2,
        "{conversations:?}"
    );
    assert_eq!(conversations.iter().filter(|c| c.is_none()).count(), 2);
    // A marker only in a tool call's arguments or a tool result is not the user's: such a
    // request (a parent going on after its `task` calls) takes the default steps.
    let parent_goes_on = json!({"model": "m", "stream": false, "messages": [
        {"role": "user", "content": "delegate"},
        {"role": "assistant", "content": null, "reasoning_content": "r", "tool_calls": [{"id": "t1", "type": "function",
            "function": {"name": "task", "arguments": "{\"prompt\": \"MARK-B look\"}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "MARK-A was mentioned"}
    ]});
    let response: Value = client
        .post(format!("{base}/chat/completions"))
        .json(&parent_goes_on)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // (The default steps are used up: their answer is that none is left.)
    let said = response.to_string();
    assert!(
        said.contains("no step left for request 6") && !said.contains("in conversation"),
        "the default steps answered: {said}"
    );
    // A conversation that runs out says which it was.
    let response = client
        .post(format!("{base}/chat/completions"))
        .json(&chat_request("MARK-B once more"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body = response.text().await.unwrap();
    assert!(
        body.contains("no step left for request 7 in conversation 2"),
        "{body}"
    );
}
