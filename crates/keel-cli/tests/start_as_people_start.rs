//! Start as people start (issue 38 item 12): `keel "PROMPT"`, a typo of a command's name, a
//! long paste folded in the input, and `keel auth login` / `logout`, through the real binary
//! (tmux for the terminal) against `keel mock`.
//!
//! Invariants checked here:
//! - `keel "PROMPT"` opens the interactive session with the prompt sent, and the session goes
//!   on; a command's name wins; a near miss of one is a usage error naming it; an option after
//!   the prompt is refused, never sent as words.
//! - A paste of more than 10 lines shows as `[pasted N lines]` and is sent whole.
//! - `keel auth login` reads the key without echo (the terminal given back as it was, also
//!   after Ctrl-C), stores it owner-only under `$KEEL_HOME/state/`; requests use it when the
//!   variable is unset, the variable wins when set; no command keel runs can read it, and it
//!   is redacted like a key from the environment; `keel auth logout` forgets it.

use crate::common::tmux::{Tmux, available};
use crate::common::*;
use serde_json::json;
use sha2::Digest;
use std::os::unix::fs::PermissionsExt;

const STORED_KEY: &str = "sk-stored-by-login-4f9a2c";

/// The mock's fingerprint of a key: the first 12 hex digits of its SHA-256.
fn fingerprint(key: &str) -> String {
    sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<String>()[..12]
        .to_string()
}

#[test]
fn a_prompt_on_the_command_line_starts_the_session_with_it_sent() {
    if !available() {
        return;
    }
    let scenario = json!({"steps": [
        {"say": "First answer."}, {"say": "Second answer."}, {"say": "Third answer."}
    ]});
    let (home, mock) = scripted("chat", &scenario.to_string(), "");
    let tmux = Tmux::start(&home, &home.path(), &["'fix the failing test'"], (100, 30));
    tmux.wait_for("First answer.");
    let shown = tmux.everything();
    assert!(shown.contains("› fix the failing test"), "{shown}");
    // The session goes on: a second prompt is typed and answered in it.
    tmux.type_text("and then?");
    tmux.press(&["Enter"]);
    tmux.wait_for("Second answer.");
    let requests = mock.requests();
    let first = requests[0]["body"].as_str().unwrap();
    assert!(first.contains("fix the failing test"), "{first}");
    assert!(requests[1]["body"].as_str().unwrap().contains("and then?"));
    // The prompt went into the input's history like a typed line: Up twice brings it back.
    tmux.press(&["Up", "Up", "Enter"]);
    tmux.wait_for("Third answer.");
    let third = mock.requests()[2]["body"].as_str().unwrap().to_string();
    assert_eq!(third.matches("fix the failing test").count(), 2, "{third}");
}

#[test]
fn a_prompt_in_line_mode_is_sent_then_the_session_reads_on() {
    let scenario = json!({"steps": [{"say": "Line mode answer."}]});
    let (home, mock) = scripted("chat", &scenario.to_string(), "");
    let run = home.run(&["--plain", "explain this repository"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().contains("› explain this repository"),
        "{}",
        run.stdout()
    );
    assert!(
        run.stdout().contains("Line mode answer."),
        "{}",
        run.stdout()
    );
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn a_prompt_in_a_script_exits_with_its_turns_outcome() {
    let scenario = json!({"steps": [{"fault": {"status": 400, "body": ""}}]});
    let (home, _mock) = scripted("chat", &scenario.to_string(), "");
    let run = home.run(&["--plain", "this will fail"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
}

#[test]
fn a_commands_name_wins_and_a_near_miss_is_a_usage_error() {
    let (home, mock) = scripted("chat", r#"{"steps": [{"say": "never"}]}"#, "");
    let sessions = home.run(&["sessions"]);
    assert_eq!(sessions.code(), 0, "{}", sessions.stderr());
    for (typed, meant) in [
        (&["sesions"][..], "did you mean `keel sessions`?"),
        (&["confg", "--json"][..], "did you mean `keel config`?"),
        (&["test", "the", "parser"][..], "keel \"test the parser\""),
    ] {
        let run = home.run(typed);
        assert_eq!(run.code(), 2, "{typed:?}: {}", run.stderr());
        assert!(run.stderr().contains(meant), "{typed:?}: {}", run.stderr());
    }
    let late = home.run(&["fix it", "--yes"]);
    assert_eq!(late.code(), 2);
    assert!(
        late.stderr().contains("`--yes` comes after the prompt"),
        "{}",
        late.stderr()
    );
    assert!(mock.requests().is_empty(), "nothing was sent");
}

#[test]
fn a_long_paste_folds_in_the_input_and_is_sent_whole() {
    if !available() {
        return;
    }
    let scenario = json!({"steps": [{"say": "Read it."}]});
    let (home, mock) = scripted("chat", &scenario.to_string(), "");
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 30));
    tmux.wait_for("mock-model · ask");
    let pasted: String = (1..=200).map(|n| format!("log line {n}\n")).collect();
    tmux.type_text("what failed here: ");
    tmux.paste(&pasted);
    let screen = tmux.wait_until_screen("the folded paste", |screen| {
        screen.contains("what failed here: [pasted 200 lines]")
    });
    assert!(!screen.contains("log line 7"), "{screen}");
    tmux.press(&["Enter"]);
    tmux.wait_for("Read it.");
    let body = mock.requests()[0]["body"].as_str().unwrap().to_string();
    // Every line, in order (the JSON body escapes the newlines).
    let whole = pasted.trim_end().replace('\n', "\\n");
    assert!(
        body.contains(&format!("what failed here: {whole}")),
        "{body}"
    );
    // A short paste is shown as it is.
    tmux.paste("one\ntwo\n");
    tmux.wait_until_screen("the short paste", |screen| screen.contains("two"));
}

#[test]
fn a_key_typed_at_login_is_never_shown_and_is_stored_owner_only() {
    if !available() {
        return;
    }
    let scenario = json!({"steps": [{"say": "Keyed."}, {"say": "Keyed again."}]});
    let (home, mock) = scripted("chat", &scenario.to_string(), "");
    let tmux = Tmux::start_with_env(
        &home,
        &home.path(),
        &["auth", "login"],
        (100, 30),
        &[("DEEPSEEK_API_KEY", "")],
    );
    tmux.wait_for("what you type is not shown");
    tmux.type_text(STORED_KEY);
    tmux.press(&["BSpace"]);
    tmux.type_text("c");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !tmux.everything().contains("sk-stored"),
        "{}",
        tmux.everything()
    );
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("[terminal:");
    assert!(shown.contains("[keel exited: 0]"), "{shown}");
    assert!(shown.contains("[terminal: icanon echo ]"), "{shown}");
    assert!(!shown.contains("sk-stored"), "{shown}");
    assert!(shown.contains("stored a key of 25 characters"), "{shown}");
    let file = home.path().join("state/keys.json");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(std::fs::read_to_string(&file).unwrap().contains(STORED_KEY));

    // Used when the variable is unset; the variable wins when set.
    let run = home.run_without(&["run", "hello"], "DEEPSEEK_API_KEY");
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = home.run(&["run", "hello again"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let requests = mock.requests();
    assert_eq!(
        requests[0]["key_fingerprint"],
        fingerprint(STORED_KEY).as_str()
    );
    assert_eq!(
        requests[1]["key_fingerprint"],
        fingerprint("test-key-1").as_str()
    );
    // keel config says where the key comes from, never the key.
    let config = home.run_without(&["config"], "DEEPSEEK_API_KEY");
    assert!(
        config
            .stdout()
            .contains("$DEEPSEEK_API_KEY (stored by keel auth login)"),
        "{}",
        config.stdout()
    );
    assert!(!config.stdout().contains("sk-stored"));

    // Logout forgets it: a run without the variable has no key again.
    let out = home.run(&["auth", "logout"]);
    assert_eq!(out.code(), 0, "{}", out.stderr());
    assert!(!file.exists());
    let keyless = home.run_without(&["run", "hello"], "DEEPSEEK_API_KEY");
    assert_eq!(keyless.code(), 2);
    assert!(
        keyless.stderr().contains("keel auth login deepseek"),
        "{}",
        keyless.stderr()
    );
}

#[test]
fn ctrl_c_at_login_stores_nothing_and_gives_the_terminal_back() {
    if !available() {
        return;
    }
    let home = Home::new(&config_for("chat", "http://127.0.0.1:9", ""));
    let tmux = Tmux::start(&home, &home.path(), &["auth", "login"], (100, 30));
    tmux.wait_for("what you type is not shown");
    tmux.type_text("sk-half-typed");
    tmux.press(&["C-c"]);
    let shown = tmux.wait_for("[terminal:");
    assert!(shown.contains("[keel exited: 130]"), "{shown}");
    assert!(shown.contains("nothing stored"), "{shown}");
    assert!(shown.contains("[terminal: icanon echo ]"), "{shown}");
    assert!(!home.path().join("state/keys.json").exists());
}

#[test]
fn a_stored_key_is_hidden_from_commands_and_redacted() {
    let home = Home::new(&config_for("chat", "http://127.0.0.1:9", ""));
    let scenario = json!({"steps": [
        {"tool": "bash", "args": {"command": format!(
            "cat {}/state/keys.json; cat .env; printenv DEEPSEEK_API_KEY; echo done",
            home.path().display()
        )}},
        {"say": "Looked."}
    ]});
    let mock = MockProcess::with_steps(&home.path(), &scenario.to_string());
    std::fs::write(
        home.path().join("config.toml"),
        config_for("chat", &mock.base_url, ""),
    )
    .unwrap();
    // A file of the user's that happens to hold the key.
    std::fs::write(home.path().join(".env"), format!("KEY={STORED_KEY}\n")).unwrap();
    let mut child = home
        .keel(&["auth", "login"])
        .env_remove("DEEPSEEK_API_KEY")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("{STORED_KEY}\n").as_bytes())
            .unwrap();
    }
    let login = child.wait_with_output().unwrap();
    assert!(login.status.success(), "{login:?}");
    assert!(!String::from_utf8_lossy(&login.stderr).contains(STORED_KEY));
    let run = home.run_without(&["run", "--yes", "--json", "look"], "DEEPSEEK_API_KEY");
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let output = run.events_of("tool/result")[0]["output"].to_string();
    assert!(!run.stdout().contains(STORED_KEY), "{}", run.stdout());
    assert!(
        output.contains("KEY=[redacted $DEEPSEEK_API_KEY]"),
        "{output}"
    );
    // Hidden by the sandbox: refused, or not there at all.
    assert!(
        output.contains("keys.json: Permission denied") || output.contains("keys.json: No such"),
        "{output}"
    );
    assert!(output.contains("done"), "{output}");
    // The store never holds it either.
    let db = std::fs::read(home.path().join("state/keel.db")).unwrap();
    assert!(!String::from_utf8_lossy(&db).contains(STORED_KEY));
}

#[test]
fn a_malformed_key_or_a_broken_store_is_refused_and_loses_nothing() {
    let home = Home::new(&config_for("chat", "http://127.0.0.1:9", ""));
    let login = |input: &str| {
        let mut child = home
            .keel(&["auth", "login"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        Run::from(child.wait_with_output().unwrap())
    };
    for (input, said) in [
        ("sk has spaces\n", "whitespace"),
        ("one\ntwo\n", "more than one line"),
        ("\n", "no key was given"),
    ] {
        let run = login(input);
        assert_eq!(run.code(), 2, "{input:?}");
        assert!(run.stderr().contains(said), "{input:?}: {}", run.stderr());
        assert!(!home.path().join("state/keys.json").exists());
    }
    // A store keel cannot read is named, never overwritten; the environment's key still works
    // (said once), and without one the run says how to get a key.
    let file = home.path().join("state/keys.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "{not json").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let run = login("sk-good-key-123\n");
    assert_eq!(run.code(), 2);
    assert!(run.stderr().contains("keys.json"), "{}", run.stderr());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{not json");
    let config = home.run(&["config"]);
    assert_eq!(config.code(), 0, "{}", config.stderr());
    assert_eq!(
        config.stderr().matches("move the file away").count(),
        1,
        "{}",
        config.stderr()
    );
    let keyless = home.run_without(&["run", "hi"], "DEEPSEEK_API_KEY");
    assert_eq!(keyless.code(), 2);
    assert!(
        keyless.stderr().contains("no API key"),
        "{}",
        keyless.stderr()
    );
    // A key file others can read is reported, not quietly made private (the key may have
    // been read), and its key is not used.
    std::fs::write(
        &file,
        "{\"version\": 1, \"keys\": {\"DEEPSEEK_API_KEY\": \"sk-exposed-key-1\"}}",
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let keyless = home.run_without(&["run", "hi"], "DEEPSEEK_API_KEY");
    assert_eq!(keyless.code(), 2);
    assert!(
        keyless.stderr().contains("other users can read it"),
        "{}",
        keyless.stderr()
    );
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o644
    );
}

#[test]
fn a_stored_key_behind_a_set_variable_is_still_redacted() {
    let home = Home::new(&config_for("chat", "http://127.0.0.1:9", ""));
    let scenario = json!({"steps": [
        {"tool": "bash", "args": {"command": "cat .env"}},
        {"say": "Looked."}
    ]});
    let mock = MockProcess::with_steps(&home.path(), &scenario.to_string());
    std::fs::write(
        home.path().join("config.toml"),
        config_for("chat", &mock.base_url, ""),
    )
    .unwrap();
    std::fs::create_dir_all(home.path().join("state")).unwrap();
    let file = home.path().join("state/keys.json");
    std::fs::write(
        &file,
        format!("{{\"version\": 1, \"keys\": {{\"DEEPSEEK_API_KEY\": \"{STORED_KEY}\"}}}}"),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(home.path().join(".env"), format!("OLD={STORED_KEY}\n")).unwrap();
    // The environment's key is the one used; the stored one is still kept from the model.
    let run = home.run(&["run", "--yes", "--json", "look"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!run.stdout().contains(STORED_KEY), "{}", run.stdout());
    let output = run.events_of("tool/result")[0]["output"].to_string();
    assert!(
        output.contains("OLD=[redacted $DEEPSEEK_API_KEY]"),
        "{output}"
    );
    assert!(
        !mock.requests()[1]["body"]
            .as_str()
            .unwrap()
            .contains(STORED_KEY)
    );
}
