//! The agent end to end: the real binary, real tools, a real SQLite file, `keel mock`.

use crate::common::*;
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;

fn home_for(mock: &MockProcess) -> Home {
    Home::new(&config_for("chat", &mock.base_url, ""))
}

#[test]
fn twenty_round_tool_loop_runs_each_effect_once_with_prefix_stable_requests() {
    let mock = MockProcess::start("tool-loop-20");
    let home = home_for(&mock);
    let run = home.run(&["run", "--yes", "--json", "run the loop"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let log = std::fs::read_to_string(home.path().join("loop.log")).unwrap();
    let expected: Vec<String> = (1..=20).map(|n| format!("round-{n}")).collect();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        expected,
        "each effect exactly once, in order"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 21);
    assert_prefix_stable(&requests);
    assert_eq!(run.events_of("tool/call").len(), 20);
    let completed = &run.events_of("turn/completed")[0];
    assert!(
        completed["cache_hit_ratio"].as_f64().unwrap() > 0.8,
        "{completed}"
    );
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    let shown = session_json(&home, &session, &[]);
    let receipts = shown["receipts"].as_array().unwrap();
    assert_eq!(receipts.len(), 20);
    assert!(
        receipts
            .iter()
            .all(|r| r["state"] == "completed" && r["tool"] == "bash")
    );
    // The context block, the prompt, 20 rounds of a call and its result, the answer.
    assert_eq!(shown["items"].as_array().unwrap().len(), 1 + 1 + 20 * 2 + 1);
}

#[test]
fn a_121_round_turn_completes_with_each_effect_once() {
    // The seed's regression: honest long work in one turn is not cut off by `max_rounds`.
    let mock = MockProcess::start("tool-loop-121");
    let home = home_for(&mock);
    let run = home.run(&["run", "--yes", "--json", "run the long loop"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let log = std::fs::read_to_string(home.path().join("loop.log")).unwrap();
    let expected: Vec<String> = (1..=121).map(|n| format!("round-{n}")).collect();
    assert_eq!(log.lines().collect::<Vec<_>>(), expected);
    assert_eq!(mock.requests().len(), 122);
    assert_eq!(run.events_of("turn/completed").len(), 1);
}

#[test]
fn a_turn_that_repeats_itself_is_stopped_by_the_no_progress_guard() {
    let same = serde_json::json!({"tool": "bash", "args": {"command": "echo same >> tries.log; echo unchanged"}});
    let steps: Vec<Value> = std::iter::repeat_n(same, 12)
        .chain([serde_json::json!({"say": "never"})])
        .collect();
    let (home, mock) = scripted(
        "chat",
        &serde_json::json!({ "steps": steps }).to_string(),
        "",
    );
    let run = home.run(&["run", "--yes", "--json", "loop"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let failed = &run.events_of("turn/failed")[0]["diagnostic"];
    assert_eq!(failed["kind"], "limit");
    let tries = std::fs::read_to_string(home.path().join("tries.log")).unwrap();
    assert_eq!(
        tries.lines().count(),
        5,
        "stopped after five identical rounds"
    );
    assert_eq!(mock.requests().len(), 5);
    let human = home.run(&[
        "session",
        "show",
        run.events()[0]["session_id"].as_str().unwrap(),
    ]);
    assert_eq!(human.code(), 0);
}

#[test]
fn invalid_arguments_reach_the_model_and_the_corrected_call_runs_once() {
    let mock = MockProcess::start("invalid-args-then-fix");
    let home = home_for(&mock);
    let run = home.run(&["run", "--yes", "--json", "write the file"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        std::fs::read_to_string(home.path().join("fixed.txt")).unwrap(),
        "fixed\n"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "validation errors use no network retry");
    let second = requests[1]["body"].as_str().unwrap();
    assert!(
        second.contains("invalid arguments for `write_file`") || second.contains("not valid JSON"),
        "{second}"
    );
    let results = run.events_of("tool/result");
    let states: Vec<&str> = results
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["failed", "completed"]);
}

#[test]
fn tool_calls_with_finish_reason_stop_still_run() {
    let mock = MockProcess::start("stop-with-tool-calls");
    let home = home_for(&mock);
    std::fs::write(home.path().join("marker.txt"), "x").unwrap();
    let run = home.run(&["run", "--json", "list"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.events_of("llm/response")[0]["finish_reason"], "stop");
    assert_eq!(run.events_of("tool/result")[0]["state"], "completed");
    let second = mock.requests()[1]["body"].as_str().unwrap().to_string();
    assert!(
        second.contains("marker.txt"),
        "the listing reached the model"
    );
}

#[test]
fn a_500_in_the_loop_is_retried_and_no_tool_runs_twice() {
    let scenario = r#"{"steps": [
        {"tool": "bash", "args": {"command": "echo one >> effects.log"}},
        {"fault": {"status": 500, "body": "{\"error\":{\"message\":\"boom\"}}"}},
        {"tool": "bash", "args": {"command": "echo two >> effects.log"}},
        {"fault": "drop_after_content"},
        {"say": "done"}
    ]}"#;
    let (home, mock) = scripted("chat", scenario, "");
    let run = home.run(&["run", "--yes", "go"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        std::fs::read_to_string(home.path().join("effects.log")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(mock.requests().len(), 5);
    assert_eq!(run.stdout(), "done\n");
}

#[test]
fn headless_ask_mode_fails_closed() {
    let scenario = r#"{"steps": [{"tool": "write_file", "args": {"path": "new.txt", "content": "x"}}, {"say": "ok"}]}"#;
    let (home, mock) = scripted("chat", scenario, "");
    let run = home.run(&["run", "--json", "write"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(!home.path().join("new.txt").exists());
    assert_eq!(run.events_of("tool/result")[0]["state"], "denied");
    let second = mock.requests()[1]["body"].as_str().unwrap().to_string();
    assert!(
        second.contains("needs approval"),
        "the model is told: {second}"
    );
}

#[test]
fn writes_outside_the_workspace_are_refused_even_with_yes() {
    let home = Home::new("");
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escape.txt");
    let scenario = serde_json::json!({"steps": [
        {"tool": "write_file", "args": {"path": "../escape.txt", "content": "x"}},
        {"tool": "write_file", "args": {"path": target.display().to_string(), "content": "x"}},
        {"say": "ok"}
    ]});
    let mock = MockProcess::with_steps(outside.path(), &scenario.to_string());
    std::fs::write(
        home.path().join("config.toml"),
        config_for("chat", &mock.base_url, ""),
    )
    .unwrap();
    let run = home.run(&["run", "--yes", "--json", "escape"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!target.exists());
    assert!(!home.path().parent().unwrap().join("escape.txt").exists());
    let states: Vec<String> = run
        .events_of("tool/result")
        .iter()
        .map(|r| r["state"].as_str().unwrap().to_string())
        .collect();
    // keel's own policy refused them before they ran: denials, and the turn is ready.
    assert_eq!(states, ["denied", "denied"]);
    let completed = run.events_of("turn/completed");
    assert_eq!(completed[0]["ready"], true, "{}", run.stdout());
}

#[test]
fn sessions_are_listed_and_continued() {
    let scenario = r#"{"steps": [{"say": "first answer"}, {"say": "second answer"}]}"#;
    let (home, mock) = scripted("chat", scenario, "");
    assert_eq!(home.run(&["run", "first question"]).code(), 0);
    let run = home.run(&["run", "-c", "--json", "second question"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.events()[0]["resumed"], true);
    let listed: Value = serde_json::from_str(&home.run(&["sessions", "--json"]).stdout()).unwrap();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 1);
    for key in ["id", "workspace", "model", "updated_at"] {
        assert!(!listed[0][key].is_null(), "{key}");
    }
    let requests = mock.requests();
    assert_prefix_stable(&requests);
    assert!(
        requests[1]["body"]
            .as_str()
            .unwrap()
            .contains("first answer")
    );
    let missing = home.run(&["run", "--session", "nope", "hi"]);
    assert_eq!(missing.code(), 2);
    assert!(missing.stderr().contains("no session `nope`"));
}

#[test]
fn killed_mid_tool_the_receipt_becomes_unknown_and_nothing_reruns() {
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "echo started >> effects.log; sleep 30"}},
        {"say": "I will not repeat the command; its outcome is unknown."}
    ]});
    let (home, mock) = scripted("chat", &scenario.to_string(), "");
    let (session, _tool) = kill_during_tool(&home);

    // Its holder is gone: `session show` reports what a reload will, without writing.
    let shown = home.run(&["session", "show", &session]);
    let receipt_line = shown
        .stdout()
        .lines()
        .find(|line| line.contains("call_") && line.contains(" bash "))
        .unwrap()
        .to_string();
    assert!(receipt_line.contains("bash unknown"), "{receipt_line}");
    let db = rusqlite::Connection::open(home.path().join("state/keel.db")).unwrap();
    let stored: String = db
        .query_row("SELECT state FROM receipts", [], |row| row.get(0))
        .unwrap();
    assert_eq!(stored, "started", "showing settled nothing in the store");
    drop(db);
    let resumed = home.run(&[
        "run",
        "--session",
        &session,
        "--yes",
        "--json",
        "what happened?",
    ]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    assert!(resumed.events_of("tool/call").is_empty(), "nothing re-runs");
    assert_eq!(
        std::fs::read_to_string(home.path().join("effects.log")).unwrap(),
        "started\n"
    );
    let last_request = mock.requests().last().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        last_request.contains("outcome unknown"),
        "the model is told: {last_request}"
    );
    let json = session_json(&home, &session, &[]);
    assert_eq!(json["receipts"][0]["state"], "unknown");
    let human = home.run(&["session", "show", &session]).stdout();
    assert!(
        human.contains("unknown — keel stopped while it ran; it was not run again"),
        "{human}"
    );
}

#[test]
fn a_second_process_on_the_same_session_gets_a_clear_error() {
    let scenario = r#"{"steps": [{"say": "one"}, {"fault": "stall", "seconds": 20}]}"#;
    let (home, mock) = scripted("chat", scenario, "");
    let first = home.run(&["run", "--json", "hi"]);
    let session = first.events()[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut holder = home
        .keel(&["run", "--session", &session, "hold"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "the holder's request reached the mock",
        Duration::from_secs(10),
        || mock.requests().len() >= 2,
    );
    let second = home.run(&["run", "--session", &session, "me too"]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(second.code(), 2, "{}", second.stderr());
    assert!(
        second.stderr().contains("in use by keel run (pid"),
        "{}",
        second.stderr()
    );
}

#[test]
fn tool_loops_are_prefix_stable_on_anthropic_and_responses_too() {
    for protocol in ["anthropic", "responses"] {
        let mock = MockProcess::start("tool-loop-5");
        let home = Home::new(&config_for(protocol, &mock.base_url, ""));
        let run = home.run(&["run", "--yes", "--json", "run the loop"]);
        assert_eq!(run.code(), 0, "{protocol}: {}", run.stderr());
        let log = std::fs::read_to_string(home.path().join("loop.log")).unwrap();
        assert_eq!(log.lines().count(), 5, "{protocol}");
        let requests = mock.requests();
        assert_eq!(requests.len(), 6, "{protocol}");
        assert_prefix_stable(&requests);
        let last = requests[5]["body"].as_str().unwrap();
        let replayed = if protocol == "anthropic" {
            "\"signature\":\"mock-signature-1\""
        } else {
            "\"encrypted_content\":\"mock-encrypted-1\""
        };
        assert!(
            last.contains(replayed),
            "{protocol}: reasoning replay data goes back unmodified"
        );
    }
}
