//! Cancellation through the controller: nothing late is committed, running tools are killed,
//! every call still gets a result.

use crate::common::*;
use keel_agent::{Input, TurnOutcome};
use keel_mock::{Fault, Scenario, ScriptedCall, Step};
use keel_types::{EventBody, Item, ReceiptState};
use std::time::Duration;

#[tokio::test]
async fn cancelling_mid_stream_commits_nothing_even_after_the_reply_would_have_finished() {
    let mut scenario = Scenario::from_steps(vec![Step::Say {
        text: "a slow answer that streams for a while".into(),
        reason: None,
        finish_reason: None,
        usage: None,
    }]);
    scenario.chunk_delay = Duration::from_millis(150);
    let f = fixture(scenario).await;
    let mut events = f.controller.subscribe();
    let controller = f.controller.clone();
    let turn = tokio::spawn(async move { controller.submit("hi".into()).await });
    wait_for(&mut events, |body| {
        matches!(body, EventBody::LlmText { .. })
    })
    .await;
    f.controller.cancel();
    assert_eq!(turn.await.unwrap().unwrap(), TurnOutcome::Cancelled);
    tokio::time::sleep(Duration::from_millis(1500)).await; // the stream would have ended by now
    let items: Vec<Item> = f
        .controller
        .transcript()
        .unwrap()
        .items
        .into_iter()
        .map(|s| s.item.unwrap())
        .filter(|item| !matches!(item, Item::Context(_)))
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
            usage: None,
        },
    ]);
    let f = fixture(scenario).await;
    let mut events = f.controller.subscribe();
    let controller = f.controller.clone();
    let turn = tokio::spawn(async move { controller.submit("go".into()).await });
    wait_for(&mut events, |body| {
        matches!(body, EventBody::ToolCall { .. })
    })
    .await;
    // Cancel once the tool has really started (its receipt says so), not after a guess.
    wait_until(|| {
        f.controller
            .transcript()
            .unwrap()
            .receipts
            .first()
            .is_some_and(|receipt| receipt.state == ReceiptState::Started)
    })
    .await;
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
        .controller
        .transcript()
        .unwrap()
        .receipts
        .iter()
        .map(|r| r.state)
        .collect();
    assert_eq!(states, [ReceiptState::Cancelled, ReceiptState::NotStarted]);
    assert_eq!(f.server.requests().len(), 1, "no request after the cancel");
    let items = f.controller.transcript().unwrap().items;
    assert_eq!(
        items.len(),
        5,
        "the context block, user, assistant, and a result for each call"
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
    let turn = tokio::spawn(async move { controller.submit("one".into()).await });
    wait_for(&mut events, |body| {
        matches!(body, EventBody::LlmRequest { .. })
    })
    .await;
    let second = f.controller.submit("two".into()).await;
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
        f.controller.submit("go".into()).await.unwrap(),
        TurnOutcome::Failed {
            recovery_id: Some(_),
            ..
        }
    ));
    let pending = f
        .controller
        .pending_recovery()
        .expect("a recovery is pending");
    let mut events = f.controller.subscribe();
    let controller = f.controller.clone();
    let recovering = tokio::spawn(async move {
        controller
            .submit(Input::ProtocolRecovery {
                recovery_id: None,
                guidance: None,
            })
            .await
    });
    wait_for(&mut events, |body| {
        matches!(body, EventBody::LlmRequest { .. })
    })
    .await;
    assert_eq!(
        f.controller.pending_recovery(),
        None,
        "nothing is offered while a turn runs"
    );
    let concurrent = f
        .controller
        .submit(Input::ProtocolRecovery {
            recovery_id: Some(pending.clone()),
            guidance: None,
        })
        .await;
    assert!(
        matches!(
            concurrent,
            Err(keel_agent::AgentError::RecoveryRefused(
                keel_agent::RecoveryRefusal::TurnRunning
            ))
        ),
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
