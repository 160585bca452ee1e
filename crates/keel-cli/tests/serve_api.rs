//! `keel serve` over loopback against `keel mock`: every status code of the contract, the
//! token, Host and Origin checks, event replay after a dropped connection, and approvals from
//! a client.

use crate::common::serve::*;
use crate::common::*;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn every_status_code_of_the_contract() {
    let steps = json!({"steps": [{"fault": "stall", "seconds": 30}, {"say": "later"}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    let submit = format!("/api/sessions/{session}/submit");
    // 401: no token, wrong token.
    assert_eq!(server.request("GET", "/api/sessions", &[], b"").0, 401);
    let wrong = server.request(
        "GET",
        "/api/sessions",
        &[("Authorization", "Bearer nope")],
        b"",
    );
    assert_eq!(wrong.0, 401);
    assert!(wrong.1.contains("\"code\":\"unauthorized\""), "{}", wrong.1);
    // 403: a foreign Host (DNS rebinding) or Origin.
    let auth = server.auth();
    let host = server.request(
        "GET",
        "/api/sessions",
        &[("Authorization", &auth), ("Host", "evil.example")],
        b"",
    );
    assert_eq!(host.0, 403);
    let origin = server.request(
        "GET",
        "/api/sessions",
        &[("Authorization", &auth), ("Origin", "http://evil.example")],
        b"",
    );
    assert_eq!(origin.0, 403);
    assert_eq!(
        server
            .request("GET", "/", &[("Host", "evil.example")], b"")
            .0,
        403
    );
    // The page itself needs no token.
    assert_eq!(server.request("GET", "/", &[], b"").0, 200);
    // 404: unknown and malformed ids.
    assert_eq!(
        server
            .api("GET", "/api/sessions/0123456789abcdef/history", Value::Null)
            .0,
        404
    );
    assert_eq!(
        server
            .api("GET", "/api/sessions/..%2f..%2fetc/history", Value::Null)
            .0,
        404
    );
    // 400: bad bodies.
    let bad = server.request("POST", &submit, &[("Authorization", &auth)], b"{not json");
    assert_eq!(bad.0, 400, "{}", bad.1);
    assert_eq!(
        server
            .api(
                "POST",
                &submit,
                json!({"action": "explode", "recoveryId": "r"})
            )
            .0,
        400
    );
    assert_eq!(
        server
            .api(
                "POST",
                &submit,
                json!({"action": "protocol_recovery", "recoveryId": "r", "format": "md"})
            )
            .0,
        400
    );
    assert_eq!(
        server
            .api("POST", &submit, json!({"action": "protocol_recovery"}))
            .0,
        400
    );
    assert_eq!(server.api("POST", &submit, json!({"input": "   "})).0, 400);
    // 413: past the body limit.
    let huge = vec![b' '; 1024 * 1024 + 10];
    assert_eq!(
        server
            .request("POST", &submit, &[("Authorization", &auth)], &huge)
            .0,
        413
    );
    // 409: a stale recovery id, then a busy session.
    let stale = server.api(
        "POST",
        &submit,
        json!({"action": "protocol_recovery", "recoveryId": "r-0123456789abcdef"}),
    );
    assert_eq!(stale.0, 409, "{}", stale.1);
    assert_eq!(stale.1["error"]["code"], "stale_recovery");
    assert_eq!(server.api("POST", &submit, json!({"input": "wait"})).0, 202);
    let busy = server.api("POST", &submit, json!({"input": "again"}));
    assert_eq!(busy.0, 409);
    assert_eq!(busy.1["error"]["code"], "busy");
    // Approving a call that is not waiting.
    let approval = server.api(
        "POST",
        &format!("/api/sessions/{session}/approvals/call_9"),
        json!({"decision": "allow"}),
    );
    assert_eq!(approval.0, 409);
    let bad_decision = server.api(
        "POST",
        &format!("/api/sessions/{session}/approvals/call_9"),
        json!({"decision": "maybe"}),
    );
    assert_eq!(bad_decision.0, 400);
    assert_eq!(
        server
            .api(
                "POST",
                &format!("/api/sessions/{session}/cancel"),
                json!({})
            )
            .0,
        202
    );
    wait_until_idle(&server, &session);
}

#[test]
fn a_reconnecting_client_replays_exactly_what_it_missed() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo one"}},
        {"tool": "bash", "args": {"command": "echo two"}},
        {"tool": "bash", "args": {"command": "echo three"}},
        {"say": "done"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "go"})).0, 202);
    wait_until_idle(&server, &session);
    // The uninterrupted stream, from the start.
    let whole = ids(&server.events(&session, Some(0), "turn/completed", usize::MAX));
    assert!(whole.len() > 8, "{whole:?}");
    // A client that drops after a few events and comes back with its last id.
    let first = server.events(&session, Some(0), "never", 4);
    let last = ids(&first).into_iter().max().unwrap();
    let rest = server.events(&session, Some(last), "turn/completed", usize::MAX);
    let mut joined = ids(&first);
    joined.extend(ids(&rest));
    assert_eq!(joined, whole, "no gap and no duplicate at the seam");
}

#[test]
fn approvals_are_answered_by_a_client_and_the_first_decision_wins() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "yes.txt", "content": "y"}},
        {"tool": "write_file", "args": {"path": "no.txt", "content": "n"}},
        {"say": "done"},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "write"})).0, 202);
    let asked = server.events(&session, Some(0), "approval/requested", usize::MAX);
    let first = asked
        .iter()
        .find(|e| e["type"] == "approval/requested")
        .unwrap();
    assert_eq!(first["subject"], "yes.txt");
    let call = first["call_id"].as_str().unwrap().to_string();
    let path = format!("/api/sessions/{session}/approvals/{call}");
    assert_eq!(
        server.api("POST", &path, json!({"decision": "allow"})).0,
        200
    );
    assert_eq!(
        server.api("POST", &path, json!({"decision": "deny"})).0,
        409,
        "first decision wins"
    );
    let last = ids(&asked).into_iter().max().unwrap();
    let more = server.events(&session, Some(last), "approval/requested", usize::MAX);
    let second = more
        .iter()
        .find(|e| e["type"] == "approval/requested")
        .unwrap();
    let path = format!(
        "/api/sessions/{session}/approvals/{}",
        second["call_id"].as_str().unwrap()
    );
    assert_eq!(
        server.api("POST", &path, json!({"decision": "deny"})).0,
        200
    );
    wait_until_idle(&server, &session);
    assert!(home.path().join("yes.txt").exists());
    assert!(!home.path().join("no.txt").exists());
    let sent = mock.requests().last().unwrap().to_string();
    assert!(sent.contains("the user declined"), "{sent}");
    // A deliberate denial is not a failure: the turn ended ready, with nothing to recover.
    let ended = server.events(&session, Some(0), "turn/completed", usize::MAX);
    let completed = ended.last().unwrap();
    assert_eq!(completed["type"], "turn/completed");
    assert_eq!(completed["ready"], true, "{completed}");
    assert!(completed.get("not_ready_reason").is_none(), "{completed}");
    assert!(!ended.iter().any(|e| e["type"] == "recovery/offered"));
}

#[test]
fn a_command_that_fails_leaves_the_turn_not_ready_with_continue_checks() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "exit 3"}},
        {"say": "The tests pass."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "test"})).0, 202);
    let events = server.events(&session, Some(0), "recovery/offered", usize::MAX);
    let completed = events
        .iter()
        .find(|e| e["type"] == "turn/completed")
        .unwrap();
    assert_eq!(completed["ready"], false, "{completed}");
    assert_eq!(
        completed["not_ready_reason"],
        "the final answer came right after `bash` failed"
    );
    let offered = events.last().unwrap();
    assert_eq!(offered["action"], "final_readiness_recovery", "{offered}");
    wait_until_idle(&server, &session);
    let (_, status) = server.api("GET", &format!("/api/sessions/{session}"), Value::Null);
    assert_eq!(
        status["pending"]["action"], "final_readiness_recovery",
        "{status}"
    );
}

#[test]
fn a_non_loopback_address_needs_an_explicit_token() {
    let home = Home::new("");
    let run = home.run(&["serve", "--addr", "0.0.0.0:0"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(run.stderr().contains("--token"), "{}", run.stderr());
}

#[test]
fn odd_event_requests_get_clear_answers() {
    let steps = json!({"steps": [{"say": "hello"}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    let auth = server.auth();
    let bad = server.request(
        "GET",
        &format!("/api/sessions/{session}/events?after=soon"),
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(bad.0, 400);
    assert!(bad.1.contains("\"code\":\"bad_request\""), "{}", bad.1);
    // A Last-Event-ID that is not a number replays from the start.
    let mut stream = TcpStream::connect(&server.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    write!(
        stream,
        "GET /api/sessions/{session}/events HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\nLast-Event-ID: x\r\n\r\n",
        server.address
    )
    .unwrap();
    let mut buffer = [0u8; 4096];
    let n = stream.read(&mut buffer).unwrap();
    let head = String::from_utf8_lossy(&buffer[..n]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut text = head.into_owned();
    while !text.contains("session/started") {
        let n = stream.read(&mut buffer).unwrap();
        assert!(n > 0, "{text}");
        text.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    // Unknown routes under the API are JSON errors too.
    let (status, body) = server.api("GET", "/api/nothing-here", Value::Null);
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "not_found");
}

#[test]
fn weak_tokens_duplicate_hosts_and_bad_bodies_are_refused() {
    let steps = json!({"steps": [{"say": "hi"}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    for token in ["", "short"] {
        let run = home.run(&["serve", "--token", token]);
        assert_eq!(run.code(), 2, "--token {token:?}: {}", run.stderr());
    }
    let server = Server::start(&home, &[]);
    let auth = server.auth();
    let twice = server.request(
        "GET",
        "/api/sessions",
        &[
            ("Authorization", &auth),
            ("Host", &server.address),
            ("Host", "evil.example"),
        ],
        b"",
    );
    assert_eq!(twice.0, 403, "two Host headers");
    let bad = server.request(
        "POST",
        "/api/sessions",
        &[("Authorization", &auth)],
        b"nonsense",
    );
    assert_eq!(bad.0, 400);
    let page = server.request("GET", "/", &[], b"");
    assert_eq!(page.0, 200);
}

#[test]
fn the_context_recovery_is_offered_and_taken_over_http() {
    let scenario = json!({"context_window": 2500, "steps": effect_steps(30, "done")});
    let (home, _mock) = scripted("chat", &scenario.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "go"})).0, 202);
    wait_until_idle(&server, &session);
    let (_, status) = server.api("GET", &format!("/api/sessions/{session}"), Value::Null);
    assert_eq!(status["pending"]["action"], "context_recovery", "{status}");
    let recovery_id = status["pending"]["recoveryId"]
        .as_str()
        .unwrap()
        .to_string();
    let last = ids(&server.events(&session, Some(0), "recovery/offered", usize::MAX))
        .into_iter()
        .max()
        .unwrap();
    let taken = server.submit(
        &session,
        json!({"action": "context_recovery", "recoveryId": recovery_id, "input": "the log"}),
    );
    assert_eq!(taken.0, 202, "{}", taken.1);
    let events = server.events(&session, Some(last), "turn/completed", usize::MAX);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let rewritten = kinds
        .iter()
        .position(|kind| *kind == "history/rewritten")
        .unwrap();
    assert_eq!(kinds[rewritten + 1], "context/compacted");
    assert_eq!(kinds.last(), Some(&"turn/completed"));
    wait_until_idle(&server, &session);
    let (_, history) = server.api(
        "GET",
        &format!("/api/sessions/{session}/history"),
        Value::Null,
    );
    assert_eq!(history["items"][0]["role"], "context");
    assert_eq!(
        history["items"][1]["role"], "summary",
        "the history is the new revision"
    );
    // The same id again is stale.
    let again = server.submit(
        &session,
        json!({"action": "context_recovery", "recoveryId": recovery_id}),
    );
    assert_eq!(again.0, 409);
    let log = std::fs::read_to_string(home.path().join("effects.log")).unwrap();
    assert_eq!(log.lines().count(), 30, "each effect once");
}

#[test]
fn a_session_shows_its_own_totals_and_rendered_answers_after_a_restart() {
    let steps = json!({"steps": [{"say": "## Done\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    // A turn in another process: `keel run` stores the session.
    let run = home.run(&["run", "--json", "hi"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let server = Server::start(&home, &[]);
    let (status, sessions) = server.api("GET", "/api/sessions", Value::Null);
    assert_eq!(status, 200);
    let id = sessions[0]["id"].as_str().unwrap().to_string();
    let (status, session) = server.api("GET", &format!("/api/sessions/{id}"), Value::Null);
    assert_eq!(status, 200, "{session}");
    assert!(
        session["usage"]["input"].as_u64().unwrap() > 0
            && session["usage"]["output"].as_u64().unwrap() > 0,
        "the earlier process's turn counts: {session}"
    );
    let (_, history) = server.api("GET", &format!("/api/sessions/{id}/history"), Value::Null);
    let text_part = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|item| item["parts"].as_array().cloned().unwrap_or_default())
        .find(|part| part["type"] == "text")
        .unwrap();
    assert_eq!(
        text_part["html"],
        "<h2>Done</h2>\n<table>\n<thead><tr><th>a</th><th>b</th></tr></thead>\n<tbody>\n<tr><td>1</td><td>2</td></tr>\n</tbody>\n</table>\n"
    );
}

#[test]
fn a_denial_from_a_client_can_carry_a_note_for_the_model() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "rm -rf build"}},
        {"say": "Noted."},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "clean"})).0, 202);
    let events = server.events(&session, None, "approval/requested", 100);
    let call = events
        .iter()
        .find(|e| e["type"] == "approval/requested")
        .unwrap()["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/sessions/{session}/approvals/{call}");
    let (status, body) = server.api("POST", &path, json!({"decision": "allow", "note": "x"}));
    assert_eq!(status, 400, "a note goes with deny only: {body}");
    let long = "x".repeat(keel_agent::LONGEST_NOTE + 1);
    assert_eq!(
        server
            .api("POST", &path, json!({"decision": "deny", "note": long}))
            .0,
        400
    );
    let (status, body) = server.api(
        "POST",
        &path,
        json!({"decision": "deny", "note": "use cargo clean"}),
    );
    assert_eq!(status, 200, "{body}");
    wait_until_idle(&server, &session);
    let sent = mock.requests().last().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(sent.contains("The user's note: use cargo clean"), "{sent}");
}

#[test]
fn rewind_over_http_undoes_the_last_turn_and_says_what_it_did() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "notes.md", "content": "# Notes\n"}},
        {"say": "Changed."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    let (status, _) = server.submit(&session, json!({"input": "change things"}));
    assert_eq!(status, 202);
    wait_until_idle(&server, &session);
    assert!(home.path().join("notes.md").exists());
    let (_, state) = server.api("GET", &format!("/api/sessions/{session}"), Value::Null);
    assert_eq!(state["last_turn"], 1);
    let rewind = format!("/api/sessions/{session}/rewind");
    let (status, report) = server.api("POST", &rewind, json!({}));
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["to"], 1);
    assert!(
        report["restored"][0]
            .as_str()
            .unwrap()
            .ends_with("notes.md"),
        "{report}"
    );
    assert_eq!(report["revision"], 2);
    assert!(!home.path().join("notes.md").exists());
    let (_, history) = server.api(
        "GET",
        &format!("/api/sessions/{session}/history"),
        Value::Null,
    );
    let roles: Vec<&str> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["context"]);
    // The rewind is an event of the session, as every client sees it.
    let events = server.events(&session, Some(0), "session/rewound", usize::MAX);
    let rewound = events
        .iter()
        .find(|event| event["type"] == "session/rewound")
        .expect("a session/rewound event");
    assert_eq!(rewound["to_turn"], 1);
    assert_eq!(rewound["code"], true);
    assert_eq!(rewound["conversation"], true);
    assert_eq!(rewound["revision"], 2);
    assert_eq!(rewound["conflicts"], json!([]));
    // Nothing left to undo; a field nobody knows is a bad request.
    let (status, again) = server.api("POST", &rewind, json!({}));
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "cannot_rewind");
    let (status, _) = server.api("POST", &rewind, json!({"too": 1}));
    assert_eq!(status, 400);
}

#[test]
fn fork_over_http_answers_the_new_id_and_refuses_a_turn_that_is_not_there() {
    let steps = json!({"steps": [{"say": "hello"}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "hi"})).0, 202);
    wait_until_idle(&server, &session);
    let (status, forked) = server.api(
        "POST",
        &format!("/api/sessions/{session}/fork"),
        json!({"at": 1}),
    );
    assert_eq!(status, 201, "{forked}");
    let fork = forked["id"].as_str().unwrap();
    assert_ne!(fork, session);
    let (status, _) = server.api("GET", &format!("/api/sessions/{fork}"), Value::Null);
    assert_eq!(status, 200, "the fork is a session of this workspace");
    let (status, refused) = server.api(
        "POST",
        &format!("/api/sessions/{session}/fork"),
        json!({"at": 9}),
    );
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "cannot_fork", "{refused}");
    let (status, _) = server.api("POST", "/api/sessions/0123456789abcdef/fork", json!({}));
    assert_eq!(status, 404);
}
