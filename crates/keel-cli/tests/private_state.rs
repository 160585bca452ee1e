//! keel's state is the user's alone whatever the umask: the directories keel makes in
//! `$KEEL_HOME` are 0700 and its files 0600 after a fresh run under umask 022, while a file a
//! command makes in the workspace keeps the user's umask (0644); what an earlier keel left
//! looser is tightened at start — but never through a link (a `config.toml` kept in a
//! dotfiles repository) and never someone else's file. `keel eval --out` is 0700 too.
//! Through the real binary.

use crate::common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn mode(path: &Path) -> u32 {
    path.symlink_metadata()
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .mode()
        & 0o777
}

/// `keel ARGS` as `home` runs it, under umask 022 (set by a shell that then execs keel).
fn under_umask_022(home: &Home, args: &[&str]) -> std::process::Command {
    let keel = home.keel(args);
    let mut shell = std::process::Command::new("sh");
    shell
        .args(["-c", "umask 022; exec \"$0\" \"$@\"", KEEL])
        .args(keel.get_args())
        .current_dir(keel.get_current_dir().unwrap())
        .stdin(std::process::Stdio::null());
    for (name, value) in keel.get_envs() {
        match value {
            Some(value) => shell.env(name, value),
            None => shell.env_remove(name),
        };
    }
    shell
}

fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

#[test]
fn a_fresh_home_is_owner_only_and_a_commands_file_keeps_the_users_umask() {
    let (home, mock) = scripted(
        "chat",
        r#"{"steps": [{"tool": "bash", "args": {"command": "echo hi > made-by-command.txt"}},
                      {"say": "done"}]}"#,
        "",
    );
    // A git workspace, so that the run takes snapshots too.
    git(&home.path(), &["init", "-q"]);
    std::fs::write(home.path().join(".gitignore"), "fresh-home/\n").unwrap();
    git(&home.path(), &["add", "-A"]);
    git(&home.path(), &["commit", "-qm", "seed"]);
    let fresh = home.path().join("fresh-home");
    let output = under_umask_022(&home, &["run", "--yes", "--json", "make it"])
        .env("KEEL_HOME", &fresh)
        .env("DEEPSEEK_BASE_URL", &mock.base_url)
        .output()
        .unwrap();
    let run = Run::from(output);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(mode(&fresh), 0o700, "$KEEL_HOME, made by keel");
    for dir in ["state", "snapshots"] {
        assert_eq!(mode(&fresh.join(dir)), 0o700, "{dir}");
    }
    // The session's temp dirs go with it; their parent, where it stays, is owner-only too.
    if fresh.join("tmp").exists() {
        assert_eq!(mode(&fresh.join("tmp")), 0o700);
    }
    for file in ["state/keel.db", "state/keel.db-wal", "state/keel.db-shm"] {
        let path = fresh.join(file);
        if file == "state/keel.db" || path.exists() {
            assert_eq!(mode(&path), 0o600, "{file}");
        }
    }
    assert_eq!(
        mode(&home.path().join("made-by-command.txt")),
        0o644,
        "a command's file keeps the user's umask"
    );
}

#[test]
fn the_line_modes_history_is_owner_only() {
    let (home, _mock) = scripted("chat", r#"{"steps": [{"say": "PONG-7"}]}"#, "");
    let previous = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    let screen = crate::common::terminal::interactive_until(
        &home,
        &[("ping\n", Some("PONG-7"), 0), ("/quit\n", None, 300)],
    );
    nix::sys::stat::umask(previous);
    let history = home.path().join("history.txt");
    assert!(
        std::fs::read_to_string(&history).unwrap().contains("ping"),
        "{screen}"
    );
    assert_eq!(mode(&history), 0o600);
}

#[test]
fn what_an_earlier_keel_left_readable_is_tightened_but_not_through_a_link_or_anyone_elses() {
    let (home, _mock) = scripted("chat", r#"{"steps": [{"say": "ok"}]}"#, "");
    let keel_home = home.path();
    std::fs::create_dir_all(keel_home.join("state")).unwrap();
    std::fs::create_dir_all(keel_home.join("snapshots")).unwrap();
    std::fs::write(keel_home.join("history.txt"), "#V2\nold\n").unwrap();
    std::fs::write(keel_home.join("state/serve-launch-1.html"), "x").unwrap();
    // The user's config lives in a dotfiles repository, linked in.
    let dotfiles = keel_home.join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    let config = std::fs::read_to_string(keel_home.join("config.toml")).unwrap();
    std::fs::write(dotfiles.join("keel.toml"), config).unwrap();
    std::fs::remove_file(keel_home.join("config.toml")).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("keel.toml"), keel_home.join("config.toml")).unwrap();
    // A trust store that is someone else's (where the tests run as root, which can say so).
    let foreign = keel_home.join("trusted-workspaces.json");
    std::fs::write(&foreign, "{}\n").unwrap();
    let someone_else = std::os::unix::fs::chown(&foreign, Some(12_345), None).is_ok();
    for (path, loose) in [
        (keel_home.join("state"), 0o755),
        (keel_home.join("snapshots"), 0o755),
        (keel_home.join("history.txt"), 0o644),
        (keel_home.join("state/serve-launch-1.html"), 0o644),
        (dotfiles.join("keel.toml"), 0o644),
        (foreign.clone(), 0o644),
    ] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(loose)).unwrap();
    }
    let run = home.run(&["run", "hello"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(mode(&keel_home.join("state")), 0o700);
    assert_eq!(mode(&keel_home.join("snapshots")), 0o700);
    assert_eq!(mode(&keel_home.join("state/keel.db")), 0o600);
    assert_eq!(mode(&keel_home.join("history.txt")), 0o600);
    assert_eq!(mode(&keel_home.join("state/serve-launch-1.html")), 0o600);
    assert_eq!(
        mode(&dotfiles.join("keel.toml")),
        0o644,
        "never through a link"
    );
    if someone_else {
        assert_eq!(mode(&foreign), 0o644, "never someone else's");
        assert_eq!(foreign.metadata().unwrap().uid(), 12_345);
    } else {
        eprintln!("not root: the other owner's file is not checked here");
    }
}

#[test]
fn an_eval_run_directory_is_owner_only() {
    let home = Home::new("");
    let out = home.path().join("eval-run");
    let output = under_umask_022(
        &home,
        &[
            "eval",
            "--out",
            out.to_str().unwrap(),
            "--reps",
            "1",
            "--variants",
            "base",
            "--efforts",
            "low",
        ],
    )
    .output()
    .unwrap();
    let run = Run::from(output);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(mode(&out), 0o700);
}
