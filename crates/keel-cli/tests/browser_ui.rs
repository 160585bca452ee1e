//! The browser UI end to end: the real `keel serve` against `keel mock`, driven in Debian's
//! Chromium by `playwright-core` (`crates/keel-serve/e2e/drive.mjs`). Each test starts a
//! scenario, lets the page do what a person would, then checks the workspace and the
//! provider's requests from here.
//!
//! Needs `chromium` and `npm ci` in `crates/keel-serve/e2e` (`.ci/run` does both). Without
//! them a test says so and passes, except under CI (`CI` set), where it fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use serde_json::json;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

fn e2e_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../keel-serve/e2e")
}

/// Whether the browser tests can run here; under CI they must.
fn browser_available() -> bool {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let ready = std::path::Path::new(&chromium).exists()
        && e2e_dir().join("node_modules/playwright-core").is_dir()
        && Command::new("node").arg("--version").output().is_ok();
    if !ready {
        assert!(
            std::env::var_os("CI").is_none(),
            "browser tests need chromium and `npm ci` in crates/keel-serve/e2e"
        );
        eprintln!("skipped: install chromium and run `npm ci` in crates/keel-serve/e2e");
    }
    ready
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
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config(top);
    let served = serve(&home);
    let out = e2e_dir().join("out");
    let output = Command::new("node")
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
fn tool_rounds_show_as_cards_with_their_states() {
    if !browser_available() {
        return;
    }
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
fn approvals_from_the_card_allow_one_call_and_deny_another() {
    if !browser_available() {
        return;
    }
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
}

#[test]
fn the_recovery_button_finishes_a_rejected_replay_with_each_effect_once() {
    if !browser_available() {
        return;
    }
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
fn the_compact_button_finishes_a_task_after_a_context_limit_rejection() {
    if !browser_available() {
        return;
    }
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
fn stop_during_a_slow_stream_shows_nothing_late() {
    if !browser_available() {
        return;
    }
    let story = "Once upon a time ".repeat(12) + "ENDWORD";
    let steps = json!({"chunk_delay_ms": 250, "steps": [
        {"say": story},
        {"tool": "bash", "args": {"command": "echo late >> effects.log"}},
    ]});
    let (home, _mock) = drive("stop", steps, "");
    assert!(!home.path().join("effects.log").exists());
}

#[test]
fn a_reload_mid_turn_keeps_the_transcript_whole_and_streaming() {
    if !browser_available() {
        return;
    }
    let story = "Once upon a time ".repeat(8) + "FINALWORD";
    let steps = json!({"chunk_delay_ms": 150, "steps": [{"say": story}]});
    drive("reload", steps, "");
}

#[test]
fn a_transient_503_shows_a_retry_notice_and_no_duplicated_text() {
    if !browser_available() {
        return;
    }
    // Slow chunks keep the notice on screen while the answer streams.
    let steps = json!({"chunk_delay_ms": 200, "steps": [
        {"fault": {"status": 503, "body": ""}},
        {"say": "Answer after retry."},
    ]});
    let (_home, mock) = drive("retry", steps, "");
    assert_eq!(mock.requests().len(), 2);
}
