//! `keel serve` against clients that open connections and never finish a request: half-sent
//! requests are dropped after the header-read timeout, connections past the cap are refused at
//! once, and a real client is answered all the while. Real sockets on loopback, bounded.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::serve::Server;
use common::*;
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
    let answer = match stream.read(&mut buffer) {
        Ok(read) => String::from_utf8_lossy(&buffer[..read]).to_string(),
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => String::new(),
        Err(error) => panic!("a half-sent request was never dropped: {error}"),
    };
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "closed or answered 408: {answer:?}"
    );
}

#[test]
fn connections_past_the_cap_are_refused_and_the_cap_frees_up() {
    let home = Home::new("");
    let server = Server::start(&home, &[]);
    let cap = 512;
    let idle: Vec<TcpStream> = (0..cap + 20)
        .filter_map(|_| TcpStream::connect(&server.address).ok())
        .collect();
    // Give the server the time to accept them all.
    std::thread::sleep(Duration::from_millis(300));
    let mut refused = 0;
    for stream in &idle {
        let mut stream = stream.try_clone().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let mut byte = [0u8; 1];
        if let Ok(0) = stream.read(&mut byte) {
            refused += 1;
        }
    }
    assert!(
        refused >= 20,
        "past the cap connections are closed at once ({refused})"
    );
    drop(idle);
    std::thread::sleep(Duration::from_millis(300));
    let (status, _) = server.api("GET", "/api/sessions", Value::Null);
    assert_eq!(status, 200, "served again once they are gone");
}
