//! `keel acp` against `keel mock`: the official ACP TypeScript client
//! (`@agentclientprotocol/sdk`, `crates/keel-acp/e2e/client.mjs`) for the conversations, and
//! raw JSON-RPC lines for the protocol-level cases.
//!
//! The SDK tests need node and `npm ci` in `crates/keel-acp/e2e` (`.ci/run` does it); without
//! them they are ignored, with that reason (the build script decides); under CI (`CI` set)
//! they run, and fail.

use crate::common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn e2e_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../keel-acp/e2e")
}

/// Fail, saying what to install, when the SDK is missing. Without it the SDK tests are ignored
/// (`keel_e2e_acp` unset); under CI they run regardless, and fail here.
fn require_sdk() {
    let ready = e2e_dir()
        .join("node_modules/@agentclientprotocol/sdk")
        .is_dir()
        && Command::new("node").arg("--version").output().is_ok();
    assert!(
        ready,
        "this test needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
    );
}

/// Run the SDK `scenario` against a home scripted with `steps` (`top` at the top of its config).
fn client(scenario: &str, steps: Value, top: &str) -> (Home, MockProcess) {
    client_with(scenario, steps, top, "")
}

/// `client`, with `provider` lines added to the provider's table.
fn client_with(scenario: &str, steps: Value, top: &str, provider: &str) -> (Home, MockProcess) {
    let (home, mock) = scripted("chat", &steps.to_string(), provider);
    home.prepend_config(top);
    drive_client(scenario, &home, &[]);
    (home, mock)
}

/// `client`, with variables added to the client's environment.
fn client_with_env(
    scenario: &str,
    steps: Value,
    top: &str,
    env: &[(&str, &str)],
) -> (Home, MockProcess) {
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config(top);
    drive_client(scenario, &home, env);
    (home, mock)
}

/// Run the SDK client's `scenario` against `keel acp` in `home`.
fn drive_client(scenario: &str, home: &Home, env: &[(&str, &str)]) {
    require_sdk();
    let child = Command::new("node")
        .arg(e2e_dir().join("client.mjs"))
        .args([scenario, KEEL, home.path().to_str().unwrap()])
        .env("KEEL_HOME", home.path())
        .env("DEEPSEEK_API_KEY", "test-key-1")
        .env_remove("KEEL_MODEL")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A scenario that waits for an answer that never comes fails; it never hangs the suite.
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    let output = match finished.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("{scenario}: the client did not finish in 120 s");
        }
    };
    assert!(
        output.status.success(),
        "{scenario}:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn two_tool_rounds_stream_in_order_and_load_replays_them() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo one >> effects.log"}},
        {"tool": "bash", "args": {"command": "echo two >> effects.log"}},
        {"say": "Both commands ran."},
    ]});
    let (home, _mock) = client_with(
        "rounds",
        steps,
        "permission_mode = \"auto\"",
        "context_window = 100000",
    );
    let effects = std::fs::read_to_string(home.path().join("effects.log")).unwrap();
    assert_eq!(effects, "one\ntwo\n");
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn file_tools_go_through_the_editor_when_it_offers_fs() {
    let steps = json!({"steps": [
        {"tool": "read_file", "args": {"path": "notes.txt"}},
        {"tool": "write_file", "args": {"path": "out.txt", "content": "from keel"}},
        {"tool": "edit_file", "args": {"path": "notes.txt", "old_string": "text", "new_string": "text, edited"}},
        {"tool": "write_file", "args": {"path": "../escape.txt", "content": "no"}},
        {"say": "done"},
    ]});
    let (home, _mock) = client("editor_files", steps, "permission_mode = \"auto\"");
    assert!(
        !home.path().join("out.txt").exists(),
        "the editor owns the write"
    );
    assert!(
        !home.path().join("notes.txt").exists(),
        "the buffer was never saved by keel"
    );
    assert!(!home.path().join("../escape.txt").exists());
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn a_rewind_restores_and_checks_the_editors_buffers() {
    let steps = json!({"steps": [
        {"tool": "edit_file", "args": {"path": "notes.txt", "old_string": "text", "new_string": "text, edited"}},
        {"say": "Edited."},
    ]});
    let (_home, mock) = client("editor_undo", steps, "permission_mode = \"auto\"");
    assert_eq!(
        mock.requests().len(),
        2,
        "the turn sent two; the rewinds sent nothing"
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn permissions_are_asked_through_the_editor() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "rejected.txt", "content": "x"}},
        {"tool": "write_file", "args": {"path": "allowed.txt", "content": "y"}},
        {"tool": "write_file", "args": {"path": "remembered.txt", "content": "z"}},
        // A command's "always" covers its read-only subcommand only.
        {"tool": "bash", "args": {"command": "git status"}},
        {"tool": "bash", "args": {"command": "git status --short"}},
        {"tool": "bash", "args": {"command": "git log -1"}},
        {"say": "done"},
    ]});
    // Read-only commands are asked about too: "always" is what this is about.
    let (home, mock) = client(
        "permissions",
        steps,
        "permission_mode = \"auto\"\nask_read_only_commands = true",
    );
    assert!(!home.path().join("rejected.txt").exists());
    assert!(home.path().join("allowed.txt").exists());
    assert!(home.path().join("remembered.txt").exists());
    let second = mock.requests()[1].to_string();
    assert!(second.contains("the user declined"), "{second}");
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn subagents_show_progress_and_their_questions_come_one_at_a_time_named() {
    let steps = two_children_asking(0);
    let (home, _mock) = client("subagents", steps, "");
    assert!(home.path().join("a.txt").exists() && home.path().join("b.txt").exists());
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn a_background_job_is_a_tool_call_that_ends_with_its_exit_and_output() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo acp-job-out; sleep 0.3; exit 4", "run_in_background": true}},
        {"tool": "bash", "args": {"command": "sleep 1.5"}},
        {"say": "done"},
    ]});
    let (_home, mock) = client("jobs", steps, "");
    let last = mock.requests().last().unwrap().to_string();
    assert!(last.contains("exited with code 4"), "{last}");
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn plan_mode_is_a_session_mode_and_an_approved_plan_switches_it() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "early.txt", "content": "x"}},
        {"tool": "propose_plan", "args": {"plan": "1. Rename the module\n2. Update the callers"}},
        {"tool": "write_file", "args": {"path": "late.txt", "content": "y"}},
        {"say": "done"},
    ]});
    let (home, mock) = client("plan", steps, "");
    assert!(
        !home.path().join("early.txt").exists(),
        "refused in plan mode"
    );
    assert!(home.path().join("late.txt").exists(), "runs after the plan");
    let requests = mock.requests();
    assert!(requests[1].to_string().contains("keel is in plan mode"));
    let approved = requests[2].to_string();
    assert!(
        approved.contains("The user approved the plan. The permission mode is now auto"),
        "{approved}"
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn a_mode_set_during_a_turn_decides_the_next_call_and_is_told_in_a_result() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "sleep 1; echo slept"}},
        {"tool": "write_file", "args": {"path": "after.txt", "content": "x"}},
        {"say": "done"},
    ]});
    let (home, mock) = client("mode_mid_turn", steps, "permission_mode = \"auto\"");
    assert!(
        !home.path().join("after.txt").exists(),
        "asked, and rejected"
    );
    let second: Value = serde_json::from_str(mock.requests()[1]["body"].as_str().unwrap()).unwrap();
    let result = second["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(result.starts_with("slept"), "{result}");
    assert!(
        result.ends_with("[keel: the user switched the permission mode to ask: changes need the user's approval.]"),
        "{result}"
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn session_fork_starts_a_session_with_the_originals_bytes() {
    let steps = json!({"steps": [{"say": "one"}, {"say": "from the fork"}]});
    let (_home, mock) = client("fork", steps, "");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let body = |index: usize| -> Value {
        serde_json::from_str(requests[index]["body"].as_str().unwrap()).unwrap()
    };
    let (first, forked) = (body(0), body(1));
    let first_messages = first["messages"].as_array().unwrap();
    let forked_messages = forked["messages"].as_array().unwrap();
    assert_eq!(first["tools"], forked["tools"]);
    assert_eq!(
        &forked_messages[..first_messages.len()],
        &first_messages[..],
        "the fork's request begins with the original's"
    );
    assert_eq!(forked_messages.last().unwrap()["content"], "forked");
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn cancel_answers_cancelled_and_nothing_follows() {
    let steps = json!({"steps": [{"fault": "stall", "seconds": 2}, {"say": "too late"}]});
    let (_home, mock) = client("cancel", steps, "");
    assert_eq!(mock.requests().len(), 1, "no retry after the cancel");
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn a_rejected_replay_is_recovered_through_prompt_meta_with_each_effect_once() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo ran >> effects.log"}},
        {"fault": {"status": 400, "body": ""}},
        {"say": "Recovered from valid history."},
        {"tool": "bash", "args": {"command": "echo again >> effects.log"}},
        {"fault": {"status": 400, "body": ""}},
        {"say": "Recovered again."},
    ]});
    let (home, mock) = client("recovery", steps, "permission_mode = \"auto\"");
    assert_eq!(
        std::fs::read_to_string(home.path().join("effects.log")).unwrap(),
        "ran\nagain\n",
        "each effect once"
    );
    assert_eq!(mock.requests().len(), 6, "nothing sent for the stale id");
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn a_context_limit_is_recovered_through_prompt_meta_with_each_effect_once() {
    let steps = effect_steps(30, "All rounds done.");
    let (home, mock) = client(
        "compact",
        json!({"context_window": 2500, "steps": steps}),
        "permission_mode = \"auto\"",
    );
    assert_each_effect_once(&home, 30);
    assert!(asked_to_focus_on(&mock, "the effects log"));
}

#[test]
#[cfg_attr(
    not(all(keel_e2e_acp, keel_e2e_mcp)),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e and crates/keel-mcp/e2e (.ci/run does both)"
)]
fn the_editors_mcp_servers_run_for_the_session() {
    let everything = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../keel-mcp/e2e/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        everything.exists(),
        "this test needs `npm ci` in crates/keel-mcp/e2e (.ci/run does it)"
    );
    let steps = json!({"steps": [
        {"tool": "mcp__every__echo", "args": {"message": "through the editor"}},
        {"say": "Echoed."},
    ]});
    let (_home, mock) = client_with_env(
        "mcp",
        steps,
        "permission_mode = \"auto\"",
        &[("KEEL_TEST_MCP_EVERYTHING", everything.to_str().unwrap())],
    );
    let last = mock.requests().pop().unwrap();
    let body = last["body"].as_str().unwrap().to_string();
    assert!(
        body.contains("through the editor"),
        "the echo reached the model"
    );
    assert!(body.contains("mcp__every__echo"), "the tool was offered");
}

/// `keel acp` fed raw lines; returns every line it wrote.
fn raw_session(home: &Home, lines: &[&str]) -> Vec<Value> {
    let mut child = home
        .keel(&["acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    drop(stdin);
    let stdout = child.stdout.take().unwrap();
    let answers: Vec<Value> = BufReader::new(stdout)
        .lines()
        .map(|line| serde_json::from_str(&line.unwrap()).expect("protocol only on stdout"))
        .collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "exits 0 when stdin closes");
    answers
}

fn answer(answers: &[Value], id: i64) -> &Value {
    answers
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"))
}

#[test]
fn the_stdio_loop_answers_protocol_errors_and_keeps_serving() {
    let home = Home::new("");
    let workspace = home.path().display().to_string();
    let new_session = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": workspace, "mcpServers": [{"name": "g__h", "command": "x", "args": [], "env": []}]}})
    .to_string();
    let answers = raw_session(
        &home,
        &[
            r#"{"jsonrpc":"2.0","id":0,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
            "this is not json",
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
            &new_session,
            r#"{"jsonrpc":"2.0","id":3,"method":"session/teleport","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"session/set_mode","params":{}}"#,
            &json!({"jsonrpc": "2.0", "id": 8, "method": "session/load",
                "params": {"sessionId": "0123456789abcdef", "cwd": workspace, "mcpServers": []}})
            .to_string(),
            r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}"#,
        ],
    );
    assert_eq!(
        answer(&answers, 0)["error"]["code"],
        -32600,
        "before initialize"
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"].is_null() && a["error"]["code"] == -32700),
        "a malformed line: {answers:?}"
    );
    assert_eq!(answer(&answers, 1)["result"]["protocolVersion"], 1);
    let mcp = &answer(&answers, 2)["error"];
    assert_eq!(mcp["code"], -32602);
    assert!(
        mcp["message"].as_str().unwrap().contains("mcpServers"),
        "{mcp}"
    );
    assert_eq!(answer(&answers, 3)["error"]["code"], -32601);
    assert_eq!(answer(&answers, 4)["error"]["code"], -32002);
    assert_eq!(answer(&answers, 5)["error"]["code"], -32602);
    assert_eq!(answer(&answers, 6)["error"]["code"], -32602);
    assert!(answer(&answers, 7)["result"].is_object(), "still serving");
    assert_eq!(
        answer(&answers, 8)["error"]["code"],
        -32002,
        "an unknown session"
    );
    for message in &answers {
        assert_eq!(message["jsonrpc"], "2.0");
        assert!(
            !(message.get("result").is_some() && message.get("error").is_some()),
            "{message}"
        );
    }
}

/// `keel acp` in `home`, initialized, with a new session in the home: the child, its stdin,
/// its stdout lines and the session id.
fn acp_session(
    home: &Home,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
    String,
) {
    let (child, stdin, mut lines) = acp_started(home);
    let session = loop {
        let line: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if line["id"] == 2 {
            break line["result"]["sessionId"].as_str().unwrap().to_string();
        }
    };
    (child, stdin, lines, session)
}

#[test]
fn an_editor_that_disappears_mid_turn_leaves_settled_receipts() {
    let marker = format!("sleep 30.{}", std::process::id());
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": format!("touch started; {marker}")}},
        {"say": "never"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let (mut child, mut stdin, _lines, session) = acp_session(&home);
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "run"}]}});
    writeln!(stdin, "{prompt}").unwrap();
    let started = std::time::Instant::now();
    while !home.path().join("started").exists() && started.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin); // the editor is gone
    let status = wait_for_exit(&mut child, Duration::from_secs(10), "keel acp did not exit");
    assert!(status.success());
    let survivors = Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(survivors.stdout.is_empty(), "the tool was killed");
    let shown = home.run(&["session", "show", &session, "--json"]);
    let shown: Value = serde_json::from_str(&shown.stdout()).unwrap();
    assert_eq!(shown["receipts"][0]["state"], "cancelled");
}

#[test]
fn a_cancel_sent_right_after_a_prompt_is_not_lost() {
    let steps = json!({"steps": [{"fault": "stall", "seconds": 30}, {"say": "never"}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let (mut child, mut stdin, mut lines, session) = acp_session(&home);
    // Written together: the cancel must find the turn the prompt started.
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "wait"}]}});
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}});
    write!(stdin, "{prompt}\n{cancel}\n").unwrap();
    stdin.flush().unwrap();
    // A lost cancel would end the turn after the 30 s stall, `end_turn`, not `cancelled`.
    let answer = loop {
        let line: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if line["id"] == 3 {
            break line;
        }
    };
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn an_oversized_message_is_refused_and_the_agent_keeps_serving() {
    let home = Home::new("");
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{{"sessionId":"x","prompt":[{{"type":"text","text":"{}"}}]}}}}"#,
        "a".repeat(17 * 1024 * 1024)
    );
    let answers = raw_session(
        &home,
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
            &huge,
            r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}"#,
        ],
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"].is_null() && a["error"]["code"] == -32600),
        "{answers:?}"
    );
    assert!(answer(&answers, 3)["result"].is_object(), "still serving");
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn custom_commands_are_announced_and_run_through_acp() {
    let (home, mock) = scripted(
        "chat",
        &json!({"steps": [{"say": "reviewed"}]}).to_string(),
        "",
    );
    write_review_command(&home, "Review $1 with care.");
    drive_client("commands", &home, &[]);
    assert_eq!(last_user_message(&mock), "Review lib.rs with care.");
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn undo_over_acp_restores_the_files_without_a_model_turn() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "notes.md", "content": "# Notes\n"}},
        {"say": "Changed."},
    ]});
    let (home, mock) = client("undo", steps, "permission_mode = \"auto\"");
    assert!(
        !home.path().join("notes.md").exists(),
        "the created file is gone"
    );
    assert_eq!(
        mock.requests().len(),
        2,
        "the undo sent nothing to the model"
    );
}

#[test]
fn an_undo_comes_before_a_prompt_read_after_it() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "notes.md", "content": "# Notes\n"}},
        {"say": "Changed."},
        {"say": "After the undo."},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let (mut child, mut stdin, mut lines, session) = acp_session(&home);
    let prompt = |id: i64, text: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
    };
    let mut answer_to = |id: i64| loop {
        let line: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if line["id"] == id {
            break line;
        }
    };
    writeln!(stdin, "{}", prompt(3, "change things")).unwrap();
    assert_eq!(answer_to(3)["result"]["stopReason"], "end_turn");
    // Sent together: the undo is held for in read order, the prompt waits for it.
    writeln!(stdin, "{}\n{}", prompt(4, "/undo"), prompt(5, "again")).unwrap();
    let undo = answer_to(4);
    assert_eq!(undo["result"]["stopReason"], "end_turn", "{undo}");
    assert!(!home.path().join("notes.md").exists(), "undone");
    drop(stdin);
    let _ = wait_for_exit(&mut child, Duration::from_secs(10), "keel acp did not exit");
    // The prompt after it either ran after the undo or was told the session was busy; it
    // never ran before the undo.
    let requests = mock.requests();
    if requests.len() == 3 {
        let last = requests[2]["body"].as_str().unwrap();
        assert!(
            !last.contains("Changed."),
            "the undone turn is not in the prompt after it"
        );
    }
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn open_work_is_offered_in_meta_and_on_the_command_not_in_the_text() {
    let plan = json!({"todos": [
        {"content": "edit", "status": "completed"},
        {"content": "run the tests", "status": "pending"},
    ]});
    let done = json!({"todos": [
        {"content": "edit", "status": "completed"},
        {"content": "run the tests", "status": "completed"},
    ]});
    let steps = json!({"steps": [
        {"tool": "todo_write", "args": plan},
        {"say": "Edited the file."},
        {"tool": "todo_write", "args": done},
        {"say": "Ran the tests: they pass."},
    ]});
    let (_home, mock) = client("readiness", steps, "permission_mode = \"auto\"");
    assert_eq!(mock.requests().len(), 4);
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn a_rejected_call_ends_the_turn_ready_and_a_failed_command_does_not() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "rm -rf build"}},
        {"say": "Understood: I left the build alone."},
        {"tool": "bash", "args": {"command": "exit 3"}},
        {"say": "The tests are done."},
    ]});
    let (_home, mock) = client("denial", steps, "permission_mode = \"ask\"");
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let told = requests[1].to_string();
    assert!(
        told.contains("denied"),
        "the model is told the call was denied: {told}"
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_acp),
    ignore = "needs node and `npm ci` in crates/keel-acp/e2e (.ci/run does it)"
)]
fn a_refused_key_ends_the_prompt_with_an_error_that_says_what_to_do() {
    let body = r#"{"error":{"message":"Authentication Fails: secret detail","type":"authentication_error"}}"#;
    let steps = json!({"steps": [{"fault": {"status": 401, "body": body}}]});
    let (_home, mock) = client("refused_key", steps, "");
    assert_eq!(mock.requests().len(), 1, "a refused key is not retried");
}
