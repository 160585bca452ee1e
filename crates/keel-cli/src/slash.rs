//! Slash commands that report on or change a session from a terminal: `/status`,
//! `/permissions`, `/diff`, `/model` (`reports`), `/context` and `/reload-context` (`context`),
//! `/undo` and `/rewind` (`rewind`, which also serves `keel session rewind`).
//!
//! Invariant: what a command prints that came from outside keel (file names, a model's words,
//! a repository's text) is shown escaped.

pub(crate) mod context;
pub(crate) mod reports;
pub(crate) mod rewind;
