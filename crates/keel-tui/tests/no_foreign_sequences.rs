//! Property: whatever events a session sends (model text with escape sequences, tabs, carriage
//! returns and wide characters; hostile tool names, arguments and output; notices), every line
//! the live region commits to the scrollback or shows in a frame fits the width and holds no
//! control character — so the only sequences on screen are the ones keel writes itself.

use keel_render::Line;
use keel_tui::{LiveView, Status};
use keel_types::ApprovalRequest;
use keel_types::{Event, EventBody, ReceiptState, WireProtocol};
use proptest::prelude::*;
use std::time::Instant;

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{202a}-\\u{202e}]{1,4}",
        Just("\u{1b}[2J".to_string()),
        Just("\u{1b}]8;;http://evil\u{7}x\u{1b}]8;;\u{7}".to_string()),
        Just("\u{9b}31m".to_string()),
        Just("\r\u{1b}[2K".to_string()),
        Just("\t\t".to_string()),
        Just("日本語の全角テキスト".to_string()),
        Just("\n```rust\n".to_string()),
        Just("\n| a | b |\n|---|--:|\n| 1 | 2 |\n".to_string()),
        Just("\n\n".to_string()),
    ]
}

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(fragment(), 0..8).prop_map(|parts| parts.concat())
}

fn body() -> impl Strategy<Value = EventBody> {
    prop_oneof![
        text().prop_map(|delta| EventBody::LlmText { delta }),
        text().prop_map(|delta| EventBody::LlmReasoning { delta }),
        Just(EventBody::LlmRequest {
            attempt: 1,
            protocol: WireProtocol::Chat,
            model: "m".into(),
            message_count: 1,
            prefix_hash: "h".into(),
            account: "a".into(),
        }),
        (text(), text()).prop_map(|(name, arguments)| EventBody::ToolCall {
            call_id: "c".into(),
            name,
            arguments,
            subject: None,
        }),
        text().prop_map(|delta| EventBody::ToolOutput {
            call_id: "c".into(),
            delta,
        }),
        (text(), text(), text()).prop_map(|(name, summary, output)| EventBody::ToolResult {
            call_id: "c".into(),
            name,
            state: ReceiptState::Failed,
            summary,
            output,
            tail: String::new(),
            lines: 3,
        }),
        (text(), text()).prop_map(|(before, after)| EventBody::ToolPreview {
            call_id: "c".into(),
            before: Some(before),
            after,
        }),
        text().prop_map(|summary| EventBody::ToolResult {
            call_id: "c".into(),
            name: "edit_file".into(),
            state: ReceiptState::Completed,
            summary,
            output: String::new(),
            tail: String::new(),
            lines: 1,
        }),
        (text(), text()).prop_map(|(query, _)| EventBody::SearchResult {
            query,
            sources_status: None,
            sources: 0,
        }),
    ]
}

/// The first line that is too wide or holds a control character, if any.
fn bad_line(lines: &[Line], width: usize) -> Option<String> {
    lines
        .iter()
        .find(|line| {
            line.width() > width
                || line
                    .plain()
                    .chars()
                    .any(|c| c.is_control() || c == '\u{9b}')
        })
        .map(|line| format!("{:?} ({} columns)", line.plain(), line.width()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn nothing_from_outside_puts_a_sequence_or_an_overlong_line_on_screen(
        bodies in proptest::collection::vec(body(), 1..12),
        width in 20usize..120,
        typed in text(),
        tool in text(),
        subject in text(),
    ) {
        let mut view = LiveView::new(Status { model: tool.clone(), ..Status::default() }, Vec::new(), width, 30);
        let now = Instant::now();
        view.set_busy(true);
        for body in bodies {
            view.apply(&Event { id: None, session_id: "s".into(), turn: Some(1), body }, now);
            let commits = view.take_commits();
            prop_assert!(bad_line(&commits, width).is_none(), "commit {:?}", bad_line(&commits, width));
            let frame = view.frame(now);
            prop_assert!(frame.lines.len() <= 29);
            prop_assert!(bad_line(&frame.lines, width).is_none(), "frame {:?}", bad_line(&frame.lines, width));
        }
        view.editor.insert_str(&typed);
        view.queue(typed.clone());
        view.set_notice(Some(typed.clone()));
        view.ask(&ApprovalRequest {
            call_id: "c".into(),
            tool,
            // "always" worded as anything a subject may hold: drawn as safely as the subject.
            always_label: Some(subject.clone()),
            subject,
            arguments: String::new(),
            unconfined: false,
            plan: false,
            reason: None,
            preview: None,
            asked_by: None,
        });
        let commits = view.take_commits();
        prop_assert!(bad_line(&commits, width).is_none(), "question {:?}", bad_line(&commits, width));
        let frame = view.frame(now);
        prop_assert!(bad_line(&frame.lines, width).is_none(), "approval {:?}", bad_line(&frame.lines, width));
    }
}
