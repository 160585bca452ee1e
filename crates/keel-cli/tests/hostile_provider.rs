//! A provider that sends what no provider should: absurd `Retry-After` values, malformed usage
//! numbers, a corrupt chunk, an empty-object 400 — and a bug inside a turn. keel never panics,
//! keeps every complete answer, and every turn ends with `turn/completed` or `turn/failed`.

use crate::common::serve::{Server, wait_until_idle};
use crate::common::*;
use serde_json::{Value, json};

#[test]
fn any_retry_after_is_capped_or_ignored_never_a_panic() {
    let fault = |value: &str| {
        json!({"fault": {"status": 429, "body": "{\"error\":{\"message\":\"slow down\"}}",
            "headers": {"Retry-After": value}}})
    };
    let steps = json!({"steps": [fault("1e30"), fault("18446744073709551616"), fault("-5"),
        fault("NaN"), {"say": "made it"}]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    // (The retry table is the config's last.)
    home.append_config("retry_after_cap_ms = 100\n");
    let run = home.run(&["run", "--json", "go"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!run.stderr().contains("panicked"), "{}", run.stderr());
    let delays: Vec<u64> = run
        .events_of("llm/retry")
        .iter()
        .map(|retry| retry["delay_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(delays.len(), 4, "{delays:?}");
    assert_eq!(&delays[..2], [100, 100], "huge values wait the cap");
    assert!(
        delays[2..].iter().all(|d| *d <= 220),
        "ignored: backoff ({delays:?})"
    );
    assert_eq!(mock.requests().len(), 5);
}

#[test]
fn a_bug_inside_a_turn_ends_it_with_turn_failed_and_the_session_goes_on() {
    let steps = json!({"steps": [{"say": "first"}, {"say": "second"}, {"say": "third"}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    // keel run: the turn fails with a diagnostic (exit 1), not a crash (exit 101).
    let run = Run::from(
        home.keel(&["run", "--json", "go"])
            .env("KEEL_KILL_AT", "panic:before_assistant_commit")
            .output()
            .unwrap(),
    );
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let failed = run.events_of("turn/failed");
    assert_eq!(failed.len(), 1, "{}", run.stdout());
    assert_eq!(failed[0]["diagnostic"]["kind"], "unknown");

    // keel serve: the turn task does not die silently; the next turn runs.
    let server = Server::start_with_env(
        &home,
        &[],
        &[("KEEL_KILL_AT", "panic:before_assistant_commit")],
    );
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "go"})).0, 202);
    let events = server.events(&session, None, "turn/failed", 100);
    assert!(
        events.iter().any(|e| e["type"] == "turn/failed"),
        "{events:?}"
    );
    wait_until_idle(&server, &session);
    assert_eq!(server.submit(&session, json!({"input": "again"})).0, 202);
    let events = server.events(&session, None, "turn/completed", 100);
    assert!(
        events.iter().any(|e| e["type"] == "turn/completed"),
        "{events:?}"
    );
    let (_, history) = server.api(
        "GET",
        &format!("/api/sessions/{session}/history"),
        Value::Null,
    );
    assert!(history.to_string().contains("third"), "{history}");
}

#[test]
fn a_malformed_usage_number_keeps_the_complete_answer() {
    // Each protocol's own usage object, with a negative, an absurd and a string count.
    let usages = [
        (
            "chat",
            json!({"prompt_tokens": -5, "completion_tokens": 1e30,
                "prompt_cache_hit_tokens": "12", "prompt_cache_miss_tokens": 3}),
        ),
        (
            "anthropic",
            json!({"output_tokens": -5, "input_tokens": 1e30, "cache_read_input_tokens": "x"}),
        ),
        (
            "responses",
            json!({"input_tokens": "many", "output_tokens": -1,
                "input_tokens_details": {"cached_tokens": 1e30}}),
        ),
    ];
    for (protocol, usage) in usages {
        let steps = json!({"steps": [{"say": "the whole answer", "usage": usage}]});
        let (home, mock) = scripted(protocol, &steps.to_string(), "");
        let run = home.run(&["run", "--json", "go"]);
        assert_eq!(run.code(), 0, "{protocol}: {}", run.stderr());
        let response = &run.events_of("llm/response")[0];
        assert!(response["usage"].is_object(), "{protocol}: {response}");
        assert!(
            run.events_of("llm/retry").is_empty(),
            "{protocol}: not retried"
        );
        assert_eq!(mock.requests().len(), 1);
        let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
        let shown = home.run(&["session", "show", &session, "--json"]);
        assert!(
            shown.stdout().contains("the whole answer"),
            "{protocol}: the answer is committed: {}",
            shown.stdout()
        );
    }
}

#[test]
fn a_trace_id_that_echoes_the_key_is_dropped() {
    let key = "sk-echo-0f1e2d3c4b5a69788796";
    for (header, kept) in [
        (key.to_string(), false),
        (format!("req-{}-x", &key[3..14]), false),
        ("req-4f9a1c2e-0001".to_string(), true),
    ] {
        let steps = json!({"steps": [{"fault": {"status": 401, "body": "{}",
            "headers": {"x-request-id": header}}}]});
        let (home, _mock) = scripted("chat", &steps.to_string(), "");
        let run = Run::from(
            home.keel(&["run", "--json", "go"])
                .env("DEEPSEEK_API_KEY", key)
                .output()
                .unwrap(),
        );
        assert_eq!(run.code(), 2);
        let diagnostic = &run.events_of("turn/failed")[0]["diagnostic"];
        assert_eq!(
            diagnostic["trace_id"].is_string(),
            kept,
            "{header}: {diagnostic}"
        );
        assert!(!run.stdout().contains(&key[3..14]), "{header}");
        let store = std::fs::read(home.path().join("state/keel.db")).unwrap();
        assert!(
            !String::from_utf8_lossy(&store).contains(&key[3..14]),
            "{header}: in the store"
        );
    }
}

#[test]
fn a_trace_id_that_echoes_any_of_keels_secrets_is_dropped() {
    let token = "tok-any-secret-5e6f7a8b9c0d";
    let steps = json!({"steps": [{"fault": {"status": 401, "body": "{}",
        "headers": {"x-request-id": format!("id-{token}")}}}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let run = Run::from(
        home.keel(&["run", "--json", "go"])
            .env("KEEL_TEST_TOKEN", token)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code(), 2);
    let diagnostic = &run.events_of("turn/failed")[0]["diagnostic"];
    assert!(diagnostic["trace_id"].is_null(), "{diagnostic}");
    assert!(!run.stdout().contains(&token[4..16]));
}
