use super::*;

#[test]
fn keys_pressed_as_an_approval_appears_do_not_answer_it() {
    let mut view = LiveView::new(Status::default(), Vec::new(), 80, 24);
    assert!(view.answerable(Instant::now()));
    view.ask(&ApprovalRequest {
        call_id: "c".into(),
        tool: "bash".into(),
        subject: "rm -rf build".into(),
        arguments: String::new(),
        unconfined: false,
        plan: false,
        reason: None,
        preview: None,
        always_label: Some("rm -rf build".into()),
        asked_by: None,
    });
    let now = Instant::now();
    assert!(!view.answerable(now));
    assert!(view.answerable(now + ANSWER_DELAY));
    // Typing that goes on after the question appeared: no key of the burst answers it,
    // the first key after a pause does.
    let mut at = now;
    for _ in 0..10 {
        at += ANSWER_DELAY / 2;
        assert!(!view.answerable(at), "a key in the burst");
        view.key_pressed(at);
    }
    assert!(!view.answerable(at + ANSWER_DELAY / 2));
    assert!(view.answerable(at + ANSWER_DELAY));
}

#[test]
fn a_card_announced_after_its_question_is_not_drawn_beside_it() {
    let mut view = LiveView::new(Status::default(), Vec::new(), 80, 24);
    // The question and the card come over different channels: the question first here.
    view.ask(&ApprovalRequest {
        call_id: "c".into(),
        tool: "write_file".into(),
        subject: "notes.txt".into(),
        arguments: String::new(),
        unconfined: false,
        plan: false,
        reason: None,
        preview: None,
        always_label: Some("write_file".into()),
        asked_by: None,
    });
    let now = Instant::now();
    view.apply(
        &Event {
            id: None,
            session_id: "s".into(),
            turn: Some(1),
            body: EventBody::ToolCall {
                call_id: "c".into(),
                name: "write_file".into(),
                arguments: "{}".into(),
                subject: Some("notes.txt".into()),
            },
        },
        now,
    );
    let shown: String = view
        .frame(now + std::time::Duration::from_secs(10))
        .lines
        .iter()
        .map(|line| line.plain() + "\n")
        .collect();
    // One block says what waits: no card repeats it.
    assert_eq!(shown.matches("notes.txt").count(), 1, "{shown}");
    assert!(shown.contains("? write_file notes.txt"), "{shown}");
    assert!(!shown.contains("waiting for your answer"), "{shown}");
    // Answered: one line in the scrollback, and the card runs.
    view.answered("allowed");
    let said = keel_render::to_plain(&view.take_commits());
    assert_eq!(said, "✓ write_file notes.txt · allowed\n");
    let shown: String = view
        .frame(now)
        .lines
        .iter()
        .map(|line| line.plain() + "\n")
        .collect();
    assert!(shown.contains("● write_file notes.txt"), "{shown}");
}

#[test]
fn a_tab_counts_as_the_space_it_is_drawn_as() {
    for line in wrapped("a\tb\tc", 3, Style::PLAIN) {
        assert!(line.width() <= 3, "{line:?}");
    }
    assert_eq!(wrapped("a\tb", 3, Style::PLAIN)[0].plain(), "a b");
    assert_eq!(crate::rows::cut("\t\t\t\tx", 3), "  …");
}

#[test]
fn the_slash_menu_stays_shut_while_history_is_browsed() {
    let mut view = LiveView::new(
        Status::default(),
        vec!["older prompt".into(), "/status".into()],
        80,
        24,
    );
    view.menu = crate::SlashMenu::new(vec![
        crate::MenuEntry::from_usage("/status", "what is in force"),
        crate::MenuEntry::from_usage("/sessions", "the sessions"),
    ]);
    view.editor.insert_str("/s");
    assert!(view.menu_open());
    view.editor.clear();
    // Up brings back `/status`: a history entry, not typed, so Up goes on through history.
    view.editor.up();
    assert_eq!(view.editor.text(), "/status");
    assert!(!view.menu_open());
    view.editor.up();
    assert_eq!(view.editor.text(), "older prompt");
    // A command typed whole is known as itself.
    assert!(view.menu.knows("/status"));
    assert!(!view.menu.knows("/stat"));
}
