//! The live TUI's keys end to end under tmux against `keel mock`: what "always" covers, Esc
//! while typing during a turn, and the other keys a person presses at the live region.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::tmux::{Tmux, available};
use common::{scripted, tool_messages};

#[test]
fn always_for_a_command_covers_its_program_and_subcommand_only() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "echo first > first.txt"}},
        {"tool": "bash", "args": {"command": "git status"}},
        {"tool": "bash", "args": {"command": "git status --short"}},
        {"tool": "bash", "args": {"command": "git stash list"}},
        {"say": "All done."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("look around");
    tmux.press(&["Enter"]);
    // Any other command is covered by its exact words, and the key says so.
    tmux.wait_for("a always for echo first (this session, never saved)");
    tmux.answer("y");
    tmux.wait_for("a always for git status (this session, never saved)");
    tmux.answer("a");
    // `git status --short` runs without a question; `git stash` is asked about.
    tmux.wait_for("a always for git stash (this session, never saved)");
    assert!(
        tmux.everything()
            .contains("git status is allowed for the rest of this session (never saved)"),
        "{}",
        tmux.everything()
    );
    tmux.answer("n");
    tmux.wait_for("All done.");
    let results = tool_messages(&mock);
    assert_eq!(results.len(), 4, "{results:#?}");
    for allowed in &results[..3] {
        assert!(allowed.contains("[exit code "), "{results:#?}");
    }
    assert!(results[3].starts_with("denied:"), "{results:#?}");
}

#[test]
fn a_command_line_keel_cannot_read_in_full_has_no_always() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "echo $(id -u)"}},
        {"tool": "bash", "args": {"command": "echo $(id -u)"}},
        {"say": "All done."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("who am i");
    tmux.press(&["Enter"]);
    let asked = tmux.wait_for("N no + note");
    assert!(!asked.contains("always"), "{asked}");
    // `a` is not an answer here: the question stays.
    tmux.press(&["a"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(tmux.screen().contains("N no + note"), "{}", tmux.screen());
    tmux.answer("y");
    // The same line is asked about again.
    tmux.wait_until_screen("asked again", |screen| {
        screen.contains("N no + note") && screen.contains("allowed")
    });
    tmux.answer("y");
    tmux.wait_for("All done.");
    assert_eq!(tool_messages(&mock).len(), 2);
}
