//! Background jobs through the real binary against `keel mock`: a server started with
//! `run_in_background`, reached by later commands of the session (the parent's and an
//! `explore` child's, whatever their sandbox mode), stopped by `job_kill`; a job keel leaves
//! running when it exits is gone afterwards; a job a killed keel left is stopped by the next
//! load; a job's exit reaches the model in the next request.

use crate::common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A port for one test's server (distinct per test and per run).
fn port(salt: u32) -> u32 {
    20000 + (std::process::id() * 7 + salt) % 20000
}

/// Whether a process whose command line holds `marker` runs.
fn running(marker: &str) -> bool {
    let found = std::process::Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .unwrap();
    !found.stdout.is_empty()
}

fn gone_within(marker: &str, within: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < within {
        if !running(marker) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Every tool result of a session, in order: (name, content).
fn results(shown: &Value) -> Vec<(String, String)> {
    shown["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["role"] == "tool_result")
        .map(|item| {
            (
                item["name"].as_str().unwrap().to_string(),
                item["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A command that asks the server for `page` until it answers (the server takes a moment to
/// listen), with curl.
fn fetch(port: u32, page: &str) -> String {
    format!(
        "for i in $(seq 100); do curl -sf http://127.0.0.1:{port}/{page} && exit 0; sleep 0.1; \
         done; echo never answered; exit 1"
    )
}

#[test]
fn a_background_server_answers_the_parent_and_an_explore_child_until_job_kill_stops_it() {
    let port = port(1);
    let server = format!("python3 -m http.server {port} --bind 127.0.0.1");
    let scenario = json!({
        "steps": [
            {"tool": "bash", "args": {"command": server, "run_in_background": true}},
            {"tool": "bash", "args": {"command": fetch(port, "page.txt")}},
            {"tool": "task", "args": {"agent": "explore", "description": "ask the server", "prompt": "ASK-SERVER fetch the page"}},
            {"tool": "job_output", "args": {"job": "job-1"}},
            {"tool": "job_kill", "args": {"job": "job-1"}},
            {"say": "Served, read and stopped."}
        ],
        "conversations": [{"when": {"contains": "ASK-SERVER"}, "steps": [
            {"tool": "bash", "args": {"command": fetch(port, "page.txt")}},
            {"say": "The child read the page."}
        ]}]
    })
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    std::fs::write(home.path().join("page.txt"), "served-by-the-job\n").unwrap();
    let run = home.run(&["run", "--yes", "--json", "serve the page"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    let shown = session_json(&home, &session, &[]);
    let results = results(&shown);
    let (name, started) = &results[0];
    assert_eq!(name, "bash");
    assert!(
        started.contains("job-1 started in the background"),
        "{started}"
    );
    // The parent's next command reached the job's server.
    assert!(results[1].1.contains("served-by-the-job"), "{results:?}");
    // So did the read-only child's (its result is the child's answer; its command's result is
    // in the child's own session).
    let child = shown["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|receipt| receipt["child_session"].as_str())
        .unwrap()
        .to_string();
    let child_results = self::results(&session_json(&home, &child, &[]));
    assert!(
        child_results[0].1.contains("served-by-the-job"),
        "{child_results:?}"
    );
    // The job's output: the server logged both requests.
    let (name, output) = &results[3];
    assert_eq!(name, "job_output");
    assert_eq!(output.matches("GET /page.txt").count(), 2, "{output}");
    assert!(output.contains("[job-1 is running"), "{output}");
    let (name, killed) = &results[4];
    assert_eq!(name, "job_kill");
    assert!(
        killed.contains("job-1 (`python3 -m http.server") && killed.contains("(job_kill)"),
        "{killed}"
    );
    assert!(
        gone_within(&server, Duration::from_secs(5)),
        "{server} still runs"
    );
    // The events said it.
    let started = run.events_of("job/started");
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["job"], "job-1");
    assert_eq!(started[0]["command"], server);
    let exited = run.events_of("job/exited");
    assert_eq!(exited.len(), 1, "{exited:?}");
    assert_eq!(exited[0]["signal"], 15);
    assert!(exited[0]["exit_code"].is_null());
}

#[test]
fn a_jobs_exit_reaches_the_next_request_and_a_job_left_running_ends_with_keel() {
    let marker = format!("sleep 300.{}1", std::process::id());
    let scenario = json!({
        "steps": [
            {"tool": "bash", "args": {"command": "sleep 0.3; echo quick-one-done; exit 3", "run_in_background": true}},
            {"tool": "bash", "args": {"command": marker, "run_in_background": true}},
            {"tool": "bash", "args": {"command": "sleep 1.5"}},
            {"say": "Both started."}
        ]
    })
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let run = home.run(&["run", "--yes", "--json", "start two jobs"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // The quick job ended while the third command ran: its result, and so the next request,
    // carries the note.
    let requests = mock.requests();
    let last = requests.last().unwrap().to_string();
    assert!(
        last.contains(
            "background job job-1 (`sleep 0.3; echo quick-one-done; exit 3`) exited with code 3"
        ),
        "{last}"
    );
    let told = requests
        .iter()
        .filter(|request| request.to_string().contains("job-1 (`sleep 0.3"))
        .count();
    assert_eq!(told, 1, "told once");
    // keel exited: the job it left running is gone (its pid, as its start said, and the
    // command), and recorded as ended with the session.
    let started = run.events_of("job/started");
    let pid = started[1]["pid"].as_u64().unwrap() as u32;
    assert_eq!(started[1]["job"], "job-2");
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    };
    let since = Instant::now();
    while alive(pid) && since.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "job-2's process {pid} outlived keel");
    assert!(
        gone_within(&marker, Duration::from_secs(5)),
        "{marker} outlived keel"
    );
    let exited = run.events_of("job/exited");
    let ended: Vec<&str> = exited
        .iter()
        .map(|event| event["job"].as_str().unwrap())
        .collect();
    assert_eq!(ended, ["job-1", "job-2"], "{exited:?}");
    assert_eq!(exited[1]["signal"], 9);
}

#[test]
fn a_job_a_killed_keel_left_running_is_stopped_by_the_next_load_and_the_model_is_told() {
    let marker = format!("sleep 300.{}2", std::process::id());
    let scenario = json!({
        "steps": [
            {"tool": "bash", "args": {"command": marker, "run_in_background": true}},
            {"say": "Started."},
            {"say": "Noted."}
        ]
    })
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    // Unconfined, the job is not in a PID namespace that ends with keel: only the jobs table
    // can find it again.
    home.append_config("[sandbox]\nmode = \"off\"\n");
    let killed = home
        .keel(&["run", "--yes", "--json", "start it"])
        .env("KEEL_KILL_AT", "after_result_commit")
        .output()
        .unwrap();
    assert!(killed.status.code().is_none(), "{:?}", killed.status);
    let first: Value = serde_json::from_str(
        String::from_utf8_lossy(&killed.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let session = first["session_id"].as_str().unwrap().to_string();
    assert!(running(&marker), "the job outlived the killed keel");

    let resumed = home.run(&["run", "--session", &session, "--yes", "--json", "go on"]);
    assert_eq!(resumed.code(), 0, "{}", resumed.stderr());
    assert!(
        gone_within(&marker, Duration::from_secs(5)),
        "{marker} still runs"
    );
    let last = mock.requests().last().unwrap().to_string();
    assert!(
        last.contains("the keel process that ran it had ended, so keel stopped it"),
        "{last}"
    );
}

#[test]
fn in_the_terminal_jobs_answers_during_a_turn_the_status_line_counts_jobs_and_a_kill_is_told() {
    use crate::common::tmux::{Tmux, available};
    if !available() {
        return;
    }
    let marker = format!("sleep 300.{}3", std::process::id());
    // The turn runs until the test lets its second command end (whatever the machine's load).
    let scenario = json!({
        "steps": [
            {"tool": "bash", "args": {"command": format!("echo serving-now; {marker}"), "run_in_background": true}},
            {"tool": "bash", "args": {"command": "while [ ! -e release.flag ]; do sleep 0.05; done"}},
            {"say": "Started it."},
            {"say": "Heard."}
        ]
    })
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    home.prepend_config("permission_mode = \"auto\"");
    let tmux = Tmux::start_with_env(&home, &home.path(), &[], (110, 32), &[]);
    tmux.wait_for("mock-model · auto");
    tmux.type_text("start a server");
    tmux.press(&["Enter"]);
    tmux.wait_until_screen("the job counted while the turn runs", |s| {
        s.contains("⚙ 1 job") && s.contains("release.flag")
    });
    tmux.type_text("/jobs");
    tmux.press(&["Enter"]);
    let listed = tmux.wait_until_screen("the jobs listed", |s| s.contains("› serving-now"));
    assert!(
        listed.contains("background jobs: 1 running of 1"),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("$ echo serving-now; {marker}")),
        "{listed}"
    );
    assert!(
        !listed.contains("Started it."),
        "the turn still ran: {listed}"
    );
    tmux.type_text("/jobs kill job-1");
    tmux.press(&["Enter"]);
    let killed = tmux.wait_until_screen("the kill said", |s| s.contains("the user stopped it"));
    assert!(killed.contains("job-1 (`echo serving-now;"), "{killed}");
    assert!(gone_within(&marker, Duration::from_secs(5)));
    std::fs::write(home.path().join("release.flag"), "").unwrap();
    let ended = tmux.wait_for_turn_end("Started it.");
    let status = ended
        .lines()
        .rev()
        .find(|line| line.contains("mock-model"))
        .unwrap();
    assert!(!status.contains('⚙'), "{status}");
    // The model hears of the kill with the next prompt.
    tmux.type_text("and now?");
    tmux.press(&["Enter"]);
    tmux.wait_for_turn_end("Heard.");
    let last = mock.requests().last().unwrap().to_string();
    assert!(
        last.contains("[keel: background job job-1 (`echo serving-now;")
            && last.contains("the user stopped it.]"),
        "{last}"
    );
}

#[test]
fn serve_lists_and_stops_jobs_keeps_them_across_a_model_switch_and_ends_the_rest_when_it_stops() {
    use crate::common::serve::{Server, wait_until_idle};
    let first = format!("sleep 300.{}5", std::process::id());
    let second = format!("sleep 300.{}6", std::process::id());
    let scenario = json!({
        "steps": [
            {"tool": "bash", "args": {"command": format!("echo first-up; {first}"), "run_in_background": true}},
            {"tool": "bash", "args": {"command": second, "run_in_background": true}},
            {"say": "Two running."}
        ]
    })
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    home.prepend_config("permission_mode = \"auto\"");
    home.append_config(&format!(
        "[providers.deepseek-anthropic]\nbase_url = \"{}\"\n",
        mock.base_url
    ));
    // Unconfined: nothing but serve itself ends the jobs when it stops.
    home.append_config("[sandbox]\nmode = \"off\"\n");
    let mut server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "go"})).0, 202);
    wait_until_idle(&server, &session);
    // A model switch reopens the session: its jobs go on, under the new controller.
    let switched = server.api(
        "POST",
        &format!("/api/sessions/{session}/model"),
        json!({"model": "deepseek-anthropic/other"}),
    );
    assert_eq!(switched.0, 200, "{}", switched.1);
    assert!(
        running(&first) && running(&second),
        "a model switch ended the jobs"
    );
    let (code, listed) = server.api("GET", &format!("/api/sessions/{session}/jobs"), Value::Null);
    assert_eq!(code, 200, "{listed}");
    let jobs = listed["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{listed}");
    assert_eq!(jobs[0]["job"], "job-1");
    assert_eq!(jobs[0]["running"], true);
    assert_eq!(jobs[1]["command"], second.as_str());
    let (code, said) = server.api(
        "POST",
        &format!("/api/sessions/{session}/jobs/job-9/kill"),
        Value::Null,
    );
    assert_eq!(code, 404, "{said}");
    assert!(
        said["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no job `job-9`")
    );
    let (code, said) = server.api(
        "POST",
        &format!("/api/sessions/{session}/jobs/job-1/kill"),
        Value::Null,
    );
    assert_eq!(code, 200, "{said}");
    assert!(
        said["said"]
            .as_str()
            .unwrap()
            .contains("the user stopped it"),
        "{said}"
    );
    assert!(gone_within(&first, Duration::from_secs(5)));
    let (_, listed) = server.api("GET", &format!("/api/sessions/{session}/jobs"), Value::Null);
    assert_eq!(listed["jobs"][0]["running"], false, "{listed}");
    assert_eq!(listed["jobs"][0]["signal"], 15, "{listed}");
    assert!(running(&second));
    // SIGTERM: serve stops, and the session's other job with it.
    std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    let started = Instant::now();
    while server.child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "serve did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        gone_within(&second, Duration::from_secs(5)),
        "{second} outlived serve"
    );
}

#[test]
fn leaving_the_terminal_with_ctrl_d_ends_the_sessions_jobs() {
    use crate::common::tmux::{Tmux, available};
    if !available() {
        return;
    }
    let marker = format!("sleep 300.{}7", std::process::id());
    let scenario = json!({
        "steps": [
            {"tool": "bash", "args": {"command": marker, "run_in_background": true}},
            {"say": "Left running."}
        ]
    })
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    // Unconfined: only keel's own end of the session stops it.
    home.append_config("[sandbox]\nmode = \"off\"\n");
    let tmux = Tmux::start_with_env(&home, &home.path(), &[], (110, 32), &[]);
    tmux.wait_for("mock-model · ask");
    tmux.type_text("start it");
    tmux.press(&["Enter"]);
    tmux.wait_until_screen("the question", |s| s.contains("sleep 300."));
    tmux.answer("y");
    tmux.wait_for_turn_end("Left running.");
    assert!(running(&marker));
    tmux.press(&["C-d"]);
    assert!(
        gone_within(&marker, Duration::from_secs(10)),
        "{marker} outlived keel"
    );
}

#[test]
fn job_kill_lets_a_confined_job_shut_down_cleanly_before_anything_is_forced() {
    let scenario = json!({
        "steps": [
            {"tool": "bash", "args": {"command": "trap 'echo shutting-down-cleanly; exit 0' TERM; echo up; echo listening-for-requests; while :; do sleep 0.1; done", "run_in_background": true}},
            {"tool": "job_output", "args": {"job": "job-1", "wait_seconds": 5}},
            {"tool": "job_kill", "args": {"job": "job-1"}},
            {"tool": "job_output", "args": {"job": "job-1"}},
            {"say": "Stopped."}
        ]
    })
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let run = home.run(&["run", "--yes", "--json", "start and stop it"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
    let results = results(&session_json(&home, &session, &[]));
    assert!(results[0].1.contains("confined"), "{results:?}");
    assert!(results[1].1.contains("up"), "{results:?}");
    // The command got SIGTERM and ended on its own terms.
    assert!(
        results[2].1.contains("exited with code 0 (job_kill)"),
        "{results:?}"
    );
    assert!(
        results[3].1.contains("shutting-down-cleanly"),
        "{results:?}"
    );
    // What the first read showed (its result committed) is not shown again.
    assert!(!results[3].1.contains("up\n"), "{results:?}");
}
