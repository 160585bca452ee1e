//! The hub against real MCP servers from npm (`crates/keel-mcp/e2e`, installed by `.ci/run`
//! with `npm ci`): `@modelcontextprotocol/server-everything` over stdio, and servers that fail
//! in every way a server can fail at start-up.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_mcp::{McpHub, ServerConfig, StartOptions, Transport};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn e2e() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e")
}

fn everything_js() -> PathBuf {
    e2e().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// Whether the servers are installed; under CI they must be.
fn servers_available() -> bool {
    let found = everything_js().exists()
        && std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have node and `npm ci` in crates/keel-mcp/e2e"
        );
        eprintln!(
            "skipped: node or the npm MCP servers are missing (npm ci in crates/keel-mcp/e2e)"
        );
    }
    found
}

fn stdio(name: &str, command: &str, args: &[&str], env: &[(&str, &str)]) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        transport: Transport::Stdio {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            cwd: None,
        },
        trust_read_only: false,
        origin: "test".into(),
        from_workspace: false,
        literal_values: false,
    }
}

fn options(timeout: Duration) -> StartOptions {
    StartOptions {
        base_env: StartOptions::base_env_from_process(),
        lookup: std::sync::Arc::new(|name| {
            (name == "DECLARED_TOKEN").then(|| "declared-value".to_string())
        }),
        start_timeout: timeout,
        first_wait: timeout,
        workspace: std::env::temp_dir(),
    }
}

#[tokio::test]
async fn everything_over_stdio_lists_tools_in_order_and_answers_calls() {
    if !servers_available() {
        return;
    }
    let script = everything_js();
    let server = stdio(
        "every",
        "node",
        &[script.to_str().unwrap(), "stdio"],
        &[("DECLARED", "$DECLARED_TOKEN")],
    );
    let hub = McpHub::start(vec![server], &options(Duration::from_secs(30))).await;
    let statuses = hub.statuses();
    assert_eq!(statuses[0].state, "running", "{statuses:?}");
    let tools = hub.tools();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "listed by tool name");
    assert!(names.contains(&"mcp__every__echo"), "{names:?}");
    // The same servers give the same bytes.
    let again = serde_json::to_string(&hub.specs()).unwrap();
    assert_eq!(serde_json::to_string(&hub.specs()).unwrap(), again);

    let echo = hub
        .call(
            "mcp__every__echo",
            json!({"message": "hi there"}),
            Duration::from_secs(10),
        )
        .await;
    assert!(!echo.is_error, "{echo:?}");
    assert!(echo.content.contains("hi there"), "{}", echo.content);

    let sum = hub
        .call(
            "mcp__every__get-structured-content",
            json!({"location": "New York"}),
            Duration::from_secs(10),
        )
        .await;
    assert!(!sum.is_error, "{sum:?}");
    assert!(
        sum.content.contains("temperature") || sum.content.contains("weather"),
        "{}",
        sum.content
    );

    let image = hub
        .call(
            "mcp__every__get-tiny-image",
            json!({}),
            Duration::from_secs(10),
        )
        .await;
    assert!(
        image.content.contains("[image (image/png"),
        "{}",
        image.content
    );
    assert!(image.content.len() < 2000, "no base64 for the model");

    // The server sees its declared variables, and nothing of keel's own environment.
    let env = hub
        .call("mcp__every__get-env", json!({}), Duration::from_secs(10))
        .await;
    assert!(env.content.contains("declared-value"), "{}", env.content);
    for (name, _) in std::env::vars() {
        if !(matches!(name.as_str(), "PATH" | "HOME" | "LANG" | "LANGUAGE" | "TZ")
            || name.starts_with("LC_"))
        {
            assert!(
                !env.content.contains(&format!("\"{name}\"")),
                "`{name}` leaked into the server's environment"
            );
        }
    }

    let unknown = hub
        .call("mcp__every__nope", json!({}), Duration::from_secs(10))
        .await;
    assert!(unknown.is_error && unknown.content.contains("no MCP tool"));

    let slow = hub
        .call(
            "mcp__every__trigger-long-running-operation",
            json!({"duration": 30, "steps": 3}),
            Duration::from_millis(700),
        )
        .await;
    assert!(
        slow.is_error && slow.content.contains("did not answer within"),
        "{slow:?}"
    );
    // The server is still usable after a timed-out call.
    let after = hub
        .call(
            "mcp__every__echo",
            json!({"message": "still here"}),
            Duration::from_secs(10),
        )
        .await;
    assert!(after.content.contains("still here"), "{after:?}");
}

#[tokio::test]
async fn servers_that_cannot_start_are_reported_by_name_and_the_rest_go_on() {
    if !servers_available() {
        return;
    }
    let script = everything_js();
    let servers = vec![
        stdio("missing", "keel-no-such-mcp-server", &[], &[]),
        stdio(
            "garbage",
            "sh",
            &["-c", "echo 'this is not JSON-RPC'; echo oops >&2; sleep 30"],
            &[],
        ),
        stdio(
            "silent",
            "sh",
            &["-c", "echo waiting for nothing >&2; sleep 30"],
            &[],
        ),
        stdio(
            "exits",
            "sh",
            &["-c", "echo cannot open the database >&2; exit 3"],
            &[],
        ),
        stdio(
            "needs-var",
            "node",
            &[script.to_str().unwrap()],
            &[("X", "$UNSET_FOR_KEEL_TEST")],
        ),
        stdio("every", "node", &[script.to_str().unwrap(), "stdio"], &[]),
    ];
    let started = std::time::Instant::now();
    let mut options = options(Duration::from_secs(3));
    options.first_wait = Duration::from_secs(10);
    let hub = McpHub::start(servers, &options).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "started in parallel"
    );
    let statuses = hub.statuses();
    let by_name = |name: &str| statuses.iter().find(|s| s.name == name).unwrap();
    assert_eq!(by_name("every").state, "running");
    let missing = by_name("missing");
    assert_eq!(missing.state, "failed");
    assert!(
        missing
            .reason
            .as_deref()
            .unwrap()
            .contains("could not be started"),
        "{missing:?}"
    );
    let exits = by_name("exits").reason.clone().unwrap();
    assert!(
        exits.contains("cannot open the database"),
        "the stderr tail: {exits}"
    );
    assert!(
        by_name("silent")
            .reason
            .clone()
            .unwrap()
            .contains("within 3 s")
    );
    assert_eq!(by_name("garbage").state, "failed");
    assert!(
        by_name("needs-var")
            .reason
            .clone()
            .unwrap()
            .contains("`UNSET_FOR_KEEL_TEST` is not set")
    );
    assert!(hub.tools().iter().all(|tool| tool.server == "every"));
}

#[tokio::test]
async fn a_call_past_its_timeout_is_cancelled_at_the_server() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("cancelled.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/slow-mcp-server.mjs");
    let server = stdio(
        "slow",
        "node",
        &[script.to_str().unwrap(), record.to_str().unwrap()],
        &[],
    );
    let hub = McpHub::start(vec![server], &options(Duration::from_secs(30))).await;
    let output = hub
        .call("mcp__slow__wait", json!({}), Duration::from_millis(300))
        .await;
    assert!(
        output.is_error && output.content.contains("was cancelled"),
        "{output:?}"
    );
    let started = std::time::Instant::now();
    while !record.exists() && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let heard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert!(
        heard.get("requestId").is_some(),
        "the server was told: {heard}"
    );
}

#[tokio::test]
async fn everything_over_streamable_http_answers_calls() {
    if !servers_available() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new("node")
        .arg(everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the HTTP server did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let server = ServerConfig {
        name: "web".into(),
        transport: Transport::Http {
            url: format!("http://127.0.0.1:{port}/mcp"),
            headers: BTreeMap::from([("X-Keel-Test".to_string(), "$DECLARED_TOKEN".to_string())]),
        },
        trust_read_only: false,
        origin: "test".into(),
        from_workspace: false,
        literal_values: false,
    };
    let hub = McpHub::start(vec![server], &options(Duration::from_secs(20))).await;
    assert_eq!(hub.statuses()[0].state, "running", "{:?}", hub.statuses());
    let echo = hub
        .call(
            "mcp__web__echo",
            json!({"message": "over http"}),
            Duration::from_secs(10),
        )
        .await;
    assert!(echo.content.contains("over http"), "{echo:?}");
    let _ = child.kill().await;
}

#[tokio::test]
async fn a_late_server_joins_and_a_changed_tool_list_is_read_again_on_refresh() {
    if !servers_available() {
        return;
    }
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/changing-mcp-server.mjs");
    let servers = vec![
        stdio("late", "node", &[script.to_str().unwrap(), "late"], &[]),
        stdio("quick", "node", &[script.to_str().unwrap()], &[]),
    ];
    let mut options = options(Duration::from_secs(20));
    options.first_wait = Duration::from_millis(700);
    let started = std::time::Instant::now();
    let hub = McpHub::start(servers, &options).await;
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "the slow server did not hold the session"
    );
    let state = |hub: &McpHub, name: &str| {
        hub.statuses()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap()
            .state
    };
    assert_eq!(state(&hub, "late"), "starting");
    assert_eq!(state(&hub, "quick"), "running");
    let names = |hub: &McpHub| hub.tools().into_iter().map(|t| t.name).collect::<Vec<_>>();
    assert_eq!(names(&hub), ["mcp__quick__grow"]);
    let waited = std::time::Instant::now();
    while state(&hub, "late") != "running" && waited.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        names(&hub),
        ["mcp__late__grow", "mcp__quick__grow"],
        "it joined"
    );
    // A call makes the server announce a new tool; the list changes only on refresh.
    let grown = hub
        .call("mcp__quick__grow", json!({}), Duration::from_secs(10))
        .await;
    assert!(grown.content.contains("grown"), "{grown:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(names(&hub).len(), 2, "unchanged until the turn boundary");
    assert!(hub.refresh().await);
    assert_eq!(
        names(&hub),
        ["mcp__late__grow", "mcp__quick__extra", "mcp__quick__grow"]
    );
    assert!(!hub.refresh().await, "nothing new");
}

/// Whether `pid` is a live process (a zombie waiting for its reaper is not).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(") ")
            .next()
            .is_some_and(|rest| !rest.starts_with('Z'))
    })
}

#[tokio::test]
async fn what_a_server_started_dies_with_its_connection() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/with-grandchild.sh");
    let server = stdio(
        "shell",
        "sh",
        &[script.to_str().unwrap()],
        &[("GRANDCHILD_PIDFILE", pidfile.to_str().unwrap())],
    );
    let hub = McpHub::start(vec![server], &options(Duration::from_secs(20))).await;
    assert_eq!(hub.statuses()[0].state, "running", "{:?}", hub.statuses());
    let grandchild = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    assert!(alive(&grandchild), "the server's own child runs");
    drop(hub);
    let waited = std::time::Instant::now();
    while alive(&grandchild) && waited.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !alive(&grandchild),
        "the server's child outlived the session"
    );
}
