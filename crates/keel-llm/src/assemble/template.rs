//! The repeated-envelope fast path: a streamed answer is hundreds of events that differ from the
//! one before only in one string (the next few characters of text, reasoning or arguments), so
//! the bytes around that string need not be parsed again.
//!
//! Invariants:
//! - A template is learned only from an event that was parsed in full and whose whole effect
//!   was one string value, borrowed from the payload (so its bytes are the string's bytes).
//! - An event is read through a template only when its name is the template's, its bytes up to
//!   and including the string's opening quote equal the template's, its bytes from the closing
//!   quote on equal the template's, and what lies between is exactly one JSON string (checked
//!   by serde_json, escapes decoded). A parser's reading of the bytes outside a string value
//!   does not depend on that string's contents, so such an event means what the template meant
//!   with the string replaced (as long as the event types read that string only into its own
//!   slot: no tag, alias or custom deserializer looks at it) — the same result the full parse
//!   gives, for any bytes (checked by a differential property test and fuzz target against the
//!   assemblers with templates off).
//! - Anything else (a different name, different bytes anywhere outside the string, a string
//!   that is not one JSON string) falls back to the full parse, which also reports errors.

use serde::Deserialize;
use std::borrow::Cow;

/// What an event did, re-enacted with the new string by the protocol's assembler.
#[derive(Debug)]
pub(super) struct Template<S> {
    event: String,
    payload: String,
    /// Byte offset of the string's first byte (after the opening quote).
    open: usize,
    /// Byte offset of the closing quote.
    close: usize,
    slot: S,
}

/// An assembler's template (none while the fast path is off) and, in tests, how many events it
/// read.
#[derive(Debug)]
pub(super) struct Templates<S> {
    enabled: bool,
    current: Option<Template<S>>,
    #[cfg(test)]
    filled: usize,
}

impl<S> Templates<S> {
    /// `enabled: false` keeps no template: every event is parsed in full.
    pub(super) fn new(enabled: bool) -> Self {
        Self {
            enabled,
            current: None,
            #[cfg(test)]
            filled: 0,
        }
    }

    /// `payload` read through the current template (see `Template::fill`).
    pub(super) fn fill<'a>(&mut self, event: &str, payload: &'a str) -> Option<(&S, Cow<'a, str>)> {
        let filled = self.current.as_ref()?.fill(event, payload)?;
        #[cfg(test)]
        {
            self.filled += 1;
        }
        Some(filled)
    }

    /// After a full parse of `payload`: it becomes the template when its only effect was
    /// `found` (a string and where it goes); otherwise there is none.
    pub(super) fn learn(&mut self, event: &str, payload: &str, found: Option<(&str, S)>) {
        self.current = found
            .filter(|_| self.enabled)
            .and_then(|(value, slot)| Template::learn(event, payload, value, slot));
    }

    #[cfg(test)]
    pub(super) fn filled(&self) -> usize {
        self.filled
    }
}

/// A JSON string, borrowed when it has no escapes.
#[derive(Deserialize)]
struct JsonString<'a>(#[serde(borrow)] Cow<'a, str>);

/// For `Option<Cow<str>>` fields: serde's own impl always copies the string (its borrowing
/// covers a bare `Cow` field only); through `JsonString` it is borrowed when it has no escapes.
pub(super) fn optional_str<'de, D>(deserializer: D) -> Result<Option<Cow<'de, str>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Option::<JsonString<'de>>::deserialize(deserializer).map(|found| found.map(|text| text.0))
}

impl<S> Template<S> {
    /// A template from `payload` (named `event`) whose only effect was `value`; `None` unless
    /// `value` lies inside `payload` between two quotes — a string serde_json borrowed, so its
    /// bytes are the string's bytes (a string it had to unescape was copied elsewhere).
    pub(super) fn learn(event: &str, payload: &str, value: &str, slot: S) -> Option<Self> {
        let open = value.as_ptr().addr().checked_sub(payload.as_ptr().addr())?;
        let close = open.checked_add(value.len())?;
        let bytes = payload.as_bytes();
        let quoted = open
            .checked_sub(1)
            .is_some_and(|quote| bytes.get(quote) == Some(&b'"'))
            && bytes.get(close) == Some(&b'"');
        quoted.then(|| Self {
            event: event.to_owned(),
            payload: payload.to_owned(),
            open,
            close,
            slot,
        })
    }

    /// The slot and the new string when `payload` is this template's payload with only the
    /// string changed; `None` otherwise.
    pub(super) fn fill<'a>(&self, event: &str, payload: &'a str) -> Option<(&S, Cow<'a, str>)> {
        if !same(event.as_bytes(), self.event.as_bytes()) {
            return None;
        }
        let (ours, theirs) = (self.payload.as_bytes(), payload.as_bytes());
        let tail = ours.len() - self.close;
        let close = theirs.len().checked_sub(tail)?;
        if close < self.open
            || !same(&theirs[..self.open], &ours[..self.open])
            || !same(&theirs[close..], &ours[self.close..])
        {
            return None;
        }
        let token = payload.get(self.open - 1..=close)?;
        let JsonString(value) = serde_json::from_str(token).ok()?;
        Some((&self.slot, value))
    }
}

/// Byte equality of two short slices, eight bytes at a time and the rest byte by byte, without
/// libc's `memcmp`: for short lengths it does a masked vector load, and on an empty `String`
/// (whose pointer is dangling) that load takes a fault-suppression assist of ~100 ns on this
/// machine — measured as more than half of the whole fast path before this.
fn same(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    let word = |bytes: &[u8]| u64::from_ne_bytes(bytes.try_into().unwrap_or_default());
    let (left_words, right_words) = (left.chunks_exact(8), right.chunks_exact(8));
    let rest = left_words.remainder().iter().zip(right_words.remainder());
    rest.fold(true, |equal, (l, r)| equal & (l == r))
        && left_words.zip(right_words).all(|(l, r)| word(l) == word(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(payload: &str) -> Template<u8> {
        #[derive(Deserialize)]
        struct Chunk<'a> {
            #[serde(borrow)]
            text: Cow<'a, str>,
        }
        let chunk: Chunk<'_> = serde_json::from_str(payload).unwrap();
        Template::learn("message", payload, &chunk.text, 7).unwrap()
    }

    #[test]
    fn an_event_that_differs_only_in_the_string_is_read_through_the_template() {
        let template = learned(r#"{"n":1,"text":"abc","m":[2]}"#);
        let filled = template.fill("message", r#"{"n":1,"text":"x\"y\u00e9","m":[2]}"#);
        assert_eq!(
            filled.map(|(slot, text)| (*slot, text.into_owned())),
            Some((7, "x\"yé".to_owned()))
        );
        let empty = template.fill("message", r#"{"n":1,"text":"","m":[2]}"#);
        assert_eq!(
            empty.map(|(_, text)| text.into_owned()),
            Some(String::new())
        );
    }

    #[test]
    fn anything_else_falls_back_to_the_full_parse() {
        let template = learned(r#"{"n":1,"text":"abc","m":[2]}"#);
        for other in [
            r#"{"n":2,"text":"abc","m":[2]}"#, // a byte outside the string
            r#"{"n":1,"text":"a","b":"c","m":[2]}"#, // the string closed early: new structure
            r#"{"n":1,"text":"a\","m":[2]}"#,  // a dangling escape
            r#"{"n":1,"text":"a
b","m":[2]}"#,  // a raw control character
            r#"{"n":1,"text":"abc","m":[2]} "#, // trailing bytes
            r#"{"n":1,"text":""#,              // shorter than prefix and suffix together
        ] {
            assert!(template.fill("message", other).is_none(), "{other}");
        }
        assert!(
            template
                .fill("other", r#"{"n":1,"text":"abc","m":[2]}"#)
                .is_none()
        );
    }

    #[test]
    fn only_a_string_borrowed_from_the_payload_between_quotes_is_learned() {
        let payload = String::from(r#"{"text":"abc"}"#);
        let elsewhere = String::from("abc");
        assert!(Template::learn("message", &payload, &elsewhere, 0).is_none());
        assert!(Template::learn("message", &payload, &payload[9..11], 0).is_none());
        assert!(Template::learn("message", &payload, &payload[9..12], 0).is_some());
    }
}
