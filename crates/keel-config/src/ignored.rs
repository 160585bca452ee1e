//! What a project asked for and did not get: each value with its file, line and why, as
//! `trust/ignored` reports it.
//!
//! Invariant: a value is kept for showing only cut at `VALUE_SHOWN_CHARS`, and is shown only
//! escaped (it is a repository's text).

use crate::layer::Layer;
use std::fmt;
use std::path::PathBuf;

/// Why a project value was not applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IgnoredBecause {
    /// The key is never taken from an untrusted project: it could loosen a setting, reach
    /// another host or run a command.
    Closed,
    /// The value is looser than the user's own, shown here.
    Looser { user: String },
    /// `model` names a provider that only the project defines.
    ProjectProvider,
    /// A sandbox value no project file may set, trusted or not.
    NeverFromProject(&'static str),
    /// keel does not know the key (a newer keel's, or a typo): a repository cannot stop keel
    /// with one, so it is left out and said.
    UnknownKey { did_you_mean: Option<&'static str> },
}

impl fmt::Display for IgnoredBecause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("a project file may not set it"),
            Self::Looser { user } => write!(f, "looser than your own setting ({user})"),
            Self::ProjectProvider => {
                f.write_str("it names a provider your own config does not define")
            }
            Self::NeverFromProject(why) => f.write_str(why),
            Self::UnknownKey {
                did_you_mean: Some(known),
            } => write!(f, "keel does not know this key (did you mean `{known}`?)"),
            Self::UnknownKey { did_you_mean: None } => {
                f.write_str("keel does not know this key (a newer keel's, or a typo)")
            }
        }
    }
}

/// A project value that was asked for and not applied (`trust/ignored`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredValue {
    pub file: PathBuf,
    pub line: usize,
    /// The dotted key, e.g. `providers.deepseek.base_url` or `mcpServers.files`.
    pub key: String,
    /// The value as written in the file (cut at `VALUE_SHOWN_CHARS`); shown only escaped.
    pub value: String,
    pub why: IgnoredBecause,
}

/// A project file's keys keel does not know (left out of its layer), as values not applied.
pub(crate) fn unknown_keys_ignored(layer: &Layer) -> Vec<IgnoredValue> {
    layer
        .unknown
        .iter()
        .map(|key| IgnoredValue {
            file: layer.path.clone(),
            line: layer.line(&(key.at..key.at)),
            key: key.key.clone(),
            value: layer
                .snippet(&key.span)
                .chars()
                .take(VALUE_SHOWN_CHARS)
                .collect(),
            why: IgnoredBecause::UnknownKey {
                did_you_mean: key.did_you_mean,
            },
        })
        .collect()
}

/// How much of an ignored value is kept for showing.
pub const VALUE_SHOWN_CHARS: usize = 200;

/// `value` of `layer`, at `key`, not applied for `why`.
pub(crate) fn not_applied<T>(
    layer: &Layer,
    key: &str,
    value: &toml::Spanned<T>,
    why: IgnoredBecause,
) -> IgnoredValue {
    let span = value.span();
    IgnoredValue {
        file: layer.path.clone(),
        line: layer.line(&span),
        key: key.to_string(),
        value: layer
            .snippet(&span)
            .chars()
            .take(VALUE_SHOWN_CHARS)
            .collect(),
        why,
    }
}
