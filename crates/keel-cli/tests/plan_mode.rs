//! Plan mode: nothing changes until the person approves the plan the model proposes with
//! `propose_plan`; approved, keel leaves plan mode for the mode they chose and the turn goes
//! on; rejected, the note reaches the model. The tool specs and system prompt are the same
//! in every mode.

use crate::common::serve::{Server, wait_until_idle};
use crate::common::*;
use serde_json::{Value, json};

fn body(request: &Value) -> Value {
    serde_json::from_str(request["body"].as_str().unwrap()).unwrap()
}

/// A plan the person sends back, a better one they approve, then the write it plans.
fn rejected_then_approved() -> String {
    json!({"steps": [
        {"tool": "propose_plan", "args": {"plan": "1. Rewrite everything"}},
        {"tool": "propose_plan", "args": {"plan": PLAN}},
        {"tool": "write_file", "args": {"path": "done.txt", "content": "y"}},
        {"say": "Renamed."},
    ]})
    .to_string()
}

const PLAN: &str = "## Plan\n\n1. Rename `parse` to `parse_line`\n2. Update the callers";

#[test]
fn a_headless_plan_run_refuses_changes_and_ends_with_the_plan_as_its_answer() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "early.txt", "content": "x"}},
        {"tool": "bash", "args": {"command": "cat notes.txt; touch made-by-bash"}},
        {"tool": "read_file", "args": {"path": "notes.txt"}},
        {"tool": "propose_plan", "args": {"plan": PLAN}},
        {"say": "never asked for"},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    std::fs::write(home.path().join("notes.txt"), "the notes\n").unwrap();
    let run = home.run(&["run", "--permission-mode", "plan", "rename parse"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.stdout().trim(), PLAN, "the plan is the answer");
    assert!(!home.path().join("early.txt").exists());
    assert!(!home.path().join("made-by-bash").exists());
    let requests = mock.requests();
    assert_eq!(
        requests.len(),
        4,
        "the turn ends with the plan: no request after it"
    );
    let tools = tool_messages(&mock);
    let refusal = &tools[0];
    assert!(
        refusal.contains("keel is in plan mode") && refusal.contains("was not run"),
        "{refusal}"
    );
    // A command runs, confined to reading (the sandbox is enforced here, as on CI).
    let command = &tools[1];
    assert!(command.starts_with("the notes"), "{command}");
    assert!(tools[2].contains("the notes"));
    let session = session_json(&home, &latest_session(&home), &[]);
    let states: Vec<(&str, &str)> = session["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["tool"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states[0], ("write_file", "denied"));
    assert_eq!(session["receipts"][1]["sandbox"], "read-only");
    assert_eq!(states[2], ("read_file", "completed"));
    assert_eq!(states[3], ("propose_plan", "completed"));
}

/// The id of the workspace's latest session.
fn latest_session(home: &Home) -> String {
    let listed = home.run(&["sessions", "--json"]);
    let sessions: Value = serde_json::from_str(&listed.stdout()).unwrap();
    sessions[0]["id"].as_str().unwrap().to_string()
}

#[test]
fn the_tool_specs_and_system_prompt_are_the_same_in_every_mode() {
    let mut sent = Vec::new();
    for mode in ["read-only", "plan", "ask", "auto"] {
        let steps = json!({"steps": [{"say": "hi"}]});
        let (home, mock) = scripted("chat", &steps.to_string(), "");
        let run = home.run(&["run", "--permission-mode", mode, "hello"]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        let request = body(&mock.requests()[0]);
        sent.push((
            mode,
            request["tools"].clone(),
            request["messages"][0].clone(),
        ));
    }
    let (_, tools, system) = &sent[0];
    assert!(tools.to_string().contains("\"propose_plan\""));
    for (mode, other_tools, other_system) in &sent[1..] {
        assert_eq!(other_tools, tools, "tools in {mode}");
        assert_eq!(other_system, system, "system prompt in {mode}");
    }
}

#[test]
fn propose_plan_outside_plan_mode_changes_nothing_and_says_proceed() {
    let steps = json!({"steps": [
        {"tool": "propose_plan", "args": {"plan": PLAN}},
        {"say": "Proceeding."},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let run = home.run(&["run", "--yes", "go"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.stdout().trim(), "Proceeding.");
    let sent = mock.requests().last().unwrap().to_string();
    assert!(sent.contains("not in plan mode"), "{sent}");
}

#[test]
fn slash_plan_runs_one_prompt_in_plan_mode() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "early.txt", "content": "x"}},
        {"tool": "propose_plan", "args": {"plan": PLAN}},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let run = home.run(&["run", "--yes", "/plan rename parse"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        !home.path().join("early.txt").exists(),
        "plan mode beats --yes"
    );
    assert_eq!(run.stdout().trim(), PLAN);
}

/// The next `approval/requested` of `session` after event `after`: (its event, the last id).
fn next_question(server: &Server, session: &str, after: u64) -> (Value, u64) {
    let events = server.events(session, Some(after), "approval/requested", usize::MAX);
    let asked = events
        .iter()
        .find(|e| e["type"] == "approval/requested")
        .cloned()
        .expect("a question");
    (asked, ids(&events).into_iter().max().unwrap())
}

fn ids(events: &[Value]) -> Vec<u64> {
    crate::common::serve::ids(events)
}

#[test]
fn over_http_a_rejected_plan_takes_a_note_and_an_approved_one_switches_the_mode() {
    let (home, mock) = scripted("chat", &rejected_then_approved(), "");
    let server = Server::start(&home, &["--permission-mode", "plan"]);
    let session = server.new_session();
    let status = |server: &Server| {
        server
            .api("GET", &format!("/api/sessions/{session}"), Value::Null)
            .1
    };
    assert_eq!(status(&server)["mode"], "plan");
    assert_eq!(server.submit(&session, json!({"input": "rename"})).0, 202);

    let (first, seen) = next_question(&server, &session, 0);
    assert_eq!(first["name"], "propose_plan");
    let html = first["plan_html"].as_str().unwrap();
    assert!(
        html.contains("<ol>") && html.contains("Rewrite everything"),
        "{html}"
    );
    let path = format!(
        "/api/sessions/{session}/approvals/{}",
        first["call_id"].as_str().unwrap()
    );
    let refused = server.api("POST", &path, json!({"decision": "deny", "mode": "auto"}));
    assert_eq!(refused.0, 400, "a mode goes with allow only: {}", refused.1);
    for mode in ["yolo", "read-only", "plan"] {
        let refused = server.api("POST", &path, json!({"decision": "allow", "mode": mode}));
        assert_eq!(refused.0, 400, "{mode}: {}", refused.1);
    }
    let note = "smaller steps: only the rename";
    assert_eq!(
        server
            .api("POST", &path, json!({"decision": "deny", "note": note}))
            .0,
        200
    );

    let (second, _) = next_question(&server, &session, seen);
    assert_eq!(second["name"], "propose_plan");
    let rejected = mock.requests().last().unwrap().to_string();
    assert!(
        rejected.contains("keel stays in plan mode") && rejected.contains(note),
        "{rejected}"
    );
    assert_eq!(status(&server)["mode"], "plan");
    let path = format!(
        "/api/sessions/{session}/approvals/{}",
        second["call_id"].as_str().unwrap()
    );
    assert_eq!(
        server
            .api("POST", &path, json!({"decision": "allow", "mode": "auto"}))
            .0,
        200
    );
    wait_until_idle(&server, &session);
    assert!(
        home.path().join("done.txt").exists(),
        "the turn went on in auto"
    );
    assert_eq!(status(&server)["mode"], "auto");
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let approved = requests[2].to_string();
    assert!(
        approved.contains("The user approved the plan. The permission mode is now auto"),
        "{approved}"
    );
}

#[test]
fn a_mode_goes_with_approving_a_plan_only() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "one.txt", "content": "1"}},
        {"say": "Done."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "write"})).0, 202);
    let (asked, _) = next_question(&server, &session, 0);
    let path = format!(
        "/api/sessions/{session}/approvals/{}",
        asked["call_id"].as_str().unwrap()
    );
    // Approving one write is no way to switch the whole session to auto.
    let refused = server.api("POST", &path, json!({"decision": "allow", "mode": "auto"}));
    assert_eq!(refused.0, 400, "{}", refused.1);
    assert_eq!(
        server.api("POST", &path, json!({"decision": "allow"})).0,
        200
    );
    wait_until_idle(&server, &session);
    let status = server
        .api("GET", &format!("/api/sessions/{session}"), Value::Null)
        .1;
    assert_eq!(status["mode"], "ask");
}

#[test]
fn a_plan_in_a_batch_of_reads_is_still_asked_and_a_rule_cannot_make_one() {
    // Plan mode: a read and a plan in one round; the plan is still put to the person.
    let steps = json!({"steps": [
        {"tools": [
            {"tool": "read_file", "args": {"path": "notes.txt"}},
            {"tool": "propose_plan", "args": {"plan": PLAN}},
        ]},
        {"say": "never asked for"},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    std::fs::write(home.path().join("notes.txt"), "the notes\n").unwrap();
    let run = home.run(&["run", "--permission-mode", "plan", "rename parse"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.stdout().trim(), PLAN);
    assert_eq!(mock.requests().len(), 1, "the plan ended the turn");

    // Outside plan mode an ask rule naming propose_plan asks nothing: the tool says proceed.
    let steps = json!({"steps": [
        {"tool": "propose_plan", "args": {"plan": PLAN}},
        {"say": "Proceeding."},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    home.append_config("[permissions]\nask = [\"propose_plan\"]\n");
    let run = home.run(&["run", "--json", "go"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        !run.stdout().contains("approval/requested"),
        "{}",
        run.stdout()
    );
    assert!(
        mock.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("not in plan mode")
    );
}

#[test]
fn a_session_resumed_in_another_mode_is_told_once() {
    let steps = json!({"steps": [{"say": "one"}, {"say": "two"}, {"say": "three"}]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    assert_eq!(home.run(&["run", "--yes", "first"]).code(), 0);
    let session = latest_session(&home);
    let second = home.run(&[
        "run",
        "--permission-mode",
        "plan",
        "--session",
        &session,
        "second",
    ]);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    let told = last_user_message(&mock);
    assert!(
        told.starts_with("[keel: the user switched the permission mode to plan")
            && told.ends_with("second"),
        "{told}"
    );
    let third = home.run(&[
        "run",
        "--permission-mode",
        "plan",
        "--session",
        &session,
        "third",
    ]);
    assert_eq!(third.code(), 0, "{}", third.stderr());
    assert_eq!(
        last_user_message(&mock),
        "third",
        "told once, and remembered"
    );
}

#[test]
fn slash_plan_in_the_line_mode_takes_a_note_then_an_approval_into_auto() {
    let (home, mock) = scripted("chat", &rejected_then_approved(), "");
    let screen = crate::common::terminal::interactive_until(
        &home,
        &[
            ("/plan rename parse\n", Some("[N]o + note"), 0),
            ("N only the rename\n", Some("Update the callers"), 0),
            ("a\n", Some("Renamed."), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(screen.contains("Rewrite everything"), "{screen}");
    assert!(home.path().join("done.txt").exists(), "{screen}");
    let requests = mock.requests();
    let first = body(&requests[0]);
    let prompt = first["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        without_context(&prompt)
            .starts_with("[keel: the user switched the permission mode to plan")
            && prompt.ends_with("rename parse"),
        "{prompt}"
    );
    assert!(
        requests[1]
            .to_string()
            .contains("The user's note: only the rename")
    );
    assert!(
        requests[2]
            .to_string()
            .contains("The permission mode is now auto")
    );
}
