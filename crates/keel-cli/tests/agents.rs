//! Agent definitions as a person sees them: `/agents` lists the built-ins, the project's
//! (`.keel/agents/`, Claude Code's `.claude/agents/`) and the user's, with where each comes
//! from, what it may use and whether it shares the session's cache; what keel could not take
//! from a file is said at start; `[agents]` in a project may only lower the limits.

use crate::common::*;
use serde_json::json;

fn write(path: std::path::PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn agents_lists_every_agent_with_its_source_tools_and_cache() {
    let (home, _mock) = scripted("chat", &json!({"steps": [{"say": "hi"}]}).to_string(), "");
    // Home is also the workspace: `agents/` is the user's, `.keel/agents/` the project's.
    write(
        home.path().join(".claude/agents/scout.md"),
        "---\nname: scout\ndescription: Finds things fast\ntools: Read, Grep, NotebookEdit\ncolor: blue\n---\nScout.\n",
    );
    write(
        home.path().join(".keel/agents/reviewer.md"),
        "---\ndescription: Reviews a change\npermission_mode: read-only\nmodel: deepseek/deepseek-v4-pro\n---\nReview.\n",
    );
    write(
        home.path().join("agents/reviewer.md"),
        "---\ndescription: My own reviewer\ntools: read_file, bash\n---\nMine.\n",
    );
    write(
        home.path().join("agents/pro.md"),
        "---\ndescription: Thinks hard\nmodel: deepseek/deepseek-v4-pro\n---\nThink.\n",
    );
    let screen = crate::common::terminal::interactive_until(
        &home,
        &[
            ("/agents\n", Some("Thinks hard"), 0),
            ("/quit\n", None, 300),
        ],
    );
    // Said once at start: what keel left out of the Claude file.
    assert!(screen.contains("`NotebookEdit` left out"), "{screen}");
    assert!(screen.contains("`color` ignored"), "{screen}");
    assert!(screen.contains("replaced by yours"), "{screen}");
    let listed = &screen[screen.rfind("agents the model can start").unwrap()..];
    // Each agent is a line `  NAME …` and its details indented under it: one block of words.
    let mut blocks: Vec<String> = Vec::new();
    for line in listed.lines().skip(1) {
        if line.starts_with("  ") && !line.starts_with("   ") {
            blocks.push(String::new());
        } else if !line.starts_with("   ") {
            break;
        }
        if let Some(block) = blocks.last_mut() {
            block.push(' ');
            block.push_str(&line.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    let block = |name: &str| {
        blocks
            .iter()
            .find(|block| block.starts_with(&format!(" {name} ")))
            .unwrap_or_else(|| panic!("{name}: {listed}"))
            .clone()
    };
    for (name, what) in [
        (
            "explore",
            "explore built in · mode read-only · shares your cache tools: bash, glob, grep, job_kill, job_output, list_dir, read_file, skill, web_fetch Researches",
        ),
        (
            "general",
            "general built in · your mode · shares your cache tools: yours",
        ),
        ("reviewer", "reviewer yours · your mode · shares your cache"),
        (
            "scout",
            "scout the project's (.claude/agents) · your mode · shares your cache",
        ),
        (
            "pro",
            "pro yours · your mode · model deepseek/deepseek-v4-pro: its own cache",
        ),
    ] {
        assert!(block(name).contains(what), "{what}\n{}", block(name));
    }
    assert!(
        block("reviewer").ends_with("tools: bash, read_file My own reviewer"),
        "{}",
        block("reviewer")
    );
    assert!(
        block("scout").ends_with("tools: grep, read_file Finds things fast"),
        "{}",
        block("scout")
    );
    assert_eq!(blocks.len(), 5, "{blocks:?}");
    assert!(
        !listed.contains("Reviews a change"),
        "the user's file wins: {listed}"
    );
}

#[test]
fn a_project_may_only_lower_the_agent_limits() {
    let (home, _mock) = scripted("chat", &json!({"steps": [{"say": "hi"}]}).to_string(), "");
    home.append_config("[agents]\nmax_child_tokens = 5000\n");
    std::fs::write(
        home.path().join("keel.toml"),
        "[agents]\nmax_concurrent = 2\nmax_rounds = 500\nmax_child_tokens = 0\n",
    )
    .unwrap();
    let run = home.run(&["config", "--json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let config: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(config["agents"]["max_concurrent"]["value"], 2);
    assert_eq!(config["agents"]["max_rounds"]["value"], 50);
    assert_eq!(config["agents"]["max_child_tokens"]["value"], 5000);
    let ignored: Vec<&str> = config["ignored"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|value| value["key"].as_str())
        .collect();
    assert_eq!(
        ignored,
        ["agents.max_rounds", "agents.max_child_tokens"],
        "{config}"
    );
}

#[test]
fn a_child_session_is_listed_only_with_all_and_never_continued_on_its_own() {
    let (home, _mock) = scripted("chat", &json!({"steps": [{"say": "hi"}]}).to_string(), "");
    let run = home.run(&["run", "hello"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let listed: serde_json::Value =
        serde_json::from_str(&home.run(&["sessions", "--json"]).stdout()).unwrap();
    let parent = listed[0]["id"].as_str().unwrap().to_string();
    assert_eq!(listed[0]["parent"], serde_json::Value::Null);
    // A subagent's session as keel stores it (the task tool makes these).
    let store = rusqlite::Connection::open(home.path().join("state/keel.db")).unwrap();
    store
        .execute(
            "INSERT INTO sessions (id, workspace, provider, model, created_at, updated_at, \
             parent, agent, agent_settings) SELECT 'c0ffee0000000001', workspace, provider, \
             model, created_at + 1, updated_at + 1, id, 'explore', '{}' FROM sessions \
             WHERE id = ?1",
            [&parent],
        )
        .unwrap();
    for (revision, item) in [
        (1, r#"{"role":"user","text":"find the parser"}"#),
        (
            2,
            r#"{"role":"assistant","parts":[{"type":"text","text":"src/parse.rs"}]}"#,
        ),
    ] {
        store
            .execute(
                "INSERT INTO items (session_id, revision, turn, item, created_at) \
                 VALUES ('c0ffee0000000001', ?1, 1, ?2, 1)",
                rusqlite::params![revision, item],
            )
            .unwrap();
    }
    drop(store);
    let plain = home.run(&["sessions"]);
    assert!(
        !plain.stdout().contains("c0ffee0000000001"),
        "{}",
        plain.stdout()
    );
    let all = home.run(&["sessions", "--all"]).stdout();
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 2, "{all}");
    assert!(lines[0].starts_with(&parent), "{all}");
    assert!(
        lines[1].starts_with("  └ c0ffee0000000001")
            && lines[1].contains("[explore] find the parser"),
        "{all}"
    );
    let flat: serde_json::Value =
        serde_json::from_str(&home.run(&["sessions", "--all", "--json"]).stdout()).unwrap();
    assert_eq!(flat[1]["parent"], parent.as_str());
    assert_eq!(flat[1]["agent"], "explore");
    // `-c` takes the parent; the child is never continued on its own.
    let refused = home.run(&["run", "--session", "c0ffee0000000001", "go on"]);
    assert_ne!(refused.code(), 0);
    assert!(
        refused.stderr().contains("subagent's session of"),
        "{}",
        refused.stderr()
    );
}
