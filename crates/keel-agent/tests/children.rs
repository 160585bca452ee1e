//! A subagent's child session opened from its parent (`Controller::open_child`): it shares the
//! parent's prefix through the context block, is stored as the parent's child, runs in its
//! agent's mode with its agent's tools, and reports to the parent's subscribers.

use crate::common::*;
use keel_agent::{AgentDefinitions, Input, TurnOutcome};
use keel_mock::Scenario;
use keel_tools::PermissionMode;
use keel_types::{EventBody, Item};

/// The parent says hello; a child of `explore` is asked (marked) to look, tries to write a
/// file, then answers.
fn scenario() -> Scenario {
    Scenario::parse(
        &serde_json::json!({
            "steps": [{"say": "Hello from the parent."}],
            "conversations": [{"when": {"contains": "MARK-CHILD"}, "steps": [
                {"tool": "write_file", "args": {"path": "sneaky.txt", "content": "x"}},
                {"say": "The parser is in src/parse.rs."}
            ]}]
        })
        .to_string(),
    )
    .unwrap()
}

/// The request body's text through the end of `block` (JSON-escaped as in the body).
fn through_block<'a>(body: &'a str, block: &str) -> &'a str {
    let escaped = serde_json::to_string(block).unwrap();
    let escaped = &escaped[1..escaped.len() - 1];
    let at = body
        .find(escaped)
        .unwrap_or_else(|| panic!("the context block is not in {body}"));
    &body[..at + escaped.len()]
}

#[tokio::test]
async fn a_child_starts_from_its_parents_context_block_and_runs_as_its_agent() {
    let f = fixture(scenario()).await;
    let parent = &f.controller;
    let outcome = parent.submit(Input::Prompt("hello".into())).await.unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let mut parent_events = parent.subscribe();
    let agents = AgentDefinitions::default();
    let explore = agents.get("explore").unwrap();
    let opened = parent.open_child(explore, "look around", 10).await.unwrap();
    assert_eq!(opened.mode_refused, None);
    let child = opened.controller;
    assert_eq!(child.permission_mode(), PermissionMode::ReadOnly);
    let stored = child.session();
    assert_eq!(stored.parent.as_deref(), Some(parent.session().id.as_str()));
    assert_eq!(stored.agent.as_deref(), Some("explore"));
    let outcome = child
        .submit(Input::Prompt("MARK-CHILD where is the parser?".into()))
        .await
        .unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );

    // The child's history begins with the parent's context item, byte for byte.
    let first_item = |controller: &keel_agent::Controller| {
        controller.transcript().unwrap().items[0]
            .item
            .clone()
            .unwrap()
    };
    let Item::Context(block) = first_item(parent) else {
        panic!("the parent's history starts with its context block");
    };
    assert_eq!(first_item(&child), Item::Context(block.clone()));
    // Its first request is the parent's through the end of the context block: the provider's
    // cache serves that part.
    let requests = f.server.requests();
    let parent_first = &requests[0].body;
    let child_first = &requests
        .iter()
        .find(|request| request.conversation == Some(1))
        .unwrap()
        .body;
    assert_eq!(
        through_block(child_first, &block.text),
        through_block(parent_first, &block.text)
    );
    // Its mode is told with its first prompt (the block names the parent's).
    assert!(child_first.contains("read-only"), "{child_first}");

    // A tool outside its agent's list is refused before any rule, and nothing is written.
    let transcript = child.transcript().unwrap();
    let refused = transcript
        .receipts
        .iter()
        .find(|receipt| receipt.tool == "write_file")
        .unwrap();
    assert_eq!(refused.state, keel_types::ReceiptState::Denied);
    assert!(!f.workspace.join("sneaky.txt").exists());
    let said = transcript
        .items
        .iter()
        .filter_map(|stored| match stored.item.as_ref().unwrap() {
            Item::ToolResult(result) => Some(result.content.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        said.contains("the `explore` agent may not use `write_file`"),
        "{said}"
    );

    // The parent's subscribers saw the child's turn, stamped with the child's id.
    let seen: Vec<keel_types::Event> =
        std::iter::from_fn(|| parent_events.try_recv().ok()).collect();
    assert!(
        seen.iter()
            .any(|event| event.session_id == child.session().id
                && matches!(event.body, EventBody::TurnCompleted { .. }))
    );
    // The store knows the child by its parent.
    let children = f.host.children(&parent.session().id).unwrap();
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].id, child.session().id);
    // A child is never continued on its own (it would run with every tool, in any mode).
    let id = child.session().id.clone();
    drop(child);
    let refused = f
        .host
        .open_session(
            keel_agent::SessionChoice::Resume(id),
            settings_for(&f.server.base_url(), &f.workspace),
            surface(),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(refused.contains("subagent's session of"), "{refused}");
}

#[tokio::test]
async fn an_agent_never_runs_looser_than_its_parent_not_even_after_a_switch() {
    let f = fixture(scenario()).await;
    f.controller.set_permission_mode(PermissionMode::Ask);
    let mut loose = AgentDefinitions::default().get("general").unwrap().clone();
    loose.permission_mode = Some(PermissionMode::Auto);
    let opened = f
        .controller
        .open_child(&loose, "look around", 10)
        .await
        .unwrap();
    assert_eq!(opened.controller.permission_mode(), PermissionMode::Ask);
    assert_eq!(opened.mode_refused, Some(PermissionMode::Auto));
    // The person makes the parent stricter while the child is open: the child follows.
    f.controller.set_permission_mode(PermissionMode::ReadOnly);
    assert_eq!(
        opened.controller.permission_mode(),
        PermissionMode::ReadOnly
    );
}

#[tokio::test]
async fn a_batch_never_carries_a_tool_the_agent_may_not_use_nor_a_plan() {
    let scenario = Scenario::parse(
        &serde_json::json!({
            "steps": [{"say": "parent"}],
            "conversations": [{"when": {"contains": "MARK-READER"}, "steps": [
                {"tools": [
                    {"tool": "read_file", "args": {"path": "notes.txt"}},
                    {"tool": "grep", "args": {"pattern": "secret"}}
                ]},
                {"tool": "propose_plan", "args": {"plan": "1. take over"}},
                {"say": "done"}
            ]}]
        })
        .to_string(),
    )
    .unwrap();
    let f = fixture(scenario).await;
    std::fs::write(f.workspace.join("notes.txt"), "hello\n").unwrap();
    let mut reader = AgentDefinitions::default().get("general").unwrap().clone();
    reader.tools = keel_agent::AgentTools::Only(["read_file".to_string()].into());
    let child = f
        .controller
        .open_child(&reader, "look around", 10)
        .await
        .unwrap()
        .controller;
    child
        .submit(Input::Prompt("MARK-READER read the notes".into()))
        .await
        .unwrap();
    let states: Vec<(String, keel_types::ReceiptState)> = child
        .transcript()
        .unwrap()
        .receipts
        .iter()
        .map(|receipt| (receipt.tool.clone(), receipt.state))
        .collect();
    assert_eq!(
        states,
        [
            ("read_file".to_string(), keel_types::ReceiptState::Completed),
            ("grep".to_string(), keel_types::ReceiptState::Denied),
            ("propose_plan".to_string(), keel_types::ReceiptState::Denied),
        ]
    );
}

/// Approves after a while, counting the questions on screen at once.
#[derive(Default)]
struct Slow {
    on_screen: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
    asked_by: std::sync::Mutex<Vec<Option<keel_types::AskedBy>>>,
}

impl keel_agent::Approver for Slow {
    fn approve<'a>(
        &'a self,
        request: &'a keel_agent::ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = keel_agent::Approval> + Send + 'a>>
    {
        use std::sync::atomic::Ordering;
        let now = self.on_screen.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.asked_by.lock().unwrap().push(request.asked_by.clone());
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(150)).await;
            self.on_screen.fetch_sub(1, Ordering::SeqCst);
            keel_agent::Approval::Allow
        })
    }
}

#[tokio::test]
async fn two_children_asking_at_once_are_asked_one_at_a_time_each_labelled() {
    let scenario = Scenario::parse(
        &serde_json::json!({
            "steps": [{"say": "parent"}],
            "conversations": [
                {"when": {"contains": "MARK-ONE"}, "steps": [
                    {"tool": "bash", "args": {"command": "echo one > one.txt"}}, {"say": "one done"}]},
                {"when": {"contains": "MARK-TWO"}, "steps": [
                    {"tool": "bash", "args": {"command": "echo two > two.txt"}}, {"say": "two done"}]}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let server = keel_mock::MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
        .await
        .unwrap();
    let host = keel_agent::Host::open(&dir.path().join("keel.db")).unwrap();
    let mut settings = settings_for(&server.base_url(), &workspace);
    settings.policy = keel_tools::PermissionPolicy::mode_only(PermissionMode::Ask);
    let approver = std::sync::Arc::new(Slow::default());
    let surface = keel_agent::SurfaceServices::new(std::sync::Arc::new(Key), approver.clone());
    let parent = host
        .open_session(keel_agent::SessionChoice::New, settings, surface)
        .unwrap();
    let mut events = parent.subscribe();
    let general = AgentDefinitions::default().get("general").unwrap().clone();
    let one = parent
        .open_child(&general, "write one", 10)
        .await
        .unwrap()
        .controller;
    let two = parent
        .open_child(&general, "write two", 10)
        .await
        .unwrap()
        .controller;
    let (first, second) = tokio::join!(
        one.submit(Input::Prompt("MARK-ONE".into())),
        two.submit(Input::Prompt("MARK-TWO".into())),
    );
    assert!(matches!(first.unwrap(), TurnOutcome::Completed { .. }));
    assert!(matches!(second.unwrap(), TurnOutcome::Completed { .. }));
    assert!(workspace.join("one.txt").exists() && workspace.join("two.txt").exists());
    // One question on screen at a time, each saying which agent asks and for what.
    assert_eq!(approver.most.load(std::sync::atomic::Ordering::SeqCst), 1);
    let mut labels: Vec<(String, String, String)> = approver
        .asked_by
        .lock()
        .unwrap()
        .iter()
        .map(|by| {
            let by = by.clone().expect("a subagent's question says who asks");
            (by.session_id, by.agent, by.description)
        })
        .collect();
    labels.sort_by(|a, b| a.2.cmp(&b.2));
    assert_eq!(
        labels,
        [
            (
                one.session().id.clone(),
                "general".into(),
                "write one".into()
            ),
            (
                two.session().id.clone(),
                "general".into(),
                "write two".into()
            ),
        ]
    );
    // The parent's subscribers are told the same, under each child's session id.
    let asked: Vec<(String, Option<String>)> = std::iter::from_fn(|| events.try_recv().ok())
        .filter_map(|event| match event.body {
            EventBody::ApprovalRequested { description, .. } => {
                Some((event.session_id, description))
            }
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked.contains(&(one.session().id.clone(), Some("write one".into()))));
    assert!(asked.contains(&(two.session().id.clone(), Some("write two".into()))));
}

/// The result `controller`'s history holds for call `call_id`.
fn result_of(controller: &keel_agent::Controller, call_id: &str) -> String {
    controller
        .transcript()
        .unwrap()
        .items
        .iter()
        .find_map(|stored| match stored.item.as_ref().unwrap() {
            Item::ToolResult(result) if result.call_id == call_id => Some(result.content.clone()),
            _ => None,
        })
        .unwrap()
}

/// An assistant message with one tool call.
fn calling(id: &str, name: &str, arguments: &str) -> Item {
    Item::Assistant(keel_types::AssistantItem {
        parts: vec![keel_types::AssistantPart::ToolCall(keel_types::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        })],
    })
}

fn started(call: &str, tool: &str, child: Option<&str>) -> keel_types::ToolReceipt {
    keel_types::ToolReceipt {
        call_id: call.into(),
        tool: tool.into(),
        args_digest: "d".into(),
        state: keel_types::ReceiptState::Started,
        turn: 1,
        seq: 1,
        summary: None,
        sandbox: None,
        child_session: child.map(String::from),
    }
}

/// The store as keel left it when it was killed during a subagent's command: the parent's
/// `task` call started (naming its child `c0`), the child's `bash` call started too.
fn crashed_during_a_child(f: &Fixture) -> keel_store::Store {
    let workspace = f.workspace.display().to_string();
    let store = keel_store::Store::open(&f._dir.path().join("keel.db")).unwrap();
    store
        .create_session("p0", &workspace, "deepseek", "m")
        .unwrap();
    store
        .append_items(
            "p0",
            1,
            &[Item::User {
                text: "delegate".into(),
            }],
        )
        .unwrap();
    store
        .append_with_receipts(
            "p0",
            1,
            &calling(
                "t1",
                "task",
                r#"{"agent":"general","description":"d","prompt":"p"}"#,
            ),
            &[started("t1", "task", Some("c0"))],
        )
        .unwrap();
    let child = keel_store::SessionInfo {
        id: "c0".into(),
        workspace: workspace.clone(),
        provider: "deepseek".into(),
        model: "m".into(),
        created_at: 1,
        updated_at: 1,
        parent: Some("p0".into()),
        agent: Some("general".into()),
    };
    store.create_child_session(&child, "{}").unwrap();
    store
        .append_items("c0", 1, &[Item::User { text: "p".into() }])
        .unwrap();
    store
        .append_with_receipts(
            "c0",
            1,
            &calling("b1", "bash", r#"{"command":"sleep 100"}"#),
            &[started("b1", "bash", None)],
        )
        .unwrap();
    store
}

#[tokio::test]
async fn a_parent_loaded_after_a_crash_settles_its_child_and_never_starts_it_again() {
    let f = fixture(scenario()).await;
    let store = crashed_during_a_child(&f);
    let requests_before = f.server.requests().len();

    let parent = open(
        &f.host,
        keel_agent::SessionChoice::Resume("p0".into()),
        settings_for(&f.server.base_url(), &f.workspace),
    );
    // The child is settled: its command's receipt is unknown, its call has a result.
    let child_receipts = store.receipts("c0").unwrap();
    assert_eq!(child_receipts[0].state, keel_types::ReceiptState::Unknown);
    let child_items = store.items("c0").unwrap();
    assert!(matches!(
        child_items.last().unwrap().item.as_ref().unwrap(),
        Item::ToolResult(result) if result.call_id == "b1"
    ));
    // The parent's call is answered by keel, naming the child and its receipts.
    let said = result_of(&parent, "t1");
    assert!(said.contains("session c0"), "{said}");
    assert!(said.contains("unknown: bash ×1"), "{said}");
    assert!(said.contains("not started again"), "{said}");
    assert_eq!(
        store.receipts("p0").unwrap()[0].state,
        keel_types::ReceiptState::Unknown
    );
    // Nothing was asked of the model, and no new child was made.
    assert_eq!(f.server.requests().len(), requests_before);
    assert_eq!(f.host.children("p0").unwrap().len(), 1);
}

#[tokio::test]
async fn a_child_another_live_keel_holds_is_left_as_it_is_and_said() {
    let f = fixture(scenario()).await;
    let store = crashed_during_a_child(&f);
    // Held by a live process (pid 1 never dies).
    let _held = store
        .acquire_lease_as("c0", "keel (interactive)", 1)
        .unwrap();
    let parent = open(
        &f.host,
        keel_agent::SessionChoice::Resume("p0".into()),
        settings_for(&f.server.base_url(), &f.workspace),
    );
    assert_eq!(
        store.receipts("c0").unwrap()[0].state,
        keel_types::ReceiptState::Started,
        "a child that may still run is not settled"
    );
    let said = result_of(&parent, "t1");
    assert!(said.contains("still runs"), "{said}");
}

/// Holds every question until released, but answers at once (an "always" of the asking
/// session) the commands that start with `echo covered`.
#[derive(Default)]
struct Gate {
    open: tokio::sync::Notify,
}

impl keel_agent::Approver for Gate {
    fn answers_without_asking(&self, request: &keel_agent::ApprovalRequest) -> bool {
        request.subject.starts_with("echo covered")
    }

    fn approve<'a>(
        &'a self,
        request: &'a keel_agent::ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = keel_agent::Approval> + Send + 'a>>
    {
        Box::pin(async move {
            if !self.answers_without_asking(request) {
                self.open.notified().await;
            }
            keel_agent::Approval::Allow
        })
    }
}

#[tokio::test]
async fn a_call_always_covers_never_waits_behind_another_agents_question() {
    let scenario = Scenario::parse(
        &serde_json::json!({
            "steps": [{"say": "parent"}],
            "conversations": [
                {"when": {"contains": "MARK-ASKS"}, "steps": [
                    {"tool": "bash", "args": {"command": "touch asked.txt"}}, {"say": "asked done"}]},
                {"when": {"contains": "MARK-COVERED"}, "steps": [
                    {"tool": "bash", "args": {"command": "echo covered > covered.txt"}, "delay_ms": 100},
                    {"say": "covered done"}]}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let server = keel_mock::MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
        .await
        .unwrap();
    let host = keel_agent::Host::open(&dir.path().join("keel.db")).unwrap();
    let mut settings = settings_for(&server.base_url(), &workspace);
    settings.policy = keel_tools::PermissionPolicy::mode_only(PermissionMode::Ask);
    let gate = std::sync::Arc::new(Gate::default());
    let surface = keel_agent::SurfaceServices::new(std::sync::Arc::new(Key), gate.clone());
    let parent = host
        .open_session(keel_agent::SessionChoice::New, settings, surface)
        .unwrap();
    let general = AgentDefinitions::default().get("general").unwrap().clone();
    let asks = parent
        .open_child(&general, "asks", 10)
        .await
        .unwrap()
        .controller;
    let covered = parent
        .open_child(&general, "covered", 10)
        .await
        .unwrap()
        .controller;
    let asking = tokio::spawn({
        let asks = asks.clone();
        async move { asks.submit(Input::Prompt("MARK-ASKS".into())).await }
    });
    // The covered child runs to its end while the other's question is still open.
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        covered.submit(Input::Prompt("MARK-COVERED".into())),
    )
    .await
    .expect("a covered call does not wait for another agent's question")
    .unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(workspace.join("covered.txt").exists());
    assert!(!asking.is_finished() && !workspace.join("asked.txt").exists());
    gate.open.notify_one();
    let asked = asking.await.unwrap().unwrap();
    assert!(matches!(asked, TurnOutcome::Completed { .. }), "{asked:?}");
    assert!(workspace.join("asked.txt").exists());
}
