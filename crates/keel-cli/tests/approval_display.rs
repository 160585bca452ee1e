//! What a person approves is what runs, on every surface: a command that hides its start
//! behind 9,000 spaces is shown folded (`⟨9,000 spaces⟩`) with its head next to the question —
//! in the terminal (under a pseudo-terminal), on the browser's card (the event and the
//! waiting list of `keel serve`) and in the editor's permission request (`keel acp`).

use crate::common::serve::{Server, wait_until_idle};
use crate::common::terminal::interactive_until;
use crate::common::*;
use serde_json::{Value, json};

fn hiding_command() -> String {
    format!("touch PWNED;{}echo harmless", " ".repeat(9000))
}

const FOLDED: &str = "touch PWNED;⟨9,000 spaces⟩echo harmless";

fn scripted_hiding() -> (Home, MockProcess) {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": hiding_command()}},
        {"say": "done"},
    ]});
    scripted("chat", &steps.to_string(), "")
}

#[test]
fn the_terminal_question_shows_the_hidden_start_next_to_it() {
    let (home, _mock) = scripted_hiding();
    let screen = interactive_until(
        &home,
        &[
            ("go\n", Some("[N]o + note"), 0),
            ("n\n", Some("tokens: "), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(screen.contains(FOLDED), "{screen}");
    assert!(!screen.contains(&" ".repeat(200)), "no screen of blanks");
    let question = screen
        .lines()
        .find(|line| line.contains("[N]o + note"))
        .unwrap();
    assert!(
        question.contains("bash: touch PWNED;"),
        "the head stands next to the question: {question}"
    );
    assert!(!home.path().join("PWNED").exists());
}

#[test]
fn the_browser_card_and_the_waiting_list_get_the_folded_view() {
    let (home, _mock) = scripted_hiding();
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "go"})).0, 202);
    let events = server.events(&session, None, "approval/requested", 100);
    let asked = events
        .iter()
        .find(|e| e["type"] == "approval/requested")
        .unwrap();
    assert_eq!(asked["view"]["lines"][0], FOLDED, "{asked}");
    assert_eq!(asked["view"]["head"], FOLDED);
    assert_eq!(asked["view"]["line_count"], 1);
    let (_, status) = server.api("GET", &format!("/api/sessions/{session}"), Value::Null);
    assert_eq!(status["waiting"][0]["view"]["head"], FOLDED, "{status}");
    let call = asked["call_id"].as_str().unwrap();
    server.api(
        "POST",
        &format!("/api/sessions/{session}/approvals/{call}"),
        json!({"decision": "deny"}),
    );
    wait_until_idle(&server, &session);
}

#[test]
fn the_editors_permission_request_is_folded_too() {
    let (home, _mock) = scripted_hiding();
    let (request, _) = acp_first_permission(&home, "go", "reject_once");
    let request = request.expect("a permission request");
    let tool_call = &request["params"]["toolCall"];
    assert_eq!(tool_call["title"], format!("bash {FOLDED}"), "{tool_call}");
    assert_eq!(tool_call["content"][0]["content"]["text"], FOLDED);
    assert!(!home.path().join("PWNED").exists());
}

#[test]
fn an_edit_is_approved_after_its_diff_was_on_screen() {
    let steps = json!({"steps": [
        {"tool": "edit_file", "args": {"path": "notes.txt", "old_string": "color = red", "new_string": "color = blue"}},
        {"say": "changed"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    std::fs::write(
        home.path().join("notes.txt"),
        "name = keel\ncolor = red\nsize = 3\n",
    )
    .unwrap();
    let bytes = interactive_until(
        &home,
        &[
            ("make it blue\n", Some("[a]lways for edit_file"), 0),
            ("y\n", Some("changed"), 0),
            ("/quit\n", None, 300),
        ],
    );
    let rows: Vec<String> = crate::common::terminal::screen_of(&bytes)
        .rows(0, 80)
        .collect();
    let at = |text: &str| {
        rows.iter()
            .position(|row| row.contains(text))
            .unwrap_or_else(|| panic!("no {text:?} on screen:\n{}", rows.join("\n")))
    };
    let question = at("edit_file: notes.txt — [y]es");
    assert!(at("+1 −1") < question, "{}", rows.join("\n"));
    assert!(at("@@ -1,3 +1,3 @@") < question);
    assert!(at("2   - color = red") < question, "{}", rows.join("\n"));
    assert!(at("2 + color = blue") < question);
    assert!(at("1 1   name = keel") < question);
    assert_eq!(
        std::fs::read_to_string(home.path().join("notes.txt")).unwrap(),
        "name = keel\ncolor = blue\nsize = 3\n"
    );
}
