//! Keys a config file has that keel does not know — every one of them at once, each with the
//! known key it most likely meant.
//!
//! Invariants:
//! - The schema here is the one `RawFile` and its tables deserialize (a test compares the two,
//!   so a field added there and not here fails).
//! - Found from the file's own spans: each unknown key is named by its dotted path and line.
//! - `without` blanks exactly the unknown entries (key and value, newlines kept), so every other
//!   value keeps its place and line for later errors.

use std::ops::Range;
use toml::de::{DeTable, DeValue};

/// What a key holds.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// A value keel reads as a whole (its inside is not a set of keys keel names).
    Value,
    /// A table with these keys.
    Table(&'static [(&'static str, Shape)]),
    /// A table of any names, each holding this shape (`providers.NAME`).
    Named(&'static Shape),
    /// An array of tables with these keys (`accounts`).
    Tables(&'static [(&'static str, Shape)]),
}

const PERMISSIONS: &[(&str, Shape)] = &[
    ("allow", Shape::Value),
    ("ask", Shape::Value),
    ("deny", Shape::Value),
];

const SANDBOX: &[(&str, Shape)] = &[
    ("mode", Shape::Value),
    ("forbid_read", Shape::Value),
    ("allow_write", Shape::Value),
    ("allow_network", Shape::Value),
];

const RETRY: &[(&str, Shape)] = &[
    ("mode", Shape::Value),
    ("max_retries", Shape::Value),
    ("retry_on", Shape::Value),
    ("base_delay_ms", Shape::Value),
    ("max_delay_ms", Shape::Value),
    ("jitter", Shape::Value),
    ("retry_after_cap_ms", Shape::Value),
    ("rotate_on", Shape::Value),
];

const PRICE: &[(&str, Shape)] = &[
    ("input_cache_hit", Shape::Value),
    ("input_cache_miss", Shape::Value),
    ("input_cache_write", Shape::Value),
    ("output", Shape::Value),
    ("currency", Shape::Value),
];

const ACCOUNT: &[(&str, Shape)] = &[("name", Shape::Value), ("api_key_env", Shape::Value)];

const PROVIDER: Shape = Shape::Table(&[
    ("protocol", Shape::Value),
    ("base_url", Shape::Value),
    ("api_key_env", Shape::Value),
    ("accounts", Shape::Tables(ACCOUNT)),
    ("reasoning_protocol", Shape::Value),
    ("idle_timeout_secs", Shape::Value),
    ("connect_timeout_secs", Shape::Value),
    ("max_output_tokens", Shape::Value),
    ("web_search", Shape::Value),
    ("max_event_bytes", Shape::Value),
    ("context_window", Shape::Value),
    ("retry", Shape::Table(RETRY)),
    ("price", Shape::Table(PRICE)),
    ("region", Shape::Value),
]);

const MCP_SERVER: Shape = Shape::Table(&[
    ("command", Shape::Value),
    ("args", Shape::Value),
    ("env", Shape::Value),
    ("cwd", Shape::Value),
    ("url", Shape::Value),
    ("headers", Shape::Value),
    ("trust_read_only", Shape::Value),
    ("sandbox", Shape::Value),
]);

const FILE: &[(&str, Shape)] = &[
    ("model", Shape::Value),
    ("permission_mode", Shape::Value),
    ("max_rounds", Shape::Value),
    ("compact_at", Shape::Value),
    ("permissions", Shape::Table(PERMISSIONS)),
    ("providers", Shape::Named(&PROVIDER)),
    ("mcp_servers", Shape::Named(&MCP_SERVER)),
    ("trust_workspace_mcp", Shape::Value),
    ("sandbox", Shape::Table(SANDBOX)),
    ("instruction_files", Shape::Value),
    ("checkpoint_max_bytes", Shape::Value),
    ("reasoning_effort", Shape::Value),
    ("ask_read_only_commands", Shape::Value),
    ("agents", Shape::Table(AGENTS)),
    ("hooks_from_claude", Shape::Value),
    ("hooks", Shape::Named(&HOOK_GROUPS)),
];

const HOOK_COMMAND: &[(&str, Shape)] = &[
    ("type", Shape::Value),
    ("command", Shape::Value),
    ("timeout", Shape::Value),
    ("on_error", Shape::Value),
    ("sandbox", Shape::Value),
];

const HOOK_GROUPS: Shape = Shape::Tables(&[
    ("matcher", Shape::Value),
    ("hooks", Shape::Tables(HOOK_COMMAND)),
]);

const AGENTS: &[(&str, Shape)] = &[
    ("max_concurrent", Shape::Value),
    ("max_rounds", Shape::Value),
    ("max_child_tokens", Shape::Value),
];

/// One key keel does not know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UnknownKey {
    /// The dotted path (`providers.deepseek.retry.max_retry`).
    pub key: String,
    /// Where the key starts (its line is the one named).
    pub at: usize,
    /// From the key to the end of its value.
    pub span: Range<usize>,
    /// The known key of the same table it most likely meant.
    pub did_you_mean: Option<&'static str>,
}

/// Every unknown key of `text`, in file order (none when it does not parse: the parser's own
/// error says what is wrong).
pub(crate) fn unknown_keys(text: &str) -> Vec<UnknownKey> {
    let Ok(document) = DeTable::parse(text) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    walk_table(text, document.get_ref(), FILE, "", &mut found);
    found.sort_by_key(|unknown| unknown.at);
    found
}

/// `text` with the entries of `unknown` blanked out (same length, same lines).
pub(crate) fn without(text: &str, unknown: &[UnknownKey]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for key in unknown {
        for index in key.span.clone() {
            if let Some(byte) = bytes.get_mut(index)
                && *byte != b'\n'
            {
                *byte = b' ';
            }
        }
    }
    // Only ASCII bytes were changed, at whole entries, so it stays valid UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_string())
}

fn walk_table(
    text: &str,
    table: &DeTable<'_>,
    known: &'static [(&'static str, Shape)],
    prefix: &str,
    found: &mut Vec<UnknownKey>,
) {
    for (key, value) in table {
        let name: &str = key.get_ref();
        let dotted = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        match known.iter().find(|(known_name, _)| *known_name == name) {
            Some((_, shape)) => walk_value(text, value.get_ref(), *shape, &dotted, found),
            None => found.push(UnknownKey {
                span: entry_span(text, key.span(), value.span()),
                key: dotted,
                at: key.span().start,
                did_you_mean: keel_types::names::closest(
                    name,
                    known.iter().map(|(known, _)| *known),
                ),
            }),
        }
    }
}

fn walk_value(
    text: &str,
    value: &DeValue<'_>,
    shape: Shape,
    dotted: &str,
    found: &mut Vec<UnknownKey>,
) {
    match (shape, value) {
        (Shape::Table(known), DeValue::Table(table)) => {
            walk_table(text, table, known, dotted, found);
        }
        (Shape::Named(inner), DeValue::Table(table)) => {
            for (name, value) in table {
                let name: &str = name.get_ref();
                walk_value(
                    text,
                    value.get_ref(),
                    *inner,
                    &format!("{dotted}.{name}"),
                    found,
                );
            }
        }
        (Shape::Tables(known), DeValue::Array(array)) => {
            for element in array {
                if let DeValue::Table(table) = element.get_ref() {
                    walk_table(text, table, known, dotted, found);
                }
            }
        }
        // A value of the wrong type is the deserializer's to name.
        _ => {}
    }
}

/// The bytes of an entry: `key = value` where it is one, or a whole `[table]` section (its
/// header line to the next header that is not one of its own sub-tables) when the key is
/// written in a header.
fn entry_span(text: &str, key: Range<usize>, value: Range<usize>) -> Range<usize> {
    let line_start = text
        .get(..key.start)
        .and_then(|before| before.rfind('\n'))
        .map_or(0, |newline| newline + 1);
    let header = text
        .get(line_start..key.start)
        .is_some_and(|before| before.trim_start().starts_with('['));
    if !header {
        return key.start..value.end.max(key.end);
    }
    let path = text
        .get(line_start..key.end)
        .unwrap_or("")
        .trim_start()
        .trim_start_matches('[');
    let mut end = text.len();
    let mut offset = text
        .get(line_start..)
        .and_then(|rest| rest.find('\n'))
        .map_or(text.len(), |newline| line_start + newline + 1);
    while offset < text.len() {
        let line = text.get(offset..).unwrap_or("");
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            let next = trimmed.trim_start_matches('[');
            let own = next.starts_with(path)
                && next
                    .get(path.len()..)
                    .is_some_and(|rest| rest.starts_with(['.', ']']));
            if !own {
                end = offset;
                break;
            }
        }
        offset = line
            .find('\n')
            .map_or(text.len(), |newline| offset + newline + 1);
    }
    line_start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unknown_key_is_found_with_what_it_likely_meant() {
        let text = "modle = \"deepseek/x\"\n\
                    [providers.deepseek]\n\
                    base_ulr = \"https://x\"\n\
                    [providers.deepseek.retry]\n\
                    max_retry = 2\n\
                    [sandbox]\n\
                    mode = \"off\"\n\
                    colour = \"blue\"\n";
        let found = unknown_keys(text);
        let named: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|unknown| (unknown.key.as_str(), unknown.did_you_mean))
            .collect();
        assert_eq!(
            named,
            [
                ("modle", Some("model")),
                ("providers.deepseek.base_ulr", Some("base_url")),
                ("providers.deepseek.retry.max_retry", Some("max_retries")),
                ("sandbox.colour", None),
            ]
        );
        let cleaned = without(text, &found);
        assert_eq!(cleaned.len(), text.len());
        assert_eq!(cleaned.lines().count(), text.lines().count());
        assert!(unknown_keys(&cleaned).is_empty(), "{cleaned}");
        assert!(cleaned.contains("mode = \"off\""));
    }

    #[test]
    fn an_unknown_table_goes_whole() {
        let text = "model = \"m\"\n[telemetry]\nendpoint = \"x\"\nlevel = 2\n\n[sandbox]\nmode = \"off\"\n";
        let found = unknown_keys(text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].key, "telemetry");
        let cleaned = without(text, &found);
        assert!(unknown_keys(&cleaned).is_empty(), "{cleaned}");
        let parsed: toml::Table = toml::from_str(&cleaned).unwrap();
        assert!(
            parsed.get("telemetry").is_none() && parsed.get("sandbox").is_some(),
            "{cleaned}"
        );
    }
}

#[cfg(test)]
mod schema_tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The field names serde's `deny_unknown_fields` error lists for an unknown key in `text`.
    fn fields_serde_knows(text: &str) -> BTreeSet<String> {
        let error = toml::from_str::<crate::layer::RawFile>(text)
            .err()
            .map(|error| error.message().to_string())
            .unwrap_or_default();
        // "expected one of `a`, `b`, `c`", or for two fields "expected `a` or `b`".
        let listed = error.split("expected ").nth(1).unwrap_or_default();
        listed
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    fn names(table: &[(&str, Shape)]) -> BTreeSet<String> {
        table.iter().map(|(name, _)| (*name).to_string()).collect()
    }

    #[test]
    fn the_schema_is_the_one_the_config_deserializes() {
        assert_eq!(names(FILE), fields_serde_knows("zz_unknown = 1\n"));
        let Shape::Table(provider) = PROVIDER else {
            panic!("a provider is a table")
        };
        assert_eq!(
            names(provider),
            fields_serde_knows("[providers.x]\nzz_unknown = 1\n")
        );
        assert_eq!(
            names(RETRY),
            fields_serde_knows("[providers.x.retry]\nzz_unknown = 1\n")
        );
        assert_eq!(
            names(SANDBOX),
            fields_serde_knows("[sandbox]\nzz_unknown = 1\n")
        );
        assert_eq!(
            names(PERMISSIONS),
            fields_serde_knows("[permissions]\nzz_unknown = 1\n")
        );
        let Shape::Table(server) = MCP_SERVER else {
            panic!("a server is a table")
        };
        assert_eq!(
            names(server),
            fields_serde_knows("[mcp_servers.x]\ncommand = \"c\"\nzz_unknown = 1\n")
        );
        assert_eq!(
            names(PRICE),
            fields_serde_knows("[providers.x.price]\nzz_unknown = 1\n")
        );
        assert_eq!(
            names(ACCOUNT),
            fields_serde_knows("[[providers.x.accounts]]\nzz_unknown = 1\n")
        );
    }

    /// Every key of `table` (and of the tables inside it), with whether it is an MCP server's.
    fn every_key(
        table: &[(&'static str, Shape)],
        in_mcp: bool,
        keys: &mut Vec<(&'static str, bool)>,
    ) {
        for (name, shape) in table {
            keys.push((name, in_mcp));
            let inner_mcp = in_mcp || *name == "mcp_servers";
            match shape {
                Shape::Value => {}
                Shape::Table(inner) | Shape::Tables(inner) => every_key(inner, inner_mcp, keys),
                Shape::Named(named) => {
                    if let Shape::Table(inner) = named {
                        every_key(inner, inner_mcp, keys);
                    }
                }
            }
        }
    }

    #[test]
    fn every_key_is_documented() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        let configuration = std::fs::read_to_string(root.join("configuration.md")).unwrap();
        let mcp = std::fs::read_to_string(root.join("mcp.md")).unwrap();
        let mut keys = Vec::new();
        every_key(FILE, false, &mut keys);
        let named = |doc: &str, key: &str| {
            [
                format!("`{key}`"),
                format!("{key} ="),
                format!("[{key}"),
                format!(".{key}]"),
                format!(".{key}."),
            ]
            .iter()
            .any(|form| doc.contains(form.as_str()))
        };
        let missing: Vec<&str> = keys
            .iter()
            .filter(|(key, in_mcp)| !named(if *in_mcp { &mcp } else { &configuration }, key))
            .map(|(key, _)| *key)
            .collect();
        assert!(missing.is_empty(), "not documented: {missing:?}");
        assert!(
            configuration.contains("(mcp.md)"),
            "configuration.md points to mcp.md"
        );
    }
}
