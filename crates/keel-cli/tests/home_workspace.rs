//! A workspace that is the home directory: no fixed list of startup files can cover what a
//! command could leave there for the user's own tools to run later, so every top-level dot
//! entry of the home and every `$PATH` directory in it is the user's — read-only to commands
//! where it exists (a link's target too), moved aside after the command where it is new (a
//! `usercustomize.py` Python would run, `~/.ssh/authorized_keys` where `~/.ssh` did not
//! exist), a link put back — while a dotfiles repository's `~/.git` keeps working and the user's
//! own `allow_write` opens what it names. Said at the start. Through the real binary.

use crate::common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn bash(command: &str) -> Value {
    json!({"tool": "bash", "args": {"command": command}})
}

/// The entries of `dir` whose names start with `prefix`.
fn named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(prefix))
        .map(|entry| entry.path())
        .collect()
}

#[test]
fn the_homes_dot_entries_and_path_dirs_are_kept_from_commands() {
    let steps = vec![
        // New dot entries: Python's user site (its usercustomize.py runs at every start of
        // the user's python3), and an authorized key where there was no ~/.ssh.
        bash(
            "mkdir -p .local/lib/python3.11/site-packages && echo 'import os' > \
             .local/lib/python3.11/site-packages/usercustomize.py; mkdir -p .ssh && echo \
             'ssh-ed25519 AAAA attacker' > .ssh/authorized_keys",
        ),
        // Existing ones: read-only, also through a link and in a $PATH directory.
        bash(
            "echo evil >> .cargo/config.toml; echo evil >> .bashrc; echo evil > bin/git; \
             rm -f .profile && echo evil > .profile; true",
        ),
        // A dotfiles repository works; what the user allows is written.
        bash(
            "git -c user.name=t -c user.email=t@t add notes.txt && git -c user.name=t -c \
             user.email=t@t commit -qm note && mkdir -p .cache/pip && echo ok > .cache/pip/x",
        ),
        json!({"tool": "write_file", "args": {"path": ".ssh/authorized_keys", "content": "k"}}),
        json!({"say": "done"}),
    ];
    let (home, _mock) = scripted("chat", &json!({ "steps": steps }).to_string(), "");
    home.append_config("[sandbox]\nallow_write = [\"~/.cache\"]\n");
    let me = home.path().join("me");
    std::fs::create_dir_all(me.join(".cargo")).unwrap();
    std::fs::write(me.join(".cargo/config.toml"), "[build]\n").unwrap();
    std::fs::create_dir_all(me.join("dotfiles")).unwrap();
    std::fs::write(me.join("dotfiles/bashrc"), "alias ll='ls -l'\n").unwrap();
    std::fs::write(me.join("dotfiles/profile"), "PATH=$HOME/bin:$PATH\n").unwrap();
    std::os::unix::fs::symlink("dotfiles/bashrc", me.join(".bashrc")).unwrap();
    std::os::unix::fs::symlink("dotfiles/profile", me.join(".profile")).unwrap();
    std::fs::create_dir_all(me.join("bin")).unwrap();
    std::fs::write(me.join("notes.txt"), "note\n").unwrap();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&me)
        .status()
        .unwrap();
    assert!(git.success());
    let path = format!(
        "{}:{}",
        me.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = Run::from(
        home.keel(&["run", "--yes", "--json", "plant"])
            .current_dir(&me)
            .env("HOME", &me)
            .env("PATH", &path)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(
        run.stderr().contains("is writable in this session")
            && run.stderr().contains("allow_write"),
        "said at the start: {}",
        run.stderr()
    );
    let results: Vec<String> = run
        .events_of("tool/result")
        .iter()
        .map(|result| result["output"].as_str().unwrap_or("").to_string())
        .collect();
    // New dot entries: moved aside, said, kept.
    assert!(!me.join(".local").exists(), "{}", results[0]);
    assert_eq!(
        named(&me, ".local.keel-moved-aside-").len(),
        1,
        "{}",
        results[0]
    );
    assert!(!me.join(".ssh").exists(), "{}", results[0]);
    assert_eq!(
        named(&me, ".ssh.keel-moved-aside-").len(),
        1,
        "{}",
        results[0]
    );
    assert!(
        results[0].contains(".ssh.keel-moved-aside-"),
        "{}",
        results[0]
    );
    // Existing ones: unchanged, through a link too; a link removed is made again.
    assert_eq!(
        std::fs::read_to_string(me.join(".cargo/config.toml")).unwrap(),
        "[build]\n"
    );
    assert_eq!(
        std::fs::read_to_string(me.join("dotfiles/bashrc")).unwrap(),
        "alias ll='ls -l'\n"
    );
    assert!(
        !me.join("bin/git").exists(),
        "a $PATH directory: {}",
        results[1]
    );
    assert_eq!(
        std::fs::read_link(me.join(".profile")).unwrap(),
        Path::new("dotfiles/profile"),
        "{}",
        results[1]
    );
    assert_eq!(
        std::fs::read_to_string(me.join("dotfiles/profile")).unwrap(),
        "PATH=$HOME/bin:$PATH\n"
    );
    // The dotfiles repository works, and what the user allowed was written.
    assert!(!results[2].contains("fatal"), "{}", results[2]);
    assert_eq!(
        std::fs::read_to_string(me.join(".cache/pip/x")).unwrap(),
        "ok\n"
    );
    // The file tools refuse a dot entry by name.
    assert!(
        results[3].contains("keel sandbox: writing"),
        "{}",
        results[3]
    );
    assert!(!me.join(".ssh/authorized_keys").exists());
}

/// A run in the home: keel as the user starts it there.
fn run_in_home(home: &Home, me: &Path, args: &[&str]) -> Run {
    Run::from(
        home.keel(args)
            .current_dir(me)
            .env("HOME", me)
            .output()
            .unwrap(),
    )
}

/// What the user makes in the home between two commands is theirs, and kept from the next.
#[test]
fn a_dot_entry_the_user_makes_between_commands_is_kept_from_the_next() {
    let steps = json!({"chunk_delay_ms": 300, "steps": [
        bash("touch first-done"),
        bash("echo evil >> .later/config.toml; echo evil > .later/new.toml; true"),
        {"say": "done"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let me = home.path().join("me");
    std::fs::create_dir_all(&me).unwrap();
    let making = {
        let me = me.clone();
        std::thread::spawn(move || {
            wait_until(
                "the first command ran",
                std::time::Duration::from_secs(20),
                || me.join("first-done").exists(),
            );
            // After the first command's end was dealt with, while the model answers slowly.
            std::thread::sleep(std::time::Duration::from_millis(400));
            std::fs::create_dir_all(me.join(".later")).unwrap();
            std::fs::write(me.join(".later/config.toml"), "mine\n").unwrap();
        })
    };
    let run = run_in_home(&home, &me, &["run", "--yes", "--json", "go"]);
    making.join().unwrap();
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        std::fs::read_to_string(me.join(".later/config.toml")).unwrap(),
        "mine\n",
        "{:?}",
        run.events_of("tool/result")
    );
    assert!(!me.join(".later/new.toml").exists());
}

/// A root asked for inside a dot entry stays writable; the rest of the entry does not.
#[test]
fn a_root_asked_for_inside_a_dot_entry_stays_writable() {
    let steps = vec![
        bash(
            "echo ok > .config/proj/x && echo ok > .cargo/registry/y; echo bad > .config/other; \
             echo bad >> .cargo/config.toml; true",
        ),
        json!({"tool": "write_file", "args": {"path": ".config/proj/z", "content": "ok"}}),
        json!({"say": "done"}),
    ];
    let (home, _mock) = scripted("chat", &json!({ "steps": steps }).to_string(), "");
    home.append_config("[sandbox]\nallow_write = [\"~/.cargo/registry\"]\n");
    let me = home.path().join("me");
    std::fs::create_dir_all(me.join(".config/proj")).unwrap();
    std::fs::create_dir_all(me.join(".cargo/registry")).unwrap();
    std::fs::write(me.join(".cargo/config.toml"), "[build]\n").unwrap();
    let run = run_in_home(
        &home,
        &me,
        &["run", "--yes", "--json", "--add-dir", ".config/proj", "go"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let results = run.events_of("tool/result");
    assert_eq!(
        std::fs::read_to_string(me.join(".config/proj/x")).unwrap_or_default(),
        "ok\n",
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(me.join(".cargo/registry/y")).unwrap_or_default(),
        "ok\n",
        "the user's own allow_write inside a dot entry: {results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(me.join(".config/proj/z")).unwrap_or_default(),
        "ok",
        "the file tools too: {results:?}"
    );
    assert!(!me.join(".config/other").exists());
    assert_eq!(
        std::fs::read_to_string(me.join(".cargo/config.toml")).unwrap(),
        "[build]\n"
    );
}

/// An MCP server confined like a command (`sandbox = "workspace-write"`) writes what a command
/// may: what it leaves among the home's dot entries is moved aside after the call.
#[test]
#[cfg_attr(
    not(keel_e2e_mcp),
    ignore = "needs node and `npm ci` in crates/keel-mcp/e2e (.ci/run does it)"
)]
fn an_mcp_server_that_plants_a_dot_entry_has_it_moved_aside_after_the_call() {
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../keel-mcp/e2e/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        server.exists(),
        "this test needs `npm ci` in crates/keel-mcp/e2e"
    );
    let home = Home::new("");
    let me = home.path().join("me");
    std::fs::create_dir_all(&me).unwrap();
    let steps = json!({"steps": [
        {"tool": "mcp__fs__create_directory", "args": {"path": me.join(".ssh")}},
        {"tool": "mcp__fs__write_file", "args": {"path": me.join(".ssh/authorized_keys"),
            "content": "ssh-ed25519 AAAA attacker"}},
        {"say": "done"},
    ]});
    let (_dir, _mock) = repoint(&home, "chat", &steps.to_string(), "");
    home.append_config(&format!(
        "[mcp_servers.fs]\ncommand = \"node\"\nargs = [\"{}\", \"{}\"]\nsandbox = \
         \"workspace-write\"\n",
        server.display(),
        me.display()
    ));
    let run = run_in_home(&home, &me, &["run", "--yes", "--json", "plant"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let results = run.events_of("tool/result");
    assert!(!me.join(".ssh/authorized_keys").exists(), "{results:?}");
    assert!(!me.join(".ssh").exists(), "{results:?}");
    assert_eq!(named(&me, ".ssh.keel-moved-aside-").len(), 1, "{results:?}");
    assert!(
        results[0]["output"]
            .as_str()
            .unwrap_or("")
            .contains("moved it to"),
        "{results:?}"
    );
}
