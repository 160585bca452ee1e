//! keel's MCP client (the official Rust SDK, `rmcp`): declared servers, started per session;
//! their tools offered as `mcp__<server>__<tool>` behind the same receipts, validation and
//! permissions as built-in tools; results turned into text for the model.
//!
//! Invariants (each has tests in its module):
//! - Declarations are parsed strictly and name their file (`config`).
//! - A server never sees keel's environment beyond a minimal base (`hub`).
//! - The tool list is ordered by server, then tool, so requests stay prefix-stable (`hub`).
//! - A result never reaches the model unbounded or as base64 (`result`).

pub mod config;
pub mod hub;
pub mod result;
mod server;
mod types;

pub use config::{
    ConfigError, ServerConfig, Transport, parse_acp_servers, parse_mcp_json, valid_server_name,
};
pub use hub::{McpHub, McpTool, PREFIX, ServerStatus, StartOptions};
