//! One approval, once (issue 38 item 8): tmux, the real binary and `keel mock`.
//!
//! Invariants checked here:
//! - While it waits, the question is one block: what it is about (the file's name over its
//!   diff, or the whole command), why where the subject does not say, the keys; the call's
//!   card does not repeat it.
//! - Answered, it is one line in the scrollback; nothing of the block stays.
//! - A change longer than the screen shows what fits, counts the rest, and `d` pages it all;
//!   the typeahead guard still holds.

use crate::common::tmux::{Tmux, available};
use crate::common::*;

fn session(
    steps: serde_json::Value,
    size: (u16, u16),
    env: &[(&str, &str)],
    setup: impl FnOnce(&std::path::Path),
) -> (Home, MockProcess, Tmux) {
    let scenario = serde_json::json!({ "steps": steps }).to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    std::fs::write(
        home.path().join("notes.txt"),
        "line one\nhello\nline three\n",
    )
    .unwrap();
    setup(&home.path());
    let tmux = Tmux::start_with_env(&home, &home.path(), &[], size, env);
    tmux.wait_for("mock-model · ask");
    tmux.type_text("go");
    tmux.press(&["Enter"]);
    (home, mock, tmux)
}

#[test]
fn an_edit_and_a_command_are_each_asked_once_and_leave_one_line() {
    if !available() {
        return;
    }
    let (home, _mock, tmux) = session(
        serde_json::json!([
            {"tool": "edit_file", "args": {"path": "notes.txt", "old_string": "hello", "new_string": "hello world"}},
            {"tool": "bash", "args": {"command": "cargo test --workspace"}},
            {"say": "done"}
        ]),
        (100, 30),
        &[],
        |_| {},
    );
    let screen =
        tmux.wait_until_screen("the edit's block", |s| s.contains("? edit_file notes.txt"));
    // The file's name over its diff, once; no card saying the same.
    let head = screen.find("? edit_file notes.txt").unwrap();
    let diff = screen
        .find("2 + hello world")
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(head < diff, "{screen}");
    assert_eq!(screen.matches("notes.txt").count(), 1, "{screen}");
    assert!(!screen.contains("waiting for your answer"), "{screen}");
    assert!(!screen.contains("? allow"), "{screen}");
    tmux.answer("y");
    let screen = tmux.wait_until_screen("the command's block", |s| {
        s.contains("? bash cargo test --workspace")
    });
    assert_eq!(
        screen.matches("cargo test --workspace").count(),
        1,
        "{screen}"
    );
    tmux.answer("n");
    tmux.wait_for("done");
    let history = tmux.history();
    assert_eq!(
        history.matches("✓ edit_file notes.txt · allowed").count(),
        1,
        "{history}"
    );
    assert_eq!(
        history
            .matches("✗ bash cargo test --workspace · denied")
            .count(),
        1,
        "{history}"
    );
    // The blocks themselves are gone from the scrollback.
    for gone in ["? edit_file", "? bash", "2 + hello world", "y yes"] {
        assert!(!history.contains(gone), "{gone}:\n{history}");
    }
    assert_eq!(
        std::fs::read_to_string(home.path().join("notes.txt")).unwrap(),
        "line one\nhello world\nline three\n"
    );
}

#[test]
fn why_it_asks_is_said_when_the_command_does_not_say_it() {
    if !available() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x"), "x\n").unwrap();
    let (_home, _mock, tmux) = session(
        serde_json::json!([
            {"tool": "bash", "args": {"command": "cat docs/x"}},
            {"say": "done"}
        ]),
        (100, 30),
        &[],
        |workspace| std::os::unix::fs::symlink(outside.path(), workspace.join("docs")).unwrap(),
    );
    let screen = tmux.wait_until_screen("the command's block", |s| s.contains("? bash cat docs/x"));
    assert!(
        screen.contains("asks because `docs/x` leads outside the workspace"),
        "{screen}"
    );
    tmux.answer("n");
    tmux.wait_for("done");
}

#[test]
fn a_long_change_shows_what_fits_and_d_pages_all_of_it() {
    if !available() {
        return;
    }
    let paged = tempfile::tempdir().unwrap();
    let out = paged.path().join("paged.txt");
    let pager = format!("cat >> {} <", out.display());
    let content: String = (1..=200).map(|n| format!("new line {n}\n")).collect();
    let (_home, _mock, tmux) = session(
        serde_json::json!([
            {"tool": "write_file", "args": {"path": "big.txt", "content": content}},
            {"say": "done"}
        ]),
        (100, 24),
        &[("PAGER", &pager)],
        |_| {},
    );
    let screen = tmux.wait_until_screen("the write's block", |s| s.contains("d shows them all"));
    assert!(screen.contains("? write_file big.txt"), "{screen}");
    assert!(screen.contains("more lines not shown"), "{screen}");
    assert!(screen.lines().count() <= 24);
    tmux.answer("d");
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&out)
        .unwrap_or_default()
        .contains("new line 200")
    {
        assert!(started.elapsed().as_secs() < 10, "never paged");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Back from the pager, the question still waits.
    tmux.wait_until_screen("the block again", |s| s.contains("? write_file big.txt"));
    tmux.answer("n");
    tmux.wait_for("done");
}
