//! Tests of the read-only list: what runs without a question, and every way out of it.

use super::*;
use crate::guard::WorkspaceGuard;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A workspace with `src/`, a directory beside it, a home, and a `PATH` of stand-ins for
/// every program of the list (outside the workspace).
struct Setup {
    _root: tempfile::TempDir,
    _bins: tempfile::TempDir,
    workspace: PathBuf,
    other: PathBuf,
    home: PathBuf,
    bin: PathBuf,
    guard: WorkspaceGuard,
}

fn executable(path: &Path) {
    std::fs::write(path, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A directory outside `/tmp` (under the build's target directory).
fn outside_tmp() -> tempfile::TempDir {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-bins");
    std::fs::create_dir_all(&target).unwrap();
    tempfile::tempdir_in(target).unwrap()
}

fn setup() -> Setup {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let workspace = root_path.join("ws");
    let other = root_path.join("other");
    let home = root_path.join("home");
    for dir in [&workspace, &other, &home] {
        std::fs::create_dir(dir).unwrap();
    }
    // Programs in `/tmp` are never trusted (the sandbox puts its temp dir there).
    let bins = outside_tmp();
    let bin = bins.path().to_path_buf();
    std::fs::create_dir(workspace.join("src")).unwrap();
    std::fs::write(workspace.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(workspace.join("src/lib.rs"), "\n").unwrap();
    std::fs::write(other.join(".env"), "KEY=1\n").unwrap();
    for program in PROGRAMS
        .iter()
        .map(|p| p.name)
        .chain(["git", "sed", "awk", "jq", "strings"])
    {
        executable(&bin.join(program));
    }
    let guard = WorkspaceGuard::new(&workspace, &[]).unwrap();
    Setup {
        _root: root,
        _bins: bins,
        workspace,
        other,
        home,
        bin,
        guard,
    }
}

impl Setup {
    fn places(&self) -> ReadPlaces<'_> {
        ReadPlaces {
            guard: &self.guard,
            home: Some(self.home.clone()),
            path: Some(self.bin.clone().into_os_string()),
        }
    }

    fn check(&self, line: &str) -> Result<(), NotReadOnly> {
        check(line, &self.places())
    }
}

#[test]
fn listing_reading_searching_and_git_reads_are_read_only() {
    let s = setup();
    for line in [
        "ls -la src",
        "ls",
        "git status --short",
        "git diff --stat",
        "git log --oneline -n 5 -- src",
        "git --no-pager show HEAD:src/main.rs",
        "git diff main..HEAD~2 -- src/main.rs",
        "git branch -a",
        "git branch --list 'feat*'",
        "git remote -v",
        "cat src/main.rs | head -n 20",
        "grep -rn 'fn main' src && wc -l src/*.rs",
        "rg --type rust TODO src",
        "find . -name '*.rs' -type f",
        "tail -n5 src/lib.rs 2>/dev/null",
        "sort -r src/main.rs | uniq -c",
        "wc -l < src/main.rs",
        "echo done; pwd",
        "diff -u src/main.rs src/lib.rs",
        "tr '/' '_' < src/main.rs",
        "cat -",
        // Quoted patterns are not globs; a search's first operand is its pattern.
        "rg '.*foo' src",
        "grep -E '.*[.]rs$' src/main.rs",
        "find . -name '.*rc'",
        "rg '/api/v1' src",
        "grep --include=*.rs -rn '/api' src",
        "tr '[:upper:]' '[:lower:]' < src/main.rs",
        // A one-character glued value is a delimiter, not a path.
        "cut -d/ -f2 src/main.rs",
        "sort -t/ -k2 src/main.rs",
        "git branch --contains HEAD",
        "git branch --sort=-committerdate",
        "git tag --sort=-v:refname",
        "git remote get-url origin",
    ] {
        assert_eq!(s.check(line), Ok(()), "{line}");
    }
}

#[test]
fn a_path_operand_outside_the_workspace_asks() {
    let s = setup();
    let other_env = s.other.join(".env");
    for line in [
        "grep -r x ~".to_string(),
        "cat ~/notes".to_string(),
        "cat ../other/.env".to_string(),
        format!("cat {}", other_env.display()),
        "ls /".to_string(),
        "wc -l < ../other/.env".to_string(),
        "grep --file=../other/.env src".to_string(),
        "grep -f../other/.env src".to_string(),
        "cat ~root/x".to_string(),
        "git log -- ../other".to_string(),
        "ls ../*".to_string(),
        "cat .*".to_string(),
    ] {
        assert!(
            matches!(s.check(&line), Err(NotReadOnly::Outside(_))),
            "{line}: {:?}",
            s.check(&line)
        );
    }
}

#[test]
fn links_and_globs_that_lead_outside_ask() {
    let s = setup();
    std::os::unix::fs::symlink(&s.other, s.workspace.join("docs")).unwrap();
    std::os::unix::fs::symlink(s.other.join(".env"), s.workspace.join("src/zz.rs")).unwrap();
    for line in [
        "ls docs",
        "cat docs/.env",
        "cat src/*.rs",
        "cat src/z?.rs",
        "cat */.env",
    ] {
        assert!(
            matches!(s.check(line), Err(NotReadOnly::Outside(_))),
            "{line}: {:?}",
            s.check(line)
        );
    }
    // Globs that match only what is inside are fine.
    assert_eq!(s.check("cat src/m*.rs"), Ok(()));
    assert_eq!(s.check("ls src/nothing*"), Ok(()));
}

#[test]
fn an_added_directory_is_inside() {
    let s = setup();
    let guard = WorkspaceGuard::new(&s.workspace, std::slice::from_ref(&s.other)).unwrap();
    let places = ReadPlaces {
        guard: &guard,
        ..s.places()
    };
    assert_eq!(check("cat ../other/.env", &places), Ok(()));
}

#[test]
fn writes_substitutions_and_assignments_ask() {
    let s = setup();
    for (line, why) in [
        ("ls > listing.txt", NotReadOnly::WritesFiles),
        ("git status >> notes", NotReadOnly::WritesFiles),
        ("cat $(echo src/main.rs)", NotReadOnly::NotUnderstood),
        ("cat `ls`", NotReadOnly::NotUnderstood),
        ("cat $HOME/x", NotReadOnly::NotUnderstood),
        ("cat <<EOF\nx\nEOF", NotReadOnly::NotUnderstood),
        ("f() { ls; }; f", NotReadOnly::NotUnderstood),
        ("eval ls", NotReadOnly::NotUnderstood),
        (
            "GIT_EXTERNAL_DIFF=x git diff",
            NotReadOnly::NotOnList("GIT_EXTERNAL_DIFF=x".into()),
        ),
        ("", NotReadOnly::Empty),
    ] {
        assert_eq!(s.check(line), Err(why), "{line}");
    }
}

#[test]
fn options_that_write_or_run_code_ask() {
    let s = setup();
    for (line, option) in [
        ("find . -exec rm {} ;", "-exec"),
        ("find . -delete", "-delete"),
        ("find -L . -name x", "-L"),
        ("find . -fprint out", "-fprint"),
        ("git -c core.pager=sh log", "-c"),
        ("git -C .. status", "-C"),
        ("git diff --output=x", "--output"),
        ("git diff --no-index a b", "--no-index"),
        ("git diff --ext-diff", "--ext-diff"),
        ("git log -p --textconv", "--textconv"),
        ("git diff -Oorder", "-O"),
        ("git grep -O x", "-O"),
        ("git branch -D main", "-D"),
        ("git branch --unset-upstream", "--unset-upstream"),
        ("rg --pre cat x", "--pre"),
        ("rg -nL x", "-L"),
        ("sort -o out src/main.rs", "-o"),
        ("sort -rno out src/main.rs", "-o"),
        (
            "sort --compress-program=sh src/main.rs",
            "--compress-program",
        ),
        ("grep -Rn x src", "-R"),
        ("tree -o out", "-o"),
        ("sha256sum -c sums", "-c"),
        ("date -s 2020-01-01", "-s"),
        ("fd -x rm", "-x"),
    ] {
        match s.check(line) {
            Err(NotReadOnly::RiskyOption { option: found, .. }) => {
                assert_eq!(found, option, "{line}");
            }
            other => panic!("{line}: {other:?}"),
        }
    }
}

#[test]
fn programs_off_the_list_ask() {
    let s = setup();
    for line in [
        "sed -n 1p src/main.rs",
        "awk '{print}' src/main.rs",
        "cargo test",
        "npm test",
        "rm -rf src",
        "cd src && ls",
        "xargs cat < src/main.rs",
        "env",
        "git commit -m x",
        "git push",
        "git checkout .",
        "git stash",
        "git",
        "./ls",
        "/bin/ls",
        "ls | sh",
        "jq -n env",
        "strings @../other/.env",
    ] {
        assert!(
            matches!(s.check(line), Err(NotReadOnly::NotOnList(_))),
            "{line}: {:?}",
            s.check(line)
        );
    }
    // Creating a branch, a tag or a remote is not listing.
    for line in ["git branch new", "git tag v1", "git remote add o u"] {
        assert!(
            matches!(s.check(line), Err(NotReadOnly::TooManyOperands(_))),
            "{line}"
        );
    }
    assert!(matches!(
        s.check("uniq src/main.rs out"),
        Err(NotReadOnly::TooManyOperands(_))
    ));
}

#[test]
fn a_program_the_repository_provides_asks() {
    let s = setup();
    let inside_bin = s.workspace.join("bin");
    std::fs::create_dir(&inside_bin).unwrap();
    executable(&inside_bin.join("ls"));
    let path = |entries: &[&Path]| std::env::join_paths(entries).unwrap();
    let with_path = |path: OsString| ReadPlaces {
        path: Some(path),
        ..s.places()
    };
    // The repository's directory anywhere on PATH (a directory the sandbox hides may come
    // first), or a relative entry.
    for path in [
        path(&[&inside_bin, &s.bin]),
        path(&[&s.bin, &inside_bin]),
        path(&[&s.workspace, &s.bin]),
        path(&[Path::new("bin"), &s.bin]),
        path(&[&s.bin, Path::new("")]),
    ] {
        assert!(
            matches!(
                check("ls", &with_path(path.clone())),
                Err(NotReadOnly::NotFound(_))
            ),
            "{path:?}"
        );
    }
    // Not on PATH at all.
    let empty = outside_tmp();
    assert!(matches!(
        check("ls", &with_path(empty.path().as_os_str().to_owned())),
        Err(NotReadOnly::NotFound(_))
    ));
    // Directories outside are fine; a builtin needs no PATH.
    assert_eq!(
        check("ls", &with_path(path(&[empty.path(), &s.bin]))),
        Ok(())
    );
    assert_eq!(check("echo hi", &with_path(OsString::new())), Ok(()));
}

#[test]
fn abbreviations_of_risky_options_are_risky() {
    let s = setup();
    for (line, option) in [
        (
            "git grep --op='cat ../other/.env #' -e .",
            "--open-files-in-pager",
        ),
        (
            "sort -S 1K --compress-p=sh src/main.rs",
            "--compress-program",
        ),
        ("sort --files0=- src/main.rs", "--files0-from"),
        ("date --fi=../other/.env", "--file"),
        ("grep -rn --der TOKEN .", "--dereference-recursive"),
        ("git diff --out=x", "--output"),
        ("git -c x=y log", "-c"),
        ("ls -RL .", "-L"),
    ] {
        match s.check(line) {
            Err(NotReadOnly::RiskyOption { option: found, .. }) => {
                assert_eq!(found, option, "{line}");
            }
            other => panic!("{line}: {other:?}"),
        }
    }
}

#[test]
fn glued_values_globs_and_directories_that_lead_out_ask() {
    let s = setup();
    std::os::unix::fs::symlink(s.other.join(".env"), s.workspace.join("lnk")).unwrap();
    // A value glued to a short option is checked at every cut.
    assert_eq!(
        s.check("grep -flnk src"),
        Err(NotReadOnly::Outside("lnk".into()))
    );
    assert!(matches!(
        s.check("grep -rflnk x src"),
        Err(NotReadOnly::Outside(_))
    ));
    // A program that reads no file still may not list outside with a glob.
    assert!(matches!(s.check("echo ../*"), Err(NotReadOnly::Outside(_))));
    assert!(matches!(
        s.check("printf '%s' ~/*"),
        Err(NotReadOnly::Outside(_))
    ));
    // A file named like an option, matched by a glob.
    std::fs::write(s.workspace.join("--pre=sh"), "").unwrap();
    assert_eq!(
        s.check("rg x *"),
        Err(NotReadOnly::GlobToOption("--pre=sh".into()))
    );
    // diff follows links inside the directories it compares.
    std::fs::create_dir(s.workspace.join("d")).unwrap();
    assert_eq!(
        s.check("diff d src"),
        Err(NotReadOnly::Directory("d".into()))
    );
    // /proc is keel's own, not the command's.
    std::os::unix::fs::symlink("/proc/self", s.workspace.join("me")).unwrap();
    for line in [
        "cat /proc/self/cwd/../other/.env",
        "cat me/cwd/src/main.rs",
        "cat /dev/stdin",
    ] {
        assert!(
            matches!(s.check(line), Err(NotReadOnly::Outside(_))),
            "{line}: {:?}",
            s.check(line)
        );
    }
    assert_eq!(s.check("cat src/main.rs 2>/dev/null < /dev/null"), Ok(()));
}

#[test]
fn git_asks_when_its_repository_is_not_the_workspaces_own() {
    let s = setup();
    // No repository anywhere up: git finds none either.
    assert_eq!(s.check("git status"), Ok(()));
    // The workspace's own repository.
    std::fs::create_dir(s.workspace.join(".git")).unwrap();
    assert_eq!(s.check("git log -p"), Ok(()));
    std::fs::remove_dir(s.workspace.join(".git")).unwrap();
    // A `.git` file naming another place.
    std::fs::write(s.workspace.join(".git"), "gitdir: ../other\n").unwrap();
    assert_eq!(s.check("git log -p"), Err(NotReadOnly::RepositoryOutside));
    std::fs::remove_file(s.workspace.join(".git")).unwrap();
    // The workspace is a subdirectory of a repository.
    std::fs::create_dir(s.workspace.parent().unwrap().join(".git")).unwrap();
    assert_eq!(
        s.check("git grep --untracked TOKEN -- ':/'"),
        Err(NotReadOnly::RepositoryOutside)
    );
}

#[test]
fn a_path_entry_the_sandbox_replaces_is_never_trusted() {
    let s = setup();
    let tmp_bin = tempfile::tempdir_in("/tmp").unwrap();
    executable(&tmp_bin.path().join("ls"));
    let path = std::env::join_paths([tmp_bin.path(), s.bin.as_path()]).unwrap();
    let places = ReadPlaces {
        path: Some(path),
        ..s.places()
    };
    assert_eq!(
        check("ls", &places),
        Err(NotReadOnly::NotFound("ls".into()))
    );
}
