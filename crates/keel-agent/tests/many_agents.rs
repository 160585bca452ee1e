//! Several agents in one session's services: each keeps its own history, events and
//! cancellation; they share the client, the sandbox, the store, the approver and the request
//! prefix. A child agent's events reach its parent's subscribers, and its cancellation follows
//! the parent's.

use crate::common::*;
use keel_agent::{Approval, ApprovalRequest, Approver, Input, SessionChoice, TurnOutcome};
use keel_mock::Scenario;
use keel_tools::{PermissionMode, PermissionPolicy};
use keel_types::{Event, EventBody, Item};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Approves everything, and remembers what it was asked.
#[derive(Default)]
struct Recording {
    asked: Mutex<Vec<String>>,
}

impl Approver for Recording {
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        self.asked.lock().unwrap().push(request.subject.clone());
        Box::pin(async { Approval::Allow })
    }
}

fn user_texts(controller: &keel_agent::Controller) -> Vec<String> {
    controller
        .transcript()
        .unwrap()
        .items
        .into_iter()
        .filter_map(|stored| match stored.item.unwrap() {
            Item::User { text } => Some(text),
            _ => None,
        })
        .collect()
}

fn drain(events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>) -> Vec<Event> {
    std::iter::from_fn(|| events.try_recv().ok()).collect()
}

#[tokio::test]
async fn two_agents_on_one_services_keep_their_own_history_and_events_and_share_the_rest() {
    let scenario = Scenario::from_steps(vec![
        bash("touch made-by-first"),
        say("First done."),
        bash("touch made-by-second"),
        say("Second done."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let server = keel_mock::MockServer::start(([127, 0, 0, 1], 0).into(), scenario)
        .await
        .unwrap();
    let host = keel_agent::Host::open(&dir.path().join("keel.db")).unwrap();
    let asking = |workspace: &std::path::Path| {
        let mut settings = settings_for(&server.base_url(), workspace);
        settings.policy = PermissionPolicy::mode_only(PermissionMode::Ask);
        settings
    };
    let approver = Arc::new(Recording::default());
    let surface = keel_agent::SurfaceServices::new(Arc::new(Key), approver.clone());
    let first = host
        .open_session(SessionChoice::New, asking(&workspace), surface)
        .unwrap();
    let second = host
        .open_agent(first.services(), SessionChoice::New, asking(&workspace))
        .unwrap();
    assert!(first.services().same_as(second.services()));
    assert_ne!(first.session().id, second.session().id);
    let (mut first_events, mut second_events) = (first.subscribe(), second.subscribe());

    let done = first.submit(Input::Prompt("the first task".into())).await;
    assert!(
        matches!(done, Ok(TurnOutcome::Completed { .. })),
        "{done:?}"
    );
    let done = second.submit(Input::Prompt("the second task".into())).await;
    assert!(
        matches!(done, Ok(TurnOutcome::Completed { .. })),
        "{done:?}"
    );

    // One approver asked for both, one sandboxed workspace written by both.
    let asked = approver.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].contains("made-by-first") && asked[1].contains("made-by-second"));
    assert!(workspace.join("made-by-first").exists() && workspace.join("made-by-second").exists());
    // Each history is its own.
    assert_eq!(user_texts(&first).len(), 1);
    assert!(user_texts(&first)[0].ends_with("the first task"));
    assert_eq!(user_texts(&second).len(), 1);
    assert!(user_texts(&second)[0].ends_with("the second task"));
    // Each agent's events are stamped with its own session, and only its own reach it.
    let (mine, theirs) = (drain(&mut first_events), drain(&mut second_events));
    assert!(mine.iter().any(|event| event.body
        == EventBody::TurnStarted {
            input_kind: keel_types::InputKind::User
        }));
    assert!(
        mine.iter()
            .all(|event| event.session_id == first.session().id)
    );
    assert!(
        theirs
            .iter()
            .all(|event| event.session_id == second.session().id)
    );
    assert_eq!(
        first.events_after(0).unwrap().len(),
        mine.iter().filter(|event| event.id.is_some()).count(),
        "the first agent's log holds its events only"
    );
    // Both agents' requests begin with the same system prompt and tools: one cached prefix.
    assert_eq!(
        first.request_prefix().unwrap(),
        second.request_prefix().unwrap()
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let body = |index: usize| -> serde_json::Value {
        serde_json::from_str(&requests[index].body).unwrap()
    };
    assert_eq!(body(0)["tools"], body(2)["tools"]);
    assert_eq!(body(0)["messages"][0], body(2)["messages"][0]);
}

#[tokio::test]
async fn a_child_agents_events_reach_its_parent_and_the_parents_cancel_stops_it() {
    let mut scenario = Scenario::from_steps(vec![say("a slow answer that streams for a while")]);
    scenario.chunk_delay = Duration::from_millis(150);
    let f = fixture(scenario).await;
    let child = child_of(&f);
    let mut parent_sees = f.controller.subscribe();
    // The child's turn, admitted now and run on a task of its own.
    let admitted = child.begin(Input::Prompt("look".into())).unwrap();
    let turn = tokio::spawn(admitted.run());
    wait_for(&mut parent_sees, |body| {
        matches!(body, EventBody::LlmText { .. })
    })
    .await;
    f.controller.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(5), turn)
        .await
        .expect("the child's turn stopped")
        .unwrap()
        .unwrap();
    assert_eq!(outcome, TurnOutcome::Cancelled);
    // What the parent's subscriber saw came from the child, stamped as the child's, with no id
    // of the parent's log (a subscriber resuming from an id never meets another log's).
    let seen = drain(&mut parent_sees);
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .all(|event| event.session_id == child.session().id && event.id.is_none())
    );
    assert!(
        child
            .events_after(0)
            .unwrap()
            .iter()
            .any(|event| event.id.is_some()),
        "the child's own log holds them"
    );
    // Nothing of the child is in the parent's own log.
    assert!(
        f.controller
            .events_after(0)
            .unwrap()
            .iter()
            .all(|event| event.session_id == f.controller.session().id)
    );
}

#[tokio::test]
async fn cancelling_a_child_leaves_its_parent_alone() {
    let mut scenario = Scenario::from_steps(vec![
        say("the parent's slow answer that streams for a while"),
        say("unused"),
    ]);
    scenario.chunk_delay = Duration::from_millis(100);
    let f = fixture(scenario).await;
    let child = child_of(&f);
    let mut events = f.controller.subscribe();
    let parent = f.controller.clone();
    let turn = tokio::spawn(async move { parent.submit(Input::Prompt("go".into())).await });
    wait_for(&mut events, |body| {
        matches!(body, EventBody::LlmText { .. })
    })
    .await;
    child.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(10), turn)
        .await
        .expect("the parent's turn ended")
        .unwrap()
        .unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn an_agent_on_another_workspace_or_sandbox_and_a_circle_of_followers_are_refused() {
    let f = fixture(Scenario::from_steps(vec![say("unused")])).await;
    let elsewhere = f.workspace.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let opened = f.host.open_agent(
        f.controller.services(),
        SessionChoice::New,
        settings_for(&f.server.base_url(), &elsewhere),
    );
    let Err(refused) = opened else {
        panic!("an agent in another workspace on these services");
    };
    assert!(refused.to_string().contains("elsewhere"), "{refused}");
    let mut unconfined = settings_for(&f.server.base_url(), &f.workspace);
    unconfined.sandbox = None;
    let opened = f
        .host
        .open_agent(f.controller.services(), SessionChoice::New, unconfined);
    assert!(opened.is_err(), "an unconfined agent on confined services");
    // A child cannot become its parent's parent.
    let child = child_of(&f);
    assert!(f.controller.follow(&child).is_err());
    assert!(child.follow(&child).is_err());
}
