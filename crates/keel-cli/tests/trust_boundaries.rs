//! Trust boundaries and robustness through the real binary: keys never reach tools or the
//! store, signals stop tools cleanly, resumed sessions keep their model and workspace,
//! classification of local and empty failures, bounded SSE lines, cut-off answers, and
//! concurrent first use of a fresh home.

use crate::common::*;
use serde_json::json;
use std::process::Stdio;
use std::time::Duration;

const CANARY_KEY: &str = "sk-canary-7f3a9c2e41d0";
const CANARY_TOKEN: &str = "tok-canary-55e1b0c9aa";

/// Every file under `dir`, recursively.
#[test]
fn provider_keys_never_reach_tools_the_store_or_the_provider() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "env"}},
        {"tool": "bash", "args": {"command": "echo \"key=[$DEEPSEEK_API_KEY] token=[$KEEL_SERVE_TOKEN]\""}},
        {"tool": "bash", "args": {"command": "tr '\\0' '\\n' < /proc/self/environ"}},
        // Unconfined, keel's own environment is readable by a command it starts: the value
        // is redacted. (Confined, it is refused: see below.)
        {"tool": "bash", "args": {"command": "tr '\\0' '\\n' < /proc/$PPID/environ"}},
        {"tool": "write_file", "args": {"path": "leak.txt", "content": "ok"}},
        {"say": "done"},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let output = home
        .keel(&[
            "run",
            "--yes",
            "--sandbox",
            "off",
            "--json",
            "show me the environment",
        ])
        .env("DEEPSEEK_API_KEY", CANARY_KEY)
        .env("KEEL_SERVE_TOKEN", CANARY_TOKEN)
        .output()
        .unwrap();
    let run = Run::from(output);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let results = run.events_of("tool/result");
    assert_eq!(results.len(), 5);
    assert!(
        results.iter().all(|r| r["state"] == "completed"),
        "{results:?}"
    );
    let requests = mock.requests();
    let sent: String = requests.iter().map(|r| r.to_string()).collect();
    assert!(
        sent.contains("key=[] token=[]"),
        "the variables are not set for tools: {sent}"
    );
    assert!(
        sent.contains("[redacted $DEEPSEEK_API_KEY]"),
        "the parent's environment is redacted: {sent}"
    );
    assert!(
        sent.contains("KEEL_HOME="),
        "ordinary variables stay: {sent}"
    );
    for secret in [CANARY_KEY, CANARY_TOKEN] {
        assert!(!run.stdout().contains(secret), "stdout");
        assert!(!run.stderr().contains(secret), "stderr");
        assert!(!sent.contains(secret), "sent to the provider");
        assert_no_file_holds(&home.path(), secret);
    }
}

#[test]
fn a_key_with_a_newline_is_a_configuration_error_naming_the_variable() {
    let mock = MockProcess::start("basic");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    let output = home
        .keel(&["run", "hi"])
        .env("DEEPSEEK_API_KEY", "sk-abcdef\nsecond-line")
        .output()
        .unwrap();
    let run = Run::from(output);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(
        run.stderr().contains("DEEPSEEK_API_KEY"),
        "{}",
        run.stderr()
    );
    assert!(run.stderr().contains("newline"), "{}", run.stderr());
    assert!(!run.stderr().contains("sk-abcdef"), "never quoted");
    assert!(mock.requests().is_empty(), "nothing was sent");
}

fn no_retry_config(base_url: &str, extra: &str) -> String {
    format!(
        "model = \"deepseek/m\"\n[providers.deepseek]\nbase_url = \"{base_url}\"\n{extra}\n\
         [providers.deepseek.retry]\nmode = \"off\"\n"
    )
}

fn failure_kind_of(steps: serde_json::Value, extra: &str) -> (String, Run) {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockProcess::with_steps(dir.path(), &steps.to_string());
    let home = Home::new(&no_retry_config(&mock.base_url, extra));
    let run = home.run(&["run", "--json", "hi"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let failed = run.events_of("turn/failed");
    (
        failed[0]["diagnostic"]["kind"]
            .as_str()
            .unwrap()
            .to_string(),
        run,
    )
}

#[test]
fn empty_answers_and_broken_streams_are_classified_truthfully() {
    let empty_plain = json!({"steps": [{"fault": {"status": 200, "body": ""}}]});
    assert_eq!(failure_kind_of(empty_plain, "").0, "empty_response");
    let empty_stream = json!({"steps": [{"fault": {"status": 200, "body": "",
        "headers": {"content-type": "text/event-stream"}}}]});
    assert_eq!(failure_kind_of(empty_stream, "").0, "empty_response");
    let bad_chunk = json!({"steps": [{"fault": "bad_json_chunk"}]});
    let (kind, run) = failure_kind_of(bad_chunk, "");
    assert_eq!(kind, "stream_corrupt");
    let failed = &run.events_of("turn/failed")[0]["diagnostic"];
    assert!(
        !failed.to_string().contains("connection"),
        "not a connection failure: {failed}"
    );
}

#[test]
fn an_sse_line_without_end_is_bounded() {
    let long_line = format!("data: {}", "x".repeat(3 * 1024 * 1024));
    let steps = json!({"steps": [{"fault": {"status": 200, "body": long_line,
        "headers": {"content-type": "text/event-stream"}}}]});
    let (kind, run) = failure_kind_of(steps, "max_event_bytes = 65536");
    assert_eq!(kind, "stream_corrupt");
    for (name, output) in [("stderr", run.stderr()), ("--json stdout", run.stdout())] {
        assert!(
            !output.contains("xxxxxxxx"),
            "{name} echoes none of the line: {} bytes",
            output.len()
        );
    }
    assert!(
        run.stdout().contains("max_event_bytes"),
        "the diagnostic names the bound: {}",
        run.stdout()
    );
}

#[test]
fn a_cut_off_answer_is_not_ready_and_fails_the_run() {
    let steps = json!({"steps": [
        {"say": "The first half of an answ", "finish_reason": "length"},
        {"say": "The rest of the answer."},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    let run = home.run(&["run", "--json", "explain"]);
    assert_eq!(run.code(), 1, "a truncated answer is not success");
    let completed = &run.events_of("turn/completed")[0];
    assert_eq!(completed["ready"], false);
    assert!(
        completed["not_ready_reason"]
            .as_str()
            .unwrap()
            .contains("cut off"),
        "{completed}"
    );
    let offered = &run.events_of("recovery/offered")[0];
    assert_eq!(offered["action"], "final_readiness_recovery");
    let session = completed["session_id"].as_str().unwrap();
    let human = home.run(&["run", "--session", session, "/continue-checks"]);
    assert_eq!(human.code(), 0, "{}", human.stderr());
    assert!(human.stdout().contains("The rest of the answer."));
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn a_cut_off_answer_says_so_in_human_output() {
    let steps = json!({"steps": [{"say": "Half an answ", "finish_reason": "length"}]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let run = home.run(&["run", "explain"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("not ready: the answer was cut off"),
        "{}",
        run.stderr()
    );
    assert!(
        run.stderr().contains("/continue-checks"),
        "{}",
        run.stderr()
    );
}

/// A config with both the chat and the anthropic preset pointed at one mock; chat is the
/// default model.
fn two_provider_config(base_url: &str) -> String {
    format!(
        "model = \"deepseek/chat-model\"\n[providers.deepseek]\nbase_url = \"{base_url}\"\n\
         [providers.deepseek-anthropic]\nbase_url = \"{base_url}\"\n\
         [providers.deepseek-anthropic.retry]\nbase_delay_ms = 10\n"
    )
}

#[test]
fn resuming_keeps_the_sessions_model_unless_model_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let says = json!({"steps": [{"say": "one"}, {"say": "two"}, {"say": "three"}]});
    let mock = MockProcess::with_steps(dir.path(), &says.to_string());
    let home = Home::new(&two_provider_config(&mock.base_url));
    let first = home.run(&[
        "run",
        "--json",
        "--model",
        "deepseek-anthropic/claude-ish",
        "hi",
    ]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let session = first.events()[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let resumed = home.run(&["run", "--json", "--session", &session, "again"]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    assert_eq!(
        resumed.events_of("session/started")[0]["model"],
        "deepseek-anthropic/claude-ish"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["path"], requests[0]["path"], "same endpoint");
    let switched = home.run(&[
        "run",
        "--session",
        &session,
        "--model",
        "deepseek/chat-model",
        "third",
    ]);
    assert_eq!(switched.code(), 0, "{}", switched.stderr());
    assert!(
        switched.stderr().contains(
            "switching the model from deepseek-anthropic/claude-ish to deepseek/chat-model"
        ),
        "{}",
        switched.stderr()
    );
}

#[test]
fn the_printed_recovery_line_works_for_a_session_on_another_provider() {
    let mock = MockProcess::start("opaque-400-on-replay");
    let home = Home::new(&two_provider_config(&mock.base_url));
    let failed = home.run(&["run", "--model", "deepseek-anthropic/m", "look around"]);
    assert_eq!(failed.code(), 1, "{}", failed.stderr());
    let line = failed
        .stderr()
        .lines()
        .find(|l| l.starts_with("recovery available: "))
        .unwrap()
        .to_string();
    let session = line.split_whitespace().nth(5).unwrap().to_string();
    // Exactly the command keel printed: no --model.
    let recovered = home.run(&["run", "--session", &session, "/recover-context"]);
    assert_eq!(recovered.code(), 0, "{}", recovered.stderr());
    // It went to the session's provider and model, not the default `deepseek/chat-model`.
    let last = mock.requests().pop().unwrap();
    assert_eq!(last["protocol"], "anthropic", "{last}");
    let body: serde_json::Value = serde_json::from_str(last["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["model"], "m", "{body}");
}

#[test]
fn resuming_from_another_directory_keeps_the_sessions_workspace() {
    let steps = json!({"steps": [
        {"say": "first"},
        {"tool": "write_file", "args": {"path": "where.txt", "content": "here"}},
        {"say": "written"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let first = home.run(&["run", "--json", "hi"]);
    let session = first.events()[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let elsewhere = tempfile::tempdir().unwrap();
    let output = home
        .keel(&["run", "--yes", "--session", &session, "write it"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    let run = Run::from(output);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.stderr().contains("works in"), "{}", run.stderr());
    assert!(
        home.path().join("where.txt").exists(),
        "the tool ran in the session's workspace"
    );
    assert!(!elsewhere.path().join("where.txt").exists());
    let refused = Run::from(
        home.keel(&[
            "run",
            "--session",
            &session,
            "--cwd",
            elsewhere.path().to_str().unwrap(),
            "again",
        ])
        .output()
        .unwrap(),
    );
    assert_eq!(refused.code(), 2, "{}", refused.stderr());
    assert!(
        refused
            .stderr()
            .contains(&format!("--cwd {}", home.path().display())),
        "{}",
        refused.stderr()
    );
}

/// Start a `keel run --yes --json` whose bash tool starts a `sleep` of its own in the
/// background (pid in `sleep.pid`), writes its own pid (`started.txt`) and waits; send `signal`
/// once the tool runs. Returns the exit code, the session id, the home and both pids.
fn signal_during_tool(signal: &str) -> (i32, String, Home, [String; 2], ToolGroup) {
    // Found by markers on their command lines (their own `$$` and `$!` are pids of the
    // sandbox's PID namespace): the shell, and a sleep it left in the background.
    // Digits only: it is also the fraction of a `sleep` interval.
    let unique = format!("{}{}", std::process::id(), signal.len());
    let command =
        format!(": tool-shell.{unique}; sleep 30.{unique} & echo started > started.txt; wait");
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": command}},
        {"say": "never"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let (mut child, session) = start_until_tool_runs(&home, "started.txt");
    wait_until(
        "the tool started its sleep",
        Duration::from_secs(15),
        || {
            std::fs::read_to_string(home.path().join("started.txt"))
                .is_ok_and(|text| !text.is_empty())
        },
    );
    let pids = [
        pid_of(&format!("tool-shell.{unique}")),
        pid_of(&format!("^sleep 30.{unique}")),
    ];
    assert!(
        !process_gone(&pids[1]),
        "the tool's background sleep runs before the signal"
    );
    let group = ToolGroup(group_of(&pids[0]));
    std::process::Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    let status = wait_for_exit(&mut child, Duration::from_secs(10), "keel did not exit");
    (status.code().unwrap_or(-1), session, home, pids, group)
}

#[test]
fn sigterm_and_sighup_stop_the_tool_settle_receipts_and_exit() {
    for (signal, code) in [("TERM", 143), ("HUP", 129)] {
        let (exit, session, home, pids, _cleanup) = signal_during_tool(signal);
        assert_eq!(exit, code, "SIG{signal}");
        // Every process of the tool's group goes, the shell and the sleep it started.
        for pid in &pids {
            wait_until(
                &format!("SIG{signal}: the tool's process {pid} is gone"),
                Duration::from_secs(10),
                || process_gone(pid),
            );
        }
        let shown = home.run(&["session", "show", &session, "--json"]);
        assert_eq!(shown.code(), 0, "{}", shown.stderr());
        let json: serde_json::Value = serde_json::from_str(&shown.stdout()).unwrap();
        assert_eq!(json["receipts"][0]["state"], "cancelled", "SIG{signal}");
    }
}

#[test]
fn three_first_runs_on_a_fresh_home_all_succeed() {
    let rounds = 8;
    let dir = tempfile::tempdir().unwrap();
    let says: Vec<_> = (0..rounds * 3)
        .map(|n| json!({"say": format!("answer {n}")}))
        .collect();
    let mock = MockProcess::with_steps(dir.path(), &json!({ "steps": says }).to_string());
    for _round in 0..rounds {
        let home = Home::new(&config_for("chat", &mock.base_url, ""));
        let children: Vec<_> = (0..3)
            .map(|_| {
                home.keel(&["run", "hi"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let sessions = home.run(&["sessions", "--json"]).stdout();
        let listed: serde_json::Value = serde_json::from_str(&sessions).unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 3);
    }
}

#[test]
fn command_deny_rules_hold_against_respelled_commands_end_to_end() {
    let spellings = [
        "FOO=1 /bin/rm -rf victim",
        "'rm' -rf victim",
        "true; command rm -rf victim",
    ];
    let steps: Vec<_> = spellings
        .iter()
        .map(|command| json!({"tool": "bash", "args": {"command": command}}))
        .chain([json!({"say": "done"})])
        .collect();
    let rules = "[permissions]\ndeny = [\"bash(rm -rf *)\"]\n";
    let (home, _mock) = scripted("chat", &json!({ "steps": steps }).to_string(), "");
    home.append_config(rules);
    std::fs::create_dir(home.path().join("victim")).unwrap();
    let run = home.run(&["run", "--yes", "--json", "clean up"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let states: Vec<_> = run
        .events_of("tool/result")
        .iter()
        .map(|r| r["state"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(states, ["denied", "denied", "denied"]);
    assert!(home.path().join("victim").is_dir(), "nothing was removed");
}

#[test]
fn a_wrapper_that_holds_the_key_is_named_at_start() {
    let (home, _mock) = scripted(
        "chat",
        &json!({"steps": [{"say": "a"}, {"say": "b"}]}).to_string(),
        "",
    );
    // `timeout` keeps the key in its own environment, readable by any command keel runs.
    let through = |program: &str, args: &[&str]| {
        let mut command = std::process::Command::new(program);
        command
            .args(args)
            .current_dir(home.path())
            .env("KEEL_HOME", home.path())
            .env("DEEPSEEK_API_KEY", "test-key-1")
            .stdin(Stdio::null());
        Run::from(command.output().unwrap())
    };
    let run = through("timeout", &["30", KEEL, "run", "hi"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr().contains("started by `timeout`") && run.stderr().contains("DEEPSEEK_API_KEY"),
        "{}",
        run.stderr()
    );
    assert!(
        !run.stderr().contains("test-key-1"),
        "the value is never shown"
    );
    // From a shell, nothing to say.
    let run = through("sh", &["-c", &format!("{KEEL} run hi; true")]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!run.stderr().contains("started by"), "{}", run.stderr());
}

#[test]
fn adaptive_probes_at_the_cut_recover_nothing_of_the_key() {
    // The attack: print a guess so that the kept head of a cut output ends with it; if keel
    // redacted a guess that is a prefix of its key (and not a wrong one), a model would learn
    // the key one character at a time. 64 adaptive probes, from the known `sk-` on.
    let key = "sk-7d41c0e9b2a85f36e1d0c4b7a92";
    let half = 30_000 / 2;
    let probes = 64;
    let mut steps = Vec::new();
    let mut guesses = Vec::new();
    let mut known = String::from("sk-");
    let hex = "0123456789abcdef";
    for probe in 0..probes {
        let candidate = hex.as_bytes()[probe % 16] as char;
        guesses.push(format!("{known}{candidate}"));
        if probe % 16 == 15 {
            // Without an oracle the attacker can only guess on: take the true next character,
            // so every later probe is as close to the key as an oracle would have made it.
            known.push(key.as_bytes()[known.len()] as char);
        }
    }
    for guess in &guesses {
        let command = format!(
            "head -c {} /dev/zero | tr '\\0' x; printf '%s' '{guess}'; head -c 20000 /dev/zero | tr '\\0' y",
            half - guess.len()
        );
        steps.push(json!({"tool": "bash", "args": {"command": command}}));
        steps.push(json!({"say": "next"}));
    }
    let (home, mock) = scripted("chat", &json!({"steps": steps}).to_string(), "");
    let mut shown = Vec::new();
    for (probe, guess) in guesses.iter().enumerate() {
        let run = home
            .keel(&["run", "--yes", "--json", "probe"])
            .env("DEEPSEEK_API_KEY", key)
            .output()
            .unwrap();
        assert!(run.status.success(), "probe {probe}");
        let requests = mock.requests();
        let body = requests[2 * probe + 1]["body"]
            .as_str()
            .unwrap()
            .to_string();
        let start = body.find(&"x".repeat(64)).expect("the probe's output");
        let head_end = body[start..]
            .find("\\n[…")
            .map(|at| start + at)
            .expect("the output was cut");
        shown.push((guess.clone(), body[start..head_end].to_string()));
    }
    for (guess, head) in &shown {
        assert!(
            head.ends_with(guess.as_str()),
            "the kept head ends with the guess as written, right or wrong: {guess} vs {:?}",
            &head[head.len().saturating_sub(40)..]
        );
        assert!(
            !head.contains("redacted"),
            "{guess}: redaction told the guess apart"
        );
    }
}

#[test]
fn a_confined_command_dies_with_keel_under_sigkill() {
    let marker = format!("sleep 32.{}", std::process::id());
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": format!("echo 1 >> effects.log; {marker}")}},
        {"say": "never"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let (mut child, _session) = start_until_tool_runs(&home, "effects.log");
    let pid = pid_of(&marker);
    let _cleanup = ToolGroup(group_of(&pid));
    child.kill().unwrap();
    child.wait().unwrap();
    // The parent-death signals: the sandbox's outer process dies with keel, its init with it,
    // and everything in the PID namespace with its init.
    wait_until("the tool died with keel", Duration::from_secs(10), || {
        process_gone(&pid)
    });
}

#[test]
fn a_command_left_running_by_a_killed_keel_is_stopped_when_the_session_loads_again() {
    // Unconfined (`--sandbox off`), a command can outlive a keel killed outright: the next
    // load of its session stops it.
    let marker = format!("sleep 31.{}", std::process::id());
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": format!("echo 1 >> effects.log; {marker}")}},
        {"say": "never"},
        {"say": "resumed"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let (mut child, session) =
        start_until_tool_runs_with(&home, "effects.log", &["--sandbox", "off"]);
    wait_until("the receipt is started", Duration::from_secs(15), || {
        stored_receipt_states(&home) == ["started"]
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let running = |pattern: &str| {
        !std::process::Command::new("pgrep")
            .args(["-f", pattern])
            .output()
            .unwrap()
            .stdout
            .is_empty()
    };
    assert!(
        running(&marker),
        "the orphan outlived keel (as SIGKILL allows)"
    );
    let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    wait_until("the orphan is stopped", Duration::from_secs(5), || {
        !running(&marker)
    });
    assert_eq!(stored_receipt_states(&home), ["unknown"], "never run again");
    let effects = std::fs::read_to_string(home.path().join("effects.log")).unwrap();
    assert_eq!(effects.lines().count(), 1);
}
