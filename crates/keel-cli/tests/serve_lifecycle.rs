//! `keel serve` sessions over time: two at once, clients that leave or read too slowly, a
//! cancel while an approval waits, the model route, and stopping on SIGTERM.

use crate::common::serve::*;
use crate::common::*;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

#[test]
fn two_sessions_run_turns_at_once_and_sigterm_stops_cleanly() {
    // A barrier, not a stopwatch: each command says it arrived and waits (up to 30 s) until
    // the other has too, then prints how many it met. One after the other, each meets one.
    // (Not `$$`: each command is pid 2 of its own namespace.)
    let barrier = "mktemp arrived.XXXXXX >/dev/null; n=0; \
        while [ $(ls arrived.* | wc -l) -lt 2 ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; \
        echo met=$(ls arrived.* | wc -l)";
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": barrier}},
        {"tool": "bash", "args": {"command": barrier}},
        {"say": "first done"},
        {"say": "second done"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let mut server = Server::start(&home, &["--no-auth"]);
    let one = server.new_session();
    let two = server.new_session();
    for session in [&one, &two] {
        assert_eq!(server.submit(session, json!({"input": "go"})).0, 202);
    }
    wait_until_idle(&server, &one);
    wait_until_idle(&server, &two);
    for session in [&one, &two] {
        let (_, history) = server.api(
            "GET",
            &format!("/api/sessions/{session}/history"),
            Value::Null,
        );
        let text = history.to_string();
        assert!(
            text.contains("first done") || text.contains("second done"),
            "{text}"
        );
        assert!(text.contains("met=2"), "the two tools ran at once: {text}");
    }
    // SIGTERM: stop accepting, settle, exit 0.
    Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    let status = wait_for_exit(
        &mut server.child,
        Duration::from_secs(10),
        "keel serve did not stop",
    );
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_client_that_leaves_mid_turn_does_not_stop_the_turn() {
    let steps = json!({"chunk_delay_ms": 100, "steps": [
        {"tool": "bash", "args": {"command": "echo ran >> effects.log"}},
        {"say": "finished without anyone watching"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "go"})).0, 202);
    // A browser that reads two events and closes.
    let seen = server.events(&session, None, "never", 2);
    assert_eq!(seen.len(), 2);
    wait_until_idle(&server, &session);
    let (_, history) = server.api(
        "GET",
        &format!("/api/sessions/{session}/history"),
        Value::Null,
    );
    assert!(
        history
            .to_string()
            .contains("finished without anyone watching")
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("effects.log")).unwrap(),
        "ran\n"
    );
}

#[test]
fn cancel_resolves_a_waiting_approval_and_nothing_runs() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "never.txt", "content": "x"}},
        {"say": "unused"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "w"})).0, 202);
    let asked = server.events(&session, Some(0), "approval/requested", usize::MAX);
    let call = asked
        .iter()
        .find(|e| e["type"] == "approval/requested")
        .unwrap()["call_id"]
        .as_str()
        .unwrap()
        .to_string();
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
    let path = format!("/api/sessions/{session}/approvals/{call}");
    assert_eq!(
        server.api("POST", &path, json!({"decision": "allow"})).0,
        409,
        "no longer waiting"
    );
    assert!(!home.path().join("never.txt").exists());
    let (_, history) = server.api(
        "GET",
        &format!("/api/sessions/{session}/history"),
        Value::Null,
    );
    assert_eq!(history["receipts"][0]["state"], "not_started", "{history}");
}

#[test]
fn the_model_route_switches_the_sessions_model() {
    let steps = json!({"steps": [{"say": "one"}, {"say": "two"}]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    home.append_config(&format!(
        "[providers.deepseek-anthropic]\nbase_url = \"{}\"\n",
        mock.base_url
    ));
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    let path = format!("/api/sessions/{session}/model");
    let switched = server.api("POST", &path, json!({"model": "deepseek-anthropic/other"}));
    assert_eq!(switched.0, 200, "{}", switched.1);
    assert_eq!(switched.1["model"], "deepseek-anthropic/other");
    let (_, status) = server.api("GET", &format!("/api/sessions/{session}"), Value::Null);
    assert_eq!(status["model"], "deepseek-anthropic/other");
    assert_eq!(server.submit(&session, json!({"input": "hi"})).0, 202);
    wait_until_idle(&server, &session);
    assert_eq!(mock.requests()[0]["protocol"], "anthropic");
    let unknown = server.api("POST", &path, json!({"model": "nope/x"}));
    assert_eq!(unknown.0, 400, "{}", unknown.1);
    assert_eq!(server.api("POST", &path, json!({"modle": "typo"})).0, 400);
}

#[test]
fn a_client_too_slow_to_read_is_dropped_and_replays_from_its_last_id() {
    // About 50,000 streamed deltas: more than any socket buffer plus the client's buffer.
    let answer = "slow client test ".repeat(36_000) + "THE END";
    let steps = json!({"steps": [{"say": answer}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    // A client that connects and then does not read at all.
    let mut sleeper = TcpStream::connect(&server.address).unwrap();
    write!(
        sleeper,
        "GET /api/sessions/{session}/events HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\n\r\n",
        server.address,
        server.auth()
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(server.submit(&session, json!({"input": "go"})).0, 202);
    wait_until_idle(&server, &session);
    // The turn was not held back by the sleeper: it is stored whole.
    let (_, history) = server.api(
        "GET",
        &format!("/api/sessions/{session}/history"),
        Value::Null,
    );
    assert!(history.to_string().contains("THE END"));
    // The sleeper was cut off: reading now ends before the turn's last event.
    sleeper
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut raw = Vec::new();
    let _ = sleeper.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw);
    assert!(
        !raw.contains("turn/completed"),
        "the slow client was dropped before the end"
    );
    let last = raw
        .lines()
        .filter_map(|line| line.strip_prefix("id: "))
        .filter_map(|id| id.trim().parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    // It resumes from its last id and gets the rest of the stored events.
    let rest = server.events(&session, Some(last), "turn/completed", usize::MAX);
    assert!(rest.iter().any(|e| e["type"] == "turn/completed"));
    let all = ids(&server.events(&session, Some(0), "turn/completed", usize::MAX));
    let mut joined: Vec<u64> = all.iter().copied().filter(|id| *id <= last).collect();
    joined.extend(ids(&rest));
    assert_eq!(joined, all);
}

#[test]
fn sigterm_does_not_wait_for_a_stuck_client_or_a_stalled_turn() {
    // The stall ends in 2 s and the retry is answered "later": a keel that waited for the turn
    // would commit it.
    let steps = json!({"steps": [{"fault": "stall", "seconds": 2}, {"say": "later"}]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let mut server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "wait"})).0, 202);
    wait_until(
        "the turn's request is in flight",
        Duration::from_secs(20),
        || !mock.requests().is_empty(),
    );
    // A client that sent its headers and half its body and went quiet: no header timeout ends
    // it, so a keel that waited for it would never exit.
    let mut stuck = TcpStream::connect(&server.address).unwrap();
    write!(
        stuck,
        "POST /api/sessions/{session}/submit HTTP/1.1\r\nHost: {}\r\nContent-Length: 100\r\n\r\n{{\"in",
        server.address
    )
    .unwrap();
    // Not a synchronisation (nothing marks the moment keel has read the half request); the
    // test holds either way, this only makes the client likely to be mid-request.
    std::thread::sleep(Duration::from_millis(200));
    Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    let status = wait_for_exit(
        &mut server.child,
        Duration::from_secs(30),
        "keel serve waited for the stuck client",
    );
    assert_eq!(status.code(), Some(0));
    drop(stuck);
    let shown = home.run(&["session", "show", &session, "--json"]);
    assert_eq!(shown.code(), 0, "{}", shown.stderr());
    let stored: Value = serde_json::from_str(&shown.stdout()).unwrap();
    assert!(
        stored["items"]
            .as_array()
            .is_some_and(|items| !items.is_empty()),
        "the session and its prompt are stored: {stored}"
    );
    assert!(
        !shown.stdout().contains("later"),
        "nothing committed after the stop"
    );
}
