use super::*;
use crate::config::Overrides;
use crate::workspace_files::{CLAUDE_PROJECT_SETTINGS, PROJECT_CONFIG_FILE, WorkspaceFiles};
use std::path::PathBuf;

const USER: &str = r#"
[[hooks.PreToolUse]]
matcher = "bash"
[[hooks.PreToolUse.hooks]]
type = "command"
command = "~/.keel/hooks/guard.sh"
timeout = 5
on_error = "allow"
sandbox = "off"
"#;

const PROJECT: &str = r#"
[[hooks.PreToolUse]]
[[hooks.PreToolUse.hooks]]
command = ".keel/hooks/project.sh"
sandbox = "off"

[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "prompt"
"#;

fn config(user: &str, project: &str, trust: WorkspaceTrust) -> KeelConfig {
    KeelConfig::from_parts(
        Some((PathBuf::from("/home/u/.keel/config.toml"), user.into())),
        WorkspaceFiles {
            keel_toml: Some(WorkspaceFile::from_text(
                Path::new("/w/keel.toml"),
                PROJECT_CONFIG_FILE,
                project.into(),
            )),
            ..WorkspaceFiles::default()
        },
        trust,
        Overrides::default(),
    )
    .unwrap()
}

#[test]
fn the_users_hooks_come_first_and_a_trusted_projects_add_up_without_unconfining() {
    let config = config(USER, PROJECT, WorkspaceTrust::Trusted);
    let resolved = config.hooks(None).unwrap();
    let commands: Vec<(&str, HookLayer, bool)> = resolved
        .hooks
        .iter()
        .map(|hook| (hook.command.as_str(), hook.layer, hook.unconfined))
        .collect();
    assert_eq!(
        commands,
        [
            ("~/.keel/hooks/guard.sh", HookLayer::User, true),
            (".keel/hooks/project.sh", HookLayer::Project, false),
        ]
    );
    let user = &resolved.hooks[0];
    assert_eq!(user.timeout_secs, 5);
    assert_eq!(user.on_error, Some(HookOnError::Allow));
    assert_eq!(user.matcher.as_deref(), Some("bash"));
    assert!(user.origin.starts_with("/home/u/.keel/config.toml:"));
    assert_eq!(resolved.hooks[1].timeout_secs, DEFAULT_HOOK_TIMEOUT_SECS);
    // The project's `sandbox = "off"` is reported, its prompt hook is a notice.
    let ignored: Vec<&str> = config.ignored().iter().map(|v| v.key.as_str()).collect();
    assert_eq!(ignored, ["hooks.PreToolUse.hooks.sandbox"]);
    assert_eq!(resolved.notices.len(), 1, "{:?}", resolved.notices);
    assert!(resolved.notices[0].contains("type `prompt`"));
}

#[test]
fn an_untrusted_projects_hooks_never_run_and_are_reported() {
    let config = config(USER, PROJECT, WorkspaceTrust::Untrusted);
    let resolved = config.hooks(None).unwrap();
    assert_eq!(resolved.hooks.len(), 1, "only the user's");
    assert_eq!(resolved.hooks[0].layer, HookLayer::User);
    let ignored: Vec<(usize, &str)> = config
        .ignored()
        .iter()
        .map(|v| (v.line, v.key.as_str()))
        .collect();
    assert_eq!(ignored, [(2, "hooks.PreToolUse"), (7, "hooks.Stop")]);
}

#[test]
fn mistakes_in_your_file_are_errors_naming_the_line_and_notices_in_a_projects() {
    for (text, wanted) in [
        (
            "[[hooks.PreTooluse]]\n[[hooks.PreTooluse.hooks]]\ncommand = \"x\"\n",
            "did you mean `PreToolUse`",
        ),
        (
            "[[hooks.PreToolUse]]\nmatcher = \"(\"\n[[hooks.PreToolUse.hooks]]\ncommand = \"x\"\n",
            "not a regular expression",
        ),
        (
            "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \"x\"\ntimeout = 0\n",
            "`timeout` is seconds",
        ),
        (
            "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \"x\"\non_error = \"maybe\"\n",
            "`on_error` is `deny` or `allow`",
        ),
        (
            "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntimeout = 3\n",
            "needs a `command`",
        ),
    ] {
        let error = KeelConfig::from_texts(
            vec![(PathBuf::from("/home/u/.keel/config.toml"), text.into())],
            Overrides::default(),
        )
        .unwrap()
        .hooks(None)
        .unwrap_err()
        .to_string();
        assert!(error.contains(wanted), "{error}");
        assert!(error.contains("config.toml:1"), "{error}");
        let project = config("", text, WorkspaceTrust::Trusted)
            .hooks(None)
            .unwrap();
        assert!(project.hooks.is_empty(), "{text}");
        assert!(project.notices[0].contains(wanted), "{:?}", project.notices);
    }
    let unknown = KeelConfig::from_texts(
        vec![(
            PathBuf::from("/home/u/.keel/config.toml"),
            "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \"x\"\nasync = true\n".into(),
        )],
        Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(unknown.contains("hooks.Stop.hooks.async"), "{unknown}");
}

#[test]
fn matchers_are_anchored_and_case_sensitive() {
    let any = matcher_regex(Some("*")).unwrap();
    assert!(any.is_none());
    assert!(matcher_regex(None).unwrap().is_none());
    let bash = matcher_regex(Some("bash")).unwrap().unwrap();
    assert!(bash.is_match("bash"));
    assert!(!bash.is_match("bash_output") && !bash.is_match("Bash"));
    let either = matcher_regex(Some("edit_file|write_file"))
        .unwrap()
        .unwrap();
    assert!(either.is_match("write_file") && !either.is_match("read_file"));
    let mcp = matcher_regex(Some("mcp__github__.*")).unwrap().unwrap();
    assert!(mcp.is_match("mcp__github__create_issue"));
}

const CLAUDE: &str = r#"{
  "permissions": {"allow": ["Bash(*)"]},
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "jq -r .tool_input.command", "timeout": 30}]}
    ],
    "SessionEnd": [{"hooks": [{"type": "command", "command": "true"}]}]
  }
}"#;

#[test]
fn claude_code_settings_hooks_are_read_only_when_you_turn_it_on() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".claude")).unwrap();
    std::fs::write(home.path().join(CLAUDE_USER_SETTINGS), CLAUDE).unwrap();
    let project = WorkspaceFiles {
        claude_settings: Some(WorkspaceFile::from_text(
            Path::new("/w/.claude/settings.json"),
            CLAUDE_PROJECT_SETTINGS,
            CLAUDE.replace("jq", "project-jq"),
        )),
        ..WorkspaceFiles::default()
    };
    let build = |user: &str, trust| {
        KeelConfig::from_parts(
            Some((PathBuf::from("/home/u/.keel/config.toml"), user.into())),
            project.clone(),
            trust,
            Overrides::default(),
        )
        .unwrap()
    };
    let off = build("", WorkspaceTrust::Trusted);
    assert!(off.hooks(Some(home.path())).unwrap().hooks.is_empty());
    let on = build("hooks_from_claude = true\n", WorkspaceTrust::Trusted);
    let resolved = on.hooks(Some(home.path())).unwrap();
    let hooks: Vec<(&str, HookLayer, bool, u64)> = resolved
        .hooks
        .iter()
        .map(|h| (h.command.as_str(), h.layer, h.claude, h.timeout_secs))
        .collect();
    assert_eq!(
        hooks,
        [
            ("jq -r .tool_input.command", HookLayer::User, true, 30),
            (
                "project-jq -r .tool_input.command",
                HookLayer::Project,
                true,
                30
            ),
        ]
    );
    assert_eq!(resolved.hooks[0].matcher.as_deref(), Some("Bash"));
    assert!(
        resolved.hooks[0]
            .origin
            .ends_with(".claude/settings.json:4")
    );
    assert_eq!(resolved.notices.len(), 2, "SessionEnd, twice");
    assert!(resolved.notices[0].contains("keel runs no `SessionEnd` hooks"));
    // Untrusted: the project's Claude Code hooks are reported, not run.
    let untrusted = build("hooks_from_claude = true\n", WorkspaceTrust::Untrusted);
    assert_eq!(untrusted.hooks(Some(home.path())).unwrap().hooks.len(), 1);
    let ignored: Vec<&str> = untrusted.ignored().iter().map(|v| v.key.as_str()).collect();
    assert_eq!(ignored, ["hooks.PreToolUse", "hooks.SessionEnd"]);
    // A broken settings file is a notice, never a stop.
    std::fs::write(home.path().join(CLAUDE_USER_SETTINGS), "{ nope").unwrap();
    let broken = on.hooks(Some(home.path())).unwrap();
    assert!(
        broken.notices[0].contains("not JSON"),
        "{:?}",
        broken.notices
    );
}

#[test]
fn the_workspace_files_count_claude_settings_and_hook_scripts_only_with_hooks() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    std::fs::create_dir_all(root.join(".claude/hooks")).unwrap();
    std::fs::write(root.join(".claude/settings.json"), r#"{"model": "x"}"#).unwrap();
    std::fs::write(root.join(".claude/hooks/guard.sh"), "exit 0\n").unwrap();
    let files = WorkspaceFiles::read_with(root, true).unwrap();
    assert!(files.is_empty(), "settings without hooks, no project hooks");
    std::fs::write(root.join(".claude/settings.json"), CLAUDE).unwrap();
    assert!(
        WorkspaceFiles::read(root).unwrap().is_empty(),
        "not read when off"
    );
    let files = WorkspaceFiles::read_with(root, true).unwrap();
    let names: Vec<&str> = files.present().map(|file| file.name).collect();
    assert_eq!(names, [CLAUDE_PROJECT_SETTINGS, crate::HOOK_SCRIPTS]);
    let scripts = files.hook_scripts.unwrap();
    assert!(scripts.text.contains("exit 0"), "{}", scripts.text);
    // A keel.toml with hooks brings the scripts in too.
    std::fs::write(
        root.join("keel.toml"),
        "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \".claude/hooks/guard.sh\"\n",
    )
    .unwrap();
    let files = WorkspaceFiles::read(root).unwrap();
    let names: Vec<&str> = files.present().map(|file| file.name).collect();
    assert_eq!(names, [PROJECT_CONFIG_FILE, crate::HOOK_SCRIPTS]);
}
