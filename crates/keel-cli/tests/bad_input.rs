//! Bad input of every kind gets a clear error and exit code 1 or 2, never a panic.

use crate::common::*;

fn assert_clean_failure(run: &Run, code: i32, needles: &[&str]) {
    let stderr = run.stderr();
    assert_eq!(run.code(), code, "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "expected {needle:?} in: {stderr}");
    }
}

#[test]
fn malformed_config_names_file_and_line() {
    let home = Home::new("model = \"deepseek/x\"\n[providers.deepseek\nbase_url = 1\n");
    let run = home.run(&["run", "hi"]);
    let file = home.path().join("config.toml");
    assert_clean_failure(&run, 2, &[&format!("{}:2", file.display())]);
}

#[test]
fn unknown_protocol_and_reasoning_protocol_name_the_key() {
    let home = Home::new("[providers.deepseek]\nprotocol = \"grpc\"\n");
    assert_clean_failure(
        &home.run(&["run", "hi"]),
        2,
        &[
            ":2:",
            "providers.deepseek.protocol",
            "expected one of `chat`",
        ],
    );
    let home = Home::new("\n[providers.kimi]\nreasoning_protocol = \"guess\"\n");
    assert_clean_failure(
        &home.run(&["run", "hi"]),
        2,
        &[":3:", "providers.kimi.reasoning_protocol"],
    );
}

#[test]
fn invalid_base_url_names_the_key() {
    let home = Home::new("[providers.deepseek]\nbase_url = \"htp:/nowhere\"\n");
    assert_clean_failure(
        &home.run(&["run", "hi"]),
        2,
        &["providers.deepseek.base_url", "http://"],
    );
    let home = Home::new("");
    let run = {
        let output = home
            .keel(&["run", "hi"])
            .env("DEEPSEEK_BASE_URL", "not a url")
            .output()
            .unwrap();
        Run::from(output)
    };
    assert_clean_failure(&run, 2, &["DEEPSEEK_BASE_URL"]);
}

#[test]
fn a_bad_permission_rule_names_file_line_and_list() {
    let home = Home::new("[permissions]\nallow = [\n  \"read_file\",\n  \"bash(cargo *\",\n]\n");
    let file = home.path().join("config.toml");
    assert_clean_failure(
        &home.run(&["run", "hi"]),
        2,
        &[&format!(
            "{}:4: `permissions.allow`: rule `bash(cargo *`: missing the closing `)`",
            file.display()
        )],
    );
}

#[test]
fn project_keel_toml_overrides_home_and_errors_name_it() {
    let home = Home::new("model = \"deepseek/x\"\n");
    std::fs::write(home.path().join("keel.toml"), "model = \"nowhere/x\"\n").unwrap();
    // Trusted, the project's file decides, and its mistake is named.
    let run = home.run(&["run", "--trust-workspace", "hi"]);
    // A project's file is someone else's: its value is not repeated.
    assert_clean_failure(&run, 2, &["keel.toml:1", "`model`", "unknown provider"]);
    assert!(!run.stderr().contains("nowhere"), "{}", run.stderr());
    // Untrusted, a provider only the project names is not taken: said, and the user's model
    // stays.
    let config = home.run(&["config"]);
    assert_eq!(config.code(), 0, "{}", config.stderr());
    let stdout = config.stdout();
    assert!(stdout.contains("deepseek/x"), "{stdout}");
    assert!(
        stdout.contains("ignored (untrusted workspace)") && stdout.contains("keel.toml:1"),
        "{stdout}"
    );
}

#[test]
fn missing_key_exits_2_and_names_the_variable() {
    let home = Home::new("");
    let run = home.run_without(&["run", "hi"], "DEEPSEEK_API_KEY");
    assert_clean_failure(&run, 2, &["DEEPSEEK_API_KEY"]);
    let home = Home::new("model = \"kimi/kimi-k2\"\n");
    let run = home.run_without(&["run", "hi"], "MOONSHOT_API_KEY");
    assert_clean_failure(&run, 2, &["MOONSHOT_API_KEY"]);
}

#[test]
fn bad_model_flag_and_usage_errors_exit_2() {
    let home = Home::new("");
    assert_clean_failure(
        &home.run(&["run", "--model", "nomodel", "hi"]),
        2,
        &["--model", "<provider>/<model id>"],
    );
    assert_clean_failure(
        &home.run(&["run", "--permission-mode", "yolo", "hi"]),
        2,
        &["yolo"],
    );
    assert_clean_failure(&home.run(&["run", "/nope"]), 2, &["/nope"]);
    assert_clean_failure(&home.run(&["run", "   "]), 2, &["empty"]);
    assert_clean_failure(
        &home.run(&["mock", "--scenario", "no-such-scenario"]),
        2,
        &["no-such-scenario", "basic"],
    );
    assert_clean_failure(
        &home.run(&["mock", "--addr", "0.0.0.0:0"]),
        2,
        &["loopback"],
    );
}

#[test]
fn bad_scenario_file_names_the_step() {
    let home = Home::new("");
    let path = home.path().join("bad.json");
    std::fs::write(&path, r#"{"steps":[{"say":"ok"},{"fault":"meteor"}]}"#).unwrap();
    let run = home.run(&["mock", "--scenario", path.to_str().unwrap()]);
    assert_clean_failure(&run, 2, &["step 2", "unknown fault"]);
}

#[test]
fn a_provider_that_answers_html_is_a_clear_failure() {
    for protocol in PROTOCOLS {
        let scenario = serde_json::json!({"steps": [{"fault": {"status": 200, "body": "<!DOCTYPE html><html><body>Welcome</body></html>", "headers": {"content-type": "text/html"}}}]});
        let (home, mock) = scripted(protocol, &scenario.to_string(), "");
        let run = home.run(&["run", "hi"]);
        assert_clean_failure(&run, 1, &["HTML page", "base_url"]);
        assert!(!run.stderr().contains("Welcome"), "the body is never shown");
        assert_eq!(mock.requests().len(), 1, "{protocol}: not retried");
    }
}

#[test]
fn a_stream_that_never_ends_hits_the_idle_timeout() {
    for protocol in PROTOCOLS {
        let home = Home::new("");
        let scenario =
            r#"{"steps": [{"fault": "stall", "seconds": 30}, {"fault": "stall", "seconds": 30}]}"#;
        let mock = MockProcess::with_steps(&home.path(), scenario);
        let provider = provider_for(protocol);
        let config = format!(
            "model = \"{provider}/m\"\n[providers.{provider}]\nbase_url = \"{}\"\nidle_timeout_secs = 1\n[providers.{provider}.retry]\nmax_retries = 1\nbase_delay_ms = 10\n",
            mock.base_url
        );
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        let run = home.run(&["run", "hi"]);
        // An ignored idle timeout would end each 30 s stall in a dropped connection instead.
        assert_clean_failure(&run, 1, &["idle timeout", "timeout"]);
        assert!(run.stderr().contains("idle timeout"), "{}", run.stderr());
        assert_eq!(
            mock.requests().len(),
            2,
            "{protocol}: timeouts are retried within the bound"
        );
    }
}

#[test]
fn an_unknown_finish_reason_is_a_clear_failure() {
    for protocol in ["chat", "anthropic"] {
        let scenario = r#"{"steps": [{"say": "text", "finish_reason": "cosmic_ray"}]}"#;
        let (home, _mock) = scripted(protocol, scenario, "");
        let run = home.run(&["run", "hi"]);
        assert_clean_failure(&run, 1, &["unrecognised finish reason `cosmic_ray`"]);
    }
}

#[test]
fn an_unreachable_provider_is_a_transport_failure() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = format!(
        "model = \"deepseek/m\"\n[providers.deepseek]\nbase_url = \"http://127.0.0.1:{port}\"\n[providers.deepseek.retry]\nmax_retries = 1\nbase_delay_ms = 10\n"
    );
    let home = Home::new(&config);
    let run = home.run(&["run", "hi"]);
    // In words for a person; the kind (`transport`) is in --json.
    assert_clean_failure(&run, 1, &["nothing is listening at"]);
    let json = home.run(&["run", "--json", "hi"]);
    assert_eq!(
        json.events_of("turn/failed")[0]["diagnostic"]["kind"],
        "transport"
    );
}

#[test]
fn a_server_that_ignores_stream_is_read_as_json() {
    for protocol in PROTOCOLS {
        let scenario =
            r#"{"ignore_stream": true, "steps": [{"say": "Plain JSON answer.", "reason": "r"}]}"#;
        let (home, _mock) = scripted(protocol, scenario, "");
        let run = home.run(&["run", "hi"]);
        assert_eq!(run.code(), 0, "{protocol}: {}", run.stderr());
        assert_eq!(run.stdout(), "Plain JSON answer.\n", "{protocol}");
    }
}

#[test]
fn a_bad_price_names_what_is_wrong() {
    let negative = "[providers.deepseek.price]\ninput_cache_hit = -1.0\ninput_cache_miss = 1.0\noutput = 1.0\ncurrency = \"USD\"\n";
    assert_clean_failure(
        &Home::new(negative).run(&["run", "hi"]),
        2,
        &["config.toml:1", "prices must be numbers of zero or more"],
    );
    let currency = "[providers.deepseek.price]\ninput_cache_hit = 1.0\ninput_cache_miss = 1.0\noutput = 1.0\ncurrency = \"$$\"\n";
    assert_clean_failure(
        &Home::new(currency).run(&["run", "hi"]),
        2,
        &["`currency` must be a currency code"],
    );
    let missing = "[providers.deepseek.price]\ninput_cache_hit = 1.0\ncurrency = \"USD\"\n";
    assert_clean_failure(
        &Home::new(missing).run(&["run", "hi"]),
        2,
        &["input_cache_miss"],
    );
}
