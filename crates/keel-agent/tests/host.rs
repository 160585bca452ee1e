//! The controller's face for surfaces: many sessions on one host at once, event replay from an
//! id with no gap and no duplicate, the read side, and the parallel read-only batch.

use crate::common::*;
use keel_agent::{SessionChoice, TurnOutcome};
use keel_mock::{MockServer, Scenario, ScriptedCall, Step};
use keel_types::{Event, EventBody, ReceiptState};
use std::time::Duration;

/// Drain what has arrived on `events` within `wait` after the last one.
async fn drain(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
    wait: Duration,
) -> Vec<Event> {
    let mut seen = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(wait, events.recv()).await {
        seen.push(event);
    }
    seen
}

#[tokio::test]
async fn a_subscriber_resuming_from_an_id_misses_nothing_and_sees_nothing_twice() {
    let steps = vec![bash("echo one"), bash("echo two"), say("done")];
    let f = fixture(Scenario::from_steps(steps)).await;
    let mut all = f.controller.subscribe();
    let controller = f.controller.clone();
    let turn = tokio::spawn(async move { controller.submit("go".into()).await });
    // Reconnect in the middle of the turn, after the first tool result.
    let mut seen_before = Vec::new();
    loop {
        let event = all.recv().await.unwrap();
        let is_result = matches!(event.body, EventBody::ToolResult { .. });
        seen_before.push(event);
        if is_result {
            break;
        }
    }
    let last_id = seen_before.iter().rev().find_map(|e| e.id).unwrap();
    let mut resumed = f.controller.subscribe_after(last_id).unwrap();
    assert!(matches!(
        turn.await.unwrap().unwrap(),
        TurnOutcome::Completed { .. }
    ));
    let replayed: Vec<u64> = drain(&mut resumed, Duration::from_millis(300))
        .await
        .iter()
        .filter_map(|e| e.id)
        .collect();
    let everything: Vec<u64> = seen_before
        .iter()
        .chain(drain(&mut all, Duration::from_millis(300)).await.iter())
        .filter_map(|e| e.id)
        .collect();
    let expected: Vec<u64> = everything.into_iter().filter(|id| *id > last_id).collect();
    assert!(!expected.is_empty());
    assert_eq!(
        replayed, expected,
        "exactly the events after the id, in order"
    );
    // From the start, the log holds every stored event once, in order.
    let from_start: Vec<u64> = drain(
        &mut f.controller.subscribe_after(0).unwrap(),
        Duration::from_millis(100),
    )
    .await
    .iter()
    .filter_map(|e| e.id)
    .collect();
    assert_eq!(
        from_start,
        (1..=from_start.len() as u64).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn twenty_sessions_run_at_once_on_one_host() {
    // Each session's first round is a barrier: its command says it arrived, then waits (up to
    // 30 s) until all twenty have, and prints how many it met. Run one after another, the
    // first would meet only itself. (Not `$$`: each command is pid 2 of its own namespace.)
    let barrier = "mktemp arrived.XXXXXX >/dev/null; n=0; \
        while [ $(ls arrived.* | wc -l) -lt 20 ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; \
        echo met=$(ls arrived.* | wc -l)";
    let steps: Vec<Step> = (0..20)
        .map(|_| bash(barrier))
        .chain((0..20).map(|n| say(&format!("answer {n}"))))
        .collect();
    let server = MockServer::start(([127, 0, 0, 1], 0).into(), Scenario::from_steps(steps))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host = keel_agent::Host::open(&dir.path().join("keel.db")).unwrap();
    let controllers: Vec<_> = (0..20)
        .map(|_| {
            open(
                &host,
                SessionChoice::New,
                settings_for(&server.base_url(), dir.path()),
            )
        })
        .collect();
    let turns: Vec<_> = controllers
        .iter()
        .map(|controller| {
            let controller = controller.clone();
            tokio::spawn(async move { controller.submit("hi".into()).await })
        })
        .collect();
    for turn in turns {
        assert!(matches!(
            turn.await.unwrap().unwrap(),
            TurnOutcome::Completed { .. }
        ));
    }
    let workspace = dir.path().display().to_string();
    assert_eq!(host.sessions_for_workspace(&workspace).unwrap().len(), 20);
    for controller in &controllers {
        let transcript = host.transcript(&controller.session().id).unwrap();
        assert_eq!(
            transcript.items.len(),
            5,
            "each session its own history (with its context block)"
        );
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 40);
    for request in &requests[20..] {
        assert!(
            request.body.contains("met=20"),
            "every session's command ran while all twenty did: {}",
            request.body
        );
    }
    // A session held by one controller cannot be opened by a second one.
    let settings = settings_for(&server.base_url(), dir.path());
    let again = host.open_session(
        SessionChoice::Resume(controllers[0].session().id.clone()),
        settings,
        crate::common::surface(),
    );
    assert!(again.is_err(), "one lease per session");
}

#[tokio::test]
async fn read_only_calls_of_one_message_run_in_parallel_and_writes_alone() {
    let calls = vec![
        ScriptedCall {
            name: "read_file".into(),
            arguments: r#"{"path":"a.txt"}"#.into(),
        },
        ScriptedCall {
            name: "list_dir".into(),
            arguments: r#"{"path":"."}"#.into(),
        },
        ScriptedCall {
            name: "glob".into(),
            arguments: r#"{"pattern":"*.txt"}"#.into(),
        },
        ScriptedCall {
            name: "write_file".into(),
            arguments: r#"{"path":"b.txt","content":"written"}"#.into(),
        },
    ];
    let steps = vec![
        Step::Tools {
            calls,
            reason: None,
            finish_reason: None,
        },
        say("done"),
    ];
    let f = fixture(Scenario::from_steps(steps)).await;
    std::fs::write(f.workspace.join("a.txt"), "alpha\n").unwrap();
    let mut events = f.controller.subscribe();
    let outcome = f.controller.submit("go".into()).await.unwrap();
    assert!(matches!(outcome, TurnOutcome::Completed { .. }));
    let order: Vec<String> = drain(&mut events, Duration::from_millis(100))
        .await
        .into_iter()
        .filter_map(|event| match event.body {
            EventBody::ToolCall { name, .. } => Some(format!("call {name}")),
            EventBody::ToolResult { name, .. } => Some(format!("result {name}")),
            _ => None,
        })
        .collect();
    // The three reads are announced together (one batch) before any of their results; the
    // write is announced only after every read has finished.
    assert_eq!(
        order,
        [
            "call read_file",
            "call list_dir",
            "call glob",
            "result read_file",
            "result list_dir",
            "result glob",
            "call write_file",
            "result write_file",
        ]
    );
    let receipts = f.controller.transcript().unwrap().receipts;
    assert!(receipts.iter().all(|r| r.state == ReceiptState::Completed));
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("b.txt")).unwrap(),
        "written"
    );
}

/// A resumed session knows how full its context is before its first response: the next
/// request's size, estimated, not "not measured".
#[tokio::test]
async fn a_resumed_session_estimates_its_context_before_any_response() {
    let server = MockServer::start(
        ([127, 0, 0, 1], 0).into(),
        Scenario::from_steps(vec![bash("seq 1 300"), say("done")]),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let settings = || {
        let mut settings = settings_for(&server.base_url(), dir.path());
        settings.profile.context_window = Some(100_000);
        settings
    };
    let host = keel_agent::Host::open(&dir.path().join("keel.db")).unwrap();
    let controller = open(&host, SessionChoice::New, settings());
    let fresh = controller.window_use().unwrap();
    assert!(fresh.used > 0 && fresh.window == 100_000, "{fresh:?}");
    let outcome = controller.submit("count".into()).await.unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let counted = controller.window_use().unwrap();
    assert!(counted.used > fresh.used, "{counted:?} after {fresh:?}");
    let id = controller.session().id.clone();
    drop(controller);
    drop(host);

    let host = keel_agent::Host::open(&dir.path().join("keel.db")).unwrap();
    let resumed = open(&host, SessionChoice::Resume(id), settings());
    let estimated = resumed.window_use().unwrap();
    // The mock counts a request's bytes over 4 as its tokens; keel learned that ratio only in
    // the process that ended, so the estimate is of the same size, not the same number.
    assert!(
        estimated.used * 2 > counted.used && estimated.used < counted.used * 2,
        "{estimated:?} against {counted:?}"
    );
}

#[tokio::test]
async fn a_session_continued_by_a_keel_with_other_tools_names_the_break_once() {
    let Fixture {
        _dir: dir,
        workspace,
        host,
        controller,
        server,
    } = fixture(keel_mock::Scenario::from_steps(vec![
        say("one"),
        say("two"),
        say("three"),
    ]))
    .await;
    let breaks = |events: &mut tokio::sync::mpsc::UnboundedReceiver<keel_types::Event>| {
        std::iter::from_fn(|| events.try_recv().ok())
            .filter_map(|event| match event.body {
                keel_types::EventBody::PrefixChanged { reason } => Some(reason),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let mut events = controller.subscribe();
    controller
        .submit(keel_agent::Input::Prompt("a".into()))
        .await
        .unwrap();
    assert!(
        breaks(&mut events).is_empty(),
        "a new session only records its tools"
    );
    let id = controller.session().id.clone();
    drop(controller);
    // As an older keel with other built-in tools would have left it.
    keel_store::Store::open(&dir.path().join("keel.db"))
        .unwrap()
        .set_tools_digest(&id, "an-older-keel's-tools")
        .unwrap();
    let resumed = open(
        &host,
        SessionChoice::Resume(id),
        settings_for(&server.base_url(), &workspace),
    );
    let mut events = resumed.subscribe();
    resumed
        .submit(keel_agent::Input::Prompt("b".into()))
        .await
        .unwrap();
    assert_eq!(breaks(&mut events), ["keel_upgraded"]);
    resumed
        .submit(keel_agent::Input::Prompt("c".into()))
        .await
        .unwrap();
    assert!(breaks(&mut events).is_empty(), "named once");
}
