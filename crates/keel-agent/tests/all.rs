//! keel-agent's integration tests, in one binary (`docs/testing.md#one-test-binary-per-crate`):
//! each file in `tests/` is a module here. `Cargo.toml` sets `autotests = false`; keel-cli's
//! `docs.rs` checks that every file in `tests/` is listed below.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod cancellation;
mod children;
mod host;
mod many_agents;
mod mcp_tools;
mod tasks;
