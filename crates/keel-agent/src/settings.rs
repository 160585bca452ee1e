//! What a session is run with, as plain data: the model, the rules, the limits, where it works.
//!
//! Invariants:
//! - Settings hold no live service (no client, hub, editor or store): those are `Services`,
//!   shared by every agent of a session, or `SurfaceServices`, handed over by the surface.
//! - They are read, never changed, while the session runs (the permission mode the person
//!   switches to lives in the agent's mode state, not here).

use crate::confinement::SandboxSetup;
use keel_llm::ProviderProfile;
use keel_tools::PermissionPolicy;
use std::path::PathBuf;

/// Everything a session is run with besides its history and its services (plain data: a
/// child agent starts from a copy of its parent's).
#[derive(Clone)]
pub struct AgentSettings {
    pub profile: ProviderProfile,
    pub model: String,
    pub policy: PermissionPolicy,
    pub max_rounds: u32,
    /// Compact when a request reaches this share of the usable window (`compact_at`).
    pub compact_at: f64,
    pub workspace: PathBuf,
    pub extra_dirs: Vec<PathBuf>,
    /// Who holds the session lease, for the error another process sees.
    pub holder: String,
    /// keel's secrets: kept out of tool environments and redacted from tool results.
    pub secrets: keel_types::Secrets,
    /// What the workspace's untrusted project files asked for and did not get: announced as
    /// `trust/ignored` events after `session/started`.
    pub untrusted: Vec<keel_types::IgnoredSetting>,
    /// How commands are confined (`None`: unconfined, as in tests of the engine alone).
    pub sandbox: Option<SandboxSetup>,
    /// Where the session's project instructions come from.
    pub context: ContextSettings,
    /// The most bytes of file checkpoints the session keeps, and of the workspace's snapshot
    /// store (`checkpoint_max_bytes`).
    pub checkpoint_max_bytes: u64,
    /// The model's action policy goes into the system prompt where one applies (`keel eval`'s
    /// `policy` variant only; never a config key).
    pub action_policy: bool,
    /// How many subagents run at once and how far each may go (`[agents]`).
    pub subagents: SubagentLimits,
}

/// The limits on a session's subagents (`[agents]`, docs/configuration.md#agents).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubagentLimits {
    /// Subagents running at once; the rest wait, their `task` receipts `pending`.
    pub max_concurrent: u32,
    /// Rounds one subagent may take before it ends `budget_exhausted`.
    pub max_rounds: u32,
    /// Input + output tokens one subagent may use (`None`: no limit).
    pub max_child_tokens: Option<u64>,
}

impl Default for SubagentLimits {
    /// `[agents]`' defaults: 4 at once, 50 rounds, no token limit.
    fn default() -> SubagentLimits {
        SubagentLimits {
            max_concurrent: 4,
            max_rounds: 50,
            max_child_tokens: None,
        }
    }
}

/// Which session an agent opens.
pub enum SessionChoice {
    New,
    Resume(String),
}

/// Where a session's instructions come from.
#[derive(Clone, Debug)]
pub struct ContextSettings {
    /// File names looked for in each directory, the first found wins (`instruction_files`).
    pub instruction_files: Vec<String>,
    /// The directory of the global instructions (`$KEEL_HOME`); none: no global file.
    pub global_dir: Option<PathBuf>,
    /// The most bytes of instructions a block holds, all files together.
    pub max_bytes: usize,
}

/// The bound on instructions when the settings give none (32 KiB).
pub const DEFAULT_INSTRUCTION_BYTES: usize = 32 * 1024;

impl Default for ContextSettings {
    fn default() -> ContextSettings {
        ContextSettings {
            instruction_files: keel_types::DEFAULT_INSTRUCTION_FILES
                .map(String::from)
                .to_vec(),
            global_dir: None,
            max_bytes: DEFAULT_INSTRUCTION_BYTES,
        }
    }
}
