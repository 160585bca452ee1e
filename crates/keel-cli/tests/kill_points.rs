//! SIGKILL at every durable step of a turn (`KEEL_KILL_AT` aborts the process there, as a kill
//! would: no destructors, no flush), then a restart: the store holds exactly what was committed,
//! the receipts say what is known, and nothing runs twice.
//!
//! `after_receipts_settled` is the restart's own durable step (interrupted receipts settled).
//! The compaction points (`compaction_summarised`, `compaction_commit`,
//! `after_compaction_commit`) are in compaction.rs, where a session long enough to compact is.

use crate::common::*;
use serde_json::{Value, json};

/// One tool round that leaves a mark in the workspace, then an answer, then a second answer for
/// the turn after the restart.
fn one_effect() -> String {
    json!({"steps": [
        {"tool": "bash", "args": {"command": "echo 1 >> effects.log"}},
        {"say": "Done."},
        {"say": "Nothing was repeated."}
    ]})
    .to_string()
}

/// What a restart must find after a kill at a point of the tool round.
struct Expected {
    point: &'static str,
    /// Item kinds in the store, in order.
    items: &'static [&'static str],
    /// The receipt's state as a reload reports it (`None`: no receipt was written).
    receipt: Option<&'static str>,
    /// Whether the command had run.
    effect: bool,
}

const TOOL_ROUND: [Expected; 6] = [
    Expected {
        point: "before_assistant_commit",
        items: &["context", "user"],
        receipt: None,
        effect: false,
    },
    Expected {
        point: "after_assistant_commit",
        items: &["context", "user", "assistant"],
        receipt: Some("not_started"),
        effect: false,
    },
    Expected {
        point: "before_receipt_started",
        items: &["context", "user", "assistant"],
        receipt: Some("not_started"),
        effect: false,
    },
    Expected {
        point: "after_receipt_started",
        items: &["context", "user", "assistant"],
        receipt: Some("unknown"),
        effect: false,
    },
    Expected {
        point: "before_result_commit",
        items: &["context", "user", "assistant"],
        receipt: Some("unknown"),
        effect: true,
    },
    Expected {
        point: "after_result_commit",
        items: &["context", "user", "assistant", "tool_result"],
        receipt: Some("completed"),
        effect: true,
    },
];

fn killed_run(home: &Home, point: &str, args: &[&str]) -> Vec<Value> {
    let killed = home.keel(args).env("KEEL_KILL_AT", point).output().unwrap();
    assert!(
        !killed.status.success() && killed.status.code().is_none(),
        "{point}: keel must have been killed by the signal, got {:?}",
        killed.status
    );
    String::from_utf8_lossy(&killed.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn item_kinds(shown: &Value) -> Vec<String> {
    shown["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["role"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn effects(home: &Home) -> String {
    std::fs::read_to_string(home.path().join("effects.log")).unwrap_or_default()
}

#[test]
fn a_kill_at_each_step_of_a_tool_round_leaves_what_was_committed_and_nothing_reruns() {
    for expected in &TOOL_ROUND {
        let point = expected.point;
        let (home, mock) = scripted("chat", &one_effect(), "");
        let events = killed_run(&home, point, &["run", "--yes", "--json", "run it"]);
        let session = events[0]["session_id"].as_str().unwrap().to_string();
        let shown = session_json(&home, &session, &[]);
        assert_eq!(item_kinds(&shown), expected.items, "{point}: items");
        assert_eq!(shown["items"][1]["text"], "run it", "{point}");
        let receipts = shown["receipts"].as_array().unwrap();
        assert_eq!(
            receipts
                .first()
                .map(|receipt| receipt["state"].as_str().unwrap()),
            expected.receipt,
            "{point}: receipt"
        );
        let ran = if expected.effect { "1\n" } else { "" };
        assert_eq!(
            effects(&home),
            ran,
            "{point}: the command ran as far as it got"
        );
        assert_eq!(
            mock.requests().len(),
            1,
            "{point}: one request before the kill"
        );

        // The restart: a new turn on the same session. The call is never run again, whatever
        // its state; the model hears how it stands.
        let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
        assert_eq!(resumed.code(), 0, "{point}: {}", resumed.stderr());
        assert!(
            resumed.events_of("tool/call").is_empty(),
            "{point}: nothing re-runs"
        );
        assert_eq!(effects(&home), ran, "{point}: no effect twice");
        let after = session_json(&home, &session, &[]);
        let kinds = item_kinds(&after);
        assert_eq!(&kinds[..expected.items.len()], expected.items, "{point}");
        assert_eq!(
            kinds.last().map(String::as_str),
            Some("assistant"),
            "{point}"
        );
        assert_eq!(
            after["receipts"].as_array().unwrap().len(),
            receipts.len(),
            "{point}: no new receipt"
        );
        assert_well_formed(&resumed, point);
    }
}

/// Every event line of a run is an object with a type and the session's id.
fn assert_well_formed(run: &Run, point: &str) {
    for event in run.events() {
        assert!(event["type"].is_string(), "{point}: {event}");
        assert!(event["session_id"].is_string(), "{point}: {event}");
    }
}

#[test]
fn a_kill_around_the_recovery_consumed_write_never_sends_the_recovery_twice() {
    for (point, state_after) in [
        ("before_recovery_consumed", "pending"),
        ("after_recovery_consumed", "consumed"),
    ] {
        let scenario = json!({"steps": [
            {"tool": "bash", "args": {"command": "echo 1 >> effects.log"}},
            {"fault": {"status": 400, "body": ""}},
            {"say": "Recovered."},
            {"say": "And on."}
        ]})
        .to_string();
        let (home, mock) = scripted("chat", &scenario, "");
        let failed = home.run(&["run", "--yes", "--json", "run it"]);
        assert_eq!(failed.code(), 1, "{point}: {}", failed.stderr());
        let session = failed.events()[0]["session_id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(mock.requests().len(), 2);

        killed_run(
            &home,
            point,
            &["run", "--session", &session, "--json", "/recover-context"],
        );
        let record = home.run(&["session", "recovery", &session, "--json"]);
        let record: Value = serde_json::from_str(&record.stdout()).unwrap();
        assert_eq!(record["state"], state_after, "{point}");
        assert_eq!(
            mock.requests().len(),
            2,
            "{point}: nothing sent before the kill"
        );

        let next = if state_after == "pending" {
            // Not consumed: the offer still stands and is taken once.
            home.run(&["run", "--session", &session, "--json", "/recover-context"])
        } else {
            // Consumed: the repaired history is in force; the offer is gone.
            let again = home.run(&["run", "--session", &session, "/recover-context"]);
            assert_ne!(
                again.code(),
                0,
                "{point}: a consumed recovery is not taken twice"
            );
            assert!(
                again.stderr().contains("already used") || again.stderr().contains("consumed"),
                "{point}: refused because it was used: {}",
                again.stderr()
            );
            assert_eq!(
                mock.requests().len(),
                2,
                "{point}: the refusal sent nothing"
            );
            home.run(&["run", "--session", &session, "--json", "go on"])
        };
        assert_eq!(next.code(), 0, "{point}: {}", next.stderr());
        assert!(next.events_of("tool/call").is_empty(), "{point}");
        assert_eq!(effects(&home), "1\n", "{point}: the command ran once");
        assert_eq!(
            mock.requests().len(),
            3,
            "{point}: one request after the restart"
        );
        assert_well_formed(&next, point);
    }
}

#[test]
fn a_kill_right_after_a_restart_settles_the_receipts_keeps_them_settled() {
    let (home, mock) = scripted("chat", &one_effect(), "");
    let events = killed_run(
        &home,
        "after_receipt_started",
        &["run", "--yes", "--json", "run it"],
    );
    let session = events[0]["session_id"].as_str().unwrap().to_string();
    // The restart settles `started` as `unknown` and is killed right after that commit.
    killed_run(
        &home,
        "after_receipts_settled",
        &["run", "--session", &session, "--yes", "--json", "go on"],
    );
    let db = rusqlite::Connection::open(home.path().join("state/keel.db")).unwrap();
    let stored: String = db
        .query_row("SELECT state FROM receipts", [], |row| row.get(0))
        .unwrap();
    assert_eq!(stored, "unknown", "settled durably before the kill");
    drop(db);
    assert_eq!(mock.requests().len(), 1, "the killed restart sent nothing");
    let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    assert!(resumed.events_of("tool/call").is_empty(), "nothing re-runs");
    assert_eq!(effects(&home), "", "the command never ran");
    let shown = session_json(&home, &session, &[]);
    assert_eq!(shown["receipts"][0]["state"], "unknown");
    assert_well_formed(&resumed, "after_receipts_settled");
}

/// A round of two calls, each leaving its own mark, then two answers.
fn two_effects() -> String {
    json!({"steps": [
        {"tools": [
            {"tool": "bash", "args": {"command": "echo 1 >> effects.log"}},
            {"tool": "bash", "args": {"command": "echo 2 >> effects.log"}}
        ]},
        {"say": "Done."},
        {"say": "Nothing was repeated."}
    ]})
    .to_string()
}

#[test]
fn a_kill_between_the_calls_of_a_round_runs_neither_again_in_any_protocol() {
    // (point, receipt states after the restart, what had run)
    let cases = [
        ("after_result_commit", ["completed", "not_started"], "1\n"),
        (
            "before_receipt_started#2",
            ["completed", "not_started"],
            "1\n",
        ),
        ("after_receipt_started#2", ["completed", "unknown"], "1\n"),
        ("before_result_commit#2", ["completed", "unknown"], "1\n2\n"),
    ];
    for protocol in PROTOCOLS {
        for (point, states, ran) in cases {
            let label = format!("{point} ({protocol})");
            let (home, _mock) = scripted(protocol, &two_effects(), "");
            let events = killed_run(&home, point, &["run", "--yes", "--json", "run both"]);
            let session = events[0]["session_id"].as_str().unwrap().to_string();
            let shown = session_json(&home, &session, &[]);
            let seen: Vec<&str> = shown["receipts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|receipt| receipt["state"].as_str().unwrap())
                .collect();
            assert_eq!(seen, states, "{label}");
            assert_eq!(effects(&home), ran, "{label}");
            let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
            assert_eq!(resumed.code(), 0, "{label}: {}", resumed.stderr());
            assert!(
                resumed.events_of("tool/call").is_empty(),
                "{label}: nothing re-runs"
            );
            assert_eq!(effects(&home), ran, "{label}: no effect twice");
            assert_well_formed(&resumed, &label);
        }
    }
}
