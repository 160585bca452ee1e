//! Exit codes and sessions as documented (issue 38 item 11; docs/configuration.md#exit-codes): the
//! real binary against `keel mock`.
//!
//! Invariants checked here:
//! - `0` a turn that completed ready; `1` a turn that failed or ended not ready, its next step
//!   on stderr (`--yes` when nobody could approve a call, `/continue-checks` otherwise), also
//!   with `--json`; `2` a usage error or a key the provider refused (failure kind `auth`).
//! - A run that failed before any answer leaves no session in `keel sessions` (nor for `-c`);
//!   `keel session show` still finds it. (One that holds an offer to go on is listed: keel
//!   offers none before an answer today, so keel-store's tests pin that rule.)

use crate::common::repository::session_of;
use crate::common::*;
use serde_json::{Value, json};

fn listed(home: &Home) -> Vec<String> {
    let run = home.run(&["sessions", "--json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows: Value = serde_json::from_str(&run.stdout()).unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|row| row["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn completed_is_0_and_not_ready_is_1_with_the_next_step() {
    let scenario = json!({"steps": [
        {"say": "All good."},
        {"tool": "bash", "args": {"command": "exit 3"}},
        {"say": "It failed."},
        {"tool": "bash", "args": {"command": "cargo test --workspace"}},
        {"say": "Nobody approved it."},
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let ready = home.run(&["run", "--json", "fine"]);
    assert_eq!(ready.code(), 0, "{}", ready.stderr());
    // A command failed right before the answer: not ready.
    let failed = home.run(&["run", "--yes", "--json", "-c", "try it"]);
    assert_eq!(failed.code(), 1, "{}", failed.stderr());
    let session = session_of(&failed);
    assert_eq!(failed.events_of("turn/completed")[0]["ready"], false);
    assert!(
        failed.stderr().contains(&format!(
            "continue with: keel run --session {session} \"/continue-checks\""
        )),
        "{}",
        failed.stderr()
    );
    // Nobody could approve a call (headless, ask mode): the hint says --yes.
    let unattended = home.run(&["run", "-c", "test it"]);
    assert_eq!(unattended.code(), 1, "{}", unattended.stderr());
    assert!(
        unattended.stderr().contains(&format!(
            "continue with: keel run --session {session} --yes \"/continue-checks\""
        )),
        "{}",
        unattended.stderr()
    );
}

#[test]
fn a_refused_key_is_2() {
    let scenario = json!({"steps": [
        {"fault": {"status": 401, "body": "{\"error\":{\"message\":\"Authentication Fails\",\"type\":\"authentication_error\"}}"}}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let run = home.run(&["run", "--json", "hi"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert_eq!(
        run.events_of("turn/failed")[0]["diagnostic"]["kind"],
        "auth"
    );
}

#[test]
fn a_run_that_failed_before_any_answer_is_not_listed_but_can_be_shown() {
    let scenario = json!({"steps": [
        {"fault": {"status": 400, "body": "{\"error\":{\"message\":\"bad\"}}"}},
        {"say": "A real answer."},
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let failed = home.run(&["run", "--json", "hi"]);
    assert_eq!(failed.code(), 1, "{}", failed.stderr());
    let session = session_of(&failed);
    assert!(listed(&home).is_empty(), "{:?}", listed(&home));
    // A `--json` reader that saw its id can still look at it.
    let shown = home.run(&["session", "show", &session, "--json"]);
    assert_eq!(shown.code(), 0, "{}", shown.stderr());
    // Nothing to continue: -c starts nothing from it.
    let continued = home.run(&["run", "-c", "again"]);
    assert_eq!(continued.code(), 2, "{}", continued.stderr());
    assert!(
        continued.stderr().contains("no session to continue"),
        "{}",
        continued.stderr()
    );
    // A session that answered is listed.
    let answered = home.run(&["run", "--json", "hello"]);
    assert_eq!(answered.code(), 0, "{}", answered.stderr());
    assert_eq!(listed(&home), [session_of(&answered)]);
}
