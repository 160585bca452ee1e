//! Regression tests for the adversarial review of the tools: permission subjects are the
//! resolved paths, a racing symlink cannot carry a write out of the workspace, and special
//! files (FIFOs, `/proc`) never block a tool.
//!
//! Tests that would hang on a regression run the tool on a plain thread and give up after a
//! deadline, so a regression fails instead of hanging the test binary.

use super::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

fn context() -> (tempfile::TempDir, ToolServices) {
    let dir = tempfile::tempdir().unwrap();
    let guard = WorkspaceGuard::new(dir.path(), &[]).unwrap();
    (dir, ToolServices::new(guard))
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

/// Every file under `dir`, recursively (symlinks are listed, not followed).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(path),
                _ => found.push(path),
            }
        }
    }
    found
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

/// The race of the review: while another thread flips `d` between absent and a symlink to an
/// outside directory, `write_file d/x_N.txt` must never put a file (or a temporary file)
/// outside. Directories keel created are moved aside (inside the workspace), not deleted, so
/// every successful write can be found inside.
#[test]
fn a_racing_symlink_cannot_carry_a_write_out_of_the_workspace() {
    const CALLS: usize = 400;
    let (dir, ctx) = context();
    let outside = tempfile::tempdir().unwrap();
    let parked = dir.path().join("parked");
    std::fs::create_dir(&parked).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, link, target) = (
            stop.clone(),
            dir.path().join("d"),
            outside.path().to_path_buf(),
        );
        std::thread::spawn(move || {
            let mut moved = 0usize;
            while !stop.load(Ordering::Relaxed) {
                match link.symlink_metadata() {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        let _ = std::fs::remove_file(&link);
                    }
                    Ok(_) => {
                        // Let writes into the directory keel made finish, then park it.
                        std::thread::sleep(Duration::from_micros(200));
                        moved += 1;
                        let _ = std::fs::rename(&link, parked.join(format!("d.{moved}")));
                    }
                    Err(_) => {
                        let _ = std::os::unix::fs::symlink(&target, &link);
                    }
                }
            }
        })
    };
    let mut written = Vec::new();
    let mut refused = 0usize;
    for n in 0..CALLS {
        let name = format!("x_{n}.txt");
        let args = json!({"path": format!("d/{name}"), "content": "inside\n"});
        let output = files::write_file(&args, &ctx);
        if output.is_error {
            refused += 1;
        } else {
            written.push(name);
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    let escaped = files_under(outside.path());
    assert!(
        escaped.is_empty(),
        "{} files appeared outside during {CALLS} writes: {escaped:?}",
        escaped.len()
    );
    let _ = std::fs::remove_file(dir.path().join("d"));
    let inside: Vec<String> = files_under(dir.path())
        .iter()
        .filter_map(|path| path.file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .collect();
    for name in &written {
        assert!(inside.contains(name), "`{name}` was reported written");
    }
    assert_eq!(written.len() + refused, CALLS);
    eprintln!("race: {} written inside, {refused} refused", written.len());
}

#[test]
fn a_symlink_leading_out_is_refused_by_name() {
    let (dir, ctx) = context();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("d/a.txt"), "old\n").unwrap();
    let relative = valid(
        "edit_file",
        json!({"path": "d/a.txt", "old_string": "old", "new_string": "new"}),
    );
    std::fs::remove_dir_all(dir.path().join("d")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("d")).unwrap();
    std::fs::write(outside.path().join("a.txt"), "old\n").unwrap();
    let output = files::write_file(&json!({"path": "d/b.txt", "content": "x"}), &ctx);
    assert!(
        output.is_error && output.content.contains("`d/b.txt`"),
        "{output:?}"
    );
    let edited = files::edit_file(&relative.args, &ctx);
    assert!(
        edited.is_error && edited.content.contains("`d/a.txt`"),
        "{edited:?}"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("a.txt")).unwrap(),
        "old\n"
    );
    assert!(!outside.path().join("b.txt").exists());
}

#[test]
fn writes_through_symlinks_that_stay_inside_still_work() {
    let (dir, ctx) = context();
    let root = dir.path();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "fn a() {}\n").unwrap();
    std::os::unix::fs::symlink("src", root.join("relative")).unwrap();
    std::os::unix::fs::symlink(root.join("src"), root.join("absolute")).unwrap();
    std::os::unix::fs::symlink("src/lib.rs", root.join("lib.rs")).unwrap();
    let created = files::write_file(
        &json!({"path": "relative/new/a.rs", "content": "a\n"}),
        &ctx,
    );
    assert_eq!(created.summary, "created src/new/a.rs", "{created:?}");
    let replaced = files::write_file(
        &json!({"path": "absolute/new/a.rs", "content": "b\n"}),
        &ctx,
    );
    assert_eq!(replaced.summary, "replaced src/new/a.rs", "{replaced:?}");
    let edited = files::edit_file(
        &json!({"path": "lib.rs", "old_string": "a()", "new_string": "b()"}),
        &ctx,
    );
    assert_eq!(edited.summary, "edited src/lib.rs (1×)", "{edited:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("src/new/a.rs")).unwrap(),
        "b\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("src/lib.rs")).unwrap(),
        "fn b() {}\n"
    );
    assert!(
        root.join("lib.rs")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn writes_land_in_added_directories() {
    let workspace = tempfile::tempdir().unwrap();
    let extra = tempfile::tempdir().unwrap();
    let guard = WorkspaceGuard::new(workspace.path(), &[extra.path().to_path_buf()]).unwrap();
    let ctx = ToolServices::new(guard);
    let path = extra.path().join("deep/x.txt");
    let args = json!({"path": path.display().to_string(), "content": "x\n"});
    let output = files::write_file(&args, &ctx);
    assert!(!output.is_error, "{output:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "x\n");
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
fn editing_a_fifo_fails_at_once() {
    let (dir, ctx) = context();
    let fifo = dir.path().join("pipe");
    make_fifo(&fifo);
    let args = json!({"path": "pipe", "old_string": "a", "new_string": "b"});
    let edit = within(Duration::from_secs(2), move || {
        files::edit_file(&args, &ctx)
    });
    let Some(output) = edit else {
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
        panic!("edit_file of a FIFO blocked");
    };
    assert!(
        output.is_error && output.content.contains("FIFO"),
        "{output:?}"
    );
    assert!(
        fifo.symlink_metadata()
            .is_ok_and(|meta| !meta.file_type().is_file())
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
    let output = valid("grep", json!({"pattern": "needle"}))
        .run(&hurried)
        .await;
    assert!(
        output.is_error && output.content.contains("`grep` timed out after 0 ms"),
        "{output:?}"
    );
    let patient = valid("grep", json!({"pattern": "needle"})).run(&ctx).await;
    assert!(!patient.is_error && patient.summary == "300 matches for needle");
}
