//! A rewind never loses what a person wrote: a file the user saved while one of keel's
//! commands ran cannot be told from the command's change, so before `keel session rewind` or
//! `/undo` writes it back, what it held is kept — listed apart, with the command that prints
//! it (`keel session show ID --saved PATH`) — and a change made outside any command stays a
//! conflict. Through the real binary, with the edit made while the command waits for it.

use crate::common::repository::{read, repository, session_of};
use crate::common::*;
use serde_json::json;
use std::time::Duration;

const MY_EDIT: &str = "my edit, saved while the command ran\n";

/// A turn whose command says it started, waits for `go`, then changes `tracked.txt`.
fn waiting_turn() -> String {
    json!({"steps": [
        {"tool": "bash", "args": {"command":
            "echo started > started.txt; while [ ! -e go ]; do sleep 0.05; done; echo cmd >> tracked.txt"}},
        {"say": "Done."},
    ]})
    .to_string()
}

/// In the background: once the command has started, save `kept.txt` as a person would, then
/// let the command go on.
fn edit_while_it_runs(home: &Home) -> std::thread::JoinHandle<()> {
    let dir = home.path();
    std::thread::spawn(move || {
        wait_until("the command started", Duration::from_secs(20), || {
            dir.join("started.txt").exists()
        });
        std::fs::write(dir.join("kept.txt"), MY_EDIT).unwrap();
        std::fs::write(dir.join("go"), "").unwrap();
    })
}

fn with_markers_ignored(home: &Home) {
    repository(home);
    std::fs::write(home.path().join(".git/info/exclude"), "started.txt\ngo\n").unwrap();
}

#[test]
fn an_edit_saved_while_a_command_ran_is_kept_before_the_rewind_writes_it_back() {
    let (home, _mock) = scripted("chat", &waiting_turn(), "");
    with_markers_ignored(&home);
    let editing = edit_while_it_runs(&home);
    let run = home.run(&["run", "--yes", "--json", "run it"]);
    editing.join().unwrap();
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = session_of(&run);
    let rewound = home.run(&["session", "rewind", &session, "--to", "1"]);
    assert_eq!(rewound.code(), 0, "{}", rewound.stderr());
    assert_eq!(read(&home, "kept.txt").as_deref(), Some("old text\n"));
    assert_eq!(read(&home, "tracked.txt").as_deref(), Some("tracked\n"));
    let said = rewound.stderr();
    let line = said
        .lines()
        .find(|line| line.contains("kept.txt"))
        .unwrap_or_else(|| panic!("kept.txt is named: {said}"));
    assert!(
        line.contains("changed while a command ran")
            && line.contains(&format!("keel session show {session} --saved")),
        "listed apart, with how to get it back: {line}"
    );
    // What the line says gets the person's bytes back, exactly.
    let path = home.path().join("kept.txt");
    let shown = home.run(&[
        "session",
        "show",
        &session,
        "--saved",
        path.to_str().unwrap(),
    ]);
    assert_eq!(shown.code(), 0, "{}", shown.stderr());
    assert_eq!(shown.stdout(), MY_EDIT);
    let relative = home.run(&["session", "show", &session, "--saved", "kept.txt"]);
    assert_eq!(
        relative.stdout(),
        MY_EDIT,
        "relative to the session's workspace"
    );
    let unknown = home.run(&["session", "show", &session, "--saved", "nope.txt"]);
    assert_eq!(unknown.code(), 2);
    assert!(
        unknown.stderr().contains("kept.txt"),
        "{}",
        unknown.stderr()
    );
}

#[test]
fn undo_in_the_terminal_keeps_and_lists_an_edit_saved_while_a_command_ran() {
    let (home, _mock) = scripted("chat", &waiting_turn(), "");
    home.prepend_config("permission_mode = \"auto\"");
    with_markers_ignored(&home);
    let editing = edit_while_it_runs(&home);
    let screen = crate::common::terminal::interactive_until(
        &home,
        &[
            ("run it\n", Some("Done."), 0),
            ("/undo\n", Some("conversation: back to before turn 1"), 0),
            ("/quit\n", None, 300),
        ],
    );
    editing.join().unwrap();
    assert!(
        screen.contains("kept.txt — it changed while a command ran"),
        "{screen}"
    );
    assert_eq!(read(&home, "kept.txt").as_deref(), Some("old text\n"));
    // The command the screen names gets the bytes back.
    let session = screen
        .split("keel session show ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the way back is on screen: {screen}"))
        .to_string();
    let shown = home.run(&["session", "show", &session, "--saved", "kept.txt"]);
    assert_eq!(shown.stdout(), MY_EDIT, "{}", shown.stderr());
}

#[test]
fn an_edit_made_after_the_command_ended_is_still_a_conflict_never_overwritten() {
    let (home, _mock) = scripted(
        "chat",
        &json!({"steps": [
            {"tool": "bash", "args": {"command": "echo cmd >> kept.txt"}},
            {"say": "Done."},
        ]})
        .to_string(),
        "",
    );
    repository(&home);
    let run = home.run(&["run", "--yes", "--json", "run it"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    std::fs::write(home.path().join("kept.txt"), MY_EDIT).unwrap();
    let rewound = home.run(&["session", "rewind", &session_of(&run), "--to", "1"]);
    assert_eq!(rewound.code(), 1, "{}", rewound.stderr());
    assert!(
        rewound.stderr().contains("conflict"),
        "{}",
        rewound.stderr()
    );
    assert_eq!(read(&home, "kept.txt").as_deref(), Some(MY_EDIT));
}
