//! The policy's tests (kept apart: `policy.rs` is the policy).
use super::*;

fn places(root: &Path) -> Places {
    let workspace = root.join("home/me/project");
    let keel_home = root.join("home/me/.keel");
    std::fs::create_dir_all(workspace.join(".git/hooks")).unwrap();
    std::fs::write(workspace.join(".git/config"), "").unwrap();
    std::fs::write(workspace.join("keel.toml"), "").unwrap();
    std::fs::create_dir_all(keel_home.join("state")).unwrap();
    std::fs::create_dir_all(keel_home.join("tmp/s1")).unwrap();
    std::fs::create_dir_all(keel_home.join("tmp/s2")).unwrap();
    std::fs::write(keel_home.join("config.toml"), "").unwrap();
    std::fs::write(keel_home.join("serve-launch-1.html"), "").unwrap();
    std::fs::create_dir_all(root.join("home/me/.ssh")).unwrap();
    std::fs::create_dir_all(root.join("home/me/other")).unwrap();
    Places {
        workspace,
        extra_dirs: Vec::new(),
        keel_home: keel_home.clone(),
        home: Some(root.join("home/me")),
        temp_dir: Some(keel_home.join("tmp/s1")),
        referenced_files: Vec::new(),
        socket_dirs: Vec::new(),
    }
}

#[test]
fn the_defaults_hide_credentials_and_keels_files_and_protect_git_and_keel_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let places = places(&root);
    let policy = SandboxPolicy::resolve(
        &SandboxSettings::default(),
        &places,
        SandboxMode::WorkspaceWrite,
    );
    let me = root.join("home/me");
    assert!(policy.forbid_read.contains(&me.join(".ssh")));
    assert!(policy.forbid_read.contains(&me.join(".keel/state")));
    assert!(policy.forbid_read.contains(&me.join(".keel/config.toml")));
    assert!(
        policy.forbid_read.contains(&me.join(".keel/tmp")),
        "the temp dirs, whole"
    );
    assert!(
        policy.forbids_reading(&me.join(".keel/tmp/s2/x")).is_some(),
        "another session's"
    );
    assert!(
        policy.forbids_reading(&me.join(".keel/tmp/s1/x")).is_none(),
        "this session's"
    );
    assert!(
        policy
            .forbid_read
            .contains(&me.join(".keel/serve-launch-1.html"))
    );
    assert!(
        !policy.forbid_read.iter().any(|p| p.ends_with(".aws")),
        "absent"
    );
    assert_eq!(policy.writable, vec![me.join("project")]);
    let protected: Vec<_> = policy.read_only.iter().map(|p| p.path.clone()).collect();
    let project = me.join("project");
    assert_eq!(
        protected,
        vec![
            project.join(".git/config"),
            project.join(".git/hooks"),
            project.join("keel.toml")
        ]
    );
    assert_eq!(policy.read_only[1].ancestors, vec![project.join(".git")]);
    assert!(policy.read_only[2].ancestors.is_empty());
    assert_eq!(
        policy.forbids_changing(&project.join(".git/hooks/pre-commit")),
        Some(project.join(".git/hooks"))
    );
    assert_eq!(
        policy.forbids_changing(&project.join(".git/commondir")),
        Some(project.join(".git/commondir")),
        "a redirect that does not exist yet"
    );
    assert_eq!(policy.forbids_changing(&project.join("src/main.rs")), None);
}

#[test]
fn a_forbidden_entry_that_holds_a_root_is_hidden_whole_but_for_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let places = places(&root);
    let settings = SandboxSettings {
        forbid_read: vec!["~".into()],
        ..SandboxSettings::default()
    };
    let policy = SandboxPolicy::resolve(&settings, &places, SandboxMode::WorkspaceWrite);
    let me = root.join("home/me");
    assert_eq!(
        policy.forbids_reading(&me.join("other/x")),
        Some(me.as_path())
    );
    assert_eq!(
        policy.forbids_reading(&me.join("not-made-yet")),
        Some(me.as_path()),
        "what appears later is hidden too"
    );
    assert_eq!(
        policy.forbids_reading(&me.join(".keel/tmp/s2")),
        Some(me.as_path()),
        "another session's temp dir"
    );
    assert_eq!(policy.forbids_reading(&me.join("project/src/a.rs")), None);
    assert_eq!(policy.forbids_reading(&me.join(".keel/tmp/s1/f")), None);
    assert_eq!(
        policy.roots_inside(&me),
        vec![me.join("project"), me.join(".keel/tmp/s1")]
    );
    assert_eq!(
        policy.forbids_changing(&me.join("project/.git/config")),
        Some(me.join("project/.git/config")),
        "a protected path inside a root inside a hidden entry stays protected"
    );
}

#[test]
fn an_entry_inside_a_root_inside_a_hidden_entry_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let places = places(&root);
    let me = root.join("home/me");
    std::fs::create_dir_all(me.join("project/vault")).unwrap();
    let settings = SandboxSettings {
        forbid_read: vec!["~".into(), "~/project/vault".into(), "~/project".into()],
        ..SandboxSettings::default()
    };
    let policy = SandboxPolicy::resolve(&settings, &places, SandboxMode::WorkspaceWrite);
    assert_eq!(
        policy.forbids_reading(&me.join("project/vault/key")),
        Some(me.join("project/vault").as_path())
    );
    assert!(
        !policy.forbid_read.contains(&me.join("project")),
        "a root itself is never hidden"
    );
}

#[test]
fn keels_home_inside_the_workspace_is_protected_and_read_only_mode_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut places = places(&root);
    places.workspace = root.join("home/me");
    let policy = SandboxPolicy::resolve(
        &SandboxSettings::default(),
        &places,
        SandboxMode::WorkspaceWrite,
    );
    let keel_home = root.join("home/me/.keel");
    let entry = policy
        .read_only
        .iter()
        .find(|p| p.path == keel_home)
        .unwrap();
    assert!(entry.ancestors.is_empty());
    let read_only = policy.with_mode(SandboxMode::ReadOnly);
    assert!(read_only.writable.is_empty() && read_only.read_only.is_empty());
    assert_eq!(read_only.forbid_read, policy.forbid_read);
}

#[test]
fn a_workspace_that_is_the_home_keeps_the_shells_startup_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut places = places(&root);
    let me = root.join("home/me");
    std::fs::write(me.join(".bashrc"), "").unwrap();
    std::fs::create_dir_all(me.join(".local/bin")).unwrap();
    places.workspace = me.clone();
    let policy = SandboxPolicy::resolve(
        &SandboxSettings::default(),
        &places,
        SandboxMode::WorkspaceWrite,
    );
    assert_eq!(
        policy.forbids_changing(&me.join(".bashrc")),
        Some(me.join(".bashrc"))
    );
    assert_eq!(
        policy.forbids_changing(&me.join(".local/bin/git")),
        Some(me.join(".local")),
        "every dot entry, whole"
    );
    assert_eq!(
        policy.forbids_changing(&me.join(".aws/config")),
        Some(me.join(".aws")),
        "one that does not exist yet too"
    );
    assert!(
        policy
            .read_only
            .iter()
            .any(|kept| kept.path == me.join(".local"))
    );
    assert_eq!(policy.forbids_changing(&me.join("notes.txt")), None);
    // The user's own allow_write names what commands may change.
    std::fs::create_dir_all(me.join(".cache")).unwrap();
    let settings = SandboxSettings {
        allow_write: vec!["~/.cache".into()],
        ..SandboxSettings::default()
    };
    let policy = SandboxPolicy::resolve(&settings, &places, SandboxMode::WorkspaceWrite);
    assert_eq!(policy.forbids_changing(&me.join(".cache/pip/x")), None);
    assert!(
        !policy
            .read_only
            .iter()
            .any(|kept| kept.path == me.join(".cache"))
    );
}

#[test]
fn a_projects_allow_write_opens_only_what_really_lies_inside_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let places = places(&root);
    let me = root.join("home/me");
    let project = me.join("project");
    std::os::unix::fs::symlink(&me, project.join("cache")).unwrap();
    std::fs::create_dir_all(project.join("build")).unwrap();
    let settings = SandboxSettings {
        project_allow_write: vec![
            project.join("cache").display().to_string(),
            project.join("build").display().to_string(),
        ],
        ..SandboxSettings::default()
    };
    let policy = SandboxPolicy::resolve(&settings, &places, SandboxMode::WorkspaceWrite);
    assert_eq!(
        policy.writable,
        vec![project.clone()],
        "the home is not writable"
    );
    assert_eq!(
        policy.refused_writes,
        vec![(project.join("cache"), me.clone())]
    );
    // The user's own entry may name it.
    let settings = SandboxSettings {
        allow_write: vec![project.join("cache").display().to_string()],
        ..SandboxSettings::default()
    };
    let policy = SandboxPolicy::resolve(&settings, &places, SandboxMode::WorkspaceWrite);
    assert_eq!(policy.writable, vec![me]);
}

#[test]
fn tilde_entries_expand_and_missing_ones_drop() {
    let home = Path::new("/h");
    assert_eq!(
        expand("~/.cargo", Some(home)),
        Some(PathBuf::from("/h/.cargo"))
    );
    assert_eq!(expand("~", Some(home)), Some(PathBuf::from("/h")));
    assert_eq!(expand("~/.cargo", None), None);
    assert_eq!(expand("/opt/x", None), Some(PathBuf::from("/opt/x")));
}
