//! What a `keel eval` trial — its agent's commands and its grader — can reach, through the real
//! binary: a suite with a link anywhere in it is refused (its path named, nothing it leads to
//! copied), nothing of the user's own `$KEEL_HOME` or `forbid_read` is readable, and no trial
//! reads another trial's workspace, grader copy or home, or the run's log, at any concurrency.
//! Every directory here is outside `/tmp`, which a confined command never sees anyway.

use crate::common::*;
use std::path::{Path, PathBuf};

/// A home (`KEEL_HOME` and the eval's working directory) outside `/tmp`.
fn home_outside_tmp(config: &str) -> Home {
    let home = Home {
        dir: dir_outside_tmp(),
    };
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    home
}

/// Every file below `dir` (links not followed) whose bytes contain `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            found.extend(files_holding(&entry.path(), needle));
        } else if kind.is_file() {
            let bytes = std::fs::read(entry.path()).unwrap_or_default();
            if String::from_utf8_lossy(&bytes).contains(needle) {
                found.push(entry.path());
            }
        }
    }
    found
}

/// A task `name` in `suite` whose model runs `command` with bash, then says done; graded by
/// `verify`.
fn command_task(suite: &Path, name: &str, command: &str, verify: &str) {
    let task = suite.join(name);
    std::fs::create_dir_all(task.join("workdir")).unwrap();
    std::fs::write(task.join("workdir/a.txt"), "draft\n").unwrap();
    std::fs::write(
        task.join("task.toml"),
        "kind = \"edit\"\nprompt = \"set a.txt to {marker}\"\n",
    )
    .unwrap();
    std::fs::write(task.join("verify.sh"), verify).unwrap();
    let mock = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": command}},
        {"say": "done"},
    ]});
    std::fs::write(task.join("mock.json"), mock.to_string()).unwrap();
}

fn eval_args<'a>(suite: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "eval",
        suite,
        "--out",
        out,
        "--variants",
        "base",
        "--efforts",
        "default",
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_suite_with_a_link_or_a_fifo_anywhere_is_refused_naming_it_and_nothing_is_copied() {
    let home = home_outside_tmp("");
    let private = home.path().join("private");
    std::fs::create_dir_all(private.join(".ssh")).unwrap();
    std::fs::write(private.join(".ssh/id_ed25519"), "PRIVATE-KEY-CANARY-7f3a\n").unwrap();
    std::fs::write(
        private.join("credentials"),
        "AWS_SECRET=CREDENTIALS-CANARY-91bc\n",
    )
    .unwrap();
    let outside_task = home.path().join("elsewhere-task");
    command_task(&outside_task, "t", "true", "exit 1\n");
    type Plant = fn(&Path, &Path, &Path);
    let cases: [(&str, &str, Plant); 6] = [
        ("workdir", "workdir", |task, private, _| {
            std::fs::remove_dir_all(task.join("workdir")).unwrap();
            std::os::unix::fs::symlink(private.join(".ssh"), task.join("workdir")).unwrap();
        }),
        ("verify.sh", "verify.sh", |task, private, _| {
            std::fs::remove_file(task.join("verify.sh")).unwrap();
            std::os::unix::fs::symlink(private.join("credentials"), task.join("verify.sh"))
                .unwrap();
        }),
        ("task.toml", "task.toml", |task, private, _| {
            std::fs::remove_file(task.join("task.toml")).unwrap();
            std::os::unix::fs::symlink(private.join("credentials"), task.join("task.toml"))
                .unwrap();
        }),
        ("the task directory", "", |task, _, outside| {
            std::fs::remove_dir_all(task).unwrap();
            std::os::unix::fs::symlink(outside.join("t"), task).unwrap();
        }),
        ("a link inside to the grader", "workdir/x", |task, _, _| {
            std::os::unix::fs::symlink("../verify.sh", task.join("workdir/x")).unwrap();
        }),
        ("a FIFO", "workdir/pipe", |task, _, _| {
            nix::unistd::mkfifo(
                &task.join("workdir/pipe"),
                nix::sys::stat::Mode::from_bits_truncate(0o600),
            )
            .unwrap();
        }),
    ];
    for (case, named, plant) in cases {
        let suite = home
            .path()
            .join(format!("suite-{}", named.replace('/', "-")));
        command_task(&suite, "t", "true", "exit 1\n");
        let task = suite.join("t");
        plant(&task, &private, &outside_task);
        let culprit = task.join(named);
        let culprit = culprit.to_str().unwrap().trim_end_matches('/');
        let checked = home.run(&["eval", "check", suite.to_str().unwrap()]);
        assert_eq!(checked.code(), 2, "{case}: {}", checked.stderr());
        assert!(
            checked.stderr().contains(culprit),
            "{case}: the path is named: {}",
            checked.stderr()
        );
        let out = home.path().join(format!("out-{}", named.replace('/', "-")));
        let run = home.run(&eval_args(
            suite.to_str().unwrap(),
            out.to_str().unwrap(),
            &["--reps", "1"],
        ));
        assert_eq!(run.code(), 2, "{case}: {}", run.stderr());
        assert!(run.stderr().contains(culprit), "{case}: {}", run.stderr());
        for canary in ["PRIVATE-KEY-CANARY-7f3a", "CREDENTIALS-CANARY-91bc"] {
            assert!(
                !checked.stderr().contains(canary) && !run.stderr().contains(canary),
                "{case}: quoted"
            );
            assert_eq!(files_holding(&out, canary), Vec::<PathBuf>::new(), "{case}");
        }
        assert!(!out.join("attempts.jsonl").exists(), "{case}: nothing ran");
    }
}

#[test]
fn no_trial_command_or_grader_reads_the_users_keel_home_or_forbid_read() {
    let notes = dir_outside_tmp();
    std::fs::write(notes.path().join("plans.txt"), "FORBIDDEN-CANARY-55d1\n").unwrap();
    let home = home_outside_tmp(&format!(
        "# CONFIG-CANARY-c0ff\n[sandbox]\nforbid_read = [\"{}\"]\n",
        notes.path().display()
    ));
    let keel_home = home.path();
    std::fs::write(keel_home.join("history.txt"), "HISTORY-CANARY-a11e\n").unwrap();
    std::fs::create_dir_all(keel_home.join("state")).unwrap();
    std::fs::write(
        keel_home.join("state/old-transcript"),
        "STATE-CANARY-d00d\n",
    )
    .unwrap();
    let reads = format!(
        "cat {home}/config.toml {home}/history.txt {home}/state/old-transcript \
         {notes}/plans.txt; ls {home}",
        home = keel_home.display(),
        notes = notes.path().display()
    );
    let suite = home.path().join("suite");
    command_task(
        &suite,
        "peek",
        &format!("{{ {reads}; }} > stolen.txt 2>&1"),
        &format!("{{ {reads}; }} > grader-saw.txt 2>&1; exit 0\n"),
    );
    let out = dir_outside_tmp();
    let out = out.path().join("run");
    let run = home.run(&eval_args(
        suite.to_str().unwrap(),
        out.to_str().unwrap(),
        &["--reps", "1"],
    ));
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let attempt = out.join("trials/mock.default.peek.base.1/1");
    let stolen = std::fs::read_to_string(attempt.join("work/stolen.txt")).unwrap();
    let graded = std::fs::read_to_string(attempt.join("graded/grader-saw.txt")).unwrap();
    for canary in [
        "CONFIG-CANARY-c0ff",
        "HISTORY-CANARY-a11e",
        "STATE-CANARY-d00d",
        "FORBIDDEN-CANARY-55d1",
    ] {
        assert!(!stolen.contains(canary), "the trial read it: {stolen}");
        assert!(!graded.contains(canary), "the grader read it: {graded}");
        assert_eq!(files_holding(&out, canary), Vec::<PathBuf>::new());
    }
}

#[test]
fn no_trial_reads_another_trials_files_or_the_runs_log_at_concurrency_4() {
    // The run goes under $HOME, as in the docs' examples, outside /tmp.
    let user_home = dir_outside_tmp();
    let home = home_outside_tmp("");
    let out = user_home.path().join("keel-eval/run");
    // Each trial looks for everything of the run, now and again after later trials started.
    let look = format!(
        "for round in 1 2 3; do ls -R {out} 2>&1; cat {out}/attempts.jsonl {out}/manifest.json \
         2>&1; find {out} -name .keel-verify.sh -exec cat {{}} + 2>&1; \
         cat {out}/trials/*/*/work/a.txt {out}/trials/*/*/home/config.toml 2>&1; sleep 0.4; done",
        out = out.display()
    );
    let suite = home.path().join("suite");
    // The grader looks too (its own copy of the grader is the only one it may read).
    let grader_look = format!(
        "{{ ls -R {out}; cat {out}/trials/*/*/graded/.keel-verify.sh {out}/trials/*/*/work/seen.txt; }} \
         > grader-saw.txt 2>&1\n",
        out = out.display()
    );
    command_task(
        &suite,
        "spy",
        &format!("{{ {look}; }} > seen.txt 2>&1; echo {{marker}} > a.txt"),
        &format!("# GRADER-CANARY-3e3e\n{grader_look}grep -qx \"$MARKER\" a.txt\n"),
    );
    let run = Run::from(
        home.keel(&eval_args(
            suite.to_str().unwrap(),
            out.to_str().unwrap(),
            &["--reps", "6", "--concurrency", "4"],
        ))
        .env("HOME", user_home.path())
        .output()
        .unwrap(),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let mut trials = 0;
    for rep in 1..=6 {
        let attempt = out.join(format!("trials/mock.default.spy.base.{rep}/1"));
        let seen = std::fs::read_to_string(attempt.join("work/seen.txt")).unwrap();
        let grader_saw = std::fs::read_to_string(attempt.join("graded/grader-saw.txt")).unwrap();
        // Its own copy of the grader it may read (once); no other trial's anything.
        let others: Vec<String> = (1..=6)
            .filter(|other| *other != rep)
            .map(|other| format!("mock.default.spy.base.{other}"))
            .collect();
        assert!(
            grader_saw.matches("GRADER-CANARY-3e3e").count() <= 1
                && !others
                    .iter()
                    .any(|other| grader_saw.contains(other.as_str()))
                && !grader_saw.contains("api_key_env"),
            "rep {rep}'s grader saw another trial: {grader_saw}"
        );
        trials += 1;
        assert!(!seen.contains("GRADER-CANARY-3e3e"), "rep {rep}: {seen}");
        assert!(
            !seen.contains("mock.default.spy.base"),
            "rep {rep} listed the trials: {seen}"
        );
        assert!(!seen.contains("\"admitted\""), "rep {rep}: the log: {seen}");
        assert!(!seen.contains("suite_sha256"), "rep {rep}: the manifest");
        assert!(!seen.contains("api_key_env"), "rep {rep}: a home: {seen}");
        // Only its own answer: no other trial's marker.
        let markers = seen
            .lines()
            .filter(|line| line.len() == 12 && line.chars().all(|c| c.is_ascii_hexdigit()))
            .count();
        assert_eq!(markers, 0, "rep {rep} read another workspace: {seen}");
        let result = std::fs::read_to_string(out.join("attempts.jsonl")).unwrap();
        assert!(result.contains("\"passed\""), "{result}");
    }
    assert_eq!(trials, 6);
}
