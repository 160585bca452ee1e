//! Rewind and `/undo`: the files a turn's file tools changed come back from their
//! checkpoints, the conversation becomes a new history revision, receipts stay, and what
//! commands did is named, never guessed.

use crate::common::*;
use serde_json::{Value, json};

/// A turn that writes a new file, edits an existing one and runs a command that makes a
/// third; then a second answer for the prompt after the rewind.
fn one_changing_turn() -> String {
    json!({"steps": [
        {"tool": "write_file", "args": {"path": "new.txt", "content": "hello\n"}},
        {"tool": "edit_file", "args": {"path": "kept.txt", "old_string": "old", "new_string": "new"}},
        {"tool": "bash", "args": {"command": "echo made > made.txt"}},
        {"say": "Changed three files."},
        {"say": "Fresh start."},
    ]})
    .to_string()
}

fn read(home: &Home, name: &str) -> Option<String> {
    std::fs::read_to_string(home.path().join(name)).ok()
}

fn body(request: &Value) -> Value {
    serde_json::from_str(request["body"].as_str().unwrap()).unwrap()
}

#[test]
fn rewind_restores_a_turns_files_and_conversation_and_names_what_it_cannot() {
    let (home, mock) = scripted("chat", &one_changing_turn(), "");
    std::fs::write(home.path().join("kept.txt"), "old text\n").unwrap();
    let run = home.run(&["run", "--yes", "--json", "change things"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(read(&home, "new.txt").as_deref(), Some("hello\n"));
    assert_eq!(read(&home, "kept.txt").as_deref(), Some("new text\n"));
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    let before = session_json(&home, &session, &[]);

    let rewound = home.run(&["session", "rewind", &session, "--to", "1"]);
    assert_eq!(rewound.code(), 0, "{}", rewound.stderr());
    assert_eq!(
        read(&home, "new.txt"),
        None,
        "a file the turn created is gone"
    );
    assert_eq!(read(&home, "kept.txt").as_deref(), Some("old text\n"));
    assert_eq!(
        read(&home, "made.txt").as_deref(),
        Some("made\n"),
        "a command's effect is not guessed at"
    );
    let said = rewound.stderr();
    assert!(
        said.contains("not restored: bash: `echo made > made.txt`"),
        "{said}"
    );
    assert!(
        said.contains("conversation: back to before turn 1"),
        "{said}"
    );

    let after = session_json(&home, &session, &[]);
    let revisions = after["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 2);
    assert_eq!(revisions[1]["reason"], "rewind");
    let roles: Vec<&str> = after["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["context"], "the context block stays");
    assert_eq!(
        after["receipts"], before["receipts"],
        "receipts are untouched"
    );

    // The next request starts from the pre-turn prefix: system, tools and the context block.
    let next = home.run(&[
        "run",
        "--yes",
        "--json",
        "--session",
        &session,
        "start over",
    ]);
    assert_eq!(next.code(), 0, "{}", next.stderr());
    let requests = mock.requests();
    let (first, last) = (body(&requests[0]), body(requests.last().unwrap()));
    assert_eq!(first["tools"], last["tools"]);
    let messages = last["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0], first["messages"][0]);
    let head = first["messages"][1]["content"].as_str().unwrap();
    let context = head.strip_suffix("change things").unwrap();
    assert_eq!(
        messages[1]["content"].as_str().unwrap(),
        format!("{context}start over")
    );
}

#[test]
fn a_file_changed_after_the_turn_is_a_conflict_left_alone_unless_forced() {
    let (home, _mock) = scripted("chat", &one_changing_turn(), "");
    std::fs::write(home.path().join("kept.txt"), "old text\n").unwrap();
    let run = home.run(&["run", "--yes", "--json", "change things"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    std::fs::write(home.path().join("kept.txt"), "my own edit\n").unwrap();

    let code_only = home.run(&["session", "rewind", &session, "--to", "1", "--code"]);
    assert_eq!(code_only.code(), 1, "{}", code_only.stderr());
    assert!(
        code_only
            .stderr()
            .contains("kept.txt: it changed after turn 1 wrote it"),
        "{}",
        code_only.stderr()
    );
    assert_eq!(read(&home, "kept.txt").as_deref(), Some("my own edit\n"));
    assert_eq!(read(&home, "new.txt"), None, "the rest is restored");
    assert!(code_only.stderr().contains("conversation: unchanged"));
    assert_eq!(
        session_json(&home, &session, &[])["revisions"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "--code leaves the conversation"
    );

    let forced = home.run(&[
        "session", "rewind", &session, "--to", "1", "--code", "--force",
    ]);
    assert_eq!(forced.code(), 0, "{}", forced.stderr());
    assert_eq!(read(&home, "kept.txt").as_deref(), Some("old text\n"));
}

#[test]
fn a_crash_around_a_file_write_can_still_be_rewound_and_nothing_reruns() {
    for point in ["after_receipt_started", "before_result_commit"] {
        let steps = json!({"steps": [
            {"tool": "write_file", "args": {"path": "notes.txt", "content": "rewritten\n"}},
            {"say": "Done."},
        ]});
        let (home, mock) = scripted("chat", &steps.to_string(), "");
        std::fs::write(home.path().join("notes.txt"), "original\n").unwrap();
        let killed = home
            .keel(&["run", "--yes", "--json", "rewrite notes"])
            .env("KEEL_KILL_AT", point)
            .output()
            .unwrap();
        assert!(
            killed.status.code().is_none(),
            "{point}: killed by the signal"
        );
        let sessions: Value =
            serde_json::from_str(&home.run(&["sessions", "--json"]).stdout()).unwrap();
        let session = sessions[0]["id"].as_str().unwrap().to_string();
        let rewound = home.run(&["session", "rewind", &session, "--to", "1"]);
        assert_eq!(rewound.code(), 0, "{point}: {}", rewound.stderr());
        assert_eq!(
            read(&home, "notes.txt").as_deref(),
            Some("original\n"),
            "{point}"
        );
        let shown = session_json(&home, &session, &[]);
        assert_eq!(shown["receipts"][0]["state"], "unknown", "{point}");
        assert_eq!(mock.requests().len(), 1, "{point}: nothing was sent again");
    }
}

#[test]
fn undo_in_the_interactive_session_rewinds_the_last_turn() {
    let (home, _mock) = scripted("chat", &one_changing_turn(), "");
    home.prepend_config("permission_mode = \"auto\"");
    std::fs::write(home.path().join("kept.txt"), "old text\n").unwrap();
    let screen = crate::common::terminal::interactive_until(
        &home,
        &[
            ("change things\n", Some("Changed three files."), 0),
            ("/undo\n", Some("conversation: back to before turn 1"), 0),
            ("/undo\n", Some("nothing to undo"), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(screen.contains("restored"), "{screen}");
    assert_eq!(read(&home, "kept.txt").as_deref(), Some("old text\n"));
    assert_eq!(read(&home, "new.txt"), None);
}

/// Two turns that each write `a.txt`.
fn two_writes() -> String {
    json!({"steps": [
        {"tool": "write_file", "args": {"path": "a.txt", "content": "one\n"}},
        {"say": "First."},
        {"tool": "write_file", "args": {"path": "a.txt", "content": "two\n"}},
        {"say": "Second."},
    ]})
    .to_string()
}

fn session_of(run: &Run) -> String {
    run.events()[0]["session_id"].as_str().unwrap().to_string()
}

#[test]
fn undoing_turn_by_turn_finds_no_false_conflict_and_an_edit_between_turns_is_one() {
    let (home, _mock) = scripted("chat", &two_writes(), "");
    std::fs::write(home.path().join("a.txt"), "zero\n").unwrap();
    let first = home.run(&["run", "--yes", "--json", "one"]);
    let session = session_of(&first);
    let second = home.run(&["run", "--yes", "--json", "--session", &session, "two"]);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    assert_eq!(read(&home, "a.txt").as_deref(), Some("two\n"));
    let undo_two = home.run(&["session", "rewind", &session, "--to", "2"]);
    assert_eq!(undo_two.code(), 0, "{}", undo_two.stderr());
    assert_eq!(read(&home, "a.txt").as_deref(), Some("one\n"));
    let undo_one = home.run(&["session", "rewind", &session, "--to", "1"]);
    assert_eq!(
        undo_one.code(),
        0,
        "no false conflict: {}",
        undo_one.stderr()
    );
    assert_eq!(read(&home, "a.txt").as_deref(), Some("zero\n"));

    // The user's edit between two turns would be lost by going back past both: a conflict.
    let (home, _mock) = scripted("chat", &two_writes(), "");
    let first = home.run(&["run", "--yes", "--json", "one"]);
    let session = session_of(&first);
    std::fs::write(home.path().join("a.txt"), "mine\n").unwrap();
    let second = home.run(&["run", "--yes", "--json", "--session", &session, "two"]);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    let back = home.run(&["session", "rewind", &session, "--to", "1", "--code"]);
    assert_eq!(back.code(), 1, "{}", back.stderr());
    assert!(
        back.stderr()
            .contains("it changed between turn 1 and turn 2"),
        "{}",
        back.stderr()
    );
    assert_eq!(read(&home, "a.txt").as_deref(), Some("two\n"));
}

#[test]
fn a_rewind_never_follows_a_link_swapped_into_the_path() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "sub/target.txt", "content": "made\n"}},
        {"tool": "write_file", "args": {"path": "linked.txt", "content": "made\n"}},
        {"say": "Made."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let run = home.run(&["run", "--yes", "--json", "make them"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = session_of(&run);
    // After the turn: `sub` becomes a link to a directory outside with the same file, and
    // `linked.txt` a link to a file outside.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("target.txt"), "made\n").unwrap();
    std::fs::write(outside.path().join("precious.txt"), "keep me\n").unwrap();
    std::fs::remove_dir_all(home.path().join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), home.path().join("sub")).unwrap();
    std::fs::remove_file(home.path().join("linked.txt")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("precious.txt"),
        home.path().join("linked.txt"),
    )
    .unwrap();
    let rewound = home.run(&["session", "rewind", &session, "--to", "1", "--force"]);
    let said = rewound.stderr();
    assert_eq!(
        std::fs::read_to_string(outside.path().join("target.txt")).unwrap(),
        "made\n",
        "nothing outside the workspace is removed: {said}"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("precious.txt")).unwrap(),
        "keep me\n",
        "{said}"
    );
    assert!(
        said.contains("not restored: ") && said.contains("sub/target.txt: "),
        "{said}"
    );
    assert!(
        said.contains("linked.txt: a link is there now; keel does not replace it"),
        "{said}"
    );
}

#[test]
fn a_file_holding_keels_key_is_not_kept_and_says_so() {
    let steps = json!({"steps": [
        {"tool": "edit_file", "args": {"path": "deploy.env", "old_string": "A=1", "new_string": "A=2"}},
        {"say": "Edited."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    std::fs::write(home.path().join("deploy.env"), "A=1\nKEY=test-key-1\n").unwrap();
    let run = home.run(&["run", "--yes", "--json", "bump A"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = session_of(&run);
    let db = std::fs::read(home.path().join("state/keel.db")).unwrap();
    assert!(
        !db.windows(b"test-key-1".len()).any(|w| w == b"test-key-1"),
        "the store never holds the key"
    );
    let rewound = home.run(&["session", "rewind", &session, "--to", "1"]);
    assert!(
        rewound
            .stderr()
            .contains("it holds a secret keel keeps out of its store"),
        "{}",
        rewound.stderr()
    );
    assert_eq!(
        read(&home, "deploy.env").as_deref(),
        Some("A=2\nKEY=test-key-1\n")
    );
}

#[test]
fn a_fork_starts_with_the_originals_bytes_and_carries_its_receipts() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo 1 >> effects.log"}},
        {"say": "first answer"},
        {"say": "second answer"},
        {"say": "forked answer"},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let first = home.run(&["run", "--yes", "--json", "first"]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let session = session_of(&first);
    let second = home.run(&["run", "--yes", "--json", "--session", &session, "second"]);
    assert_eq!(second.code(), 0, "{}", second.stderr());

    let forked = home.run(&["session", "fork", &session, "--at", "1"]);
    assert_eq!(forked.code(), 0, "{}", forked.stderr());
    let fork = forked.stdout().trim().to_string();
    assert_ne!(fork, session);
    assert!(
        forked.stderr().contains("Files are as they are now"),
        "{}",
        forked.stderr()
    );
    let run = home.run(&["run", "--yes", "--json", "--session", &fork, "forked"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());

    // Byte for byte, the fork's request begins like the original's turn-2 request.
    let requests = mock.requests();
    let original = requests[2]["body"].as_str().unwrap();
    let from_fork = requests.last().unwrap()["body"].as_str().unwrap();
    assert_eq!(
        bytes_before(original, "second"),
        bytes_before(from_fork, "forked")
    );
    let shown = session_json(&home, &fork, &[]);
    let receipts = shown["receipts"].as_array().unwrap();
    assert_eq!(receipts.len(), 1, "{shown}");
    assert_eq!(receipts[0]["state"], "completed");
    assert_eq!(
        read(&home, "effects.log").as_deref(),
        Some("1\n"),
        "nothing ran again"
    );
    let original_shown = session_json(&home, &session, &[]);
    assert_eq!(
        original_shown["items"].as_array().unwrap().len(),
        7,
        "the original is unchanged: context, two prompts, a call, its result, two answers"
    );

    let beyond = home.run(&["session", "fork", &session, "--at", "5"]);
    assert_eq!(beyond.code(), 2, "{}", beyond.stderr());
    assert!(beyond.stderr().contains("no turn 5"), "{}", beyond.stderr());
}

#[test]
fn fork_in_the_interactive_session_continues_in_the_new_session() {
    let steps = json!({"steps": [{"say": "first answer"}, {"say": "in the fork"}]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let screen = crate::common::terminal::interactive_until(
        &home,
        &[
            ("hello\n", Some("first answer"), 0),
            ("/fork\n", Some("now in the fork"), 0),
            ("again\n", Some("in the fork"), 0),
            ("/quit\n", None, 300),
        ],
    );
    let sessions: Value =
        serde_json::from_str(&home.run(&["sessions", "--json"]).stdout()).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 2, "{screen}");
    let requests = mock.requests();
    let first = body(&requests[0]);
    let last = body(&requests[1]);
    assert_eq!(
        last["messages"][1], first["messages"][1],
        "the same first message"
    );
    assert_eq!(last["messages"].as_array().unwrap().len(), 4);
    // The second prompt went to the fork; the original kept its one turn.
    let counts: Vec<usize> = sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|session| {
            let id = session["id"].as_str().unwrap();
            session_json(&home, id, &[])["items"]
                .as_array()
                .unwrap()
                .len()
        })
        .collect();
    let mut sorted = counts.clone();
    sorted.sort();
    assert_eq!(sorted, [3, 5], "{counts:?}");
    let fork = screen
        .split("forked ")
        .nth(1)
        .and_then(|rest| rest.split(" as ").nth(1))
        .map(|rest| {
            rest.chars()
                .take_while(char::is_ascii_hexdigit)
                .collect::<String>()
        })
        .unwrap();
    assert_eq!(
        session_json(&home, &fork, &[])["items"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
}

#[test]
fn checkpoint_max_bytes_bounds_what_a_session_keeps_and_a_rewind_says_so() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "big.txt", "content": "small now\n"}},
        {"say": "Rewritten."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("checkpoint_max_bytes = 10");
    std::fs::write(home.path().join("big.txt"), "twenty bytes of text").unwrap();
    let run = home.run(&["run", "--yes", "--json", "rewrite it"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rewound = home.run(&["session", "rewind", &session_of(&run), "--to", "1"]);
    assert!(
        rewound
            .stderr()
            .contains("big.txt: not kept: larger than the session's 10 bytes of checkpoints"),
        "{}",
        rewound.stderr()
    );
    assert_eq!(read(&home, "big.txt").as_deref(), Some("small now\n"));
}

#[test]
fn a_turn_a_compaction_summarised_is_rewound_from_the_revision_that_held_it() {
    let long = "a long answer that a summary will replace. ".repeat(40);
    let steps = json!({"steps": [
        {"say": format!("one: {long}")},
        {"say": format!("two: {long}")},
        {"say": format!("three: {long}")},
        {"compact": "The user asked three things; all were answered."},
        {"say": "four"},
        {"say": "again"},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let first = home.run(&["run", "--yes", "--json", "first"]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let session = session_of(&first);
    for prompt in ["second", "third", "/compact", "fourth"] {
        let run = home.run(&["run", "--yes", "--json", "--session", &session, prompt]);
        assert_eq!(run.code(), 0, "{prompt}: {}", run.stderr());
    }
    let compacted = session_json(&home, &session, &[]);
    assert_eq!(compacted["revisions"].as_array().unwrap().len(), 2);

    // Back to before turn 2: turn 1 verbatim, from the revision before the compaction.
    let rewound = home.run(&["session", "rewind", &session, "--to", "2", "--conversation"]);
    assert_eq!(rewound.code(), 0, "{}", rewound.stderr());
    let after = session_json(&home, &session, &[]);
    let roles: Vec<&str> = after["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["context", "user", "assistant"], "{after}");
    let run = home.run(&["run", "--yes", "--json", "--session", &session, "again"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // The request begins with the very bytes turn 2's did, up to turn 2's prompt.
    let requests = mock.requests();
    let original = requests[1]["body"].as_str().unwrap();
    let again = requests.last().unwrap()["body"].as_str().unwrap();
    assert_eq!(
        bytes_before(original, "second"),
        bytes_before(again, "again")
    );
}

#[test]
fn a_fork_inside_a_compacted_history_starts_with_the_turns_verbatim() {
    let long = "a long answer that a summary will replace. ".repeat(40);
    let steps = json!({"steps": [
        {"say": format!("one: {long}")},
        {"say": format!("two: {long}")},
        {"compact": "Two questions, both answered."},
        {"say": "forked answer"},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let first = home.run(&["run", "--yes", "--json", "first"]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let session = session_of(&first);
    for prompt in ["second", "/compact"] {
        let run = home.run(&["run", "--yes", "--json", "--session", &session, prompt]);
        assert_eq!(run.code(), 0, "{prompt}: {}", run.stderr());
    }
    let forked = home.run(&["session", "fork", &session, "--at", "1"]);
    assert_eq!(forked.code(), 0, "{}", forked.stderr());
    let fork = forked.stdout().trim().to_string();
    let run = home.run(&["run", "--yes", "--json", "--session", &fork, "forked"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let requests = mock.requests();
    let original = requests[1]["body"].as_str().unwrap();
    let from_fork = requests.last().unwrap()["body"].as_str().unwrap();
    assert_eq!(
        bytes_before(original, "second"),
        bytes_before(from_fork, "forked")
    );
    assert!(
        !from_fork.contains("Two questions"),
        "no summary in the fork"
    );
}

#[test]
fn rewind_without_a_turn_lists_the_turns_to_pick_from() {
    let (home, _mock) = scripted("chat", &two_writes(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let screen = crate::common::terminal::interactive_until(
        &home,
        &[
            ("write one\n", Some("First."), 0),
            ("write two\n", Some("Second."), 0),
            ("/rewind\n", Some("rewind to before turn [2]"), 0),
            ("1\n", Some("conversation: back to before turn 1"), 0),
            ("/rewind\n", Some("nothing to rewind"), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(
        screen.contains("  1  write one") && screen.contains("  2  write two"),
        "{screen}"
    );
    assert_eq!(read(&home, "a.txt"), None, "both turns undone: {screen}");
}

#[test]
fn a_fork_with_code_puts_the_files_back_as_they_were_after_its_turn() {
    let (home, _mock) = scripted("chat", &two_writes(), "");
    let first = home.run(&["run", "--yes", "--json", "one"]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let session = session_of(&first);
    let second = home.run(&["run", "--yes", "--json", "--session", &session, "two"]);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    assert_eq!(read(&home, "a.txt").as_deref(), Some("two\n"));

    let forked = home.run(&["session", "fork", &session, "--at", "1", "--code"]);
    assert_eq!(forked.code(), 0, "{}", forked.stderr());
    assert_eq!(
        read(&home, "a.txt").as_deref(),
        Some("one\n"),
        "{}",
        forked.stderr()
    );
    assert!(
        forked.stderr().contains("as they were after that turn"),
        "{}",
        forked.stderr()
    );
    // The original keeps its conversation; only the files moved.
    let original = session_json(&home, &session, &[]);
    assert_eq!(original["revisions"].as_array().unwrap().len(), 1);

    // A file changed since stops the fork, and nothing is forked.
    let (home, _mock) = scripted("chat", &two_writes(), "");
    let first = home.run(&["run", "--yes", "--json", "one"]);
    let session = session_of(&first);
    let second = home.run(&["run", "--yes", "--json", "--session", &session, "two"]);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    std::fs::write(home.path().join("a.txt"), "mine\n").unwrap();
    let stopped = home.run(&["session", "fork", &session, "--at", "1", "--code"]);
    assert_eq!(stopped.code(), 1, "{}", stopped.stderr());
    assert!(
        stopped.stderr().contains("not forked"),
        "{}",
        stopped.stderr()
    );
    assert_eq!(read(&home, "a.txt").as_deref(), Some("mine\n"));
    let listed = home.run(&["sessions", "--json"]);
    let sessions: Value = serde_json::from_str(&listed.stdout()).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "no fork was made");
}

/// A request body's bytes before the user message that is exactly `prompt`.
fn bytes_before(body: &str, prompt: &str) -> String {
    let at = body
        .find(&format!("{{\"role\":\"user\",\"content\":\"{prompt}\""))
        .unwrap_or_else(|| panic!("{prompt} in {body}"));
    body[..at].to_string()
}
