//! Text from the model, a tool or a provider, made safe to print on a terminal.
//!
//! Invariants:
//! - Nothing that a terminal interprets survives: C0 controls (but newline and tab), DEL, C1
//!   controls and the bidirectional overrides are shown as visible symbols instead — ESC as
//!   `␛`, CR as `␍`, C1 and bidi controls as `⟨U+XXXX⟩`. So no escape sequence (cursor moves,
//!   line erases, window titles, clear-screen, hyperlinks) and no reordering can change what a
//!   person sees, and what they approve is exactly what runs.
//! - `visible_line` also shows newlines (`␊`), for one-line places such as tool cards.
//! - Text without such characters is returned as is, without copying.

use std::borrow::Cow;

/// What happens to newlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Newlines {
    /// Running text: newlines stay.
    Keep,
    /// One-line places: newlines are shown as `␊`.
    Show,
}

/// Whether `c` must not reach a terminal as is (newline and tab are fine in running text).
fn is_unsafe(c: char, newlines: Newlines) -> bool {
    match c {
        '\n' => newlines == Newlines::Show,
        '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}' | '\u{80}'..='\u{9f}' => true,
        // Bidirectional controls (the "Trojan Source" characters) and the line separators.
        '\u{061c}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}' => true,
        '\u{2028}' | '\u{2029}' => true,
        _ => false,
    }
}

fn show(c: char, out: &mut String) {
    match c {
        // The Control Pictures block has a symbol for each C0 control, and one for DEL.
        '\u{0}'..='\u{1f}' => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('�')),
        '\u{7f}' => out.push('␡'),
        _ => out.push_str(&format!("⟨U+{:04X}⟩", c as u32)),
    }
}

fn make_visible(text: &str, newlines: Newlines) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c, newlines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c, newlines) {
            show(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` with every control character shown visibly; newlines and tabs kept.
pub fn visible(text: &str) -> Cow<'_, str> {
    make_visible(text, Newlines::Keep)
}

/// `text` on one line: newlines shown as `␊` too.
pub fn visible_line(text: &str) -> Cow<'_, str> {
    make_visible(text, Newlines::Show)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forged_approval_command_is_shown_whole() {
        let command = "touch PWNED; \r\u{1b}[2K echo harmless";
        assert_eq!(visible(command), "touch PWNED; ␍␛[2K echo harmless");
    }

    #[test]
    fn titles_clear_screen_and_hyperlinks_are_neutralised() {
        let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}]8;;http://x\u{1b}\\link\u{9b}31m";
        let shown = visible(hostile);
        assert!(!shown.contains('\u{1b}') && !shown.contains('\u{7}') && !shown.contains('\u{9b}'));
        assert_eq!(shown, "␛]0;pwned␇␛[2J␛]8;;http://x␛\\link⟨U+009B⟩31m");
    }

    #[test]
    fn newlines_tabs_and_ordinary_text_pass() {
        assert!(matches!(visible("a\tb\nc — ü 中"), Cow::Borrowed(_)));
        assert_eq!(visible_line("a\nb"), "a␊b");
        assert_eq!(visible("x\u{7f}"), "x␡");
    }

    #[test]
    fn bidi_overrides_cannot_reorder_what_is_shown() {
        assert_eq!(visible("rm \u{202e}txt.exe"), "rm ⟨U+202E⟩txt.exe");
        assert_eq!(visible("a\u{2066}b\u{2069}"), "a⟨U+2066⟩b⟨U+2069⟩");
    }
}
