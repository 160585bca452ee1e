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

/// Fail, saying what to install, when node or the npm servers are missing. Without them these
/// tests are ignored (`keel_e2e_node`, `keel_e2e_mcp` unset); under CI they run regardless,
/// and fail here.
fn require_node() {
    assert!(
        std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "this test needs node on PATH (.ci/run installs it)"
    );
}

fn require_servers() {
    require_node();
    assert!(
        everything_js().exists(),
        "this test needs `npm ci` in crates/keel-mcp/e2e (.ci/run does it)"
    );
}

/// Poll `condition` until it holds; fail naming `what` if it still does not after 20 s (a
/// guard against hanging, not a bound on how long anything should take).
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "still waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
        sandbox: keel_sandbox::ServerConfinement::default(),
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
        sandbox: None,
    }
}

#[tokio::test]
#[cfg_attr(
    not(keel_e2e_mcp),
    ignore = "needs node and `npm ci` in crates/keel-mcp/e2e (.ci/run does it)"
)]
async fn everything_over_stdio_lists_tools_in_order_and_answers_calls() {
    require_servers();
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
    // The same servers, started again, give the same bytes (the request prefix depends on it).
    let second = McpHub::start(
        vec![stdio(
            "every",
            "node",
            &[script.to_str().unwrap(), "stdio"],
            &[("DECLARED", "$DECLARED_TOKEN")],
        )],
        &options(Duration::from_secs(30)),
    )
    .await;
    assert_eq!(
        serde_json::to_string(&second.specs()).unwrap(),
        serde_json::to_string(&hub.specs()).unwrap()
    );
    drop(second);

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
#[cfg_attr(
    not(keel_e2e_mcp),
    ignore = "needs node and `npm ci` in crates/keel-mcp/e2e (.ci/run does it)"
)]
async fn servers_that_cannot_start_are_reported_by_name_and_the_rest_go_on() {
    require_servers();
    let script = everything_js();
    let met = tempfile::tempdir().unwrap();
    // A shell line: say `me` started, wait (up to 20 s) until `other` has started too, and
    // record that it did. Started one after the other, `silent` would time out (3 s) before
    // `garbage` began: both meeting proves the starts overlap.
    let meets = |me: &str, other: &str| {
        let dir = met.path().display();
        format!(
            "touch {dir}/{me}.started; n=0; while [ ! -e {dir}/{other}.started ] && [ $n -lt 400 ]; \
             do sleep 0.05; n=$((n+1)); done; [ -e {dir}/{other}.started ] && touch {dir}/{me}.met; \
             echo waiting for nothing >&2; sleep 30"
        )
    };
    let servers = vec![
        stdio("missing", "keel-no-such-mcp-server", &[], &[]),
        stdio(
            "garbage",
            "sh",
            &[
                "-c",
                &format!(
                    "{}; echo 'this is not JSON-RPC'; echo oops >&2; sleep 30",
                    meets("garbage", "silent")
                ),
            ],
            &[],
        ),
        stdio("silent", "sh", &["-c", &meets("silent", "garbage")], &[]),
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
    let mut options = options(Duration::from_secs(3));
    options.first_wait = Duration::from_secs(10);
    let hub = McpHub::start(servers, &options).await;
    for name in ["silent", "garbage"] {
        assert!(
            met.path().join(format!("{name}.met")).exists(),
            "`{name}` saw the other start: the servers start in parallel"
        );
    }
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
#[cfg_attr(
    not(keel_e2e_node),
    ignore = "needs node on PATH (.ci/run installs it)"
)]
async fn a_call_past_its_timeout_is_cancelled_at_the_server() {
    require_node();
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
    wait_until("the server hears of the cancellation", || record.exists()).await;
    let heard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert!(
        heard.get("requestId").is_some(),
        "the server was told: {heard}"
    );
}

#[tokio::test]
#[cfg_attr(
    not(keel_e2e_mcp),
    ignore = "needs node and `npm ci` in crates/keel-mcp/e2e (.ci/run does it)"
)]
async fn everything_over_streamable_http_answers_calls() {
    require_servers();
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
    wait_until("the HTTP server listens", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
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
        sandbox: keel_sandbox::ServerConfinement::default(),
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
#[cfg_attr(
    not(keel_e2e_node),
    ignore = "needs node on PATH (.ci/run installs it)"
)]
async fn a_late_server_joins_and_a_changed_tool_list_is_read_again_on_refresh() {
    require_node();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/changing-mcp-server.mjs");
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let servers = vec![
        stdio(
            "late",
            "node",
            &[script.to_str().unwrap(), "late", gate.to_str().unwrap()],
            &[],
        ),
        stdio("quick", "node", &[script.to_str().unwrap()], &[]),
    ];
    let mut options = options(Duration::from_secs(20));
    options.first_wait = Duration::from_millis(700);
    // The late server answers only once the gate opens, so a hub that waited for every server
    // would never return (the guard below says so).
    let hub = tokio::time::timeout(Duration::from_secs(20), McpHub::start(servers, &options))
        .await
        .expect("the late server held the session");
    let state = |hub: &McpHub, name: &str| {
        hub.statuses()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap()
            .state
    };
    assert!(dir.path().join("gate.asked").exists(), "it was asked");
    assert_eq!(state(&hub, "late"), "starting");
    assert_eq!(state(&hub, "quick"), "running");
    let names = |hub: &McpHub| hub.tools().into_iter().map(|t| t.name).collect::<Vec<_>>();
    assert_eq!(names(&hub), ["mcp__quick__grow"]);
    std::fs::write(&gate, "").unwrap();
    wait_until("the late server runs", || state(&hub, "late") == "running").await;
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
    wait_until("the change is announced", || {
        hub.announced_changes() == ["quick"]
    })
    .await;
    assert_eq!(names(&hub).len(), 2, "unchanged until the turn boundary");
    assert!(hub.refresh().await);
    assert_eq!(
        names(&hub),
        ["mcp__late__grow", "mcp__quick__extra", "mcp__quick__grow"]
    );
    assert!(hub.announced_changes().is_empty());
    assert!(!hub.refresh().await, "nothing new");
}

#[tokio::test]
#[cfg_attr(
    not(keel_e2e_node),
    ignore = "needs node on PATH (.ci/run installs it)"
)]
async fn a_launched_hub_returns_at_once_and_the_first_start_waits_until_its_servers_settle() {
    require_node();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/changing-mcp-server.mjs");
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let late = || {
        vec![stdio(
            "late",
            "node",
            &[script.to_str().unwrap(), "late", gate.to_str().unwrap()],
            &[],
        )]
    };
    let state = |hub: &McpHub| hub.statuses()[0].state;
    // Launched: nothing waited for; the first request would.
    let hub = McpHub::launch(late(), &options(Duration::from_secs(20)));
    assert_eq!(state(&hub), "starting");
    assert!(hub.first_start_pending());
    let opener = {
        let gate = gate.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            std::fs::write(gate, "").unwrap();
        })
    };
    tokio::time::timeout(Duration::from_secs(20), hub.first_start())
        .await
        .expect("the first start ends when the server is up");
    assert_eq!(state(&hub), "running", "it waited for the server");
    assert!(!hub.first_start_pending());
    opener.await.unwrap();
    // A server that never comes up is waited for until `first_wait` after the launch only.
    std::fs::remove_file(&gate).unwrap();
    let mut options = options(Duration::from_secs(20));
    options.first_wait = Duration::from_millis(400);
    let hub = McpHub::launch(late(), &options);
    let started = std::time::Instant::now();
    hub.first_start().await;
    assert!(started.elapsed() >= Duration::from_millis(350));
    assert_eq!(state(&hub), "starting");
    assert!(!hub.first_start_pending(), "the wait is over");
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
#[cfg_attr(
    not(keel_e2e_node),
    ignore = "needs node on PATH (.ci/run installs it)"
)]
async fn what_a_server_started_dies_with_its_connection() {
    require_node();
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
    wait_until("the server's child is gone with the session", || {
        !alive(&grandchild)
    })
    .await;
}
