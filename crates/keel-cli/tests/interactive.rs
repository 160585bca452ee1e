//! The interactive session under a real pseudo-terminal (util-linux `script`), and damaged state.

use crate::common::terminal::*;
use crate::common::*;

#[test]
fn a_session_with_slash_commands() {
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, "context_window = 4000"));
    let screen = interactive_until(
        &home,
        &[
            ("what is the answer?\n", Some("tokens: "), 0),
            ("/cost\n", Some("of the window"), 0),
            ("/compact\n", Some("would not be smaller"), 0),
            ("/model\n", Some("model: "), 0),
            ("/help\n", Some("/resume ID"), 0),
            ("/mcp\n", Some("no MCP servers in this session"), 0),
            // Only `/sessions` prints a session's id, marked, followed by its model.
            ("/sessions\n", Some("  deepseek/mock-model"), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(screen.contains("The answer is 42"), "{screen}");
    assert!(screen.contains("tokens: "), "{screen}");
    assert!(
        screen.contains("% cache hit") || screen.contains("cache hit"),
        "{screen}"
    );
    assert!(
        screen.contains(" · ctx "),
        "the footer shows how full the context is: {screen}"
    );
    assert!(screen.contains("model: deepseek/mock-model"), "{screen}");
    assert!(
        screen.contains("no MCP servers in this session"),
        "{screen}"
    );
    // One question and its answer: a summary would not free anything, and keel says so.
    assert!(screen.contains("would not be smaller"), "{screen}");
    assert!(screen.contains("/resume ID"), "{screen}");
    assert_eq!(
        mock.requests().len(),
        2,
        "the answer, then the summary (not committed)"
    );
    let sessions = home.run(&["sessions", "--json"]).stdout();
    let id = serde_json::from_str::<serde_json::Value>(&sessions).unwrap()[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // As `keel sessions` lists it (age, turns, model, title), marked as the open one.
    let row = screen
        .lines()
        .find(|line| line.starts_with(&format!("* {id}  ")))
        .unwrap_or_else(|| panic!("/sessions lists this session, marked: {screen}"));
    assert!(
        row.contains("1 turn")
            && row.contains("deepseek/mock-model")
            && row.contains("what is the answer?"),
        "{row}"
    );
}

#[test]
fn ctrl_c_cancels_the_turn_and_the_session_goes_on() {
    let (home, mock) = scripted(
        "chat",
        r#"{"steps": [{"fault": "stall", "seconds": 30}, {"say": "still here"}]}"#,
        "",
    );
    let screen = interactive_until(
        &home,
        &[
            ("wait forever\n", Some("waiting"), 0),
            ("\u{3}", Some("⏹ stopped"), 0),
            ("are you there?\n", Some("still here"), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(screen.contains("cancelling"), "{screen}");
    assert!(screen.contains("⏹ stopped"), "{screen}");
    assert!(screen.contains("still here"), "{screen}");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn approvals_are_asked_in_the_terminal() {
    let scenario = r#"{"steps": [{"tool": "write_file", "args": {"path": "a.txt", "content": "yes"}}, {"tool": "write_file", "args": {"path": "b.txt", "content": "no"}}, {"say": "done"}]}"#;
    let (home, mock) = scripted("chat", scenario, "");
    let screen = interactive_until(
        &home,
        &[
            ("write two files\n", Some("    a.txt"), 0),
            ("y\n", Some("    b.txt"), 0),
            ("n\n", Some("tokens: "), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(screen.contains("? allow write_file:"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("a.txt")).unwrap(),
        "yes"
    );
    assert!(!home.path().join("b.txt").exists());
    assert!(screen.contains("denied"), "{screen}");
    // The model is told the truth: the user declined (not "headless runs need --yes").
    let requests = mock.requests();
    let last = requests.last().unwrap().to_string();
    assert!(last.contains("the user declined this call"), "{last}");
    assert!(!last.contains("headless"), "{last}");
    // The person said no: a choice, not a failure; the turn ends ready.
    assert!(!screen.contains("not ready"), "{screen}");
    assert!(!screen.contains("continue-checks"), "{screen}");
}

#[test]
fn model_text_cannot_forge_the_approval_prompt_or_the_screen() {
    // The command hides `touch PWNED` behind a carriage return and a line erase; the answer
    // tries to set the window title and clear the screen.
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "touch PWNED; \r\u{1b}[2K echo harmless\necho second line"}},
        {"say": "\u{1b}]0;pwned-title\u{7}done \u{1b}[2J\u{1b}[31mred\u{9b}"},
    ]});
    let (home, mock) = scripted("chat", &scenario.to_string(), "");
    let screen = interactive_until(
        &home,
        &[
            ("run it\n", Some("[N]o + note"), 0),
            ("n\n", Some("tokens: "), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(
        screen.contains("touch PWNED; ␍␛[2K echo harmless"),
        "the exact command, control characters shown: {screen:?}"
    );
    assert!(
        screen.contains("    echo second line"),
        "every line: {screen:?}"
    );
    assert!(!screen.contains("\r\u{1b}[2K echo harmless"), "{screen:?}");
    assert!(!screen.contains("\u{1b}]0;"), "no window title: {screen:?}");
    assert!(!screen.contains("\u{1b}[2J"), "no clear-screen: {screen:?}");
    assert!(
        !screen.contains("\u{1b}[31m"),
        "no colour from the model: {screen:?}"
    );
    assert!(!screen.contains('\u{9b}'), "no 8-bit CSI: {screen:?}");
    assert!(screen.contains("␛]0;pwned-title␇done"), "{screen:?}");
    assert!(!home.path().join("PWNED").exists(), "declined, so not run");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn recover_context_in_the_interactive_session() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let screen = interactive_until(
        &home,
        &[
            ("look around\n", Some("/recover-context replays"), 0),
            ("/recover-context\n", Some("tokens: "), 0),
            ("/recover-context\n", Some("no recovery is pending"), 0),
            ("/quit\n", None, 300),
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

#[test]
fn an_undecodable_history_item_is_reported_and_the_session_still_shows() {
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let run = home.run(&["run", "--json", "hi"]);
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    let connection = rusqlite::Connection::open(home.path().join("state/keel.db")).unwrap();
    connection
        .execute(
            "UPDATE items SET item = '{\"role\":\"martian\"}' WHERE revision = 3",
            [],
        )
        .unwrap();
    drop(connection);
    let resumed = home.run(&["run", "--session", &session, "again"]);
    assert_eq!(resumed.code(), 1, "{}", resumed.stderr());
    assert!(
        resumed.stderr().contains("history item 3 cannot be read"),
        "{}",
        resumed.stderr()
    );
    let shown = home.run(&["session", "show", &session]);
    assert_eq!(shown.code(), 0);
    assert!(
        shown.stdout().contains("you: hi")
            && shown.stdout().contains("[history item 3 cannot be read"),
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
fn ctrl_c_at_the_approval_prompt_does_not_eat_the_next_line() {
    let scenario = r#"{"steps": [{"tool": "write_file", "args": {"path": "a.txt", "content": "x"}}, {"say": "still here"}]}"#;
    let (home, mock) = scripted("chat", scenario, "");
    let screen = interactive_until(
        &home,
        &[
            ("write it\n", Some("[a]lways for write_file"), 0),
            ("\u{3}", Some("⏹ stopped"), 0),
            ("are you there?\n", Some("still here"), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(
        screen.contains("still here"),
        "the next line reached keel: {screen}"
    );
    assert!(!home.path().join("a.txt").exists());
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn sigterm_stops_the_interactive_session_during_a_turn_and_at_the_prompt() {
    // During a turn: the tool is killed, its receipt settles, keel exits 143.
    let marker = format!("sleep 30.{}", std::process::id());
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": format!("touch started; {marker}")}},
        {"say": "never"},
    ]});
    let (home, _mock) = scripted("chat", &scenario.to_string(), "");
    let (screen, code) = interactive_session(
        &home,
        &[
            ("run it\n", Some("[N]o + note"), 0),
            ("y\n", None, 0),
            ("\u{0}wait-file:started", None, 0),
            ("\u{0}signal:TERM", Some("exiting"), 0),
        ],
    );
    assert!(screen.contains("SIGTERM received"), "{screen}");
    assert_eq!(code, Some(143), "{screen}");
    let survivors = std::process::Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(survivors.stdout.is_empty(), "the tool was killed");
    let sessions = home.run(&["sessions", "--json"]).stdout();
    let id = serde_json::from_str::<serde_json::Value>(&sessions).unwrap()[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = home.run(&["session", "show", &id, "--json"]).stdout();
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["receipts"][0]["state"], "cancelled");

    // At the prompt: nothing runs, keel exits 129 on SIGHUP at once.
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let (screen, code) = interactive_session(&home, &[("\u{0}signal:HUP", Some("stopped by"), 0)]);
    assert!(screen.contains("stopped by SIGHUP"), "{screen}");
    assert_eq!(code, Some(129), "{screen}");
}

#[test]
fn ctrl_c_twice_at_the_prompt_quits_and_says_how_to_resume() {
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let (screen, code) = interactive_session(
        &home,
        &[
            ("what is the answer?\n", Some("tokens: "), 0),
            ("", None, 500),
            // The first clears the line and says what a second does; typing in between starts
            // over.
            (
                "half a line\u{3}",
                Some("(Ctrl-C again, or Ctrl-D, quits)"),
                0,
            ),
            ("/help\n", Some("/transcript"), 0),
            ("\u{3}", Some("(Ctrl-C again, or Ctrl-D, quits)"), 0),
            ("\u{3}", Some("resume it with"), 0),
        ],
    );
    assert_eq!(code, Some(0), "{screen}");
    assert_eq!(
        screen.matches("(Ctrl-C again, or Ctrl-D, quits)").count(),
        2,
        "{screen}"
    );
}

#[test]
fn ctrl_d_quits_and_says_how_to_resume() {
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let (screen, code) = interactive_session(
        &home,
        &[
            ("what is the answer?\n", Some("tokens: "), 0),
            // Ctrl-D at the prompt (once the line editor has the terminal again).
            ("", None, 500),
            ("\u{4}", Some("resume it with"), 0),
        ],
    );
    assert_eq!(code, Some(0), "{screen}");
    let sessions = home.run(&["sessions", "--json"]).stdout();
    let id = serde_json::from_str::<serde_json::Value>(&sessions).unwrap()[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        screen.contains(&format!(
            "session {id} is saved · resume it with: keel -c   (or: keel --session {id})"
        )),
        "{screen}"
    );
}

#[test]
fn tab_completes_a_mention_and_alt_enter_makes_a_multi_line_prompt() {
    let (home, mock) = scripted("chat", r#"{"steps": [{"say": "Seen both lines."}]}"#, "");
    std::fs::write(home.path().join("notes.txt"), "pumpkin\n").unwrap();
    let screen = interactive_until(
        &home,
        &[
            ("explain @notes", None, 300),
            ("\t", Some("@notes.txt"), 0),
            // Alt+Enter: a new line in the prompt, nothing sent yet.
            ("\u{1b}\r", None, 300),
            ("and the second line\n", Some("Seen both lines."), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert_eq!(mock.requests().len(), 1, "{screen}");
    let user = last_user_message(&mock);
    assert!(
        user.starts_with(
            "explain @notes.txt\nand the second line\n\n<attached path=\"notes.txt\">"
        ),
        "{user}"
    );
    assert!(user.contains("pumpkin"), "{user}");
}

#[test]
fn a_refusal_with_a_note_reaches_the_model() {
    let (home, mock) = scripted(
        "chat",
        r#"{"steps": [{"tool": "bash", "args": {"command": "rm -rf build"}}, {"say": "Understood."}]}"#,
        "",
    );
    let screen = interactive_until(
        &home,
        &[
            ("clean up\n", Some("[N]o + note"), 0),
            ("N\n", Some("note for the model"), 0),
            (
                "keep the build directory, use cargo clean\n",
                Some("Understood."),
                0,
            ),
            ("/quit\n", None, 300),
        ],
    );
    let body = mock.requests().last().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        body.contains("The user's note: keep the build directory, use cargo clean"),
        "{body}\n{screen}"
    );
    assert!(screen.contains("denied"), "{screen}");
}
