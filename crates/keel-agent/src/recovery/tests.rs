//! Tests of the recovery command parser, fingerprints and the fault projection.

use super::*;
use keel_types::{AssistantItem, AssistantPart, ToolCall, ToolResult};

fn round(id: &str) -> Vec<Item> {
    vec![
        Item::Assistant(AssistantItem {
            parts: vec![
                AssistantPart::Reasoning {
                    text: "r".into(),
                    replay: None,
                },
                AssistantPart::Text {
                    text: format!("running {id}"),
                },
                AssistantPart::ToolCall(ToolCall {
                    id: id.into(),
                    name: "bash".into(),
                    arguments: "{}".into(),
                }),
            ],
        }),
        Item::ToolResult(ToolResult {
            call_id: id.into(),
            name: "bash".into(),
            content: format!("output of {id}\nline 2"),
            is_error: false,
        }),
    ]
}

fn receipt(id: &str, seq: u64, state: ReceiptState) -> ToolReceipt {
    ToolReceipt {
        call_id: id.into(),
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
fn command_parsing() {
    assert_eq!(parse_command("/recover-context"), Some((None, None)));
    assert_eq!(
        parse_command("/recover-context r-0123456789abcdef"),
        Some((Some("r-0123456789abcdef".into()), None))
    );
    assert_eq!(
        parse_command("/recover-context r-0123456789abcdef check the build"),
        Some((
            Some("r-0123456789abcdef".into()),
            Some("check the build".into())
        ))
    );
    assert_eq!(
        parse_command("/recover-context /quit now"),
        Some((None, Some("/quit now".into()))),
        "guidance is never a command"
    );
    assert_eq!(parse_command("/recover-contextual"), None);
    assert_eq!(parse_command("hello"), None);
    assert_eq!(
        recovery_prompt(Some("/model x")),
        format!("{RECOVERY_PROMPT}\n\nUser guidance: /model x")
    );
}

#[test]
fn fingerprints_find_their_boundary() {
    let mut history = vec![Item::User { text: "go".into() }];
    history.extend(round("c1"));
    let print = fingerprint(&history);
    history.push(Item::User {
        text: RECOVERY_PROMPT.into(),
    });
    assert_eq!(boundary_of(&history, &print), Some(3));
    assert_eq!(boundary_of(&history, "nope"), None);
    assert!(projection_could_change(&history));
    assert!(!projection_could_change(&history[..1]));
}

#[test]
fn fault_projection_rebuilds_tool_facts_from_receipts() {
    let mut history = vec![Item::User { text: "go".into() }];
    history.extend(round("c1"));
    history.extend(round("c2"));
    history.push(Item::User {
        text: RECOVERY_PROMPT.into(),
    });
    let receipts = [
        receipt("c1", 1, ReceiptState::Completed),
        receipt("c2", 2, ReceiptState::Unknown),
    ];
    let projected = apply_repair(&history, 5, &receipts);
    assert!(
        projected
            .iter()
            .all(|item| !matches!(item, Item::ToolResult(_)))
    );
    assert!(
        projected
            .iter()
            .all(|item| !matches!(item, Item::Assistant(a) if a.has_tool_calls()))
    );
    let Item::User { text: facts } = &projected[3] else {
        panic!("{projected:?}")
    };
    assert!(
        facts.contains("- call c1 `bash`: completed — output of c1 ⏎ line 2"),
        "{facts}"
    );
    assert!(facts.contains("- call c2 `bash`: unknown"), "{facts}");
    assert_eq!(
        projected.last(),
        history.last(),
        "items after the boundary are unchanged"
    );
}

#[test]
fn duplicate_call_ids_are_unknown() {
    let mut history = vec![Item::User { text: "go".into() }];
    history.extend(round("dup"));
    let receipts = [
        receipt("dup", 1, ReceiptState::Completed),
        receipt("dup", 2, ReceiptState::Completed),
    ];
    let projected = apply_repair(&history, 3, &receipts);
    let Item::User { text } = projected.last().unwrap() else {
        panic!()
    };
    assert!(text.contains("- call dup `bash`: unknown"), "{text}");
}

#[test]
fn a_window_bound_learned_from_a_rejection_holds_only_for_the_model_that_rejected() {
    use record::{RecordState, RecoveryRecord, StoredRecord};
    let offer = |scope: &str, tokens: u64| {
        StoredRecord::Known(RecoveryRecord {
            version: 1,
            id: format!("rec-{scope}-{tokens}"),
            state: RecordState::Expired,
            scope: scope.into(),
            fingerprint: String::new(),
            prefix: 1,
            count: 1,
            anchor: String::new(),
            run: 1,
            evidence: String::new(),
            projected: false,
            action: Some(keel_types::InputKind::ContextRecovery),
            reason: None,
            rejected_tokens: Some(tokens),
            unknown: Default::default(),
        })
    };
    let small = scope("s", "deepseek", "https://api.deepseek.com", "deepseek-chat");
    let large = scope("s", "kimi", "https://api.moonshot.ai/v1", "kimi-k2");
    let records = [
        offer(&small, 9_000),
        offer(&large, 200_000),
        offer(&small, 7_000),
    ];
    assert_eq!(admission::rejected_tokens(&records, &small), Some(7_000));
    assert_eq!(admission::rejected_tokens(&records, &large), Some(200_000));
    let other = scope(
        "s",
        "deepseek",
        "https://api.deepseek.com",
        "deepseek-reasoner",
    );
    assert_eq!(admission::rejected_tokens(&records, &other), None);
}
