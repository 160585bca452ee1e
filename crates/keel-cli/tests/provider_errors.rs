//! Provider failures say what to do: the provider, the key's variable, the URL keel used, the
//! model — never the provider's own words.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
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
    assert_eq!(run.code(), 1);
    let said = run.stderr();
    assert!(
        said.contains(
            "the provider `deepseek` refused the key in DEEPSEEK_API_KEY (account `default`)"
        ) && said.contains("`keel config`"),
        "{said}"
    );
    assert!(
        !said.contains("secret detail"),
        "the body is never quoted: {said}"
    );
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
    assert!(!said.contains("whatever words"), "{said}");
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
    assert!(said.contains("check the model id `mock-model`"), "{said}");
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
