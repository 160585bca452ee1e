//! Slash commands you can find (issue 38 item 7): the menu under the input, in tmux, and the
//! commands added with it (`/status`, `/permissions`, `/clear`, `/sessions`).
//!
//! Invariants checked here:
//! - `/` opens a menu of the commands with their one-line descriptions (custom commands' from
//!   their front matter, escaped), filtered as more is typed; Up/Down choose, Tab completes,
//!   Enter runs the choice, Esc closes it; it is gone once the input is no longer a command.
//! - A command's output goes under the command that made it (`› /status`).
//! - Tab's list of candidates is gone as soon as the input changes.

use crate::common::tmux::{Tmux, available};
use crate::common::*;

const KEYS_HINT: &str = "↑↓ choose · Tab completes · Esc closes";

fn session_with_a_custom_command() -> (Home, MockProcess) {
    let scenario = serde_json::json!({"steps": [{"say": "Hello."}]}).to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    std::fs::create_dir_all(home.path().join("commands")).unwrap();
    std::fs::write(
        home.path().join("commands/fix-lint.md"),
        "---\ndescription: fix the lint \u{1b}[31mwarnings\u{1b}[0m now\n---\nFix the lint.\n",
    )
    .unwrap();
    (home, mock)
}

#[test]
fn a_slash_opens_the_menu_filtered_as_you_type_and_enter_runs_the_choice() {
    if !available() {
        return;
    }
    let (home, _mock) = session_with_a_custom_command();
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 40));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("/");
    let screen = tmux.wait_until_screen("the menu", |screen| screen.contains(KEYS_HINT));
    assert!(screen.contains("▸ /help"), "{screen}");
    assert!(screen.contains("/status"), "{screen}");
    assert!(
        screen.contains("model, endpoint, mode, sandbox"),
        "{screen}"
    );
    // Filtered: only what matches.
    tmux.type_text("fix");
    let screen = tmux.wait_until_screen("the filtered menu", |screen| {
        screen.contains("▸ /fix-lint") && !screen.contains("/status")
    });
    // A custom command's description, escaped: no colour reaches the terminal.
    assert!(screen.contains("fix the lint"), "{screen}");
    let colored = tmux.screen_with_colors();
    assert!(!colored.contains("\u{1b}[31m"), "{colored:?}");
    // Back to `/s`: Down picks the second match, Up the first again; Enter runs the choice.
    tmux.press(&["BSpace", "BSpace", "BSpace"]);
    tmux.type_text("s");
    tmux.wait_until_screen("the /s entries", |screen| {
        screen.contains("▸ /status") && screen.contains("  /sessions")
    });
    tmux.press(&["Down"]);
    tmux.wait_until_screen("the second entry chosen", |screen| {
        screen.contains("▸ /sessions")
    });
    tmux.press(&["Up"]);
    tmux.wait_until_screen("the first entry again", |screen| {
        screen.contains("▸ /status")
    });
    tmux.press(&["Enter"]);
    // The menu's own line says "endpoint" too: wait for the report under the command.
    tmux.wait_until_screen("the /status report", |screen| {
        screen
            .find("› /status")
            .is_some_and(|at| screen[at..].contains("endpoint"))
    });
    let shown = tmux.wait_for("› /status");
    // Headed by the command, and what /status says.
    let headed = shown.find("› /status").unwrap_or_else(|| panic!("{shown}"));
    let body = &shown[headed..];
    for said in [
        "model",
        "mock-model",
        "endpoint",
        "mode",
        "ask",
        "sandbox",
        "session",
        "context",
        "spend",
    ] {
        assert!(body.contains(said), "{said}: {body}");
    }
    assert!(!body.contains("test-key-1"), "{body}");
    // The menu is gone.
    tmux.wait_until_screen("no menu", |screen| !screen.contains(KEYS_HINT));
}

#[test]
fn tab_completes_the_choice_and_the_menu_goes_when_it_no_longer_applies() {
    if !available() {
        return;
    }
    let (home, _mock) = session_with_a_custom_command();
    let tmux = Tmux::start(&home, &home.path(), &[], (100, 40));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("/mod");
    tmux.wait_until_screen("the menu", |screen| screen.contains("▸ /model"));
    tmux.press(&["Tab"]);
    // Completed with a space (it takes an argument): a command's arguments show no menu.
    tmux.wait_until_screen("completed, no menu", |screen| {
        screen.contains("› /model") && !screen.contains("› /mod\n") && !screen.contains(KEYS_HINT)
    });
    tmux.press(&["C-u"]);
    // Esc closes it; typing opens it again.
    tmux.type_text("/he");
    tmux.wait_until_screen("the menu", |screen| screen.contains(KEYS_HINT));
    tmux.press(&["Escape"]);
    tmux.wait_until_screen("closed", |screen| {
        !screen.contains(KEYS_HINT) && screen.contains("› /he")
    });
    tmux.type_text("l");
    tmux.wait_until_screen("open again", |screen| screen.contains("▸ /help"));
    tmux.press(&["C-u"]);
    // A prompt that mentions a command shows no menu.
    tmux.type_text("why does /status say that");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!tmux.screen().contains(KEYS_HINT), "{}", tmux.screen());
    tmux.press(&["C-u"]);
    // Tab's candidates are gone once the input changes.
    std::fs::write(home.path().join("alpha-one.txt"), "1").unwrap();
    std::fs::write(home.path().join("alpha-two.txt"), "2").unwrap();
    tmux.type_text("see @alpha");
    tmux.press(&["Tab"]);
    tmux.wait_until_screen("the candidates", |screen| {
        screen.contains("alpha-one.txt") && screen.contains("alpha-two.txt")
    });
    tmux.type_text("o");
    tmux.wait_until_screen("the candidates gone", |screen| {
        !screen.contains("alpha-two.txt")
    });
}

#[test]
fn permissions_clear_and_sessions_say_what_is_in_force_and_keep_the_old_session() {
    if !available() {
        return;
    }
    let (home, _mock) = session_with_a_custom_command();
    home.append_config("[permissions]\nallow = [\"bash(git status)\"]\ndeny = [\"bash(rm *)\"]\n");
    let tmux = Tmux::start(&home, &home.path(), &[], (120, 40));
    tmux.wait_for("mock-model · ask");
    tmux.type_text("hi");
    tmux.press(&["Enter"]);
    tmux.wait_for("Hello.");
    tmux.type_text("/permissions");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("read-only commands");
    let body = &shown[shown.find("› /permissions").unwrap()..];
    assert!(body.contains("allow      bash(git status)"), "{body}");
    assert!(body.contains("deny       bash(rm *)"), "{body}");
    assert!(body.contains("config.toml"), "{body}");
    let first_id = stored_session_ids(&home)[0].clone();
    tmux.type_text("/clear");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("the last one is kept");
    assert!(shown.contains(&format!("/resume {first_id}")), "{shown}");
    assert_eq!(stored_session_ids(&home).len(), 2);
    tmux.type_text("/sessions");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("/resume ID continues one");
    let body = &shown[shown.rfind("› /sessions").unwrap()..];
    // As `keel sessions` shows it: id, age, turns, model, title.
    assert!(body.contains(&first_id), "{body}");
    assert!(body.contains("1 turn"), "{body}");
    assert!(body.contains("hi"), "{body}");
}

/// A session that changed files with the file tools and a command, made headless, resumed in
/// tmux.
fn changed_session(in_git: bool) -> (Home, MockProcess, Tmux) {
    let scenario = serde_json::json!({"steps": [
        {"tool": "edit_file", "args": {"path": "kept.txt", "old_string": "old text", "new_string": "new text"}},
        {"tool": "write_file", "args": {"path": "fresh.txt", "content": "made by keel\n"}},
        {"tool": "bash", "args": {"command": "echo by a command > tracked.txt"}},
        {"say": "Changed."},
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    if in_git {
        crate::common::repository::repository(&home);
    } else {
        std::fs::write(home.path().join("kept.txt"), "old text\n").unwrap();
        std::fs::write(home.path().join("tracked.txt"), "tracked\n").unwrap();
    }
    let run = home.run(&["run", "--yes", "change things"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let tmux = Tmux::start(&home, &home.path(), &["-c"], (120, 50));
    tmux.wait_for("mock-model · ask");
    (home, mock, tmux)
}

#[test]
fn diff_shows_what_the_session_changed_file_by_file() {
    if !available() {
        return;
    }
    let (_home, _mock, tmux) = changed_session(true);
    tmux.type_text("/diff");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("tracked.txt  changed, outside the file tools");
    let body = &shown[shown.rfind("› /diff").unwrap()..];
    for said in [
        "kept.txt  changed",
        "- old text",
        "+ new text",
        "fresh.txt  new",
        "+ made by keel",
        "- tracked",
        "+ by a command",
    ] {
        assert!(body.contains(said), "{said}: {body}");
    }
    assert!(!body.contains("not a git repository"), "{body}");
}

#[test]
fn diff_outside_git_says_it_knows_the_file_tools_changes_only() {
    if !available() {
        return;
    }
    let (_home, _mock, tmux) = changed_session(false);
    tmux.type_text("/diff");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("what commands changed is not known here");
    let body = &shown[shown.rfind("› /diff").unwrap()..];
    assert!(body.contains("kept.txt  changed"), "{body}");
    assert!(body.contains("fresh.txt  new"), "{body}");
    assert!(!body.contains("tracked.txt"), "{body}");
}

#[test]
fn context_estimates_what_fills_the_window_by_part() {
    if !available() {
        return;
    }
    let (_home, _mock, tmux) = changed_session(false);
    tmux.type_text("/context");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("context block:");
    let body = &shown[shown.rfind("› /context").unwrap()..];
    let tokens = |part: &str| -> u64 {
        let line = body
            .lines()
            .find(|line| line.trim_start().starts_with(part))
            .unwrap_or_else(|| panic!("{part}: {body}"));
        line.split('~')
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let parts = [
        "system prompt",
        "tool specs",
        "instructions",
        "conversation",
        "tool results",
    ];
    for part in parts {
        assert!(tokens(part) > 0, "{part}: {body}");
    }
    let sum: u64 = parts.iter().map(|part| tokens(part)).sum();
    let total = tokens("total");
    assert!(total.abs_diff(sum) <= 5, "{sum} vs {total}: {body}");
    assert!(body.contains("estimated"), "{body}");
}

#[test]
fn model_without_a_name_offers_the_configured_models() {
    if !available() {
        return;
    }
    let (home, _mock) = scripted("chat", "{\"steps\": []}", "");
    // A second provider with a key: its known models are offered too (a provider without a
    // key is not).
    let tmux = Tmux::start_with_a_second_model(&home);
    tmux.type_text("/model");
    tmux.press(&["Enter"]);
    let shown = tmux.wait_for("switch to [a number");
    assert!(shown.contains("*  1  deepseek/mock-model"), "{shown}");
    let line = shown
        .lines()
        .find(|line| line.contains("mimo/mimo-v2-flash"))
        .unwrap_or_else(|| panic!("{shown}"));
    let number = line.split_whitespace().next().unwrap().to_string();
    tmux.type_text(&number);
    tmux.press(&["Enter"]);
    tmux.wait_for("to mimo/mimo-v2-flash");
    tmux.wait_until_screen("the new model in the status line", |screen| {
        screen.contains("mimo-v2-flash · ask")
    });
}
