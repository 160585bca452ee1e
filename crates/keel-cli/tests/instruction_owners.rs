//! Only the workspace's owner (or root) instructs its sessions: another local user's
//! repository gives no `AGENTS.md` — not even when one of the user's own repositories is
//! above it (the walk up stops at the other user's directory) — and another user's
//! `AGENTS.md` or `.keel/commands/` file in the user's own workspace is not read. Through the
//! real binary. Making another user's file needs root (`chown`): elsewhere these tests say so
//! and check nothing.

use crate::common::*;
use std::path::Path;

const SOMEONE_ELSE: u32 = 12_345;

/// Give `paths` to another user; `false` where this process may not (not root).
fn give_away(paths: &[&Path]) -> bool {
    paths
        .iter()
        .all(|path| std::os::unix::fs::chown(path, Some(SOMEONE_ELSE), None).is_ok())
}

/// What the model was told first (the first request's body).
fn first_request(mock: &MockProcess) -> String {
    mock.requests()[0]["body"].as_str().unwrap().to_string()
}

#[test]
fn another_users_repository_instructs_nothing_even_under_the_users_own() {
    let (home, mock) = scripted("chat", r#"{"steps": [{"say": "hi"}]}"#, "");
    let outer = home.path().join("outer");
    let theirs = outer.join("theirs");
    let workspace = theirs.join("sub");
    std::fs::create_dir_all(outer.join(".git")).unwrap();
    std::fs::create_dir_all(theirs.join(".git")).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(outer.join("AGENTS.md"), "OUTER-RULES-1\n").unwrap();
    std::fs::write(theirs.join("AGENTS.md"), "THEIRS-RULES-2\n").unwrap();
    std::fs::write(workspace.join("AGENTS.md"), "MINE-RULES-3\n").unwrap();
    if !give_away(&[&theirs, &theirs.join(".git"), &theirs.join("AGENTS.md")]) {
        eprintln!("not root: another user's repository cannot be made here; nothing checked");
        return;
    }
    let run = Run::from(
        home.keel(&["run", "hello"])
            .current_dir(&workspace)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let told = first_request(&mock);
    assert!(told.contains("MINE-RULES-3"), "the workspace's own: {told}");
    assert!(!told.contains("THEIRS-RULES-2"), "another user's: {told}");
    assert!(
        !told.contains("OUTER-RULES-1"),
        "above another user's directory: {told}"
    );
}

#[test]
fn another_users_files_in_the_users_own_workspace_are_not_read() {
    let (home, mock) = scripted("chat", r#"{"steps": [{"say": "hi"}, {"say": "hi"}]}"#, "");
    let workspace = home.path().join("project");
    std::fs::create_dir_all(workspace.join(".git")).unwrap();
    std::fs::create_dir_all(workspace.join("lib")).unwrap();
    std::fs::write(workspace.join("AGENTS.md"), "MINE-RULES-4\n").unwrap();
    std::fs::write(workspace.join("lib/AGENTS.md"), "PLANTED-RULES-5\n").unwrap();
    std::fs::create_dir_all(workspace.join(".keel/commands")).unwrap();
    std::fs::write(
        workspace.join(".keel/commands/deploy.md"),
        "---\ndescription: planted\n---\nPLANTED-COMMAND-6\n",
    )
    .unwrap();
    if !give_away(&[
        &workspace.join("lib/AGENTS.md"),
        &workspace.join(".keel/commands/deploy.md"),
    ]) {
        eprintln!("not root: another user's file cannot be made here; nothing checked");
        return;
    }
    let run = Run::from(
        home.keel(&["run", "hello"])
            .current_dir(workspace.join("lib"))
            .output()
            .unwrap(),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let told = first_request(&mock);
    assert!(told.contains("MINE-RULES-4"), "{told}");
    assert!(!told.contains("PLANTED-RULES-5"), "another user's: {told}");
    let run = Run::from(
        home.keel(&["run", "hello"])
            .current_dir(&workspace)
            .output()
            .unwrap(),
    );
    assert!(
        run.stderr()
            .contains("deploy.md ignored: it belongs to another user"),
        "{}",
        run.stderr()
    );
}
