//! The answer as a person sees it: markdown drawn on a terminal (never its raw syntax), code
//! highlighted; plain text on a pipe with every control character visible; an interrupted
//! answer kept on screen, marked.

use crate::common::terminal::*;
use crate::common::*;

const MARKDOWN: &str = "## Results\n\nThe **fast** one, by far:\n\n| Agent | Memory |\n|:--|--:|\n| keel | 19.5 MiB |\n| other | 618 MiB |\n\n```rust\nfn main() {}\n```\n\n1. first\n2. second\n";

fn row_with<'a>(rows: &'a [String], text: &str) -> (usize, &'a String) {
    rows.iter()
        .enumerate()
        .find(|(_, row)| row.contains(text))
        .unwrap_or_else(|| panic!("no row shows {text:?}:\n{}", rows.join("\n")))
}

#[test]
fn a_markdown_answer_is_drawn_on_a_terminal_not_printed_raw() {
    let scenario = serde_json::json!({"steps": [{"say": MARKDOWN}]}).to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let bytes = run_in_terminal(&home, &["run", "compare them"], false);
    let screen = screen_of(&bytes);
    let rows: Vec<String> = screen.rows(0, 80).collect();
    let text = rows.join("\n");
    for raw in ["## ", "**", "|--", "```", "| keel"] {
        assert!(
            !text.contains(raw),
            "raw markdown {raw:?} on screen:\n{text}"
        );
    }
    row_with(&rows, "┌───────┬──────────┐");
    row_with(&rows, "│ keel  │ 19.5 MiB │");
    row_with(&rows, "└───────┴──────────┘");
    row_with(&rows, "1. first");
    let (heading, _) = row_with(&rows, "Results");
    assert!(
        screen.cell(heading as u16, 0).unwrap().bold(),
        "the heading is bold"
    );
    let (code, line) = row_with(&rows, "fn main() {}");
    let column = line.find("fn").unwrap() as u16;
    let keyword = screen.cell(code as u16, column).unwrap();
    assert_eq!(
        keyword.fgcolor(),
        vt100::Color::Idx(5),
        "`fn` is highlighted as a keyword"
    );
    let (fast, line) = row_with(&rows, "The fast one");
    let column = line.find("fast").unwrap() as u16;
    assert!(
        screen.cell(fast as u16, column).unwrap().bold(),
        "**fast** is bold"
    );
}

#[test]
fn no_color_draws_the_same_structure_without_styles() {
    let scenario = serde_json::json!({"steps": [{"say": MARKDOWN}]}).to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let bytes = run_in_terminal(&home, &["run", "compare them"], true);
    assert!(
        !bytes.contains("\u{1b}[1m") && !bytes.contains("\u{1b}[35m"),
        "{bytes:?}"
    );
    let rows: Vec<String> = screen_of(&bytes).rows(0, 80).collect();
    row_with(&rows, "│ keel  │ 19.5 MiB │");
}

#[test]
fn a_piped_answer_keeps_newlines_and_tabs_and_shows_every_other_control() {
    let answer = "red \u{1b}[31mtext\u{1b}[0m\tand\ttabs\nbell \u{7} and \u{9b}2J and title \u{1b}]0;pwned\u{7}";
    let scenario = serde_json::json!({"steps": [{"say": answer}, {"say": answer}]}).to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let output = home.run(&["run", "hi"]);
    let stdout = output.stdout();
    assert_eq!(
        stdout,
        "red ␛[31mtext␛[0m\tand\ttabs\nbell ␇ and ⟨U+009B⟩2J and title ␛]0;pwned␇\n"
    );
    // `--json` is the exact record: the same answer, byte for byte, JSON-escaped.
    let json = home.run(&["run", "--json", "hi"]);
    assert!(!json.stdout().contains('\u{1b}'), "no raw ESC on stdout");
    let text: String = json
        .events_of("llm/text")
        .iter()
        .map(|event| event["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, answer);
}

#[test]
fn an_interrupted_answer_stays_on_screen_marked() {
    let scenario = serde_json::json!({
        "chunk_delay_ms": 120,
        "steps": [
            {"say": "First paragraph of the answer.\n\nSecond paragraph that keeps streaming slowly, word after word, for a few seconds more than anyone waits."},
            {"say": "Fine, stopping."}
        ]
    })
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let bytes = interactive_until(
        &home,
        &[
            ("tell me\n", Some("Second paragraph"), 0),
            ("\u{3}", Some("stopped — kept on screen"), 0),
            ("ok\n", Some("Fine, stopping."), 0),
            ("/quit\n", None, 300),
        ],
    );
    let rows: Vec<String> = screen_of(&bytes).rows(0, 80).collect();
    let (first, _) = row_with(&rows, "First paragraph of the answer.");
    let (second, _) = row_with(&rows, "Second paragraph");
    let (marked, _) = row_with(&rows, "stopped — kept on screen");
    assert!(first < second && second < marked, "{}", rows.join("\n"));
    assert!(
        !rows
            .iter()
            .any(|row| row.contains("for a few seconds more")),
        "the rest never arrived"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    // The next prompt tells the model, inside its own user item; the first request's bytes
    // are the second's prefix up to that item.
    let body = |index: usize| -> serde_json::Value {
        serde_json::from_str(requests[index]["body"].as_str().unwrap()).unwrap()
    };
    let (first, second) = (body(0), body(1));
    let messages = second["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"],
        "[keel: the user stopped your previous answer before it was complete; what it had produced was not kept.]\n\nok"
    );
    assert_eq!(
        first["messages"].as_array().unwrap()[..],
        messages[..messages.len() - 1],
        "nothing of the stopped answer was committed"
    );
}

#[test]
fn a_commands_output_shows_under_its_card_folded_to_the_end() {
    let scenario = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "for n in $(seq 1 300); do echo \"output line $n\"; done"}},
        {"say": "listed"},
    ]})
    .to_string();
    let (home, _mock) = scripted("chat", &scenario, "");
    let run = home.run(&["run", "--yes", "count"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let stderr = run.stderr();
    let card = stderr.find("⎿ completed · exit 0").expect(&stderr);
    let after = &stderr[card..];
    // The end of the output, though the event's excerpt starts at its first line.
    assert!(after.contains("… 295 lines above"), "{stderr}");
    for n in 296..=300 {
        assert!(
            after.contains(&format!("    output line {n}\n")),
            "{stderr}"
        );
    }
    assert!(!after.contains("output line 295\n"), "{stderr}");
    assert!(
        !after.contains("[exit code 0]"),
        "the card says it: {stderr}"
    );
}
