//! The `--json` event stream and the basic command contract.

use crate::common::*;

#[test]
fn json_events_follow_the_contract() {
    for protocol in PROTOCOLS {
        let mock = MockProcess::start("transient-500");
        let home = Home::new(&config_for(protocol, &mock.base_url, ""));
        let run = home.run(&["run", "--json", "What is the answer?"]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        let events = run.events();
        let session = events[0]["session_id"].as_str().unwrap().to_string();
        assert!(events.iter().all(|e| e["session_id"] == session.as_str()));
        assert_eq!(events[0]["type"], "session/started");
        assert_eq!(events[0]["provider"], provider_for(protocol));
        assert_eq!(events[0]["resumed"], false);
        assert_eq!(events[1]["type"], "turn/started");
        assert_eq!(events[1]["input_kind"], "user");
        let requests = run.events_of("llm/request");
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0]["protocol"], protocol);
        assert_eq!(requests[0]["prefix_hash"], requests[1]["prefix_hash"]);
        assert_eq!(
            (
                requests[0]["attempt"].as_u64(),
                requests[1]["attempt"].as_u64()
            ),
            (Some(1), Some(2))
        );
        let retry = &run.events_of("llm/retry")[0];
        assert_eq!(
            (
                retry["kind"].as_str(),
                retry["status"].as_u64(),
                retry["max_retries"].as_u64()
            ),
            (Some("server"), Some(500), Some(5))
        );
        let reasoning: String = run
            .events_of("llm/reasoning")
            .iter()
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        assert_eq!(reasoning, "Retrying worked.", "{protocol}");
        let response = &run.events_of("llm/response")[0];
        assert_eq!(response["finish_reason"], "stop");
        for field in ["input", "output", "reasoning", "cache_hit", "cache_miss"] {
            assert!(response["usage"][field].is_u64(), "{field}");
        }
        let completed = events.last().unwrap();
        assert_eq!(completed["type"], "turn/completed");
        assert_eq!(completed["turn"], 1);
        let ratio = completed["cache_hit_ratio"].as_f64().unwrap();
        assert!(
            ratio > 0.5,
            "the retry hits the cache of the first attempt: {ratio}"
        );
        assert!(
            !run.stdout().contains("test-key-1"),
            "the key never appears"
        );
    }
}

#[test]
fn json_mode_prints_only_json_lines_on_stdout_and_nothing_on_stderr() {
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let run = home.run(&["run", "--json", "hi"]);
    assert_eq!(run.code(), 0);
    assert!(run.stderr().is_empty(), "{}", run.stderr());
    assert!(run.events().len() >= 5);
}

#[test]
fn piped_output_has_no_escape_codes_and_reasoning_goes_to_stderr() {
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let run = home.run(&["run", "hi"]);
    assert_eq!(run.code(), 0);
    assert!(!run.stdout().contains('\u{1b}') && !run.stderr().contains('\u{1b}'));
    assert!(run.stderr().contains("The user wants a short answer."));
    assert!(!run.stdout().contains("The user wants a short answer."));
}

#[test]
fn version_and_help() {
    let home = Home::new("");
    let run = home.run(&["--version"]);
    assert_eq!(run.code(), 0);
    assert!(run.stdout().starts_with("keel "));
    let run = home.run(&["--help"]);
    assert_eq!(run.code(), 0);
    for command in ["run", "mock", "demo", "config"] {
        assert!(run.stdout().contains(command), "{command}");
    }
}

#[test]
fn demo_runs_without_key_or_config() {
    let home = Home::new("this is not toml [");
    let run = home.run_without(&["demo"], "DEEPSEEK_API_KEY");
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.stdout().contains("Fixed"), "{}", run.stdout());
    let stderr = run.stderr();
    for expected in [
        "● read_file greeting.txt",
        "● edit_file greeting.txt",
        "● bash cat greeting.txt",
        "retry 1/5",
        "without giving a reason",
        "> /recover-context",
        "recovering",
        "DEEPSEEK_API_KEY",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in {stderr}"
        );
    }
    assert!(
        !stderr.contains("recovery available: keel run --session"),
        "the demo's private session is not offered to the user"
    );
    let fixed = std::fs::read_to_string(home.path().join("demo/workspace/greeting.txt")).unwrap();
    assert!(
        fixed.starts_with("Hello, world!"),
        "the demo really edited its scratch file: {fixed}"
    );
    let mut top: Vec<String> = std::fs::read_dir(home.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(
        top,
        ["config.toml", "demo"],
        "the demo writes only under KEEL_HOME/demo"
    );
}

#[test]
fn a_priced_model_reports_what_each_turn_cost_and_an_unpriced_one_only_tokens() {
    let steps = serde_json::json!({"steps": [{"say": "priced"}, {"say": "again"}]}).to_string();
    // A price per million tokens the user set: 1 for a cache hit, 2 for a miss, 4 for output.
    let price = "[providers.deepseek.price]\ninput_cache_hit = 1.0\ninput_cache_miss = 2.0\noutput = 4.0\ncurrency = \"EUR\"\n";
    let (home, _mock) = scripted("chat", &steps, "");
    home.append_config(price);
    let run = home.run(&["run", "--json", "hi"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let completed = &run.events_of("turn/completed")[0];
    let usage = &completed["usage"];
    let count = |key: &str| usage[key].as_f64().unwrap();
    let expected =
        (count("cache_hit") * 1.0 + count("cache_miss") * 2.0 + count("output") * 4.0) / 1e6;
    assert!(expected > 0.0, "{completed}");
    assert_eq!(completed["cost"]["currency"], "EUR", "{completed}");
    let amount = completed["cost"]["amount"].as_f64().unwrap();
    assert!((amount - expected).abs() < 1e-12, "{amount} vs {expected}");
    let human = home.run(&["run", "hi"]);
    assert!(human.stderr().contains(" · €0.0"), "{}", human.stderr());

    let (plain, _mock) = scripted("chat", &steps, "");
    let run = plain.run(&["run", "--json", "hi"]);
    let completed = &run.events_of("turn/completed")[0];
    assert!(
        completed.get("cost").is_none(),
        "no price, no amount: {completed}"
    );
    assert!(!plain.run(&["run", "hi"]).stderr().contains('$'));
}
