//! Read-only commands in `ask` mode, through the real binary, the real bash tool and sandbox,
//! and `keel mock` (issue 38 item 1).
//!
//! Invariants checked here:
//! - With the sandbox enforced, a line of read-only commands runs without a question (a
//!   headless run, which cannot ask, runs it), confined to reading: `tool/started` says
//!   `read_only`, the receipt records the `read-only` sandbox, and a program that tries to
//!   write anyway cannot. Nothing about it enters the model's history.
//! - A path operand outside the workspace, a redirection into a file, a variable-assignment
//!   prefix, a risky option, a program off the list: each still asks (headless: denied).
//! - Deny and ask rules win; `ask_read_only_commands = true` restores the question; a sandbox
//!   below the minimum asks for everything.

use crate::common::repository::{git, repository, session_of};
use crate::common::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

/// The call ids whose `tool/started` said `read_only`.
fn started_read_only(run: &Run) -> Vec<bool> {
    run.events_of("tool/started")
        .iter()
        .map(|started| started["read_only"] == json!(true))
        .collect()
}

/// A home that is a git repository with `src/lib.rs` committed and changed since.
fn workspace(commands: &[&str]) -> (Home, MockProcess) {
    let (home, mock) = scripted("chat", &commands_scenario(commands), "");
    repository(&home);
    std::fs::create_dir(home.path().join("src")).unwrap();
    std::fs::write(home.path().join("src/lib.rs"), "pub fn one() {}\n").unwrap();
    git(&home.path(), &["add", "src/lib.rs"]);
    git(&home.path(), &["commit", "-qm", "lib"]);
    std::fs::write(home.path().join("src/lib.rs"), "pub fn two() {}\n").unwrap();
    (home, mock)
}

#[test]
fn read_only_commands_run_unasked_and_confined_to_reading() {
    let commands = ["ls -la src", "git status --short", "git diff --stat"];
    let (home, _mock) = workspace(&commands);
    let run = home.run(&["run", "--json", "go"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(result_states(&run), ["completed"; 3], "{}", run.stdout());
    assert_eq!(started_read_only(&run), [true; 3], "{}", run.stdout());
    assert!(run.events_of("approval/requested").is_empty());
    let results = run.events_of("tool/result");
    let output = |index: usize| results[index]["output"].as_str().unwrap().to_string();
    assert!(output(0).contains("lib.rs"), "{}", output(0));
    assert!(output(1).contains("M src/lib.rs"), "{}", output(1));
    assert!(output(2).contains("1 file changed"), "{}", output(2));
    // The receipts say so; the model's history holds the outputs only.
    let session = session_of(&run);
    let shown = session_json(&home, &session, &[]);
    for receipt in shown["receipts"].as_array().unwrap() {
        assert_eq!(receipt["sandbox"], "read-only", "{receipt}");
    }
    // (The context block lists the agents, `explore`'s description saying "read-only".)
    let history: Vec<&serde_json::Value> = shown["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["role"] != "context")
        .collect();
    let history = serde_json::to_string(&history).unwrap();
    assert!(!history.contains("read-only"), "{history}");
}

#[test]
fn a_read_only_command_cannot_write_whatever_it_does() {
    // A `cat` outside the workspace (and not in `/tmp`, which the sandbox replaces), first on
    // PATH, that tries to write into the workspace.
    let bin = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let cat = bin.path().join("cat");
    std::fs::write(&cat, "#!/bin/sh\necho pwned > \"$1.pwned\" && echo wrote\n").unwrap();
    std::fs::set_permissions(&cat, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (home, _mock) = workspace(&["cat src/lib.rs"]);
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = Run::from(
        home.keel(&["run", "--json", "go"])
            .env("PATH", path)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert_eq!(started_read_only(&run), [true], "{}", run.stdout());
    assert_eq!(result_states(&run), ["failed"], "{}", run.stdout());
    assert!(!home.path().join("src/lib.rs.pwned").exists());
    let output = run.events_of("tool/result")[0]["output"].to_string();
    assert!(output.contains("Read-only file system"), "{output}");
}

#[test]
fn what_leaves_the_workspace_writes_or_runs_code_still_asks() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join(".env"), "SECRET=1\n").unwrap();
    let outside_env = format!("cat {}/.env", outside.path().display());
    let commands = [
        outside_env.as_str(),
        "grep -r SECRET ~",
        "ls > listing.txt",
        "GIT_EXTERNAL_DIFF=true git diff",
        "find . -name '*.rs' -delete",
        "git -c core.pager=true log",
        "sed -n 1p src/lib.rs",
        "cat $(echo src/lib.rs)",
        "ls src",
    ];
    let (home, _mock) = workspace(&commands);
    std::os::unix::fs::symlink(outside.path(), home.path().join("docs")).unwrap();
    let run = home.run(&["run", "--json", "go"]);
    let mut expected = vec!["denied"; commands.len() - 1];
    expected.push("completed");
    assert_eq!(result_states(&run), expected, "{}", run.stdout());
    assert!(!home.path().join("listing.txt").exists());
    assert!(
        home.path().join("src/lib.rs").exists(),
        "find -delete never ran"
    );
    // A link in the repository that leads out asks too.
    let (home, _mock) = workspace(&["cat docs/.env"]);
    std::os::unix::fs::symlink(outside.path(), home.path().join("docs")).unwrap();
    let run = home.run(&["run", "--json", "go"]);
    assert_eq!(result_states(&run), ["denied"], "{}", run.stdout());
}

#[test]
fn rules_the_setting_and_a_weak_sandbox_restore_the_question() {
    let commands = ["ls -la src", "git status --short"];
    // A deny rule and an ask rule win.
    let (home, _mock) = workspace(&commands);
    home.append_config("[permissions]\ndeny = [\"bash(ls *)\"]\nask = [\"bash(git *)\"]\n");
    let run = home.run(&["run", "--json", "go"]);
    assert_eq!(
        result_states(&run),
        ["denied", "denied"],
        "{}",
        run.stdout()
    );
    let summaries: Vec<String> = run
        .events_of("tool/result")
        .iter()
        .map(|result| result["summary"].as_str().unwrap().to_string())
        .collect();
    assert!(summaries[0].contains("bash(ls *)"), "{summaries:?}");
    // The setting asks about all of them.
    let (home, _mock) = workspace(&commands);
    home.prepend_config("ask_read_only_commands = true");
    let run = home.run(&["run", "--json", "go"]);
    assert_eq!(
        result_states(&run),
        ["denied", "denied"],
        "{}",
        run.stdout()
    );
    // A project may not stop the question.
    let (home, _mock) = workspace(&commands);
    home.prepend_config("ask_read_only_commands = true");
    std::fs::write(
        home.path().join("keel.toml"),
        "ask_read_only_commands = false\n",
    )
    .unwrap();
    let run = home.run(&["run", "--trust-workspace", "--json", "go"]);
    assert_eq!(
        result_states(&run),
        ["denied", "denied"],
        "{}",
        run.stdout()
    );
    // A sandbox below the minimum: every command asks.
    let (home, _mock) = workspace(&commands);
    let run = Run::from(
        home.keel(&["run", "--json", "go"])
            .env("KEEL_SANDBOX_UNSUPPORTED", "landlock")
            .output()
            .unwrap(),
    );
    assert_eq!(
        result_states(&run),
        ["denied", "denied"],
        "{}",
        run.stdout()
    );
    // Auto mode runs them as before, under the session's own sandbox.
    let (home, _mock) = workspace(&commands);
    let run = home.run(&["run", "--yes", "--json", "go"]);
    assert_eq!(
        result_states(&run),
        ["completed", "completed"],
        "{}",
        run.stdout()
    );
    assert_eq!(started_read_only(&run), [false, false], "{}", run.stdout());
}

#[test]
fn in_the_terminal_a_read_only_command_shows_read_only_and_asks_nothing() {
    if !crate::common::tmux::available() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("notes.txt"), "elsewhere\n").unwrap();
    let read_outside = format!("cat {}/notes.txt", outside.path().display());
    let (home, _mock) = workspace(&["git status --short", &read_outside]);
    let tmux = crate::common::tmux::Tmux::start(&home, &home.path(), &[], (100, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("look around");
    tmux.press(&["Enter"]);
    // The first ran without a question, its card saying so; the second asks.
    let asked = tmux.wait_for("? bash cat");
    let card = asked
        .lines()
        .find(|line| line.contains("● bash git status --short"))
        .unwrap_or_else(|| panic!("{asked}"));
    assert!(card.contains("· read-only"), "{card}");
    assert!(asked.contains("M src/lib.rs"), "{asked}");
    assert_eq!(asked.matches("? bash").count(), 1, "{asked}");
    assert!(asked.contains("leads outside the workspace"), "{asked}");
    tmux.answer("n");
    tmux.wait_for("done");
}
