//! What a new user meets first on the command line: a prompt piped in, and sessions listed and
//! removed.

use crate::common::*;
use serde_json::json;
use std::io::Write;
use std::process::Stdio;

fn piped(home: &Home, args: &[&str], stdin: &str) -> Run {
    let mut child = home
        .keel(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    Run::from(child.wait_with_output().unwrap())
}

#[test]
fn a_prompt_is_read_from_stdin_with_a_dash_or_when_none_is_given() {
    let steps = json!({"steps": [{"say": "first"}, {"say": "second"}]}).to_string();
    let (home, mock) = scripted("chat", &steps, "");
    let dash = piped(&home, &["run", "-"], "explain the\nbuild in two lines\n");
    assert_eq!(dash.code(), 0, "{}", dash.stderr());
    assert!(last_user_message(&mock).contains("explain the\nbuild in two lines"));
    let none = piped(&home, &["run"], "what changed?");
    assert_eq!(none.code(), 0, "{}", none.stderr());
    assert!(last_user_message(&mock).contains("what changed?"));
    let empty = piped(&home, &["run", "-"], "  \n");
    assert_eq!(empty.code(), 2);
    assert!(
        empty.stderr().contains("the prompt is empty"),
        "{}",
        empty.stderr()
    );
}

fn session_ids(home: &Home) -> Vec<String> {
    let listed: serde_json::Value =
        serde_json::from_str(&home.run(&["sessions", "--json"]).stdout()).unwrap();
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn sessions_are_listed_with_age_and_turns_and_removed_whole() {
    let steps = json!({"steps": [
        {"tool": "write_file", "args": {"path": "a.txt", "content": "x\n"}},
        {"say": "one"},
        {"say": "two"},
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &steps, "");
    assert_eq!(home.run(&["run", "--yes", "write a"]).code(), 0);
    assert_eq!(home.run(&["run", "say two"]).code(), 0);
    let ids = session_ids(&home);
    assert_eq!(ids.len(), 2);
    let listed = home.run(&["sessions"]).stdout();
    assert!(
        listed.contains("ago") && listed.contains("1 turn "),
        "{listed}"
    );
    assert!(
        listed.contains("write a") && listed.contains("say two"),
        "{listed}"
    );
    // The first session (the older, listed last) goes whole: store rows and its temp dir.
    let gone = ids[1].clone();
    // What a crash leaves: the session's temp dir (a session that ends removes it itself).
    std::fs::create_dir_all(home.path().join("tmp").join(&gone).join("left")).unwrap();
    let removed = home.run(&["session", "rm", &gone]);
    assert_eq!(removed.code(), 0, "{}", removed.stderr());
    assert_eq!(session_ids(&home), [ids[0].clone()]);
    assert!(!home.path().join("tmp").join(&gone).exists());
    let shown = home.run(&["session", "show", &gone]);
    assert_eq!(shown.code(), 2, "{}", shown.stderr());
    let again = home.run(&["session", "rm", &gone]);
    assert_eq!(again.code(), 2);
    assert!(again.stderr().contains("no session"), "{}", again.stderr());
    // Pruning by age: nothing is an hour old; everything is older than now.
    let kept = home.run(&["sessions", "--prune", "1h"]);
    assert!(
        kept.stdout()
            .contains("removed 0 session(s) not used for 1h"),
        "{}",
        kept.stdout()
    );
    assert_eq!(session_ids(&home).len(), 1);
    let all = home.run(&["sessions", "--prune", "0s"]);
    assert_eq!(all.code(), 0, "{}", all.stderr());
    assert!(session_ids(&home).is_empty());
    let bad = home.run(&["sessions", "--prune", "soon"]);
    assert_eq!(bad.code(), 2);
    assert!(
        bad.stderr().contains("write an age such as 30d"),
        "{}",
        bad.stderr()
    );
}

#[test]
fn a_run_that_fails_before_its_first_turn_leaves_the_session_list_unchanged() {
    let steps = json!({"steps": [{"say": "one"}]}).to_string();
    let (home, _mock) = scripted("chat", &steps, "");
    assert_eq!(home.run(&["run", "the one that ran"]).code(), 0);
    let before = home.run(&["sessions"]).stdout();
    assert!(before.contains("the one that ran"), "{before}");
    // No key, then a model of a provider nobody declared: both stop before a turn.
    let keyless = home
        .keel(&["run", "never sent"])
        .env_remove("DEEPSEEK_API_KEY")
        .output()
        .unwrap();
    assert_eq!(keyless.status.code(), Some(2), "{keyless:?}");
    let unknown = home.run(&["run", "--model", "nobody/x", "never sent"]);
    assert_eq!(unknown.code(), 2, "{}", unknown.stderr());
    assert_eq!(home.run(&["sessions"]).stdout(), before);
    assert_eq!(session_ids(&home).len(), 1);
}

#[test]
fn a_session_another_keel_holds_is_not_removed() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "sleep 3"}},
        {"say": "slept"},
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &steps, "");
    let mut running = home
        .keel(&["run", "--yes", "sleep a while"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let id = loop {
        if let Some(id) = session_ids(&home).pop() {
            break id;
        }
        assert!(
            started.elapsed().as_secs() < 20,
            "the session never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let refused = home.run(&["session", "rm", &id]);
    assert_ne!(refused.code(), 0);
    assert!(
        refused.stderr().contains("keel run"),
        "names the holder: {}",
        refused.stderr()
    );
    let pruned = home.run(&["sessions", "--prune", "0s"]);
    assert!(
        pruned.stdout().contains(&format!("kept {id}")),
        "{}",
        pruned.stdout()
    );
    assert!(running.wait().unwrap().success());
    assert_eq!(session_ids(&home), [id]);
}

#[test]
fn every_unknown_config_key_is_named_at_once_and_a_repositorys_never_stops_keel() {
    let steps = json!({"steps": [{"say": "ran"}]}).to_string();
    let (home, _mock) = scripted("chat", &steps, "");
    home.prepend_config("modle = \"deepseek/x\"\npermision_mode = \"auto\"\n");
    let run = home.run(&["run", "hello"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    let said = run.stderr();
    assert!(said.contains("keel does not know 2 keys"), "{said}");
    assert!(
        said.contains("line 1: `modle` — did you mean `model`?"),
        "{said}"
    );
    assert!(
        said.contains("line 2: `permision_mode` — did you mean `permission_mode`?"),
        "{said}"
    );
    // A repository's keel.toml with a key this keel does not know: left out, and said.
    let (home, _mock) = scripted("chat", &steps, "");
    std::fs::write(
        home.path().join("keel.toml"),
        "max_rounds = 5\n[telemetry]\nlevel = 2\n",
    )
    .unwrap();
    let run = home.run(&["run", "--json", "hello"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let ignored = run.events_of("trust/ignored");
    assert!(
        ignored.iter().any(|event| event["key"] == "telemetry"
            && event["reason"]
                .as_str()
                .unwrap()
                .contains("keel does not know this key")),
        "{ignored:?}"
    );
}

#[test]
fn a_bad_model_in_the_session_is_named_as_slash_model_not_the_flag() {
    let steps = json!({"steps": [{"say": "ok"}]}).to_string();
    let (home, _mock) = scripted("chat", &steps, "");
    let run = piped(&home, &["--plain"], "/model nope\n/quit\n");
    let said = run.stderr();
    assert!(
        said.contains("error: /model: model `nope` must be written `<provider>/<model id>`"),
        "{said}"
    );
    assert!(!said.contains("--model:"), "{said}");
}

#[test]
fn each_commands_help_lists_only_the_options_it_takes() {
    let home = Home::new("");
    let help = |args: &[&str]| {
        let run = home.run(args);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        run.stdout()
    };
    for args in [
        &["session", "--help"][..],
        &["session", "rm", "--help"],
        &["session", "show", "--help"],
        &["sessions", "--help"],
        &["mock", "--help"],
        &["trust", "--help"],
    ] {
        let shown = help(args);
        for foreign in [
            "--yes",
            "--model",
            "--permission-mode",
            "--plain",
            "--continue",
        ] {
            assert!(
                !shown.contains(foreign),
                "{args:?} lists {foreign}:\n{shown}"
            );
        }
    }
    let run = help(&["run", "--help"]);
    for own in [
        "--yes",
        "--model",
        "--session",
        "--json",
        "--cwd",
        "--sandbox",
    ] {
        assert!(run.contains(own), "run --help lacks {own}:\n{run}");
    }
    assert!(!run.contains("--plain"), "{run}");
    // An option a command does not take is refused, naming it.
    let refused = home.run(&["sessions", "--yes"]);
    assert_eq!(refused.code(), 2);
    assert!(refused.stderr().contains("--yes"), "{}", refused.stderr());
    // Before the command's name too.
    let before = home.run(&["--yes", "sessions"]);
    assert_eq!(before.code(), 2);
    assert!(
        before
            .stderr()
            .contains("`--yes` does not apply to `keel sessions`"),
        "{}",
        before.stderr()
    );
    // After the name beats before it.
    let config: serde_json::Value = serde_json::from_str(
        &home
            .run(&["--yes", "config", "--permission-mode", "plan", "--json"])
            .stdout(),
    )
    .unwrap();
    assert_eq!(config["permission_mode"]["value"], "plan", "{config}");
    // Given before the command's name, the shared options still reach it.
    let before = home.run(&["--json", "sessions"]);
    assert_eq!(before.code(), 0, "{}", before.stderr());
    assert_eq!(before.stdout().trim(), "[]");
}

#[test]
fn continue_and_the_turn_count_follow_what_the_user_sees() {
    let steps =
        json!({"steps": [{"say": "one"}, {"say": "two"}, {"say": "three"}, {"say": "four"}]})
            .to_string();
    let (home, _mock) = scripted("chat", &steps, "");
    let first = home.run(&["run", "--json", "first"]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let id = first.events()[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(home.run(&["run", "--session", &id, "second"]).code(), 0);
    assert!(home.run(&["sessions"]).stdout().contains("2 turns"));
    // Undoing the second turn: one is left, and the list says so.
    let undone = home.run(&["session", "rewind", &id, "--to", "2"]);
    assert_eq!(undone.code(), 0, "{}", undone.stderr());
    let listed = home.run(&["sessions"]).stdout();
    assert!(listed.contains("1 turn "), "{listed}");
    // A browser tab opened and left makes a newer, empty session: -c passes it by.
    let server = crate::common::serve::Server::start(&home, &[]);
    let empty = server.new_session();
    drop(server);
    assert_ne!(empty, id);
    let continued = home.run(&["run", "-c", "--json", "third"]);
    assert_eq!(continued.code(), 0, "{}", continued.stderr());
    assert_eq!(continued.events()[0]["session_id"], id.as_str());
    // Undo everything and start over: the title is what the history now begins with.
    let all = home.run(&["session", "rewind", &id, "--to", "1"]);
    assert_eq!(all.code(), 0, "{}", all.stderr());
    assert!(
        !home.run(&["sessions"]).stdout().contains(&id),
        "nothing left to list"
    );
    let again = home.run(&["run", "--session", &id, "fresh start"]);
    assert_eq!(again.code(), 0, "{}", again.stderr());
    let listed = home.run(&["sessions"]).stdout();
    let row = listed.lines().find(|line| line.starts_with(&id)).unwrap();
    assert!(row.ends_with("fresh start"), "{row}");
}

#[test]
fn a_headless_denial_is_said_once_in_the_persons_words_with_how_to_go_on() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo hello"}},
        {"say": "I could not run it."},
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &steps, "");
    // `echo` is read-only: asked about only with this.
    home.prepend_config("ask_read_only_commands = true");
    let run = home.run(&["run", "go"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let said = run.stderr();
    let denied: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("needs approval"))
        .collect();
    assert_eq!(
        denied.len(),
        1,
        "the refusal once, not again as output: {said}"
    );
    let shown = denied[0].trim_start().strip_prefix("⎿ denied · ").unwrap();
    // The person's words on the card; the model's words (what to do next) in its result only.
    assert_eq!(
        shown,
        "needs approval, and nobody could be asked: rerun with --yes or an allow rule"
    );
    let whole = tool_messages(&mock).remove(0);
    assert!(
        whole.starts_with("denied: this call needs approval and there was nobody to ask"),
        "{whole}"
    );
    assert!(!said.contains("the call was not run"), "{said}");
    assert!(
        said.contains("--yes \"/continue-checks\""),
        "how to go on: with someone who can approve: {said}"
    );
    assert!(
        !said.contains("/continue-checks goes on from here"),
        "{said}"
    );
}
