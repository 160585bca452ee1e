//! A `keel serve` process and raw HTTP/SSE over loopback, for the serve tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::Home;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A running `keel serve`, killed on drop.
pub struct Server {
    pub child: Child,
    /// `127.0.0.1:PORT`
    pub address: String,
    pub token: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn start(home: &Home, extra: &[&str]) -> Server {
        Server::start_with_env(home, extra, &[])
    }

    /// `start` with keel's file limit set to `limit` (soft and hard: keel cannot raise it), by
    /// a shell that then execs keel (the same process).
    pub fn start_with_file_limit(home: &Home, limit: u32) -> Server {
        Server::start_with_file_limits(home, limit, limit)
    }

    /// `start` with keel's soft and hard file limits set.
    pub fn start_with_file_limits(home: &Home, soft: u32, hard: u32) -> Server {
        let keel = home.keel(&["serve"]);
        let mut command = std::process::Command::new("sh");
        command
            .args([
                "-c",
                &format!("ulimit -Sn {soft} && ulimit -Hn {hard} && exec \"$0\" \"$@\""),
                super::KEEL,
            ])
            .args(keel.get_args())
            .current_dir(keel.get_current_dir().unwrap())
            .stdin(Stdio::null());
        for (name, value) in keel.get_envs() {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        Server::spawned(command)
    }

    /// `start`, with variables added to keel's environment.
    pub fn start_with_env(home: &Home, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut args = vec!["serve"];
        args.extend_from_slice(extra);
        let mut command = home.keel(&args);
        command.envs(env.iter().copied());
        Server::spawned(command)
    }

    /// A `keel serve` started by `command`, once it printed its URL.
    fn spawned(mut command: std::process::Command) -> Server {
        let mut child = command
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
    pub fn request(
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

    pub fn auth(&self) -> String {
        format!("Bearer {}", self.token)
    }

    pub fn api(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let auth = self.auth();
        let bytes = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let (status, text) = self.request(method, path, &[("Authorization", &auth)], &bytes);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `POST …/submit` for `session` with `body`.
    pub fn submit(&self, session: &str, body: Value) -> (u16, Value) {
        self.api("POST", &format!("/api/sessions/{session}/submit"), body)
    }

    pub fn new_session(&self) -> String {
        let (status, body) = self.api("POST", "/api/sessions", json!({}));
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    /// Events of `session` after `after`, until `until` matches one (or 20 s pass), or until
    /// `limit` events were read (then the connection is dropped mid-stream).
    pub fn events(
        &self,
        session: &str,
        after: Option<u64>,
        until: &str,
        limit: usize,
    ) -> Vec<Value> {
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
pub fn dechunk(body: &str) -> String {
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

pub fn ids(events: &[Value]) -> Vec<u64> {
    events.iter().filter_map(|e| e["id"].as_u64()).collect()
}

pub fn wait_until_idle(server: &Server, session: &str) {
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
