//! Tool tests in a temporary workspace: validation, bounded reads, edits, search, bash.

use super::*;
use std::time::{Duration, Instant};

fn context() -> (tempfile::TempDir, ToolServices) {
    let dir = tempfile::tempdir().unwrap();
    let guard = WorkspaceGuard::new(dir.path(), &[]).unwrap();
    (dir, ToolServices::new(guard))
}

fn registry() -> ToolRegistry {
    ToolRegistry::new().unwrap()
}

async fn call(ctx: &ToolServices, name: &str, args: &str) -> ToolOutput {
    match registry().validate(name, args) {
        Ok(call) => call.run(ctx).await,
        Err(message) => panic!("validation failed: {message}"),
    }
}

#[test]
fn validation_errors_are_specific() {
    let registry = registry();
    let error = registry
        .validate("write_file", r#"{"path": 12, "content": "x"}"#)
        .unwrap_err();
    assert!(
        matches!(&error, ValidationError::Schema { problems, .. }
            if problems.iter().any(|p| p.starts_with("/path") && p.contains("string"))),
        "{error}"
    );
    let error = registry
        .validate("write_file", r#"{"path": "a"}"#)
        .unwrap_err();
    assert!(
        matches!(&error, ValidationError::Schema { problems, .. }
            if problems.iter().any(|p| p.contains("content"))),
        "{error}"
    );
    let error = registry
        .validate("write_file", r#"{"path": "a", "content": "x""#)
        .unwrap_err();
    assert!(matches!(error, ValidationError::NotJson { .. }), "{error}");
    assert!(
        error.to_string().contains("not valid JSON"),
        "the model is told why"
    );
    let error = registry
        .validate("bash", r#"{"command": "ls", "sudo": true}"#)
        .unwrap_err();
    assert!(error.to_string().contains("sudo"), "{error}");
    let error = registry.validate("rm_rf", "{}").unwrap_err();
    assert!(
        matches!(&error, ValidationError::UnknownTool { name, available }
            if name == "rm_rf" && available.contains(&"read_file")),
        "{error}"
    );
    assert!(
        registry.validate("list_dir", "").is_ok(),
        "empty arguments mean {{}}"
    );
}

#[test]
fn specs_are_stable_and_complete() {
    let specs = registry().specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "write_file",
            "edit_file",
            "list_dir",
            "glob",
            "grep",
            "bash",
            "todo_write",
            "web_fetch",
            "propose_plan",
            "task",
            "job_output",
            "job_kill",
            "skill"
        ]
    );
    // The exact specs the model is offered (name, description, argument schema of every tool,
    // in order): a changed word or schema key shows up here for review.
    insta::assert_snapshot!("tool_specs", serde_json::to_string_pretty(&specs).unwrap());
}

#[tokio::test]
async fn read_file_with_ranges_caps_and_big_files() {
    let (dir, ctx) = context();
    let text: String = (1..=50_000).map(|n| format!("line {n}\n")).collect();
    std::fs::write(dir.path().join("big.txt"), &text).unwrap();
    assert!(text.len() > 400_000);
    let output = call(&ctx, "read_file", r#"{"path": "big.txt"}"#).await;
    assert!(!output.is_error);
    assert!(output.content.contains("     1\tline 1\n"));
    assert!(
        output.content.contains("of 50000; read more with offset="),
        "{}",
        &output.content[output.content.len() - 200..]
    );
    let ranged = call(
        &ctx,
        "read_file",
        r#"{"path": "big.txt", "offset": 49999, "limit": 5}"#,
    )
    .await;
    assert!(
        ranged
            .content
            .contains(" 49999\tline 49999\n 50000\tline 50000\n"),
        "{}",
        ranged.content
    );
    let past = call(&ctx, "read_file", r#"{"path": "big.txt", "offset": 60000}"#).await;
    assert!(past.is_error && past.content.contains("past the end"));
    let missing = call(&ctx, "read_file", r#"{"path": "nope.txt"}"#).await;
    assert!(missing.is_error && missing.content.contains("nope.txt"));
}

#[tokio::test]
async fn ten_megabyte_file_is_read_in_bounded_output() {
    let (dir, ctx) = context();
    let line = "x".repeat(1023) + "\n";
    let text = line.repeat(10 * 1024);
    std::fs::write(dir.path().join("ten.txt"), &text).unwrap();
    let output = call(&ctx, "read_file", r#"{"path": "ten.txt"}"#).await;
    assert!(!output.is_error);
    assert!(output.content.len() < 40_000, "{}", output.content.len());
    assert!(output.content.contains("of 10240"));
}

#[tokio::test]
async fn binary_files_are_described() {
    let (dir, ctx) = context();
    std::fs::write(dir.path().join("blob.bin"), [0u8, 1, 2, 255, 0, 7]).unwrap();
    let output = call(&ctx, "read_file", r#"{"path": "blob.bin"}"#).await;
    assert!(
        output.content.contains("binary file (6 bytes)"),
        "{}",
        output.content
    );
}

#[tokio::test]
async fn write_and_edit_files() {
    let (dir, ctx) = context();
    let created = call(
        &ctx,
        "write_file",
        r#"{"path": "src/new.rs", "content": "fn a() {}\nfn b() {}\n"}"#,
    )
    .await;
    assert!(
        !created.is_error && created.summary == "created src/new.rs",
        "{created:?}"
    );
    let edited = call(
        &ctx,
        "edit_file",
        r#"{"path": "src/new.rs", "old_string": "fn b() {}", "new_string": "fn b() { a() }"}"#,
    )
    .await;
    assert!(!edited.is_error, "{edited:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/new.rs")).unwrap(),
        "fn a() {}\nfn b() { a() }\n"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("src")).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary files are left behind");
}

#[tokio::test]
async fn edit_file_refuses_missing_and_ambiguous_matches_without_changing_anything() {
    let (dir, ctx) = context();
    let original = "let total = 1;\nlet totl = 2;\nlet x = 3;\nlet x = 3;\n";
    std::fs::write(dir.path().join("a.rs"), original).unwrap();
    let missing = call(
        &ctx,
        "edit_file",
        r#"{"path": "a.rs", "old_string": "let  total = 1;", "new_string": "y"}"#,
    )
    .await;
    assert!(missing.is_error);
    assert!(
        missing.content.contains("not found") && missing.content.contains("     1\tlet total = 1;"),
        "{}",
        missing.content
    );
    let ambiguous = call(
        &ctx,
        "edit_file",
        r#"{"path": "a.rs", "old_string": "let x = 3;", "new_string": "y"}"#,
    )
    .await;
    assert!(
        ambiguous.is_error
            && ambiguous.content.contains("matches 2 times")
            && ambiguous.content.contains("lines 3, 4"),
        "{}",
        ambiguous.content
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.rs")).unwrap(),
        original
    );
    let all = call(&ctx, "edit_file", r#"{"path": "a.rs", "old_string": "let x = 3;", "new_string": "let x = 4;", "replace_all": true}"#).await;
    assert!(!all.is_error && all.content.contains("2 replacement"));
}

#[tokio::test]
async fn writes_outside_the_workspace_are_refused() {
    let (_dir, ctx) = context();
    let outside = tempfile::tempdir().unwrap();
    for path in [
        "../escape.txt".to_string(),
        outside.path().join("x").display().to_string(),
    ] {
        let args = serde_json::json!({"path": path, "content": "no"}).to_string();
        let output = call(&ctx, "write_file", &args).await;
        assert!(
            output.is_error && output.content.contains("outside the workspace"),
            "{output:?}"
        );
    }
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
}

#[tokio::test]
async fn list_glob_and_grep_respect_gitignore_and_odd_names() {
    let (dir, ctx) = context();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::create_dir_all(dir.path().join("target")).unwrap();
    std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "pub fn needle() {}\n").unwrap();
    std::fs::write(dir.path().join("target/out.rs"), "pub fn needle() {}\n").unwrap();
    use std::os::unix::ffi::OsStrExt;
    let odd = std::ffi::OsStr::from_bytes(b"bad\xffname.rs");
    std::fs::write(dir.path().join("src").join(odd), "needle\n").unwrap();
    let listing = call(&ctx, "list_dir", r#"{"path": "src"}"#).await;
    assert!(
        listing.content.contains("lib.rs") && listing.content.contains("bad\u{FFFD}name.rs"),
        "{}",
        listing.content
    );
    let globbed = call(&ctx, "glob", r#"{"pattern": "**/*.rs"}"#).await;
    assert!(globbed.content.contains("src/lib.rs"));
    assert!(
        !globbed.content.contains("target/out.rs"),
        "{}",
        globbed.content
    );
    let grepped = call(&ctx, "grep", r#"{"pattern": "fn needle"}"#).await;
    assert_eq!(grepped.content, "src/lib.rs:1:pub fn needle() {}");
    let bad = call(&ctx, "grep", r#"{"pattern": "("}"#).await;
    assert!(bad.is_error && bad.content.contains("bad regular expression"));
}

#[tokio::test]
async fn bash_reports_exit_codes_and_combined_output() {
    let (_dir, ctx) = context();
    let output = call(
        &ctx,
        "bash",
        r#"{"command": "echo out; echo err >&2; exit 3"}"#,
    )
    .await;
    assert!(output.is_error);
    assert_eq!(output.content, "out\nerr\n[exit code 3]");
    assert_eq!(output.summary, "exit 3");
    let ok = call(&ctx, "bash", r#"{"command": "pwd"}"#).await;
    assert!(!ok.is_error && ok.content.contains(ctx.guard.workspace().to_str().unwrap()));
}

#[tokio::test]
async fn bash_timeout_kills_the_whole_process_group() {
    let (dir, ctx) = context();
    // A process of the group that is not its leader (a subshell in the background), alive
    // until something kills it: its pid is in `worker.pid`.
    let output = call(
        &ctx,
        "bash",
        r#"{"command": "(while :; do sleep 0.1; done) & echo $! > worker.pid; sleep 30", "timeout_secs": 1}"#,
    )
    .await;
    assert!(
        output.is_error && output.content.contains("timed out after 1 s"),
        "{}",
        output.content
    );
    let worker = std::fs::read_to_string(dir.path().join("worker.pid")).unwrap();
    let worker = worker.trim();
    let _cleanup = KillOnDrop(worker.to_string());
    wait_until_gone(worker).await;
}

/// Wait until process `pid` is gone (or a zombie); fail if it still runs after 20 s. Async, so
/// the runtime goes on (a dropped call kills its group from a task).
async fn wait_until_gone(pid: &str) {
    let gone = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(") ")
                .next()
                .is_some_and(|rest| rest.starts_with('Z'))
        })
    };
    let started = Instant::now();
    while !gone() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "process {pid} of the tool still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Kills a pid on drop, so a failing test leaves nothing running.
struct KillOnDrop(String);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &self.0])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

#[tokio::test]
async fn bash_output_is_middle_truncated_and_binary_is_described() {
    let (_dir, ctx) = context();
    let big = call(&ctx, "bash", r#"{"command": "seq 1 200000"}"#).await;
    assert!(big.content.starts_with("1\n2\n"));
    assert!(
        big.content.contains("bytes cut from the middle of"),
        "{}",
        big.content.len()
    );
    assert!(big.content.contains("200000\n[exit code 0]"));
    assert!(big.content.len() < 32_000);
    let binary = call(&ctx, "bash", r#"{"command": "printf 'a\\000b\\001'"}"#).await;
    assert!(
        binary
            .content
            .contains("[binary output, 4 bytes, not shown]"),
        "{}",
        binary.content
    );
}

#[tokio::test]
async fn cancelling_bash_kills_it() {
    let (dir, ctx) = context();
    let call = registry()
        .validate("bash", r#"{"command": "echo $$ > bash.pid; sleep 30"}"#)
        .unwrap();
    let pidfile = dir.path().join("bash.pid");
    let mut run = Box::pin(call.run(&ctx));
    // Cancel once the command runs (its pid is written), by dropping the future.
    let started = Instant::now();
    while std::fs::read_to_string(&pidfile).map_or(true, |pid| pid.trim().is_empty()) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the command never ran"
        );
        let finished = tokio::time::timeout(Duration::from_millis(20), &mut run).await;
        assert!(finished.is_err(), "the command ended on its own");
    }
    drop(run);
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let _cleanup = KillOnDrop(pid.trim().to_string());
    wait_until_gone(pid.trim()).await;
}

#[tokio::test]
async fn todo_write_renders_the_plan() {
    let (_dir, ctx) = context();
    let output = call(&ctx, "todo_write", r#"{"todos": [{"content": "read", "status": "completed"}, {"content": "fix", "status": "in_progress"}]}"#).await;
    assert_eq!(output.content, "[x] read\n[~] fix");
    assert_eq!(output.summary, "2 items, 1 open");
    assert!(
        registry()
            .validate(
                "todo_write",
                r#"{"todos": [{"content": "x", "status": "done"}]}"#
            )
            .is_err()
    );
}

#[test]
fn sensitivity_covers_writes_and_reads_outside() {
    let (_dir, ctx) = context();
    let registry = registry();
    assert!(
        registry
            .validate("bash", r#"{"command": "ls"}"#)
            .unwrap()
            .is_sensitive(&ctx)
    );
    assert!(
        !registry
            .validate("read_file", r#"{"path": "a"}"#)
            .unwrap()
            .is_sensitive(&ctx)
    );
    assert!(
        registry
            .validate("read_file", r#"{"path": "/etc/hostname"}"#)
            .unwrap()
            .is_sensitive(&ctx)
    );
}

#[tokio::test]
async fn a_background_process_holding_the_output_does_not_hold_the_tool() {
    let (_dir, ctx) = context();
    let marker = format!("sleep 30.{}", std::process::id());
    // The pause lets `setsid` leave the group before the command ends and the group is killed.
    let command = format!("setsid {marker} & sleep 0.5; echo started");
    let out = call(
        &ctx,
        "bash",
        &serde_json::json!({ "command": command, "timeout_secs": 5 }).to_string(),
    )
    .await;
    let _ = std::process::Command::new("pkill")
        .args(["-f", &marker])
        .status();
    // Waiting for the holder would end in the 5 s timeout instead, saying so.
    assert!(out.content.contains("started"), "{}", out.content);
    assert!(
        out.content.contains("still holds the output open"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn bash_output_is_redacted_even_where_it_is_cut() {
    let (_dir, ctx) = context();
    let secrets = keel_types::Secrets::from_names(["CANARY_KEY".to_string()], |_| {
        Some("sk-canary-0123456789abcdef".into())
    });
    let ctx = ToolServices { secrets, ..ctx };
    // Place the key across the middle cut: more than the cap of output around it.
    let half = crate::output::OUTPUT_CAP / 2;
    let command = format!(
        "head -c {} /dev/zero | tr '\\0' a; printf sk-canary-0123456789abcdef; head -c {} /dev/zero | tr '\\0' b",
        half - 10,
        half * 3
    );
    let out = call(
        &ctx,
        "bash",
        &serde_json::json!({ "command": command }).to_string(),
    )
    .await;
    assert!(
        out.content.contains("cut from the middle"),
        "the output was cut"
    );
    for piece in ["sk-canary", "canary-0123", "0123456789abcdef"] {
        assert!(!out.content.contains(piece), "{piece} leaked");
    }
    // Redacted whole before the cut: the cut may split the marker, never the key.
    assert!(out.content.contains("[redac"), "{}", &out.content[..200]);
}

#[tokio::test]
async fn a_commands_output_reaches_the_live_view_as_it_arrives_and_redacted() {
    let (_dir, ctx) = context();
    let secrets = keel_types::Secrets::from_names(["CANARY_KEY".to_string()], |_| {
        Some("sk-canary-0123456789abcdef".into())
    });
    let seen = std::sync::Arc::new(std::sync::Mutex::new(
        Vec::<(std::time::Instant, String)>::new(),
    ));
    let sink = seen.clone();
    let live = crate::LiveOutput(std::sync::Arc::new(move |text: &str| {
        sink.lock()
            .unwrap()
            .push((std::time::Instant::now(), text.to_string()));
    }));
    let ctx = ToolServices { secrets, ..ctx }.with_live_output(live);
    // The key is written in two halves, a pause apart; a line comes well before the end.
    let command = "echo first; sleep 0.4; printf sk-canary-0123; sleep 0.2; printf '456789abcdef\\n'; echo last";
    let started = std::time::Instant::now();
    let out = call(
        &ctx,
        "bash",
        &serde_json::json!({ "command": command }).to_string(),
    )
    .await;
    let ended = std::time::Instant::now();
    let seen = seen.lock().unwrap().clone();
    let text: String = seen.iter().map(|(_, text)| text.as_str()).collect();
    assert_eq!(text, "first\n[redacted $CANARY_KEY]\nlast\n", "{seen:?}");
    assert!(out.content.starts_with(&text), "{}", out.content);
    // Live: the first line was handed on before the command ended.
    let first = seen
        .iter()
        .find(|(_, text)| text.contains("first"))
        .unwrap()
        .0;
    assert!(ended.duration_since(first) > std::time::Duration::from_millis(300));
    assert!(first.duration_since(started) < std::time::Duration::from_millis(300));
    for (_, piece) in &seen {
        assert!(!piece.contains("sk-canary"), "{seen:?}");
    }
}

#[tokio::test]
async fn grep_cannot_probe_a_secret_a_character_at_a_time() {
    let (dir, ctx) = context();
    let key = "sk-4f9a1c2e7b3d5a60";
    let secrets = keel_types::Secrets::from_names(["PROBE_KEY".to_string()], |_| Some(key.into()));
    let ctx = ToolServices { secrets, ..ctx };
    std::fs::write(
        dir.path().join(".env"),
        format!("PROBE_KEY={key}\nOTHER=1\n"),
    )
    .unwrap();
    let grep = |pattern: &str| {
        let args = serde_json::json!({"pattern": pattern, "path": "."}).to_string();
        let ctx = ctx.clone();
        async move { call(&ctx, "grep", &args).await }
    };
    // A right and a wrong guess at the next character answer the same.
    let right = grep("PROBE_KEY=sk-4").await;
    let wrong = grep("PROBE_KEY=sk-5").await;
    assert_eq!(right.content.replace("sk-4", "sk-5"), wrong.content);
    assert_eq!(right.summary.replace("sk-4", "sk-5"), wrong.summary);
    assert!(right.content.contains("no matches"), "{}", right.content);
    // What the redacted text holds is still found, redacted.
    let plain = grep("PROBE_KEY=").await;
    assert!(
        plain.content.contains("[redacted $PROBE_KEY]"),
        "{}",
        plain.content
    );
    assert!(!plain.content.contains(key));
}

/// A confined command cancelled mid-run (Esc, a timeout) still has its git redirects undone.
#[tokio::test]
async fn a_cancelled_confined_command_leaves_no_git_redirect() {
    if !keel_sandbox::meets_minimum(false) {
        eprintln!("the sandbox is not enforced here: nothing to undo");
        return;
    }
    let (dir, ctx) = context();
    let workspace = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(workspace.join(".git")).unwrap();
    let keel_home = tempfile::tempdir().unwrap();
    let sandbox = keel_sandbox::Sandbox::new(
        keel_sandbox::SandboxSettings::default(),
        keel_sandbox::Places {
            workspace: workspace.clone(),
            keel_home: keel_home.path().to_path_buf(),
            ..Default::default()
        },
    );
    let ctx = ToolServices {
        sandbox: Some(CommandSandbox {
            sandbox: std::sync::Arc::new(sandbox),
            mode: keel_sandbox::SandboxMode::WorkspaceWrite,
        }),
        ..ctx
    };
    let redirect = workspace.join(".git/commondir");
    let running = call(
        &ctx,
        "bash",
        r#"{"command": "echo ../elsewhere > .git/commondir && sleep 30"}"#,
    );
    tokio::select! {
        output = running => panic!("the command ended: {}", output.content),
        () = async {
            while !redirect.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        } => {}
    }
    assert!(
        !redirect.exists(),
        "the redirect outlived the cancelled call"
    );
}
