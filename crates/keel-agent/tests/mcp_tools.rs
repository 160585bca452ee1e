//! MCP tools and the request prefix: a server's changed tool list changes the requests only at
//! the next turn boundary, and that break is named (`prefix/changed`, `mcp_tools_changed`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use keel_agent::{Input, SessionChoice, TurnOutcome};
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
    }
}

fn node_available() -> bool {
    let found = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(std::env::var_os("CI").is_none(), "CI must have node");
        eprintln!("skipped: node is missing");
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_changes_the_prefix_only_at_the_next_turn_and_says_so() {
    if !node_available() {
        return;
    }
    let scenario = Scenario::parse(
        r#"{"steps": [{"tool": "mcp__quick__grow", "args": {}}, {"say": "one"}, {"say": "two"}]}"#,
    )
    .unwrap();
    let server = MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = StartOptions {
        base_env: StartOptions::base_env_from_process(),
        lookup: Arc::new(|_| None),
        start_timeout: Duration::from_secs(20),
        first_wait: Duration::from_secs(20),
        workspace: dir.path().to_path_buf(),
    };
    let hub = McpHub::start(vec![changing_server()], &options).await;
    let mut settings = settings_for(&server.base_url(), dir.path());
    settings.mcp = Arc::new(hub);
    let host = keel_agent::Host::open(&dir.path().join("keel.db")).unwrap();
    let controller = open(&host, SessionChoice::New, settings);
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
