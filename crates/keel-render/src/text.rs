//! Text from the model, a tool, a provider or a file, made safe to show a person.
//!
//! Invariants:
//! - Nothing that a terminal interprets survives: C0 controls (but newline and tab), DEL, C1
//!   controls and the bidirectional overrides are shown as visible symbols instead — ESC as
//!   `␛`, CR as `␍`, C1 and bidi controls as `⟨U+XXXX⟩`. So no escape sequence (cursor moves,
//!   line erases, window titles, clear-screen, hyperlinks) and no reordering can change what a
//!   person sees, and what they approve is exactly what runs.
//! - `visible_line` also shows newlines (`␊`), for one-line places such as tool cards.
//! - `visible_exact` also names every invisible character (zero-width, fillers, variation
//!   selectors, tag characters: `keel_types::is_invisible`) as `⟨U+XXXX⟩`, for what a person
//!   approves (a diff): two lines that look the same are shown different when they differ.
//!   Running prose keeps them (an emoji's joiner and variation selector are part of it).
//! - Text without such characters is returned as is, without copying.

use std::borrow::Cow;

/// What happens to newlines and tabs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keep {
    /// Running text: newlines and tabs stay.
    Lines,
    /// One-line places: newlines are shown as `␊`, tabs stay.
    OneLine,
    /// Inside a styled span: newlines shown, tabs become a space.
    Span,
}

/// Whether `c` must not reach a terminal as is.
fn is_unsafe(c: char, keep: Keep) -> bool {
    match c {
        '\n' => keep != Keep::Lines,
        '\t' => keep == Keep::Span,
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

fn show(c: char, keep: Keep, out: &mut String) {
    match c {
        '\t' if keep == Keep::Span => out.push(' '),
        // The Control Pictures block has a symbol for each C0 control, and one for DEL.
        '\u{0}'..='\u{1f}' => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('�')),
        '\u{7f}' => out.push('␡'),
        _ => out.push_str(&format!("⟨U+{:04X}⟩", c as u32)),
    }
}

fn make_visible(text: &str, keep: Keep) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c, keep)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c, keep) {
            show(c, keep, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` with every control character shown visibly; newlines and tabs kept.
pub fn visible(text: &str) -> Cow<'_, str> {
    make_visible(text, Keep::Lines)
}

/// `text` on one line: newlines shown as `␊` too.
pub fn visible_line(text: &str) -> Cow<'_, str> {
    make_visible(text, Keep::OneLine)
}

/// `text` on one line with every invisible character named too.
pub fn visible_exact(text: &str) -> Cow<'_, str> {
    let safe = visible_line(text);
    if !safe.chars().any(keel_types::is_invisible) {
        return safe;
    }
    let mut out = String::with_capacity(safe.len() + 16);
    for c in safe.chars() {
        if keel_types::is_invisible(c) {
            out.push_str(&format!("⟨U+{:04X}⟩", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` for one styled span: on one line, tabs as a space (a span's width is its text's).
pub(crate) fn visible_span(text: &str) -> Cow<'_, str> {
    make_visible(text, Keep::Span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forged_approval_command_is_shown_whole() {
        let command = "touch PWNED; \r\u{1b}[2K echo harmless";
        let shown = visible(command);
        assert_eq!(shown, "touch PWNED; ␍␛[2K echo harmless");
        assert!(!shown.contains('\u{1b}') && !shown.contains('\r'));
    }

    #[test]
    fn newlines_and_tabs_stay_in_running_text_but_not_on_one_line() {
        assert_eq!(visible("a\n\tb"), "a\n\tb");
        assert_eq!(visible_line("a\nb"), "a␊b");
        assert_eq!(visible_span("a\tb\nc"), "a b␊c");
    }

    #[test]
    fn c1_controls_and_bidi_overrides_are_named() {
        assert_eq!(visible("x\u{9b}2Jy"), "x⟨U+009B⟩2Jy");
        assert_eq!(visible("abc\u{202e}def"), "abc⟨U+202E⟩def");
    }

    #[test]
    fn exact_text_names_what_cannot_be_seen() {
        assert_eq!(visible_exact("foo\u{200b}"), "foo⟨U+200B⟩");
        assert_eq!(visible_exact("a\u{fe0f}\u{e0041}"), "a⟨U+FE0F⟩⟨U+E0041⟩");
        assert_eq!(visible("a\u{200d}b"), "a\u{200d}b", "prose keeps joiners");
    }

    #[test]
    fn safe_text_is_not_copied() {
        assert!(matches!(visible("plain text"), Cow::Borrowed(_)));
    }
}
