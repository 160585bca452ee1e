//! Hooks through the real binary against `keel mock` (docs/hooks.md): a guard that says no, a
//! guard that crashes, arguments a hook rewrites, an allow that never beats a deny rule, context
//! that is history, an untrusted repository's hooks that never run, a Claude Code script read
//! with `jq`, a prompt hook that blocks, a `Stop` hook that is capped.

use crate::common::*;
use serde_json::{Value, json};

/// A chat request's body, as JSON.
fn body(request: &Value) -> Value {
    serde_json::from_str(request["body"].as_str().unwrap()).unwrap()
}

fn said(request: &Value) -> String {
    body(request)["messages"].to_string()
}

/// `[[hooks.EVENT]]` with one command hook (TOML-quoted `command`).
fn hook(event: &str, matcher: Option<&str>, command: &str, extra: &str) -> String {
    let matcher = matcher.map_or(String::new(), |m| format!("matcher = \"{m}\"\n"));
    let command = serde_json::to_string(command).unwrap();
    format!(
        "\n[[hooks.{event}]]\n{matcher}[[hooks.{event}.hooks]]\ntype = \"command\"\ncommand = {command}\n{extra}\n"
    )
}

/// Refuses any command with `rm ` in it, the reason on stderr.
const NO_RM: &str = "input=$(cat); case \"$input\" in *'\"rm '*) echo 'rm is not allowed here' >&2; exit 2;; esac; exit 0";

fn decisions(run: &Run) -> Vec<(String, String)> {
    run.events_of("hook/ran")
        .iter()
        .map(|event| {
            (
                event["event"].as_str().unwrap().to_string(),
                event["decision"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_guard_that_exits_2_refuses_rm_tells_the_model_why_and_later_calls_still_run() {
    let scenario = json!({"steps": [
        {"tool": "bash", "args": {"command": "rm -f keep.txt"}},
        {"tool": "bash", "args": {"command": "echo later > later.txt"}},
        {"say": "Done."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    home.append_config(&hook("PreToolUse", Some("bash"), NO_RM, ""));
    std::fs::write(home.path().join("keep.txt"), "kept").unwrap();
    let run = home.run(&["run", "--yes", "--json", "tidy up"]);
    assert!(home.path().join("keep.txt").exists(), "the rm never ran");
    assert!(home.path().join("later.txt").exists(), "{}", run.stderr());
    let requests = mock.requests();
    let second = said(&requests[1]);
    assert!(second.contains("rm is not allowed here"), "{second}");
    assert_eq!(
        decisions(&run),
        [
            ("PreToolUse".to_string(), "deny".to_string()),
            ("PreToolUse".to_string(), "none".to_string())
        ]
    );
    let ran = &run.events_of("hook/ran")[0];
    assert_eq!(ran["exit"], 2);
    assert_eq!(ran["matcher"], "bash");
    assert!(ran["duration_ms"].is_u64());
}

#[test]
fn a_guard_that_cannot_start_blocks_bash_not_an_unmatched_tool_unless_on_error_allows() {
    let scenario = json!({"steps": [
        {"tool": "bash", "args": {"command": "touch ran.txt"}},
        {"tool": "read_file", "args": {"path": "note.txt"}},
        {"say": "Done."}
    ]})
    .to_string();
    for (extra, runs) in [("", false), ("on_error = \"allow\"", true)] {
        let (home, mock) = scripted("chat", &scenario, "");
        home.append_config(&hook(
            "PreToolUse",
            Some("bash"),
            "/nonexistent/guard.sh",
            extra,
        ));
        std::fs::write(home.path().join("note.txt"), "NOTE-MARKER").unwrap();
        let run = home.run(&["run", "--yes", "--json", "go"]);
        assert_eq!(home.path().join("ran.txt").exists(), runs, "{extra}");
        let requests = mock.requests();
        let second = said(&requests[1]);
        if !runs {
            assert!(second.contains("/nonexistent/guard.sh"), "{second}");
            assert!(second.contains("exited with code 127"), "{second}");
        }
        assert!(said(&requests[2]).contains("NOTE-MARKER"), "the read ran");
        let wanted = if runs { "failed_allow" } else { "failed_deny" };
        assert_eq!(
            decisions(&run),
            [("PreToolUse".to_string(), wanted.to_string())]
        );
    }
}

#[test]
fn updated_input_changes_what_runs_and_is_checked_again() {
    let scenario = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo model > out.txt"}},
        {"say": "Done."}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let rewrite = r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"command": "echo hooked > out.txt"}}}'"#;
    home.append_config(&hook("PreToolUse", Some("bash"), rewrite, ""));
    let run = home.run(&["run", "--yes", "--json", "write it"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = std::fs::read_to_string(home.path().join("out.txt")).unwrap();
    assert_eq!(out.trim(), "hooked");
    assert_eq!(
        decisions(&run),
        [("PreToolUse".to_string(), "updated_input".to_string())]
    );
    // Arguments the tool refuses are refused after the hook too.
    let (home, mock) = scripted("chat", &scenario, "");
    let broken = r#"echo '{"hookSpecificOutput": {"updatedInput": {"command": 7}}}'"#;
    home.append_config(&hook("PreToolUse", Some("bash"), broken, ""));
    home.run(&["run", "--yes", "--json", "write it"]);
    assert!(!home.path().join("out.txt").exists());
    assert!(
        said(&mock.requests()[1]).contains("command"),
        "a validation error"
    );
}

#[test]
fn a_hook_allow_answers_a_default_question_but_never_beats_a_deny_rule() {
    let allow = r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}'"#;
    let scenario = json!({"steps": [
        {"tool": "bash", "args": {"command": "touch made.txt"}},
        {"say": "Done."}
    ]})
    .to_string();
    // In ask mode with nobody to ask, the call would be refused; the hook's allow runs it.
    let (home, _mock) = scripted("chat", &scenario, "");
    home.append_config(&hook("PreToolUse", Some("bash"), allow, ""));
    let run = home.run(&["run", "--json", "make it"]);
    assert!(home.path().join("made.txt").exists(), "{}", run.stderr());
    // A deny rule wins.
    let (home, mock) = scripted("chat", &scenario, "");
    home.append_config(&format!(
        "{}\n[permissions]\ndeny = [\"bash(touch *)\"]\n",
        hook("PreToolUse", Some("bash"), allow, "")
    ));
    home.run(&["run", "--yes", "--json", "make it"]);
    assert!(!home.path().join("made.txt").exists());
    assert!(said(&mock.requests()[1]).contains("denied by the rule"));
}

#[test]
fn additional_context_commits_with_the_result_and_the_prefix_holds() {
    let scenario = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo hi"}},
        {"say": "Done."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let context = r#"echo '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "CTX-MARKER from the hook"}}'"#;
    home.append_config(&hook("PostToolUse", None, context, ""));
    let run = home.run(&["run", "--yes", "--json", "say hi"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let requests = mock.requests();
    let first = body(&requests[0])["messages"].as_array().unwrap().clone();
    let second = body(&requests[1])["messages"].as_array().unwrap().clone();
    assert_eq!(
        second[..first.len()],
        first[..],
        "append-only: the prefix holds"
    );
    let result = second.last().unwrap();
    assert_eq!(result["role"], "tool");
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains("hi") && content.contains("CTX-MARKER"),
        "{content}"
    );
    assert_eq!(body(&requests[0])["tools"], body(&requests[1])["tools"]);
}

#[test]
fn an_untrusted_repositorys_hook_never_runs_until_trusted_and_an_edited_script_asks_again() {
    let scenario = json!({"steps": [{"say": "Done."}]}).to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let scripts = home.path().join(".keel/hooks");
    std::fs::create_dir_all(&scripts).unwrap();
    std::fs::write(scripts.join("mark.sh"), "touch \"$1\"\n").unwrap();
    std::fs::write(
        home.path().join("keel.toml"),
        hook(
            "UserPromptSubmit",
            None,
            "bash .keel/hooks/mark.sh marker.txt",
            "",
        ),
    )
    .unwrap();
    let run = home.run(&["run", "--yes", "--json", "go"]);
    assert!(
        !home.path().join("marker.txt").exists(),
        "never ran untrusted"
    );
    let ignored = run.events_of("trust/ignored");
    assert!(
        ignored
            .iter()
            .any(|event| event["key"] == "hooks.UserPromptSubmit"),
        "{ignored:?}"
    );
    let trust = home.run(&["trust"]);
    assert_eq!(trust.code(), 0, "{}", trust.stderr());
    assert!(
        trust.stdout().contains("hook scripts"),
        "{}",
        trust.stdout()
    );
    home.run(&["run", "--yes", "--json", "go"]);
    assert!(home.path().join("marker.txt").exists(), "trusted, it runs");
    std::fs::remove_file(home.path().join("marker.txt")).unwrap();
    // An edit to the script (by the model, a pull) is not what was trusted.
    std::fs::write(scripts.join("mark.sh"), "touch \"$1\"; touch edited.txt\n").unwrap();
    home.run(&["run", "--yes", "--json", "go"]);
    assert!(
        !home.path().join("marker.txt").exists(),
        "asks for trust again"
    );
    assert!(!home.path().join("edited.txt").exists());
}

#[test]
fn a_claude_code_script_reading_tool_input_with_jq_works_unchanged() {
    let scenario = json!({"steps": [
        {"tool": "bash", "args": {"command": "rm -rf build"}},
        {"say": "Done."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    home.prepend_config("hooks_from_claude = true");
    std::fs::create_dir_all(home.path().join("build")).unwrap();
    let user_home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(user_home.path().join(".claude")).unwrap();
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{
        "type": "command",
        "command": "input=$(cat); [ \"$(jq -r .tool_name <<< \"$input\")\" = Bash ] || exit 0; cmd=$(jq -r .tool_input.command <<< \"$input\"); case \"$cmd\" in rm*) echo \"blocked by a Claude Code hook: $cmd\" >&2; exit 2;; esac"
    }]}]}});
    std::fs::write(
        user_home.path().join(".claude/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let output = home
        .keel(&["run", "--yes", "--json", "clean"])
        .env("HOME", user_home.path())
        .output()
        .unwrap();
    let run = Run::from(output);
    assert!(home.path().join("build").exists(), "{}", run.stderr());
    let second = said(&mock.requests()[1]);
    assert!(
        second.contains("blocked by a Claude Code hook: rm -rf build"),
        "{second}"
    );
}

#[test]
fn a_prompt_hook_that_blocks_sends_nothing_and_tells_only_the_person() {
    let scenario = json!({"steps": [{"say": "Should not be asked."}]}).to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    home.append_config(&hook(
        "UserPromptSubmit",
        None,
        "echo 'no prompts on Fridays' >&2; exit 2",
        "",
    ));
    let run = home.run(&["run", "--yes", "--json", "hello"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(mock.requests().is_empty(), "nothing was sent");
    let failed = run.events_of("turn/failed");
    assert_eq!(failed[0]["diagnostic"]["kind"], "hook");
    let ran = &run.events_of("hook/ran")[0];
    assert_eq!(ran["decision"], "block");
    assert_eq!(ran["message"], "no prompts on Fridays");
}

#[test]
fn a_stop_hook_that_always_blocks_is_capped() {
    let scenario = json!({"steps": [
        {"say": "Done 1."}, {"say": "Done 2."}, {"say": "Done 3."}, {"say": "Done 4."},
        {"say": "Done 5."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    home.append_config(&hook(
        "Stop",
        None,
        "jq -c .stop_hook_active >> stops.log; echo 'run the tests first' >&2; exit 2",
        "",
    ));
    let run = home.run(&["run", "--yes", "--json", "finish"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let failed = run.events_of("turn/failed");
    assert_eq!(failed[0]["diagnostic"]["kind"], "hook");
    let requests = mock.requests();
    assert_eq!(
        requests.len(),
        4,
        "the first answer and three continuations"
    );
    assert!(said(&requests[1]).contains("a Stop hook asks you to go on: run the tests first"));
    let log = std::fs::read_to_string(home.path().join("stops.log")).unwrap();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["false", "true", "true", "true"]
    );
}
