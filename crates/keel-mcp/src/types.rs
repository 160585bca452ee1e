//! The values the hub and each server share: how servers are started, what a tool of a server
//! is as keel offers it, and what `keel mcp list` shows of a server.
//!
//! Invariant: plain data (no I/O), so the hub and the server module both depend on it and not
//! on each other.

use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The prefix of every MCP tool name.
pub const PREFIX: &str = "mcp__";

/// One tool of one server, as keel offers it.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    pub server: String,
    /// The server's own name for it.
    pub tool: String,
    /// `mcp__<server>__<tool>`.
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// The server marks it `readOnlyHint`.
    pub read_only: bool,
}

/// What `keel mcp list` shows of a server.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ServerStatus {
    pub name: String,
    /// `running`, `starting` or `failed`.
    pub state: &'static str,
    pub origin: String,
    /// Why it is down (with its stderr tail), or notes on tools left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub tools: Vec<String>,
}

/// Reads one variable of keel's environment.
pub type EnvLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// How servers are started.
#[derive(Clone)]
pub struct StartOptions {
    /// The base environment every server gets (`PATH`, `HOME`, locale).
    pub base_env: Vec<(String, String)>,
    /// Reads keel's environment for `$VAR` values in declarations.
    pub lookup: Arc<EnvLookup>,
    /// How long a server may take to answer `initialize`, then `tools/list`.
    pub start_timeout: Duration,
    /// How long opening a session waits for its servers before going on without the slow ones.
    pub first_wait: Duration,
    /// The working directory of stdio servers without a `cwd`.
    pub workspace: PathBuf,
    /// The sandbox stdio servers run in, each under its own `sandbox` setting (`None`:
    /// unconfined, as in tests of the client alone).
    pub sandbox: Option<Arc<keel_sandbox::Sandbox>>,
}

impl StartOptions {
    /// The base environment taken from this process: `PATH`, `HOME` and the locale only.
    pub fn base_env_from_process() -> Vec<(String, String)> {
        std::env::vars()
            .filter(|(name, _)| {
                matches!(name.as_str(), "PATH" | "HOME" | "LANG" | "LANGUAGE" | "TZ")
                    || name.starts_with("LC_")
            })
            .collect()
    }
}
