//! Cancellation through the controller: nothing late is committed, running tools are killed,
//! every call still gets a result.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_agent::{AgentSettings, Controller, HeadlessApprover, SessionChoice, TurnOutcome};
use keel_llm::profile::{Account, DEFAULT_CONNECT_TIMEOUT};
use keel_llm::{KeySource, ProviderProfile, RetryPolicy};
use keel_mock::{Fault, MockServer, Scenario, ScriptedCall, Step};
use keel_store::Store;
use keel_tools::{PermissionMode, PermissionPolicy};
use keel_types::{EventBody, Item, ReasoningProtocol, ReceiptState, WireProtocol};
use std::sync::Arc;
use std::time::Duration;

struct Key;
impl KeySource for Key {
    fn key(&self, _: &str) -> Option<String> {
        Some("k".into())
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    workspace: std::path::PathBuf,
    store: Store,
    controller: Controller,
    server: MockServer,
}

async fn fixture(scenario: Scenario) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let server = MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
        .await
        .unwrap();
    let profile = ProviderProfile {
        name: "deepseek".into(),
        protocol: WireProtocol::Chat,
        base_url: server.base_url(),
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
    };
    let settings = AgentSettings {
        profile,
        model: "m".into(),
        policy: PermissionPolicy::mode_only(PermissionMode::Auto),
        max_rounds: 10,
        workspace: workspace.clone(),
        extra_dirs: vec![],
        holder: "test".into(),
        secrets: Default::default(),
    };
    let store = Store::open(&dir.path().join("keel.db")).unwrap();
    let controller = Controller::open(
        store.clone(),
        SessionChoice::New,
        settings,
        Arc::new(Key),
        Arc::new(HeadlessApprover { approve_all: true }),
    )
    .unwrap();
    Fixture {
        _dir: dir,
        workspace,
        store,
        controller,
        server,
    }
}

async fn wait_for(
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

#[tokio::test]
async fn cancelling_mid_stream_commits_nothing_even_after_the_reply_would_have_finished() {
    let mut scenario = Scenario::from_steps(vec![Step::Say {
        text: "a slow answer that streams for a while".into(),
        reason: None,
        finish_reason: None,
    }]);
    scenario.chunk_delay = Duration::from_millis(150);
    let f = fixture(scenario).await;
    let mut events = f.controller.subscribe();
    let controller = f.controller.clone();
    let turn = tokio::spawn(async move { controller.submit("hi").await });
    wait_for(&mut events, |body| {
        matches!(body, EventBody::LlmText { .. })
    })
    .await;
    f.controller.cancel();
    assert_eq!(turn.await.unwrap().unwrap(), TurnOutcome::Cancelled);
    tokio::time::sleep(Duration::from_millis(1500)).await; // the stream would have ended by now
    let items: Vec<Item> = f
        .store
        .items(&f.controller.session().id)
        .unwrap()
        .into_iter()
        .map(|s| s.item.unwrap())
        .collect();
    assert_eq!(
        items,
        [Item::User { text: "hi".into() }],
        "no late assistant message"
    );
    assert!(!f.controller.is_busy());
}

#[tokio::test]
async fn cancelling_a_running_tool_kills_it_and_settles_every_call() {
    let calls = vec![
        ScriptedCall {
            name: "bash".into(),
            arguments: r#"{"command":"sleep 3; touch finished"}"#.into(),
        },
        ScriptedCall {
            name: "bash".into(),
            arguments: r#"{"command":"touch second"}"#.into(),
        },
    ];
    let scenario = Scenario::from_steps(vec![
        Step::Tools {
            calls,
            reason: None,
            finish_reason: None,
        },
        Step::Say {
            text: "never requested".into(),
            reason: None,
            finish_reason: None,
        },
    ]);
    let f = fixture(scenario).await;
    let mut events = f.controller.subscribe();
    let controller = f.controller.clone();
    let turn = tokio::spawn(async move { controller.submit("go").await });
    wait_for(&mut events, |body| {
        matches!(body, EventBody::ToolCall { .. })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    f.controller.cancel();
    assert_eq!(turn.await.unwrap().unwrap(), TurnOutcome::Cancelled);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(
        !f.workspace.join("finished").exists(),
        "the running command was killed"
    );
    assert!(
        !f.workspace.join("second").exists(),
        "the next call never started"
    );
    let states: Vec<ReceiptState> = f
        .store
        .receipts(&f.controller.session().id)
        .unwrap()
        .iter()
        .map(|r| r.state)
        .collect();
    assert_eq!(states, [ReceiptState::Cancelled, ReceiptState::NotStarted]);
    assert_eq!(f.server.requests().len(), 1, "no request after the cancel");
    let items = f.store.items(&f.controller.session().id).unwrap();
    assert_eq!(
        items.len(),
        4,
        "user, assistant, and a result for each call"
    );
}

#[tokio::test]
async fn a_busy_session_refuses_a_second_submit_and_a_stall_can_be_cancelled() {
    let f = fixture(Scenario::from_steps(vec![Step::Fault(Fault::Stall(
        Duration::from_secs(30),
    ))]))
    .await;
    let mut events = f.controller.subscribe();
    let controller = f.controller.clone();
    let turn = tokio::spawn(async move { controller.submit("one").await });
    wait_for(&mut events, |body| {
        matches!(body, EventBody::LlmRequest { .. })
    })
    .await;
    let second = f.controller.submit("two").await;
    assert!(matches!(second, Err(keel_agent::AgentError::Busy(_))));
    f.controller.cancel();
    assert_eq!(turn.await.unwrap().unwrap(), TurnOutcome::Cancelled);
}

#[tokio::test]
async fn pending_recovery_is_hidden_while_a_turn_runs_and_a_concurrent_recovery_is_refused() {
    let scenario = Scenario::from_steps(vec![
        Step::Tools {
            calls: vec![ScriptedCall {
                name: "list_dir".into(),
                arguments: "{}".into(),
            }],
            reason: None,
            finish_reason: None,
        },
        Step::Fault(Fault::Http {
            status: 400,
            body: String::new(),
            headers: Default::default(),
        }),
        Step::Fault(Fault::Stall(Duration::from_secs(30))),
    ]);
    let f = fixture(scenario).await;
    assert!(matches!(
        f.controller.submit("go").await.unwrap(),
        TurnOutcome::Failed(_)
    ));
    let pending = f
        .controller
        .pending_recovery()
        .expect("a recovery is pending");
    let mut events = f.controller.subscribe();
    let controller = f.controller.clone();
    let recovering = tokio::spawn(async move { controller.submit_recovery(None, None).await });
    wait_for(&mut events, |body| {
        matches!(body, EventBody::LlmRequest { .. })
    })
    .await;
    assert_eq!(
        f.controller.pending_recovery(),
        None,
        "nothing is offered while a turn runs"
    );
    let concurrent = f.controller.submit_recovery(Some(&pending), None).await;
    assert!(
        matches!(concurrent, Err(keel_agent::AgentError::RecoveryRefused(ref why)) if why.contains("a turn is running")),
        "{concurrent:?}"
    );
    f.controller.cancel();
    assert_eq!(recovering.await.unwrap().unwrap(), TurnOutcome::Cancelled);
    assert_eq!(
        f.server.requests().len(),
        3,
        "one request for the recovery, none for the refused one"
    );
}
