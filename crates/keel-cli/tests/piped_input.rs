//! What is piped into `keel run "PROMPT"` follows the prompt, fenced: a pipe or a regular file,
//! never a terminal, never a pipe left open with nothing in it (keel must not hang), never the
//! file of a `while read` loop; empty input is none, binary and oversized input refused, keel's
//! keys redacted, nothing added to a slash command. `keel run -` still reads the prompt itself.
//! Through the real binary.

use crate::common::*;
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

const ANSWER: &str = r#"{"steps": [{"say": "ok"}, {"say": "ok"}, {"say": "ok"}]}"#;

/// The text of the last user message keel sent first.
fn first_prompt(mock: &MockProcess) -> String {
    let body: serde_json::Value =
        serde_json::from_str(mock.requests()[0]["body"].as_str().unwrap()).unwrap();
    let messages = body["messages"].as_array().unwrap();
    let text = messages.last().unwrap()["content"].as_str().unwrap();
    // After the context block keel puts at the head of the first message.
    text.rsplit("</context>\n\n").next().unwrap().to_string()
}

/// `keel run ARGS` with `input` written to a pipe on its stdin, then closed.
fn piped(home: &Home, args: &[&str], input: &[u8]) -> Run {
    let mut child = home
        .keel(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    Run::from(output)
}

#[test]
fn a_pipe_or_a_file_follows_the_prompt_in_a_fence_longer_than_its_backticks() {
    let (home, mock) = scripted("chat", ANSWER, "");
    let code = "fn parse() {}\n```\nnot the end\n```\n";
    let run = piped(&home, &["run", "explain this"], code.as_bytes());
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        first_prompt(&mock),
        "explain this\n\n````\nfn parse() {}\n```\nnot the end\n```\n````"
    );
    // A regular file on stdin (`< file`), read from its start.
    let file = home.path().join("input.rs");
    std::fs::write(&file, "fn from_a_file() {}\n").unwrap();
    let run = Run::from(
        home.keel(&["run", "--yes", "explain"])
            .stdin(std::fs::File::open(&file).unwrap())
            .output()
            .unwrap(),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let second: serde_json::Value =
        serde_json::from_str(mock.requests()[1]["body"].as_str().unwrap()).unwrap();
    assert!(
        second
            .to_string()
            .contains("explain\\n\\n```\\nfn from_a_file() {}\\n```"),
        "{second}"
    );
}

#[test]
fn a_pipe_left_open_with_nothing_in_it_does_not_hang_keel() {
    let (home, mock) = scripted("chat", ANSWER, "");
    let mut child = home
        .keel(&["run", "hello"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Held open, never written: a CI runner's stdin.
    let _held = child.stdin.take();
    let started = Instant::now();
    let status = wait_for_exit(&mut child, Duration::from_secs(20), "keel run");
    assert!(status.success());
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(first_prompt(&mock), "hello");
}

#[test]
fn the_file_of_a_while_read_loop_is_the_loops() {
    let (home, mock) = scripted("chat", ANSWER, "");
    std::fs::write(home.path().join("list"), "one\ntwo\n").unwrap();
    let output = std::process::Command::new("sh")
        .args([
            "-c",
            "while read word; do \"$0\" run \"say $word\" || exit 1; done < list",
            KEEL,
        ])
        .current_dir(home.path())
        .env("KEEL_HOME", home.path())
        .env("DEEPSEEK_API_KEY", "test-key-1")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "the loop ran twice: {output:?}");
    assert_eq!(first_prompt(&mock), "say one");
}

#[test]
fn empty_binary_oversized_and_secret_input_and_a_slash_command() {
    let (home, mock) = scripted("chat", ANSWER, "");
    let run = piped(&home, &["run", "nothing piped"], b"  \n");
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(first_prompt(&mock), "nothing piped");
    let binary = piped(&home, &["run", "explain"], b"\x7fELF\x00\x01\x02");
    assert_eq!(binary.code(), 2, "{}", binary.stderr());
    assert!(binary.stderr().contains("not text"), "{}", binary.stderr());
    let big = vec![b'a'; 4 * 1024 * 1024 + 10];
    let oversized = piped(&home, &["run", "explain"], &big);
    assert_eq!(oversized.code(), 2, "{}", oversized.stderr());
    assert!(
        oversized.stderr().contains("4 MiB"),
        "{}",
        oversized.stderr()
    );
    let secret = piped(
        &home,
        &["run", "check the deploy"],
        b"export DEEPSEEK_API_KEY=test-key-1\n",
    );
    assert_eq!(secret.code(), 0, "{}", secret.stderr());
    let sent = mock.requests()[1]["body"].as_str().unwrap().to_string();
    assert!(!sent.contains("test-key-1"), "{sent}");
    assert!(sent.contains("[redacted $DEEPSEEK_API_KEY]"), "{sent}");
    // `keel run -` reads the prompt itself from stdin, as before.
    let dash = piped(&home, &["run", "-"], b"the prompt itself\n");
    assert_eq!(dash.code(), 0, "{}", dash.stderr());
    let sent = mock.requests()[2]["body"].as_str().unwrap().to_string();
    assert!(
        sent.contains("the prompt itself") && !sent.contains("```"),
        "{sent}"
    );
    // A slash command gets nothing appended.
    let plan = piped(&home, &["run", "/plan tidy up"], b"some text\n");
    assert!(
        plan.stderr().contains("not added to a slash command"),
        "{}",
        plan.stderr()
    );
}
