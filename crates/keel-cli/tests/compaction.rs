//! Long sessions: compaction at the threshold, by hand and as the recovery after a
//! context-limit rejection — the real binary against `keel mock` with a small window.

use crate::common::*;
use keel_types::COMPACTION_REQUEST_MARKER;
use serde_json::{Value, json};

/// A scenario of `rounds` bash calls, each appending its number to effects.log, then an answer.
fn effects_scenario(rounds: usize, window: u64) -> String {
    json!({"context_window": window, "steps": effect_steps(rounds, "All rounds done.")}).to_string()
}

fn is_summarising(request: &Value) -> bool {
    request["body"]
        .as_str()
        .is_some_and(|body| body.contains(COMPACTION_REQUEST_MARKER))
}

/// The part of a Chat body before its messages, and its system message: the stable prefix.
fn stable_head(body: &str) -> (String, Value) {
    let head = body.split("\"messages\":[").next().unwrap().to_string();
    let parsed: Value = serde_json::from_str(body).unwrap();
    (head, parsed["messages"][0].clone())
}

#[test]
fn a_200_round_session_in_a_4000_token_window_compacts_and_finishes_with_each_effect_once() {
    let (home, mock) = scripted(
        "chat",
        &effects_scenario(200, 4000),
        "context_window = 4000",
    );
    let run = home.run(&["run", "--yes", "--json", "run all the rounds"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_each_effect_once(&home, 200);

    let compactions = run.events_of("context/compacted");
    assert!(
        compactions.len() >= 3,
        "several compactions: {}",
        compactions.len()
    );
    for compaction in &compactions {
        assert_eq!(compaction["reason"], "threshold");
        assert!(compaction["tokens_after"].as_u64() < compaction["tokens_before"].as_u64());
    }
    // Each rewrite is announced at once: invalidation, the compaction, the prefix break.
    let types: Vec<String> = run
        .events()
        .iter()
        .map(|event| event["type"].as_str().unwrap().to_string())
        .collect();
    for (index, kind) in types.iter().enumerate() {
        if kind == "history/rewritten" {
            assert_eq!(types[index + 1], "context/compacted");
            assert_eq!(types[index + 2], "prefix/changed");
        }
    }
    let completed = run.events_of("turn/completed");
    let context = &completed[0]["context"];
    assert_eq!(context["window"], 4000);
    assert!(context["used"].as_u64().unwrap() < 4000, "{context}");

    // Requests: never over the window; append-only between compactions; the stable prefix
    // (system prompt and tools) byte-identical across every compaction.
    let requests = mock.requests();
    let ordinary: Vec<Vec<Value>> = requests
        .split(is_summarising)
        .map(<[Value]>::to_vec)
        .collect();
    assert_eq!(ordinary.len(), compactions.len() + 1);
    let first_head = stable_head(requests[0]["body"].as_str().unwrap());
    for stretch in &ordinary {
        assert!(!stretch.is_empty());
        assert_prefix_stable(stretch);
        assert_eq!(
            stable_head(stretch[0]["body"].as_str().unwrap()),
            first_head
        );
    }
    assert!(
        requests
            .iter()
            .all(|request| request["step"].is_number() || is_summarising(request)),
        "no request was rejected as over the window"
    );

    // The store: revisions listed, the first one readable as it was.
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    let shown = session_json(&home, &session, &[]);
    let revisions = shown["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), compactions.len() + 1);
    assert_eq!(shown["revision"], revisions.len());
    // The context block is kept verbatim ahead of the summary.
    assert_eq!(shown["items"][0]["role"], "context");
    assert_eq!(shown["items"][1]["role"], "summary");
    let receipts = shown["receipts"].as_array().unwrap();
    assert_eq!(receipts.len(), 200, "receipts are untouched by compaction");
    assert!(
        receipts
            .iter()
            .all(|receipt| receipt["state"] == "completed")
    );
    let first = session_json(&home, &session, &["--revision", "1"]);
    assert_eq!(first["items"][1]["text"], "run all the rounds");
    let text = home.run(&["session", "show", &session]);
    assert!(
        text.stdout().contains("history revisions (this is"),
        "{}",
        text.stdout()
    );
    let missing = home.run(&["session", "show", &session, "--revision", "999"]);
    assert_eq!(missing.code(), 2, "{}", missing.stderr());
    assert!(
        missing.stderr().contains("no history revision 999"),
        "{}",
        missing.stderr()
    );
}

fn session_of(run: &Run) -> String {
    run.events()[0]["session_id"].as_str().unwrap().to_string()
}

#[test]
fn a_context_limit_rejection_offers_compact_which_compacts_and_finishes_the_task() {
    // keel does not know this model's window: only the provider's rejection tells it.
    let (home, mock) = scripted("chat", &effects_scenario(30, 3400), "");
    let failed = home.run(&["run", "--yes", "--json", "run all the rounds"]);
    assert_eq!(failed.code(), 1, "{}", failed.stderr());
    let session = session_of(&failed);
    let diagnostic = &failed.events_of("turn/failed")[0]["diagnostic"];
    assert_eq!(diagnostic["kind"], "limit");
    let offered = failed.events_of("recovery/offered");
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0]["action"], "context_recovery");
    assert!(
        failed.stderr().contains(&format!(
            "recovery available: keel run --session {session} \"/compact\""
        )),
        "{}",
        failed.stderr()
    );
    assert!(
        failed.events_of("context/compacted").is_empty(),
        "never compacted silently"
    );
    let done_before = std::fs::read_to_string(home.path().join("effects.log"))
        .unwrap()
        .lines()
        .count();
    assert!(done_before < 30);
    let rejected = mock.requests().len();

    let recovered = home.run(&["run", "--session", &session, "--yes", "--json", "/compact"]);
    assert_eq!(recovered.code(), 0, "{}", recovered.stderr());
    assert_eq!(recovered.events_of("recovery/consumed").len(), 1);
    assert_eq!(
        recovered.events_of("turn/started")[0]["input_kind"],
        "context_recovery"
    );
    let compacted = recovered.events_of("context/compacted");
    assert_eq!(compacted.len(), 1);
    assert_eq!(compacted[0]["reason"], "context_limit");
    assert_each_effect_once(&home, 30);
    // The summarising request came first, and fit.
    let requests = mock.requests();
    assert!(is_summarising(&requests[rejected]));

    // The offer was used: a second `/compact` is a compaction by hand, with its focus.
    let manual = home.run(&[
        "run",
        "--session",
        &session,
        "--yes",
        "--json",
        "/compact the effects log",
    ]);
    assert_eq!(manual.code(), 0, "{}", manual.stderr());
    assert_eq!(
        manual.events_of("turn/started")[0]["input_kind"],
        "compaction"
    );
    assert_eq!(manual.events_of("context/compacted")[0]["reason"], "manual");
    let last = mock.requests().pop().unwrap();
    assert!(
        last["body"]
            .as_str()
            .unwrap()
            .contains("Focus the summary on: the effects log")
    );
    assert_each_effect_once(&home, 30);
}

#[test]
fn a_single_item_larger_than_the_window_offers_nothing_and_says_why() {
    let scenario = json!({"context_window": 4000, "steps": [
        {"tool": "bash", "args": {"command": "echo 1 >> effects.log; head -c 20000 /dev/zero | tr '\\0' x"}},
        {"say": "never reached"}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "context_window = 4000");
    let run = home.run(&["run", "--yes", "--json", "make a big output"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(run.events_of("recovery/offered").is_empty());
    assert!(
        !run.stderr().contains("recovery available"),
        "{}",
        run.stderr()
    );
    let diagnostic = &run.events_of("turn/failed")[0]["diagnostic"];
    assert_eq!(diagnostic["kind"], "limit");
    let message = diagnostic["message"].as_str().unwrap();
    assert!(
        message.contains("compaction cannot make it fit"),
        "{message}"
    );
    let plain = home.run(&["session", "show", &session_of(&run)]);
    assert_eq!(plain.code(), 0);
    assert_each_effect_once(&home, 1);
    // By hand, too, there is nothing compaction could do.
    let session = session_of(&run);
    let manual = home.run(&["run", "--session", &session, "/compact"]);
    assert_eq!(manual.code(), 2, "{}", manual.stderr());
    assert!(
        manual.stderr().contains("cannot compact"),
        "{}",
        manual.stderr()
    );

    // A model whose window keel does not know: the rejection itself says how large is too large.
    let (home, _mock) = scripted("chat", &scenario, "");
    let run = home.run(&["run", "--yes", "--json", "make a big output"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(
        run.events_of("recovery/offered").is_empty(),
        "nothing that cannot help is offered"
    );
    let message = run.events_of("turn/failed")[0]["diagnostic"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("compaction cannot make it fit"),
        "{message}"
    );
}

#[test]
fn open_plan_items_keep_a_turn_not_ready_after_the_plan_was_compacted_away() {
    let plan = json!({"todos": [{"content": "append 1..40", "status": "in_progress"},
                                {"content": "run the tests", "status": "pending"}]});
    let mut steps = vec![json!({"tool": "todo_write", "args": plan})];
    steps.extend(effect_steps(40, "Appended everything."));
    let scenario = json!({"context_window": 4000, "steps": steps}).to_string();
    let (home, _mock) = scripted("chat", &scenario, "context_window = 4000");
    let run = home.run(&["run", "--yes", "--json", "append and test"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(!run.events_of("context/compacted").is_empty());
    let session = session_of(&run);
    let shown = session_json(&home, &session, &[]);
    let items = serde_json::to_string(&shown["items"]).unwrap();
    assert!(
        !items.contains("\"name\":\"todo_write\""),
        "the plan's call was compacted away: {items}"
    );
    assert!(items.contains("Open plan items (todo_write): append 1..40; run the tests"));
    let completed = &run.events_of("turn/completed")[0];
    assert_eq!(completed["ready"], false, "{completed}");
    assert_eq!(
        run.events_of("recovery/offered")[0]["action"],
        "final_readiness_recovery"
    );
    assert_each_effect_once(&home, 40);
}

#[test]
fn a_crash_during_compaction_leaves_the_old_revision_whole_and_nothing_runs_twice() {
    // Killed before the commit and inside it: the old revision, whole. Killed just after it: the
    // new one, whole. Never a mix.
    for (point, revisions) in [
        ("compaction_summarised", 1),
        ("compaction_commit", 1),
        ("after_compaction_commit", 2),
    ] {
        let (home, _mock) = scripted("chat", &effects_scenario(60, 4000), "context_window = 4000");
        let killed = home
            .keel(&["run", "--yes", "--json", "run all the rounds"])
            .env("KEEL_KILL_AT", point)
            .output()
            .unwrap();
        assert!(!killed.status.success(), "{point}: keel must have died");
        let stdout = String::from_utf8_lossy(&killed.stdout);
        let events: Vec<Value> = stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert!(
            !events
                .iter()
                .any(|event| event["type"] == "context/compacted"),
            "{point}: died before the compaction was announced"
        );
        let session = events[0]["session_id"].as_str().unwrap().to_string();
        let shown = session_json(&home, &session, &[]);
        assert_eq!(
            shown["revisions"].as_array().unwrap().len(),
            revisions,
            "{point}: revisions"
        );
        assert_eq!(shown["items"][0]["role"], "context", "{point}");
        let head = if revisions == 1 {
            &shown["items"][1]["text"]
        } else {
            &shown["items"][1]["role"]
        };
        let expected_head = if revisions == 1 {
            "run all the rounds"
        } else {
            "summary"
        };
        assert_eq!(head, expected_head, "{point}");
        let receipts = shown["receipts"].as_array().unwrap();
        assert!(
            receipts
                .iter()
                .all(|receipt| receipt["state"] == "completed")
        );
        let done = receipts.len();

        let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
        assert_eq!(resumed.code(), 0, "{point}: {}", resumed.stderr());
        if revisions == 1 {
            assert!(!resumed.events_of("context/compacted").is_empty());
        }
        assert_each_effect_once(&home, 60);
        let after = session_json(&home, &session, &[]);
        assert_eq!(
            after["receipts"].as_array().unwrap().len(),
            60,
            "{point}: {done} calls before the crash, none repeated"
        );
    }
}

/// 40 rounds in a 4000-token window (compacting on the way), then an opaque 400 on the next
/// replay of the tool history, then an answer.
fn compacted_then_opaque_400() -> String {
    let mut steps = effect_steps(40, "Recovered from the compacted history.");
    steps.insert(40, json!({"fault": {"status": 400, "body": ""}}));
    json!({"context_window": 4000, "steps": steps}).to_string()
}

#[test]
fn a_compacted_session_recovers_from_an_opaque_400_and_a_compaction_expires_a_pending_recovery() {
    // Recovery after compaction: from the compacted history, nothing re-run.
    let (home, mock) = scripted(
        "chat",
        &compacted_then_opaque_400(),
        "context_window = 4000",
    );
    let failed = home.run(&["run", "--yes", "--json", "run all the rounds"]);
    assert_eq!(failed.code(), 1, "{}", failed.stderr());
    assert!(!failed.events_of("context/compacted").is_empty());
    assert_eq!(
        failed.events_of("recovery/offered")[0]["action"],
        "protocol_recovery"
    );
    let session = session_of(&failed);
    let recovered = home.run(&[
        "run",
        "--session",
        &session,
        "--yes",
        "--json",
        "/recover-context",
    ]);
    assert_eq!(recovered.code(), 0, "{}", recovered.stderr());
    let last = mock.requests().pop().unwrap();
    let body = last["body"].as_str().unwrap();
    assert!(
        body.contains("was compacted into this summary"),
        "recovered from the compacted history"
    );
    assert!(body.contains("Tool facts of the interrupted task"));
    assert_each_effect_once(&home, 40);

    // A pending protocol recovery is expired by a compaction, and the user is told.
    let (home, _mock) = scripted(
        "chat",
        &compacted_then_opaque_400(),
        "context_window = 4000",
    );
    let failed = home.run(&["run", "--yes", "--json", "run all the rounds"]);
    assert_eq!(failed.code(), 1, "{}", failed.stderr());
    let session = session_of(&failed);
    let recovery_id = failed.events_of("recovery/offered")[0]["recovery_id"].clone();
    let compacted = home.run(&["run", "--session", &session, "--yes", "--json", "/compact"]);
    assert_eq!(compacted.code(), 0, "{}", compacted.stderr());
    assert_eq!(
        compacted.events_of("recovery/expired")[0]["recovery_id"],
        recovery_id
    );
    let text = home.run(&["run", "--session", &session, "--yes", "/compact"]);
    assert!(
        text.stderr().contains("context compacted (manual)"),
        "{}",
        text.stderr()
    );
    let stale = home.run(&["run", "--session", &session, "--yes", "/recover-context"]);
    assert_eq!(stale.code(), 2, "{}", stale.stderr());
    assert!(stale.stderr().contains("expired"), "{}", stale.stderr());
    assert_each_effect_once(&home, 40);
}

#[test]
fn below_the_threshold_nothing_is_compacted_and_every_request_extends_the_last() {
    let (home, mock) = scripted(
        "chat",
        &effects_scenario(20, 100_000),
        "context_window = 100000",
    );
    let run = home.run(&["run", "--yes", "--json", "run all the rounds"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.events_of("context/compacted").is_empty());
    assert!(run.events_of("prefix/changed").is_empty());
    let requests = mock.requests();
    assert_eq!(requests.len(), 21);
    assert_prefix_stable(&requests);
    let context = &run.events_of("turn/completed")[0]["context"];
    assert_eq!(context["window"], 100_000);
    let used = context["used"].as_u64().unwrap();
    assert!(used > 1000 && used < 20_000, "{context}");
    assert_each_effect_once(&home, 20);
}

#[test]
fn a_history_far_over_a_smaller_window_is_summarised_from_a_condensed_transcript() {
    // A long session, then resumed on a model with a much smaller window.
    let (home, _first) = scripted(
        "chat",
        &effects_scenario(30, 100_000),
        "context_window = 100000",
    );
    let run = home.run(&["run", "--yes", "--json", "run all the rounds"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = session_of(&run);
    let scenario = json!({"context_window": 2500, "steps": [
        {"compact": "Thirty rounds appended 1..30 to effects.log; all completed."},
        {"say": "Nothing left to do."}
    ]})
    .to_string();
    let (_dir, small) = repoint(&home, "chat", &scenario, "context_window = 2500");
    let resumed = home.run(&[
        "run",
        "--session",
        &session,
        "--yes",
        "--json",
        "anything left?",
    ]);
    assert_eq!(
        resumed.code(),
        0,
        "{}\n{}",
        resumed.stderr(),
        resumed.stdout()
    );
    assert_eq!(
        resumed.events_of("context/compacted")[0]["reason"],
        "threshold"
    );
    let requests = small.requests();
    assert_eq!(
        requests.len(),
        2,
        "the summary and the answer, nothing rejected"
    );
    let summarising = requests[0]["body"].as_str().unwrap();
    assert!(summarising.contains("The conversation so far, as text:"));
    assert!(
        summarising.contains("assistant called bash"),
        "the rounds, as text"
    );
    assert_eq!(requests[0]["step"], 1, "the scripted summary answered it");
    let answer = requests[1]["body"].as_str().unwrap();
    assert!(answer.contains("Thirty rounds appended 1..30"));
    assert_each_effect_once(&home, 30);
}

#[test]
fn a_cancelled_or_failed_summary_leaves_the_history_as_it_was() {
    let (home, _first) = scripted(
        "chat",
        &effects_scenario(12, 100_000),
        "context_window = 100000",
    );
    let run = home.run(&["run", "--yes", "--json", "run the rounds"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = session_of(&run);
    let before = session_json(&home, &session, &[])["items"].clone();
    let scenario = json!({"steps": [
        {"compact": "never sent", "fault": "stall", "seconds": 30},
        {"compact": "refused", "fault": {"status": 400, "body": "{\"error\":{\"message\":\"bad request\",\"type\":\"invalid_request_error\"}}"}},
        {"compact": "Twelve rounds appended 1..12 to effects.log."}
    ]})
    .to_string();
    let (_dir, second) = repoint(&home, "chat", &scenario, "context_window = 100000");

    // Ctrl-C while the summary is being written: nothing is committed.
    let mut child = home
        .keel(&["run", "--session", &session, "--json", "/compact"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(
        "the summarising request reached the provider",
        std::time::Duration::from_secs(15),
        || !second.requests().is_empty(),
    );
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = wait_for_exit(&mut child, std::time::Duration::from_secs(15), "keel run");
    assert_eq!(status.code(), Some(130));
    let shown = session_json(&home, &session, &[]);
    assert_eq!(shown["revisions"].as_array().unwrap().len(), 1);
    assert_eq!(shown["items"], before, "the history is as it was");

    // A summarising request the provider refuses is a failure that changes nothing either.
    let refused = home.run(&["run", "--session", &session, "/compact"]);
    assert_eq!(refused.code(), 1, "{}", refused.stderr());
    assert!(
        refused.stderr().contains("rejected the request as invalid"),
        "{}",
        refused.stderr()
    );
    assert_eq!(session_json(&home, &session, &[])["items"], before);

    let done = home.run(&["run", "--session", &session, "/compact"]);
    assert_eq!(done.code(), 0, "{}", done.stderr());
    let shown = session_json(&home, &session, &[]);
    assert_eq!(shown["revisions"].as_array().unwrap().len(), 2);
    assert_each_effect_once(&home, 12);
}

/// A call left `unknown` by a crash is summarised away by a compaction: the summarising request
/// and the committed summary both say it is unknown (from the receipts, whatever the model
/// wrote), the receipt stays unknown, and nothing runs again.
#[test]
fn an_unknown_outcome_stays_unknown_in_the_summary_and_is_never_rerun() {
    let mut steps = vec![json!({"tool": "bash", "args": {
        "command": "echo started >> effects.log; sleep 30"
    }})];
    steps.extend(effect_steps(3, "Three more rounds done."));
    steps.push(json!({"compact": "The model's summary: everything went fine."}));
    steps.push(json!({"say": "unused"}));
    let (home, mock) = scripted("chat", &json!({"steps": steps}).to_string(), "");
    let (session, _tool) = kill_during_tool(&home);
    let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    let compacted = home.run(&["run", "--session", &session, "--yes", "--json", "/compact"]);
    assert_eq!(compacted.code(), 0, "{}", compacted.stderr());
    assert_eq!(compacted.events_of("context/compacted").len(), 1);
    assert!(compacted.events_of("tool/call").is_empty(), "no tool runs");

    // The ledger line of the crashed call, in a JSON text (lines joined by `\n` escapes).
    let ledger_line = |json: &str| -> String {
        json.split("\\n")
            .find(|line| line.starts_with("- call_") && line.contains("echo started"))
            .unwrap_or_else(|| panic!("no ledger line for the crashed call: {json}"))
            .to_string()
    };
    let requests = mock.requests();
    let summarising = requests.iter().find(|r| is_summarising(r)).unwrap();
    let asked = summarising["body"].as_str().unwrap();
    assert!(asked.contains("from keel's receipts"), "{asked}");
    assert!(ledger_line(asked).contains(": unknown"), "{asked}");
    let shown = session_json(&home, &session, &[]);
    let summary = shown["items"][1].to_string();
    assert!(summary.contains("everything went fine"), "{summary}");
    assert!(ledger_line(&summary).contains(": unknown"), "{summary}");
    assert_eq!(
        receipt_states(&shown),
        ["unknown", "completed", "completed", "completed"]
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("effects.log")).unwrap(),
        "started\n1\n2\n3\n"
    );
}

/// A summary cut off at the output limit is committed with a note saying so (the ledger from
/// the receipts still follows it), never passed off as whole.
#[test]
fn a_summary_cut_off_at_the_output_limit_says_so() {
    let mut steps = effect_steps(4, "Four rounds done.");
    steps.push(
        json!({"compact": "The user wants four rounds; rounds one to", "finish_reason": "length"}),
    );
    let (home, _mock) = scripted("chat", &json!({"steps": steps}).to_string(), "");
    let run = home.run(&["run", "--yes", "--json", "run the rounds"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = session_of(&run);
    let compacted = home.run(&["run", "--session", &session, "--yes", "--json", "/compact"]);
    assert_eq!(compacted.code(), 0, "{}", compacted.stderr());
    let summary = session_json(&home, &session, &[])["items"][1]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        summary.contains("rounds one to\n\n[keel: the summary above was cut off at the output limit; what it did not say is not known]"),
        "{summary}"
    );
    assert!(summary.contains("from keel's receipts"), "{summary}");
}
