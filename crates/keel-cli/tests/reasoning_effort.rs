//! `reasoning_effort`: one keel name, sent the way each protocol says it (what the mock
//! received is checked), shown by `keel config`, and refused where a protocol cannot say it.

use crate::common::*;
use serde_json::{Value, json};

fn one_answer() -> String {
    json!({"steps": [{"say": "ok"}, {"say": "ok again"}]}).to_string()
}

#[test]
fn each_protocol_receives_the_effort_in_every_request() {
    for (protocol, effort, received) in [
        ("chat", "max", "max"),
        ("chat", "off", "off"),
        ("responses", "low", "low"),
        ("responses", "off", "off"),
        ("anthropic", "high", "high"),
        ("anthropic", "off", "off"),
    ] {
        let (home, mock) = scripted(protocol, &one_answer(), "");
        home.prepend_config(&format!("reasoning_effort = \"{effort}\"\n"));
        let first = home.run(&["run", "--json", "hi"]);
        assert_eq!(first.code(), 0, "{protocol}/{effort}: {}", first.stderr());
        let session = first.events()[0]["session_id"]
            .as_str()
            .unwrap()
            .to_string();
        let again = home.run(&["run", "--json", "--session", &session, "again"]);
        assert_eq!(again.code(), 0, "{}", again.stderr());
        let requests = mock.requests();
        assert_eq!(requests.len(), 2);
        for request in &requests {
            assert_eq!(
                request["effort"], received,
                "{protocol}/{effort}: {request}"
            );
        }
        let bodies: Vec<&str> = requests
            .iter()
            .map(|request| request["body"].as_str().unwrap())
            .collect();
        let cut = bodies[0].rfind("hi").unwrap();
        assert_eq!(bodies[0][..cut], bodies[1][..cut], "prefix-stable");
    }
}

#[test]
fn unset_sends_nothing_and_keel_config_shows_the_effort_and_its_file() {
    let (home, mock) = scripted("chat", &one_answer(), "");
    let run = home.run(&["run", "--json", "hi"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(mock.requests()[0]["effort"], Value::Null);
    assert!(
        !mock.requests()[0]["body"]
            .as_str()
            .unwrap()
            .contains("thinking")
    );
    let shown = home.run(&["config"]);
    assert!(
        shown.stdout().contains("reasoning_effort") && shown.stdout().contains("provider default"),
        "{}",
        shown.stdout()
    );
    home.prepend_config("reasoning_effort = \"low\"\n");
    let shown = home.run(&["config", "--json"]);
    let config: Value = serde_json::from_str(&shown.stdout()).unwrap();
    let deepseek = &config["providers"]["deepseek"];
    assert_eq!(deepseek["reasoning_effort"]["value"], "low", "{deepseek}");
    assert!(
        deepseek["reasoning_effort"]["source"]
            .to_string()
            .contains("config.toml"),
        "{deepseek}"
    );
}

#[test]
fn an_effort_the_protocol_cannot_say_or_a_made_up_one_is_refused_with_its_line() {
    let (home, _mock) = scripted("chat", &one_answer(), "reasoning_protocol = \"kimi\"");
    home.prepend_config("reasoning_effort = \"off\"\n");
    let run = home.run(&["run", "hi"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(
        run.stderr().contains("config.toml:1")
            && run.stderr().contains("reasoning_effort")
            && run.stderr().contains("only for DeepSeek"),
        "{}",
        run.stderr()
    );
    let (home, _mock) = scripted("chat", &one_answer(), "");
    home.prepend_config("reasoning_effort = \"extreme\"\n");
    let run = home.run(&["run", "hi"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(
        run.stderr()
            .contains("\"extreme\" is not an effort: use one of off, low, medium, high, max"),
        "{}",
        run.stderr()
    );
}
