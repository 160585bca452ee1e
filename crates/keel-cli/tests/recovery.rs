//! Explicit protocol recovery end to end: the real binary, the SQLite file, `keel mock`.

use crate::common::*;
use serde_json::Value;
use std::io::BufRead;
use std::process::Stdio;
use std::time::{Duration, Instant};

const PROMPT: &str = "Continue the interrupted task from valid history. Preserve completed tool results. Do not repeat completed actions or actions with unknown outcomes; inspect unknown effects with permitted read-only tools first.";

fn setup(scenario: &str) -> (Home, MockProcess) {
    scripted("chat", scenario, "")
}

fn record(home: &Home, session: &str) -> Value {
    let run = home.run(&["session", "recovery", session, "--json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    serde_json::from_str(&run.stdout()).unwrap()
}

fn failing_run(home: &Home) -> (Run, String) {
    let run = home.run(&["run", "--json", "look around"]);
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    (run, session)
}

#[test]
fn opaque_400_on_replay_offers_a_recovery_that_runs_once() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let (run, session) = failing_run(&home);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.events_of("turn/failed")[0]["diagnostic"]["kind"],
        "upstream_reason_missing"
    );
    let offered = run.events_of("recovery/offered");
    assert_eq!(offered.len(), 1);
    assert!(
        run.stderr().contains(&format!(
            "recovery available: keel run --session {session} \"/recover-context\""
        )),
        "{}",
        run.stderr()
    );
    let pending = record(&home, &session);
    assert_eq!(pending["state"], "pending");
    assert_eq!(pending["version"], 1);
    assert_eq!(pending["id"], offered[0]["recovery_id"]);
    assert!(pending["prefix"].as_u64().unwrap() > 0);
    assert_eq!(mock.requests().len(), 2);

    let recovered = home.run(&["run", "--session", &session, "--json", "/recover-context"]);
    assert_eq!(recovered.code(), 0, "{}", recovered.stderr());
    assert_eq!(
        recovered.events_of("turn/started")[0]["input_kind"],
        "protocol_recovery"
    );
    assert!(
        recovered.events_of("tool/call").is_empty(),
        "the earlier tool is not re-run"
    );
    assert_eq!(recovered.events_of("recovery/consumed").len(), 1);
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "exactly one request for the recovery");
    let body = requests[2]["body"].as_str().unwrap();
    assert!(body.contains(PROMPT));
    assert!(
        !body.contains("\"tool_calls\""),
        "the failed replay is not sent verbatim"
    );
    assert!(
        body.contains("`list_dir`: completed"),
        "tool facts from the receipts"
    );
    assert_eq!(record(&home, &session)["state"], "consumed");
    assert_eq!(record(&home, &session)["projected"], true);

    let again = home.run(&["run", "--session", &session, "/recover-context"]);
    assert_eq!(again.code(), 2);
    assert!(
        again.stderr().contains("no recovery is pending") && again.stderr().contains("consumed"),
        "{}",
        again.stderr()
    );
    assert_eq!(mock.requests().len(), 3, "nothing was sent");
}

#[test]
fn guidance_is_appended_and_never_a_command() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let (_, session) = failing_run(&home);
    let id = record(&home, &session)["id"].as_str().unwrap().to_string();
    let run = home.run(&[
        "run",
        "--session",
        &session,
        &format!("/recover-context {id} /quit and check the logs"),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let body = mock.requests()[2]["body"].as_str().unwrap().to_string();
    assert!(
        body.contains(&format!(
            "{}\\n\\nUser guidance: /quit and check the logs",
            PROMPT.replace('"', "\\\"")
        )),
        "{body}"
    );
}

#[test]
fn new_input_expires_the_pending_record() {
    let (home, mock) = setup(
        r#"{"steps": [{"tool": "list_dir", "args": {"path": "."}}, {"fault": {"status": 400, "body": ""}}, {"say": "fine"}]}"#,
    );
    let (run, session) = failing_run(&home);
    assert_eq!(run.code(), 1);
    let next = home.run(&["run", "--session", &session, "--json", "something else"]);
    assert_eq!(next.code(), 0, "{}", next.stderr());
    assert_eq!(next.events_of("recovery/expired").len(), 1);
    assert!(next.events_of("recovery/offered").is_empty());
    assert_eq!(record(&home, &session)["state"], "expired");
    let refused = home.run(&["run", "--session", &session, "/recover-context"]);
    assert_eq!(refused.code(), 2);
    assert!(refused.stderr().contains("expired"), "{}", refused.stderr());
    assert_eq!(mock.requests().len(), 3);
}

#[test]
fn credentials_and_quota_failures_offer_nothing() {
    for status in [401, 402] {
        let scenario = format!(
            r#"{{"steps": [{{"tool": "list_dir", "args": {{"path": "."}}}}, {{"fault": {{"status": {status}, "body": ""}}}}]}}"#
        );
        let (home, _mock) = setup(&scenario);
        let (run, session) = failing_run(&home);
        // A refused key is the user's to fix (2); no quota is a failed turn (1).
        assert_eq!(run.code(), if status == 401 { 2 } else { 1 }, "{status}");
        assert!(run.events_of("recovery/offered").is_empty(), "{status}");
        assert_eq!(record(&home, &session), Value::Null, "{status}");
    }
}

#[test]
fn an_opaque_400_without_a_tool_round_offers_nothing() {
    let (home, _mock) = setup(r#"{"steps": [{"fault": {"status": 400, "body": ""}}]}"#);
    let (run, session) = failing_run(&home);
    assert_eq!(run.code(), 1);
    assert_eq!(
        record(&home, &session),
        Value::Null,
        "a projection would not change this request"
    );
}

#[test]
fn after_a_restart_the_record_is_pending_and_nothing_is_sent_until_asked() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let (_, session) = failing_run(&home);
    // Other processes come and go; none sends anything by itself.
    assert_eq!(home.run(&["session", "show", &session]).code(), 0);
    assert_eq!(home.run(&["sessions"]).code(), 0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(record(&home, &session)["state"], "pending");
    let run = home.run(&["run", "--session", &session, "/recover-context"]);
    assert_eq!(run.code(), 0);
    assert_eq!(mock.requests().len(), 3);
}

#[test]
fn refusals_say_why_and_send_nothing() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let (_, session) = failing_run(&home);
    let cases = [
        (
            vec![
                "run",
                "--session",
                &session,
                "/recover-context r-0000000000000000",
            ],
            "no recovery record `r-0000000000000000`",
        ),
        (vec!["run", "/recover-context"], "need the session"),
        (
            vec![
                "run",
                "--session",
                &session,
                "--model",
                "deepseek/other-model",
                "/recover-context",
            ],
            "another provider, endpoint or model",
        ),
    ];
    for (args, reason) in cases {
        let run = home.run(&args);
        assert_eq!(run.code(), 2, "{args:?}");
        assert!(run.stderr().contains(reason), "{args:?}: {}", run.stderr());
    }
    assert_eq!(mock.requests().len(), 2);
    let other = home.run(&["run", "--json", "a different session"]);
    let other_session = other.events()[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let id = record(&home, &session)["id"].as_str().unwrap().to_string();
    let foreign = home.run(&[
        "run",
        "--session",
        &other_session,
        &format!("/recover-context {id}"),
    ]);
    assert_eq!(foreign.code(), 2);
    assert!(
        foreign.stderr().contains(&format!(
            "no recovery record `{id}` in session {other_session}"
        )),
        "{}",
        foreign.stderr()
    );
}

#[test]
fn unknown_versions_and_fields_survive_and_unknown_versions_are_never_recoverable() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let (_, session) = failing_run(&home);
    let db = rusqlite::Connection::open(home.path().join("state/keel.db")).unwrap();
    let (id, raw): (String, String) = db
        .query_row("SELECT id, record FROM recovery_records", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let mut value: Value = serde_json::from_str(&raw).unwrap();
    value["from_the_future"] = serde_json::json!({"keep": ["me", 1]});
    db.execute(
        "UPDATE recovery_records SET record = ?1",
        [value.to_string()],
    )
    .unwrap();
    let future = r#"{"version":2,"id":"r-ffffffffffffffff","state":"pending","whatever":true}"#;
    db.execute(
        "INSERT INTO recovery_records (session_id, id, record, created_at, updated_at) VALUES (?1, 'r-ffffffffffffffff', ?2, 0, 0)",
        [&session, future],
    )
    .unwrap();
    drop(db);
    let refused = home.run(&[
        "run",
        "--session",
        &session,
        "/recover-context r-ffffffffffffffff",
    ]);
    assert_eq!(refused.code(), 2);
    assert!(
        refused.stderr().contains("version 2 is not known"),
        "{}",
        refused.stderr()
    );
    let ok = home.run(&[
        "run",
        "--session",
        &session,
        &format!("/recover-context {id}"),
    ]);
    assert_eq!(ok.code(), 0, "{}", ok.stderr());
    let db = rusqlite::Connection::open(home.path().join("state/keel.db")).unwrap();
    let saved: String = db
        .query_row(
            "SELECT record FROM recovery_records WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    let saved: Value = serde_json::from_str(&saved).unwrap();
    assert_eq!(saved["state"], "consumed");
    assert_eq!(
        saved["from_the_future"],
        serde_json::json!({"keep": ["me", 1]}),
        "unknown fields round-trip"
    );
    let kept: String = db
        .query_row(
            "SELECT record FROM recovery_records WHERE id = 'r-ffffffffffffffff'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kept, future, "an unknown version is kept byte for byte");
}

#[test]
fn a_failed_consume_write_sends_nothing() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let (_, session) = failing_run(&home);
    let db = rusqlite::Connection::open(home.path().join("state/keel.db")).unwrap();
    db.execute_batch(
        "CREATE TRIGGER fail_consume BEFORE UPDATE ON recovery_records WHEN NEW.record LIKE '%\"consumed\"%' \
         BEGIN SELECT RAISE(ABORT, 'injected store failure'); END;",
    )
    .unwrap();
    drop(db);
    let run = home.run(&["run", "--session", &session, "/recover-context"]);
    assert_ne!(run.code(), 0);
    assert!(
        run.stderr().contains("nothing was sent"),
        "{}",
        run.stderr()
    );
    assert_eq!(
        mock.requests().len(),
        2,
        "no request without a durable consume"
    );
    assert_eq!(record(&home, &session)["state"], "pending");
}

#[test]
fn a_tool_killed_mid_run_is_unknown_in_the_recovery_request_and_not_rerun() {
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "echo ran >> effects.log; sleep 30"}},
        {"fault": {"status": 400, "body": ""}},
        {"say": "Checked: the command's outcome is unknown, so I did not repeat it."}
    ]});
    let (home, mock) = setup(&scenario.to_string());
    let (session, _tool) = kill_during_tool(&home);

    let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
    assert_eq!(resumed.code(), 1, "{}", resumed.stderr());
    assert_eq!(resumed.events_of("recovery/offered").len(), 1);
    let recovered = home.run(&[
        "run",
        "--session",
        &session,
        "--yes",
        "--json",
        "/recover-context",
    ]);
    assert_eq!(recovered.code(), 0, "{}", recovered.stderr());
    assert!(recovered.events_of("tool/call").is_empty());
    let body = mock.requests().last().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(body.contains("`bash`: unknown"), "{body}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("effects.log")).unwrap(),
        "ran\n",
        "not re-run"
    );
}

#[test]
fn open_plan_items_mark_the_turn_not_ready_and_continue_checks_runs_once() {
    let plan = serde_json::json!({"todos": [{"content": "edit", "status": "completed"}, {"content": "run the tests", "status": "pending"}]});
    let scenario = serde_json::json!({"steps": [
        {"tool": "todo_write", "args": plan},
        {"say": "Edited the file."},
        {"say": "Ran the tests: they pass."}
    ]});
    let (home, mock) = setup(&scenario.to_string());
    let run = home.run(&["run", "--json", "edit and test"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let completed = &run.events_of("turn/completed")[0];
    assert_eq!(completed["ready"], false);
    let offered = &run.events_of("recovery/offered")[0];
    assert_eq!(offered["action"], "final_readiness_recovery");
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    let record = record(&home, &session);
    assert_eq!(
        (record["state"].as_str(), record["action"].as_str()),
        (Some("pending"), Some("final_readiness_recovery"))
    );
    let refused = home.run(&["run", "--session", &session, "/recover-context"]);
    assert_eq!(
        refused.code(),
        2,
        "a readiness offer is not a protocol recovery"
    );
    let checks = home.run(&["run", "--session", &session, "--json", "/continue-checks"]);
    // The plan is still open: not ready again.
    assert_eq!(checks.code(), 1, "{}", checks.stderr());
    assert_eq!(checks.events_of("turn/completed")[0]["ready"], false);
    assert_eq!(
        checks.events_of("turn/started")[0]["input_kind"],
        "final_readiness_recovery"
    );
    let body = mock.requests().last().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        body.contains("Continue the checks") && body.contains("the plan has 1 open item"),
        "{body}"
    );
    assert!(
        checks.events_of("recovery/offered").is_empty(),
        "nothing new happened: the offer is not renewed"
    );
    let again = home.run(&["run", "--session", &session, "/continue-checks"]);
    assert_eq!(again.code(), 2);
    assert!(again.stderr().contains("consumed"), "{}", again.stderr());
    assert_eq!(mock.requests().len(), 3);
}

#[test]
fn an_answer_after_a_failed_tool_is_not_ready() {
    let (home, _mock) = setup(
        r#"{"steps": [{"tool": "bash", "args": {"command": "exit 4"}}, {"say": "All good."},
                      {"tool": "bash", "args": {"command": "exit 5"}}, {"say": "Fine again."}]}"#,
    );
    let run = home.run(&["run", "--yes", "--json", "check"]);
    assert_eq!(run.code(), 1);
    assert_eq!(run.events_of("turn/completed")[0]["ready"], false);
    // The next step is the only thing on stderr, in JSON mode too.
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    assert_eq!(
        run.stderr(),
        format!("continue with: keel run --session {session} \"/continue-checks\"\n")
    );
    // A person sees the answer, and is told it is not ready and why.
    let human = home.run(&["run", "--yes", "-c", "check again"]);
    assert_eq!(human.code(), 1, "{}", human.stderr());
    assert!(human.stdout().contains("Fine again."), "{}", human.stdout());
    assert!(
        human.stderr().contains("not ready: ") && human.stderr().contains("fail"),
        "{}",
        human.stderr()
    );
}

fn search_setup(protocol: &str, sources: &[&str]) -> (Home, MockProcess) {
    let scenario = serde_json::json!({"steps": [
        {"search": "rust sse parsing", "sources": sources, "say": "Here is what I found."},
        {"say": "Second answer."}
    ]});
    scripted(protocol, &scenario.to_string(), "web_search = true")
}

#[test]
fn native_search_with_sources_is_available_and_replayed_unmodified() {
    for protocol in ["anthropic", "responses"] {
        let (home, mock) = search_setup(
            protocol,
            &[
                "https://docs.rs/eventsource-stream",
                "https://user:pw@bad.example",
            ],
        );
        let run = home.run(&["run", "--json", "search it"]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        let result = &run.events_of("search/result")[0];
        assert_eq!(result["sources_status"], "available", "{protocol}");
        assert_eq!(result["sources"], 2);
        let first = mock.requests()[0]["body"].as_str().unwrap().to_string();
        assert!(
            first.contains("web_search"),
            "{protocol}: the native tool is offered: {first}"
        );
        let human = home.run(&["run", "-c", "and then?"]);
        assert_eq!(human.code(), 0, "{}", human.stderr());
        let second = mock.requests()[1]["body"].as_str().unwrap().to_string();
        let marker = if protocol == "anthropic" {
            "\"web_search_tool_result\""
        } else {
            "\"web_search_call\""
        };
        assert!(
            second.contains(marker),
            "{protocol}: the raw search is replayed: {second}"
        );
        assert!(
            !second.contains("sources_status"),
            "{protocol}: display fields never reach the provider"
        );
    }
}

#[test]
fn native_search_without_sources_is_not_provided_and_the_summary_is_kept() {
    for protocol in ["anthropic", "responses"] {
        let (home, _mock) = search_setup(protocol, &[]);
        let run = home.run(&["run", "search it"]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        assert!(
            run.stderr().contains(
                "⌕ web search `rust sse parsing` — the provider gave no structured sources"
            ),
            "{protocol}: {}",
            run.stderr()
        );
        assert_eq!(
            run.stdout(),
            "Here is what I found.\n",
            "the summary is kept"
        );
    }
}

#[test]
fn native_search_is_refused_for_chat_in_config() {
    let home = Home::new("[providers.deepseek]\nweb_search = true\n");
    let run = home.run(&["run", "hi"]);
    assert_eq!(run.code(), 2);
    assert!(
        run.stderr().contains("providers.deepseek.web_search")
            && run.stderr().contains("anthropic"),
        "{}",
        run.stderr()
    );
}

#[test]
fn sigkill_after_the_record_is_written_keeps_it_pending_and_sends_nothing() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    // The interactive session stays alive after the failed turn; kill it there.
    let mut child = home
        .keel(&[])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    use std::io::Write;
    writeln!(stdin, "look around").unwrap();
    let stderr = child.stderr.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = sender.send(line);
        }
    });
    let started = Instant::now();
    let mut offered = false;
    while started.elapsed() < Duration::from_secs(15) && !offered {
        if let Ok(line) = receiver.recv_timeout(Duration::from_millis(100)) {
            offered = line.contains("/recover-context replays the task");
        }
    }
    assert!(offered, "the recovery was offered");
    child.kill().unwrap(); // SIGKILL with the record written
    child.wait().unwrap();
    drop(stdin);
    let session: Value = serde_json::from_str(&home.run(&["sessions", "--json"]).stdout()).unwrap();
    let session = session[0]["id"].as_str().unwrap().to_string();
    assert_eq!(record(&home, &session)["state"], "pending");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        mock.requests().len(),
        2,
        "a restart sends nothing by itself"
    );
    let run = home.run(&["run", "--session", &session, "/recover-context"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(mock.requests().len(), 3);
}

#[test]
fn the_repaired_prefix_stays_projected_after_a_restart_and_new_items_replay_normally() {
    let scenario = r#"{"steps": [
        {"tool": "list_dir", "args": {"path": "."}},
        {"fault": {"status": 400, "body": ""}},
        {"tool": "read_file", "args": {"path": "config.toml"}},
        {"say": "done"},
        {"say": "later answer"}
    ]}"#;
    let (home, mock) = setup(scenario);
    let (_, session) = failing_run(&home);
    let recovered = home.run(&["run", "--session", &session, "--json", "/recover-context"]);
    assert_eq!(
        recovered.events_of("turn/completed").len(),
        1,
        "{}",
        recovered.stderr()
    );
    // A new process, a new turn: the old prefix keeps the fault projection, the tool round
    // that came after the repair is replayed normally.
    let later = home.run(&["run", "--session", &session, "one more thing"]);
    assert_eq!(later.code(), 0, "{}", later.stderr());
    let body = mock.requests().last().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        body.contains("`list_dir`: completed"),
        "the repaired prefix stays projected: {body}"
    );
    assert!(
        !body.contains("\"name\":\"list_dir\",\"arguments\""),
        "the rejected replay is not sent again"
    );
    assert!(
        body.contains("\"name\":\"read_file\",\"arguments\""),
        "items after the repair keep their normal replay"
    );
}

#[test]
fn the_same_failing_prefix_never_renews_the_budget_but_a_new_tool_round_can() {
    let scenario = r#"{"steps": [
        {"tool": "list_dir", "args": {"path": "."}},
        {"fault": {"status": 400, "body": ""}},
        {"fault": {"status": 400, "body": ""}},
        {"tool": "read_file", "args": {"path": "config.toml"}},
        {"fault": {"status": 400, "body": ""}}
    ]}"#;
    let (home, mock) = setup(scenario);
    let (_, session) = failing_run(&home);
    let recovery = home.run(&["run", "--session", &session, "--json", "/recover-context"]);
    assert_eq!(
        recovery.code(),
        1,
        "the recovery request itself was rejected"
    );
    assert!(
        recovery.events_of("recovery/offered").is_empty(),
        "no new budget for the same failing prefix"
    );
    assert!(!recovery.stderr().contains("recovery available"));
    let next = home.run(&["run", "--session", &session, "--json", "try once more"]);
    assert_eq!(next.code(), 1);
    assert_eq!(
        next.events_of("recovery/offered").len(),
        1,
        "a new tool round forms a new incident"
    );
    assert_eq!(mock.requests().len(), 5);
}

#[test]
fn a_receipt_change_invalidates_the_offer_without_refund() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let (_, session) = failing_run(&home);
    let db = rusqlite::Connection::open(home.path().join("state/keel.db")).unwrap();
    db.execute("UPDATE receipts SET state = 'unknown'", [])
        .unwrap();
    drop(db);
    let run = home.run(&["run", "--session", &session, "/recover-context"]);
    assert_eq!(run.code(), 2);
    assert!(run.stderr().contains("tools ran since"), "{}", run.stderr());
    assert_eq!(record(&home, &session)["state"], "expired");
    assert_eq!(mock.requests().len(), 2, "nothing was sent");
}

#[test]
fn a_deliberate_denial_ends_the_turn_ready_and_an_unattended_one_says_how_to_rerun() {
    let script = r#"{"steps": [{"tool": "write_file", "args": {"path": "a.txt", "content": "x"}},
                                {"say": "I did not write it."},
                                {"tool": "write_file", "args": {"path": "a.txt", "content": "x"}},
                                {"say": "Nobody approved it."}]}"#;
    // A deny rule refuses the call: the person's decision, not a failure.
    let (home, _mock) = setup(script);
    home.append_config("[permissions]\ndeny = [\"write_file\"]\n");
    let run = home.run(&["run", "--json", "write a"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let completed = &run.events_of("turn/completed")[0];
    assert_eq!(completed["ready"], true, "{completed}");
    assert!(run.events_of("recovery/offered").is_empty());
    // Headless, nobody to ask: not ready, and the way to rerun is said.
    let (home, _mock) = setup(script);
    let run = home.run(&["run", "--json", "write a"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let completed = &run.events_of("turn/completed")[0];
    assert_eq!(completed["ready"], false, "{completed}");
    assert!(
        completed["not_ready_reason"]
            .as_str()
            .unwrap()
            .contains("rerun with `--yes` or an allow rule"),
        "{completed}"
    );
}
