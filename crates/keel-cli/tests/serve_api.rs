//! `keel serve` over loopback against `keel mock`: every status code of the contract, the
//! token, Host and Origin checks, event replay after a dropped connection, approvals from a
//! client, two sessions at once, and a clean stop on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `keel serve`, killed on drop.
struct Server {
    child: Child,
    /// `127.0.0.1:PORT`
    address: String,
    token: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(home: &Home, extra: &[&str]) -> Server {
        let mut args = vec!["serve"];
        args.extend_from_slice(extra);
        let mut child = home
            .keel(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().to_string();
        let rest = url.strip_prefix("http://").expect("a URL");
        let (address, fragment) = rest.split_once('/').unwrap();
        let token = fragment.strip_prefix("#token=").unwrap_or("").to_string();
        Server {
            child,
            address: address.to_string(),
            token,
        }
    }

    /// One request; returns the status and the body.
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        if !has("host") {
            head.push_str(&format!("Host: {}\r\n", self.address));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        let _ = stream.write_all(body);
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        let text = String::from_utf8_lossy(&response).into_owned();
        let status: u16 = text
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        (status, dechunk(body))
    }

    fn auth(&self) -> String {
        format!("Bearer {}", self.token)
    }

    fn api(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let auth = self.auth();
        let bytes = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let (status, text) = self.request(method, path, &[("Authorization", &auth)], &bytes);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    fn new_session(&self) -> String {
        let (status, body) = self.api("POST", "/api/sessions", json!({}));
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    /// Events of `session` after `after`, until `until` matches one (or 20 s pass), or until
    /// `limit` events were read (then the connection is dropped mid-stream).
    fn events(&self, session: &str, after: Option<u64>, until: &str, limit: usize) -> Vec<Value> {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let resume = after
            .map(|id| format!("Last-Event-ID: {id}\r\n"))
            .unwrap_or_default();
        write!(
            stream,
            "GET /api/sessions/{session}/events HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\n{resume}\r\n",
            self.address,
            self.auth()
        )
        .unwrap();
        let started = Instant::now();
        let mut raw = String::new();
        let mut events = Vec::new();
        let mut buffer = [0u8; 8192];
        while started.elapsed() < Duration::from_secs(20) && events.len() < limit {
            match stream.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => raw.push_str(&String::from_utf8_lossy(&buffer[..n])),
                Err(_) => {}
            }
            events = raw
                .lines()
                .filter_map(|line| line.strip_prefix("data: "))
                .filter_map(|data| serde_json::from_str::<Value>(data).ok())
                .collect();
            if events.iter().any(|e| e["type"] == until) {
                break;
            }
        }
        events.truncate(limit);
        events
    }
}

/// The body of a chunked response, joined (or the body as is).
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            return if out.is_empty() {
                body.to_string()
            } else {
                out
            };
        };
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            return if out.is_empty() {
                body.to_string()
            } else {
                out
            };
        };
        if size == 0 || after.len() < size {
            return out;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
}

fn ids(events: &[Value]) -> Vec<u64> {
    events.iter().filter_map(|e| e["id"].as_u64()).collect()
}

fn wait_until_idle(server: &Server, session: &str) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        let (_, status) = server.api("GET", &format!("/api/sessions/{session}"), Value::Null);
        if status["busy"] == false {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("session {session} stayed busy");
}

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
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("permission_mode = \"auto\"\n{config}"),
    )
    .unwrap();
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(
        server
            .api(
                "POST",
                &format!("/api/sessions/{session}/submit"),
                json!({"input": "go"})
            )
            .0,
        202
    );
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
    assert_eq!(
        server
            .api(
                "POST",
                &format!("/api/sessions/{session}/submit"),
                json!({"input": "write"})
            )
            .0,
        202
    );
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
}

#[test]
fn two_sessions_run_turns_at_once_and_sigterm_stops_cleanly() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "sleep 1; echo a"}},
        {"tool": "bash", "args": {"command": "sleep 1; echo b"}},
        {"say": "first done"},
        {"say": "second done"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("permission_mode = \"auto\"\n{config}"),
    )
    .unwrap();
    let mut server = Server::start(&home, &["--no-auth"]);
    let one = server.new_session();
    let two = server.new_session();
    let started = Instant::now();
    for session in [&one, &two] {
        assert_eq!(
            server
                .api(
                    "POST",
                    &format!("/api/sessions/{session}/submit"),
                    json!({"input": "go"})
                )
                .0,
            202
        );
    }
    wait_until_idle(&server, &one);
    wait_until_idle(&server, &two);
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "the two 1 s tools ran at once"
    );
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
    }
    // SIGTERM: stop accepting, settle, exit 0.
    Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    let waited = Instant::now();
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "keel serve did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_non_loopback_address_needs_an_explicit_token() {
    let home = Home::new("");
    let run = home.run(&["serve", "--addr", "0.0.0.0:0"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(run.stderr().contains("--token"), "{}", run.stderr());
}

#[test]
fn a_client_that_leaves_mid_turn_does_not_stop_the_turn() {
    let steps = json!({"chunk_delay_ms": 100, "steps": [
        {"tool": "bash", "args": {"command": "echo ran >> effects.log"}},
        {"say": "finished without anyone watching"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("permission_mode = \"auto\"\n{config}"),
    )
    .unwrap();
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(
        server
            .api(
                "POST",
                &format!("/api/sessions/{session}/submit"),
                json!({"input": "go"})
            )
            .0,
        202
    );
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
    assert_eq!(
        server
            .api(
                "POST",
                &format!("/api/sessions/{session}/submit"),
                json!({"input": "w"})
            )
            .0,
        202
    );
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
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "{config}[providers.deepseek-anthropic]\nbase_url = \"{}\"\n",
            mock.base_url
        ),
    )
    .unwrap();
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    let path = format!("/api/sessions/{session}/model");
    let switched = server.api("POST", &path, json!({"model": "deepseek-anthropic/other"}));
    assert_eq!(switched.0, 200, "{}", switched.1);
    assert_eq!(switched.1["model"], "deepseek-anthropic/other");
    let (_, status) = server.api("GET", &format!("/api/sessions/{session}"), Value::Null);
    assert_eq!(status["model"], "deepseek-anthropic/other");
    assert_eq!(
        server
            .api(
                "POST",
                &format!("/api/sessions/{session}/submit"),
                json!({"input": "hi"})
            )
            .0,
        202
    );
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
    assert_eq!(
        server
            .api(
                "POST",
                &format!("/api/sessions/{session}/submit"),
                json!({"input": "go"})
            )
            .0,
        202
    );
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
fn sigterm_does_not_wait_for_a_stuck_client_or_a_stalled_turn() {
    let steps = json!({"steps": [{"fault": "stall", "seconds": 60}, {"say": "later"}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let mut server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(
        server
            .api(
                "POST",
                &format!("/api/sessions/{session}/submit"),
                json!({"input": "wait"})
            )
            .0,
        202
    );
    // A client that sent half a request and went quiet.
    let mut stuck = TcpStream::connect(&server.address).unwrap();
    write!(
        stuck,
        "POST /api/sessions/{session}/submit HTTP/1.1\r\nHost: {}\r\nContent-Length: 100\r\n\r\n{{\"in",
        server.address
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let stopped = Instant::now();
    Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(8),
            "keel serve waited for the stuck client"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    drop(stuck);
    let shown = home.run(&["session", "show", &session, "--json"]);
    assert!(
        !shown.stdout().contains("later"),
        "nothing committed after the stop"
    );
}
