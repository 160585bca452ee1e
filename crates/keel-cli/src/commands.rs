//! The `keel` binary's commands besides the interactive session: each is one surface or tool of
//! its own (`keel run`, `keel serve`, `keel acp`, `keel eval`, …), built on `session_setup`.
//!
//! Invariant: a command reaches sessions only through `keel_agent`'s `Host` and `Controller`.

pub(crate) mod acp;
pub(crate) mod auth;
pub(crate) mod config;
pub(crate) mod demo;
pub(crate) mod eval;
pub(crate) mod mcp;
pub(crate) mod mock;
pub(crate) mod piped_input;
pub(crate) mod run;
pub(crate) mod sandbox;
pub(crate) mod serve;
pub(crate) mod sessions;
pub(crate) mod trust;
