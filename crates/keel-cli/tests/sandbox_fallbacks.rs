//! Where the sandbox cannot do its part, and what a person decides: a kernel below the minimum
//! (simulated with `KEEL_SANDBOX_UNSUPPORTED`) is said and runs nothing unconfined unasked;
//! the unconfined re-run of a refused command is the person's own, asked where keel asks.

use crate::common::escapes::*;
use crate::common::terminal::interactive_session_with_env;
use crate::common::*;
use serde_json::{Value, json};

#[test]
fn without_landlock_keel_says_so_and_never_runs_a_command_unconfined_unasked() {
    // One call for each run that reaches the model: interactive, --sandbox off, read-only.
    let steps = vec![
        bash("touch ran.txt"),
        json!({"say": "declined"}),
        bash("touch ran.txt"),
        json!({"say": "ran"}),
        bash("touch ran.txt"),
    ];
    let mut escapes = Escapes::new();
    escapes.script(steps, "");
    let unsupported = ("KEEL_SANDBOX_UNSUPPORTED", "landlock");
    // Headless --yes: refused before anything is sent, naming what to do.
    let refused = Run::from(
        escapes
            .keel(&["run", "--yes", "go"])
            .env(unsupported.0, unsupported.1)
            .output()
            .unwrap(),
    );
    assert_eq!(refused.code(), 2, "{}", refused.stderr());
    assert!(
        refused.stderr().contains("Landlock"),
        "{}",
        refused.stderr()
    );
    assert!(
        refused.stderr().contains("mode = \"off\""),
        "{}",
        refused.stderr()
    );
    assert!(escapes.mock().requests().is_empty());
    // `keel sandbox` says what is missing.
    let shown = Run::from(
        escapes
            .keel(&["sandbox", "--", "true"])
            .env(unsupported.0, unsupported.1)
            .output()
            .unwrap(),
    );
    assert!(
        shown.stderr().contains("NOT enforced"),
        "{}",
        shown.stderr()
    );
    assert!(
        shown.stderr().contains("missing: Landlock"),
        "{}",
        shown.stderr()
    );
    // Interactive in auto mode: the banner says it, and the command is asked about.
    escapes.home.prepend_config("permission_mode = \"auto\"");
    let (screen, _) = interactive_session_with_env(
        &escapes.home,
        &escapes.me,
        &[unsupported, ("HOME", escapes.me.to_str().unwrap())],
        "/help for commands",
        &[
            ("go\n", Some("[N]o + note"), 0),
            ("n\n", Some("tokens: "), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(screen.contains("NOT enforced"), "{screen}");
    assert!(!escapes.me.join("ran.txt").exists(), "declined: not run");
    // The user's own choice: --sandbox off runs it.
    let off = Run::from(
        escapes
            .keel(&["run", "--yes", "--sandbox", "off", "--json", "go"])
            .env(unsupported.0, unsupported.1)
            .output()
            .unwrap(),
    );
    assert_eq!(off.code(), 0, "{}", off.stderr());
    assert!(escapes.me.join("ran.txt").exists());
    let receipts = escapes.receipts(&off);
    assert_eq!(receipts.last().unwrap()["sandbox"], "off", "{receipts:?}");
    // Read-only mode refuses commands when it cannot confine them.
    std::fs::remove_file(escapes.me.join("ran.txt")).unwrap();
    let read_only = Run::from(
        escapes
            .keel(&["run", "--permission-mode", "read-only", "--json", "go"])
            .env(unsupported.0, unsupported.1)
            .output()
            .unwrap(),
    );
    let results = read_only.events_of("tool/result");
    assert_eq!(results[0]["state"], "denied", "{results:?}");
    assert!(!escapes.me.join("ran.txt").exists());
}

#[test]
fn with_the_network_on_a_kernel_without_landlock_scoping_is_below_the_minimum() {
    let mut escapes = Escapes::new();
    escapes.script(vec![bash("touch ran.txt")], "");
    // Landlock ABI 5 or less: network-off commands are still kept apart by namespaces.
    let old_kernel = ("KEEL_SANDBOX_UNSUPPORTED", "landlock-scoping");
    let network_off = Run::from(
        escapes
            .keel(&["sandbox", "--", "true"])
            .env(old_kernel.0, old_kernel.1)
            .output()
            .unwrap(),
    );
    assert_eq!(network_off.code(), 0, "{}", network_off.stderr());
    assert!(
        !network_off.stderr().contains("NOT enforced"),
        "{}",
        network_off.stderr()
    );
    // With the network on nothing else keeps a command from the host's abstract sockets.
    escapes
        .home
        .append_config("[sandbox]\nallow_network = true\n");
    let shown = Run::from(
        escapes
            .keel(&["sandbox", "--", "true"])
            .env(old_kernel.0, old_kernel.1)
            .output()
            .unwrap(),
    );
    assert!(
        shown.stderr().contains("NOT enforced"),
        "{}",
        shown.stderr()
    );
    assert!(
        shown.stderr().contains("abstract sockets"),
        "{}",
        shown.stderr()
    );
    let refused = Run::from(
        escapes
            .keel(&["run", "--yes", "go"])
            .env(old_kernel.0, old_kernel.1)
            .output()
            .unwrap(),
    );
    assert_eq!(refused.code(), 2, "{}", refused.stderr());
    assert!(
        refused.stderr().contains("abstract sockets"),
        "{}",
        refused.stderr()
    );
    assert!(escapes.mock().requests().is_empty());
    assert!(!escapes.me.join("ran.txt").exists());
    // On this kernel (scoping present) the same run is confined and goes ahead.
    let confined = escapes.run(&["run", "--yes", "go"]);
    assert_eq!(confined.code(), 0, "{}", confined.stderr());
    assert!(escapes.me.join("ran.txt").exists());
}

#[test]
fn in_ask_mode_a_refused_command_may_be_run_again_unconfined_only_when_the_user_says_so() {
    let mut escapes = Escapes::new();
    // Outside /tmp (which the sandbox replaces), so the refusal is a refusal ("Read-only file
    // system"), not a path that is not there.
    let outside = dir_outside_tmp();
    let target = outside.path().join("made-outside");
    let write = format!("echo made > {}", target.display());
    // The first turn's second refused command is not offered: once per turn, for the trigger
    // is the command's own output.
    escapes.script(
        vec![
            bash(&write),
            bash(&write),
            json!({"say": "declined"}),
            bash(&write),
        ],
        "",
    );
    let (screen, _) = interactive_session_with_env(
        &escapes.home,
        &escapes.me,
        &[("HOME", escapes.me.to_str().unwrap())],
        "/help for commands",
        &[
            ("go\n", Some("[N]o + note"), 0),
            ("y\n", Some("UNCONFINED? [y]es / [n]o"), 0),
            ("n\n", Some("[N]o + note"), 0),
            ("y\n", Some("tokens: "), 0),
            ("again\n", Some("[N]o + note"), 0),
            ("y\n", Some("UNCONFINED? [y]es / [n]o"), 0),
            ("y\n", Some("tokens: "), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(screen.contains("OUTSIDE the sandbox"), "{screen}");
    assert!(screen.contains("keel cannot verify it"), "{screen}");
    assert_eq!(
        screen.matches("UNCONFINED? [y]es / [n]o").count(),
        2,
        "one offer per turn: {screen}"
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "made\n",
        "the second, allowed, unconfined run wrote it"
    );
    let results = escapes.results();
    assert!(results[0].contains("they did not"), "{}", results[0]);
    assert!(
        !results[1].contains("they did not") && !results[1].contains("unconfined"),
        "not offered twice in a turn: {}",
        results[1]
    );
    assert!(
        results[2].contains("Read-only file system") || results[2].contains("Permission denied"),
        "{}",
        results[2]
    );
    assert!(
        results[2].contains("unconfined; that run:"),
        "{}",
        results[2]
    );
    let sessions = escapes.run(&["sessions", "--json"]).stdout();
    let listed: Value = serde_json::from_str(&sessions).unwrap();
    let session = listed[0]["id"].as_str().unwrap().to_string();
    let shown = escapes.run(&["session", "show", &session, "--json"]);
    let value: Value = serde_json::from_str(&shown.stdout()).unwrap();
    let receipts: Vec<(String, String, String)> = value["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["call_id"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
                r["sandbox"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let second = &receipts[2].0;
    assert_eq!(
        receipts,
        [
            (
                receipts[0].0.clone(),
                "failed".into(),
                "workspace-write".into()
            ),
            (
                receipts[1].0.clone(),
                "failed".into(),
                "workspace-write".into()
            ),
            (second.clone(), "failed".into(), "workspace-write".into()),
            (
                format!("{second}#unconfined"),
                "completed".into(),
                "off".into()
            ),
        ],
        "a receipt of its own, recorded unconfined"
    );
}

/// An editor may answer permission requests by itself ("always allow tool actions"): over ACP
/// the unconfined re-run is never offered, so an editor that allows everything runs nothing
/// outside the sandbox.
#[test]
fn an_editor_that_allows_everything_is_never_offered_an_unconfined_run() {
    use std::io::Write;
    let outside = dir_outside_tmp();
    let target = outside.path().join("made-outside");
    let steps = json!({"steps": [
        bash(format!("echo made > {}", target.display())),
        {"say": "done"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"ask\"");
    let (mut child, mut stdin, mut lines) = acp_started(&home);
    let started = std::time::Instant::now();
    let mut asked = Vec::new();
    let mut result = None;
    while started.elapsed() < std::time::Duration::from_secs(30) {
        let Some(Ok(line)) = lines.next() else { break };
        let message: Value = serde_json::from_str(&line).unwrap();
        // Keel numbers its own requests too: a response has no method.
        let response = message.get("method").is_none();
        if response && message["id"] == 2 {
            let session = message["result"]["sessionId"]
                .as_str()
                .unwrap_or_else(|| panic!("session/new: {message}"));
            let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}});
            writeln!(stdin, "{prompt}").unwrap();
        }
        if message["method"] == "session/request_permission" {
            let allow = json!({"jsonrpc": "2.0", "id": message["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}});
            writeln!(stdin, "{allow}").unwrap();
            asked.push(message["params"]["toolCall"]["title"].to_string());
        }
        if message["params"]["update"]["sessionUpdate"] == "tool_call_update"
            && message["params"]["update"]["status"] == "failed"
        {
            result = Some(message.to_string());
        }
        if response && message["id"] == 3 {
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    let _ = lines.by_ref().count();
    assert_eq!(
        asked.len(),
        1,
        "only the command itself was asked: {asked:?}"
    );
    assert!(!asked[0].contains("OUTSIDE"), "{asked:?}");
    assert!(!target.exists(), "nothing ran outside the sandbox");
    let result = result.expect("the call failed");
    assert!(result.contains("keel's sandbox"), "{result}");
}
