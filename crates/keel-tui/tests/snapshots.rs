//! Snapshots of the live region through ratatui's test backend: every card state, the approval
//! (its diff and question in the scrollback, its keys in the region), the status line, and a
//! turn in flight (answer tail, waiting, a running tool, a queued prompt, the input), at widths
//! 40, 80 and 120, with colours and without (`NO_COLOR`). The buffer's debug form lists each
//! run of style, so a lost colour shows as a changed snapshot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_render::{Colors, Line};
use keel_tui::cards::{self, Call, Ended};
use keel_tui::{Frame, LiveView, Status, frame_buffer};
use keel_types::ApprovalRequest;
use keel_types::Preview;
use keel_types::{Event, EventBody, ReceiptState};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use std::time::{Duration, Instant};

const WIDTHS: [u16; 3] = [40, 80, 120];

/// `lines` drawn on a test terminal `width` wide, as the buffer's debug form.
fn drawn(lines: Vec<Line>, width: u16, colors: Colors) -> String {
    let height = u16::try_from(lines.len().max(1)).unwrap();
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    let frame = Frame {
        lines,
        cursor: None,
    };
    terminal
        .draw(|f| {
            let buffer = frame_buffer(&frame, Rect::new(0, 0, width, height), colors);
            f.buffer_mut().merge(&buffer);
        })
        .unwrap();
    format!("{:?}", terminal.backend().buffer())
}

fn each(name: &str, make: impl Fn(u16) -> Vec<Line>) {
    for width in WIDTHS {
        for (colors, label) in [(Colors::Ansi, "color"), (Colors::None, "no_color")] {
            let lines = make(width);
            for line in &lines {
                assert!(
                    line.width() <= usize::from(width),
                    "{name} at {width}: {}",
                    line.plain()
                );
            }
            insta::assert_snapshot!(
                format!("{name}_{width}_{label}"),
                drawn(lines, width, colors)
            );
        }
    }
}

fn status() -> Status {
    Status {
        model: "deepseek/deepseek-v4-flash".into(),
        mode: "ask".into(),
        context_percent: Some(42),
        cache_hit_percent: Some(91),
        tokens_in: 184_220,
        tokens_out: 3_310,
        cost: Some("$0.0213".into()),
        working: None,
        jobs: 0,
    }
}

#[test]
fn every_card_state() {
    each("cards", |width| {
        let width = usize::from(width);
        let call = |name: &str, subject: &str| Call {
            call_id: "c".into(),
            name: name.into(),
            subject: subject.into(),
            read_only: false,
        };
        let output: String = (1..=12).map(|n| format!("test t{n} ... ok\n")).collect();
        let mut lines = cards::running(
            &call("bash", "cargo test"),
            Duration::from_millis(3400),
            false,
            "   Compiling keel v0.1.0\ntest a ... ok\ntest b ... ok\nprogress 10%\rprogress 80%\n",
            width,
        );
        // A read-only command run without a question.
        lines.extend(cards::running(
            &Call {
                read_only: true,
                ..call("bash", "git status --short")
            },
            Duration::from_millis(200),
            false,
            " M src/lib.rs\n",
            width,
        ));
        lines.extend(cards::running(
            &call("edit_file", "src/lib.rs"),
            Duration::ZERO,
            true,
            "",
            width,
        ));
        for (state, name, subject, summary) in [
            (ReceiptState::Completed, "bash", "cargo test", "exit 0"),
            (ReceiptState::Failed, "bash", "cargo build", "exit 101"),
            (
                ReceiptState::Denied,
                "write_file",
                "/etc/passwd",
                "outside the workspace: denied",
            ),
            (
                ReceiptState::Cancelled,
                "bash",
                "sleep 100",
                "cancelled by the user",
            ),
            (
                ReceiptState::Unknown,
                "bash",
                "./deploy.sh",
                "keel stopped while it ran",
            ),
            (
                ReceiptState::Completed,
                "read_file",
                "src/main.rs",
                "120 lines",
            ),
            (
                ReceiptState::Completed,
                "grep",
                "TODO in src",
                "3 matches in 2 files",
            ),
            (ReceiptState::Completed, "glob", "**/*.rs", "14 files"),
            (
                ReceiptState::Completed,
                "write_file",
                "notes.txt",
                "created notes.txt (2 lines)",
            ),
            (
                ReceiptState::Completed,
                "mcp__docs__search",
                "{\"query\":\"ratatui inline viewport\",\"limit\":5}",
                "2 results",
            ),
        ] {
            lines.extend(cards::ended(
                &call(name, subject),
                &Ended {
                    state,
                    summary: summary.into(),
                    output: format!("{output}[exit code 0]"),
                    lines: 13,
                },
                width,
            ));
        }
        lines
    });
}

#[test]
fn the_status_line() {
    each("status", |width| {
        let width = usize::from(width);
        // Everything known; then a model with no price and no known window: tokens only.
        let unpriced = Status {
            context_percent: None,
            cost: None,
            ..status()
        };
        let full_context = Status {
            context_percent: Some(91),
            ..status()
        };
        // A turn running, the input holding text.
        let working = Status {
            working: Some(keel_tui::status::Working {
                elapsed: std::time::Duration::from_millis(4_200),
                output_estimate: 380,
                input_holds_text: true,
                asking: false,
            }),
            ..status()
        };
        vec![
            status().line(width),
            unpriced.line(width),
            full_context.line(width),
            working.line(width),
        ]
    });
}

fn edit_request() -> ApprovalRequest {
    ApprovalRequest {
        call_id: "call_1".into(),
        tool: "edit_file".into(),
        subject: "src/lib.rs".into(),
        arguments: String::new(),
        unconfined: false,
        plan: false,
        reason: None,
        always_label: Some("edit_file".into()),
        preview: Some(Preview::Change {
            before: Some(b"fn a() {}\nfn b() {}\n".to_vec()),
            after: b"fn a() {}\nfn b() { todo() }\n".to_vec(),
        }),
        asked_by: None,
    }
}

fn event(body: EventBody) -> Event {
    Event {
        id: None,
        session_id: "s".into(),
        turn: Some(1),
        body,
    }
}

#[test]
fn an_approval_shows_its_diff_then_one_key_choices() {
    each("approval", |width| {
        let now = Instant::now();
        let mut view = LiveView::new(status(), Vec::new(), usize::from(width), 30);
        view.apply(
            &event(EventBody::ToolCall {
                call_id: "call_1".into(),
                name: "edit_file".into(),
                arguments: "{\"path\":\"src/lib.rs\"}".into(),
                subject: Some("src/lib.rs".into()),
            }),
            now,
        );
        view.ask(&edit_request());
        let mut lines = view.take_commits();
        lines.push(Line::from_text("(live region:)", keel_render::Style::PLAIN));
        lines.extend(view.frame(now).lines);
        lines
    });
}

/// A command of three lines, one with a long run of spaces and one with an invisible
/// character: every line shown, the run folded and marked, the character made visible, the line
/// count next to the keys, and "always" naming the program and subcommand it covers.
#[test]
fn a_command_approval_shows_every_line_folded_and_what_always_covers() {
    each("approval_bash", |width| {
        let now = Instant::now();
        let command = format!(
            "git status &&\\\n  cargo test{}--workspace &&\\\n  echo done{}",
            " ".repeat(40),
            '\u{200b}'
        );
        let mut view = LiveView::new(status(), Vec::new(), usize::from(width), 30);
        view.apply(
            &event(EventBody::ToolCall {
                call_id: "call_1".into(),
                name: "bash".into(),
                arguments: "{}".into(),
                subject: Some(command.clone()),
            }),
            now,
        );
        view.ask(&ApprovalRequest {
            call_id: "call_1".into(),
            tool: "bash".into(),
            subject: command,
            arguments: "{}".into(),
            unconfined: false,
            plan: false,
            reason: None,
            preview: None,
            always_label: Some("git status, cargo test, echo 'done⟨U+200B⟩'".into()),
            asked_by: None,
        });
        let mut lines = view.take_commits();
        lines.push(Line::from_text("(live region:)", keel_render::Style::PLAIN));
        lines.extend(view.frame(now).lines);
        lines
    });
}

#[test]
fn a_turn_in_flight() {
    each("in_flight", |width| {
        let now = Instant::now();
        let mut view = LiveView::new(status(), Vec::new(), usize::from(width), 24);
        view.set_busy(true);
        view.apply(
            &event(EventBody::LlmRequest {
                attempt: 1,
                protocol: keel_types::WireProtocol::Chat,
                model: "m".into(),
                message_count: 1,
                prefix_hash: "h".into(),
                account: "default".into(),
            }),
            now,
        );
        view.apply(
            &event(EventBody::LlmText {
                delta: "## Plan\n\n1. read **the** file\n2. fix it\n\n```rust\nfn main() {\n"
                    .into(),
            }),
            now,
        );
        view.apply(
            &event(EventBody::ToolCall {
                call_id: "c2".into(),
                name: "bash".into(),
                arguments: "{\"command\":\"cargo test --workspace\"}".into(),
                subject: Some("cargo test --workspace".into()),
            }),
            now,
        );
        view.queue("then update the README".into());
        view.editor.insert_str("and a second line\nof input");
        view.frame(now + Duration::from_millis(2500)).lines
    });
}
