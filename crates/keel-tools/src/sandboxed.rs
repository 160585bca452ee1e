//! The session's sandbox as the tools see it: one policy for commands and file tools.
//!
//! Invariants:
//! - A path under a `forbid_read` entry is refused to every file tool (read, list, search,
//!   write, edit — through an editor too), and a walk never enters one; a protected path
//!   (`.git/hooks`, `keel.toml`, …) is refused to every writing tool. The same lists the
//!   kernel enforces for commands, resolved the same way.
//! - These refusals hold in every sandbox mode, `off` included: `off` unconfines commands,
//!   not keel's own tools.
//! - A refusal names the path, what covers it, and the setting behind it.
//! - Text a command printed is never taken as proof of a sandbox refusal: a failed confined
//!   command gets a note of what the sandbox forbids, worded as a possibility.

use keel_sandbox::{Enforcement, Sandbox, SandboxMode, SandboxPolicy};
use std::path::Path;
use std::sync::Arc;

/// How a session's commands run, and the paths its file tools may not use.
#[derive(Clone, Debug)]
pub struct CommandSandbox {
    pub sandbox: Arc<Sandbox>,
    /// The mode commands run under (`read-only` when keel is in read-only mode).
    pub mode: SandboxMode,
}

/// How a path appears in a refusal: relative to the home directory where it is inside it.
fn shown(path: &Path, home: Option<&Path>) -> String {
    match home.and_then(|home| path.strip_prefix(home).ok()) {
        Some(rest) if rest.as_os_str().is_empty() => "~".to_string(),
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    }
}

impl CommandSandbox {
    /// The policy whose paths bind the file tools.
    fn paths(&self) -> SandboxPolicy {
        let mode = match self.mode {
            SandboxMode::Off => SandboxMode::WorkspaceWrite,
            other => other,
        };
        self.sandbox.policy(mode)
    }

    fn home(&self) -> Option<&Path> {
        self.sandbox.places().home.as_deref()
    }

    /// Why `resolved` may not be read by a tool, if it may not.
    pub fn read_refusal(&self, path: &str, resolved: &Path) -> Option<String> {
        let policy = self.paths();
        let hidden = policy.forbids_reading(resolved)?;
        Some(format!(
            "keel sandbox: reading `{path}` is forbidden: {} is hidden from tools and commands \
             (the sandbox's forbid_read: credentials and keel's own files)",
            shown(hidden, self.home())
        ))
    }

    /// Why `resolved` may not be written by a tool, if it may not.
    pub fn change_refusal(&self, path: &str, resolved: &Path) -> Option<String> {
        let policy = self.paths();
        if let Some(hidden) = policy.forbids_reading(resolved) {
            return Some(format!(
                "keel sandbox: writing `{path}` is forbidden: {} is hidden from tools and \
                 commands (forbid_read)",
                shown(hidden, self.home())
            ));
        }
        let protected = policy.forbids_changing(resolved)?;
        Some(format!(
            "keel sandbox: writing `{path}` is forbidden: {} is read-only for this session \
             (git hooks and config, keel's project files and, where the workspace holds the \
             home, its dot entries change only by the user's hand)",
            shown(&protected, self.home())
        ))
    }

    /// The policy whose `forbids_reading` tells the paths a walk must not enter.
    pub fn walk_policy(&self) -> SandboxPolicy {
        self.paths()
    }

    /// Where commands stand.
    pub fn enforcement(&self) -> Enforcement {
        self.sandbox.enforcement(self.mode)
    }

    /// What a failed confined command is told about the sandbox.
    pub fn failure_note(&self) -> String {
        let policy = self.sandbox.policy(self.mode);
        let home = self.home();
        let writes: Vec<String> = policy
            .writable
            .iter()
            .map(|path| shown(path, home))
            .chain(policy.temp_dir.iter().map(|_| "/tmp".to_string()))
            .collect();
        let network = match policy.network {
            keel_sandbox::Network::Off => "network off (only the command's own loopback)",
            keel_sandbox::Network::On => "network on",
        };
        format!(
            "[the command ran in keel's sandbox ({}): it writes only to {}; .git hooks and \
             config and keel's project files are read-only; credentials and keel's state are \
             hidden; {network}; no other process is visible. If the failure above is a \
             refusal (permission denied, read-only file system, network unreachable), it may \
             come from the sandbox: do not work around it — tell the user what needs to run \
             outside it.]",
            self.mode.name(),
            if writes.is_empty() {
                "nothing".to_string()
            } else {
                writes.join(", ")
            }
        )
    }
}
