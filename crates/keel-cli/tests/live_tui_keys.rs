//! The live TUI's keys end to end under tmux against `keel mock`: what "always" covers, Esc
//! while typing during a turn, and the other keys a person presses at the live region.

use crate::common::tmux::{Tmux, available};
use crate::common::{scripted, tool_messages};

#[test]
fn always_for_a_command_covers_its_program_and_subcommand_only() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "echo first"}},
        {"tool": "bash", "args": {"command": "git status"}},
        {"tool": "bash", "args": {"command": "git status --short"}},
        {"tool": "bash", "args": {"command": "git stash list"}},
        {"say": "All done."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    // Read-only commands are asked about too: the question is what this is about.
    home.prepend_config("ask_read_only_commands = true");
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("look around");
    tmux.press(&["Enter"]);
    // Any other command is covered by its exact words, and the key says so.
    tmux.wait_for("a always for echo first (this session, never saved)");
    tmux.answer("y");
    tmux.wait_for("a always for git status (this session, never saved)");
    tmux.answer("a");
    // `git status --short` runs without a question; `git stash list` is asked about, and its
    // "always" would cover only those words (`git stash` can also drop).
    tmux.wait_for("a always for git stash list (this session, never saved)");
    assert!(
        tmux.everything()
            .contains("git status is allowed for the rest of this session (never saved)"),
        "{}",
        tmux.everything()
    );
    tmux.answer("n");
    tmux.wait_for("All done.");
    let results = tool_messages(&mock);
    assert_eq!(results.len(), 4, "{results:#?}");
    for allowed in &results[..3] {
        assert!(allowed.contains("[exit code "), "{results:#?}");
    }
    assert!(results[3].starts_with("denied:"), "{results:#?}");
}

#[test]
fn a_command_line_keel_cannot_read_in_full_has_no_always() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "echo $(id -u)"}},
        {"tool": "bash", "args": {"command": "echo $(id -u)"}},
        {"say": "All done."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("who am i");
    tmux.press(&["Enter"]);
    let asked = tmux.wait_for("N no + note");
    assert!(!asked.contains("always"), "{asked}");
    // `a` is not an answer here: the question stays.
    tmux.press(&["a"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(tmux.screen().contains("N no + note"), "{}", tmux.screen());
    tmux.answer("y");
    // The same line is asked about again.
    tmux.wait_until_screen("asked again", |screen| {
        screen.contains("N no + note") && screen.contains("allowed")
    });
    tmux.answer("y");
    tmux.wait_for("All done.");
    assert_eq!(tool_messages(&mock).len(), 2);
}

/// A turn whose command runs for a while, in `auto` mode: the status line, the input and Esc
/// can be watched while it runs.
fn slow_turn() -> (crate::common::Home, crate::common::MockProcess, Tmux) {
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "sleep 4; echo slept"}},
        {"say": "All done."},
        {"fault": "stall", "seconds": 30}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    home.prepend_config("permission_mode = \"auto\"\n");
    home.append_config(
        "[providers.deepseek.price]\ninput_cache_hit = 1.0\ninput_cache_miss = 2.0\n\
         output = 4.0\ncurrency = \"EUR\"\n",
    );
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 30));
    tmux.wait_for("mock-model · auto");
    (home, mock, tmux)
}

/// `slow_turn`, with its turn started and its command running.
fn running_slow_turn() -> (crate::common::Home, crate::common::MockProcess, Tmux) {
    let (home, mock, tmux) = slow_turn();
    tmux.type_text("go");
    tmux.press(&["Enter"]);
    tmux.wait_for("sleep 4");
    (home, mock, tmux)
}

/// Esc twice at the input, the first answered by its hint.
fn esc_twice(tmux: &Tmux) {
    tmux.press(&["Escape"]);
    tmux.wait_for("Esc again clears the input");
    tmux.press(&["Escape"]);
}

#[test]
fn the_status_line_counts_the_running_turns_responses() {
    if !available() {
        return;
    }
    let (_home, _mock, tmux) = slow_turn();
    assert!(!tmux.screen().contains('↑'), "{}", tmux.screen());
    tmux.type_text("go");
    tmux.press(&["Enter"]);
    // While the command runs, the first response's tokens and cost are on the status line.
    tmux.wait_until_screen("tokens while the turn runs", |screen| {
        screen.contains("sleep 4") && !screen.contains("All done.") && {
            let status = screen
                .lines()
                .rev()
                .find(|l| l.contains("mock-model"))
                .unwrap_or("");
            status.contains('↑') && status.contains('€')
        }
    });
    let during = tmux.screen();
    tmux.wait_for("All done.");
    // Counted once: the stored turn replaces the running count.
    let status = |screen: &str| {
        screen
            .lines()
            .rev()
            .find(|l| l.contains("mock-model"))
            .unwrap_or("")
            .to_string()
    };
    // `↑1.1k` as 1100.
    let up = |line: &str| -> f64 {
        let count = line
            .split('↑')
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("{line}"));
        match count.strip_suffix('k') {
            Some(thousands) => thousands.parse::<f64>().unwrap() * 1000.0,
            None => count.parse().unwrap(),
        }
    };
    let (before, after) = (up(&status(&during)), up(&status(&tmux.screen())));
    assert!(
        after > before && after < 2.0 * before + 2_000.0,
        "{before} then {after}"
    );
}

#[test]
fn esc_while_typing_during_a_turn_clears_the_input_and_keeps_the_turn() {
    if !available() {
        return;
    }
    let (_home, mock, tmux) = running_slow_turn();
    tmux.type_text("a thought for later");
    tmux.wait_for("a thought for later");
    esc_twice(&tmux);
    tmux.wait_until_screen("the input cleared", |screen| {
        !screen.contains("a thought for later")
    });
    // The turn went on: the command finished and the model answered.
    tmux.wait_for("All done.");
    assert!(
        !tmux.everything().contains("stopped — kept on screen"),
        "{}",
        tmux.everything()
    );
    assert_eq!(mock.requests().len(), 2);

    // With the input empty, Esc stops a turn.
    tmux.type_text("again");
    tmux.press(&["Enter"]);
    tmux.wait_for("waiting for the model");
    tmux.press(&["Escape"]);
    tmux.wait_for("⏹ stopped");
}

#[test]
fn shift_enter_inserts_a_newline_where_the_terminal_reports_it() {
    let scenario = serde_json::json!({"steps": [{"say": "Got it."}]}).to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let (screen, _) = crate::common::terminal::live_tui_session(
        &home,
        &[
            // A terminal with the keyboard protocol answers keel's questions: where the cursor
            // is, which keyboard flags are on, and what it is (DA1). keel then asks it for
            // modified keys.
            ("\x1b[1;1R\x1b[?0u\x1b[?62;22c", Some("\x1b[>1u"), 0),
            // Shift+Enter as that terminal sends it.
            ("hello\x1b[13;2uworld", Some("world"), 0),
            ("\r", Some("Got it."), 0),
            ("\x04", Some("resume it with"), 0),
        ],
    );
    assert_eq!(crate::common::last_user_message(&mock), "hello\nworld");
    // The terminal is put back: the flags popped as keel leaves.
    let pushed = screen.find("\x1b[>1u").unwrap();
    assert!(screen[pushed..].contains("\x1b[<1u"), "{screen:?}");
}

#[test]
fn a_terminal_without_the_keyboard_protocol_is_never_asked_for_modified_keys() {
    let scenario = serde_json::json!({"steps": [{"say": "Got it."}]}).to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let (screen, _) = crate::common::terminal::live_tui_session(
        &home,
        &[
            // Only the cursor and DA1: no keyboard protocol.
            ("\x1b[1;1R\x1b[?62;22c", None, 300),
            ("hello\r", Some("Got it."), 0),
            ("\x04", Some("resume it with"), 0),
        ],
    );
    assert_eq!(crate::common::last_user_message(&mock), "hello");
    assert!(!screen.contains("\x1b[>1u"), "{screen:?}");
}

#[test]
fn a_read_outside_the_workspace_is_asked_with_its_reason_on_every_surface() {
    let scenario = serde_json::json!({"steps": [
        {"tool": "read_file", "args": {"path": "/etc/hostname"}},
        {"say": "Not read."},
        {"tool": "read_file", "args": {"path": "/etc/hostname"}},
        {"say": "Not read either."}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    if available() {
        let tmux = Tmux::start(&home, &home.path(), &[], (100, 30));
        tmux.wait_for("mock-model · ask");
        tmux.type_text("read it");
        tmux.press(&["Enter"]);
        let asked = tmux.wait_for("asks because it reads outside the workspace");
        assert!(asked.contains("? read_file /etc/hostname"), "{asked}");
        tmux.answer("n");
        tmux.wait_for("Not read.");
    }
    // The browser's card and any client get it in the event and the waiting list.
    let server = crate::common::serve::Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(
        server
            .submit(&session, serde_json::json!({"input": "read it"}))
            .0,
        202
    );
    let events = server.events(&session, None, "approval/requested", 100);
    let asked = events
        .iter()
        .find(|e| e["type"] == "approval/requested")
        .unwrap();
    assert_eq!(asked["reason"], "it reads outside the workspace", "{asked}");
    let (_, header) = server.api(
        "GET",
        &format!("/api/sessions/{session}"),
        serde_json::Value::Null,
    );
    assert_eq!(
        header["waiting"][0]["reason"], "it reads outside the workspace",
        "{header}"
    );
}

#[test]
fn a_queued_prompt_is_shown_and_can_be_taken_back_and_cancelled() {
    if !available() {
        return;
    }
    let (_home, mock, tmux) = running_slow_turn();
    tmux.type_text("next question");
    tmux.press(&["Enter"]);
    tmux.wait_for("queued › next question");
    // Up takes it back into the input; Esc twice cancels it.
    tmux.press(&["Up"]);
    tmux.wait_until_screen("taken back", |screen| {
        !screen.contains("queued › ") && screen.contains("› next question")
    });
    esc_twice(&tmux);
    tmux.wait_until_screen("cancelled", |screen| !screen.contains("next question"));
    tmux.wait_for("All done.");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(mock.requests().len(), 2, "nothing queued was sent");
}

#[test]
fn ctrl_t_pages_the_whole_transcript_with_each_calls_state() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "seq 1 40"}},
        {"tool": "edit_file", "args": {"path": "notes.txt", "old_string": "two", "new_string": "beta"}},
        {"say": "Edited."}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    home.prepend_config("permission_mode = \"auto\"\n");
    std::fs::write(home.path().join("notes.txt"), "one\ntwo\n").unwrap();
    // `cat` as the pager: the transcript stays in the terminal's scrollback to read.
    let tmux = Tmux::start_with_env(&home, &home.path(), &[], (100, 30), &[("PAGER", "cat")]);
    tmux.wait_for("mock-model · auto");
    tmux.type_text("go");
    tmux.press(&["Enter"]);
    tmux.wait_for("Edited.");
    tmux.press(&["C-t"]);
    tmux.wait_until_screen("the transcript paged", |_| {
        tmux.everything().contains("⎿ edit_file completed")
    });
    let all = tmux.everything();
    // Every line of the command's output, which its card folds.
    assert!(all.contains("\n1\n") && all.contains("\n40\n"), "{all}");
    assert!(all.contains("● bash call\nseq 1 40"), "{all}");
    assert!(all.contains("- two") && all.contains("+ beta"), "{all}");
    // The session goes on after the pager.
    tmux.wait_for("mock-model · auto");
}

#[test]
fn ctrl_g_composes_the_prompt_in_the_editor() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [{"say": "Read it."}]}).to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    // An "editor" that appends two lines to what was typed.
    let editor = home.path().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nprintf ' and more\\nfrom the editor\\n' >> \"$1\"\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", editor.to_str().unwrap()])
        .status()
        .unwrap();
    let tmux = Tmux::start_with_env(
        &home,
        &home.path(),
        &[],
        (100, 30),
        &[("VISUAL", editor.to_str().unwrap())],
    );
    tmux.wait_for("mock-model · ask");
    tmux.type_text("typed");
    tmux.press(&["C-g"]);
    // Back from the editor: its text is the input, not sent until Enter.
    tmux.wait_for("from the editor");
    assert_eq!(mock.requests().len(), 0);
    tmux.press(&["Enter"]);
    tmux.wait_for("Read it.");
    assert_eq!(
        crate::common::last_user_message(&mock),
        "typed and more\nfrom the editor"
    );
}

#[test]
fn term_dumb_keeps_the_line_mode() {
    let scenario = serde_json::json!({"steps": [{"say": "Plain."}]}).to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let (screen, _) = crate::common::terminal::terminal_session_with_env(
        &home,
        &[("TERM", "dumb")],
        &[
            ("hello\n", Some("Plain."), 0),
            ("\u{4}", Some("resume it with"), 0),
        ],
    );
    // No live region: no synchronized frames, no status line, no cursor questions.
    assert!(!screen.contains("\x1b[?2026h"), "{screen:?}");
    assert!(!screen.contains("mock-model · ask"), "{screen:?}");
    assert!(!screen.contains("\x1b[6n"), "{screen:?}");
    assert!(
        screen.contains("tokens: "),
        "the line mode's footer: {screen:?}"
    );
}

#[test]
fn a_waiting_approval_rings_the_bell() {
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "true"}},
        {"say": "Done."}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    // Read-only commands are asked about too: the question is what this is about.
    home.prepend_config("ask_read_only_commands = true");
    let (screen, _) = crate::common::terminal::live_tui_session(
        &home,
        &[
            ("\x1b[1;1R\x1b[?62;22c", None, 300),
            ("run it\r", Some("saved)"), 0),
            // A key in the question's first moments is not an answer.
            ("", None, 800),
            ("y", Some("Done."), 0),
            ("\x04", Some("resume it"), 0),
        ],
    );
    // One question, one bell, and it rang before the answer, not with later output.
    let answered = screen.find("Done.").unwrap();
    assert_eq!(screen.matches('\u{7}').count(), 1, "{screen:?}");
    assert!(
        screen[..answered].contains('\u{7}'),
        "a bell while the question waits: {screen:?}"
    );
}

#[test]
fn tab_completes_a_model_for_model() {
    if !available() {
        return;
    }
    let (home, _mock) = scripted("chat", "{\"steps\": []}", "");
    let tmux = Tmux::start(&home, &home.path(), &[], (90, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("/model dee");
    tmux.press(&["Tab"]);
    tmux.wait_for("› /model deepseek/mock-model");
}

#[test]
fn always_is_forgotten_when_another_session_begins() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "git status"}},
        {"say": "First."},
        {"tool": "bash", "args": {"command": "git status"}},
        {"say": "Second."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    // Read-only commands are asked about too: the question is what this is about.
    home.prepend_config("ask_read_only_commands = true");
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("look");
    tmux.press(&["Enter"]);
    tmux.wait_for("a always for git status (this session, never saved)");
    tmux.answer("a");
    tmux.wait_for("First.");
    tmux.type_text("/fork");
    tmux.press(&["Enter"]);
    tmux.wait_for("now in the fork");
    tmux.type_text("look again");
    tmux.press(&["Enter"]);
    // Asked again: the new session has no "always" of the last.
    tmux.wait_for("a always for git status (this session, never saved)");
    tmux.answer("y");
    tmux.wait_for("Second.");
    // The fork's second call was run once asked: both results are there.
    assert_eq!(tool_messages(&mock).len(), 2);
}

#[test]
fn keys_typed_while_a_slash_command_prints_reach_the_input_enter_included() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"say": "First."},
        {"say": "Second."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("hi");
    tmux.press(&["Enter"]);
    tmux.wait_for_turn_end("First.");
    // The next prompt is typed straight behind the command, while it runs: the region is put
    // away first (60 ms), then the fork is made (here, typing 65 ms after Enter landed inside
    // it 3 times of 3 when the command had the terminal in line mode).
    tmux.type_text("/fork");
    tmux.press(&["Enter"]);
    std::thread::sleep(std::time::Duration::from_millis(65));
    tmux.type_text("look again");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("Second.");
    assert_eq!(crate::common::last_user_message(&mock), "look again");
    // Typed, not echoed into the command's output: it is shown once, as the prompt sent.
    let after_fork = &shown[shown.find("now in the fork").unwrap()..];
    assert_eq!(after_fork.matches("look again").count(), 1, "{after_fork}");
    assert!(after_fork.contains("› look again"), "{after_fork}");
}

#[test]
fn keys_typed_behind_a_pickers_answer_reach_the_input_enter_included() {
    if !available() {
        return;
    }
    let (home, mock) = scripted(
        "chat",
        &serde_json::json!({"steps": [{"say": "Hi."}]}).to_string(),
        "",
    );
    let tmux = Tmux::start_with_a_second_model(&home);
    tmux.type_text("/model");
    tmux.press(&["Enter"]);
    tmux.wait_for("switch to [a number");
    // Enter keeps the model; the prompt after it is typed before keel has taken the answer.
    tmux.press(&["Enter"]);
    tmux.type_text("hello there");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("Hi.");
    assert_eq!(crate::common::last_user_message(&mock), "hello there");
    let after_pick = &shown[shown.find("kept deepseek/mock-model").unwrap()..];
    assert_eq!(after_pick.matches("hello there").count(), 1, "{after_pick}");
    assert!(after_pick.contains("› hello there"), "{after_pick}");
}

#[test]
fn a_commands_output_is_drawn_by_the_view_in_its_colours_under_the_command() {
    if !available() {
        return;
    }
    let (home, _mock) = scripted(
        "chat",
        &serde_json::json!({"steps": [{"say": "Hi."}]}).to_string(),
        "",
    );
    let tmux = Tmux::start(&home, &home.path(), &[], (60, 30));
    tmux.wait_for("mock-model · ask");
    // An error a command returns is drawn by the view: in its red, under the command as typed
    // (line mode's words, not a raw print of them).
    tmux.type_text("/resume no-such-session-here");
    tmux.press(&["Enter"]);
    tmux.wait_until_screen("the command's error", |screen| screen.contains("error:"));
    let colored = tmux.screen_with_colors();
    let error = colored
        .lines()
        .find(|line| line.contains("error:"))
        .unwrap_or_else(|| panic!("{colored}"));
    assert!(
        error.contains("\u{1b}[31m"),
        "not in the view's red: {error:?}"
    );
    let shown = tmux.screen();
    let typed = shown
        .find("› /resume no-such-session-here")
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(shown[typed..].contains("error:"), "{shown}");
}
