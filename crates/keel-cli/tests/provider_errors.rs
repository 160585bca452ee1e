//! Provider failures say what to do: the provider, the key's variable, the URL keel used and
//! the setting that chose it, the model — in keel's words; the provider's own words are shown
//! apart (`provider/said`: live only, never stored, never in the diagnostic, made safe). A
//! refused connection to this machine is never retried.

use crate::common::*;
use serde_json::json;

fn failing(status: u16, body: &str) -> (Home, MockProcess, Run) {
    let steps = json!({"steps": [{"fault": {"status": status, "body": body}}]}).to_string();
    let (home, mock) = scripted("chat", &steps, "");
    let run = home.run(&["run", "hello"]);
    (home, mock, run)
}

#[test]
fn a_refused_key_names_the_provider_the_variable_and_keel_config() {
    let (_home, _mock, run) = failing(
        401,
        r#"{"error":{"message":"Authentication Fails: secret detail","type":"authentication_error"}}"#,
    );
    assert_eq!(run.code(), 2);
    let said = run.stderr();
    assert!(
        said.contains(
            "the provider `deepseek` refused the key in DEEPSEEK_API_KEY (account `default`)"
        ) && said.contains("`keel config`"),
        "{said}"
    );
    let error = error_line(&said);
    assert!(
        !error.contains("secret detail"),
        "keel's diagnostic never quotes the provider: {said}"
    );
    assert!(
        said.contains("the provider said: Authentication Fails: secret detail"),
        "its own words, apart and labelled: {said}"
    );
}

/// The `error:` line a failed `keel run` prints (keel's words).
fn error_line(stderr: &str) -> String {
    stderr
        .lines()
        .find(|line| line.starts_with("error:"))
        .unwrap_or_else(|| panic!("an error line: {stderr}"))
        .to_string()
}

#[test]
fn a_404_names_the_url_keel_used_and_base_url() {
    let (_home, mock, run) = failing(404, r#"{"error":{"message":"no route"}}"#);
    assert_eq!(run.code(), 1);
    let said = run.stderr();
    let url = format!("{}/chat/completions", mock.base_url);
    assert!(
        said.contains(&format!("404 Not Found for {url}")) && said.contains("check `base_url`"),
        "{said}"
    );
}

#[test]
fn a_model_the_provider_does_not_know_is_named_from_its_code_only() {
    let (_home, _mock, run) = failing(
        400,
        r#"{"error":{"message":"whatever words","type":"invalid_request_error","code":"model_not_found"}}"#,
    );
    assert_eq!(run.code(), 1);
    let said = run.stderr();
    assert!(
        said.contains("the provider `deepseek` does not know the model `mock-model`"),
        "{said}"
    );
    assert!(!error_line(&said).contains("whatever words"), "{said}");
    // The same words without the code: no claim about the model, a general next step.
    let (_home, _mock, run) = failing(
        400,
        r#"{"error":{"message":"model_not_found","type":"invalid_request_error"}}"#,
    );
    let said = run.stderr();
    assert!(
        !said.contains("does not know the model"),
        "free text is never matched: {said}"
    );
    assert!(
        !said.contains("check the model id") && said.contains("rejected the request as invalid"),
        "no advice no code gives: {said}"
    );
}

#[test]
fn a_retry_line_names_the_host_it_retries() {
    let steps = json!({"steps": [
        {"fault": {"status": 503, "body": "{}"}},
        {"say": "fine now"},
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &steps, "");
    let run = home.run(&["run", "hello"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr().contains("retry 1/5 to 127.0.0.1 in"),
        "{}",
        run.stderr()
    );
    // In words, with the status: the kind's name stays in --json.
    assert!(
        run.stderr()
            .contains("s: the provider failed to answer (HTTP 503)"),
        "{}",
        run.stderr()
    );
}

#[test]
fn a_model_keel_knows_no_window_for_gets_a_notice_with_the_closest_id() {
    let steps = json!({"steps": [{"say": "ok"}, {"say": "ok"}]}).to_string();
    let (home, _mock) = scripted("chat", &steps, "");
    let run = home.run(&["run", "--model", "deepseek/deepsek-chat", "hello"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let said = run.stderr();
    assert!(
        said.contains("keel does not know the context window of `deepsek-chat`")
            && said.contains("Did you mean `deepseek-chat`?")
            && said.contains("set `context_window` in [providers.deepseek]"),
        "{said}"
    );
    // Setting the window silences it.
    let (home, _mock) = scripted("chat", &steps, "context_window = 100000");
    let run = home.run(&["run", "hello"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        !run.stderr().contains("does not know the context window"),
        "{}",
        run.stderr()
    );
    let (home, _mock) = scripted("chat", &steps, "");
    let run = home.run(&["run", "--model", "deepseek/mock-model", "hello"]);
    assert!(
        run.stderr()
            .contains("does not know the context window of `mock-model`"),
        "{}",
        run.stderr()
    );
}

#[test]
fn the_providers_own_message_is_shown_apart_and_never_stored() {
    let body = r#"{"error":{"message":"Invalid max_tokens value, the valid range of max_tokens is [1, 8192]","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#;
    let (home, _mock, run) = failing(400, body);
    assert_eq!(run.code(), 1);
    let said = run.stderr();
    assert!(
        said.contains(
            "the provider said: Invalid max_tokens value, the valid range of max_tokens is [1, 8192]"
        ),
        "{said}"
    );
    assert!(!said.contains("check the model id"), "{said}");
    let steps = json!({"steps": [{"fault": {"status": 400, "body": body}}]}).to_string();
    let (home_json, _mock) = scripted("chat", &steps, "");
    let json = home_json.run(&["run", "--json", "hello"]);
    let events = json.events();
    let said_at = events
        .iter()
        .position(|e| e["type"] == "provider/said")
        .expect("a provider/said event");
    let failed_at = events
        .iter()
        .position(|e| e["type"] == "turn/failed")
        .unwrap();
    assert!(said_at < failed_at, "before the failure");
    assert_eq!(events[said_at]["status"], 400);
    assert!(events[said_at]["id"].is_null(), "never stored: no event id");
    assert!(
        !events[failed_at]["diagnostic"]["message"]
            .as_str()
            .unwrap()
            .contains("valid range"),
        "never in the diagnostic"
    );
    for store in [home.path(), home_json.path()] {
        let db = std::fs::read(store.join("state/keel.db")).unwrap_or_default();
        let wal = std::fs::read(store.join("state/keel.db-wal")).unwrap_or_default();
        for bytes in [db, wal] {
            assert!(
                !String::from_utf8_lossy(&bytes).contains("valid range"),
                "the provider's words reached the store"
            );
        }
    }
}

#[test]
fn the_providers_message_is_dropped_if_it_echoes_a_key_and_escaped_otherwise() {
    // `test-key-1` is the key every test home gives keel.
    let (_home, _mock, run) = failing(
        400,
        r#"{"error":{"message":"the key test-key-1 is not valid here"}}"#,
    );
    assert!(!run.stderr().contains("test-key"), "{}", run.stderr());
    assert!(
        !run.stderr().contains("the provider said"),
        "{}",
        run.stderr()
    );
    let (_home, _mock, run) = failing(
        400,
        "{\"error\":{\"message\":\"bad\\u001b[2Jnews\\nmore\\u202e\"}}",
    );
    let said = run.stderr();
    assert!(
        !said.contains('\u{1b}') && !said.contains('\u{202e}'),
        "{said:?}"
    );
    assert!(said.contains("the provider said: bad"), "{said}");
    // Every protocol's error shape.
    for (protocol, body) in [
        (
            "anthropic",
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"anthropic words"}}"#,
        ),
        (
            "responses",
            r#"{"error":{"message":"responses words","type":"invalid_request_error"}}"#,
        ),
    ] {
        let steps = json!({"steps": [{"fault": {"status": 400, "body": body}}]}).to_string();
        let (home, _mock) = scripted(protocol, &steps, "");
        let run = home.run(&["run", "hello"]);
        let words = body
            .split("message\":\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert!(
            run.stderr()
                .contains(&format!("the provider said: {words}")),
            "{protocol}: {}",
            run.stderr()
        );
    }
}

#[test]
fn a_retried_failure_shows_the_last_attempts_words_once() {
    let steps = json!({"steps": [
        {"fault": {"status": 400, "body": r#"{"error":{"message":"first words"}}"#}},
        {"fault": {"status": 400, "body": r#"{"error":{"message":"second words"}}"#}},
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &steps, "");
    home.append_config("retry_on = [\"invalid_request\"]\nmax_retries = 1\n");
    let run = home.run(&["run", "--json", "hello"]);
    let said: Vec<_> = run.events_of("provider/said");
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0]["message"], "second words");
    assert_eq!(run.events_of("llm/retry").len(), 1);
}

/// A port nothing listens on, on this machine.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

#[test]
fn a_refused_local_connection_is_not_retried_and_names_the_url_and_its_setting() {
    let port = closed_port();
    let home = Home::new(&format!(
        "model = \"deepseek/m\"\n[providers.deepseek]\nbase_url = \"http://127.0.0.1:{port}\"\n"
    ));
    let started = std::time::Instant::now();
    let run = home.run(&["run", "--json", "hello"]);
    assert_eq!(run.code(), 1);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "failed fast, not after the default policy's retries"
    );
    assert!(run.events_of("llm/retry").is_empty(), "never retried");
    let diagnostic = &run.events_of("turn/failed")[0]["diagnostic"];
    assert_eq!(diagnostic["kind"], "transport");
    assert_eq!(diagnostic["sub_reason"], "loopback_refused");
    let said = home.run(&["run", "hello"]).stderr();
    assert!(
        said.contains(&format!("http://127.0.0.1:{port}/chat/completions"))
            && said.contains("`base_url` in [providers.deepseek]"),
        "{said}"
    );
    // Chosen by the environment: named so.
    let run = Run::from(
        Home::new("")
            .keel(&["run", "hello"])
            .env("DEEPSEEK_BASE_URL", format!("http://127.0.0.1:{port}"))
            .output()
            .unwrap(),
    );
    assert!(
        run.stderr().contains("`DEEPSEEK_BASE_URL`"),
        "{}",
        run.stderr()
    );
    // `keel config` says what is never retried.
    let config = home.run(&["config"]);
    assert!(
        config
            .stdout()
            .contains("never retried: a connection a loopback address refused"),
        "{}",
        config.stdout()
    );
}

#[test]
fn a_dropped_connection_names_the_url_and_the_setting() {
    let steps = json!({"steps": [
        {"fault": "drop_after_content"}, {"fault": "drop_after_content"},
        {"fault": "drop_after_content"}, {"fault": "drop_after_content"},
        {"fault": "drop_after_content"}, {"fault": "drop_after_content"},
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &steps, "");
    let run = home.run(&["run", "hello"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let error = error_line(&run.stderr());
    assert!(
        error.contains(&format!("{}/chat/completions", mock.base_url))
            && error.contains("`base_url` in [providers.deepseek]"),
        "{error}"
    );
}
