//! Terminal rendering (under a real pseudo-terminal), Ctrl-C, and secrets.

use crate::common::terminal::{run_in_terminal, screen_of};
use crate::common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn reasoning_is_dimmed_on_a_terminal_unless_no_color() {
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let screen = run_in_terminal(&home, &["run", "hi"], false);
    assert!(
        screen.contains("\u{1b}[2m"),
        "dim attribute expected: {screen:?}"
    );
    let plain = strip_escapes(&screen);
    assert!(
        plain.contains("The user wants a short answer."),
        "{plain:?}"
    );
    assert!(plain.contains("The answer is 42"));
    drop(mock);
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let screen = run_in_terminal(&home, &["run", "hi"], true);
    assert!(!screen.contains("\u{1b}[2m"), "NO_COLOR: {screen:?}");
    assert!(screen.contains("The user wants a short answer."));
}

#[test]
fn a_dropped_attempt_is_erased_on_a_terminal() {
    let mock = MockProcess::start("midstream-drop");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let screen = run_in_terminal(&home, &["run", "hi"], true);
    // The provisional text was drawn, then the line was cleared before the retry notice.
    let erase = screen
        .find("\u{1b}[J")
        .expect("clear-to-end after the failed attempt");
    let retry = screen.find("retry 1/5").expect("retry notice");
    assert!(erase < retry, "{screen:?}");
    // What a person sees at the end: the retry notice and the answer once, nothing of the
    // dropped attempt.
    let shown = screen_of(&screen).contents();
    assert_eq!(shown.matches("The answer is").count(), 1, "{shown}");
    assert!(
        shown.find("retry 1/5")
            < shown.find("The answer is 42, computed by the keel mock provider."),
        "{shown}"
    );
}

#[test]
fn ctrl_c_cancels_the_turn_with_exit_130() {
    let (home, mock) = scripted(
        "chat",
        r#"{"steps": [{"fault": "stall", "seconds": 60}]}"#,
        "",
    );
    let started = Instant::now();
    let child = home
        .keel(&["run", "--json", "hi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the request is in flight", Duration::from_secs(10), || {
        !mock.requests().is_empty()
    });
    // Not a synchronisation: the signals are registered before anything is sent, so the
    // assertions below hold from here on. The pause only lets the mock's opening frame arrive
    // so that the interrupt usually lands mid-stream (no event marks that moment).
    std::thread::sleep(Duration::from_millis(100));
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    // Ignoring the interrupt would end only with the 60 s stall, in a retry, not 130.
    assert_eq!(output.status.code(), Some(130));
    let run = Run {
        output,
        elapsed: started.elapsed(),
    };
    let failed = run.events_of("turn/failed");
    assert_eq!(failed[0]["diagnostic"]["kind"], "cancelled");
    assert!(
        run.events_of("llm/response").is_empty(),
        "nothing of the cancelled attempt is committed"
    );
}

#[test]
fn the_key_never_appears_in_any_output_even_on_auth_failure() {
    let secret = "sk-very-secret-0123456789";
    for json in [true, false] {
        let home = Home::new("");
        let scenario_dir = tempfile::tempdir().unwrap();
        let scenario = serde_json::json!({"steps": [{"fault": {"status": 401, "body": format!("{{\"error\":{{\"message\":\"Authentication Fails, Your api key: {secret} is invalid\"}}}}")}}]});
        let mock = MockProcess::with_steps(scenario_dir.path(), &scenario.to_string());
        std::fs::write(
            home.path().join("config.toml"),
            config_for("chat", &mock.base_url, ""),
        )
        .unwrap();
        let mut args = vec!["run", "hi"];
        if json {
            args.insert(1, "--json");
        }
        let output = home
            .keel(&args)
            .env("DEEPSEEK_API_KEY", secret)
            .output()
            .unwrap();
        let run = Run::from(output);
        assert_eq!(run.code(), 2);
        assert!(!run.stdout().contains(secret) && !run.stderr().contains(secret));
        assert!(
            !run.stdout().contains("Authentication Fails")
                && !run.stderr().contains("Authentication Fails"),
            "no body"
        );
        assert_eq!(mock.requests().len(), 1, "auth is never retried");
        assert_no_file_holds(&home.path(), secret);
    }
}

/// The text without ANSI control sequences.
fn strip_escapes(screen: &str) -> String {
    let mut plain = String::new();
    let mut chars = screen.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for next in chars.by_ref() {
                if next.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}
