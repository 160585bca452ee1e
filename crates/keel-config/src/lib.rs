//! Configuration (docs/configuration.md#files-and-precedence): the TOML files, their layering with
//! flags and environment variables, and their resolution into what the rest of keel runs on —
//! `ProviderProfile`s (keel-llm), the `PermissionPolicy` (keel-tools) and `max_rounds`.
//!
//! Invariants:
//! - Precedence: command-line flag > environment > `./keel.toml` > `$KEEL_HOME/config.toml` >
//!   preset > built-in default, applied per field.
//! - Everything is resolved once at load time, so a bad value fails at start-up with an error
//!   naming its file, line and key (or its flag or environment variable), never mid-session and
//!   never with a panic.
//! - Keys are never read here: a profile names the environment variable only. Nothing here
//!   writes anything but the trust store (`trust_store`).
//! - A project layer (`./keel.toml`, `.mcp.json`) of an untrusted workspace may tighten and
//!   loosen nothing (`trust::restrict`, docs/security.md#repository-trust); what it did not get is
//!   reported, never dropped silently. Trust is the user's, kept in `$KEEL_HOME`.
//! - Every resolved value can say where it came from (`Source`); the values a session runs on
//!   and the ones `keel config` shows come from the same resolution.

mod agent_limits;
mod config;
mod digest;
mod error;
mod hook_scripts;
mod hook_tables;
mod hooks;
mod ignored;
mod layer;
mod mcp;
mod provider;
mod resolved;
mod sandbox;
mod source;
mod trust;
mod trust_store;
#[cfg(test)]
mod trust_tests;
mod unknown_keys;
mod workspace_files;

pub use agent_limits::{
    AgentLimits, DEFAULT_AGENT_MAX_ROUNDS, DEFAULT_MAX_CONCURRENT, ResolvedAgentLimits,
};
pub use config::{
    ConfiguredRule, DEFAULT_CHECKPOINT_MAX_BYTES, DEFAULT_COMPACT_AT, DEFAULT_MAX_ROUNDS,
    DEFAULT_MODEL, KeelConfig, ModeFlag, ModelRef, Overrides, ResolvedConfig, RuleList,
};
pub use error::ConfigError;
pub use hook_scripts::HOOK_SCRIPTS;
pub use hooks::{CLAUDE_USER_SETTINGS, ResolvedHooks, matcher_regex};
pub use ignored::{IgnoredBecause, IgnoredValue};
pub use layer::toml_error_at;
pub use provider::{ResolvedProvider, ResolvedRetry, validate_base_url};
pub use sandbox::ResolvedSandbox;
pub use source::{Source, Sourced};
pub use trust::WorkspaceTrust;
pub use trust_store::{
    RecordState, TRUST_FILE, TrustRecord, TrustStore, TrustStoreError, state_of,
};
pub use workspace_files::{
    CLAUDE_PROJECT_SETTINGS, PROJECT_CONFIG_FILE, SHARED_MCP_FILE, WorkspaceFile, WorkspaceFiles,
};
