//! `keel serve` against clients that open connections and never finish a request: half-sent
//! requests are dropped after the header-read timeout, and when the connections are too many
//! the oldest that never presented the token give way, so a real client is answered all the
//! while. Real sockets on loopback, bounded.

use crate::common::serve::Server;
use crate::common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn half_sent_requests_do_not_starve_a_real_client() {
    let home = Home::new("");
    let server = Server::start(&home, &[]);
    // 300 connections, each with half a request line and headers, never finished.
    let mut slow: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut stream = TcpStream::connect(&server.address).unwrap();
            write!(
                stream,
                "GET /api/sessions HTTP/1.1\r\nHost: {}\r\nX-Slow: ",
                server.address
            )
            .unwrap();
            stream
        })
        .collect();
    let (status, _) = server.api("GET", "/api/sessions", Value::Null);
    assert_eq!(status, 200);
    // Answered while the half-sent ones still hold their connections (they are dropped only
    // at the header-read timeout), not once they were gone.
    let stream = &mut slow[0];
    stream.set_nonblocking(true).unwrap();
    let mut buffer = [0u8; 512];
    let still_open = matches!(stream.read(&mut buffer), Err(error) if error.kind() == std::io::ErrorKind::WouldBlock);
    assert!(
        still_open,
        "the real client was answered only after the slow ones were dropped"
    );
    // The half-sent ones are closed once the header-read timeout (10 s) passes; the read
    // timeout only guards against a server that never closes them.
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // A signal another test of this binary causes may interrupt the read: read again.
    let answer = loop {
        match stream.read(&mut buffer) {
            Ok(read) => break String::from_utf8_lossy(&buffer[..read]).to_string(),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {
                break String::new();
            }
            Err(error) => panic!("a half-sent request was never dropped: {error}"),
        }
    };
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "closed or answered 408: {answer:?}"
    );
}

/// One request on a kept-alive connection (`GET /api/sessions`, with `token` if given): the
/// status, `None` when the connection was closed instead.
fn kept_alive_request(stream: &mut TcpStream, address: &str, token: Option<&str>) -> Option<u16> {
    let auth = token
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET /api/sessions HTTP/1.1\r\nHost: {address}\r\n{auth}\r\n"
    )
    .ok()?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).ok()?;
    Some(status)
}

/// The test needs about 800 descriptors of its own: its soft limit raised to the hard one.
fn enough_descriptors() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
    assert!(
        hard >= 1024,
        "this test needs 1024 descriptors (hard limit {hard})"
    );
}

/// keel runs under a file limit of 256, soft and hard (it cannot raise it): it holds at most
/// 128 connections. 600 half-sent requests and 100 finished token-less requests idling on
/// keep-alive are more than that: the oldest of them give way, and the real client — a new
/// connection with the token, and one kept alive since before them — is served at once, long
/// before the 10 s header timeout could have freed anything.
#[test]
fn a_real_client_is_served_while_strangers_hold_every_connection() {
    enough_descriptors();
    let home = Home::new("");
    let server = Server::start_with_file_limit(&home, 256);
    let address = server.address.clone();
    let mut client = TcpStream::connect(&address).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(
        kept_alive_request(&mut client, &address, Some(&server.token)),
        Some(200)
    );
    let idle: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut stream = TcpStream::connect(&address).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            assert_eq!(kept_alive_request(&mut stream, &address, None), Some(401));
            stream
        })
        .collect();
    let half_open: Vec<TcpStream> = (0..600)
        .filter_map(|_| {
            let mut stream = TcpStream::connect(&address).ok()?;
            // A stranger closed to make room may refuse the rest of its own request.
            let _ = write!(
                stream,
                "GET /api/sessions HTTP/1.1\r\nHost: {address}\r\nX-Slow: "
            );
            Some(stream)
        })
        .collect();
    assert_eq!(half_open.len(), 600, "every stranger got a connection");
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let (status, _) = server.api("GET", "/api/sessions", Value::Null);
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "served only after {:?} (the header timeout is 10 s)",
        started.elapsed()
    );
    assert_eq!(
        kept_alive_request(&mut client, &address, Some(&server.token)),
        Some(200),
        "the client kept alive since before them is never closed for room"
    );
    // The strangers that gave way are closed: every finished token-less one idling.
    let closed = idle
        .iter()
        .filter(|stream| {
            let mut stream = stream.try_clone().unwrap();
            stream
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            match stream.read(&mut [0u8; 1]) {
                Ok(0) => true,
                Ok(_) => false,
                Err(error) => !matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
            }
        })
        .count();
    assert!(
        closed >= 90,
        "the oldest strangers gave way ({closed} of 100 idle closed)"
    );
    drop(half_open);
}

/// keel serve raises its own soft file limit for connections; the commands it runs still start
/// with the limit keel was started with (tools built for it — `select`, a loop closing every
/// descriptor — keep working).
#[test]
fn commands_keep_the_file_limit_keel_was_started_with() {
    let steps = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "echo soft=$(ulimit -Sn)"}},
        {"say": "done"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let server = Server::start_with_file_limits(&home, 256, 4096);
    let session = server.new_session();
    assert_eq!(
        server
            .submit(&session, serde_json::json!({"input": "go"}))
            .0,
        202
    );
    let events = server.events(&session, None, "turn/completed", 200);
    let result = events
        .iter()
        .find(|event| event["type"] == "tool/result")
        .unwrap_or_else(|| panic!("a result: {events:?}"));
    let output = result["output"].as_str().unwrap_or("");
    assert!(output.contains("soft=256"), "{output}");
}
