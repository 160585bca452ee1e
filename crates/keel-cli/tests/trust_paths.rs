//! Path trust end to end: the real binary, real tools, `keel mock`.
//!
//! Invariants checked here:
//! - A path permission rule matches the path the tool would really touch, however the model
//!   spells it (`./x`, `sub/../x`, a symlink to the denied directory).
//! - A special file (a FIFO) in the workspace cannot hang keel: the read fails and keel exits.

use crate::common::*;
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};

const SECRET: &str = "TOPSECRET-7f3a9c";

/// A scenario calling each `(tool, args)` in turn, then saying `done`.
fn scenario(calls: &[(&str, Value)]) -> String {
    let mut steps: Vec<Value> = calls
        .iter()
        .map(|(tool, args)| json!({"tool": tool, "args": args}))
        .collect();
    steps.push(json!({"say": "done"}));
    json!({ "steps": steps }).to_string()
}

#[test]
fn denied_paths_stay_denied_however_they_are_spelled() {
    let calls = [
        ("read_file", json!({"path": "./secrets/key.txt"})),
        ("read_file", json!({"path": "sub/../secrets/key.txt"})),
        ("read_file", json!({"path": "alias/key.txt"})),
        (
            "write_file",
            json!({"path": "./secrets/b.txt", "content": "planted"}),
        ),
        ("read_file", json!({"path": "sub/../notes.txt"})),
    ];
    let rules = "[permissions]\ndeny = [\"write_file(secrets/*)\", \"read_file(secrets/*)\"]\n";
    let (home, mock) = scripted("chat", &scenario(&calls), rules);
    let workspace = home.path();
    std::fs::create_dir(workspace.join("secrets")).unwrap();
    std::fs::create_dir(workspace.join("sub")).unwrap();
    std::fs::write(workspace.join("secrets/key.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(workspace.join("notes.txt"), "public notes\n").unwrap();
    std::os::unix::fs::symlink("secrets", workspace.join("alias")).unwrap();

    let run = home.run(&["run", "--yes", "--json", "read the files"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());

    let called: Vec<Value> = run
        .events_of("tool/call")
        .iter()
        .map(|call| call["name"].clone())
        .collect();
    assert_eq!(
        called,
        [
            "read_file",
            "read_file",
            "read_file",
            "write_file",
            "read_file"
        ]
    );
    let states: Vec<String> = run
        .events_of("tool/result")
        .iter()
        .map(|result| result["state"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        states,
        ["denied", "denied", "denied", "denied", "completed"],
        "{}",
        run.stdout()
    );
    let subjects: Vec<Value> = run
        .events_of("tool/call")
        .iter()
        .map(|call| call["subject"].clone())
        .collect();
    assert_eq!(
        subjects,
        [
            "secrets/key.txt",
            "secrets/key.txt",
            "secrets/key.txt",
            "secrets/b.txt",
            "notes.txt"
        ],
        "cards show the resolved path"
    );
    assert!(!run.stdout().contains(SECRET), "{}", run.stdout());
    for request in mock.requests() {
        let body = request["body"].as_str().unwrap();
        assert!(!body.contains(SECRET), "the secret reached the model");
    }
    assert!(!workspace.join("secrets/b.txt").exists());
}

#[test]
fn reading_a_fifo_fails_and_keel_exits_promptly() {
    let calls = [("read_file", json!({"path": "pipe"}))];
    let (home, _mock) = scripted("chat", &scenario(&calls), "");
    let fifo = home.path().join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();

    let started = Instant::now();
    let mut child = home
        .keel(&["run", "--yes", "--json", "read the pipe"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("keel was still running {deadline:?} after reading a FIFO");
    }
    let run = Run::from(child.wait_with_output().unwrap());
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let results = run.events_of("tool/result");
    assert_eq!(results.len(), 1, "{}", run.stdout());
    assert_eq!(results[0]["state"], "failed", "{}", results[0]);
    assert!(
        results[0]["summary"].as_str().unwrap().contains("FIFO"),
        "{}",
        results[0]
    );
}
