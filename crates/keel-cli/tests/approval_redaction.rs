//! An approval's preview of an edit never shows one of keel's secrets: a file that holds the
//! provider key beside the line being changed is shown with `[redacted $DEEPSEEK_API_KEY]` on
//! every surface — the terminal's question, the browser's card (`approval/requested`) and
//! serve's waiting list, the editor's permission request — as `keel run --json`'s preview
//! always was. The edit itself is what was asked. Through the real binary.

use crate::common::serve::{Server, wait_until_idle};
use crate::common::terminal::interactive_until;
use crate::common::*;
use serde_json::{Value, json};

/// The key every test home gives keel (`Home::keel`).
const KEY: &str = "test-key-1";
const REDACTED: &str = "[redacted $DEEPSEEK_API_KEY]";

/// A home whose `deploy.sh` holds the key next to the line the model edits.
fn scripted_edit_next_to_the_key() -> (Home, MockProcess) {
    let steps = json!({"steps": [
        {"tool": "edit_file", "args": {"path": "deploy.sh", "old_string": "echo deploy",
            "new_string": "echo ship"}},
        {"say": "changed"},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    std::fs::write(
        home.path().join("deploy.sh"),
        format!("export DEEPSEEK_API_KEY={KEY}\necho deploy\n"),
    )
    .unwrap();
    (home, mock)
}

#[test]
fn the_terminal_question_shows_the_key_redacted() {
    let (home, _mock) = scripted_edit_next_to_the_key();
    let screen = interactive_until(
        &home,
        &[
            ("ship it\n", Some("[N]o + note"), 0),
            ("n\n", Some("tokens: "), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(!screen.contains(KEY), "the key was on screen: {screen}");
    assert!(screen.contains(REDACTED), "{screen}");
    assert!(
        screen.contains("echo ship"),
        "the change is shown: {screen}"
    );
}

#[test]
fn the_browser_card_and_the_waiting_list_show_the_key_redacted() {
    let (home, _mock) = scripted_edit_next_to_the_key();
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "ship it"})).0, 202);
    let events = server.events(&session, None, "approval/requested", 100);
    let asked = events
        .iter()
        .find(|e| e["type"] == "approval/requested")
        .unwrap();
    let card = asked.to_string();
    assert!(!card.contains(KEY), "the card: {card}");
    assert!(card.contains(REDACTED), "{card}");
    let (_, status) = server.api("GET", &format!("/api/sessions/{session}"), Value::Null);
    let waiting = status["waiting"].to_string();
    assert!(!waiting.contains(KEY), "the waiting list: {waiting}");
    assert!(waiting.contains(REDACTED), "{waiting}");
    let call = asked["call_id"].as_str().unwrap();
    server.api(
        "POST",
        &format!("/api/sessions/{session}/approvals/{call}"),
        json!({"decision": "deny"}),
    );
    wait_until_idle(&server, &session);
}

#[test]
fn the_editors_permission_request_never_holds_the_key() {
    let (home, _mock) = scripted_edit_next_to_the_key();
    let (request, said) = acp_first_permission(&home, "ship", "reject_once");
    let request = request.unwrap_or_else(|| panic!("a permission request: {said}"));
    assert!(!said.contains(KEY), "the editor was sent the key: {said}");
    // The change itself, as the terminal shows it, with the key redacted.
    let diff = &request["params"]["toolCall"]["content"][1];
    assert_eq!(diff["type"], "diff", "{request}");
    assert_eq!(
        diff["oldText"],
        format!("export DEEPSEEK_API_KEY={REDACTED}\necho deploy\n")
    );
    assert_eq!(
        diff["newText"],
        format!("export DEEPSEEK_API_KEY={REDACTED}\necho ship\n")
    );
}
