//! `keel run` against `keel mock`, for each protocol and each fault scenario.

use crate::common::*;

const ANSWER: &str = "The answer is 42, computed by the keel mock provider.";

fn run_scenario(protocol: &str, scenario: &str, extra_config: &str) -> (Run, MockProcess) {
    let mock = MockProcess::start(scenario);
    let home = Home::new(&config_for(protocol, &mock.base_url, extra_config));
    let run = home.run(&["run", "What is the answer?"]);
    (run, mock)
}

#[test]
fn basic_answer_streams_with_usage_for_every_protocol() {
    for protocol in PROTOCOLS {
        let (run, mock) = run_scenario(protocol, "basic", "");
        assert_eq!(run.code(), 0, "{protocol}: {}", run.stderr());
        assert_eq!(run.stdout(), format!("{ANSWER}\n"), "{protocol}");
        assert!(
            run.stderr().contains("tokens: "),
            "{protocol}: {}",
            run.stderr()
        );
        let requests = mock.requests();
        assert_eq!(requests.len(), 1, "{protocol}");
        assert_eq!(requests[0]["protocol"], protocol);
        assert!(
            requests[0]["key_fingerprint"].is_string(),
            "the key was sent"
        );
    }
}

#[test]
fn transient_500_is_retried_once_then_succeeds() {
    for protocol in PROTOCOLS {
        let (run, mock) = run_scenario(protocol, "transient-500", "");
        assert_eq!(run.code(), 0, "{protocol}: {}", run.stderr());
        assert_eq!(run.stdout().matches(ANSWER).count(), 1, "{protocol}");
        assert!(
            run.stderr().contains("retry 1/5"),
            "{protocol}: {}",
            run.stderr()
        );
        let requests = mock.requests();
        assert_eq!(requests.len(), 2, "{protocol}");
        assert_eq!(
            requests[0]["body"], requests[1]["body"],
            "a retry resends the same bytes"
        );
    }
}

#[test]
fn retry_after_429_waits_about_two_seconds() {
    for protocol in PROTOCOLS {
        let (run, mock) = run_scenario(protocol, "retry-after-429", "");
        assert_eq!(run.code(), 0, "{protocol}: {}", run.stderr());
        // The wait is the behaviour under test, seen from the provider's side: the retry
        // arrived no sooner than the 2 s Retry-After asked (a lower bound, so a slow machine
        // cannot fail it).
        let requests = mock.requests();
        let gap_us = requests[1]["received_at_us"].as_u64().unwrap()
            - requests[0]["received_at_us"].as_u64().unwrap();
        assert!(gap_us >= 1_900_000, "{protocol}: retried after {gap_us} µs");
        assert!(
            run.stderr().contains("in 2.0 s"),
            "{protocol}: {}",
            run.stderr()
        );
        assert_eq!(mock.requests().len(), 2, "{protocol}");
    }
}

#[test]
fn quota_402_is_not_retried_and_fails_with_quota() {
    for protocol in PROTOCOLS {
        let mock = MockProcess::start("quota-402");
        let home = Home::new(&config_for(protocol, &mock.base_url, ""));
        let run = home.run(&["run", "--json", "hi"]);
        assert_eq!(run.code(), 1, "{protocol}: {}", run.stderr());
        let failed = run.events_of("turn/failed");
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0]["diagnostic"]["kind"], "quota", "{protocol}");
        assert_eq!(failed[0]["diagnostic"]["status"], 402);
        assert_eq!(failed[0]["diagnostic"]["trace_id"], "mock-quota-1");
        assert!(run.events_of("llm/retry").is_empty());
        assert_eq!(mock.requests().len(), 1, "{protocol}");
        // The provider's words reach one transient `provider/said` line only: never the
        // diagnostic, never the store.
        let carrying: Vec<String> = run
            .events()
            .iter()
            .filter(|event| event.to_string().contains("Insufficient Balance"))
            .map(|event| event["type"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(carrying, ["provider/said"], "{protocol}");
        let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
        let stored = home.run(&["session", "show", &session, "--json"]).stdout();
        assert!(!stored.contains("Insufficient Balance"), "{stored}");
    }
}

#[test]
fn quota_402_rotates_to_the_second_account() {
    for protocol in PROTOCOLS {
        let mock = MockProcess::start("quota-402");
        let accounts = "accounts = [{ name = \"first\", api_key_env = \"KEEL_TEST_K1\" }, { name = \"second\", api_key_env = \"KEEL_TEST_K2\" }]";
        let home = Home::new(&config_for(protocol, &mock.base_url, accounts));
        let output = home
            .keel(&["run", "--json", "hi"])
            .env("KEEL_TEST_K1", "key-one")
            .env("KEEL_TEST_K2", "key-two")
            .output()
            .unwrap();
        let run = Run::from(output);
        assert_eq!(run.code(), 0, "{protocol}: {}", run.stderr());
        let rotated = run.events_of("account/rotated");
        assert_eq!(rotated.len(), 1);
        assert_eq!(
            (rotated[0]["from"].as_str(), rotated[0]["to"].as_str()),
            (Some("first"), Some("second"))
        );
        assert_eq!(rotated[0]["reason"], "quota");
        let requests = mock.requests();
        assert_eq!(requests.len(), 2, "{protocol}");
        assert_ne!(
            requests[0]["key_fingerprint"], requests[1]["key_fingerprint"],
            "another key answered"
        );
        let text: String = run
            .events_of("llm/text")
            .iter()
            .map(|e| e["delta"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(text, "Answered by the next account.");
        let stdout = run.stdout();
        assert!(
            !stdout.contains("key-one") && !stdout.contains("key-two"),
            "keys never reach events"
        );
    }
}

#[test]
fn opaque_400_fails_without_retry_as_upstream_reason_missing() {
    for protocol in PROTOCOLS {
        for body in ["", "{\"model\":\"mock-model\"}"] {
            let dir = tempfile::tempdir().unwrap();
            let scenario = serde_json::json!({"steps": [{"fault": {"status": 400, "body": body}}, {"say": "never"}]});
            let mock = MockProcess::with_steps(dir.path(), &scenario.to_string());
            let home = Home::new(&config_for(protocol, &mock.base_url, ""));
            let run = home.run(&["run", "hi"]);
            assert_eq!(run.code(), 1, "{protocol}");
            let stderr = run.stderr();
            assert!(
                stderr.contains("the upstream rejected the request without giving a reason"),
                "{stderr}"
            );
            // Plain words for a person; the kind is for --json and the logs.
            assert!(!stderr.contains("upstream_reason_missing"), "{stderr}");
            assert!(stderr.contains("(HTTP 400)"), "{stderr}");
            assert!(
                !stderr.to_lowercase().contains("reasoning"),
                "never claims reasoning was missing: {stderr}"
            );
            assert_eq!(mock.requests().len(), 1, "{protocol}");
        }
    }
}

#[test]
fn opaque_400_is_retried_only_where_the_profile_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = r#"{"steps": [{"fault": {"status": 400, "body": ""}}, {"fault": {"status": 400, "body": ""}}, {"fault": {"status": 400, "body": ""}}, {"say": "never reached"}]}"#;
    let mock = MockProcess::with_steps(dir.path(), scenario);
    let config = format!(
        "model = \"deepseek/m\"\n[providers.deepseek]\nbase_url = \"{}\"\n[providers.deepseek.retry]\nmax_retries = 2\nbase_delay_ms = 10\nretry_on = [\"server\", \"upstream_reason_missing\"]\n",
        mock.base_url
    );
    let home = Home::new(&config);
    let run = home.run(&["run", "hi"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert_eq!(
        mock.requests().len(),
        3,
        "1 + 2 attempts, then the last error as is"
    );
    assert!(
        run.stderr()
            .contains("the upstream rejected the request without giving a reason"),
        "{}",
        run.stderr()
    );
}

#[test]
fn midstream_drop_is_retried_without_duplicated_text() {
    for protocol in PROTOCOLS {
        let (run, mock) = run_scenario(protocol, "midstream-drop", "");
        assert_eq!(run.code(), 0, "{protocol}: {}", run.stderr());
        assert_eq!(
            run.stdout(),
            format!("{ANSWER}\n"),
            "{protocol}: provisional text is dropped"
        );
        assert_eq!(mock.requests().len(), 2, "{protocol}");
        assert!(
            run.stderr()
                .contains("the connection to the provider failed"),
            "{protocol}: {}",
            run.stderr()
        );
    }
}

#[test]
fn midstream_drop_events_mark_the_retry_before_the_second_attempt() {
    let mock = MockProcess::start("midstream-drop");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let run = home.run(&["run", "--json", "hi"]);
    assert_eq!(run.code(), 0);
    let kinds: Vec<String> = run
        .events()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    let retry_at = kinds.iter().position(|k| k == "llm/retry").unwrap();
    assert!(
        kinds[..retry_at].iter().any(|k| k == "llm/text"),
        "the first attempt streamed provisional text"
    );
    assert_eq!(kinds.iter().filter(|k| *k == "llm/response").count(), 1);
    assert_eq!(kinds.last().unwrap(), "turn/completed");
}

#[test]
fn a_bad_json_chunk_is_stream_corrupt_and_retried_within_the_bound_by_default() {
    // One corrupt chunk: the attempt's stream was isolated, so the default policy retries it
    // and the answer arrives (as Claude Code does; one bad chunk should not end a turn).
    for protocol in PROTOCOLS {
        let (run, mock) = run_scenario(protocol, "bad-json-chunk", "");
        assert_eq!(run.code(), 0, "{protocol}: {}", run.stderr());
        assert!(
            run.stderr()
                .contains("the provider's stream broke the protocol"),
            "{}",
            run.stderr()
        );
        assert_eq!(mock.requests().len(), 2, "{protocol}: one retry");
    }
    // Bounded as ever: 1 + max_retries attempts, then the last error as is.
    let dir = tempfile::tempdir().unwrap();
    let scenario = r#"{"steps": [{"fault": "bad_json_chunk"}, {"fault": "bad_json_chunk"}, {"fault": "bad_json_chunk"}, {"say": "never"}]}"#;
    let mock = MockProcess::with_steps(dir.path(), scenario);
    let config = format!(
        "model = \"deepseek/m\"\n[providers.deepseek]\nbase_url = \"{}\"\n[providers.deepseek.retry]\nmax_retries = 2\nbase_delay_ms = 10\n",
        mock.base_url
    );
    let run = Home::new(&config).run(&["run", "hi"]);
    assert_eq!(run.code(), 1);
    assert!(run.stderr().contains("not valid JSON"), "{}", run.stderr());
    assert_eq!(mock.requests().len(), 3, "bounded: 1 + max_retries");
    // Taken out of retry_on, it is not retried.
    let dir = tempfile::tempdir().unwrap();
    let mock = MockProcess::with_steps(dir.path(), scenario);
    let config = format!(
        "model = \"deepseek/m\"\n[providers.deepseek]\nbase_url = \"{}\"\n[providers.deepseek.retry]\nretry_on = [\"transport\"]\n",
        mock.base_url
    );
    let run = Home::new(&config).run(&["run", "hi"]);
    assert_eq!(run.code(), 1);
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn an_oversized_event_is_never_retried_whatever_the_policy() {
    let long_line = format!("data: {}", "x".repeat(256 * 1024));
    let fault = serde_json::json!({"fault": {"status": 200, "body": long_line,
        "headers": {"content-type": "text/event-stream"}}});
    let dir = tempfile::tempdir().unwrap();
    let scenario = serde_json::json!({"steps": [fault, {"say": "never"}]});
    let mock = MockProcess::with_steps(dir.path(), &scenario.to_string());
    let config = format!(
        "model = \"deepseek/m\"\n[providers.deepseek]\nbase_url = \"{}\"\nmax_event_bytes = 65536\n\
         [providers.deepseek.retry]\nbase_delay_ms = 10\nretry_on = [\"stream_corrupt\"]\n",
        mock.base_url
    );
    let run = Home::new(&config).run(&["run", "--json", "hi"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert_eq!(mock.requests().len(), 1, "never retried");
    assert!(run.events_of("llm/retry").is_empty());
    let diagnostic = &run.events_of("turn/failed")[0]["diagnostic"];
    assert_eq!(diagnostic["kind"], "stream_corrupt");
    assert_eq!(diagnostic["sub_reason"], "event_too_large");
}

#[test]
fn reasoning_replay_400_is_not_retried() {
    for protocol in PROTOCOLS {
        let dir = tempfile::tempdir().unwrap();
        let body = r#"{"error":{"message":"Missing `reasoning_content` field in the assistant message at message index 2","type":"invalid_request_error"}}"#;
        let scenario = serde_json::json!({"steps": [{"fault": {"status": 400, "body": body}}, {"say": "never"}]});
        let mock = MockProcess::with_steps(dir.path(), &scenario.to_string());
        let home = Home::new(&config_for(protocol, &mock.base_url, ""));
        let run = home.run(&["run", "--json", "hi"]);
        assert_eq!(run.code(), 1, "{protocol}");
        assert_eq!(
            run.events_of("turn/failed")[0]["diagnostic"]["kind"],
            "reasoning_replay"
        );
        assert_eq!(mock.requests().len(), 1, "{protocol}");
    }
}

#[test]
fn always_failing_server_gives_up_after_max_retries() {
    let mock = MockProcess::start("always-500");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let run = home.run(&["run", "--json", "hi"]);
    assert_eq!(run.code(), 1);
    assert_eq!(run.events_of("llm/retry").len(), 5);
    assert_eq!(mock.requests().len(), 6);
    assert_eq!(
        run.events_of("turn/failed")[0]["diagnostic"]["kind"],
        "server"
    );
}
