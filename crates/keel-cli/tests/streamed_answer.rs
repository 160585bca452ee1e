//! A long answer in the terminal while it streams (issue 38 item 5): tmux, the real binary and
//! `keel mock` streaming slowly.
//!
//! Invariants checked here:
//! - Blocks that settled are in the terminal's scrollback while the answer still streams, and
//!   when it ends the scrollback holds exactly the block-by-block render of the whole text.
//! - A failed attempt's written blocks stay, one line under them says they are discarded, and
//!   the retry's answer follows whole.
//! - A resize mid-stream leaves no stale frame in the scrollback; blocks written before it keep
//!   their width.

use crate::common::tmux::{Tmux, available};
use crate::common::*;

/// Paragraph `n`: about 100 columns, so it wraps at 80 but not at 120.
fn paragraph(n: usize) -> String {
    format!(
        "Paragraph {n}. This sentence is long enough to need more than eighty columns, ending with end{n}."
    )
}

/// An answer of about 200 lines: paragraphs, a table and a code fence in the middle.
fn long_answer(paragraphs: usize) -> String {
    let mut text = String::from("# Findings\n\n");
    for n in 1..=paragraphs {
        text.push_str(&paragraph(n));
        text.push_str("\n\n");
        if n == paragraphs / 2 {
            text.push_str("| file | lines |\n|---|---|\n| a.rs | 12 |\n\n```rust\nfn main() {\n    println!(\"middle\");\n}\n```\n\n");
        }
    }
    text.push_str("That is all.");
    text
}

/// `text` as keel renders it at `width`, line by line, without styles.
fn rendered(text: &str, width: usize) -> Vec<String> {
    keel_render::markdown_lines(text, width)
        .iter()
        .map(|line| {
            line.spans
                .iter()
                .map(|span| span.text())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

/// Where `expected` stands, line for line, in `history` (lines compared without trailing
/// blanks), searching from line `from`.
fn position_of(history: &[String], expected: &[String], from: usize) -> Option<usize> {
    (from..history.len()).find(|&start| {
        history.len() - start >= expected.len()
            && history[start..start + expected.len()] == *expected
    })
}

fn lines_of(history: &str) -> Vec<String> {
    history.lines().map(|l| l.trim_end().to_string()).collect()
}

fn start(scenario: &serde_json::Value, size: (u16, u16)) -> (Home, MockProcess, Tmux) {
    let (home, mock) = scripted("chat", &scenario.to_string(), "");
    let tmux = Tmux::start(&home, &home.path(), &[], size);
    tmux.wait_for("mock-model · ask");
    tmux.type_text("report");
    tmux.press(&["Enter"]);
    (home, mock, tmux)
}

#[test]
fn a_long_answer_is_in_the_scrollback_as_it_settles_and_ends_as_its_render() {
    if !available() {
        return;
    }
    let text = long_answer(100);
    let scenario = serde_json::json!({"chunk_delay_ms": 3, "steps": [{"say": text}]});
    let (_home, _mock, tmux) = start(&scenario, (100, 30));
    // Mid-stream: the start is in the scrollback already (the screen holds 30 rows).
    tmux.wait_for("end60.");
    let midway = tmux.history();
    assert!(!midway.contains("That is all."), "still streaming");
    assert!(midway.contains(&paragraph(1)), "{midway}");
    assert!(
        midway.contains("│ a.rs │ 12    │"),
        "the table settled: {midway}"
    );
    tmux.wait_for("tokens:");
    let history = lines_of(&tmux.history());
    let expected = rendered(&text, 100);
    assert!(expected.len() > 190, "{}", expected.len());
    assert!(
        position_of(&history, &expected, 0).is_some(),
        "the scrollback is not the render:\n{}",
        history.join("\n")
    );
    assert_eq!(
        history.iter().filter(|l| l.contains("end37.")).count(),
        1,
        "written once"
    );
}

#[test]
fn a_failed_attempt_stays_written_under_a_line_that_discards_it() {
    if !available() {
        return;
    }
    let text = long_answer(40);
    let scenario = serde_json::json!({"chunk_delay_ms": 3, "steps": [
        {"fault": "drop_after_content"},
        {"say": text}
    ]});
    let (home, _mock, tmux) = start(&scenario, (100, 30));
    tmux.wait_for("tokens:");
    let history = lines_of(&tmux.history());
    let discarded: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(_, line)| line.contains("↑ attempt 1 failed — the text above is discarded"))
        .map(|(index, _)| index)
        .collect();
    assert_eq!(discarded.len(), 1, "{}", history.join("\n"));
    let line = discarded[0];
    // Above it, the first attempt's settled blocks; below it, the whole retried answer.
    assert!(history[..line].iter().any(|l| l.contains("end1.")));
    let expected = rendered(&text, 100);
    let whole = position_of(&history, &expected, line + 1);
    assert!(whole.is_some(), "{}", history.join("\n"));
    // The model's history has the answer once, and nothing of the discarded attempt.
    let sessions = home.run(&["sessions", "--json"]).stdout();
    let sessions: serde_json::Value = serde_json::from_str(&sessions).unwrap();
    let id = sessions[0]["id"].as_str().unwrap();
    let shown = session_json(&home, id, &[]);
    let items = shown["items"].to_string();
    assert_eq!(items.matches("end1.").count(), 1, "{items}");
}

#[test]
fn a_resize_mid_stream_leaves_no_stale_frame_and_written_blocks_keep_their_width() {
    if !available() {
        return;
    }
    let text = long_answer(100);
    let scenario = serde_json::json!({"chunk_delay_ms": 3, "steps": [{"say": text}]});
    let (_home, _mock, tmux) = start(&scenario, (120, 30));
    tmux.wait_for("end40.");
    tmux.resize(80, 30);
    tmux.wait_for("tokens:");
    let history = lines_of(&tmux.history());
    let all = history.join("\n");
    for n in 1..=100 {
        let marker = format!("Paragraph {n}.");
        let count = history.iter().filter(|l| l.contains(&marker)).count();
        assert_eq!(count, 1, "{marker} written {count} times:\n{all}");
    }
    // The status line once: no frame of the region was left behind.
    let status = history
        .iter()
        .filter(|l| l.contains("deepseek/mock-model · ask"))
        .count();
    assert_eq!(status, 1, "{all}");
    // Written at 120 columns: one line; written after the resize: wrapped at 80.
    let first = history.iter().find(|l| l.contains("Paragraph 2.")).unwrap();
    assert!(first.ends_with("end2."), "{first}");
    let last = history
        .iter()
        .find(|l| l.contains("Paragraph 99."))
        .unwrap();
    assert!(!last.ends_with("end99."), "{last}");
}

#[test]
fn a_resize_inside_a_long_open_code_block_leaves_no_stale_frame() {
    if !available() {
        return;
    }
    // Code lines of about 100 columns: the terminal rewraps each when it narrows to 80.
    let code: String = (1..=80)
        .map(|n| {
            format!(
                "let value_{n:03} = compute(\"a long argument that makes the line wide\", {n});\n"
            )
        })
        .collect();
    let text = format!("Here it is:\n\n```rust\n{code}```\n\nDone.");
    let scenario = serde_json::json!({"chunk_delay_ms": 3, "steps": [{"say": text}]});
    let (_home, _mock, tmux) = start(&scenario, (120, 30));
    tmux.wait_for("value_050");
    tmux.resize(80, 30);
    tmux.wait_for("tokens:");
    let history = lines_of(&tmux.history());
    let all = history.join("\n");
    for n in 1..=80 {
        let marker = format!("value_{n:03} ");
        let count = history.iter().filter(|l| l.contains(&marker)).count();
        assert_eq!(count, 1, "{marker} written {count} times:\n{all}");
    }
    let status = history
        .iter()
        .filter(|l| l.contains("deepseek/mock-model · ask"))
        .count();
    assert_eq!(status, 1, "{all}");
}

/// The status line: the screen's last non-empty line.
fn status_line(screen: &str) -> String {
    screen
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

#[test]
fn while_it_streams_the_status_line_says_time_tokens_and_how_to_stop() {
    if !available() {
        return;
    }
    let text = long_answer(60);
    let scenario = serde_json::json!({"chunk_delay_ms": 8, "steps": [{"say": text}]});
    let (_home, _mock, tmux) = start(&scenario, (120, 30));
    tmux.wait_for("end5.");
    let status = status_line(&tmux.screen());
    assert!(status.contains("· ask · "), "{status}");
    assert!(status.contains(" s · ≈"), "{status}");
    assert!(status.contains(" tokens · Esc stops"), "{status}");
    // The time and the estimate grow.
    let estimate = |status: &str| -> u64 {
        let after = status.split('≈').nth(1).unwrap_or("");
        let figure = after.split(' ').next().unwrap_or("");
        match figure.strip_suffix('k') {
            Some(thousands) => (thousands.parse::<f64>().unwrap() * 1000.0) as u64,
            None => figure.parse().unwrap(),
        }
    };
    let first = estimate(&status);
    // Polled while the turn still runs (a loaded machine may draw few frames).
    tmux.wait_until_screen("the estimate growing", |screen| {
        let later = status_line(screen);
        later.contains('≈') && estimate(&later) > first
    });
    // Text in the input: Esc clears it first, and the line says so.
    tmux.type_text("next question");
    tmux.wait_until_screen("what Esc does with text in the input", |screen| {
        status_line(screen).contains("Esc Esc clears the input, then Esc stops")
    });
    tmux.wait_for("tokens:");
    let after = tmux.wait_until_screen("the status line at rest", |screen| {
        !status_line(screen).contains("Esc")
    });
    assert!(!status_line(&after).contains('≈'), "{after}");
}
