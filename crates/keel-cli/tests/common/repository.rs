//! A git repository in a test home, made with the machine's git and none of the user's
//! configuration.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{Home, Run};
use std::path::Path;
use std::process::Command;

/// `git ARGS` in `dir` (no global or system configuration): its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(["-c", "user.email=t@example.org", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// A repository in the home (the workspace) with `tracked.txt` and `kept.txt` committed.
pub fn repository(home: &Home) {
    let dir = home.path();
    git(&dir, &["init", "-q"]);
    std::fs::write(dir.join("tracked.txt"), "tracked\n").unwrap();
    std::fs::write(dir.join("kept.txt"), "old text\n").unwrap();
    git(&dir, &["add", "tracked.txt", "kept.txt"]);
    git(&dir, &["commit", "-qm", "start"]);
}

/// The text of `name` in the home, if it is there.
pub fn read(home: &Home, name: &str) -> Option<String> {
    std::fs::read_to_string(home.path().join(name)).ok()
}

/// The session of a `keel run --json`.
pub fn session_of(run: &Run) -> String {
    run.events()[0]["session_id"].as_str().unwrap().to_string()
}
