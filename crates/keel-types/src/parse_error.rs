//! What a parser's error may say about a file keel did not write (a task's `task.toml`, a
//! scenario, `.mcp.json`, a project's `keel.toml`, a command's front matter): the kind of
//! mistake and what was expected, never the value written there. Such a file may be a link to,
//! or a copy of, someone's secrets (`AWS_SECRET=…`), and serde's messages quote values
//! (`invalid type: string "…", expected u32`).
//!
//! Invariants:
//! - `without_values` keeps only what keel's own types say (the expected kind or values, a
//!   field's name) and a fixed word for what was found; a message it does not know the shape
//!   of passes only when it is one of serde's value-free forms or a syntax error (which
//!   names the grammar, not the text), cut to its first line.
//! - The caller names the file, the line and the key; this names the mistake.

/// serde's names of what it found (`serde::de::Unexpected`'s display), as said here.
const FOUND: &[(&str, &str)] = &[
    ("boolean", "a boolean"),
    ("integer", "an integer"),
    ("floating point", "a number"),
    ("character", "a character"),
    ("string", "a string"),
    ("byte array", "bytes"),
    ("unit value", "nothing"),
    ("unit variant", "a name"),
    ("newtype variant", "a variant"),
    ("tuple variant", "a variant"),
    ("struct variant", "a variant"),
    ("Option value", "an optional value"),
    ("newtype struct", "a value"),
    ("sequence", "a list"),
    ("map", "a table"),
    ("enum", "a variant"),
];

/// `message` (a serde or parser error's text) with every value it quotes left out.
pub fn without_values(message: &str) -> String {
    let first = message.lines().next().unwrap_or("").trim();
    // What keel's types expected comes last, after the value: the last `, expected ` is
    // theirs whatever the value holds.
    let expected = first
        .rsplit_once(", expected ")
        .map(|(_, expected)| expected.trim());
    let expecting = |what: &str| match expected {
        Some(expected) => format!("{what}, expected {expected}"),
        None => what.to_string(),
    };
    if let Some(rest) = first.strip_prefix("invalid type: ") {
        let found = FOUND
            .iter()
            .find(|(name, _)| rest.starts_with(name))
            .map_or("a value of another type", |(_, said)| said);
        return match expected {
            Some(expected) => format!("expected {expected}, found {found}"),
            None => format!("found {found}, which is not accepted here"),
        };
    }
    if first.starts_with("invalid value: ") {
        return expecting("invalid value");
    }
    if first.starts_with("invalid length ") {
        return expecting("wrong number of items");
    }
    if first.starts_with("unknown variant ") {
        return expecting("not an accepted value");
    }
    // Names of fields (keys) are the file's structure, not its values.
    for keyed in [
        "unknown field `",
        "missing field `",
        "duplicate field `",
        "duplicate key `",
    ] {
        if let Some(rest) = first.strip_prefix(keyed) {
            let key = rest.split('`').next().unwrap_or("");
            let what = &keyed[..keyed.len() - 2];
            return if reads_as_key(key) {
                format!("{what} `{key}`")
            } else {
                format!("{what} (a name that is no key of keel's)")
            };
        }
    }
    if first.starts_with("data did not match any variant") {
        return "not an accepted form".to_string();
    }
    if first.contains('"') || first.contains('\'') {
        // An unknown shape that quotes something: say only that it is wrong.
        return "not valid here".to_string();
    }
    first.to_string()
}

/// Whether `text` reads as a key (letters, digits, `_`, `-`, `.`; at most 64): only such a name
/// is repeated.
fn reads_as_key(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `message` (keel's own words about a value in a file keel did not write) with every quoted
/// segment — between backticks or double quotes — shown as `…`.
pub fn elide_quoted(message: &str) -> String {
    let mut said = String::with_capacity(message.len());
    let mut open: Option<char> = None;
    for c in message.chars() {
        match open {
            Some(quote) if c == quote => {
                said.push('…');
                said.push(c);
                open = None;
            }
            Some(_) => {}
            None => {
                said.push(c);
                if c == '`' || c == '"' {
                    open = Some(c);
                }
            }
        }
    }
    if open.is_some() {
        said.push('…');
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "AKIA-SECRET-VALUE, expected nothing";

    #[test]
    fn quoted_segments_are_elided() {
        assert_eq!(
            elide_quoted("unknown model `sk-secret` of \"x\"; see `keel"),
            "unknown model `…` of \"…\"; see `…"
        );
    }

    #[test]
    fn serdes_messages_keep_what_was_expected_and_lose_the_value() {
        for (message, said) in [
            (
                format!("invalid type: string \"{SECRET}\", expected u32"),
                "expected u32, found a string",
            ),
            (
                format!("invalid value: string \"{SECRET}\", expected a positive number"),
                "invalid value, expected a positive number",
            ),
            (
                format!("unknown variant `{SECRET}`, expected one of `read`, `edit`"),
                "not an accepted value, expected one of `read`, `edit`",
            ),
            (
                "invalid length 3, expected 2 items".to_string(),
                "wrong number of items, expected 2 items",
            ),
            (
                "unknown field `extra`, expected one of `kind`, `prompt`".to_string(),
                "unknown field `extra`",
            ),
            (
                format!("unknown field `{SECRET}`"),
                "unknown field (a name that is no key of keel's)",
            ),
            (
                "missing field `prompt`".to_string(),
                "missing field `prompt`",
            ),
            (format!("custom: \"{SECRET}\""), "not valid here"),
            (
                "invalid basic string\nexpected `\"`".to_string(),
                "invalid basic string",
            ),
        ] {
            let cleaned = without_values(&message);
            assert_eq!(cleaned, said, "{message}");
            assert!(!cleaned.contains("AKIA"), "{cleaned}");
        }
    }
}
