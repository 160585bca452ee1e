//! Hooks as configured: the events keel runs hooks on, and one configured hook with where it
//! came from (docs/hooks.md). keel-config produces them; keel-agent runs them.
//!
//! Invariants:
//! - Event names are Claude Code's, spelled as it spells them; `HookEvent::ALL` is every event
//!   keel runs hooks on, and `parse` accepts exactly those names.
//! - A hook from a project layer exists only when the workspace is trusted (keel-config drops
//!   and reports an untrusted project's); `unconfined` is only ever set from the user's own
//!   config.

use std::fmt;

/// When a hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    Stop,
    SubagentStop,
    PreCompact,
    Notification,
}

impl HookEvent {
    pub const ALL: [HookEvent; 8] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::PreCompact,
        HookEvent::Notification,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Notification => "Notification",
        }
    }

    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL
            .into_iter()
            .find(|event| event.name() == name)
    }

    /// What a matcher is matched against: the tool's name, the session start's `source`, the
    /// compaction's `trigger`, the notification's type; nothing for the other events (a
    /// matcher there is ignored, as Claude Code ignores it).
    pub fn matched_on(self) -> Option<&'static str> {
        match self {
            HookEvent::PreToolUse | HookEvent::PostToolUse => Some("tool_name"),
            HookEvent::SessionStart => Some("source"),
            HookEvent::PreCompact => Some("trigger"),
            HookEvent::Notification => Some("notification_type"),
            HookEvent::UserPromptSubmit | HookEvent::Stop | HookEvent::SubagentStop => None,
        }
    }

    /// What an outcome other than exit 0 or exit 2 decides when the hook does not say: a guard
    /// that crashes blocks (`PreToolUse`), nothing can be denied after the fact (the others).
    pub fn default_on_error(self) -> HookOnError {
        match self {
            HookEvent::PreToolUse => HookOnError::Deny,
            _ => HookOnError::Allow,
        }
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a hook that failed (could not start, was killed, timed out, exited with a code other
/// than 0 or 2, printed malformed JSON) decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookOnError {
    Deny,
    Allow,
}

/// Which layer a hook came from: the user's own, or a trusted project's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum HookLayer {
    User,
    Project,
}

/// One configured hook command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfiguredHook {
    pub event: HookEvent,
    /// An anchored, case-sensitive regex; `None` matches everything (also `*` and the empty
    /// string as written).
    pub matcher: Option<String>,
    pub command: String,
    pub timeout_secs: u64,
    /// `None`: the event's default (`HookEvent::default_on_error`), or for a Claude Code
    /// settings hook Claude Code's own rule (only exit 2 blocks).
    pub on_error: Option<HookOnError>,
    /// Runs outside the session's sandbox (`sandbox = "off"`, user layer only).
    pub unconfined: bool,
    pub layer: HookLayer,
    /// From a Claude Code settings file: sees Claude Code's tool names and argument names.
    pub claude: bool,
    /// Where it was written: `file:line`.
    pub origin: String,
}

/// The default timeout of a hook, in seconds (Claude Code's).
pub const DEFAULT_HOOK_TIMEOUT_SECS: u64 = 60;

/// The longest timeout a hook may set, in seconds.
pub const MAX_HOOK_TIMEOUT_SECS: u64 = 600;
