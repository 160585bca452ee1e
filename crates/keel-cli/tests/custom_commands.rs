//! Custom slash commands: `.keel/commands/NAME.md` (the project's) and
//! `$KEEL_HOME/commands/NAME.md` (the user's, which wins a clash) are prompts with
//! `$ARGUMENTS` and `$1`…`$9`, in every surface; built-in commands always win.

use crate::common::serve::{Server, wait_until_idle};
use crate::common::*;
use serde_json::json;

/// A project command `/review` (with front matter) in `home`, which is also the workspace.
fn with_review(home: &Home) {
    write_review_command(home, "Review $1 carefully. All: $ARGUMENTS\n");
}

fn one_answer() -> String {
    json!({"steps": [{"say": "reviewed"}, {"say": "again"}]}).to_string()
}

#[test]
fn keel_run_sends_a_custom_commands_prompt_and_says_what_it_ignored() {
    let (home, mock) = scripted("chat", &one_answer(), "");
    with_review(&home);
    // A file shadowing a built-in command is listed and ignored.
    std::fs::write(home.path().join(".keel/commands/compact.md"), "not compact").unwrap();
    let run = home.run(&["run", "/review src/lib.rs quickly"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        last_user_message(&mock),
        "Review src/lib.rs carefully. All: src/lib.rs quickly\n"
    );
    let stderr = run.stderr();
    assert!(stderr.contains("`allowed-tools` ignored"), "{stderr}");
    assert!(
        stderr.contains("/compact is a built-in command, which always wins"),
        "{stderr}"
    );
    // The user's own command of the same name wins over the project's.
    std::fs::create_dir_all(home.path().join("commands")).unwrap();
    std::fs::write(
        home.path().join("commands/review.md"),
        "My review of $ARGUMENTS",
    )
    .unwrap();
    let run = home.run(&["run", "/review a.rs"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(last_user_message(&mock), "My review of a.rs");
    // A name nobody knows is still a usage error that says what keel run knows.
    let unknown = home.run(&["run", "/nosuch thing"]);
    assert_eq!(unknown.code(), 2, "{}", unknown.stderr());
    assert!(unknown.stderr().contains("unknown slash command `/nosuch`"));
}

#[test]
fn a_projects_command_that_links_to_a_secret_is_refused() {
    let (home, mock) = scripted("chat", &one_answer(), "");
    let dir = home.path().join(".keel/commands");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(home.path().join("config.toml"), dir.join("leak.md")).unwrap();
    let run = home.run(&["run", "/leak"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(
        run.stderr().contains("may not be a link"),
        "{}",
        run.stderr()
    );
    assert!(mock.requests().is_empty(), "nothing was sent");
}

#[test]
fn the_interactive_session_lists_and_runs_custom_commands() {
    let (home, mock) = scripted("chat", &one_answer(), "");
    with_review(&home);
    let screen = crate::common::terminal::interactive_until(
        &home,
        &[
            ("/help\n", Some("Review a file"), 0),
            ("/review main.rs\n", Some("reviewed"), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(screen.contains("/review"), "{screen}");
    assert_eq!(
        last_user_message(&mock),
        "Review main.rs carefully. All: main.rs\n"
    );
}

#[test]
fn serve_takes_a_custom_command_as_input() {
    let (home, mock) = scripted("chat", &one_answer(), "");
    with_review(&home);
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    let (status, _) = server.submit(&session, json!({"input": "/review api.rs"}));
    assert_eq!(status, 202);
    wait_until_idle(&server, &session);
    assert_eq!(
        last_user_message(&mock),
        "Review api.rs carefully. All: api.rs\n"
    );
    let (status, body) = server.submit(&session, json!({"input": "/nosuch"}));
    assert_eq!(status, 400, "{body}");
}
