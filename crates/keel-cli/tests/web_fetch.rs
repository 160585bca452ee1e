//! `web_fetch` end to end: the real `keel` against `keel mock`, fetching from a local HTTP
//! server this test starts — HTML to text, the size cap, the redirect limit, and the refusal of
//! a private address without the user's rule.

use crate::common::*;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const PAGE: &str = "<html><head><title>Notes</title><style>h1 { color: red }</style></head><body>\
<h1>Release notes</h1><p>Version <b>2.0</b> adds <a href=\"/x\">links</a>.</p>\
<script>stealEverything()</script></body></html>";

/// A tiny HTTP/1.1 server on loopback; returns its base URL and a count of requests served.
fn local_site() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("/")
                .to_string();
            let (status, kind, location, body): (&str, &str, Option<String>, Vec<u8>) =
                if path == "/page" {
                    (
                        "200 OK",
                        "text/html; charset=utf-8",
                        None,
                        PAGE.as_bytes().to_vec(),
                    )
                } else if let Some(n) = path.strip_prefix("/hop/") {
                    let n: usize = n.parse().unwrap_or(0);
                    let next = if n == 0 {
                        "/page".to_string()
                    } else {
                        format!("/hop/{}", n - 1)
                    };
                    ("302 Found", "text/plain", Some(next), Vec::new())
                } else if path == "/to-metadata" {
                    (
                        "302 Found",
                        "text/plain",
                        Some("http://169.254.169.254/latest/meta-data".into()),
                        Vec::new(),
                    )
                } else if path == "/loop" {
                    ("302 Found", "text/plain", Some("/loop".into()), Vec::new())
                } else if path == "/big" {
                    ("200 OK", "text/plain", None, vec![b'a'; 3 * 1024 * 1024])
                } else {
                    (
                        "404 Not Found",
                        "text/plain",
                        None,
                        b"no such page".to_vec(),
                    )
                };
            let mut head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            if let Some(location) = location {
                head.push_str(&format!("Location: {location}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    (base, served)
}

#[test]
fn web_fetch_reads_pages_as_text_within_its_limits() {
    let (base, _served) = local_site();
    let steps = json!({"steps": [
        {"tool": "web_fetch", "args": {"url": format!("{base}/hop/2")}},
        {"tool": "web_fetch", "args": {"url": format!("{base}/big")}},
        {"tool": "web_fetch", "args": {"url": format!("{base}/loop")}},
        {"tool": "web_fetch", "args": {"url": "file:///etc/passwd"}},
        {"tool": "web_fetch", "args": {"url": format!("{base}/to-metadata")}},
        {"tool": "web_fetch", "args": {"url": "http://docs.rs@127.0.0.1/page"}},
        {"say": "done"}
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    // The test's server is on loopback: the user allows that host by rule.
    home.append_config("[permissions]\nallow = [\"web_fetch(127.0.0.1)\"]\n");
    let run = home.run(&["run", "--yes", "--json", "read the release notes"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let requests = mock.requests();
    let result_of = |index: usize| -> String {
        let body: serde_json::Value =
            serde_json::from_str(requests[index]["body"].as_str().unwrap()).unwrap();
        body["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let page = result_of(1);
    assert!(
        page.contains(&format!("URL: {base}/page")),
        "the final URL: {page}"
    );
    assert!(page.contains("Content-Type: text/html"), "{page}");
    for words in ["Release notes", "Version", "2.0", "adds", "links"] {
        assert!(page.contains(words), "`{words}` in the text: {page}");
    }
    assert!(
        !page.contains("<h1>") && !page.contains("<b>"),
        "tags are gone: {page}"
    );
    assert!(
        !page.contains("stealEverything"),
        "scripts are not text: {page}"
    );
    let big = result_of(2);
    assert!(
        big.contains("only the first 2097152 bytes were read"),
        "{}",
        &big[..300]
    );
    assert!(big.len() < 40_000, "capped for the model: {}", big.len());
    let looping = result_of(3);
    assert!(looping.contains("stopped after 5 redirects"), "{looping}");
    let file = result_of(4);
    assert!(file.contains("http and https URLs only"), "{file}");
    // A redirect from an allowed host to an internal address is checked like the first hop.
    let metadata = result_of(5);
    assert!(
        metadata.contains("refused: `169.254.169.254`"),
        "{metadata}"
    );
    let userinfo = result_of(6);
    assert!(
        userinfo.contains("carries a user name or password"),
        "{userinfo}"
    );
}

#[test]
fn a_private_address_is_refused_without_a_rule_and_nothing_is_sent() {
    let (base, served) = local_site();
    let steps = json!({"steps": [
        {"tool": "web_fetch", "args": {"url": format!("{base}/page")}},
        {"say": "done"}
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let run = home.run(&["run", "--yes", "--json", "fetch it"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let answer = mock.requests()[1]["body"].as_str().unwrap().to_string();
    assert!(
        answer.contains("refused: `127.0.0.1` is 127.0.0.1"),
        "{answer}"
    );
    assert!(
        answer.contains("web_fetch(127.0.0.1)"),
        "says how to allow it: {answer}"
    );
    assert_eq!(
        served.load(Ordering::SeqCst),
        0,
        "nothing reached the server"
    );

    // In `ask` mode, headless, a fetch is not made without someone saying yes.
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"ask\"");
    let run = home.run(&["run", "--json", "fetch it"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(
        mock.requests()[1]["body"]
            .as_str()
            .unwrap()
            .contains("nobody to ask")
    );
    assert_eq!(served.load(Ordering::SeqCst), 0);
}
