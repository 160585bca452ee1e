//! A parse error in a file keel did not write names the file, the line and the key — never
//! the value written there, which may be someone's secret (the file a link to, or a copy of,
//! a credentials file): a project's `keel.toml`, a task's `task.toml`, a workspace's
//! `.mcp.json`, a scenario's fault. Through the real binary.

use crate::common::*;

const SECRET: &str = "AKIAQUOTEDSECRET0042";

#[test]
fn a_malformed_project_keel_toml_is_placed_and_named_never_quoted() {
    let (home, _mock) = scripted("chat", r#"{"steps": [{"say": "hi"}]}"#, "");
    for (file, key, line) in [
        (
            format!("max_rounds = 3\nmodel_x = 1\ncompact_at = \"{SECRET}\"\n"),
            "compact_at",
            3,
        ),
        (
            format!("[permissions]\ndeny = [\"bash\"]\nask = \"{SECRET}\"\n"),
            "permissions.ask",
            3,
        ),
        (format!("max_rounds = {SECRET}\n"), "max_rounds", 1),
    ] {
        std::fs::write(home.path().join("keel.toml"), &file).unwrap();
        for args in [&["run", "hello"][..], &["config"][..]] {
            let run = home.run(args);
            let said = run.stdout() + &run.stderr();
            assert!(!said.contains(SECRET), "{args:?} quoted it: {said}");
            assert!(
                said.contains(&format!("keel.toml:{line}")) && said.contains(key),
                "{args:?}: placed and named: {said}"
            );
        }
    }
}

#[test]
fn a_malformed_task_toml_is_placed_and_named_never_quoted() {
    let home = Home::new("");
    for (toml, key) in [
        (format!("kind = \"{SECRET}\"\nprompt = \"x\"\n"), "kind"),
        (
            format!("kind = \"read\"\nprompt = \"x\"\nmax_rounds = \"{SECRET}\"\n"),
            "max_rounds",
        ),
        (format!("kind = \"read\"\n{SECRET}\n"), ""),
    ] {
        let suite = home.path().join("suite");
        let _ = std::fs::remove_dir_all(&suite);
        let task = suite.join("t");
        std::fs::create_dir_all(task.join("workdir")).unwrap();
        std::fs::write(task.join("verify.sh"), "exit 1\n").unwrap();
        std::fs::write(task.join("task.toml"), &toml).unwrap();
        let run = home.run(&["eval", "check", suite.to_str().unwrap()]);
        assert_eq!(run.code(), 2, "{}", run.stderr());
        assert!(!run.stderr().contains(SECRET), "quoted: {}", run.stderr());
        assert!(
            run.stderr().contains("task.toml") && run.stderr().contains(key),
            "{}",
            run.stderr()
        );
    }
}

#[test]
fn a_workspace_mcp_json_and_a_scenario_do_not_repeat_their_values() {
    let (home, _mock) = scripted("chat", r#"{"steps": [{"say": "hi"}]}"#, "");
    std::fs::write(
        home.path().join(".mcp.json"),
        format!(r#"{{"mcpServers": {{"s": {{"type": "{SECRET}", "command": "x"}}}}}}"#),
    )
    .unwrap();
    // `keel trust` shows the file itself, on purpose: what is trusted is seen first.
    assert_eq!(home.run(&["trust"]).code(), 0);
    let run = home.run(&["run", "--yes", "hello"]);
    let said = run.stdout() + &run.stderr();
    assert!(!said.contains(SECRET), "quoted: {said}");
    let scenario = home.path().join("scenario.json");
    std::fs::write(
        &scenario,
        format!(r#"{{"steps": [{{"fault": "{SECRET}"}}]}}"#),
    )
    .unwrap();
    let run = home.run(&["mock", "--scenario", scenario.to_str().unwrap()]);
    assert_ne!(run.code(), 0);
    assert!(!run.stderr().contains(SECRET), "quoted: {}", run.stderr());
}
