//! A controller against an in-process `keel mock`, for the agent's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_agent::{AgentSettings, Controller, HeadlessApprover, Host, SessionChoice};
use keel_llm::profile::{Account, DEFAULT_CONNECT_TIMEOUT};
use keel_llm::{KeySource, ProviderProfile, RetryPolicy};
use keel_mock::{MockServer, Scenario};
use keel_tools::{PermissionMode, PermissionPolicy};
use keel_types::{EventBody, ReasoningProtocol, WireProtocol};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub struct Key;
impl KeySource for Key {
    fn key(&self, _: &str) -> Option<String> {
        Some("k".into())
    }
}

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub workspace: std::path::PathBuf,
    pub host: Host,
    pub controller: Controller,
    pub server: MockServer,
}

pub async fn fixture(scenario: Scenario) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let server = MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
        .await
        .unwrap();
    let settings = settings_for(&server.base_url(), &workspace);
    let host = Host::open(&dir.path().join("keel.db")).unwrap();
    let controller = open(&host, SessionChoice::New, settings);
    Fixture {
        _dir: dir,
        workspace,
        host,
        controller,
        server,
    }
}

/// Settings for a session in `workspace` against a mock at `base_url`, in mode `auto`.
pub fn settings_for(base_url: &str, workspace: &Path) -> AgentSettings {
    let profile = ProviderProfile {
        name: "deepseek".into(),
        protocol: WireProtocol::Chat,
        base_url: base_url.to_string(),
        base_url_setting: String::new(),
        accounts: vec![Account {
            name: "default".into(),
            api_key_env: "K".into(),
        }],
        reasoning_protocol: ReasoningProtocol::Deepseek,
        retry: RetryPolicy::default(),
        idle_timeout: Duration::from_secs(60),
        connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        max_output_tokens: 256,
        native_web_search: false,
        max_event_bytes: keel_llm::profile::DEFAULT_MAX_EVENT_BYTES,
        context_window: None,
        price: None,
        region: None,
        reasoning_effort: None,
    };
    AgentSettings {
        profile,
        model: "m".into(),
        policy: PermissionPolicy::mode_only(PermissionMode::Auto),
        max_rounds: 10,
        compact_at: 0.85,
        workspace: workspace.to_path_buf(),
        extra_dirs: vec![],
        holder: "test".into(),
        secrets: Default::default(),
        untrusted: Vec::new(),
        // Commands run confined, as in every session (the workspace doubles as keel's home).
        sandbox: Some(keel_agent::SandboxSetup {
            settings: Default::default(),
            keel_home: workspace.to_path_buf(),
            home: None,
            referenced_files: Vec::new(),
        }),
        context: Default::default(),
        checkpoint_max_bytes: 256 * 1024 * 1024,
        action_policy: false,
        subagents: keel_agent::SubagentLimits::default(),
    }
}

/// What a test's surface hands over: the test key and an approver that approves everything.
pub fn surface() -> keel_agent::SurfaceServices {
    keel_agent::SurfaceServices::new(
        Arc::new(Key),
        Arc::new(HeadlessApprover { approve_all: true }),
    )
}

/// A controller on `host` that approves everything.
pub fn open(host: &Host, choice: SessionChoice, settings: AgentSettings) -> Controller {
    host.open_session(choice, settings, surface()).unwrap()
}

/// A step that answers `text`.
pub fn say(text: &str) -> keel_mock::Step {
    keel_mock::Step::Say {
        text: text.into(),
        reason: None,
        finish_reason: None,
        usage: None,
    }
}

/// A step that calls `bash` with `command`.
pub fn bash(command: &str) -> keel_mock::Step {
    keel_mock::Step::Tools {
        calls: vec![keel_mock::ScriptedCall {
            name: "bash".into(),
            arguments: serde_json::json!({ "command": command }).to_string(),
        }],
        reason: None,
        finish_reason: None,
    }
}

/// A child agent of the fixture's controller, in its workspace on its services, following it.
pub fn child_of(f: &Fixture) -> Controller {
    let child = f
        .host
        .open_agent(
            f.controller.services(),
            SessionChoice::New,
            settings_for(&f.server.base_url(), &f.workspace),
        )
        .unwrap();
    child.follow(&f.controller).unwrap();
    child
}

/// A controller on `host` whose session has `hub`'s MCP servers.
pub fn open_with_hub(host: &Host, settings: AgentSettings, hub: keel_mcp::McpHub) -> Controller {
    let surface = keel_agent::SurfaceServices {
        mcp: Arc::new(hub),
        ..surface()
    };
    host.open_session(SessionChoice::New, settings, surface)
        .unwrap()
}

pub async fn wait_for(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<keel_types::Event>,
    wanted: fn(&EventBody) -> bool,
) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = events.recv().await {
            if wanted(&event.body) {
                return;
            }
        }
    })
    .await
    .expect("the event came");
}

/// Wait (at most 10 s) until `condition` holds, checking every few milliseconds.
pub async fn wait_until(condition: impl Fn() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the condition came true");
}
