//! Where a resolved value came from.
//!
//! Invariants:
//! - Every value the configuration resolves carries exactly one `Source`: the layer that won
//!   (docs/configuration.md#files-and-precedence), not every layer that set it.
//! - A source names a place (a file and line, a flag, an environment variable, a preset or the
//!   default), never a value, so printing a source can never print a key.

use std::fmt;
use std::path::PathBuf;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// keel's built-in default.
    Default,
    /// A built-in provider preset (`profile::PRESETS`).
    Preset(&'static str),
    /// A config file, at a 1-based line.
    File { path: PathBuf, line: usize },
    /// A command-line flag: `--model`, `--permission-mode` or `--yes`.
    Flag(&'static str),
    /// An environment variable: `KEEL_MODEL` or `DEEPSEEK_BASE_URL`.
    Env(&'static str),
    /// keel's table of known models (`keel_llm::context`), for a value no file sets.
    ModelTable,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::Preset(name) => write!(f, "preset {name}"),
            Source::File { path, line } => write!(f, "{}:{line}", path.display()),
            Source::Flag(flag) => f.write_str(flag),
            Source::Env(variable) => write!(f, "env {variable}"),
            Source::ModelTable => f.write_str("model table"),
        }
    }
}

/// A resolved value and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Sourced<T> {
    pub fn new(value: T, source: Source) -> Sourced<T> {
        Sourced { value, source }
    }

    /// keel's built-in default.
    pub fn default_value(value: T) -> Sourced<T> {
        Sourced::new(value, Source::Default)
    }

    /// Whether the value is keel's built-in default.
    pub fn is_default(&self) -> bool {
        self.source == Source::Default
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Sourced<U> {
        Sourced::new(f(self.value), self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_print_as_places() {
        let file = Source::File {
            path: PathBuf::from("/h/config.toml"),
            line: 7,
        };
        let printed: Vec<String> = [
            Source::Default,
            Source::Preset("deepseek"),
            file,
            Source::Flag("--model"),
            Source::Env("KEEL_MODEL"),
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            printed,
            [
                "default",
                "preset deepseek",
                "/h/config.toml:7",
                "--model",
                "env KEEL_MODEL"
            ]
        );
    }
}
