//! The configuration error.
//!
//! Invariant: every variant's message says where the bad value came from — `file:line: \`key\``
//! for a file, the flag, variable or provider otherwise — and never quotes a key.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}:{line}: `{key}`: {message}")]
    InFile {
        file: PathBuf,
        line: usize,
        key: String,
        message: String,
    },
    /// Keys a user's config file has that keel does not know, all of them.
    #[error("{}: keel does not know {} key{}:\n{}", file.display(), keys.len(), if keys.len() == 1 { "" } else { "s" }, keys.join("\n"))]
    UnknownKeys { file: PathBuf, keys: Vec<String> },
    #[error("cannot read {file}: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Setting { origin: String, message: String },
}
