//! Helpers for driving the real `keel` binary against a real `keel mock` process.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod escapes;
pub mod repository;
pub mod serve;
pub mod terminal;
pub mod tmux;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const KEEL: &str = env!("CARGO_BIN_EXE_keel");

/// A `keel mock` child process, killed on drop.
pub struct MockProcess {
    child: Child,
    pub base_url: String,
}

impl MockProcess {
    pub fn start(scenario: &str) -> MockProcess {
        let mut child = Command::new(KEEL)
            .args(["mock", "--scenario", scenario])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn keel mock");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let base_url = line.trim().to_string();
        assert!(
            base_url.starts_with("http://127.0.0.1:"),
            "mock printed {base_url:?}"
        );
        MockProcess { child, base_url }
    }

    /// Start with a scenario given as JSON text (written to `dir`).
    pub fn with_steps(dir: &Path, scenario_json: &str) -> MockProcess {
        let path = dir.join(format!("scenario-{}.json", rand_suffix()));
        std::fs::write(&path, scenario_json).unwrap();
        MockProcess::start(path.to_str().unwrap())
    }

    /// The requests the mock captured, as JSON objects.
    pub fn requests(&self) -> Vec<Value> {
        let address = self.base_url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(address).unwrap();
        write!(
            stream,
            "GET /_mock/requests HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let body = response.split_once("\r\n\r\n").unwrap().1;
        serde_json::from_str(body).unwrap()
    }
}

impl Drop for MockProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rand_suffix() -> String {
    format!("{:?}", Instant::now()).replace(|c: char| !c.is_ascii_alphanumeric(), "")
}

/// A private KEEL_HOME with a config file.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new(config: &str) -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        Home { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Put `lines` at the top of the home's config (top-level keys such as
    /// `permission_mode`).
    pub fn prepend_config(&self, lines: &str) {
        let path = self.dir.path().join("config.toml");
        let config = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{lines}\n{config}")).unwrap();
    }

    /// Add `lines` at the end of the home's config (tables such as `[permissions]`).
    pub fn append_config(&self, lines: &str) {
        let path = self.dir.path().join("config.toml");
        let config = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{config}\n{lines}")).unwrap();
    }

    /// `keel ARGS` with this home, in this home as working directory, and a clean environment.
    pub fn keel(&self, args: &[&str]) -> Command {
        let mut command = Command::new(KEEL);
        command
            .args(args)
            .current_dir(self.dir.path())
            .env("KEEL_HOME", self.dir.path())
            .env("DEEPSEEK_API_KEY", "test-key-1")
            .env_remove("KEEL_MODEL")
            .env_remove("DEEPSEEK_BASE_URL")
            .env_remove("NO_COLOR")
            .stdin(Stdio::null());
        command
    }

    /// `run` with one environment variable removed.
    pub fn run_without(&self, args: &[&str], variable: &str) -> Run {
        Run::from(self.keel(args).env_remove(variable).output().unwrap())
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let started = Instant::now();
        let output = self.keel(args).output().unwrap();
        Run {
            output,
            elapsed: started.elapsed(),
        }
    }
}

pub struct Run {
    pub output: Output,
    pub elapsed: Duration,
}

impl From<Output> for Run {
    /// A run whose duration was not measured.
    fn from(output: Output) -> Run {
        Run {
            output,
            elapsed: Duration::ZERO,
        }
    }
}

impl Run {
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// The `--json` event lines.
    pub fn events(&self) -> Vec<Value> {
        self.stdout()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
            .collect()
    }
    pub fn events_of(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["type"] == kind)
            .collect()
    }
}

/// Config for `protocol` pointing the matching preset at the mock.
pub fn config_for(protocol: &str, base_url: &str, extra: &str) -> String {
    let provider = provider_for(protocol);
    format!(
        "model = \"{provider}/mock-model\"\n[providers.{provider}]\nbase_url = \"{base_url}\"\n{extra}\n\
         [providers.{provider}.retry]\nbase_delay_ms = 50\nmax_delay_ms = 200\n"
    )
}

pub fn provider_for(protocol: &str) -> &'static str {
    match protocol {
        "chat" => "deepseek",
        "anthropic" => "deepseek-anthropic",
        "responses" => "deepseek-responses",
        other => panic!("unknown protocol {other}"),
    }
}

/// A private home whose config points `protocol`'s preset at a mock serving `scenario` (JSON),
/// with `extra` lines added to the provider table.
pub fn scripted(protocol: &str, scenario: &str, extra: &str) -> (Home, MockProcess) {
    let home = Home::new("");
    let (_dir, mock) = repoint(&home, protocol, scenario, extra);
    (home, mock)
}

pub const PROTOCOLS: [&str; 3] = ["chat", "anthropic", "responses"];

/// `keel acp` in `home` with `initialize` (id 1) and `session/new` for the home as cwd (id 2)
/// written: the child, its stdin and its stdout's lines.
pub fn acp_started(
    home: &Home,
) -> (
    Child,
    std::process::ChildStdin,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
) {
    let mut child = home
        .keel(&["acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let cwd = home.path().display().to_string();
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1}});
    let new = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []}});
    writeln!(stdin, "{initialize}\n{new}").unwrap();
    (child, stdin, lines)
}

/// `keel acp` in `home`: the prompt `text` sent, the first `session/request_permission`
/// answered with `option` (`reject_once`, …), until the prompt ends (20 s at most). The
/// request, and every line keel wrote.
pub fn acp_first_permission(home: &Home, text: &str, option: &str) -> (Option<Value>, String) {
    let (mut child, mut stdin, mut lines) = acp_started(home);
    let started = Instant::now();
    let mut said = String::new();
    let mut request = None;
    while started.elapsed() < Duration::from_secs(20) {
        let Some(Ok(line)) = lines.next() else { break };
        said.push_str(&line);
        said.push('\n');
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            let session = message["result"]["sessionId"].as_str().unwrap();
            let prompt = serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}});
            writeln!(stdin, "{prompt}").unwrap();
        }
        if message["method"] == "session/request_permission" && request.is_none() {
            let answer = serde_json::json!({"jsonrpc": "2.0", "id": message["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": option}}});
            writeln!(stdin, "{answer}").unwrap();
            request = Some(message.clone());
        }
        if message["id"] == 3 {
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    (request, said)
}

/// Start `keel run --yes --json "run it"` and wait until its bash tool has written `file` in
/// the home (the workspace). Returns the running child and the session id.
pub fn start_until_tool_runs(home: &Home, file: &str) -> (Child, String) {
    start_until_tool_runs_with(home, file, &[])
}

/// `start_until_tool_runs` with more options for `keel run`.
pub fn start_until_tool_runs_with(home: &Home, file: &str, options: &[&str]) -> (Child, String) {
    let mut args = vec!["run", "--yes", "--json"];
    args.extend_from_slice(options);
    args.push("run it");
    let mut child = home
        .keel(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let session = first["session_id"].as_str().unwrap().to_string();
    let path = home.path().join(file);
    wait_until(
        &format!("the tool wrote {file}"),
        Duration::from_secs(15),
        || {
            path.exists() || {
                let exited = child.try_wait().unwrap();
                assert!(
                    exited.is_none(),
                    "keel exited ({exited:?}) before its tool ran"
                );
                false
            }
        },
    );
    (child, session)
}

/// Start `keel run --yes --json "run it"`, wait until its bash tool has written `effects.log`,
/// and SIGKILL keel while the tool still runs. Returns the session id and a guard that kills
/// what is left of the tool's process group when the test ends.
pub fn kill_during_tool(home: &Home) -> (String, ToolGroup) {
    let (mut child, session) = start_until_tool_runs(home, "effects.log");
    wait_until(
        "the tool's receipt is stored as started",
        Duration::from_secs(15),
        || stored_receipt_states(home) == ["started"],
    );
    // The tool's process group is led by keel's child that runs it (its own `$$` is a pid of
    // the sandbox's PID namespace, meaningless here).
    let group = children_of(child.id())
        .first()
        .expect("keel runs the tool as its child")
        .parse()
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    (session, ToolGroup(group))
}

/// The pids of the children of `pid`.
pub fn children_of(pid: u32) -> Vec<String> {
    let output = Command::new("pgrep")
        .args(["-P", &pid.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// A tool's process group, orphaned by a killed keel: SIGKILLed on drop.
pub struct ToolGroup(pub i32);

impl Drop for ToolGroup {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0)])
            .stderr(Stdio::null())
            .status();
    }
}

/// The pid (as keel's namespace sees it) of the one process whose command line holds
/// `pattern`: a command's own `$$` is its pid inside its sandbox's PID namespace.
pub fn pid_of(pattern: &str) -> String {
    let output = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .unwrap();
    let found = String::from_utf8_lossy(&output.stdout).into_owned();
    let pids: Vec<&str> = found.lines().collect();
    assert_eq!(pids.len(), 1, "one process matches {pattern:?}: {pids:?}");
    pids[0].to_string()
}

/// The process group of `pid` (`/proc/PID/stat` field 5).
pub fn group_of(pid: &str) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = stat.rsplit_once(") ").unwrap().1;
    after_name
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap()
}

/// Whether process `pid` is gone: no such process, or a zombie waiting for its reaper.
pub fn process_gone(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(") ")
            .next()
            .is_some_and(|rest| rest.starts_with('Z'))
    })
}

/// Fail if any file under `dir` holds `secret`, read as bytes (a database is not UTF-8).
pub fn assert_no_file_holds(dir: &Path, secret: &str) {
    for file in files_under(dir) {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "{} holds a secret",
            file.display()
        );
    }
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// Poll `condition` every 20 ms until it holds; fail, saying what was awaited, if it still does
/// not after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < limit,
            "still waiting after {limit:?} until {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The states of the tool receipts in the home's store, read through a read-only connection
/// (so a running keel is not disturbed); empty while there is no store yet.
pub fn stored_receipt_states(home: &Home) -> Vec<String> {
    let path = home.path().join("state/keel.db");
    if !path.exists() {
        return Vec::new();
    }
    let db =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let mut statement = db.prepare("SELECT state FROM receipts").unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The ids of every session in the home's store, listed or not (a run that failed before any
/// answer is not in `keel sessions`), oldest first.
pub fn stored_session_ids(home: &Home) -> Vec<String> {
    let path = home.path().join("state/keel.db");
    let db =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let mut statement = db
        .prepare("SELECT id FROM sessions ORDER BY created_at, rowid")
        .unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Wait (at most `limit`) for `child` to exit; fails the test naming `what` otherwise.
pub fn wait_for_exit(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < limit,
            "{what} did not exit within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every captured request body, minus the closing bytes of its message list, is a prefix of
/// the next one.
pub fn assert_prefix_stable(requests: &[Value]) {
    for pair in requests.windows(2) {
        let previous = pair[0]["body"].as_str().unwrap();
        let next = pair[1]["body"].as_str().unwrap();
        let stable = previous
            .strip_suffix("]}")
            .expect("a body ends with its message list");
        assert!(
            next.starts_with(stable),
            "request is not an append-only extension:\n{previous}\n---\n{next}"
        );
    }
}

/// `rounds` bash calls, each appending its number to effects.log, then the answer `done`.
/// `keel session show ID --json` (with `extra` arguments such as `--revision N`), parsed.
pub fn session_json(home: &Home, id: &str, extra: &[&str]) -> Value {
    let mut args = vec!["session", "show", id, "--json"];
    args.extend_from_slice(extra);
    let run = home.run(&args);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    serde_json::from_str(&run.stdout()).unwrap()
}

pub fn effect_steps(rounds: usize, done: &str) -> Vec<Value> {
    let mut steps: Vec<Value> = (1..=rounds)
        .map(|n| serde_json::json!({"tool": "bash", "args": {"command": format!("echo {n} >> effects.log")}}))
        .collect();
    steps.push(serde_json::json!({"say": done}));
    steps
}

/// Point `protocol`'s preset in the home's config at a new mock serving `scenario`, with
/// `extra` provider lines (the model changed under a running session, say).
pub fn repoint(
    home: &Home,
    protocol: &str,
    scenario: &str,
    extra: &str,
) -> (tempfile::TempDir, MockProcess) {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockProcess::with_steps(dir.path(), scenario);
    std::fs::write(
        home.path().join("config.toml"),
        config_for(protocol, &mock.base_url, extra),
    )
    .unwrap();
    (dir, mock)
}

/// Every number 1..=rounds appears in effects.log exactly once, in order (`effect_steps`).
pub fn assert_each_effect_once(home: &Home, rounds: usize) {
    let log = std::fs::read_to_string(home.path().join("effects.log")).unwrap();
    let lines: Vec<usize> = log.lines().map(|line| line.parse().unwrap()).collect();
    assert_eq!(
        lines,
        (1..=rounds).collect::<Vec<_>>(),
        "each effect once, in order"
    );
}

/// The text of the last user message in the last request the mock received (Chat protocol).
pub fn last_user_message(mock: &MockProcess) -> String {
    let requests = mock.requests();
    let body: Value =
        serde_json::from_str(requests.last().unwrap()["body"].as_str().unwrap()).unwrap();
    let messages = body["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    without_context(last["content"].as_str().unwrap()).to_string()
}

/// The contents of the tool messages of the last request the mock received (Chat protocol),
/// in order.
pub fn tool_messages(mock: &MockProcess) -> Vec<String> {
    let requests = mock.requests();
    let body: Value =
        serde_json::from_str(requests.last().unwrap()["body"].as_str().unwrap()).unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

/// A user message without the session's context block at its head (the first one has it).
pub fn without_context(message: &str) -> &str {
    match message.split_once("</context>\n\n") {
        Some((head, rest)) if head.starts_with("<context from=\"keel\">") => rest,
        _ => message,
    }
}

/// Whether some request the mock received asked for a summary focused on `focus`.
pub fn asked_to_focus_on(mock: &MockProcess, focus: &str) -> bool {
    let wanted = format!("Focus the summary on: {focus}");
    mock.requests()
        .iter()
        .any(|request| request.to_string().contains(&wanted))
}

/// A child process killed when the test ends, also when it fails (a server left running would
/// hold the test harness's output open).
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The state of each receipt in a `keel session show --json` output, in order.
pub fn receipt_states(shown: &Value) -> Vec<String> {
    shown["receipts"]
        .as_array()
        .expect("a session shows its receipts")
        .iter()
        .map(|receipt| receipt["state"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A directory outside the workspace that a confined command sees but may not write, so that a
/// write there is refused as such ("Read-only file system"): not under `/tmp`, which the
/// sandbox replaces with the session's own (there the path would just be missing). `/var/tmp`
/// where it is usable, else the build's temp dir.
pub fn dir_outside_tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp")
        .or_else(|_| tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")))
        .unwrap()
}

/// A project command `/review` in `home` (also the workspace): `Review a file` is its
/// description, `text` the prompt after the front matter.
pub fn write_review_command(home: &Home, text: &str) {
    let dir = home.path().join(".keel/commands");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("review.md"),
        format!("---\ndescription: Review a file\nallowed-tools: bash\n---\n{text}"),
    )
    .unwrap();
}

/// A scenario running each command with the bash tool in turn, then saying `done`.
pub fn commands_scenario(commands: &[&str]) -> String {
    let mut steps: Vec<Value> = commands
        .iter()
        .map(|command| serde_json::json!({"tool": "bash", "args": {"command": command}}))
        .collect();
    steps.push(serde_json::json!({"say": "done"}));
    serde_json::json!({ "steps": steps }).to_string()
}

/// The state of each tool result of a run, in order.
pub fn result_states(run: &Run) -> Vec<String> {
    run.events_of("tool/result")
        .iter()
        .map(|result| result["state"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The parent starts two `general` subagents ("make a", "make b"), each running a command that
/// needs approval in `ask` mode (`touch a.txt`, `touch b.txt`) and answering after
/// `answer_delay_ms`; then the parent says "Both files made.".
pub fn two_children_asking(answer_delay_ms: u64) -> serde_json::Value {
    let child = |name: &str| {
        serde_json::json!({"when": {"contains": format!("MARK-{}", name.to_uppercase())}, "steps": [
            {"tool": "bash", "args": {"command": format!("touch {name}.txt")}, "delay_ms": 200},
            {"say": format!("Made {name}."), "delay_ms": answer_delay_ms}
        ]})
    };
    serde_json::json!({
        "steps": [
            {"tools": [
                {"tool": "task", "args": {"agent": "general", "description": "make a", "prompt": "MARK-A touch a"}},
                {"tool": "task", "args": {"agent": "general", "description": "make b", "prompt": "MARK-B touch b"}}
            ]},
            {"say": "Both files made."}
        ],
        "conversations": [child("a"), child("b")]
    })
}
