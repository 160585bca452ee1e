//! The `task` tool through the real binary, killed (`KEEL_KILL_AT` aborts keel as SIGKILL
//! would) while a subagent works and after its answer committed: a restart never starts the
//! child again, settles what it left, and never loses an answer that is on disk.

use crate::common::*;
use serde_json::{Value, json};

/// The parent delegates a command to a `general` child, then answers; the child runs the
/// command (one mark in `effects.log`), then answers.
fn delegating() -> String {
    json!({
        "steps": [
            {"tool": "task", "args": {"agent": "general", "description": "mark it", "prompt": "MARK-C run the command"}},
            {"say": "Parent noted."},
            {"say": "Parent again."}
        ],
        "conversations": [{"when": {"contains": "MARK-C"}, "steps": [
            {"tool": "bash", "args": {"command": "echo 1 >> effects.log"}},
            {"say": "Child done: marked."}
        ]}]
    })
    .to_string()
}

fn killed(home: &Home, point: &str) -> String {
    let run = home
        .keel(&["run", "--yes", "--json", "delegate it"])
        .env("KEEL_KILL_AT", point)
        .output()
        .unwrap();
    assert!(
        run.status.code().is_none(),
        "{point}: keel must have been killed, got {:?}",
        run.status
    );
    let first: Value =
        serde_json::from_str(String::from_utf8_lossy(&run.stdout).lines().next().unwrap()).unwrap();
    first["session_id"].as_str().unwrap().to_string()
}

fn child_requests(mock: &MockProcess) -> usize {
    mock.requests()
        .iter()
        .filter(|request| request["conversation"].is_number())
        .count()
}

/// The `task` call's result in the parent's history.
fn task_result(shown: &Value) -> String {
    shown["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["role"] == "tool_result" && item["name"] == "task")
        .map(|item| item["content"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

#[test]
fn a_kill_during_a_childs_command_settles_the_child_and_never_starts_it_again() {
    let (home, mock) = scripted("chat", &delegating(), "");
    // The child's command ran; keel dies before its result is committed.
    let session = killed(&home, "before_result_commit");
    assert_eq!(
        std::fs::read_to_string(home.path().join("effects.log")).unwrap(),
        "1\n"
    );
    assert_eq!(child_requests(&mock), 1);
    let shown = session_json(&home, &session, &[]);
    let child = shown["receipts"][0]["child_session"]
        .as_str()
        .unwrap()
        .to_string();

    let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    let shown = session_json(&home, &session, &[]);
    let result = task_result(&shown);
    assert!(
        result.contains(&format!("in its session {child}")),
        "{result}"
    );
    assert!(result.contains("unknown: bash ×1"), "{result}");
    assert!(result.contains("It was not started again"), "{result}");
    // The child's command never ran twice, and the mock heard nothing more from the child.
    assert_eq!(
        std::fs::read_to_string(home.path().join("effects.log")).unwrap(),
        "1\n"
    );
    assert_eq!(child_requests(&mock), 1);
    let child_shown = session_json(&home, &child, &[]);
    assert_eq!(child_shown["receipts"][0]["state"], "unknown");
}

#[test]
fn a_kill_after_the_childs_answer_committed_leaves_the_parent_holding_it() {
    let (home, mock) = scripted("chat", &delegating(), "");
    let session = killed(&home, "after_task_commit");
    let shown = session_json(&home, &session, &[]);
    let result = task_result(&shown);
    assert!(result.starts_with("Child done: marked."), "{result}");
    assert!(
        result.contains("subagent `general` (mark it) completed after 2 rounds"),
        "{result}"
    );
    assert_eq!(shown["receipts"][0]["state"], "completed");
    // The child's own history holds its answer, committed with the parent's result.
    let child = shown["receipts"][0]["child_session"]
        .as_str()
        .unwrap()
        .to_string();
    let child_shown = session_json(&home, &child, &[]);
    let child_items = child_shown["items"].as_array().unwrap();
    assert_eq!(child_items.last().unwrap()["role"], "assistant");
    assert!(
        child_items
            .last()
            .unwrap()
            .to_string()
            .contains("Child done: marked.")
    );
    let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    assert_eq!(
        child_requests(&mock),
        2,
        "the child asked twice, before the kill only"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("effects.log")).unwrap(),
        "1\n"
    );
    // The parent's next request carries the answer, once.
    let last = mock.requests().last().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(last.matches("Child done: marked.").count(), 1, "{last}");
}

#[test]
fn in_the_terminal_each_childs_question_comes_alone_labelled_and_its_card_shows_its_rounds() {
    use crate::common::tmux::{Tmux, available};
    if !available() {
        return;
    }
    let (home, _mock) = scripted("chat", &two_children_asking(1500).to_string(), "");
    let tmux = Tmux::start_with_env(&home, &home.path(), &[], (110, 32), &[]);
    tmux.wait_for("mock-model · ask");
    tmux.type_text("make both files");
    tmux.press(&["Enter"]);
    // One question on screen, saying which agent asks and for what.
    let first = tmux.wait_until_screen("a child's question", |s| s.contains("agent, for “make"));
    assert_eq!(first.matches("agent, for “make").count(), 1, "{first}");
    let asked_a = first.contains("[general agent, for “make a”] bash touch a.txt");
    let asked_b = first.contains("[general agent, for “make b”] bash touch b.txt");
    assert!(asked_a ^ asked_b, "{first}");
    tmux.answer("y");
    // Then the other one, alone; the first child's card meanwhile shows how far it got.
    let other = if asked_a {
        "make b”] bash touch b.txt"
    } else {
        "make a”] bash touch a.txt"
    };
    let second = tmux.wait_until_screen("the other child's question", |s| s.contains(other));
    assert_eq!(second.matches("agent, for “make").count(), 1, "{second}");
    tmux.answer("y");
    let running = tmux.wait_until_screen("a child's card with its rounds", |s| {
        s.contains("1 round · bash touch")
    });
    assert!(running.contains("● task general: make"), "{running}");
    let done = tmux.wait_for_turn_end("Both files made.");
    assert!(
        done.contains("general (make a): completed in 2 rounds"),
        "{done}"
    );
    assert!(
        done.contains("general (make b): completed in 2 rounds"),
        "{done}"
    );
    assert!(home.path().join("a.txt").exists() && home.path().join("b.txt").exists());
}

/// The calls waiting for a decision in `session` (its subagents' included), polled until
/// `count` wait (or 20 s pass).
fn waiting_calls(
    server: &crate::common::serve::Server,
    session: &str,
    count: usize,
    not: Option<&str>,
) -> Vec<Value> {
    let started = std::time::Instant::now();
    loop {
        let (_, status) = server.api("GET", &format!("/api/sessions/{session}"), json!(null));
        let waiting: Vec<Value> = status["waiting"].as_array().cloned().unwrap_or_default();
        let fresh = waiting
            .iter()
            .all(|call| Some(call["session_id"].as_str().unwrap_or("")) != not);
        if waiting.len() == count && fresh {
            return waiting;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "never {count} waiting: {status}"
        );
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
}

#[test]
fn over_serve_each_childs_question_waits_alone_under_its_own_session_and_is_answered_there() {
    use crate::common::serve::*;
    let (home, _mock) = scripted("chat", &two_children_asking(1500).to_string(), "");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    // The page's stream, open before the turn: the children's events come on it, live.
    let reader = {
        let server_address = server.address.clone();
        let auth = server.auth();
        let session = session.clone();
        std::thread::spawn(move || sse_until_turn_end(&server_address, &auth, &session))
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        server
            .submit(&session, json!({"input": "make both files"}))
            .0,
        202
    );
    let mut answered = Vec::new();
    for _ in 0..2 {
        // One question at a time, under the asking child's session, labelled.
        let waiting = waiting_calls(&server, &session, 1, answered.last().map(String::as_str));
        let call = &waiting[0];
        let child = call["session_id"].as_str().unwrap().to_string();
        assert_ne!(child, session);
        assert_eq!(call["agent"], "general");
        assert!(
            call["description"].as_str().unwrap().starts_with("make "),
            "{call}"
        );
        // Call ids repeat across sessions: the parent's route does not take a child's call.
        let call_id = call["call_id"].as_str().unwrap();
        let (code, _) = server.api(
            "POST",
            &format!("/api/sessions/{session}/approvals/{call_id}"),
            json!({"decision": "allow"}),
        );
        assert_eq!(code, 409);
        let (code, body) = server.api(
            "POST",
            &format!("/api/sessions/{child}/approvals/{call_id}"),
            json!({"decision": "allow"}),
        );
        assert_eq!(code, 200, "{body}");
        answered.push(child);
    }
    wait_until_idle(&server, &session);
    assert!(home.path().join("a.txt").exists() && home.path().join("b.txt").exists());
    assert_ne!(answered[0], answered[1]);
    // The stream carried each child's question under its own session id, labelled and
    // enriched from the waiting call (`always`), and the parent's agent/started and finished.
    let events = reader.join().unwrap();
    let asked: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "approval/requested")
        .collect();
    assert_eq!(asked.len(), 2, "{events:?}");
    for event in &asked {
        assert!(
            answered
                .iter()
                .any(|child| event["session_id"] == child.as_str())
        );
        assert_eq!(event["agent"], "general");
        assert!(event["always"].is_string(), "{event}");
    }
    let finished = events
        .iter()
        .filter(|event| event["type"] == "agent/finished")
        .count();
    assert_eq!(finished, 2);
    // A child's transcript is read (never opened): its items, its agent.
    let (code, history) = server.api(
        "GET",
        &format!("/api/sessions/{}/history", answered[0]),
        json!(null),
    );
    assert_eq!(code, 200, "{history}");
    assert_eq!(history["agent"], "general");
    assert_eq!(history["parent"], session.as_str());
    assert!(history["items"].to_string().contains("Made "), "{history}");
}

/// The SSE events of `session` from now until its `turn/completed`.
fn sse_until_turn_end(address: &str, auth: &str, session: &str) -> Vec<Value> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    write!(
        stream,
        "GET /api/sessions/{session}/events HTTP/1.1\r\nHost: {address}\r\nAuthorization: {auth}\r\n\r\n"
    )
    .unwrap();
    let started = std::time::Instant::now();
    let (mut raw, mut buffer) = (String::new(), [0u8; 8192]);
    while started.elapsed() < std::time::Duration::from_secs(30) {
        if let Ok(n) = stream.read(&mut buffer) {
            if n == 0 {
                break;
            }
            raw.push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
        if parsed(&raw)
            .iter()
            .any(|event| event["type"] == "turn/completed" && event["session_id"] == session)
        {
            break;
        }
    }
    parsed(&raw)
}

fn parsed(raw: &str) -> Vec<Value> {
    raw.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .collect()
}

#[test]
fn rewinding_the_parents_turn_undoes_what_its_subagents_changed() {
    use crate::common::repository::{read, repository, session_of};
    let scenario = json!({
        "steps": [
            {"tool": "task", "args": {"agent": "general", "description": "change things", "prompt": "MARK-C change"}},
            {"say": "Changed."}
        ],
        "conversations": [{"when": {"contains": "MARK-C"}, "steps": [
            {"tool": "bash", "args": {"command": "echo made > made.txt && echo more >> tracked.txt"}},
            {"tool": "write_file", "args": {"path": "new.txt", "content": "hello\n"}},
            {"say": "Done."}
        ]}]
    })
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    repository(&home);
    let run = home.run(&["run", "--yes", "--json", "delegate the change"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(read(&home, "made.txt").as_deref(), Some("made\n"));
    assert_eq!(read(&home, "new.txt").as_deref(), Some("hello\n"));
    let session = session_of(&run);
    let rewound = home.run(&["session", "rewind", &session, "--to", "1", "--code"]);
    assert_eq!(rewound.code(), 0, "{}", rewound.stderr());
    assert_eq!(read(&home, "made.txt"), None, "{}", rewound.stderr());
    assert_eq!(read(&home, "new.txt"), None, "{}", rewound.stderr());
    assert_eq!(read(&home, "tracked.txt").as_deref(), Some("tracked\n"));
}

#[test]
fn a_kill_around_the_task_receipt_never_starts_the_child_and_leaves_no_empty_session() {
    // Before `started`: the child's session was made, nothing ran in it; its call is answered
    // `not_started` and the empty session goes.
    let (home, mock) = scripted("chat", &delegating(), "");
    let session = killed(&home, "before_task_started");
    assert_eq!(
        stored_session_ids(&home).len(),
        2,
        "the child's session was made"
    );
    let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    let shown = session_json(&home, &session, &[]);
    assert_eq!(shown["receipts"][0]["state"], "not_started", "{shown}");
    assert!(task_result(&shown).contains("not started"), "{shown}");
    assert_eq!(
        stored_session_ids(&home),
        std::slice::from_ref(&session),
        "no empty child left"
    );
    assert_eq!(child_requests(&mock), 0);

    // After `started`: the receipt names the child before its first request; on restart the
    // call's result names it, and it never asks anything.
    let (home, mock) = scripted("chat", &delegating(), "");
    let session = killed(&home, "after_task_started");
    let shown = session_json(&home, &session, &[]);
    let child = shown["receipts"][0]["child_session"]
        .as_str()
        .expect("named before the child's first request")
        .to_string();
    assert_eq!(child_requests(&mock), 0);
    let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    let result = task_result(&session_json(&home, &session, &[]));
    assert!(
        result.contains(&format!(
            "interrupted — keel stopped while it ran, in its session {child}"
        )),
        "{result}"
    );
    assert!(result.contains("no tool call"), "{result}");
    assert_eq!(child_requests(&mock), 0, "the child never asked anything");
}

#[test]
fn a_bug_in_a_child_ends_that_child_failed_and_the_parent_goes_on() {
    let (home, mock) = scripted("chat", &delegating(), "");
    // A panic as the child's command starts (the child's is the first such point reached).
    let run = home
        .keel(&["run", "--yes", "--json", "delegate it"])
        .env("KEEL_KILL_AT", "panic:after_receipt_started")
        .output()
        .unwrap();
    // The turn completed (not ready: its answer came right after a failed call: exit 1).
    assert_eq!(
        run.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let session = events[0]["session_id"].as_str().unwrap().to_string();
    let result = task_result(&session_json(&home, &session, &[]));
    assert!(
        result.contains("subagent `general` (mark it) failed (unknown)"),
        "{result}"
    );
    assert!(result.contains("a bug in keel"), "{result}");
    let finished = events
        .iter()
        .find(|event| event["type"] == "agent/finished")
        .unwrap();
    assert_eq!(finished["state"], "failed");
    // The parent's next request went out and its turn completed.
    assert_eq!(mock.requests().len(), 3, "parent, child, parent");
    assert!(
        events
            .iter()
            .any(|event| event["type"] == "turn/completed"
                && event["session_id"] == session.as_str())
    );
}
