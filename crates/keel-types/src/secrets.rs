//! keel's own secrets (provider keys, tokens): which environment variables hold them, and
//! redaction of their values from text that tools produce.
//!
//! Invariants:
//! - `Secrets` never prints a value: its `Debug` shows the variable names and a count only.
//! - `redact` replaces every occurrence of every known value, longest first (so a value that
//!   contains another is replaced whole), with `[redacted $NAME]`; text without a value is
//!   returned as is, without copying.
//! - Values shorter than `MIN_REDACTED_LEN` are not redacted (they would mangle ordinary
//!   text); their variables are still removed from tool environments.

use std::borrow::Cow;

/// The shortest secret value that is redacted from text.
pub const MIN_REDACTED_LEN: usize = 6;

/// The environment variables that hold keel's secrets, and their values.
#[derive(Clone, Default)]
pub struct Secrets {
    names: Vec<String>,
    /// (value, variable name), longest value first.
    values: Vec<(String, String)>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("names", &self.names)
            .field("values", &self.values.len())
            .finish()
    }
}

impl Secrets {
    /// Secrets from variable names and a lookup of their values (the environment, in
    /// production).
    pub fn from_names<I, F>(names: I, lookup: F) -> Secrets
    where
        I: IntoIterator<Item = String>,
        F: Fn(&str) -> Option<String>,
    {
        let mut secrets = Secrets::default();
        for name in names {
            if secrets.names.contains(&name) {
                continue;
            }
            if let Some(value) = lookup(&name) {
                for candidate in [value.clone(), value.trim().to_string()] {
                    if candidate.len() >= MIN_REDACTED_LEN
                        && !secrets.values.iter().any(|(known, _)| *known == candidate)
                    {
                        secrets.values.push((candidate, name.clone()));
                    }
                }
            }
            secrets.names.push(name);
        }
        secrets
            .values
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        secrets
    }

    /// The variables a tool's environment must not have.
    pub fn env_names(&self) -> &[String] {
        &self.names
    }

    /// `text` with every secret value replaced by `[redacted $NAME]`.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut result = Cow::Borrowed(text);
        for (value, name) in &self.values {
            if result.contains(value.as_str()) {
                result = Cow::Owned(result.replace(value.as_str(), &format!("[redacted ${name}]")));
            }
        }
        result
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(pairs: &[(&str, &str)]) -> Secrets {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        Secrets::from_names(owned.iter().map(|(n, _)| n.clone()), |name| {
            owned
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn values_are_replaced_and_named() {
        let s = secrets(&[("K1", "sk-canary-123"), ("K2", "abc")]);
        assert_eq!(
            s.redact("key=sk-canary-123;sk-canary-123"),
            "key=[redacted $K1];[redacted $K1]"
        );
        assert_eq!(s.redact("abc stays"), "abc stays", "too short to redact");
        assert!(matches!(s.redact("nothing here"), Cow::Borrowed(_)));
        assert_eq!(s.env_names(), ["K1", "K2"]);
    }

    #[test]
    fn a_value_containing_another_is_replaced_whole() {
        let s = secrets(&[("SHORT", "secret1"), ("LONG", "xx-secret1-yy")]);
        assert_eq!(
            s.redact("xx-secret1-yy secret1"),
            "[redacted $LONG] [redacted $SHORT]"
        );
    }

    #[test]
    fn debug_never_shows_a_value() {
        let s = secrets(&[("K1", "sk-canary-123")]);
        let shown = format!("{s:?}");
        assert!(!shown.contains("canary"), "{shown}");
        assert!(shown.contains("K1"));
    }

    #[test]
    fn padded_values_are_redacted_trimmed_too() {
        let s = secrets(&[("K1", " sk-canary-123\n")]);
        assert_eq!(s.redact("got sk-canary-123"), "got [redacted $K1]");
    }
}
