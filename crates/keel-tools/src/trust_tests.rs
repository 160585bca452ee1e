//! Regression tests for the adversarial review of the tools: permission subjects are the
//! resolved paths, a racing symlink cannot carry a write out of the workspace, and special
//! files (FIFOs, `/proc`) never block a tool.
//!
//! Tests that would hang on a regression run the tool on a plain thread and give up after a
//! deadline, so a regression fails instead of hanging the test binary.

use super::*;
use keel_types::PermissionMode;
use serde_json::json;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

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

/// Run `work` on its own thread; `None` if it has not finished within `deadline`.
fn within<T: Send + 'static>(
    deadline: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(work());
    });
    receiver.recv_timeout(deadline).ok()
}

fn make_fifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
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

#[test]
fn reading_a_fifo_fails_at_once() {
    let (dir, ctx) = context();
    let fifo = dir.path().join("pipe");
    make_fifo(&fifo);
    let args = json!({"path": "pipe"});
    let read = within(Duration::from_secs(2), move || {
        files::read_file(&args, &ctx)
    });
    let Some(output) = read else {
        // Unblock the stuck reader (it waits for a writer) before failing.
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
        panic!("read_file of a FIFO blocked");
    };
    assert!(
        output.is_error
            && output
                .content
                .contains("`pipe` is a FIFO, not a regular file"),
        "{output:?}"
    );
}

#[test]
fn grep_and_glob_pass_over_fifos_and_still_find_matches() {
    let (dir, ctx) = context();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("a.txt"), "needle here\n").unwrap();
    std::fs::write(dir.path().join("sub/b.txt"), "another needle\n").unwrap();
    make_fifo(&dir.path().join("pipe"));
    make_fifo(&dir.path().join("sub/pipe.txt"));
    let search = within(Duration::from_secs(5), move || {
        let grep = search::grep(&json!({"pattern": "needle"}), &ctx);
        let glob = search::glob(&json!({"pattern": "**/*.txt"}), &ctx);
        (grep, glob)
    });
    let Some((grep, glob)) = search else {
        panic!("a search blocked on a FIFO");
    };
    let mut lines: Vec<&str> = grep.content.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["a.txt:1:needle here", "sub/b.txt:1:another needle"],
        "{grep:?}"
    );
    assert!(
        glob.content.contains("a.txt") && glob.content.contains("sub/b.txt"),
        "{glob:?}"
    );
}

#[test]
fn searches_refuse_kernel_trees_promptly() {
    for root in ["/proc", "/sys", "/dev", "/proc/self"] {
        let (_dir, ctx) = context();
        let search = within(Duration::from_secs(10), move || {
            let grep = search::grep(&json!({"pattern": "x", "path": root}), &ctx);
            let glob = search::glob(&json!({"pattern": "*", "path": root}), &ctx);
            (grep, glob)
        });
        let Some((grep, glob)) = search else {
            panic!("a search of {root} did not return");
        };
        for output in [grep, glob] {
            assert!(
                output.is_error && output.content.contains("kernel"),
                "{root}: {output:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_file_tool_past_its_timeout_returns_an_error() {
    let (dir, ctx) = context();
    assert_eq!(ctx.file_timeout, DEFAULT_FILE_TIMEOUT);
    for n in 0..300 {
        std::fs::write(dir.path().join(format!("f{n}.txt")), "needle\n").unwrap();
    }
    let hurried = ctx.clone().with_file_timeout(Duration::ZERO);
    let started = std::time::Instant::now();
    let output = valid("grep", json!({"pattern": "needle"}))
        .run(&hurried)
        .await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(
        output.is_error && output.content.contains("`grep` timed out after 0 ms"),
        "{output:?}"
    );
    let patient = valid("grep", json!({"pattern": "needle"})).run(&ctx).await;
    assert!(!patient.is_error && patient.summary == "300 matches for needle");
}
