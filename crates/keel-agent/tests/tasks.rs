//! The `task` tool against `keel mock`: consecutive calls start their subagents at once, each
//! child's requests share the parent's prefix through the context block, their answers (with a
//! footer of facts) reach the parent, what they spent rolls up, and every refusal is said.

use crate::common::*;
use keel_agent::{Controller, Host, Input, SessionChoice, TurnOutcome};
use keel_mock::{CapturedRequest, Scenario};
use keel_tools::{PermissionMode, PermissionPolicy};
use keel_types::{AgentEnd, EventBody, Item, ReceiptState};
use serde_json::json;

/// A step of the parent calling `task` once per `(agent, description, prompt)`.
fn tasks(calls: &[(&str, &str, &str)]) -> serde_json::Value {
    json!({"tools": calls.iter().map(|(agent, description, prompt)| json!({
        "tool": "task",
        "args": {"agent": agent, "description": description, "prompt": prompt}
    })).collect::<Vec<_>>()})
}

fn scenario(value: serde_json::Value) -> Scenario {
    Scenario::parse(&value.to_string()).unwrap()
}

/// Two `explore` children, each answering after `delay_ms`.
fn two_children(delay_ms: u64) -> Scenario {
    scenario(json!({
        "steps": [
            tasks(&[("explore", "find the parser", "MARK-A where is the parser?"),
                    ("explore", "find the tests", "MARK-B where are the tests?")]),
            {"say": "Both reported."}
        ],
        "conversations": [
            {"when": {"contains": "MARK-A"}, "steps": [{"say": "The parser is in src/parse.rs.", "delay_ms": delay_ms}]},
            {"when": {"contains": "MARK-B"}, "steps": [{"say": "The tests are in tests/.", "delay_ms": delay_ms}]}
        ]
    }))
}

/// The request body through the end of the context block (`</context>`, JSON-escaped).
fn through_block(body: &str) -> &str {
    let at = body
        .find("</context>")
        .unwrap_or_else(|| panic!("no context block in {body}"));
    &body[..at + "</context>".len()]
}

fn of_conversation(requests: &[CapturedRequest], conversation: usize) -> Vec<&CapturedRequest> {
    requests
        .iter()
        .filter(|request| request.conversation == Some(conversation))
        .collect()
}

/// The results the parent's history holds, by call id.
fn results(controller: &Controller) -> Vec<(String, String, bool)> {
    controller
        .transcript()
        .unwrap()
        .items
        .into_iter()
        .filter_map(|stored| match stored.item.unwrap() {
            Item::ToolResult(result) => Some((result.call_id, result.content, result.is_error)),
            _ => None,
        })
        .collect()
}

fn drain(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<keel_types::Event>,
) -> Vec<keel_types::Event> {
    std::iter::from_fn(|| events.try_recv().ok()).collect()
}

#[tokio::test]
async fn two_tasks_run_at_once_share_the_prefix_and_both_answers_reach_the_parent() {
    let f = fixture(two_children(400)).await;
    let parent = &f.controller;
    let mut events = parent.subscribe();
    let outcome = parent
        .submit(Input::Prompt("look at the project".into()))
        .await
        .unwrap();
    let TurnOutcome::Completed { usage, .. } = outcome else {
        panic!("{outcome:?}");
    };
    let requests = f.server.requests();
    let (a, b) = (of_conversation(&requests, 1), of_conversation(&requests, 2));
    assert_eq!((a.len(), b.len()), (1, 1), "one request per child");
    // Each answer is held back 400 ms: both arrived before either could have been answered.
    let apart = a[0].received_at_us.abs_diff(b[0].received_at_us);
    assert!(
        apart < 400_000,
        "the children ran one after the other ({apart} µs apart)"
    );
    // Each child's prompt is the parent's through the end of the context block.
    let parent_first = &requests[0].body;
    for child in [a[0], b[0]] {
        assert_eq!(through_block(&child.body), through_block(parent_first));
        assert!(
            child.body.contains("you are the `explore` subagent"),
            "{}",
            child.body
        );
    }
    // The context block lists the agents the task tool can start.
    assert!(
        parent_first.contains("- explore: Researches"),
        "{parent_first}"
    );
    // Both answers, with their footers, reach the parent's next request.
    let last = &requests.last().unwrap().body;
    assert!(last.contains("The parser is in src/parse.rs."), "{last}");
    assert!(last.contains("The tests are in tests/."), "{last}");
    assert!(
        last.contains("subagent `explore` (find the parser) completed after 1 round"),
        "{last}"
    );

    // The receipts name their children; each child holds its answer, stored as its own session.
    let transcript = parent.transcript().unwrap();
    let children = f.host.children(&parent.session().id).unwrap();
    assert_eq!(children.len(), 2);
    for receipt in transcript.receipts.iter().filter(|r| r.tool == "task") {
        assert_eq!(receipt.state, ReceiptState::Completed);
        let child = receipt
            .child_session
            .as_deref()
            .expect("the child is named");
        assert!(children.iter().any(|known| known.id == child));
        let items = f.host.transcript(child).unwrap().items;
        let answered = items.iter().any(|stored| {
            matches!(stored.item.as_ref().unwrap(), Item::Assistant(answer) if answer.text().contains(" is in "))
                || matches!(stored.item.as_ref().unwrap(), Item::Assistant(answer) if answer.text().contains(" are in "))
        });
        assert!(answered, "the child's answer is in its own history");
    }

    // agent/started and agent/finished on the parent's stream, with what each child used.
    let seen = drain(&mut events);
    let own: Vec<&EventBody> = seen
        .iter()
        .filter(|event| event.session_id == parent.session().id)
        .map(|event| &event.body)
        .collect();
    let started = own
        .iter()
        .filter(|body| matches!(body, EventBody::AgentStarted { .. }))
        .count();
    assert_eq!(started, 2);
    let mut children_input = 0;
    for body in &own {
        if let EventBody::AgentFinished {
            state,
            usage,
            rounds,
            agent,
            ..
        } = body
        {
            assert_eq!(*state, AgentEnd::Completed);
            assert_eq!((*rounds, agent.as_str()), (1, "explore"));
            assert!(usage.input > 0);
            children_input += usage.input;
        }
    }
    assert!(children_input > 0);
    // The parent's turn counts its children's tokens too.
    let parent_own: u64 = seen
        .iter()
        .filter(|event| event.session_id == parent.session().id)
        .filter_map(|event| match &event.body {
            EventBody::LlmResponse { usage, .. } => Some(usage.input),
            _ => None,
        })
        .sum();
    assert_eq!(usage.input, parent_own + children_input);
    // `/cost` by agent: the children's totals, from their own stored turns.
    let by_agent = parent.spend_by_agent().unwrap();
    assert_eq!(by_agent.len(), 1);
    let (agent, count, spend) = &by_agent[0];
    assert_eq!((agent.as_str(), *count), ("explore", 2));
    assert_eq!(spend.usage.input, children_input);
}

#[tokio::test]
async fn max_concurrent_one_runs_them_in_turn_the_second_pending_until_then() {
    let (_dir, _host, parent, server) = session_with(two_children(300), |settings| {
        settings.subagents.max_concurrent = 1;
    })
    .await;
    let mut events = parent.subscribe();
    let outcome = parent.submit(Input::Prompt("look".into())).await.unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let requests = server.requests();
    let (a, b) = (of_conversation(&requests, 1), of_conversation(&requests, 2));
    let (first, second) = if a[0].received_at_us < b[0].received_at_us {
        (a[0], b[0])
    } else {
        (b[0], a[0])
    };
    assert!(
        second.received_at_us - first.received_at_us >= 300_000,
        "the second started only after the first answered"
    );
    // One agent/started, then its agent/finished, then the next.
    let order: Vec<&str> = drain(&mut events)
        .iter()
        .filter_map(|event| match event.body {
            EventBody::AgentStarted { .. } => Some("started"),
            EventBody::AgentFinished { .. } => Some("finished"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["started", "finished", "started", "finished"]);
}

#[tokio::test]
async fn refusals_are_said_and_start_nothing() {
    let f = fixture(scenario(json!({
        "steps": [
            tasks(&[("nobody", "x", "MARK-N hi"), ("general", "change it", "MARK-G edit"),
                    ("explore", "look", "MARK-E look")]),
            {"say": "done"}
        ],
        "conversations": [
            {"when": {"contains": "MARK-E"}, "steps": [
                tasks(&[("explore", "deeper", "MARK-DEEP look deeper")]),
                {"say": "Looked."}
            ]},
            {"when": {"contains": "MARK-G"}, "steps": [{"say": "should never run"}]},
            {"when": {"contains": "MARK-N"}, "steps": [{"say": "should never run"}]}
        ]
    })))
    .await;
    // Deny rules on `task` apply (the agent is its subject).
    let settings = {
        let mut settings = settings_for(&f.server.base_url(), &f.workspace);
        settings.policy = PermissionPolicy::from_rules(
            PermissionMode::Auto,
            vec![],
            vec![],
            vec![keel_tools::PermissionRule::parse("task(general)").unwrap()],
        );
        settings
    };
    let parent = open(&f.host, SessionChoice::New, settings);
    let outcome = parent.submit(Input::Prompt("go".into())).await.unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let said = results(&parent);
    assert!(
        said[0]
            .1
            .contains("there is no agent named `nobody`; the agents: explore, general"),
        "{said:?}"
    );
    assert!(said[0].2);
    assert!(
        said[1].1.contains("denied by the rule `task(general)`"),
        "{said:?}"
    );
    // The explore child's own `task` is refused (depth 1); it answered anyway.
    assert!(said[2].1.contains("Looked."), "{said:?}");
    let requests = f.server.requests();
    assert!(of_conversation(&requests, 2).is_empty() && of_conversation(&requests, 3).is_empty());
    let explore = f.host.children(&parent.session().id).unwrap();
    assert_eq!(explore.len(), 1, "only the explore child started");
    let child = f.host.transcript(&explore[0].id).unwrap();
    let refused = child.receipts.iter().find(|r| r.tool == "task").unwrap();
    assert_eq!(refused.state, ReceiptState::Denied);
    let words: String = child
        .items
        .iter()
        .filter_map(|stored| match stored.item.as_ref().unwrap() {
            Item::ToolResult(result) => Some(result.content.clone()),
            _ => None,
        })
        .collect();
    assert!(
        words.contains("a subagent cannot start subagents"),
        "{words}"
    );
    assert!(
        !requests
            .iter()
            .any(|request| request.body.contains("MARK-DEEP look deeper\"")
                && request.conversation.is_none()),
        "no grandchild asked anything"
    );
}

#[tokio::test]
async fn in_plan_mode_only_a_read_only_agent_starts() {
    let f = fixture(scenario(json!({
        "steps": [
            tasks(&[("general", "change it", "MARK-G edit"), ("explore", "look", "MARK-E look")]),
            {"say": "done"}
        ],
        "conversations": [
            {"when": {"contains": "MARK-E"}, "steps": [{"say": "Looked."}]},
            {"when": {"contains": "MARK-G"}, "steps": [{"say": "should never run"}]}
        ]
    })))
    .await;
    f.controller.set_permission_mode(PermissionMode::Plan);
    let outcome = f
        .controller
        .submit(Input::Prompt("plan".into()))
        .await
        .unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let said = results(&f.controller);
    assert!(
        said[0]
            .1
            .contains("in plan mode only a read-only agent may be started (explore)"),
        "{said:?}"
    );
    assert!(said[1].1.contains("Looked."), "{said:?}");
    assert!(of_conversation(&f.server.requests(), 2).is_empty());
}

#[tokio::test]
async fn a_child_that_reaches_its_rounds_ends_budget_exhausted_with_what_it_did() {
    let f = session_with(
        scenario(json!({
            "steps": [tasks(&[("explore", "loop", "MARK-L go")]), {"say": "ok"}],
            "conversations": [{"when": {"contains": "MARK-L"}, "steps": [
                {"tool": "list_dir", "args": {}},
                {"tool": "glob", "args": {"pattern": "*.rs"}},
                {"say": "never reached"}
            ]}]
        })),
        |settings| settings.subagents.max_rounds = 2,
    )
    .await;
    let (_dir, _host, parent, _server) = &f;
    let mut events = parent.subscribe();
    parent.submit(Input::Prompt("go".into())).await.unwrap();
    let said = results(parent);
    let (_, content, is_error) = &said[0];
    assert!(*is_error);
    assert!(
        content.contains("subagent `explore` (loop) budget_exhausted after 2 rounds"),
        "{content}"
    );
    assert!(
        content.contains("its tool calls — completed: list_dir ×1, glob ×1"),
        "{content}"
    );
    let finished = drain(&mut events)
        .into_iter()
        .find_map(|event| match event.body {
            EventBody::AgentFinished { state, .. } => Some(state),
            _ => None,
        });
    assert_eq!(finished, Some(AgentEnd::BudgetExhausted));
}

#[tokio::test]
async fn cancelling_the_parent_cancels_both_children_and_commits_nothing_late() {
    let f = fixture(two_children(1500)).await;
    let parent = f.controller.clone();
    let mut events = parent.subscribe();
    let turn = tokio::spawn(async move { parent.submit(Input::Prompt("look".into())).await });
    // Both children asked the provider, and wait for its answers.
    wait_until(|| {
        f.server
            .requests()
            .iter()
            .filter(|request| request.conversation.is_some())
            .count()
            == 2
    })
    .await;
    f.controller.cancel();
    let outcome = turn.await.unwrap().unwrap();
    assert_eq!(outcome, TurnOutcome::Cancelled);
    let transcript = f.controller.transcript().unwrap();
    let tasks: Vec<_> = transcript
        .receipts
        .iter()
        .filter(|receipt| receipt.tool == "task")
        .collect();
    assert_eq!(tasks.len(), 2);
    assert!(
        tasks
            .iter()
            .all(|receipt| receipt.state == ReceiptState::Cancelled),
        "{tasks:?}"
    );
    let finished: Vec<AgentEnd> = drain(&mut events)
        .into_iter()
        .filter_map(|event| match event.body {
            EventBody::AgentFinished { state, .. } => Some(state),
            _ => None,
        })
        .collect();
    assert_eq!(finished, [AgentEnd::Cancelled, AgentEnd::Cancelled]);
    // The answers the provider still sends are never committed, in the children or the parent.
    let children = f.host.children(&f.controller.session().id).unwrap();
    let count = |id: &str| f.host.transcript(id).unwrap().items.len();
    let before: Vec<usize> = children.iter().map(|child| count(&child.id)).collect();
    tokio::time::sleep(std::time::Duration::from_millis(1700)).await;
    let after: Vec<usize> = children.iter().map(|child| count(&child.id)).collect();
    assert_eq!(before, after);
    for child in &children {
        let answered = f
            .host
            .transcript(&child.id)
            .unwrap()
            .items
            .iter()
            .any(|stored| matches!(stored.item.as_ref().unwrap(), Item::Assistant(_)));
        assert!(!answered, "a cancelled child has no answer");
    }
    assert!(
        !results(&f.controller)
            .iter()
            .any(|(_, content, _)| content.contains(" is in "))
    );
}

/// A session against a mock serving `scenario`, with `tune` applied to its settings; its
/// project has `.keel/agents/reader.md` (`read_file` only, asking for `auto`) and `notes.txt`.
async fn session_with(
    scenario: Scenario,
    tune: impl FnOnce(&mut keel_agent::AgentSettings),
) -> (tempfile::TempDir, Host, Controller, keel_mock::MockServer) {
    let server = keel_mock::MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(workspace.join(".keel/agents")).unwrap();
    std::fs::write(
        workspace.join(".keel/agents/reader.md"),
        "---\ndescription: Reads one file.\ntools: read_file\npermission_mode: auto\n---\nRead what you are asked to read.\n",
    )
    .unwrap();
    std::fs::write(workspace.join("notes.txt"), "the notes\n").unwrap();
    let mut settings = settings_for(&server.base_url(), &workspace);
    tune(&mut settings);
    let agents = keel_agent::AgentDefinitions::load(&workspace, None, &|_: &str| true);
    let surface = keel_agent::SurfaceServices {
        agents: std::sync::Arc::new(agents),
        ..surface()
    };
    let host = Host::open(&dir.path().join("keel.db")).unwrap();
    let controller = host
        .open_session(SessionChoice::New, settings, surface)
        .unwrap();
    (dir, host, controller, server)
}

#[tokio::test]
async fn a_project_agent_uses_its_tools_only_and_never_runs_looser_than_its_parent() {
    let (_dir, host, parent, server) = session_with(
        scenario(json!({
            "steps": [tasks(&[("reader", "read the notes", "MARK-R read notes.txt")]), {"say": "ok"}],
            "conversations": [{"when": {"contains": "MARK-R"}, "steps": [
                {"tools": [{"tool": "read_file", "args": {"path": "notes.txt"}},
                           {"tool": "bash", "args": {"command": "touch made.txt"}}]},
                {"say": "The notes say: the notes."}
            ]}]
        })),
        |settings| settings.policy = PermissionPolicy::mode_only(PermissionMode::Ask),
    )
    .await;
    parent.submit(Input::Prompt("go".into())).await.unwrap();
    let said = results(&parent);
    let (_, content, _) = &said[0];
    assert!(
        content.starts_with("The notes say: the notes."),
        "{content}"
    );
    assert!(
        content
            .contains("its agent asked for `auto` mode and ran in its parent's, which is stricter"),
        "{content}"
    );
    assert!(
        content.contains("completed: read_file ×1; denied: bash ×1"),
        "{content}"
    );
    // The parent's own first request lists the project's agent for the model.
    assert!(
        server.requests()[0]
            .body
            .contains("- reader: Reads one file.")
    );
    let child = &host.children(&parent.session().id).unwrap()[0];
    let refused: String = host
        .transcript(&child.id)
        .unwrap()
        .items
        .iter()
        .filter_map(|stored| match stored.item.as_ref().unwrap() {
            Item::ToolResult(result) if result.name == "bash" => Some(result.content.clone()),
            _ => None,
        })
        .collect();
    assert!(
        refused.contains("the `reader` agent may not use `bash` (its tools: read_file)"),
        "{refused}"
    );
    assert!(!parent.settings().workspace.join("made.txt").exists());
}

#[tokio::test]
async fn a_child_past_its_token_budget_sends_nothing_more() {
    let (_dir, _host, parent, server) = session_with(
        scenario(json!({
            "steps": [tasks(&[("explore", "spend", "MARK-S go")]), {"say": "ok"}],
            "conversations": [{"when": {"contains": "MARK-S"}, "steps": [
                {"tool": "list_dir", "args": {}},
                {"say": "never asked"}
            ]}]
        })),
        |settings| settings.subagents.max_child_tokens = Some(100),
    )
    .await;
    parent.submit(Input::Prompt("go".into())).await.unwrap();
    let said = results(&parent);
    let (_, content, is_error) = &said[0];
    assert!(*is_error);
    assert!(
        content.contains("subagent `explore` (spend) budget_exhausted after 1 round"),
        "{content}"
    );
    assert!(
        content.contains("its budget is 100 (max_child_tokens)"),
        "{content}"
    );
    assert_eq!(
        of_conversation(&server.requests(), 1).len(),
        1,
        "one request, then the budget"
    );
}

#[tokio::test]
async fn a_childs_provider_failure_ends_that_child_typed_and_the_parent_goes_on() {
    let f = fixture(scenario(json!({
        "steps": [
            tasks(&[("explore", "fails", "MARK-F look"), ("explore", "answers", "MARK-OK look")]),
            {"say": "One failed, one answered."}
        ],
        "conversations": [
            {"when": {"contains": "MARK-F"}, "steps": [
                {"fault": {"status": 402, "body": "{\"error\":{\"message\":\"Insufficient Balance\"}}"}}
            ]},
            {"when": {"contains": "MARK-OK"}, "steps": [{"say": "Found it."}]}
        ]
    })))
    .await;
    let mut events = f.controller.subscribe();
    let outcome = f
        .controller
        .submit(Input::Prompt("go".into()))
        .await
        .unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let said = results(&f.controller);
    let failed = said
        .iter()
        .find(|(_, content, _)| content.contains("(fails)"))
        .unwrap();
    assert!(failed.2, "an error result");
    assert!(
        failed
            .1
            .contains("subagent `explore` (fails) failed (quota) after 0 rounds"),
        "{}",
        failed.1
    );
    assert!(
        said.iter()
            .any(|(_, content, is_error)| content.starts_with("Found it.") && !is_error)
    );
    let finished: Vec<(AgentEnd, Option<keel_types::FailureKind>)> = drain(&mut events)
        .into_iter()
        .filter_map(|event| match event.body {
            EventBody::AgentFinished { state, failure, .. } => Some((state, failure)),
            _ => None,
        })
        .collect();
    assert!(
        finished.contains(&(AgentEnd::Failed, Some(keel_types::FailureKind::Quota))),
        "{finished:?}"
    );
    // The failed child was asked once: nothing is retried or recovered on its own.
    assert_eq!(of_conversation(&f.server.requests(), 1).len(), 1);
}

#[tokio::test]
async fn an_agent_on_a_model_of_its_own_runs_with_that_models_profile() {
    let server = keel_mock::MockServer::start(
        ([127, 0, 0, 1], 0).into(),
        scenario(json!({
            "steps": [tasks(&[("thinker", "think", "MARK-T think"), ("lost", "nowhere", "MARK-L go")]),
                      {"say": "ok"}],
            "conversations": [{"when": {"contains": "MARK-T"}, "steps": [{"say": "Thought."}]}]
        })),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(workspace.join(".keel/agents")).unwrap();
    std::fs::write(
        workspace.join(".keel/agents/thinker.md"),
        "---\ndescription: Thinks.\nmodel: deepseek/pro-model\n---\nThink.\n",
    )
    .unwrap();
    std::fs::write(
        workspace.join(".keel/agents/lost.md"),
        "---\ndescription: Nowhere.\nmodel: elsewhere/some-model\n---\nGo.\n",
    )
    .unwrap();
    let settings = settings_for(&server.base_url(), &workspace);
    let mut agents = keel_agent::AgentDefinitions::load(&workspace, None, &|_: &str| true);
    assert_eq!(
        agents.other_models("deepseek/m"),
        ["deepseek/pro-model", "elsewhere/some-model"]
    );
    // The session's configuration knows deepseek's profile, not `elsewhere`'s.
    agents.set_profile("deepseek/pro-model", settings.profile.clone());
    let surface = keel_agent::SurfaceServices {
        agents: std::sync::Arc::new(agents),
        ..surface()
    };
    let host = Host::open(&dir.path().join("keel.db")).unwrap();
    let parent = host
        .open_session(SessionChoice::New, settings, surface)
        .unwrap();
    parent.submit(Input::Prompt("go".into())).await.unwrap();
    let requests = server.requests();
    let child = &of_conversation(&requests, 1)[0].body;
    assert!(child.contains("\"model\":\"pro-model\""), "{child}");
    let said = results(&parent);
    let lost = said
        .iter()
        .find(|(_, content, _)| content.contains("`lost`"))
        .unwrap();
    assert!(
        lost.1
            .contains("a project's agent runs only on a model of this session's provider"),
        "{lost:?}"
    );
    assert!(
        said.iter()
            .any(|(_, content, _)| content.starts_with("Thought.")),
        "{said:?}"
    );
}
