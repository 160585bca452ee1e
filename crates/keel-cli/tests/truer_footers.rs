//! Fewer, truer footers (issue 38 item 10): tmux, the real binary and `keel mock`.
//!
//! Invariants checked here:
//! - A write keel's own policy refuses (outside the workspace) is a denial, not a failure: the
//!   turn is ready, and the card says so in a person's words.
//! - A declined call's card never shows what was written for the model.
//! - "The earlier offer … no longer applies" only where that offer was shown.

use crate::common::tmux::{Tmux, available};
use crate::common::*;

fn start(home: &Home, args: &[&str]) -> Tmux {
    let tmux = Tmux::start(home, &home.path(), args, (100, 30));
    tmux.wait_for("mock-model ·");
    tmux
}

#[test]
fn a_write_outside_the_workspace_is_a_denial_and_the_turn_is_ready() {
    if !available() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("elsewhere.txt");
    let scenario = serde_json::json!({"steps": [
        {"tool": "write_file", "args": {"path": target.to_str().unwrap(), "content": "x"}},
        {"say": "I could not write it there."}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let tmux = start(&home, &["--yes"]);
    tmux.type_text("write it");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("tokens:");
    assert!(
        shown.contains("⎿ denied · outside the workspace: keel only writes inside it"),
        "{shown}"
    );
    assert!(!shown.contains("not ready"), "{shown}");
    assert!(!shown.contains("continue checks"), "{shown}");
    assert!(!target.exists());
}

#[test]
fn a_declined_calls_card_says_what_the_person_did_not_what_the_model_is_told() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "cargo test --workspace"}},
        {"say": "Understood."}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let tmux = start(&home, &[]);
    tmux.type_text("test it");
    tmux.press(&["Enter"]);
    tmux.wait_until_screen("the question", |s| s.contains("? bash cargo test"));
    tmux.answer("n");
    let shown = tmux.wait_for("Understood.");
    assert!(shown.contains("⎿ denied · you declined it"), "{shown}");
    for model_words in [
        "Do not retry",
        "ask the user or take another way",
        "was not run",
    ] {
        assert!(!shown.contains(model_words), "{model_words}: {shown}");
    }
}

#[test]
fn an_offers_expiry_is_said_only_where_the_offer_was_shown() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "exit 3"}},
        {"say": "It failed."},
        {"say": "Something else."},
        {"tool": "bash", "args": {"command": "exit 3"}},
        {"say": "It failed again."},
        {"say": "Fresh start."}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    // Here: the offer is shown, and its expiry with it.
    let tmux = start(&home, &["--yes"]);
    tmux.type_text("run it");
    tmux.press(&["Enter"]);
    // The footer follows the answer: wait for both, not the first.
    tmux.wait_until_screen("the answer and its footer", |s| {
        s.contains("It failed.") && s.contains("not ready")
    });
    tmux.type_text("something else");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_until_screen("the answer and the expiry", |s| {
        s.contains("Something else.") && s.contains("no longer applies")
    });
    assert_eq!(shown.matches("no longer applies").count(), 1, "{shown}");
    tmux.press(&["C-d"]);
    tmux.wait_for("[keel exited");
    drop(tmux);
    // An offer made in a headless run nobody sees here: its expiry is not news.
    let run = home.run(&["run", "--yes", "-c", "run it again"]);
    assert!(run.stderr().contains("not ready"), "{}", run.stderr());
    let tmux = start(&home, &["-c"]);
    tmux.type_text("start over");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("Fresh start.");
    assert!(!shown.contains("no longer applies"), "{shown}");
}
