//! MCP tools and the request prefix: a server's changed tool list changes the requests only at
//! the next turn boundary, and that break is named (`prefix/changed`, `mcp_tools_changed`).

use crate::common::*;
use keel_agent::{Input, TurnOutcome};
use keel_mcp::{McpHub, ServerConfig, StartOptions, Transport};
use keel_mock::{MockServer, Scenario};
use keel_types::EventBody;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn changing_server() -> ServerConfig {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../keel-mcp/tests/fixtures/changing-mcp-server.mjs");
    ServerConfig {
        name: "quick".into(),
        transport: Transport::Stdio {
            command: "node".into(),
            args: vec![script.display().to_string()],
            env: Default::default(),
            cwd: None,
        },
        trust_read_only: false,
        origin: "test".into(),
        from_workspace: false,
        literal_values: false,
        sandbox: keel_sandbox::ServerConfinement::default(),
    }
}

/// The changing server in its `late` mode: it answers `initialize` only once `gate` exists.
fn late_server(gate: &Path) -> ServerConfig {
    let mut late = changing_server();
    if let Transport::Stdio { args, .. } = &mut late.transport {
        args.extend(["late".to_string(), gate.display().to_string()]);
    }
    late
}

/// A new session, opened as soon as its one server (the late one, its gate closed) was
/// launched, against a model that says "one".
struct LateSession {
    server: MockServer,
    gate: std::path::PathBuf,
    controller: keel_agent::Controller,
    _host: keel_agent::Host,
    _dir: tempfile::TempDir,
}

async fn late_session() -> LateSession {
    let scenario = Scenario::parse(r#"{"steps": [{"say": "one"}]}"#).unwrap();
    let server = MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let hub = McpHub::launch(vec![late_server(&gate)], &start_options(dir.path()));
    let settings = settings_for(&server.base_url(), dir.path());
    let host = keel_agent::Host::open(&dir.path().join("keel.db")).unwrap();
    let controller = open_with_hub(&host, settings, hub);
    LateSession {
        server,
        gate,
        controller,
        _host: host,
        _dir: dir,
    }
}

/// Servers started for `workspace`, 20 s to start, nothing of keel's environment passed on.
fn start_options(workspace: &Path) -> StartOptions {
    StartOptions {
        base_env: StartOptions::base_env_from_process(),
        lookup: Arc::new(|_| None),
        start_timeout: Duration::from_secs(20),
        first_wait: Duration::from_secs(20),
        workspace: workspace.to_path_buf(),
        sandbox: None,
    }
}

/// Fail, saying what to install, when node is missing. Without it this test is ignored
/// (`keel_e2e_node` unset); under CI it runs regardless, and fails here.
fn require_node() {
    assert!(
        std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "this test needs node on PATH (.ci/run installs it)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(keel_e2e_node),
    ignore = "needs node on PATH (.ci/run installs it)"
)]
async fn a_changed_tool_list_changes_the_prefix_only_at_the_next_turn_and_says_so() {
    require_node();
    let scenario = Scenario::parse(
        r#"{"steps": [{"tool": "mcp__quick__grow", "args": {}}, {"say": "one"}, {"say": "two"}]}"#,
    )
    .unwrap();
    let server = MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = start_options(dir.path());
    let hub = McpHub::start(vec![changing_server()], &options).await;
    let settings = settings_for(&server.base_url(), dir.path());
    let host = keel_agent::Host::open(&dir.path().join("keel.db")).unwrap();
    let controller = open_with_hub(&host, settings, hub);
    let mut events = controller.subscribe();

    let first = controller
        .submit(Input::Prompt("grow".into()))
        .await
        .unwrap();
    assert!(matches!(first, TurnOutcome::Completed { .. }), "{first:?}");
    let second = controller
        .submit(Input::Prompt("again".into()))
        .await
        .unwrap();
    assert!(
        matches!(second, TurnOutcome::Completed { .. }),
        "{second:?}"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let stable = requests[0].body.strip_suffix("]}").unwrap();
    assert!(
        requests[1].body.starts_with(stable),
        "the same tools for the whole first turn, though the server changed its list"
    );
    assert!(!requests[1].body.contains("mcp__quick__extra"));
    assert!(
        requests[2].body.contains("mcp__quick__extra"),
        "the new tool from the next turn"
    );
    let mut breaks = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let EventBody::PrefixChanged { reason } = &event.body {
            breaks.push((event.turn, reason.clone()));
        }
    }
    assert_eq!(breaks, [(Some(2), "mcp_tools_changed".to_string())]);
}

/// A session opened while its server is still starting (the live TUI draws first): its first
/// request waits for the server and offers its tools, and that is no change of a prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(keel_e2e_node),
    ignore = "needs node on PATH (.ci/run installs it)"
)]
async fn a_session_opened_before_its_server_is_up_offers_its_tools_from_the_first_request() {
    require_node();
    let LateSession {
        server,
        gate,
        controller,
        _host,
        _dir,
    } = late_session().await;
    let mut events = controller.subscribe();
    let opener = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        std::fs::write(gate, "").unwrap();
    });
    let first = controller.submit(Input::Prompt("hi".into())).await.unwrap();
    assert!(matches!(first, TurnOutcome::Completed { .. }), "{first:?}");
    opener.await.unwrap();
    let requests = server.requests();
    assert!(requests[0].body.contains("mcp__quick__grow"), "it waited");
    while let Ok(event) = events.try_recv() {
        assert!(
            !matches!(event.body, EventBody::PrefixChanged { .. }),
            "no prefix was sent before: {event:?}"
        );
    }
}

/// Esc while the first request waits for a server still starting: the turn ends at once,
/// cancelled, and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(keel_e2e_node),
    ignore = "needs node on PATH (.ci/run installs it)"
)]
async fn a_cancel_ends_the_wait_for_a_starting_server() {
    require_node();
    // The gate is never opened.
    let LateSession {
        server,
        controller,
        _host,
        _dir,
        ..
    } = late_session().await;
    let canceller = {
        let controller = controller.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            controller.cancel();
        })
    };
    let started = std::time::Instant::now();
    let outcome = controller.submit(Input::Prompt("hi".into())).await.unwrap();
    canceller.await.unwrap();
    assert!(matches!(outcome, TurnOutcome::Cancelled), "{outcome:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "it waited {:?} of the 20 s",
        started.elapsed()
    );
    assert!(server.requests().is_empty());
}

/// Read-only calls of one message run at once, proven by a barrier rather than by timing:
/// three servers (calls to one server are one at a time), each answering `meet` only once all
/// three calls are waiting. Run one after another, each would meet only itself, after 20 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(keel_e2e_node),
    ignore = "needs node on PATH (.ci/run installs it)"
)]
async fn trusted_read_only_calls_of_one_message_run_at_once() {
    require_node();
    let names = ["one", "two", "three"];
    let steps = vec![
        keel_mock::Step::Tools {
            calls: names
                .iter()
                .map(|name| keel_mock::ScriptedCall {
                    name: format!("mcp__{name}__meet"),
                    arguments: "{}".into(),
                })
                .collect(),
            reason: None,
            finish_reason: None,
        },
        keel_mock::Step::Say {
            text: "all met".into(),
            reason: None,
            finish_reason: None,
            usage: None,
        },
    ];
    let server = MockServer::start(([127, 0, 0, 1], 0).into(), Scenario::from_steps(steps))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let met = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../keel-mcp/tests/fixtures/barrier-mcp-server.mjs");
    let barrier = |name: &str| ServerConfig {
        name: name.into(),
        transport: Transport::Stdio {
            command: "node".into(),
            args: vec![
                script.display().to_string(),
                met.path().display().to_string(),
                "3".into(),
            ],
            env: Default::default(),
            cwd: None,
        },
        trust_read_only: true,
        origin: "test".into(),
        from_workspace: false,
        literal_values: false,
        sandbox: keel_sandbox::ServerConfinement::default(),
    };
    let options = start_options(dir.path());
    let hub = McpHub::start(names.iter().map(|name| barrier(name)).collect(), &options).await;
    let settings = settings_for(&server.base_url(), dir.path());
    let host = keel_agent::Host::open(&dir.path().join("keel.db")).unwrap();
    let controller = open_with_hub(&host, settings, hub);
    let outcome = controller
        .submit(Input::Prompt("meet".into()))
        .await
        .unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].body.matches("met 3").count(),
        3,
        "all three calls waited at once: {}",
        requests[1].body
    );
}
