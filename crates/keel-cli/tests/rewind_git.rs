//! Rewind in a git repository: keel's snapshots of the workspace at each turn's start and end
//! also undo what commands changed; someone else's later edit is a conflict; keel's git runs
//! no code the repository (or the user's git configuration) names, and leaves the repository's
//! own index, refs and config as they were.

use crate::common::repository::{git, read, repository, session_of};
use crate::common::*;
use serde_json::json;
use std::path::Path;
use std::process::Command;

/// A turn that writes a file, edits another and runs a command that makes a third and
/// changes a tracked one.
fn changing_turn() -> String {
    json!({"steps": [
        {"tool": "write_file", "args": {"path": "new.txt", "content": "hello\n"}},
        {"tool": "edit_file", "args": {"path": "kept.txt", "old_string": "old", "new_string": "new"}},
        {"tool": "bash", "args": {"command": "echo made > made.txt && echo more >> tracked.txt"}},
        {"say": "Changed four files."},
    ]})
    .to_string()
}

#[test]
fn undo_restores_what_the_file_tools_and_a_command_changed() {
    let (home, _mock) = scripted("chat", &changing_turn(), "");
    repository(&home);
    let index_before = std::fs::read(home.path().join(".git/index")).unwrap();
    let head_before = git(&home.path(), &["rev-parse", "HEAD"]);
    let run = home.run(&["run", "--yes", "--json", "change things"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(read(&home, "made.txt").as_deref(), Some("made\n"));
    let session = session_of(&run);

    let rewound = home.run(&["session", "rewind", &session, "--to", "1"]);
    assert_eq!(rewound.code(), 0, "{}", rewound.stderr());
    assert_eq!(read(&home, "new.txt"), None);
    assert_eq!(read(&home, "kept.txt").as_deref(), Some("old text\n"));
    assert_eq!(
        read(&home, "made.txt"),
        None,
        "the command's new file is gone"
    );
    assert_eq!(read(&home, "tracked.txt").as_deref(), Some("tracked\n"));
    let said = rewound.stderr();
    assert!(
        !said.contains("`echo made"),
        "nothing left unrestored: {said}"
    );
    assert!(said.contains("made.txt"), "named as restored: {said}");
    // keel's home is the workspace here: its own files are never part of a snapshot.
    assert!(
        !said.contains("/state/") && !said.contains("config.toml"),
        "{said}"
    );
    let shown = home.run(&["session", "show", &session, "--json"]);
    assert_eq!(shown.code(), 0, "the store is intact: {}", shown.stderr());
    // The repository's own state is as it was.
    assert_eq!(
        std::fs::read(home.path().join(".git/index")).unwrap(),
        index_before
    );
    assert_eq!(git(&home.path(), &["rev-parse", "HEAD"]), head_before);
    assert!(
        !home.path().join(".git/refs/keel").exists(),
        "keel's refs are in its own store"
    );
}

#[test]
fn a_file_a_command_made_and_the_user_changed_after_is_a_conflict() {
    let (home, _mock) = scripted("chat", &changing_turn(), "");
    repository(&home);
    let run = home.run(&["run", "--yes", "--json", "change things"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = session_of(&run);
    std::fs::write(home.path().join("made.txt"), "mine now\n").unwrap();

    let rewound = home.run(&["session", "rewind", &session, "--to", "1", "--code"]);
    assert_eq!(rewound.code(), 1, "conflicts exit 1: {}", rewound.stderr());
    assert!(
        rewound.stderr().contains("made.txt")
            && rewound.stderr().contains("after keel's last command"),
        "{}",
        rewound.stderr()
    );
    assert_eq!(read(&home, "made.txt").as_deref(), Some("mine now\n"));
    // The rest came back all the same.
    assert_eq!(read(&home, "tracked.txt").as_deref(), Some("tracked\n"));

    let forced = home.run(&[
        "session", "rewind", &session, "--to", "1", "--code", "--force",
    ]);
    assert_eq!(forced.code(), 0, "{}", forced.stderr());
    assert_eq!(read(&home, "made.txt"), None);
}

#[test]
fn a_file_a_command_and_a_file_tool_both_changed_comes_back_from_before_the_first() {
    // The command first, then the file tool; then the file tool first, then the command.
    let turn = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo by the command > kept.txt"}},
        {"tool": "edit_file", "args": {"path": "kept.txt", "old_string": "command", "new_string": "tool"}},
        {"tool": "edit_file", "args": {"path": "tracked.txt", "old_string": "tracked", "new_string": "edited"}},
        {"tool": "bash", "args": {"command": "echo appended >> tracked.txt"}},
        {"say": "Changed two files twice."},
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &turn, "");
    repository(&home);
    let run = home.run(&["run", "--yes", "--json", "change things"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(read(&home, "kept.txt").as_deref(), Some("by the tool\n"));
    assert_eq!(
        read(&home, "tracked.txt").as_deref(),
        Some("edited\nappended\n")
    );
    let session = session_of(&run);

    let rewound = home.run(&["session", "rewind", &session, "--to", "1", "--code"]);
    assert_eq!(rewound.code(), 0, "no conflict: {}", rewound.stderr());
    assert_eq!(
        read(&home, "kept.txt").as_deref(),
        Some("old text\n"),
        "as before the command, not as the file tool found it"
    );
    assert_eq!(
        read(&home, "tracked.txt").as_deref(),
        Some("tracked\n"),
        "the command after the file tool is keel's own change, not a conflict"
    );
}

#[test]
fn a_users_edit_between_a_command_and_a_file_tool_is_still_a_conflict() {
    let script = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo by the command > kept.txt"}},
        {"say": "Done."},
        {"tool": "edit_file", "args": {"path": "kept.txt", "old_string": "mine", "new_string": "tool"}},
        {"say": "Edited."},
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &script, "");
    repository(&home);
    let first = home.run(&["run", "--yes", "--json", "run a command"]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let session = session_of(&first);
    std::fs::write(home.path().join("kept.txt"), "mine\n").unwrap();
    let second = home.run(&["run", "--yes", "--json", "--session", &session, "edit it"]);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    assert_eq!(read(&home, "kept.txt").as_deref(), Some("tool\n"));

    let rewound = home.run(&["session", "rewind", &session, "--to", "1", "--code"]);
    assert_eq!(rewound.code(), 1, "a conflict: {}", rewound.stderr());
    assert!(
        rewound.stderr().contains("kept.txt") && rewound.stderr().contains("changed between"),
        "{}",
        rewound.stderr()
    );
    assert_eq!(
        read(&home, "kept.txt").as_deref(),
        Some("tool\n"),
        "left alone"
    );
}

#[test]
fn a_snapshot_keel_cannot_take_is_said_at_once_and_by_the_rewind() {
    let mut steps: serde_json::Value = serde_json::from_str(&changing_turn()).unwrap();
    let more = json!([
        {"tool": "bash", "args": {"command": "echo again >> made.txt"}},
        {"say": "Again."},
    ]);
    steps["steps"]
        .as_array_mut()
        .unwrap()
        .extend(more.as_array().unwrap().iter().cloned());
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    repository(&home);
    // keel's snapshot store cannot be made: a file stands where its directory would be.
    std::fs::write(home.path().join("snapshots"), "in the way\n").unwrap();
    let run = home.run(&["run", "--yes", "--json", "change things"]);
    assert_eq!(run.code(), 0, "the command still runs: {}", run.stderr());
    let events = run.events();
    let bash_call = events
        .iter()
        .find(|event| event["type"] == "tool/call" && event["name"] == "bash")
        .map(|event| event["call_id"].clone())
        .unwrap();
    let failed: Vec<_> = events
        .iter()
        .filter(|event| event["type"] == "snapshot/failed")
        .collect();
    let sides: Vec<_> = failed.iter().map(|event| event["side"].clone()).collect();
    assert_eq!(sides, [json!("before"), json!("after")], "{failed:?}");
    for event in &failed {
        assert_eq!(event["call_ids"], json!([bash_call.clone()]));
        assert_eq!(event["turn"], 1);
        assert!(
            event["reason"].as_str().unwrap().contains("snapshots"),
            "{event}"
        );
    }
    // Line mode says it on the spot.
    let plain = home.run(&["run", "--yes", "--session", &session_of(&run), "again"]);
    assert_eq!(plain.code(), 0, "{}", plain.stderr());
    assert!(
        plain
            .stderr()
            .contains("! no snapshot of the workspace before this command"),
        "{}",
        plain.stderr()
    );
    let rewound = home.run(&[
        "session",
        "rewind",
        &session_of(&run),
        "--to",
        "1",
        "--code",
    ]);
    assert!(
        rewound.stderr().contains("not restored: bash: `echo made"),
        "{}",
        rewound.stderr()
    );
}

#[test]
fn keels_git_runs_nothing_the_repository_or_the_users_git_config_names() {
    let (home, _mock) = scripted("chat", &changing_turn(), "");
    // Unconfined: only keel's own git configuration stands between the repository and a run.
    home.append_config("[sandbox]\nmode = \"off\"\n");
    repository(&home);
    let dir = home.path();
    let marker = dir.join("RAN");
    let script = dir.join("evil.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$0 $*\" >> {}\ncat\n", marker.display()),
    )
    .unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&script)
        .status()
        .unwrap();
    let evil = format!(
        "[core]\n\tfsmonitor = {s}\n\thooksPath = {d}\n[filter \"evil\"]\n\tclean = {s}\n\tsmudge = {s}\n\trequired = true\n",
        s = script.display(),
        d = dir.display()
    );
    let config = std::fs::read_to_string(dir.join(".git/config")).unwrap();
    std::fs::write(dir.join(".git/config"), format!("{config}{evil}")).unwrap();
    std::fs::write(dir.join(".gitconfig"), &evil).unwrap();
    std::fs::write(dir.join(".gitattributes"), "* filter=evil\n").unwrap();

    let run = home
        .keel(&["run", "--yes", "--json", "change things"])
        .env("HOME", &dir)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let run = Run::from(run);
    let session = session_of(&run);
    let rewound = home
        .keel(&["session", "rewind", &session, "--to", "1"])
        .env("HOME", &dir)
        .output()
        .unwrap();
    assert!(rewound.status.success(), "{rewound:?}");
    assert_eq!(read(&home, "made.txt"), None, "the snapshot still worked");
    assert!(
        !marker.exists(),
        "a repository's fsmonitor, filter or hook ran: {:?}",
        std::fs::read_to_string(&marker)
    );
}

#[test]
fn bytes_modes_and_odd_names_come_back_as_they_were() {
    use std::os::unix::fs::PermissionsExt;
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command":
            "printf 'b\\n' > crlf.txt && rm run.sh && printf x > \"$(printf 'caf\\351.txt')\""}},
        {"say": "Done."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let dir = home.path();
    git(&dir, &["init", "-q"]);
    // Converted by git on the way in if keel let it: CRLF in the file, LF by the attributes.
    std::fs::write(dir.join(".gitattributes"), "* text=auto eol=lf\n").unwrap();
    std::fs::write(dir.join("crlf.txt"), "a\r\nb\r\n").unwrap();
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    git(&dir, &["add", "run.sh", ".gitattributes"]);
    git(&dir, &["commit", "-qm", "start"]);
    let run = home.run(&["run", "--yes", "--json", "change them"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!dir.join("run.sh").exists());

    let rewound = home.run(&["session", "rewind", &session_of(&run), "--to", "1"]);
    assert_eq!(rewound.code(), 0, "{}", rewound.stderr());
    assert_eq!(std::fs::read(dir.join("crlf.txt")).unwrap(), b"a\r\nb\r\n");
    let mode = std::fs::metadata(dir.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "executable again: {mode:o}");
    // A name that is not UTF-8 is named, never guessed at; the rest still came back.
    assert!(
        rewound.stderr().contains("not UTF-8"),
        "{}",
        rewound.stderr()
    );
}

#[test]
fn a_workspace_below_the_root_keeps_the_repositorys_ignores_and_refuses_an_undone_turn() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo made > made.txt && echo noise > build.log"}},
        {"say": "One."},
        {"say": "Two."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let root = home.path().join("project");
    let workspace = root.join("sub");
    std::fs::create_dir_all(&workspace).unwrap();
    git(&root, &["init", "-q"]);
    std::fs::write(root.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(workspace.join("kept.txt"), "kept\n").unwrap();
    git(&root, &["add", "."]);
    git(&root, &["commit", "-qm", "start"]);
    let cwd = workspace.to_str().unwrap();
    let run = home.run(&["run", "--cwd", cwd, "--yes", "--json", "make"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = session_of(&run);
    let second = home.run(&[
        "run",
        "--cwd",
        cwd,
        "--yes",
        "--json",
        "--session",
        &session,
        "two",
    ]);
    assert_eq!(second.code(), 0, "{}", second.stderr());

    let rewound = home.run(&["session", "rewind", &session, "--to", "1"]);
    assert_eq!(rewound.code(), 0, "{}", rewound.stderr());
    assert!(!workspace.join("made.txt").exists(), "{}", rewound.stderr());
    // Ignored by the repository root's .gitignore: never in a snapshot, named as such.
    assert!(workspace.join("build.log").exists());
    assert!(
        rewound.stderr().contains("git ignores"),
        "{}",
        rewound.stderr()
    );

    let again = home.run(&["session", "rewind", &session, "--to", "2"]);
    assert_eq!(again.code(), 2, "{}", again.stderr());
    assert!(
        again.stderr().contains("not in the conversation any more"),
        "{}",
        again.stderr()
    );
}

#[test]
fn the_first_prompt_says_how_the_repository_stands() {
    let steps = json!({"steps": [{"say": "one"}, {"say": "two"}]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    repository(&home);
    // Another size than what was committed: git trusts a same-size file whose mtime is in the
    // commit's second (its "racy" check), which a loaded machine can make this edit miss.
    std::fs::write(home.path().join("tracked.txt"), "changed it\n").unwrap();
    std::fs::write(home.path().join("new.txt"), "new\n").unwrap();
    let run = home.run(&["run", "--yes", "--json", "hello"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let sent = mock.requests()[0].to_string();
    assert!(
        sent.contains(
            "git status: 2 paths differ from the checked-out commit (1 modified, 1 new, 0 \
             deleted): new.txt, tracked.txt"
        ),
        "{sent}"
    );
    // Once, at the start: the next prompt's request begins with the same bytes.
    let second = home.run(&[
        "run",
        "--yes",
        "--json",
        "--session",
        &session_of(&run),
        "again",
    ]);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    let requests = mock.requests();
    let first = requests[0]["body"].as_str().unwrap();
    let later = requests[1]["body"].as_str().unwrap();
    let head = &first[..first.rfind("hello").unwrap()];
    assert!(later.starts_with(head), "prefix-stable");
}

#[test]
fn a_large_untracked_file_is_left_out_of_the_snapshots_and_said() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command":
            "head -c 17000000 /dev/urandom > big.bin && echo small > small.txt"}},
        {"say": "Made them."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    repository(&home);
    let run = home.run(&["run", "--yes", "--json", "make files"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rewound = home.run(&["session", "rewind", &session_of(&run), "--to", "1"]);
    assert_eq!(rewound.code(), 0, "{}", rewound.stderr());
    assert_eq!(read(&home, "small.txt"), None);
    assert!(home.path().join("big.bin").exists(), "not in any snapshot");
    assert!(
        rewound.stderr().contains("over 16 MiB"),
        "{}",
        rewound.stderr()
    );
    let stored: u64 = walk(&home.path().join("snapshots"));
    assert!(stored < 4_000_000, "keel's store holds {stored} bytes");
}

/// The bytes of the files below `dir`.
fn walk(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| match entry.file_type() {
                    Ok(kind) if kind.is_dir() => walk(&entry.path()),
                    _ => entry.metadata().map_or(0, |meta| meta.len()),
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Make every file below `dir` an hour old (what git's grace period looks at).
fn age(dir: &Path) {
    let status = Command::new("find")
        .arg(dir)
        .args([
            "-type",
            "f",
            "-exec",
            "touch",
            "-d",
            "1 hour ago",
            "{}",
            "+",
        ])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn the_snapshot_store_is_kept_within_checkpoint_max_bytes_and_a_rewind_names_what_went() {
    // A second after a file is made the snapshot's index is newer than it, so git trusts its
    // stat and does not write (and so freshen) the file's object again.
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "head -c 1000000 /dev/urandom > a.bin && sleep 1.1"}},
        {"say": "one"},
        {"tool": "bash", "args": {"command": "rm a.bin && head -c 1000000 /dev/urandom > b.bin && sleep 1.1"}},
        {"say": "two"},
        {"tool": "bash", "args": {"command": "rm b.bin"}},
        {"say": "three"},
        {"tool": "bash", "args": {"command": "echo four > d.txt"}},
        {"say": "four"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("checkpoint_max_bytes = 1500000\n");
    repository(&home);
    let said = |run: &Run| -> Vec<serde_json::Value> {
        assert_eq!(run.code(), 0, "{}", run.stderr());
        run.events()
            .into_iter()
            .filter(|event| event["type"].as_str().unwrap().starts_with("snapshot/"))
            .collect()
    };
    // Only objects and brackets older than the grace period go: make them old.
    let age_objects = || {
        for store in std::fs::read_dir(home.path().join("snapshots")).unwrap() {
            // Not the index: an aged index would make git hash every file again.
            let store = store.unwrap().path();
            age(&store.join("objects"));
            age(&store.join("refs"));
        }
    };
    let first = home.run(&["run", "--yes", "--json", "one"]);
    assert_eq!(
        said(&first),
        Vec::<serde_json::Value>::new(),
        "within budget"
    );
    let session = session_of(&first);
    age_objects();
    let turn = |prompt: &str| home.run(&["run", "--yes", "--json", "--session", &session, prompt]);

    // Over budget: turn 1's bracket goes; turn 2's, the newest, stays, and with it a.bin.
    let second = said(&turn("two"));
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0]["type"], "snapshot/pruned");
    assert_eq!(second[0]["brackets"], 1);
    assert!(
        second[0]["bytes_after"].as_u64().unwrap() > 1_500_000,
        "{second:?}"
    );
    age_objects();

    // Now turn 2's goes too, and a.bin's object with it.
    let third = said(&turn("three"));
    assert_eq!(third.len(), 1, "{third:?}");
    assert_eq!(third[0]["brackets"], 1);
    let stored = walk(&home.path().join("snapshots"));
    assert!(stored < 1_500_000, "keel's store holds {stored} bytes");

    // The store still works: the next command is bracketed and undone.
    assert_eq!(said(&turn("four")), Vec::<serde_json::Value>::new());
    let undone = home.run(&["session", "rewind", &session, "--to", "4", "--code"]);
    assert_eq!(undone.code(), 0, "{}", undone.stderr());
    assert_eq!(read(&home, "d.txt"), None);
    assert!(!undone.stderr().contains("pruned"), "{}", undone.stderr());

    let past = home.run(&["session", "rewind", &session, "--to", "1", "--code"]);
    assert!(
        past.stderr()
            .contains("keel pruned the snapshots of the commands")
            && past.stderr().contains("`rm a.bin"),
        "{}",
        past.stderr()
    );
}

#[test]
fn what_the_users_global_git_ignore_leaves_out_stays_out_of_the_snapshots() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo noise > build.log && echo kept > notes.txt"}},
        {"say": "Made them."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    repository(&home);
    let xdg = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(xdg.path().join("git")).unwrap();
    std::fs::write(xdg.path().join("git/ignore"), "*.log\n").unwrap();
    let with_ignore = |args: &[&str]| {
        Run::from(
            home.keel(args)
                .env("XDG_CONFIG_HOME", xdg.path())
                .output()
                .unwrap(),
        )
    };
    let run = with_ignore(&["run", "--yes", "--json", "make files"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rewound = with_ignore(&["session", "rewind", &session_of(&run), "--to", "1"]);
    assert_eq!(rewound.code(), 0, "{}", rewound.stderr());
    assert_eq!(read(&home, "notes.txt"), None, "restored");
    assert_eq!(
        read(&home, "build.log").as_deref(),
        Some("noise\n"),
        "never in a snapshot, so never touched"
    );
    assert!(
        !rewound.stderr().contains("build.log"),
        "{}",
        rewound.stderr()
    );
}

/// Every object in keel's snapshot store of `home` (the workspace), contents included.
fn stored_objects(home: &Home) -> String {
    let mut all = String::new();
    for store in std::fs::read_dir(home.path().join("snapshots"))
        .unwrap()
        .flatten()
    {
        if !store.file_name().to_string_lossy().ends_with(".git") {
            continue;
        }
        let output = Command::new("git")
            .args(["--git-dir", store.path().to_str().unwrap()])
            .args(["cat-file", "--batch-all-objects", "--batch"])
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        all.push_str(&String::from_utf8_lossy(&output.stdout));
    }
    all
}

/// The key every test home gives keel (`Home::keel`).
const KEY: &str = "test-key-1";

#[test]
fn a_file_holding_the_key_never_enters_the_snapshots_and_is_named_at_rewind() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command":
            "echo more >> tracked.txt && echo '# edited' >> deploy.sh && cat deploy.sh >> kept.txt"}},
        {"say": "Changed them."},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    repository(&home);
    // Untracked, holding the provider's key (never in a command's arguments).
    std::fs::write(
        home.path().join("deploy.sh"),
        format!("export DEEPSEEK_API_KEY={KEY}\n"),
    )
    .unwrap();
    let run = home.run(&["run", "--yes", "--json", "change them"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let stored = stored_objects(&home);
    assert!(!stored.is_empty(), "snapshots were taken");
    assert!(!stored.contains(KEY), "the key is in keel's snapshot store");
    let rewound = home.run(&["session", "rewind", &session_of(&run), "--to", "1"]);
    assert_eq!(rewound.code(), 0, "{}", rewound.stderr());
    assert_eq!(read(&home, "tracked.txt").as_deref(), Some("tracked\n"));
    let said = rewound.stderr();
    for path in ["deploy.sh", "kept.txt"] {
        assert!(
            said.lines()
                .any(|line| line.contains(path) && line.contains("holds one of keel's secrets")),
            "{path} named as not restorable: {said}"
        );
    }
    assert!(
        read(&home, "deploy.sh").unwrap().contains("# edited"),
        "a file keel has no copy of is left as it is"
    );
    assert!(!stored_objects(&home).contains(KEY));
}

#[test]
fn a_store_an_earlier_keel_made_is_replaced_with_everything_in_it() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo more >> tracked.txt"}},
        {"say": "once"},
        {"tool": "bash", "args": {"command": "echo again >> tracked.txt"}},
        {"say": "twice"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    repository(&home);
    assert_eq!(home.run(&["run", "--yes", "change it"]).code(), 0);
    // As an earlier keel left it: no format mark, and a copy of a file with the key.
    let store = std::fs::read_dir(home.path().join("snapshots"))
        .unwrap()
        .flatten()
        .find(|entry| entry.file_name().to_string_lossy().ends_with(".git"))
        .unwrap()
        .path();
    std::fs::remove_file(store.join("keel-format")).unwrap();
    let mut planting = Command::new("git")
        .args([
            "--git-dir",
            store.to_str().unwrap(),
            "hash-object",
            "-w",
            "--stdin",
        ])
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        planting.stdin.as_mut().unwrap(),
        format!("export DEEPSEEK_API_KEY={KEY}\n").as_bytes(),
    )
    .unwrap();
    drop(planting.stdin.take());
    assert!(planting.wait().unwrap().success());
    assert!(stored_objects(&home).contains(KEY));
    assert_eq!(home.run(&["run", "--yes", "change it again"]).code(), 0);
    assert!(
        !stored_objects(&home).contains(KEY),
        "the old store is gone, with the key"
    );
    assert!(store.join("keel-format").is_file(), "a store of this keel");
}
