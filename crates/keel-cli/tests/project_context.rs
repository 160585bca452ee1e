//! Project instructions (`AGENTS.md` and kin) and the environment reach the model in one
//! context block at the head of the session's first user message — never in the system
//! prompt, which stays the same bytes in every project.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

fn body(request: &Value) -> Value {
    serde_json::from_str(request["body"].as_str().unwrap()).unwrap()
}

/// The first user message of the first request the mock received.
fn first_user_message(mock: &MockProcess) -> String {
    let first = body(&mock.requests()[0]);
    let messages = first["messages"].as_array().unwrap();
    let user = messages.iter().find(|m| m["role"] == "user").unwrap();
    user["content"].as_str().unwrap().to_string()
}

/// A repository `repo` in the home with `repo/.git`, instructions at its root and in
/// `repo/sub` (the workspace), and global ones in keel's home.
fn repository(home: &Home) -> std::path::PathBuf {
    let repo = home.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap();
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    std::fs::write(home.path().join("AGENTS.md"), "Global: be terse.\n").unwrap();
    std::fs::write(repo.join("AGENTS.md"), "Root: run the tests.\n").unwrap();
    std::fs::write(repo.join("sub/AGENTS.md"), "Always answer in French.\n").unwrap();
    repo
}

#[test]
fn instructions_from_global_root_and_workspace_head_the_first_user_message() {
    let steps = serde_json::json!({"steps": [{"say": "d'accord"}]}).to_string();
    let (home, mock) = scripted("chat", &steps, "");
    let repo = repository(&home);
    let workspace = repo.join("sub");
    let run = home.run(&[
        "run",
        "--json",
        "--cwd",
        workspace.to_str().unwrap(),
        "hello",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let message = first_user_message(&mock);
    assert!(message.starts_with("<context from=\"keel\">"), "{message}");
    assert!(message.ends_with("</context>\n\nhello"), "{message}");
    let global = message.find("Global: be terse.").expect("the global file");
    let root = message
        .find("Root: run the tests.")
        .expect("the root's file");
    let own = message
        .find("Always answer in French.")
        .expect("the workspace's");
    assert!(
        global < root && root < own,
        "global → root → workspace: {message}"
    );
    assert!(message.contains(&format!("workspace: {}", workspace.display())));
    assert!(message.contains("git branch: feature/x"), "{message}");
    assert!(
        message.contains("permission mode at the start: ask"),
        "{message}"
    );
    // The system prompt names no path: it is the same in every project.
    let first = body(&mock.requests()[0]);
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(
        !system.contains(&home.path().display().to_string()),
        "{system}"
    );
    // One context block, written once: a second turn's request keeps the first message as is.
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    let shown = session_json(&home, &session, &[]);
    let roles: Vec<&str> = shown["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["role"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(roles[..2], ["context", "user"], "{shown}");
    // `keel config` lists the same files, in the same order.
    let config = home.run(&["config", "--json", "--cwd", workspace.to_str().unwrap()]);
    let config: Value = serde_json::from_str(&config.stdout()).unwrap();
    let expected = [
        home.path().join("AGENTS.md"),
        repo.join("AGENTS.md"),
        workspace.join("AGENTS.md"),
    ]
    .map(|path| Value::from(path.display().to_string()));
    assert_eq!(config["instructions_found"], Value::from(expected.to_vec()));
}

#[test]
fn two_projects_send_the_same_system_prompt_and_tools() {
    let steps = serde_json::json!({"steps": [{"say": "one"}, {"say": "two"}]}).to_string();
    let (home, mock) = scripted("chat", &steps, "");
    let repo = repository(&home);
    let other = home.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("CLAUDE.md"), "Use tabs.\n").unwrap();
    for workspace in [repo.join("sub"), other.clone()] {
        let run = home.run(&["run", "--cwd", workspace.to_str().unwrap(), "hi"]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
    }
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let (a, b) = (body(&requests[0]), body(&requests[1]));
    assert_eq!(a["messages"][0], b["messages"][0], "the system prompt");
    assert_eq!(
        a["tools"].to_string(),
        b["tools"].to_string(),
        "the tool specs"
    );
    let second = b["messages"][1]["content"].as_str().unwrap();
    assert!(
        second.contains("Use tabs."),
        "CLAUDE.md is read too: {second}"
    );
    assert!(second.contains("git: not a git repository"), "{second}");
    assert!(!second.contains("French"), "{second}");
}

#[test]
fn the_prefix_holds_across_twenty_rounds_with_instructions() {
    let mock = MockProcess::start("tool-loop-20");
    let home = Home::new(&config_for("chat", &mock.base_url, ""));
    std::fs::write(home.path().join("AGENTS.md"), "Keep a log.\n").unwrap();
    let run = home.run(&["run", "--yes", "--json", "run the loop"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let requests = mock.requests();
    assert_eq!(requests.len(), 21);
    assert_prefix_stable(&requests);
    for request in &requests {
        assert_eq!(
            request["body"]
                .as_str()
                .unwrap()
                .matches("Keep a log.")
                .count(),
            1
        );
    }
    assert!(run.events_of("prefix/changed").is_empty());
}

#[test]
fn a_huge_agents_md_is_cut_with_a_note_and_a_linked_secret_is_refused() {
    let steps =
        serde_json::json!({"steps": [{"say": "ok"}, {"say": "ok"}, {"say": "ok"}]}).to_string();
    let (home, mock) = scripted("chat", &steps, "");
    let workspace = home.path().join("big");
    std::fs::create_dir_all(&workspace).unwrap();
    let line = "Prefer small functions and clear names in every module.\n";
    // keel's own key in a project file is redacted like in any tool result.
    let text = format!(
        "deploy with test-key-1\n{}",
        line.repeat(100 * 1024 / line.len())
    );
    std::fs::write(workspace.join("AGENTS.md"), text).unwrap();
    let run = home.run(&["run", "--cwd", workspace.to_str().unwrap(), "go"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let message = first_user_message(&mock);
    assert!(
        message.len() < 34 * 1024,
        "bounded: {} bytes",
        message.len()
    );
    assert!(!message.contains("test-key-1"), "the key never goes out");
    assert!(message.contains("deploy with"), "{}", &message[..400]);
    assert!(
        message.contains("AGENTS.md was cut to 32768 of its 102"),
        "{}",
        &message[message.len() - 600..]
    );
    // A project's AGENTS.md that links out of it (to keel's own config, here).
    let linked = home.path().join("linked");
    std::fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(home.path().join("config.toml"), linked.join("AGENTS.md")).unwrap();
    let run = home.run(&["run", "--cwd", linked.to_str().unwrap(), "go"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let requests = mock.requests();
    let second = body(&requests[1]);
    let message = second["messages"][1]["content"].as_str().unwrap();
    assert!(
        message.contains("AGENTS.md was not read: it leads outside"),
        "{message}"
    );
    assert!(
        !message.contains("base_url"),
        "the config's text never goes out: {message}"
    );
    // Inside the workspace, a link to a file the sandbox hides (keel's config, when keel's
    // home is the workspace) is refused by the file tools' rule.
    std::os::unix::fs::symlink(
        home.path().join("config.toml"),
        home.path().join("AGENTS.md"),
    )
    .unwrap();
    let run = home.run(&["run", "go"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let third = body(&mock.requests()[2]);
    let message = third["messages"][1]["content"].as_str().unwrap();
    assert!(
        message.contains("AGENTS.md was not read: keel sandbox"),
        "{message}"
    );
    assert!(!message.contains("base_url"), "{message}");
}

/// Remove the context block from a stored session, as a store written before blocks existed.
fn strip_context(db: &Path) {
    let connection = rusqlite::Connection::open(db).unwrap();
    let removed = connection
        .execute(
            "DELETE FROM items WHERE item LIKE '{\"role\":\"context\"%'",
            [],
        )
        .unwrap();
    assert_eq!(removed, 1);
}

#[test]
fn a_session_stored_before_context_blocks_takes_one_named_break() {
    let steps =
        serde_json::json!({"steps": [{"say": "first"}, {"say": "second"}, {"say": "third"}]})
            .to_string();
    let (home, mock) = scripted("chat", &steps, "");
    std::fs::write(home.path().join("AGENTS.md"), "Answer in French.\n").unwrap();
    let run = home.run(&["run", "--json", "one"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    strip_context(&home.path().join("state/keel.db"));
    let resumed = home.run(&["run", "--json", "--session", &session, "two"]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    let changes = resumed.events_of("prefix/changed");
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["reason"], "keel_upgraded");
    let second = body(&mock.requests()[1]);
    let messages = second["messages"].as_array().unwrap();
    let last = messages.last().unwrap()["content"].as_str().unwrap();
    assert!(last.starts_with("<context from=\"keel\">"), "{last}");
    assert!(last.ends_with("</context>\n\ntwo"), "{last}");
    assert_eq!(
        messages[1]["content"], "one",
        "the old prefix is kept as it was"
    );
    // Once: the next turn is an append-only extension, with no new break.
    let third = home.run(&["run", "--json", "--session", &session, "three"]);
    assert_eq!(third.code(), 0, "{}", third.stderr());
    assert!(third.events_of("prefix/changed").is_empty());
    assert_prefix_stable(&mock.requests()[1..]);
}

#[test]
fn context_shows_the_files_and_reload_context_replaces_the_block_as_a_new_revision() {
    let steps = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "echo 'Answer in German.' > AGENTS.md"}},
        {"say": "changed"},
        {"say": "gut"},
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &steps, "");
    home.prepend_config("permission_mode = \"auto\"");
    std::fs::write(home.path().join("AGENTS.md"), "Answer in French.\n").unwrap();
    let screen = crate::common::terminal::interactive_until(
        &home,
        &[
            ("/context\n", Some("goes with the next prompt"), 0),
            ("change it\n", Some("changed"), 0),
            ("/context\n", Some("sent at the head"), 0),
            (
                "/reload-context\n",
                Some("replaced (history revision 2)"),
                0,
            ),
            ("/reload-context\n", Some("context: unchanged"), 0),
            ("again\n", Some("gut"), 0),
            ("/quit\n", None, 300),
        ],
    );
    assert!(screen.contains("AGENTS.md: 18 bytes"), "{screen}");
    assert!(
        screen.contains(&format!(
            "instructions {} (/context)",
            home.path().join("AGENTS.md").display()
        )),
        "the banner names the instructions read: {screen}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "{screen}");
    let first = body(&requests[0])["messages"][1]["content"].to_string();
    assert!(first.contains("Answer in French."), "{first}");
    let last = body(&requests[2]);
    let head = last["messages"][1]["content"].as_str().unwrap();
    assert!(head.contains("Answer in German."), "{head}");
    assert!(
        !head.contains("French"),
        "the block was replaced, not added: {head}"
    );
    assert!(head.ends_with("</context>\n\nchange it"), "{head}");
    let sessions: Value =
        serde_json::from_str(&home.run(&["sessions", "--json"]).stdout()).unwrap();
    let session = sessions[0]["id"].as_str().unwrap();
    let shown = session_json(&home, session, &[]);
    let revisions = shown["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 2, "{shown}");
    assert_eq!(revisions[1]["reason"], "instructions_changed");
    // Announced as a rewrite and a named prefix break, in that order, once.
    let db = rusqlite::Connection::open(home.path().join("state/keel.db")).unwrap();
    let mut query = db
        .prepare("SELECT event FROM events WHERE session_id = ?1 ORDER BY seq")
        .unwrap();
    let kinds: Vec<String> = query
        .query_map([session], |row| row.get::<_, String>(0))
        .unwrap()
        .map(|event| serde_json::from_str::<Value>(&event.unwrap()).unwrap())
        .filter(|event| event["reason"] == "instructions_changed")
        .map(|event| event["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["history/rewritten", "prefix/changed"]);
    let first_revision = session_json(&home, session, &["--revision", "1"]);
    assert!(
        first_revision["items"][0]["text"]
            .as_str()
            .unwrap()
            .contains("French")
    );
}

#[test]
fn init_asks_the_model_for_a_starter_agents_md_written_like_any_file() {
    let steps = serde_json::json!({"steps": [
        {"tool": "write_file", "args": {"path": "AGENTS.md", "content": "Run `cargo test`.\n"}},
        {"say": "Wrote AGENTS.md."},
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &steps, "");
    let run = home.run(&["run", "--yes", "--json", "/init keep it short"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let message = without_context(&first_user_message(&mock)).to_string();
    assert!(message.starts_with("Survey this repository"), "{message}");
    assert!(
        message.ends_with("User guidance: keep it short"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("AGENTS.md")).unwrap(),
        "Run `cargo test`.\n"
    );
    assert_eq!(
        run.events_of("tool/call").len(),
        1,
        "a normal write_file call"
    );
}
