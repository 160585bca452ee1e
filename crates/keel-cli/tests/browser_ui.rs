//! The browser UI end to end: the real `keel serve` against `keel mock`, driven in Debian's
//! Chromium by `playwright-core` (`crates/keel-serve/e2e/drive.mjs`). Each test starts a
//! scenario, lets the page do what a person would, then checks the workspace and the
//! provider's requests from here.
//!
//! Needs `chromium` and `npm ci` in `crates/keel-serve/e2e` (`.ci/run` does both). Without
//! them the tests are ignored, with that reason (the build script decides); under CI (`CI`
//! set) they run, and fail.

use crate::common::*;
use serde_json::json;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

fn e2e_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../keel-serve/e2e")
}

const NEEDS: &str = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)";

/// The Chromium the build found (`$CHROMIUM`, or `chromium` on `PATH`).
fn chromium() -> PathBuf {
    PathBuf::from(option_env!("KEEL_E2E_CHROMIUM").unwrap_or("/usr/bin/chromium"))
}

/// Fail, saying what to install, when the kit is missing. Without it the tests are ignored
/// (`keel_e2e_browser` unset); under CI they run regardless, and fail here.
fn require_browser() {
    let ready = chromium().is_file()
        && e2e_dir().join("node_modules/playwright-core").is_dir()
        && Command::new("node").arg("--version").output().is_ok();
    assert!(ready, "this test {NEEDS}");
}

struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(home: &Home) -> Served {
    let mut child = home
        .keel(&["serve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    Served {
        child,
        url: url.trim().to_string(),
    }
}

/// Run `scenario` in the browser against a home scripted with `steps`, with `top` lines at
/// the top of its config.
fn drive(scenario: &str, steps: serde_json::Value, top: &str) -> (Home, MockProcess) {
    drive_with(scenario, steps, top, &[])
}

/// `drive`, with variables for the driver script.
fn drive_with(
    scenario: &str,
    steps: serde_json::Value,
    top: &str,
    env: &[(&str, &str)],
) -> (Home, MockProcess) {
    drive_prepared(scenario, steps, top, env, &|_| {})
}

/// `drive_with`, with `prepare` done to the home (also the workspace) before keel starts.
fn drive_prepared(
    scenario: &str,
    steps: serde_json::Value,
    top: &str,
    env: &[(&str, &str)],
    prepare: &dyn Fn(&Home),
) -> (Home, MockProcess) {
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config(top);
    prepare(&home);
    let served = serve(&home);
    let out = e2e_dir().join("out");
    let output = Command::new("node")
        .env("CHROMIUM", chromium())
        .envs(env.iter().copied())
        .arg(e2e_dir().join("drive.mjs"))
        .args([scenario, &served.url, out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{scenario}:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    drop(served);
    (home, mock)
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn tool_rounds_show_as_cards_with_their_states() {
    require_browser();
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo a >> effects.log"}},
        {"tool": "bash", "args": {"command": "echo b >> effects.log"}},
        {"say": "All done.\n\n- wrote `effects.log`\n- **twice**, once per call"},
    ]});
    let (home, _mock) = drive("cards", steps, "permission_mode = \"auto\"");
    let effects = std::fs::read_to_string(home.path().join("effects.log")).unwrap();
    assert_eq!(effects, "a\nb\n", "each effect once");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn a_turn_shows_live_output_the_renderers_diff_and_a_rendered_stream() {
    require_browser();
    let answer = format!(
        "## Report\n\n| step | state |\n|---|---|\n| edit | done |\n\n{}ENDWORD",
        "The work went as planned. ".repeat(12)
    );
    let steps = json!({"chunk_delay_ms": 40, "steps": [
        {"tool": "bash", "args": {"command": "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.6; done"}},
        {"tool": "edit_file", "args": {"path": "notes.txt", "old_string": "two", "new_string": "beta"}},
        {"say": answer},
    ]});
    let (home, _mock) = drive_prepared("live", steps, "permission_mode = \"auto\"", &[], &|home| {
        std::fs::write(home.path().join("notes.txt"), "one\ntwo\nthree\n").unwrap();
        home.append_config(
            "[providers.deepseek.price]\ninput_cache_hit = 1.0\ninput_cache_miss = 2.0\n\
                 output = 4.0\ncurrency = \"EUR\"\n",
        );
    });
    let notes = std::fs::read_to_string(home.path().join("notes.txt")).unwrap();
    assert_eq!(notes, "one\nbeta\nthree\n");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn approvals_from_the_card_allow_one_call_and_deny_another() {
    require_browser();
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "yes.txt", "content": "y"}},
        {"tool": "write_file", "args": {"path": "no.txt", "content": "n"}},
        {"say": "done"},
    ]});
    let (home, mock) = drive("approvals", steps, "permission_mode = \"ask\"");
    assert!(home.path().join("yes.txt").exists());
    assert!(!home.path().join("no.txt").exists());
    assert!(
        mock.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("the user declined")
    );
    assert!(
        mock.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("The user's note: use the other file"),
        "the note from the card reached the model"
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn the_unconfined_rerun_is_its_own_question_on_the_card_without_always() {
    require_browser();
    // Outside /tmp (which the sandbox replaces), so the refusal reads as one.
    let outside = dir_outside_tmp();
    let target = outside.path().join("made-outside");
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": format!("echo made > {}", target.display())}},
        {"say": "done"},
    ]});
    let (_home, mock) = drive("unconfined", steps, "permission_mode = \"ask\"");
    assert!(!target.exists(), "denied: nothing ran outside the sandbox");
    assert!(
        mock.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("they did not")
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn the_recovery_button_finishes_a_rejected_replay_with_each_effect_once() {
    require_browser();
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo ran >> effects.log"}},
        {"fault": {"status": 400, "body": ""}},
        {"say": "Recovered from valid history."},
    ]});
    let (home, mock) = drive("recovery", steps, "permission_mode = \"auto\"");
    let effects = std::fs::read_to_string(home.path().join("effects.log")).unwrap();
    assert_eq!(
        effects, "ran\n",
        "the tool ran once, not again by the recovery"
    );
    assert_eq!(mock.requests().len(), 3);
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn the_compact_button_finishes_a_task_after_a_context_limit_rejection() {
    require_browser();
    let steps = effect_steps(30, "All rounds done.");
    let (home, mock) = drive(
        "compact",
        json!({"context_window": 2500, "steps": steps}),
        "permission_mode = \"auto\"",
    );
    assert_each_effect_once(&home, 30);
    assert!(asked_to_focus_on(&mock, "the effects log"));
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn a_markdown_answer_is_the_renderers_html_live_and_after_a_reload() {
    require_browser();
    let answer = "## Results\n\n| Agent | Memory |\n|:--|--:|\n| keel | 19.5 MiB |\n| other | 618 MiB |\n\n```rust\nfn main() {}\n```\n\n3. third\n4. fourth\n\nSee [the docs](https://example.com/docs) or [this](javascript:alert(1)).\n\n<script>alert(1)</script>\n\nThe end.";
    drive("markdown", json!({"steps": [{"say": answer}]}), "");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn stop_during_a_slow_stream_shows_nothing_late() {
    require_browser();
    // The story streams as the reasoning of a tool call: had Stop not stopped the turn, the
    // call would run once the stream ends (`auto` mode) and write effects.log.
    let story = "Once upon a time ".repeat(12) + "ENDWORD";
    let delay_ms = 250;
    // The mock cuts text into pieces of 12 characters; the call and the stream's end follow.
    let frames = story.chars().count().div_ceil(12) + 8;
    let steps = json!({"chunk_delay_ms": delay_ms, "steps": [
        {"tool": "bash", "args": {"command": "echo late >> effects.log"}, "reason": story},
        {"say": "never asked for"},
    ]});
    let (home, _mock) = drive_with(
        "stop",
        steps,
        "permission_mode = \"auto\"",
        &[("LATE_AFTER_MS", &(frames * delay_ms).to_string())],
    );
    assert!(
        !home.path().join("effects.log").exists(),
        "the stopped call never ran"
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn a_reload_mid_turn_keeps_the_transcript_whole_and_streaming() {
    require_browser();
    let story = "Once upon a time ".repeat(8) + "FINALWORD";
    let steps = json!({"chunk_delay_ms": 150, "steps": [{"say": story}]});
    drive("reload", steps, "");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn a_transient_503_shows_a_retry_notice_and_no_duplicated_text() {
    require_browser();
    // Slow chunks keep the notice on screen while the answer streams.
    let steps = json!({"chunk_delay_ms": 200, "steps": [
        {"fault": {"status": 503, "body": ""}},
        {"say": "Answer after retry."},
    ]});
    let (_home, mock) = drive("retry", steps, "");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn typing_a_slash_lists_the_commands_and_a_custom_one_runs() {
    require_browser();
    let steps = json!({"steps": [{"say": "reviewed"}]});
    let (_home, mock) = drive_prepared("commands", steps, "", &[], &|home| {
        write_review_command(home, "Review $1 for the browser.");
    });
    assert_eq!(last_user_message(&mock), "Review app.rs for the browser.");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn undo_from_the_browser_puts_the_files_and_messages_back() {
    require_browser();
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "notes.md", "content": "# Notes\n"}},
        {"say": "Changed."},
    ]});
    let (home, _mock) = drive("undo", steps, "permission_mode = \"auto\"");
    assert!(
        !home.path().join("notes.md").exists(),
        "the created file is gone"
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn a_plan_is_approved_from_its_card_after_a_note() {
    require_browser();
    let steps = json!({"steps": [
        {"tool": "propose_plan", "args": {"plan": "1. Rewrite everything"}},
        {"tool": "propose_plan", "args": {"plan": "1. Rename **parse**\n2. Update the callers"}},
        {"tool": "write_file", "args": {"path": "done.txt", "content": "y"}},
        {"say": "Renamed."},
    ]});
    let (home, mock) = drive("plan", steps, "permission_mode = \"plan\"");
    assert!(home.path().join("done.txt").exists());
    let requests = mock.requests();
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

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn fork_from_the_browser_moves_to_a_session_that_begins_with_the_originals_bytes() {
    require_browser();
    let steps = json!({"steps": [{"say": "first answer"}, {"say": "from the fork"}]});
    let (home, mock) = drive("fork", steps, "");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let body = |index: usize| -> serde_json::Value {
        serde_json::from_str(requests[index]["body"].as_str().unwrap()).unwrap()
    };
    let (first, forked) = (body(0), body(1));
    let first_messages = first["messages"].as_array().unwrap();
    let forked_messages = forked["messages"].as_array().unwrap();
    assert_eq!(
        &forked_messages[..first_messages.len()],
        &first_messages[..]
    );
    let listed = home.run(&["sessions", "--json"]);
    let sessions: serde_json::Value = serde_json::from_str(&listed.stdout()).unwrap();
    assert_eq!(
        sessions.as_array().unwrap().len(),
        2,
        "the original and its fork"
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn a_first_visit_starts_a_new_session_and_the_list_names_each_by_its_first_prompt() {
    require_browser();
    let steps = json!({"steps": [{"say": "answer one"}, {"say": "answer two"}]});
    let (home, _mock) = drive_prepared("sessions", steps, "", &[], &|home| {
        for prompt in ["first task", "second task"] {
            let run = home.run(&["run", prompt]);
            assert_eq!(run.code(), 0, "{}", run.stderr());
        }
    });
    // The tab's own session was never typed into: the command line does not list it.
    let listed = home.run(&["sessions", "--json"]).stdout();
    let mut titles: Vec<String> = serde_json::from_str::<Vec<serde_json::Value>>(&listed)
        .unwrap()
        .iter()
        .map(|session| session["title"].as_str().unwrap().to_string())
        .collect();
    titles.sort();
    assert_eq!(titles, ["first task", "second task"]);
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn without_its_token_the_page_says_to_open_the_url_keel_printed() {
    require_browser();
    drive("no_token", json!({"steps": []}), "");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn a_refused_key_says_in_the_browser_what_the_terminal_says_to_do() {
    require_browser();
    let body = r#"{"error":{"message":"Authentication Fails: secret detail","type":"authentication_error"}}"#;
    let steps = json!({"steps": [{"fault": {"status": 401, "body": body}}]});
    drive("refused_key", steps, "");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn open_plan_items_are_said_in_plain_words_and_continued_with_one_click() {
    require_browser();
    let todos = |second: &str| {
        json!({"todos": [
            {"content": "edit", "status": "completed"},
            {"content": "run the tests", "status": second},
        ]})
    };
    let steps = json!({"steps": [
        {"tool": "todo_write", "args": todos("pending")},
        {"say": "Edited the file."},
        {"tool": "todo_write", "args": todos("completed")},
        {"say": "Ran the tests: they pass."},
    ]});
    let (_home, mock) = drive("readiness", steps, "permission_mode = \"auto\"");
    assert_eq!(mock.requests().len(), 4, "the checks ran once");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn a_prompt_sent_during_a_turn_is_queued_in_the_page_and_sent_when_it_ends() {
    require_browser();
    let story = "Once upon a time ".repeat(10) + "ENDSTORY";
    let steps = json!({"chunk_delay_ms": 120, "steps": [
        {"say": story},
        {"say": "Second answer."},
    ]});
    let (_home, mock) = drive("queue", steps, "");
    let requests = mock.requests();
    assert_eq!(
        requests.len(),
        2,
        "the first prompt, then the queued one; never the cancelled"
    );
    let last = requests[1]["body"].as_str().unwrap();
    assert!(last.contains("second question"), "{last}");
    assert!(!last.contains("third question"), "{last}");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn an_approved_edit_keeps_its_numbered_diff_after_the_turn() {
    require_browser();
    let steps = json!({"steps": [
        {"tool": "edit_file", "args": {"path": "notes.txt", "old_string": "gamma", "new_string": "GAMMA"}},
        {"say": "Edited."},
    ]});
    let (home, _mock) = drive_prepared(
        "kept_diff",
        steps,
        "permission_mode = \"ask\"",
        &[],
        &|home| {
            std::fs::write(
                home.path().join("notes.txt"),
                "alpha\nbeta\ngamma\ndelta\nepsilon\n",
            )
            .unwrap();
        },
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("notes.txt")).unwrap(),
        "alpha\nbeta\nGAMMA\ndelta\nepsilon\n"
    );
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn after_a_stopped_turn_the_queue_waits_until_send_resumes_it() {
    require_browser();
    let story = "Once upon a time ".repeat(30) + "ENDSTORY";
    let steps = json!({"chunk_delay_ms": 150, "steps": [
        {"say": story},
        {"say": "Second answer."},
    ]});
    let (_home, mock) = drive("queue_paused", steps, "");
    let last = mock.requests().last().unwrap()["body"].to_string();
    assert!(last.contains("second question"), "{last}");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn subagents_show_as_cards_and_their_questions_are_answered_on_the_page() {
    require_browser();
    let steps = two_children_asking(800);
    let (home, mock) = drive("subagents", steps, "");
    assert!(home.path().join("a.txt").exists() && home.path().join("b.txt").exists());
    let children = mock
        .requests()
        .iter()
        .filter(|request| request["conversation"].is_number())
        .count();
    assert_eq!(children, 4, "two rounds each, nothing twice");
}

#[test]
#[cfg_attr(
    not(keel_e2e_browser),
    ignore = "needs chromium and `npm ci` in crates/keel-serve/e2e (.ci/run installs both)"
)]
fn a_background_job_is_listed_in_the_jobs_panel_and_its_kill_button_stops_it() {
    require_browser();
    let marker = format!("sleep 300.{}4", std::process::id());
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": format!("echo watcher-ready; {marker}"), "run_in_background": true}},
        {"say": "Watching."},
    ]});
    let (_home, _mock) = drive_with("jobs", steps, "", &[("KEEL_E2E_MARKER", &marker)]);
    let left = Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "the killed job still runs");
}
