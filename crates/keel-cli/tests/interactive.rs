//! The interactive session under a real pseudo-terminal (util-linux `script`), and damaged state.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

/// Start `keel` in a terminal, type `inputs` (text, pause after), return the screen.
fn interactive(home: &Home, inputs: &[(&str, u64)]) -> String {
    let mut child = std::process::Command::new("script")
        .args(["-qec", KEEL, "/dev/null"])
        .current_dir(home.path())
        .env("KEEL_HOME", home.path())
        .env("DEEPSEEK_API_KEY", "test-key-1")
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    for (text, pause_ms) in inputs {
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(*pause_ms));
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_session_with_slash_commands() {
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let screen = interactive(
        &home,
        &[
            ("what is the answer?\n", 1500),
            ("/cost\n", 300),
            ("/model\n", 300),
            ("/help\n", 300),
            ("/sessions\n", 300),
            ("/quit\n", 500),
        ],
    );
    assert!(screen.contains("The answer is 42"), "{screen}");
    assert!(screen.contains("tokens: "), "{screen}");
    assert!(screen.contains("model: deepseek/mock-model"), "{screen}");
    assert!(screen.contains("/resume ID"), "{screen}");
    assert_eq!(mock.requests().len(), 1);
    let sessions = home.run(&["sessions", "--json"]).stdout();
    assert!(
        screen.contains(
            &serde_json::from_str::<serde_json::Value>(&sessions).unwrap()[0]["id"]
                .as_str()
                .unwrap()[..8]
        )
    );
}

#[test]
fn ctrl_c_cancels_the_turn_and_the_session_goes_on() {
    let home = Home::new("");
    let mock = MockProcess::with_steps(
        &home.path(),
        r#"{"steps": [{"fault": "stall", "seconds": 30}, {"say": "still here"}]}"#,
    );
    std::fs::write(
        home.path().join("config.toml"),
        config_for("chat", &mock.base_url, ""),
    )
    .unwrap();
    let screen = interactive(
        &home,
        &[
            ("wait forever\n", 1200),
            ("\u{3}", 800),
            ("are you there?\n", 1500),
            ("/quit\n", 400),
        ],
    );
    assert!(screen.contains("cancelling"), "{screen}");
    assert!(screen.contains("cancelled"), "{screen}");
    assert!(screen.contains("still here"), "{screen}");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn approvals_are_asked_in_the_terminal() {
    let home = Home::new("");
    let scenario = r#"{"steps": [{"tool": "write_file", "args": {"path": "a.txt", "content": "yes"}}, {"tool": "write_file", "args": {"path": "b.txt", "content": "no"}}, {"say": "done"}]}"#;
    let mock = MockProcess::with_steps(&home.path(), scenario);
    std::fs::write(
        home.path().join("config.toml"),
        config_for("chat", &mock.base_url, ""),
    )
    .unwrap();
    let screen = interactive(
        &home,
        &[
            ("write two files\n", 1000),
            ("y\n", 800),
            ("n\n", 1200),
            ("/quit\n", 400),
        ],
    );
    assert!(screen.contains("allow write_file `a.txt`?"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("a.txt")).unwrap(),
        "yes"
    );
    assert!(!home.path().join("b.txt").exists());
    assert!(screen.contains("denied"), "{screen}");
}

#[test]
fn an_undecodable_history_item_is_reported_and_the_session_still_shows() {
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let run = home.run(&["run", "--json", "hi"]);
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    let connection = rusqlite::Connection::open(home.path().join("state/keel.db")).unwrap();
    connection
        .execute(
            "UPDATE items SET item = '{\"role\":\"martian\"}' WHERE revision = 2",
            [],
        )
        .unwrap();
    drop(connection);
    let resumed = home.run(&["run", "--session", &session, "again"]);
    assert_eq!(resumed.code(), 1, "{}", resumed.stderr());
    assert!(
        resumed.stderr().contains("history item 2 cannot be read"),
        "{}",
        resumed.stderr()
    );
    let shown = home.run(&["session", "show", &session]);
    assert_eq!(shown.code(), 0);
    assert!(
        shown.stdout().contains("you: hi")
            && shown.stdout().contains("[history item 2 cannot be read"),
        "{}",
        shown.stdout()
    );
}

#[test]
fn a_corrupt_state_database_is_refused_and_kept() {
    let home = Home::new("");
    std::fs::create_dir_all(home.path().join("state")).unwrap();
    std::fs::write(
        home.path().join("state/keel.db"),
        b"this is not sqlite at all, but it is the user's data",
    )
    .unwrap();
    let run = home.run(&["run", "hi"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(
        run.stderr().contains("corrupt or not a keel database")
            && run.stderr().contains("left untouched"),
        "{}",
        run.stderr()
    );
    assert_eq!(
        std::fs::read(home.path().join("state/keel.db")).unwrap(),
        b"this is not sqlite at all, but it is the user's data"
    );
}

#[test]
fn recover_context_in_the_interactive_session() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let screen = interactive(
        &home,
        &[
            ("look around\n", 1500),
            ("/recover-context\n", 1500),
            ("/recover-context\n", 500),
            ("/quit\n", 400),
        ],
    );
    assert!(screen.contains("without giving a reason"), "{screen}");
    assert!(
        screen.contains("/recover-context replays the task"),
        "{screen}"
    );
    assert!(screen.contains("Recovered from valid history."), "{screen}");
    assert!(
        screen.contains("no recovery is pending"),
        "the second one is refused: {screen}"
    );
    assert_eq!(mock.requests().len(), 3);
}
