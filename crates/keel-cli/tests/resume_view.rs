//! Resuming shows where you were (issue 38 item 6): `keel -c` and `keel --session ID` in tmux,
//! after turns made with `keel run`.
//!
//! Invariants checked here:
//! - The last turns that fit the screen are printed as the person saw them: prompts, rendered
//!   answers, each tool call one line with its state; a line counts the earlier turns and
//!   points to Ctrl-T.
//! - Nothing written for the model shows: the context block, attached files, tool output.

use crate::common::repository::session_of;
use crate::common::tmux::{Tmux, available};
use crate::common::*;

/// A session of three turns: an answer, a command and an answer, a last answer.
fn three_turns() -> (Home, MockProcess, String) {
    let scenario = serde_json::json!({"steps": [
        {"say": "Answer **one**."},
        {"tool": "bash", "args": {"command": "echo COMMAND OUTPUT"}},
        {"say": "Answer two."},
        {"say": "Answer three."},
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    std::fs::write(home.path().join("notes.txt"), "ATTACHED BODY\n").unwrap();
    let first = home.run(&["run", "--json", "first question"]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let session = session_of(&first);
    for prompt in ["second question @notes.txt", "third question"] {
        let run = home.run(&["run", "--session", &session, prompt]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
    }
    (home, mock, session)
}

#[test]
fn resuming_prints_the_recent_turns_as_they_were_seen() {
    if !available() {
        return;
    }
    let (home, _mock, session) = three_turns();
    let tmux = Tmux::start(&home, &home.path(), &["--session", &session], (100, 40));
    let shown = tmux.wait_for("mock-model · ask");
    for seen in [
        "› first question",
        "Answer one.",
        "› second question @notes.txt",
        "● bash echo COMMAND OUTPUT · completed",
        "Answer two.",
        "› third question",
        "Answer three.",
    ] {
        assert!(shown.contains(seen), "{seen}:\n{shown}");
    }
    for hidden in [
        "**one**",
        "ATTACHED BODY",
        "[exit code",
        "<environment>",
        "earlier turn",
    ] {
        assert!(!shown.contains(hidden), "{hidden}:\n{shown}");
    }
    // In order: the last turn last.
    assert!(shown.find("first question") < shown.find("third question"));
}

#[test]
fn a_short_screen_shows_the_last_turns_and_counts_the_rest() {
    if !available() {
        return;
    }
    let (home, _mock, _session) = three_turns();
    let tmux = Tmux::start(&home, &home.path(), &["-c"], (100, 14));
    let shown = tmux.wait_for("mock-model · ask");
    assert!(shown.contains("› third question"), "{shown}");
    assert!(shown.contains("Answer three."), "{shown}");
    assert!(!shown.contains("first question"), "{shown}");
    assert!(
        shown.contains("earlier turns not shown · Ctrl-T shows the whole transcript")
            || shown.contains("earlier turn not shown · Ctrl-T shows the whole transcript"),
        "{shown}"
    );
}
