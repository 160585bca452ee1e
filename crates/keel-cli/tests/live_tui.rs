//! The live TUI (`keel` on a terminal), end to end under tmux against `keel mock`: what a person
//! sees, typed at with real keys.

use crate::common::tmux::{Tmux, available};
use crate::common::{last_user_message, scripted, tool_messages, without_context};

const ANSWER: &str = "## Plan\n\nI will **edit** the file.\n\n| name | size |\n|---|---|\n| a.rs | 12 |\n\n```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n";

#[test]
fn an_answer_is_rendered_an_edit_is_approved_with_one_key_and_ctrl_d_says_how_to_resume() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"say": ANSWER},
        {"tool": "write_file", "args": {"path": "notes.txt", "content": "hello\nworld\n"}},
        {"tool": "bash", "args": {"command": "for n in $(seq 1 30); do echo output line $n; done"}},
        {"say": "Done."}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 40));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("show me");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("tokens:");
    // Rendered, not raw: no `## ` or `|---|`, a box-drawn table.
    assert!(
        !shown.contains("## Plan") && shown.contains("Plan"),
        "{shown}"
    );
    assert!(
        !shown.contains("|---|") && shown.contains("┌──────┬──────┐"),
        "{shown}"
    );
    assert!(!shown.contains("**edit**"), "{shown}");
    // Highlighted code: the code line carries colour on screen.
    let colored = tmux.screen_with_colors();
    let code_line = colored
        .lines()
        .find(|line| line.contains("println"))
        .unwrap_or_else(|| panic!("{colored}"));
    assert!(code_line.contains("\u{1b}["), "no colour on {code_line:?}");

    tmux.type_text("now edit");
    tmux.press(&["Enter"]);
    let asked = tmux.wait_for("always for write_file");
    // The diff was on screen before the question, and nothing ran yet.
    assert!(
        asked.contains("1 + hello") && asked.contains("2 + world"),
        "{asked}"
    );
    assert!(!home.path().join("notes.txt").exists());
    // Narrower while it waits: the terminal reflows, and the live region is found again and
    // drawn once (nothing of the old one left above it).
    tmux.resize(70, 40);
    tmux.wait_until_screen("the region once, at 70 columns", |screen| {
        screen.matches("? write_file notes.txt").count() == 1
            && screen.matches("always for write_file").count() == 1
            && screen.lines().all(|line| line.chars().count() <= 70)
    });
    // One key, no Enter.
    tmux.answer("y");
    tmux.wait_for("created notes.txt");
    assert_eq!(
        std::fs::read_to_string(home.path().join("notes.txt")).unwrap(),
        "hello\nworld\n"
    );
    // The command is asked about (with no "always": keel cannot read `$(…)` in full), then
    // its output's end shows under its card.
    let asked = tmux.wait_for("? bash for n in");
    assert!(!asked.contains("a always"), "{asked}");
    tmux.answer("y");
    let shown = tmux.wait_for("Done.");
    assert!(shown.contains("output line 30"), "{shown}");
    assert!(shown.contains("lines above"), "{shown}");
    // The status line: model and mode (drawn with the frame after the answer).
    tmux.wait_until_screen("the status line with model and mode", |screen| {
        screen.contains("deepseek/mock-model · ask")
    });

    tmux.press(&["C-d"]);
    let shown = tmux.wait_for("[keel exited: 0]");
    assert!(shown.contains("resume it with: keel -c"), "{shown}");
}

#[test]
fn esc_stops_a_stream_keeps_its_text_and_the_next_request_says_so() {
    if !available() {
        return;
    }
    let long: String = (1..=60)
        .map(|n| format!("Sentence number {n}.\n\n"))
        .collect();
    let scenario = serde_json::json!({
        "chunk_delay_ms": 100,
        "steps": [{"say": long}, {"say": "fine"}]
    })
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (90, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("tell me");
    tmux.press(&["Enter"]);
    tmux.wait_for("Sentence number 2.");
    tmux.press(&["Escape"]);
    let shown = tmux
        .wait_for("stopped — kept on screen; the model is told you stopped it, not what it wrote");
    assert!(shown.contains("Sentence number 1."), "{shown}");
    assert!(!shown.contains("Sentence number 60."), "{shown}");
    tmux.type_text("go on");
    tmux.press(&["Enter"]);
    tmux.wait_for("fine");
    let sent = last_user_message(&mock);
    assert!(sent.contains("stopped your previous answer"), "{sent}");
    assert!(sent.ends_with("go on"), "{sent}");
}

#[test]
fn a_multi_line_prompt_with_a_file_mention_and_tab_completion() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [{"say": "read it"}]}).to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    std::fs::write(
        home.path().join("notes-for-keel.txt"),
        "the secret word is marmalade\n",
    )
    .unwrap();
    let tmux = Tmux::start(&home, &home.path(), &[], (90, 30));
    tmux.wait_for("mock-model · ask");
    // A slash command completes with Tab.
    tmux.type_text("/transc");
    tmux.press(&["Tab"]);
    tmux.wait_for("› /transcript");
    tmux.press(&["C-u"]);
    // Two lines (Alt+Enter), the second with a file completed by Tab.
    tmux.type_text("first line");
    tmux.press(&["M-Enter"]);
    tmux.type_text("see @notes-for");
    tmux.press(&["Tab"]);
    tmux.wait_for("@notes-for-keel.txt");
    // Shown as a chip before it is sent; a mention of nothing is said to be nothing.
    tmux.wait_for("attaches [notes-for-keel.txt]");
    tmux.type_text(" and @missing.txt");
    tmux.wait_for("[missing.txt] not found");
    tmux.press(&["Enter"]);
    tmux.wait_for("read it");
    let sent = last_user_message(&mock);
    assert!(
        sent.contains("first line\nsee @notes-for-keel.txt and @missing.txt"),
        "{sent}"
    );
    assert!(sent.contains("the secret word is marmalade"), "{sent}");
}

#[test]
fn a_prompt_typed_during_a_turn_waits_and_is_sent_after_it() {
    if !available() {
        return;
    }
    let long: String = (1..=15).map(|n| format!("Part {n}.\n\n")).collect();
    let scenario = serde_json::json!({
        "chunk_delay_ms": 80,
        "steps": [{"say": long}, {"say": "second answer"}]
    })
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (90, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("first");
    tmux.press(&["Enter"]);
    tmux.wait_for("Part 1.");
    tmux.type_text("then this");
    tmux.press(&["Enter"]);
    tmux.wait_for("queued › then this");
    tmux.wait_for("second answer");
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(last_user_message(&mock), "then this");
}

#[test]
fn a_resize_mid_stream_wraps_the_answer_at_the_new_width() {
    if !available() {
        return;
    }
    let words: Vec<String> = (1..=40).map(|n| format!("word{n}")).collect();
    let paragraph = words.join(" ");
    let scenario = serde_json::json!({
        "chunk_delay_ms": 60,
        "steps": [{"say": format!("{paragraph}\n\n{paragraph}\n")}]
    })
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (120, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("go");
    tmux.press(&["Enter"]);
    tmux.wait_for("word3 ");
    tmux.resize(50, 30);
    let shown = tmux.wait_for("tokens:");
    // Wrapped by keel at 50 columns between words, never cut inside one by the terminal.
    let answer: Vec<&str> = shown
        .lines()
        .filter(|line| line.starts_with("word"))
        .collect();
    assert!(answer.len() >= 8, "{shown}");
    for line in answer {
        assert!(line.trim_end().chars().count() <= 50, "{line:?}\n{shown}");
        for token in line.split_whitespace() {
            let number = token
                .strip_prefix("word")
                .unwrap_or_else(|| panic!("{line:?}"));
            assert!(
                number.parse::<u32>().is_ok(),
                "cut inside a word: {line:?}\n{shown}"
            );
        }
    }
}

#[test]
fn a_denial_takes_one_key_and_n_sends_a_note_to_the_model() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "touch first-file"}},
        {"say": "Not run."},
        {"tool": "bash", "args": {"command": "touch second-file"}},
        {"say": "Understood."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (90, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("make one");
    tmux.press(&["Enter"]);
    tmux.wait_for("(this session, never saved)");
    // Keys that are not answers do nothing: Enter and a stray letter.
    tmux.press(&["Enter", "x"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        tmux.screen().contains("(this session, never saved)"),
        "{}",
        tmux.screen()
    );
    tmux.answer("Escape");
    tmux.wait_for("Not run.");
    assert!(!home.path().join("first-file").exists());

    tmux.type_text("make another");
    tmux.press(&["Enter"]);
    tmux.wait_for("touch second-file");
    tmux.wait_for("(this session, never saved)");
    tmux.answer("N");
    tmux.wait_for("note for the model ›");
    tmux.type_text("use the tmp dir");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("Understood.");
    assert!(
        shown.contains("denied, with a note: use the tmp dir"),
        "{shown}"
    );
    assert!(!home.path().join("second-file").exists());
    let body = mock.requests().last().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(body.contains("The user's note: use the tmp dir"), "{body}");
}

#[test]
fn a_commands_output_shows_under_its_card_while_it_runs() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "for n in 1 2 3 4 5 6 7 8; do echo tick $n; sleep 0.4; done"}},
        {"say": "Counted."}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &["--yes"], (90, 30));
    tmux.wait_for("mock-model · auto");
    tmux.type_text("count");
    tmux.press(&["Enter"]);
    // While it runs: its output and its clock under the card, and no result yet.
    let running = tmux.wait_for("tick 2");
    assert!(!running.contains("⎿ completed"), "{running}");
    let screen = tmux.screen();
    let card = screen
        .lines()
        .find(|line| line.contains("● bash for n in"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(card.trim_end().ends_with(" s"), "no elapsed time: {card:?}");
    let shown = tmux.wait_for("Counted.");
    assert!(shown.contains("⎿ completed · exit 0"), "{shown}");
    assert!(shown.contains("tick 8"), "{shown}");
}

#[test]
fn shift_tab_changes_the_mode_and_the_next_prompt_tells_the_model() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "write_file", "args": {"path": "auto.txt", "content": "written\n"}},
        {"say": "Wrote it."},
        {"tool": "write_file", "args": {"path": "planned.txt", "content": "no\n"}},
        {"say": "Could not."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 30));
    tmux.wait_for("mock-model · ask");
    // ask → auto: the write runs without a question.
    tmux.press(&["BTab"]);
    tmux.wait_for("mock-model · auto");
    tmux.type_text("write it");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("Wrote it.");
    assert!(!shown.contains("always for write_file"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("auto.txt")).unwrap(),
        "written\n"
    );
    let sent = last_user_message(&mock);
    assert!(
        sent.starts_with("[keel: the user switched the permission mode to auto")
            && sent.ends_with("write it"),
        "{sent}"
    );
    // auto → plan: the next write is refused, and said so once.
    tmux.press(&["BTab"]);
    tmux.wait_for("mock-model · plan");
    tmux.type_text("write another");
    tmux.press(&["Enter"]);
    tmux.wait_for("Could not.");
    assert!(!home.path().join("planned.txt").exists());
    let requests = mock.requests();
    let body: serde_json::Value =
        serde_json::from_str(requests[2]["body"].as_str().unwrap()).unwrap();
    let users: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    assert!(users[1].contains("permission mode to plan"), "{users:?}");
    let refusal = tool_messages(&mock).pop().unwrap_or_default();
    assert!(
        refusal.contains("plan mode") && refusal.contains("propose_plan"),
        "{refusal}"
    );
    // The first prompt's bytes are as they were sent: the prefix holds.
    assert!(
        without_context(users[0])
            .starts_with("[keel: the user switched the permission mode to auto")
    );
}

#[test]
fn ctrl_r_finds_an_earlier_prompt_to_send_again() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"say": "one"}, {"say": "two"}, {"say": "three"}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (90, 30));
    tmux.wait_for("mock-model · ask");
    for prompt in ["explain the parser", "list the tests"] {
        tmux.type_text(prompt);
        tmux.press(&["Enter"]);
        tmux.wait_for(&format!("› {prompt}"));
    }
    tmux.wait_for("two");
    tmux.press(&["C-r"]);
    tmux.type_text("pars");
    tmux.wait_for("history `pars` › explain the parser");
    // Enter takes the match into the input; a second Enter sends it.
    tmux.press(&["Enter"]);
    tmux.press(&["Enter"]);
    tmux.wait_for("three");
    assert_eq!(last_user_message(&mock), "explain the parser");
    // Esc leaves the input as it was.
    tmux.type_text("draft");
    tmux.press(&["C-r"]);
    tmux.type_text("zzz");
    tmux.wait_for("(no match)");
    tmux.press(&["Escape"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(tmux.screen().contains("› draft"), "{}", tmux.screen());
}

#[test]
fn tab_completes_a_session_id_after_resume() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [{"say": "hello"}]}).to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    // A first session, ended: its id is in the resume hint.
    let first = Tmux::start(&home, &home.path(), &[], (100, 30));
    first.wait_for("mock-model · ask");
    first.type_text("hi");
    first.press(&["Enter"]);
    first.wait_for("hello");
    first.press(&["C-d"]);
    let shown = first.wait_for("[keel exited: 0]");
    let id = shown
        .split("keel --session ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("{shown}"))
        .to_string();
    drop(first);
    let second = Tmux::start(&home, &home.path(), &[], (100, 30));
    second.wait_for("mock-model · ask");
    second.type_text(&format!("/resume {}", &id[..4]));
    second.press(&["Tab"]);
    second.wait_for(&format!("› /resume {id}"));
}

#[test]
fn leaving_during_a_turn_stops_it_keeps_its_text_and_gives_the_terminal_back() {
    if !available() {
        return;
    }
    let long: String = (1..=60).map(|n| format!("Paragraph {n}.\n\n")).collect();
    let scenario = serde_json::json!({"chunk_delay_ms": 100, "steps": [{"say": long}]}).to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (90, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("go");
    tmux.press(&["Enter"]);
    tmux.wait_for("Paragraph 2.");
    // Ctrl-D leaves at once, turn running or not.
    tmux.press(&["C-d"]);
    let shown = tmux.wait_for("[terminal:");
    assert!(shown.contains("[keel exited: 0]"), "{shown}");
    assert!(!shown.contains("Paragraph 60."), "{shown}");
    assert!(shown.contains("stopped — kept on screen"), "{shown}");
    assert!(shown.contains("Paragraph 1."), "{shown}");
    assert!(shown.contains("[terminal: icanon echo ]"), "{shown}");
}

#[test]
fn a_slash_command_typed_during_a_turn_runs_after_it() {
    if !available() {
        return;
    }
    let long: String = (1..=12).map(|n| format!("Part {n}.\n\n")).collect();
    let scenario = serde_json::json!({"chunk_delay_ms": 60, "steps": [{"say": long}]}).to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(&home, &home.path(), &[], (90, 30));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("go");
    tmux.press(&["Enter"]);
    tmux.wait_for("Part 1.");
    tmux.type_text("/cost");
    tmux.press(&["Enter"]);
    tmux.wait_for("queued › /cost");
    let shown = tmux.wait_for("this session:");
    let answer_end = shown.find("Part 12.").unwrap_or_else(|| panic!("{shown}"));
    assert!(shown.find("this session:").unwrap() > answer_end, "{shown}");
}

#[test]
fn an_edit_that_runs_without_a_question_shows_its_diff_under_its_card() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "edit_file", "args": {"path": "lib.rs", "old_string": "fn b() {}", "new_string": "fn b() { todo() }"}},
        {"say": "Edited."}
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    std::fs::write(home.path().join("lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    let tmux = Tmux::start(&home, &home.path(), &["--yes"], (90, 30));
    tmux.wait_for("mock-model · auto");
    tmux.type_text("edit it");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("Edited.");
    let card = shown
        .find("⎿ completed · edited lib.rs")
        .unwrap_or_else(|| panic!("{shown}"));
    let after = &shown[card..];
    assert!(after.contains("2   - fn b() {}"), "{shown}");
    assert!(after.contains("2 + fn b() { todo() }"), "{shown}");
    assert!(!shown.contains("always for edit_file"), "asked: {shown}");
}

#[test]
#[cfg_attr(
    not(keel_e2e_node),
    ignore = "needs node on PATH (.ci/run installs it)"
)]
fn the_screen_waits_for_no_mcp_server_and_the_first_request_waits_for_it() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [{"say": "hello"}]}).to_string();
    let (home, mock, outside, gate) = with_late_server(&scenario);
    let launched = std::time::Instant::now();
    let tmux = Tmux::start(&home, &home.path(), &[], (90, 30));
    // The server is asked to start but does not answer: the screen is up all the same, well
    // before the 5 s a session would wait for its servers.
    tmux.wait_for("mock-model · ask");
    assert!(
        launched.elapsed() < std::time::Duration::from_secs(4),
        "the screen waited {:?}",
        launched.elapsed()
    );
    let asked = std::time::Instant::now();
    while !outside.path().join("gate.asked").exists() {
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(20),
            "the server was never started: {}",
            tmux.screen()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    tmux.type_text("hi");
    tmux.press(&["Enter"]);
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert!(
        mock.requests().is_empty(),
        "the first request waits for the server still starting"
    );
    std::fs::write(&gate, "").unwrap();
    tmux.wait_for("hello");
    let request = mock.requests()[0]["body"].as_str().unwrap().to_string();
    assert!(request.contains("mcp__late__grow"), "{request}");
}

#[test]
#[cfg_attr(
    not(keel_e2e_node),
    ignore = "needs node on PATH (.ci/run installs it)"
)]
fn a_session_reopened_stops_the_servers_of_the_one_it_replaces() {
    if !available() {
        return;
    }
    let (home, _mock, outside, gate) = with_late_server(r#"{"steps": []}"#);
    let tmux = Tmux::start(&home, &home.path(), &[], (90, 30));
    tmux.wait_for("mock-model · ask");
    // Below the 20 s a server has to start: a server stopped only by that timeout fails here.
    let until = |what: &str, test: &dyn Fn() -> bool| {
        let started = std::time::Instant::now();
        while !test() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "still waiting until {what}: {}",
                tmux.screen()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    until("the server is started", &|| {
        outside.path().join("gate.asked").exists()
    });
    let first = crate::common::pid_of(gate.to_str().unwrap());
    // The session again (`/resume` of itself): a new controller, and a new hub.
    let screen = tmux.screen();
    let id = screen
        .split("session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap();
    tmux.type_text(&format!("/resume {id}"));
    tmux.press(&["Enter"]);
    until("the first session's server is stopped", &|| {
        crate::common::process_gone(&first)
    });
}

/// A home scripted with `scenario` whose config declares the `late` MCP server: it answers
/// `initialize` only once the returned gate path exists (in the returned directory).
fn with_late_server(
    scenario: &str,
) -> (
    crate::common::Home,
    crate::common::MockProcess,
    tempfile::TempDir,
    std::path::PathBuf,
) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../keel-mcp/tests/fixtures/changing-mcp-server.mjs");
    let (home, mock) = scripted("chat", scenario, "");
    let outside = tempfile::tempdir().unwrap();
    let gate = outside.path().join("gate");
    home.append_config(&format!(
        // Unconfined: the gate lives in a temporary directory its sandbox keeps read-only.
        "[mcp_servers.late]\ncommand = \"node\"\nargs = [\"{}\", \"late\", \"{}\"]\nsandbox = \"off\"\n",
        script.display(),
        gate.display()
    ));
    (home, mock, outside, gate)
}

#[test]
fn a_plan_is_shown_rendered_and_approved_into_auto_with_one_key() {
    if !available() {
        return;
    }
    let scenario = serde_json::json!({"steps": [
        {"tool": "propose_plan", "args": {"plan": "## Rename\n\n1. Rename **parse**\n2. Update the callers"}},
        {"tool": "write_file", "args": {"path": "renamed.txt", "content": "done\n"}},
        {"say": "Renamed it."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let tmux = Tmux::start(
        &home,
        &home.path(),
        &["--permission-mode", "plan"],
        (100, 30),
    );
    tmux.wait_for("mock-model · plan");
    tmux.type_text("rename parse");
    tmux.press(&["Enter"]);
    let asked = tmux.wait_for("approve, then auto");
    // Rendered: no markdown marks, the list numbered.
    assert!(asked.contains("the model proposes this plan"), "{asked}");
    assert!(asked.contains("1. Rename parse"), "{asked}");
    assert!(
        !asked.contains("**parse**") && !asked.contains("## Rename"),
        "{asked}"
    );
    assert!(!asked.contains("always for propose_plan"), "{asked}");
    tmux.answer("a");
    tmux.wait_for("Renamed it.");
    assert!(
        home.path().join("renamed.txt").exists(),
        "ran without a question"
    );
    tmux.wait_for("mock-model · auto");
    let sent = mock.requests()[1].to_string();
    assert!(sent.contains("The permission mode is now auto"), "{sent}");
}
