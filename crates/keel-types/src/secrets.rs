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

/// The shortest piece of a value that is redacted where text was cut.
pub const MIN_PARTIAL_LEN: usize = 4;

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

    /// Redact text that was cut in the middle (`head`, then `tail`, with bytes between them
    /// dropped): whole values in either part, and a value's start left at the end of `head` or
    /// its end at the start of `tail` (at least `MIN_PARTIAL_LEN` bytes of it), so a cut can
    /// never expose part of a key.
    pub fn redact_cut(&self, head: &str, tail: &str) -> (String, String) {
        let mut head = self.redact(head).into_owned();
        let mut tail = self.redact(tail).into_owned();
        for (value, name) in &self.values {
            let marker = format!("[redacted ${name}]");
            for len in (MIN_PARTIAL_LEN..value.len()).rev() {
                if let Some(prefix) = value.get(..len)
                    && head.ends_with(prefix)
                {
                    head.truncate(head.len() - len);
                    head.push_str(&marker);
                    break;
                }
            }
            for len in (MIN_PARTIAL_LEN..value.len()).rev() {
                if let Some(suffix) = value.get(value.len() - len..)
                    && tail.starts_with(suffix)
                {
                    tail.replace_range(..len, &marker);
                    break;
                }
            }
        }
        (head, tail)
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
    fn a_cut_through_a_value_leaves_none_of_it() {
        let s = secrets(&[("K1", "sk-canary-123456")]);
        let (head, tail) = s.redact_cut("output: sk-cana", "ry-123456 end");
        assert_eq!(head, "output: [redacted $K1]");
        assert_eq!(tail, "[redacted $K1] end");
        let (head, tail) = s.redact_cut("plain sk", "text");
        assert_eq!(
            (head.as_str(), tail.as_str()),
            ("plain sk", "text"),
            "too short to tell"
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
