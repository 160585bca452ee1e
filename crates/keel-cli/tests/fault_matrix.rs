//! The fault matrix, generated from one table (`fault_matrix/table.json`): each fault at each
//! stage of a stream, for each protocol, through `keel run --json` and `keel run`, against a
//! real `keel mock`. Each case asserts the exit code, the diagnostic kind, the requests made,
//! the retries, each effect at most once, the stored history, and well-formed events.
//!
//! The whole matrix (168 runs, two at a time) takes about 40 s here, so CI runs all of it. The
//! interactive session (under a pseudo-terminal) runs a subset: each fault once, over Chat.

use crate::common::terminal::interactive_session;
use crate::common::*;
use serde_json::{Value, json};

const TABLE: &str = include_str!("fault_matrix/table.json");
const PARTIAL: &str = "A partial answer that must never be shown twice.";
/// The staged answer's reasoning: in the history only if the answer completed.
const STAGED_REASONING: &str = "Reading the workspace";

/// One cell of the matrix.
struct Case {
    fault: String,
    stage: String,
    protocol: &'static str,
    json_mode: bool,
    step: Value,
    /// Provider settings the row adds (`config` in the table).
    config: String,
    /// Retry settings the row adds (`retry` in the table).
    retry: String,
    /// What each retry must say it was for (`retried_because` in the table), if the row says.
    retried_because: Value,
    outcome: Value,
}

fn cases() -> Vec<Case> {
    let table: Value = serde_json::from_str(TABLE).unwrap();
    let mut cases = Vec::new();
    for fault in table["faults"].as_array().unwrap() {
        for stage in table["stages"].as_array().unwrap() {
            let stage = stage.as_str().unwrap();
            let Some(outcome) = fault["at"][stage].as_str() else {
                continue;
            };
            let outcome = table["outcomes"][outcome].clone();
            assert!(outcome.is_object(), "the table names no outcome {outcome}");
            let mut step = fault["step"].clone();
            if fault["staged"] == true {
                step["at"] = json!(stage);
            }
            for protocol in PROTOCOLS {
                for json_mode in [true, false] {
                    cases.push(Case {
                        fault: fault["name"].as_str().unwrap().to_string(),
                        stage: stage.to_string(),
                        protocol,
                        json_mode,
                        step: step.clone(),
                        config: fault["config"].as_str().unwrap_or("").to_string(),
                        retry: fault["retry"].as_str().unwrap_or("").to_string(),
                        retried_because: fault["retried_because"].clone(),
                        outcome: outcome.clone(),
                    });
                }
            }
        }
    }
    cases
}

fn run_case(case: &Case) {
    let label = format!(
        "{} at {} ({}, {})",
        case.fault,
        case.stage,
        case.protocol,
        if case.json_mode { "run --json" } else { "run" }
    );
    let scenario = json!({"steps": [
        case.step,
        {"tool": "bash", "args": {"command": "echo 1 >> effects.log"}},
        {"say": "Done."}
    ]});
    let (home, mock) = scripted(case.protocol, &scenario.to_string(), &case.config);
    // The provider's retry table is the config's last.
    home.append_config(&case.retry);
    let mut args = vec!["run", "--yes"];
    if case.json_mode {
        args.push("--json");
    }
    args.push("run it");
    let run = home.run(&args);
    let outcome = &case.outcome;
    let succeeded = outcome["failure"].is_null();

    assert_eq!(
        i64::from(run.code()),
        outcome["exit"].as_i64().unwrap(),
        "{label}: exit code; stderr: {}",
        run.stderr()
    );
    assert_eq!(
        mock.requests().len() as u64,
        outcome["requests"].as_u64().unwrap(),
        "{label}: requests"
    );
    let effects = std::fs::read_to_string(home.path().join("effects.log")).unwrap_or_default();
    let expected_effects = if succeeded { "1\n" } else { "" };
    assert_eq!(
        effects, expected_effects,
        "{label}: each effect at most once"
    );
    // The cut answer's own call runs only when the answer was whole, and then once.
    let completed = outcome["items"].as_array().unwrap().len() == 6;
    let staged = std::fs::read_to_string(home.path().join("staged.log")).unwrap_or_default();
    assert_eq!(
        staged,
        if completed { "staged\n" } else { "" },
        "{label}: a cut answer is never acted on"
    );

    let sessions = stored_session_ids(&home);
    assert_eq!(sessions.len(), 1, "{label}: one session");
    let session = sessions[0].clone();
    let shown = session_json(&home, &session, &[]);
    let roles: Vec<&str> = shown["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["role"].as_str().unwrap())
        .collect();
    let expected_roles: Vec<&str> = outcome["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|role| role.as_str().unwrap())
        .collect();
    // Every session starts with its context block (committed with the first prompt).
    assert_eq!(roles.first(), Some(&"context"), "{label}: history");
    assert_eq!(roles[1..], expected_roles, "{label}: history");
    // Nothing of a cut answer is stored; a whole one is stored whole.
    let history = shown["items"].to_string();
    assert_eq!(
        history.contains(PARTIAL),
        completed,
        "{label}: the staged text in the history"
    );
    assert_eq!(
        history.contains(STAGED_REASONING),
        completed,
        "{label}: the staged reasoning in the history"
    );
    let receipts = shown["receipts"].as_array().unwrap();
    assert!(
        receipts
            .iter()
            .all(|receipt| receipt["state"] == "completed"),
        "{label}: receipts {receipts:?}"
    );

    let retries = outcome["retries"].as_u64().unwrap() as usize;
    if case.json_mode {
        let events = run.events();
        for event in &events {
            assert!(event["type"].is_string(), "{label}: {event}");
            assert_eq!(event["session_id"], json!(session), "{label}: {event}");
        }
        let retry_events = run.events_of("llm/retry");
        assert_eq!(retry_events.len(), retries, "{label}: retries");
        if let Some(kind) = case.retried_because.get("kind") {
            for retry in &retry_events {
                assert_eq!(
                    &retry["kind"], kind,
                    "{label}: what the retry was for: {retry}"
                );
            }
        }
        // The stage really struck after the deltas its name promises: they were shown first.
        let first_end = events
            .iter()
            .position(|event| {
                matches!(
                    event["type"].as_str(),
                    Some("llm/retry" | "turn/failed" | "llm/response")
                )
            })
            .unwrap();
        let streamed = |kind: &str| {
            events[..first_end]
                .iter()
                .filter(|event| event["type"] == kind)
                .count()
        };
        match case.stage.as_str() {
            "mid_reasoning" => assert!(streamed("llm/reasoning") > 0, "{label}"),
            "mid_text" => assert!(streamed("llm/text") > 0, "{label}"),
            "before_headers" | "after_headers" => assert_eq!(
                streamed("llm/text") + streamed("llm/reasoning"),
                0,
                "{label}: nothing streamed before the fault"
            ),
            _ => {}
        }
        let last = events.last().unwrap();
        if succeeded {
            assert_eq!(last["type"], "turn/completed", "{label}");
        } else {
            assert_eq!(last["type"], "turn/failed", "{label}");
            assert_eq!(last["diagnostic"]["kind"], outcome["failure"], "{label}");
        }
    } else {
        let stdout = run.stdout();
        assert!(
            stdout.matches(PARTIAL).count() <= 1,
            "{label}: text shown twice: {stdout}"
        );
        if succeeded {
            assert_eq!(stdout.matches("Done.").count(), 1, "{label}: {stdout}");
        }
        assert_eq!(
            run.stderr().contains("retry 1/"),
            retries > 0,
            "{label}: {}",
            run.stderr()
        );
        // A person reads the failure in words; its kind is for --json (checked there).
        if let Some(kind) = outcome["failure"].as_str() {
            let said = run.stderr();
            assert!(said.contains("\nerror: the "), "{label}: {said}");
            assert!(!said.contains(&format!("({kind}")), "{label}: {said}");
        }
        if let (Some(says), true) = (case.retried_because["says"].as_str(), retries > 0) {
            assert!(
                run.stderr().contains(says),
                "{label}: the retry line says why: {}",
                run.stderr()
            );
        }
    }
}

#[test]
fn every_fault_at_every_stage_ends_as_the_table_says() {
    let cases = cases();
    assert!(cases.len() >= 160, "the table drives {} cases", cases.len());
    // Two at a time: each case is a keel and a mock process, mostly waiting.
    let (left, right) = cases.split_at(cases.len() / 2);
    std::thread::scope(|scope| {
        let first = scope.spawn(|| left.iter().for_each(run_case));
        right.iter().for_each(run_case);
        first.join().unwrap();
    });
}

/// One stage per fault for the interactive session: mid-text where the fault has it, else
/// before the headers.
#[test]
fn each_fault_in_the_interactive_session_ends_as_the_table_says() {
    let table: Value = serde_json::from_str(TABLE).unwrap();
    for fault in table["faults"].as_array().unwrap() {
        let name = fault["name"].as_str().unwrap();
        let stage = if fault["at"]["mid_text"].is_string() {
            "mid_text"
        } else {
            "before_headers"
        };
        let outcome = &table["outcomes"][fault["at"][stage].as_str().unwrap()];
        let mut step = fault["step"].clone();
        if fault["staged"] == true {
            step["at"] = json!(stage);
        }
        let scenario = json!({"steps": [
            step,
            {"tool": "bash", "args": {"command": "echo 1 >> effects.log"}},
            {"say": "Done."}
        ]});
        let config = fault["config"].as_str().unwrap_or("");
        let (home, mock) = scripted("chat", &scenario.to_string(), config);
        home.append_config(fault["retry"].as_str().unwrap_or(""));
        let written = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            format!("permission_mode = \"auto\"\n{written}"),
        )
        .unwrap();
        let succeeded = outcome["failure"].is_null();
        let marker = if succeeded { "Done." } else { "error: the " };
        let (screen, code) = interactive_session(
            &home,
            &[("run it\n", Some(marker), 0), ("/quit\n", None, 300)],
        );
        let label = format!("{name} at {stage} (interactive)");
        assert_eq!(
            code,
            Some(0),
            "{label}: the session ends normally: {screen}"
        );
        assert_eq!(
            mock.requests().len() as u64,
            outcome["requests"].as_u64().unwrap(),
            "{label}"
        );
        let effects = std::fs::read_to_string(home.path().join("effects.log")).unwrap_or_default();
        assert_eq!(effects, if succeeded { "1\n" } else { "" }, "{label}");
        assert!(
            !home.path().join("staged.log").exists(),
            "{label}: a cut answer is never acted on"
        );
        if succeeded {
            assert!(screen.contains("Done."), "{label}: {screen}");
        } else {
            // Said in words (the kind's name is for --json).
            let kind = outcome["failure"].as_str().unwrap();
            assert!(
                screen.contains("error: the "),
                "{label}: the failure is said: {screen}"
            );
            assert!(!screen.contains(&format!("({kind}")), "{label}: {screen}");
        }
        assert!(
            screen.matches(PARTIAL).count() <= 1,
            "{label}: text shown twice: {screen}"
        );
        if outcome["retries"].as_u64().unwrap() > 0 {
            assert!(screen.contains("retry 1/"), "{label}: {screen}");
        }
    }
}
