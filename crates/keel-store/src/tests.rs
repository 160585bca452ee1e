//! Store tests on a real SQLite file: append-only history, receipts, leases, damaged files.

use super::*;
use keel_types::{
    AssistantItem, AssistantPart, Event, EventBody, InputKind, Item, ReceiptState, ToolCall,
    ToolReceipt,
};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state/keel.db")).unwrap();
    (dir, store)
}

fn receipt(seq: u64, state: ReceiptState) -> ToolReceipt {
    ToolReceipt {
        call_id: format!("c{seq}"),
        tool: "bash".into(),
        args_digest: "d".into(),
        state,
        turn: 1,
        seq,
        summary: None,
        sandbox: None,
        child_session: None,
    }
}

#[test]
fn history_is_append_only_with_gap_free_revisions() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "deepseek", "m").unwrap();
    let first = store
        .append_items("s1", 1, &[Item::User { text: "a".into() }])
        .unwrap();
    let more = store
        .append_items(
            "s1",
            1,
            &[
                Item::User { text: "b".into() },
                Item::User { text: "c".into() },
            ],
        )
        .unwrap();
    assert_eq!(first, [1]);
    assert_eq!(more, [2, 3]);
    let items = store.items("s1").unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[2].item, Ok(Item::User { text: "c".into() }));
    assert!(matches!(
        store.append_items("nope", 1, &[]),
        Err(StoreError::NoSuchSession(_))
    ));
}

#[test]
fn write_ahead_receipts_and_settling_after_a_crash() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "p", "m").unwrap();
    let assistant = Item::Assistant(AssistantItem {
        parts: vec![AssistantPart::ToolCall(ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            arguments: "{}".into(),
        })],
    });
    store
        .append_with_receipts(
            "s1",
            1,
            &assistant,
            &[
                receipt(1, ReceiptState::Pending),
                receipt(2, ReceiptState::Pending),
            ],
        )
        .unwrap();
    store
        .put_receipt("s1", &receipt(1, ReceiptState::Started))
        .unwrap();
    // The process dies here. On load:
    assert_eq!(store.settle_interrupted_receipts("s1").unwrap(), 2);
    let states: Vec<ReceiptState> = store
        .receipts("s1")
        .unwrap()
        .iter()
        .map(|r| r.state)
        .collect();
    assert_eq!(states, [ReceiptState::Unknown, ReceiptState::NotStarted]);
    assert_eq!(
        store.settle_interrupted_receipts("s1").unwrap(),
        0,
        "idempotent"
    );
}

#[test]
fn an_undecodable_item_is_reported_not_dropped() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "p", "m").unwrap();
    store
        .append_items("s1", 1, &[Item::User { text: "ok".into() }])
        .unwrap();
    store
        .connection()
        .execute("INSERT INTO items (session_id, revision, turn, item, created_at) VALUES ('s1', 2, 1, '{\"role\":\"alien\"}', 0)", [])
        .unwrap();
    store
        .append_items(
            "s1",
            1,
            &[Item::User {
                text: "after".into(),
            }],
        )
        .unwrap();
    let items = store.items("s1").unwrap();
    assert_eq!(items.len(), 3);
    assert!(items[1].item.is_err());
    assert_eq!(items[1].revision, 2);
    assert_eq!(
        items[2].item,
        Ok(Item::User {
            text: "after".into()
        })
    );
}

#[test]
fn sessions_are_listed_newest_first_per_workspace() {
    let (_dir, store) = store();
    store.create_session("old", "/w", "p", "m").unwrap();
    store
        .create_session("other", "/elsewhere", "p", "m")
        .unwrap();
    store.create_session("new", "/w", "p", "m").unwrap();
    let ids: Vec<String> = store
        .sessions_for_workspace("/w")
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["new", "old"]);
    std::thread::sleep(std::time::Duration::from_millis(3));
    store
        .append_items("old", 1, &[Item::User { text: "x".into() }])
        .unwrap();
    let ids: Vec<String> = store
        .sessions_for_workspace("/w")
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(
        ids,
        ["old", "new"],
        "updating a session moves it to the front"
    );
}

#[test]
fn events_are_indexed_for_replay() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "p", "m").unwrap();
    for _ in 0..3 {
        let event = Event {
            id: None,
            session_id: "s1".into(),
            turn: Some(1),
            body: EventBody::TurnStarted {
                input_kind: InputKind::User,
            },
        };
        store.append_event(&event).unwrap();
    }
    let after_one: Vec<u64> = store
        .events_after("s1", 1)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(after_one, [2, 3]);
}

#[test]
fn recovery_records_round_trip_byte_for_byte() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "p", "m").unwrap();
    let raw = r#"{"version":7,"id":"r1","future_field":{"z":1,"a":[3,2]}}"#;
    store.put_recovery_record("s1", "r1", raw).unwrap();
    assert_eq!(
        store.recovery_records("s1").unwrap(),
        [("r1".to_string(), raw.to_string())]
    );
}

#[test]
fn a_live_lease_is_refused_with_its_holder_and_a_dead_one_is_taken_over() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "p", "m").unwrap();
    // pid 1 is always alive.
    let held = store.acquire_lease_as("s1", "keel serve", 1).unwrap();
    let error = store.acquire_lease("s1", "keel run").unwrap_err();
    let message = error.to_string();
    assert!(message.contains("keel serve (pid 1)"), "{message}");
    std::mem::forget(held);
    store
        .connection()
        .execute("UPDATE leases SET pid = 999999999", [])
        .unwrap();
    let lease = store.acquire_lease("s1", "keel run").unwrap();
    drop(lease);
    let count: i64 = store
        .connection()
        .query_row("SELECT count(*) FROM leases", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 0, "dropping a lease releases it");
}

#[test]
fn a_corrupt_file_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keel.db");
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &garbage).unwrap();
    let error = Store::open(&path).unwrap_err();
    assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains("left untouched"));
    assert_eq!(std::fs::read(&path).unwrap(), garbage);
}

#[test]
fn a_newer_schema_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keel.db");
    {
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute_batch("CREATE TABLE future (x); PRAGMA user_version = 99;")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let error = Store::open(&path).unwrap_err();
    assert!(
        matches!(error, StoreError::NewerSchema { found: 99, .. }),
        "{error}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_foreign_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keel.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE mine (x);")
        .unwrap();
    assert!(matches!(
        Store::open(&path),
        Err(StoreError::Corrupt { .. })
    ));
}

#[test]
fn reopening_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keel.db");
    {
        let store = Store::open(&path).unwrap();
        store.create_session("s1", "/w", "p", "m").unwrap();
        store
            .append_items(
                "s1",
                1,
                &[Item::User {
                    text: "kept".into(),
                }],
            )
            .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(
        store.items("s1").unwrap()[0].item,
        Ok(Item::User {
            text: "kept".into()
        })
    );
}

#[test]
fn concurrent_first_opens_of_a_fresh_database_all_succeed() {
    // Several processes starting on a new KEEL_HOME at once: each must find (or create)
    // exactly one schema, never "table already exists" or a false "corrupt".
    for _round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("keel.db");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let openers: Vec<_> = (0..4)
            .map(|n| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let store = Store::open(&path)?;
                    store.create_session(&format!("s{n}"), "/w", "p", "m")?;
                    Ok::<(), StoreError>(())
                })
            })
            .collect();
        for opener in openers {
            opener.join().unwrap().unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.sessions_for_workspace("/w").unwrap().len(), 4);
    }
}

fn user(text: &str) -> Item {
    Item::User { text: text.into() }
}

fn texts(items: &[StoredItem]) -> Vec<String> {
    items
        .iter()
        .map(|stored| match &stored.item {
            Ok(Item::User { text }) => text.clone(),
            Ok(Item::Summary(summary)) => format!("summary:{}", summary.text),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_rewrite_is_a_new_revision_and_the_old_one_stays_readable() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "p", "m").unwrap();
    store
        .append_items("s1", 1, &[user("a"), user("b"), user("c")])
        .unwrap();
    store
        .put_receipt("s1", &receipt(1, ReceiptState::Unknown))
        .unwrap();
    assert_eq!(store.current_revision("s1").unwrap(), 1);
    let summary = Item::Summary(keel_types::Summary {
        text: "a and b".into(),
        replaced: 2,
        plan: None,
    });
    let rewrite = HistoryRewrite {
        replaces: 1,
        items: &[(2, summary), (1, user("c"))],
        reason: "manual",
        tokens_before: 300,
        tokens_after: 120,
        replaced: 2,
    };
    assert_eq!(store.rewrite_history("s1", &rewrite).unwrap(), 2);
    assert_eq!(texts(&store.items("s1").unwrap()), ["summary:a and b", "c"]);
    store.append_items("s1", 2, &[user("d")]).unwrap();
    assert_eq!(
        texts(&store.items("s1").unwrap()),
        ["summary:a and b", "c", "d"],
        "appends join the current revision"
    );
    assert_eq!(
        texts(&store.items_of_revision("s1", 1).unwrap()),
        ["a", "b", "c"]
    );
    let revisions = store.revisions("s1").unwrap();
    assert_eq!(revisions.len(), 2);
    assert_eq!(
        (revisions[0].reason.as_str(), revisions[0].items),
        ("start", 3)
    );
    assert_eq!(
        (
            revisions[1].reason.as_str(),
            revisions[1].items,
            revisions[1].tokens_before
        ),
        ("manual", 3, 300)
    );
    assert_eq!(
        store.receipts("s1").unwrap()[0].state,
        ReceiptState::Unknown,
        "receipts are untouched"
    );
    // A rewrite of a revision that is no longer current writes nothing.
    let stale = HistoryRewrite {
        replaces: 1,
        ..rewrite
    };
    assert!(matches!(
        store.rewrite_history("s1", &stale),
        Err(StoreError::HistoryMoved {
            expected: 1,
            found: 2,
            ..
        })
    ));
    assert_eq!(store.revisions("s1").unwrap().len(), 2);
    assert!(matches!(
        store.items_of_revision("s1", 3),
        Err(StoreError::NoSuchRevision { latest: 2, .. })
    ));
}

#[test]
fn a_version_1_database_is_migrated_in_place_and_keeps_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keel.db");
    {
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute_batch(&format!("{} PRAGMA user_version = 1;", schema::SCHEMA_V1))
            .unwrap();
        connection
            .execute_batch(
                "INSERT INTO sessions VALUES ('s1', '/w', 'p', 'm', 1, 1);
                 INSERT INTO items VALUES ('s1', 1, 1, '{\"role\":\"user\",\"text\":\"old\"}', 1);",
            )
            .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(texts(&store.items("s1").unwrap()), ["old"]);
    assert_eq!(store.current_revision("s1").unwrap(), 1);
    store.append_items("s1", 2, &[user("new")]).unwrap();
    assert_eq!(texts(&store.items("s1").unwrap()), ["old", "new"]);
    // Version 4: receipts carry the sandbox their command ran under; a later update without
    // one keeps it.
    let mut started = ToolReceipt {
        sandbox: Some("workspace-write".into()),
        child_session: None,
        ..receipt(1, ReceiptState::Started)
    };
    store.put_receipt("s1", &started).unwrap();
    started.state = ReceiptState::Completed;
    started.sandbox = None;
    store.put_receipt("s1", &started).unwrap();
    let stored = store.receipts("s1").unwrap();
    assert_eq!(stored[0].state, ReceiptState::Completed);
    assert_eq!(stored[0].sandbox.as_deref(), Some("workspace-write"));
}

/// `PRAGMA synchronous` of the store's connection (2 is FULL).
fn synchronous(store: &Store) -> i64 {
    store
        .connection()
        .query_row("PRAGMA synchronous", [], |row| row.get(0))
        .unwrap()
}

#[test]
fn writes_that_skip_their_own_fsync_leave_every_other_write_synchronous() {
    let (_dir, store) = store();
    assert_eq!(
        synchronous(&store),
        2,
        "a new store is FULL after its schema"
    );
    store.create_session("s1", "/w", "deepseek", "m").unwrap();
    let lease = store.acquire_lease_as("s1", "keel run", 1).unwrap();
    assert_eq!(synchronous(&store), 2, "after a lease");
    store
        .append_event(&Event {
            id: None,
            session_id: "s1".into(),
            turn: Some(1),
            body: EventBody::TurnStarted {
                input_kind: InputKind::User,
            },
        })
        .unwrap();
    assert_eq!(synchronous(&store), 2, "after an event");
    // A refused lease (an error inside the deferred write) restores it too.
    let pid = std::process::id();
    drop(lease);
    let _held = store.acquire_lease_as("s1", "keel serve", pid).unwrap();
    assert!(store.acquire_lease_as("s1", "keel run", 1).is_err());
    assert_eq!(synchronous(&store), 2, "after a refused lease");
}

#[test]
fn a_deferred_write_runs_unsynced_and_one_that_panics_leaves_no_write_unsynced() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "deepseek", "m").unwrap();
    let inside = store
        .write_deferred(|transaction| {
            Ok(transaction.query_row("PRAGMA synchronous", [], |row| row.get::<_, i64>(0))?)
        })
        .unwrap();
    assert_eq!(inside, 1, "NORMAL inside a deferred write");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _: Result<(), StoreError> = store.write_deferred(|_| panic!("inside the write"));
    }));
    assert!(panicked.is_err());
    assert_eq!(synchronous(&store), 1, "the panic skipped the restore");
    let inside_full = store
        .write(|transaction| {
            Ok(transaction.query_row("PRAGMA synchronous", [], |row| row.get::<_, i64>(0))?)
        })
        .unwrap();
    assert_eq!(inside_full, 2, "the next write is synchronous all the same");
}

#[test]
fn a_pre_image_commits_with_its_started_receipt_and_contents_are_stored_once() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "deepseek", "m").unwrap();
    let same = Before::Bytes(b"fn main() {}\n".to_vec());
    store
        .start_with_pre_images(
            "s1",
            &receipt(1, ReceiptState::Started),
            &[
                PreImage {
                    path: "/w/a.rs".into(),
                    before: same.clone(),
                },
                PreImage {
                    path: "/w/new.rs".into(),
                    before: Before::Absent,
                },
            ],
            1 << 20,
        )
        .unwrap();
    store
        .start_with_pre_images(
            "s1",
            &receipt(2, ReceiptState::Started),
            &[PreImage {
                path: "/w/b.rs".into(),
                before: same,
            }],
            1 << 20,
        )
        .unwrap();
    assert_eq!(
        store.receipts("s1").unwrap()[0].state,
        ReceiptState::Started,
        "the receipt is in the same write"
    );
    let checkpoints = store.checkpoints("s1").unwrap();
    let states: Vec<(&str, &str)> = checkpoints
        .iter()
        .map(|c| (c.path.as_str(), c.state.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("/w/a.rs", "stored"),
            ("/w/new.rs", "absent"),
            ("/w/b.rs", "stored")
        ]
    );
    let hash = checkpoints[0].hash.clone().unwrap();
    assert_eq!(checkpoints[2].hash.as_deref(), Some(hash.as_str()));
    assert_eq!(store.blob(&hash).unwrap().unwrap(), b"fn main() {}\n");
    let blobs: i64 = store
        .connection()
        .query_row("SELECT COUNT(*) FROM blobs", [], |row| row.get(0))
        .unwrap();
    assert_eq!(blobs, 1, "the same bytes once");
    assert_eq!(
        checkpoints[0].after, None,
        "nothing recorded before the result"
    );
    let result = Item::ToolResult(keel_types::ToolResult {
        call_id: "c1".into(),
        name: "write_file".into(),
        content: "ok".into(),
        is_error: false,
    });
    store
        .append_result_after(
            "s1",
            1,
            &result,
            &receipt(1, ReceiptState::Completed),
            &[
                ("/w/a.rs".into(), Some("h1".into())),
                ("/w/new.rs".into(), None),
            ],
        )
        .unwrap();
    let checkpoints = store.checkpoints("s1").unwrap();
    assert_eq!(checkpoints[0].after, Some(Some("h1".into())));
    assert_eq!(checkpoints[1].after, Some(None));
    assert_eq!(checkpoints[2].after, None);
    assert_eq!(
        store.checkpointed_paths("s1", 1).unwrap(),
        ["/w/a.rs", "/w/new.rs"]
    );
    store.mark_undone("s1", "/w/b.rs", &[2]).unwrap();
    let undone: Vec<bool> = store
        .checkpoints("s1")
        .unwrap()
        .iter()
        .map(|c| c.undone)
        .collect();
    assert_eq!(undone, [false, false, true]);
}

#[test]
fn the_oldest_checkpoints_are_pruned_to_make_room_and_say_so() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "deepseek", "m").unwrap();
    let keep = |seq: u64, path: &str, bytes: &[u8]| {
        store
            .start_with_pre_images(
                "s1",
                &receipt(seq, ReceiptState::Started),
                &[PreImage {
                    path: path.into(),
                    before: Before::Bytes(bytes.to_vec()),
                }],
                20,
            )
            .unwrap();
    };
    keep(1, "/w/a", b"aaaaaaaaaaaa");
    keep(2, "/w/b", b"bbbbbbbbbbbb");
    keep(3, "/w/c", &[b'c'; 30]);
    let checkpoints = store.checkpoints("s1").unwrap();
    assert!(
        checkpoints[0].state.starts_with("pruned: "),
        "{checkpoints:?}"
    );
    assert_eq!(checkpoints[0].hash, None);
    assert_eq!(checkpoints[1].state, "stored");
    assert!(
        checkpoints[2].state.starts_with("not kept: larger than"),
        "{checkpoints:?}"
    );
    assert_eq!(
        store.checkpoint_bytes("s1").unwrap(),
        12,
        "within the budget"
    );
    let blobs: i64 = store
        .connection()
        .query_row("SELECT COUNT(*) FROM blobs", [], |row| row.get(0))
        .unwrap();
    assert_eq!(blobs, 1, "a content nobody holds is deleted");
}

#[test]
fn removing_a_session_leaves_no_row_of_it_and_keeps_what_others_share() {
    let (_dir, store) = store();
    for session in ["gone", "kept"] {
        store.create_session(session, "/w", "p", "m").unwrap();
        store
            .append_items(session, 1, &[Item::User { text: "a".into() }])
            .unwrap();
        store
            .start_with_pre_images(
                session,
                &receipt(1, ReceiptState::Started),
                &[PreImage {
                    path: "/w/a".into(),
                    before: Before::Bytes(b"shared".to_vec()),
                }],
                1 << 20,
            )
            .unwrap();
    }
    store
        .start_with_pre_images(
            "gone",
            &receipt(2, ReceiptState::Started),
            &[PreImage {
                path: "/w/b".into(),
                before: Before::Bytes(b"only mine".to_vec()),
            }],
            1 << 20,
        )
        .unwrap();
    store.remove_session("gone").unwrap();
    let rows = |sql: &str| -> i64 {
        store
            .connection()
            .query_row(sql, ["gone"], |row| row.get(0))
            .unwrap()
    };
    for table in ["items", "receipts", "events", "checkpoints", "leases"] {
        assert_eq!(
            rows(&format!(
                "SELECT COUNT(*) FROM {table} WHERE session_id = ?1"
            )),
            0,
            "{table}"
        );
    }
    assert_eq!(rows("SELECT COUNT(*) FROM sessions WHERE id = ?1"), 0);
    let blobs: i64 = store
        .connection()
        .query_row("SELECT COUNT(*) FROM blobs", [], |row| row.get(0))
        .unwrap();
    assert_eq!(
        blobs, 1,
        "the blob the other session holds stays; its own went"
    );
    assert_eq!(store.items("kept").unwrap().len(), 1);
    assert!(matches!(
        store.remove_session("gone"),
        Err(StoreError::NoSuchSession(_))
    ));
}

#[test]
fn a_session_list_reads_titles_and_turns_past_a_damaged_row() {
    let (_dir, store) = store();
    store.create_session("s1", "/w", "p", "m").unwrap();
    store
        .connection()
        .execute(
            "INSERT INTO items (session_id, revision, turn, item, created_at) \
             VALUES ('s1', 1, 1, 'not json at all', 0)",
            [],
        )
        .unwrap();
    store
        .append_items(
            "s1",
            2,
            &[Item::User {
                text: "  fix the parser\nthen the tests".into(),
            }],
        )
        .unwrap();
    store.create_session("s2", "/w", "p", "m").unwrap();
    let listed = store.session_overviews("/w").unwrap();
    let s1 = listed.iter().find(|o| o.info.id == "s1").unwrap();
    assert_eq!((s1.turns, s1.title.as_str()), (2, "fix the parser"));
    let s2 = listed.iter().find(|o| o.info.id == "s2").unwrap();
    assert_eq!((s2.turns, s2.title.as_str()), (0, ""));
}

#[test]
fn a_session_is_listed_once_it_was_answered_or_holds_an_offer() {
    let (_dir, store) = store();
    for id in ["unanswered", "answered", "offered"] {
        store.create_session(id, "/w", "p", "m").unwrap();
        store
            .append_items(id, 1, &[Item::User { text: "hi".into() }])
            .unwrap();
    }
    store
        .append_items(
            "answered",
            1,
            &[Item::Assistant(keel_types::AssistantItem {
                parts: vec![keel_types::AssistantPart::Text {
                    text: "hello".into(),
                }],
            })],
        )
        .unwrap();
    store
        .put_recovery_record("offered", "r1", "{\"state\":\"pending\"}")
        .unwrap();
    let listed = |id: &str| {
        let overviews = store.session_overviews("/w").unwrap();
        overviews.iter().find(|o| o.info.id == id).unwrap().listed()
    };
    assert!(!listed("unanswered"));
    assert!(listed("answered"));
    assert!(listed("offered"));
}
