//! Store tests of many hands (schema version 7) on a real SQLite file: child sessions, a
//! finished `task` committed in one transaction, `task` receipts naming their child, and jobs.

use super::*;
use keel_types::{Item, ReceiptState, ToolReceipt};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state/keel.db")).unwrap();
    (dir, store)
}

fn child_of(parent: &str, id: &str) -> SessionInfo {
    SessionInfo {
        id: id.into(),
        workspace: "/w".into(),
        provider: "deepseek".into(),
        model: "m".into(),
        created_at: 5,
        updated_at: 5,
        parent: Some(parent.into()),
        agent: Some("explore".into()),
    }
}

fn task_receipt(state: ReceiptState, child: Option<&str>) -> ToolReceipt {
    ToolReceipt {
        call_id: "t1".into(),
        tool: "task".into(),
        args_digest: "d".into(),
        state,
        turn: 1,
        seq: 1,
        summary: None,
        sandbox: None,
        child_session: child.map(String::from),
    }
}

fn answered(store: &Store, id: &str) {
    store
        .append_items(id, 1, &[Item::User { text: "hi".into() }])
        .unwrap();
    store
        .append_items(
            id,
            1,
            &[Item::Assistant(keel_types::AssistantItem {
                parts: vec![keel_types::AssistantPart::Text {
                    text: "hello".into(),
                }],
            })],
        )
        .unwrap();
}

#[test]
fn a_child_session_names_its_parent_and_agent_and_lists_apart() {
    let (_dir, store) = store();
    store.create_session("p", "/w", "deepseek", "m").unwrap();
    store
        .create_child_session(&child_of("p", "c"), r#"{"mode":"read-only"}"#)
        .unwrap();
    let child = store.require_session("c").unwrap();
    assert_eq!(child.parent.as_deref(), Some("p"));
    assert_eq!(child.agent.as_deref(), Some("explore"));
    assert_eq!(
        store.agent_settings("c").unwrap().as_deref(),
        Some(r#"{"mode":"read-only"}"#)
    );
    assert_eq!(store.agent_settings("p").unwrap(), None);
    assert_eq!(store.children("p").unwrap(), std::slice::from_ref(&child));
    // Lists (and `-c`) leave children out; `--json` says whose child a session is.
    answered(&store, "p");
    answered(&store, "c");
    let overviews = store.session_overviews("/w").unwrap();
    let listed: Vec<&str> = overviews
        .iter()
        .filter(|overview| overview.listed())
        .map(|overview| overview.info.id.as_str())
        .collect();
    assert_eq!(listed, ["p"]);
    let json = overviews
        .iter()
        .find(|overview| overview.info.id == "c")
        .unwrap()
        .to_json();
    assert_eq!(json["parent"], "p");
    assert_eq!(json["agent"], "explore");
    // A child needs a parent that exists, and both names.
    assert!(matches!(
        store.create_child_session(&child_of("nobody", "c2"), "{}"),
        Err(StoreError::NoSuchSession(_))
    ));
    let orphan = SessionInfo {
        agent: None,
        ..child_of("p", "c3")
    };
    assert!(matches!(
        store.create_child_session(&orphan, "{}"),
        Err(StoreError::NotAChild(_))
    ));
    // Removing the parent removes its children; a fork is a session of its own.
    let fork = store.fork_session("c", "f", None, None).unwrap();
    assert_eq!((fork.parent, fork.agent), (None, None));
    assert_eq!(store.require_session("f").unwrap().parent, None);
    // While a child is held, nothing of the parent or its children goes.
    let held = store
        .acquire_lease_as("c", "keel (interactive)", 1)
        .unwrap();
    assert!(store.remove_session("p").is_err());
    assert!(store.session("p").unwrap().is_some() && store.session("c").unwrap().is_some());
    assert_eq!(
        store.items("c").unwrap().len(),
        2,
        "the child's history is whole"
    );
    drop(held);
    assert_eq!(store.remove_session("p").unwrap(), ["p", "c"]);
    assert!(store.session("c").unwrap().is_none());
    assert!(store.session("f").unwrap().is_some());
}

#[test]
fn a_task_receipt_keeps_the_child_it_named_through_later_updates() {
    let (_dir, store) = store();
    store.create_session("p", "/w", "deepseek", "m").unwrap();
    store
        .put_receipt("p", &task_receipt(ReceiptState::Started, Some("c")))
        .unwrap();
    store
        .put_receipt("p", &task_receipt(ReceiptState::Completed, None))
        .unwrap();
    let receipts = store.receipts("p").unwrap();
    assert_eq!(receipts[0].state, ReceiptState::Completed);
    assert_eq!(receipts[0].child_session.as_deref(), Some("c"));
}

#[test]
fn a_finished_task_commits_the_childs_answer_and_the_parents_result_together() {
    let (_dir, store) = store();
    store.create_session("p", "/w", "deepseek", "m").unwrap();
    store
        .create_child_session(&child_of("p", "c"), "{}")
        .unwrap();
    let answer = [Item::User {
        text: "the child's answer".into(),
    }];
    let result = [Item::User {
        text: "the parent's task result".into(),
    }];
    let receipt = task_receipt(ReceiptState::Completed, Some("c"));
    store
        .commit_task(
            TaskEnd {
                session: "c",
                turn: 1,
                items: &answer,
                receipt: None,
            },
            TaskEnd {
                session: "p",
                turn: 1,
                items: &result,
                receipt: Some(&receipt),
            },
        )
        .unwrap();
    assert_eq!(store.items("c").unwrap().len(), 1);
    assert_eq!(store.items("p").unwrap().len(), 1);
    assert_eq!(
        store.receipts("p").unwrap()[0].state,
        ReceiptState::Completed
    );
    // One side failing writes neither: a parent that is gone takes the child's answer with it.
    let failed = store.commit_task(
        TaskEnd {
            session: "c",
            turn: 2,
            items: &answer,
            receipt: None,
        },
        TaskEnd {
            session: "gone",
            turn: 2,
            items: &result,
            receipt: None,
        },
    );
    assert!(failed.is_err());
    assert_eq!(
        store.items("c").unwrap().len(),
        1,
        "nothing of the child was kept"
    );
}

#[test]
fn jobs_count_per_session_end_once_and_never_reuse_an_id() {
    let (_dir, store) = store();
    store.create_session("s", "/w", "deepseek", "m").unwrap();
    store.create_session("t", "/w", "deepseek", "m").unwrap();
    let job = |id: String| RecordedJob {
        job: id,
        call_id: "c1".into(),
        command: "python3 -m http.server".into(),
        pgid: 4242,
        start_ticks: 99,
        boot_id: "boot".into(),
        started_at: 10,
        ended: None,
        told: false,
    };
    assert_eq!(store.next_job_id("s").unwrap(), "job-1");
    store
        .record_job("s", &job(store.next_job_id("s").unwrap()))
        .unwrap();
    store
        .record_job("s", &job(store.next_job_id("s").unwrap()))
        .unwrap();
    assert_eq!(store.next_job_id("s").unwrap(), "job-3");
    assert_eq!(
        store.next_job_id("t").unwrap(),
        "job-1",
        "ids count per session"
    );
    let end = JobEnd {
        at: 20,
        exit_code: Some(0),
        signal: None,
    };
    store.end_job("s", "job-1", end).unwrap();
    // The first end stays.
    store
        .end_job(
            "s",
            "job-1",
            JobEnd {
                at: 30,
                exit_code: None,
                signal: Some(9),
            },
        )
        .unwrap();
    let jobs = store.jobs("s").unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].ended, Some(end));
    assert_eq!(jobs[1].ended, None);
    assert_eq!(jobs[1].job, "job-2");
    assert!(!jobs[0].told);
    store.job_told("s", "job-1").unwrap();
    let jobs = store.jobs("s").unwrap();
    assert!(jobs[0].told && !jobs[1].told, "told is kept per job");
    // Ending a job never frees its id; removing the session removes its jobs.
    assert_eq!(store.next_job_id("s").unwrap(), "job-3");
    store.remove_session("s").unwrap();
    assert!(store.jobs("s").unwrap().is_empty());
}
