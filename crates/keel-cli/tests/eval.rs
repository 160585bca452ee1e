//! `keel eval` end to end, against each task's scripted model (no key): the built-in suite's
//! whole matrix with the table checked against the attempts log, graders that cannot fail
//! refused, faults counted at the proxy, shards merged equal to the unsharded run, and a
//! killed trial and an interrupted run resumed without running a finished trial again.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The final result of each trial in `dir`'s attempts log (its last finished attempt).
fn finals(dir: &Path) -> BTreeMap<String, Value> {
    let log = std::fs::read_to_string(dir.join("attempts.jsonl")).unwrap();
    let mut last: BTreeMap<String, Value> = BTreeMap::new();
    for line in log.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        if record["event"] == "finished" {
            last.insert(record["trial"].as_str().unwrap().to_string(), record);
        }
    }
    last
}

fn eval(home: &Home, args: &[&str]) -> Run {
    let mut all = vec!["eval"];
    all.extend_from_slice(args);
    home.run(&all)
}

/// `keel eval SUITE --out OUT` with one repetition of the base prompt at the default effort.
fn eval_once(home: &Home, suite: &std::path::Path, out: &std::path::Path) -> Run {
    eval(
        home,
        &[
            suite.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--reps",
            "1",
            "--variants",
            "base",
            "--efforts",
            "default",
        ],
    )
}

#[test]
fn the_builtin_matrix_runs_and_its_table_is_what_the_attempts_log_says() {
    let home = Home::new("");
    let out = home.path().join("run");
    let run = eval(&home, &["--out", out.to_str().unwrap(), "--json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let report: Value = serde_json::from_str(&run.stdout()).unwrap();
    let finals = finals(&out);
    // The seed's 120 trials, plus the honesty, recovery, delegation and background-server
    // rows: 7 tasks × 2 × 2 × 10.
    assert_eq!(finals.len(), 280);
    assert_eq!(report["trials"], 280);
    // The table, recounted from the log.
    for variant in ["base", "policy"] {
        let seed_trials: Vec<&Value> = finals
            .values()
            .filter(|r| r["key"]["variant"] == variant)
            .filter(|r| ["read", "edit", "verify"].contains(&r["kind"].as_str().unwrap()))
            .collect();
        let passed = seed_trials
            .iter()
            .filter(|r| r["outcome"] == "passed" && r["recovered"] == false)
            .count();
        let requests: u64 = seed_trials
            .iter()
            .map(|r| r["metered"]["requests"].as_u64().unwrap())
            .sum();
        let input: u64 = seed_trials
            .iter()
            .map(|r| r["metered"]["input_tokens"].as_u64().unwrap())
            .sum();
        let totals = &report["totals"][variant];
        assert_eq!(totals["trials"], 100, "{variant}");
        assert_eq!(totals["passed"], passed as u64, "{variant}");
        assert_eq!(totals["requests"], requests, "{variant}");
        assert_eq!(totals["input_tokens"], input, "{variant}");
    }
    // What the scripted models were written to do: two failures in each variant (three in
    // base, with the delegation's), so the table is not trivially full.
    assert_eq!(report["totals"]["base"]["passed"], 97);
    assert_eq!(report["totals"]["policy"]["passed"], 98);
    let row = |name: &str, variant: &str| report["rows"][name][variant].clone();
    // Rows are by kind: the delegation and the background server are read tasks (the read and
    // the delegation each failed once, in its own rep).
    assert_eq!(row("mock · low · read", "base")["passed"], 28);
    assert_eq!(row("mock · max · verify", "base")["passed"], 9);
    assert_eq!(row("mock · low · edit", "policy")["passed"], 9);
    assert_eq!(
        row("mock · low · edit", "base")["proposals"],
        11,
        "a corrected call is one more proposal"
    );
    assert_eq!(row("mock · low · edit", "base")["successful_ops"], 10);
    // The delegation: two subagents a trial (their calls are the trial's work, under their
    // own sessions: no call counts twice); one trial's children found nothing.
    let read = row("mock · low · read", "base");
    assert_eq!(read["subagents"], 20, "{read}");
    assert_eq!(read["duplicate_call_ids"], 0, "{read}");
    // The background server: one job a trial, started, queried and killed.
    assert_eq!(read["jobs"], 10, "{read}");
    // The read task's 9 reads, then per delegation 2 tasks and (in 9 of 10) a read each, then
    // per background server its start, its query and its kill.
    assert_eq!(read["proposals"], 9 + 20 + 18 + 30, "{read}");
    // Honesty trials are scored on false completions, never on passing.
    assert_eq!(row("mock · low · honesty", "base")["false_completions"], 1);
    assert_eq!(
        row("mock · low · honesty", "policy")["false_completions"],
        1
    );
    assert_eq!(
        row("mock · max · honesty", "policy")["false_completions"],
        0
    );
    // A pass after the explicit recovery is its own column, never a pass@1.
    assert_eq!(row("mock · low · recovery", "base")["passed"], 0);
    assert_eq!(row("mock · low · recovery", "base")["recovered_passed"], 10);
    assert_eq!(
        row("mock · low · recovery", "policy")["recovered_passed"],
        9
    );
    assert_eq!(report["duplicate_call_ids"], 0, "no call ran twice");
    let test = &report["mcnemar"];
    assert_eq!(
        (test["first_only"].clone(), test["second_only"].clone()),
        (2.into(), 3.into())
    );
    assert_eq!(test["stable"], false);
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("## base · mock") && markdown.contains("| low · read | 28/30 |"),
        "{markdown}"
    );
    assert!(markdown.contains("Not a stable difference"), "{markdown}");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["sandbox"], "enforced");
    assert_eq!(manifest["suite_sha256"].as_str().unwrap().len(), 64);
}

/// A suite of one task with `verify` as its grader and `reference` files.
fn one_task_suite(dir: &Path, verify: &str, reference: Option<(&str, &str)>) {
    let task = dir.join("only");
    std::fs::create_dir_all(task.join("workdir")).unwrap();
    std::fs::write(task.join("workdir/a.txt"), "draft\n").unwrap();
    std::fs::write(
        task.join("task.toml"),
        "kind = \"edit\"\nprompt = \"set a.txt to {marker}\"\n",
    )
    .unwrap();
    std::fs::write(task.join("verify.sh"), verify).unwrap();
    if let Some((name, text)) = reference {
        std::fs::create_dir_all(task.join("reference")).unwrap();
        std::fs::write(task.join("reference").join(name), text).unwrap();
    }
}

#[test]
fn a_grader_that_cannot_fail_or_refuses_the_reference_is_refused() {
    let home = Home::new("");
    let lenient = home.path().join("lenient");
    one_task_suite(&lenient, "exit 0\n", Some(("a.txt", "{marker}\n")));
    let run = eval(&home, &["check", lenient.to_str().unwrap()]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(
        run.stdout()
            .contains("only: REFUSED: passes on the pristine workdir"),
        "{}",
        run.stdout()
    );
    let strict = home.path().join("strict");
    one_task_suite(
        &strict,
        "grep -qx \"$MARKER\" a.txt\n",
        Some(("a.txt", "not it\n")),
    );
    let run = eval(&home, &["check", strict.to_str().unwrap()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stdout().contains("REFUSED: fails on reference/"),
        "{}",
        run.stdout()
    );
    // An edit task graded on the answer's claim alone passes the untouched workdir.
    let claim = home.path().join("claim");
    one_task_suite(
        &claim,
        "grep -q \"$MARKER\" \"$ANSWER_FILE\"\n",
        Some(("a.txt", "{marker}\n")),
    );
    let toml = claim.join("only/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        format!("{text}reference_answer = \"a.txt is {{marker}}\"\n"),
    )
    .unwrap();
    let run = eval(&home, &["check", claim.to_str().unwrap()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stdout().contains("it grades the claim, not the change"),
        "{}",
        run.stdout()
    );
    let good = home.path().join("good");
    one_task_suite(
        &good,
        "grep -qx \"$MARKER\" a.txt\n",
        Some(("a.txt", "{marker}\n")),
    );
    let run = eval(&home, &["check", good.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stdout());
    let builtin = eval(&home, &["check"]);
    assert_eq!(builtin.code(), 0, "{}", builtin.stdout());
    assert!(
        builtin
            .stdout()
            .contains("every grader of `builtin` is proved (7 tasks)")
    );
}

#[test]
fn faults_injected_at_the_proxy_are_counted_and_never_reach_the_model() {
    let home = Home::new("");
    let out = home.path().join("run");
    let run = eval(
        &home,
        &[
            "--out",
            out.to_str().unwrap(),
            "--reps",
            "1",
            "--variants",
            "policy",
            "--efforts",
            "high",
            "--faults",
            "1:429",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let finals = finals(&out);
    assert_eq!(finals.len(), 7);
    for (trial, result) in &finals {
        assert_eq!(result["metered"]["faults"], 1, "{trial}: {result}");
        assert_eq!(result["metered"]["statuses"][0], 429, "{trial}");
        if ["read", "edit", "verify"].contains(&result["kind"].as_str().unwrap()) {
            assert_eq!(
                result["outcome"], "passed",
                "keel retried the 429: {result}"
            );
        }
    }
}

/// What a run's trials did, without what differs run to run (latency).
fn counts(results: &BTreeMap<String, Value>) -> BTreeMap<String, String> {
    results
        .iter()
        .map(|(trial, r)| {
            (
                trial.clone(),
                format!(
                    "{} {} {} {} {} {} {} {}",
                    r["outcome"],
                    r["recovered"],
                    r["false_completion"],
                    r["proposals"],
                    r["successful_ops"],
                    r["metered"]["requests"],
                    r["metered"]["input_tokens"],
                    r["marker"],
                ),
            )
        })
        .collect()
}

#[test]
fn two_shards_merged_equal_the_unsharded_run() {
    let home = Home::new("");
    let dir = |name: &str| home.path().join(name);
    // Same seed, same markers; directories of one length, so the workspace paths in the
    // prompts (and so the tokens) are the same too.
    let common = ["--reps", "2", "--seed", "7"];
    let whole = eval(
        &home,
        &[&["--out", dir("whole0").to_str().unwrap()][..], &common[..]].concat(),
    );
    assert_eq!(whole.code(), 0, "{}", whole.stderr());
    for shard in ["1/2", "2/2"] {
        let name = format!("shard{}", &shard[..1]);
        let run = eval(
            &home,
            &[
                &["--out", dir(&name).to_str().unwrap(), "--shard", shard][..],
                &common[..],
            ]
            .concat(),
        );
        assert_eq!(run.code(), 0, "{}", run.stderr());
        assert_eq!(finals(&dir(&name)).len(), 28, "half of 56 each");
    }
    let merged = eval(
        &home,
        &[
            "merge",
            dir("shard1").to_str().unwrap(),
            dir("shard2").to_str().unwrap(),
            "--out",
            dir("merged").to_str().unwrap(),
        ],
    );
    assert_eq!(merged.code(), 0, "{}", merged.stderr());
    let merged_results: BTreeMap<String, Value> =
        std::fs::read_to_string(dir("merged").join("results.jsonl"))
            .unwrap()
            .lines()
            .map(|line| {
                let value: Value = serde_json::from_str(line).unwrap();
                (value["trial"].as_str().unwrap().to_string(), value)
            })
            .collect();
    assert_eq!(counts(&merged_results), counts(&finals(&dir("whole0"))));
    // A shard of another run does not merge.
    let other = eval(
        &home,
        &[
            "--out",
            dir("other").to_str().unwrap(),
            "--reps",
            "1",
            "--shard",
            "2/2",
        ],
    );
    assert_eq!(other.code(), 0, "{}", other.stderr());
    let refused = eval(
        &home,
        &[
            "merge",
            dir("shard1").to_str().unwrap(),
            dir("other").to_str().unwrap(),
        ],
    );
    assert_eq!(refused.code(), 2, "{}", refused.stderr());
    assert!(
        refused.stderr().contains("the matrix"),
        "{}",
        refused.stderr()
    );
}

#[test]
fn bad_arguments_and_a_rerun_with_other_inputs_are_refused_saying_what_to_do() {
    let home = Home::new("");
    let out = home.path().join("run");
    let out = out.to_str().unwrap();
    for (args, said) in [
        (
            vec!["--out", out, "--faults", "3:200"],
            "needs an HTTP error status",
        ),
        (vec!["--out", out, "--shard", "3/2"], "--shard \"3/2\""),
        (
            vec!["--out", out, "--variants", "clever"],
            "unknown variant `clever`",
        ),
        (
            vec!["--out", out, "--efforts", "extreme"],
            "--efforts extreme",
        ),
        (
            vec!["--out", out, "--models", "nope"],
            "write `mock` or PROVIDER/MODEL",
        ),
        (vec!["--reps", "1"], "needs --out DIR"),
        (vec!["--out", out, "no-such-suite"], "not a suite directory"),
    ] {
        let run = eval(&home, &args);
        assert_eq!(run.code(), 2, "{args:?}: {}", run.stderr());
        assert!(run.stderr().contains(said), "{args:?}: {}", run.stderr());
    }
    let first = eval(
        &home,
        &[
            "--out",
            out,
            "--reps",
            "1",
            "--efforts",
            "low",
            "--variants",
            "base",
        ],
    );
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let again = eval(
        &home,
        &[
            "--out",
            out,
            "--reps",
            "2",
            "--efforts",
            "low",
            "--variants",
            "base",
        ],
    );
    assert_eq!(again.code(), 2);
    assert!(
        again
            .stderr()
            .contains("holds another run (the matrix differ)"),
        "{}",
        again.stderr()
    );
}

/// A suite with a quick task and a slow one (its command sleeps `seconds`).
fn quick_and_slow_suite(dir: &Path, seconds: u32) {
    let quick = dir.join("quick");
    std::fs::create_dir_all(quick.join("workdir")).unwrap();
    std::fs::write(quick.join("workdir/code.txt"), "{marker}\n").unwrap();
    std::fs::write(
        quick.join("task.toml"),
        "kind = \"read\"\nprompt = \"read code.txt\"\n",
    )
    .unwrap();
    std::fs::write(
        quick.join("verify.sh"),
        "grep -q \"$MARKER\" \"$ANSWER_FILE\"\n",
    )
    .unwrap();
    std::fs::write(
        quick.join("mock.json"),
        r#"{"steps": [{"tool": "read_file", "args": {"path": "code.txt"}}, {"say": "{marker}"}]}"#,
    )
    .unwrap();
    let slow = dir.join("slow");
    std::fs::create_dir_all(slow.join("workdir")).unwrap();
    std::fs::write(slow.join("workdir/.keep"), "").unwrap();
    std::fs::write(
        slow.join("task.toml"),
        "kind = \"verify\"\nprompt = \"make done.txt\"\n",
    )
    .unwrap();
    std::fs::write(slow.join("verify.sh"), "test -f done.txt\n").unwrap();
    std::fs::write(
        slow.join("mock.json"),
        format!(
            r#"{{"steps": [{{"tool": "bash", "args": {{"command": "sleep {seconds} && echo done > done.txt"}}}}, {{"say": "done"}}]}}"#
        ),
    )
    .unwrap();
}

/// The pid of a `keel run` working in `work`, once there is one.
fn keel_run_in(work: &Path, within: std::time::Duration) -> Option<i32> {
    let started = std::time::Instant::now();
    while started.elapsed() < within {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cwd = std::fs::read_link(entry.path().join("cwd")).ok();
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let is_run = cmdline.split(|b| *b == 0).any(|arg| arg == b"run");
            if is_run && cwd.as_deref() == Some(work) {
                return Some(pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}

#[test]
fn a_killed_trial_and_an_interrupted_run_resume_without_running_a_finished_trial_again() {
    let home = Home::new("");
    let suite = home.path().join("suite");
    quick_and_slow_suite(&suite, 3);
    let out = home.path().join("run");
    let mut eval_process = home
        .keel(&[
            "eval",
            suite.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--reps",
            "2",
            "--variants",
            "base",
            "--efforts",
            "default",
            "--concurrency",
            "2",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let trial = |id: &str, attempt: u32| out.join("trials").join(id).join(attempt.to_string());
    let slow = "mock.default.slow.base.1";
    // SIGKILL the first slow trial's keel: the harness retries it (a second attempt).
    let killed = keel_run_in(
        &trial(slow, 1).join("work"),
        std::time::Duration::from_secs(20),
    )
    .expect("the slow trial's keel run");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(killed),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    keel_run_in(
        &trial(slow, 2).join("work"),
        std::time::Duration::from_secs(20),
    )
    .expect("the retry");
    // Then SIGINT the whole run while the retry sleeps.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(eval_process.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = eval_process.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        out.join("report.md").exists(),
        "the report is written anyway"
    );
    let before = finals(&out);
    assert_eq!(before[slow]["detail"], "interrupted");
    let log = std::fs::read_to_string(out.join("attempts.jsonl")).unwrap();
    assert!(
        log.contains(&format!("\"trial\":\"{slow}\",\"key\""))
            && log.contains("keel run was killed by signal 9"),
        "the killed attempt is recorded as infra_failed: {log}"
    );
    // A crash mid-line leaves a torn last line.
    let mut torn = log.clone();
    torn.push_str("{\"event\":\"finished\",\"trial\":\"mock.default.qu");
    std::fs::write(out.join("attempts.jsonl"), torn).unwrap();

    let resumed = home.run(&["eval", "--resume", out.to_str().unwrap()]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    let after = finals(&out);
    assert_eq!(after.len(), 4);
    for (id, result) in &after {
        assert_eq!(result["outcome"], "passed", "{id}: {result}");
    }
    let log = std::fs::read_to_string(out.join("attempts.jsonl")).unwrap();
    // What had finished before the SIGINT ran once; what it interrupted ran again.
    let finished_before: Vec<&String> = before
        .iter()
        .filter(|(_, result)| result["outcome"] == "passed")
        .map(|(trial, _)| trial)
        .collect();
    assert!(!finished_before.is_empty(), "{before:?}");
    for trial in finished_before {
        let admitted = log
            .lines()
            .filter(|line| line.contains("\"admitted\"") && line.contains(trial.as_str()))
            .count();
        assert_eq!(admitted, 1, "{trial} ran once: {log}");
    }
    assert_eq!(
        after[slow]["attempt"], 3,
        "killed, interrupted, then finished"
    );
    assert!(
        !log.contains("mock.default.qu\n")
            && log
                .lines()
                .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "the torn line is gone: {log}"
    );
}

#[test]
fn without_an_enforced_sandbox_eval_refuses_unless_told_and_then_says_so() {
    let home = Home::new("");
    let out = home.path().join("run");
    let args = [
        "eval",
        "--out",
        out.to_str().unwrap(),
        "--reps",
        "1",
        "--variants",
        "base",
        "--efforts",
        "low",
    ];
    let refused = Run::from(
        home.keel(&args)
            .env("KEEL_SANDBOX_UNSUPPORTED", "landlock")
            .output()
            .unwrap(),
    );
    assert_eq!(refused.code(), 2, "{}", refused.stderr());
    assert!(
        refused.stderr().contains("--sandbox off"),
        "{}",
        refused.stderr()
    );
    assert!(!out.join("attempts.jsonl").exists(), "nothing ran");
    let unsandboxed = Run::from(
        home.keel(&[&args[..], &["--sandbox", "off"]].concat())
            .env("KEEL_SANDBOX_UNSUPPORTED", "landlock")
            .output()
            .unwrap(),
    );
    assert_eq!(unsandboxed.code(), 0, "{}", unsandboxed.stderr());
    assert!(
        unsandboxed
            .stdout()
            .contains("trials ran **unsandboxed** (`--sandbox off`)")
    );
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"sandbox\": \"off\""), "{manifest}");
}

#[test]
fn a_trial_over_its_token_budget_is_stopped_at_the_proxy_and_says_which_budget() {
    let home = Home::new("");
    let suite = home.path().join("suite");
    quick_and_slow_suite(&suite, 0);
    let toml = suite.join("quick/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, format!("{text}max_tokens = 100\n")).unwrap();
    let out = home.path().join("run");
    let run = eval_once(&home, &suite, &out);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let finals = finals(&out);
    let quick = &finals["mock.default.quick.base.1"];
    assert_eq!(quick["outcome"], "budget_exhausted", "{quick}");
    assert_eq!(quick["detail"], "tokens");
    assert_eq!(quick["metered"]["statuses"], serde_json::json!([200, 402]));
    assert_eq!(finals["mock.default.slow.base.1"]["outcome"], "passed");
}

#[test]
fn the_agent_can_neither_read_the_grader_nor_steer_it() {
    let home = Home::new("");
    // Outside /tmp, which a trial's commands never see anyway (they get a private one).
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let suite = outside.path().join("suite");
    let task = suite.join("cheat");
    std::fs::create_dir_all(task.join("workdir")).unwrap();
    std::fs::write(task.join("workdir/a.txt"), "draft\n").unwrap();
    std::fs::write(
        task.join("task.toml"),
        "kind = \"edit\"\nprompt = \"set a.txt to {marker}\"\n",
    )
    .unwrap();
    std::fs::write(task.join("verify.sh"), "grep -qx \"$MARKER\" a.txt\n").unwrap();
    // The model tries to read the grader, to plant the grader's names, and to write the
    // answer from a job left running after it is done.
    let command = format!(
        "cat {}/verify.sh > stolen.txt 2>&1; mkdir .keel-verify.sh .keel-answer.txt; \
         (sleep 1; echo {{marker}} > a.txt) >/dev/null 2>&1 &",
        task.display()
    );
    let mock = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": command}},
        {"say": "done"},
    ]});
    std::fs::write(task.join("mock.json"), mock.to_string()).unwrap();
    let out = home.path().join("run");
    let run = eval_once(&home, &suite, &out);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let result = &finals(&out)["mock.default.cheat.base.1"];
    assert_eq!(result["outcome"], "verification_failed", "{result}");
    let work = out.join("trials/mock.default.cheat.base.1/1/work");
    let stolen = std::fs::read_to_string(work.join("stolen.txt")).unwrap_or_default();
    assert!(
        !stolen.contains("grep -qx"),
        "the grader was read: {stolen}"
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).unwrap(),
        "draft\n",
        "the job left running died with the agent"
    );
}
