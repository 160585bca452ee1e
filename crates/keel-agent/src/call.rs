//! A call that passed validation: a built-in tool's, or an MCP server's.
//!
//! Invariants:
//! - An MCP call's arguments were checked against the server's own schema, like a built-in
//!   call's; what the model gets back for a bad call is the specific error.
//! - An MCP tool counts as changing things (so it is asked about in `ask` mode, denied in
//!   `read-only`, and never run in parallel) unless the server marks it `readOnlyHint` and the
//!   user's config says to trust that server.

use keel_mcp::McpHub;
use keel_tools::{ToolOutput, ToolServices, ValidCall};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// How long one MCP call may take before it is cancelled.
pub const MCP_CALL_TIMEOUT: Duration = Duration::from_secs(300);

pub enum Valid {
    Builtin(ValidCall),
    Mcp {
        name: String,
        args: Value,
        /// `readOnlyHint` from a server the config trusts.
        trusted_read_only: bool,
    },
}

impl Valid {
    /// The tool's name, as permission rules match it.
    pub fn tool_name(&self) -> &str {
        match self {
            Valid::Builtin(valid) => valid.tool.name(),
            Valid::Mcp { name, .. } => name,
        }
    }

    /// The arguments it runs with (a hook's `updatedInput`, where one replaced the model's).
    pub fn arguments(&self) -> &Value {
        match self {
            Valid::Builtin(valid) => &valid.args,
            Valid::Mcp { args, .. } => args,
        }
    }

    /// Whether the call may change things (or read outside the workspace).
    pub fn is_sensitive(&self, context: &ToolServices) -> bool {
        match self {
            Valid::Builtin(valid) => valid.is_sensitive(context),
            Valid::Mcp {
                trusted_read_only, ..
            } => !trusted_read_only,
        }
    }

    /// Run it; dropping the future cancels it.
    pub async fn run(&self, context: &ToolServices, hub: &McpHub) -> ToolOutput {
        match self {
            Valid::Builtin(valid) => valid.run(context).await,
            Valid::Mcp { name, args, .. } => {
                // A server may write what a command may (`sandbox = "workspace-write"`): what
                // it leaves for the user's git and shell is undone after the call, as after a
                // command.
                let confined = context
                    .sandbox
                    .as_ref()
                    .filter(|sandbox| sandbox.mode != keel_sandbox::SandboxMode::Off);
                let before = confined.map(|sandbox| sandbox.sandbox.planted_absent_now());
                let mut output = hub
                    .call_redacted(name, args.clone(), MCP_CALL_TIMEOUT, &context.secrets)
                    .await;
                if let (Some(sandbox), Some(before)) = (confined, before) {
                    for undone in sandbox.sandbox.undo_planted(&before) {
                        output
                            .content
                            .push_str(&format!("\n[keel sandbox: {}]", undone.describe()));
                    }
                }
                output
            }
        }
    }
}

/// Validate an `mcp__…` call against the hub; `None` when no running server offers `name`.
pub fn validate_mcp(
    hub: &McpHub,
    name: &str,
    raw: &str,
) -> Option<Result<Valid, keel_tools::ValidationError>> {
    let checked = hub.validate(name, raw)?;
    let tool = hub.find(name)?;
    let trusted_read_only = tool.read_only && hub.trusts_read_only(&tool.server);
    Some(checked.map(|args| Valid::Mcp {
        name: name.to_string(),
        args,
        trusted_read_only,
    }))
}

/// SHA-256 (hex) of a call's raw argument string: what its receipt records.
pub(crate) fn digest(arguments: &str) -> String {
    Sha256::digest(arguments.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
