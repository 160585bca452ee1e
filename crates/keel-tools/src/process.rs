//! Which process group a command runs in, recorded so that a keel that died (SIGKILL, a crash)
//! can stop what it left running on restart — and never anything else.
//!
//! Invariants:
//! - An identity is the process group id, the group leader's start time (clock ticks after
//!   boot, `/proc/PID/stat` field 22) and the boot id: a pid reused later, or after a reboot,
//!   has another start time or boot id, so `kill_group_if_same` leaves it alone.
//! - Nothing here kills without re-reading `/proc` first; a process that is gone is not an
//!   error.

use std::sync::Arc;

/// A process group as it was when its command started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub pgid: i32,
    pub start_ticks: u64,
    pub boot_id: String,
}

/// Told when a tool's command has started (the agent records it with the call's receipt).
pub trait ProcessLog: Send + Sync + std::fmt::Debug {
    fn started(&self, identity: &ProcessIdentity);
}

/// A `ProcessLog` in a `ToolContext`.
pub type SharedProcessLog = Arc<dyn ProcessLog>;

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|id| id.trim().to_string())
}

/// The start time of `pid` in clock ticks after boot.
fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name; field 22 (starttime) is the 20th.
    after_name.split_whitespace().nth(19)?.parse().ok()
}

impl ProcessIdentity {
    /// The identity of the group `pid` leads, now.
    pub fn of(pid: i32) -> Option<ProcessIdentity> {
        Some(ProcessIdentity {
            pgid: pid,
            start_ticks: start_ticks(pid)?,
            boot_id: boot_id()?,
        })
    }

    /// Whether the group's leader is still the very process that was recorded.
    pub fn is_still_running(&self) -> bool {
        self.pgid > 1
            && boot_id().as_deref() == Some(self.boot_id.as_str())
            && start_ticks(self.pgid) == Some(self.start_ticks)
    }

    /// Kill the whole group if it is provably the recorded one; whether it was killed.
    pub fn kill_group_if_same(&self) -> bool {
        if !self.is_still_running() {
            return false;
        }
        nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.pgid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_recorded_process_is_killed() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let identity = ProcessIdentity::of(pid).unwrap();
        assert!(identity.is_still_running());
        // The same pid with another start time (a reused pid) is not the recorded process.
        let reused = ProcessIdentity {
            start_ticks: identity.start_ticks + 1,
            ..identity.clone()
        };
        assert!(!reused.kill_group_if_same());
        let rebooted = ProcessIdentity {
            boot_id: "another-boot".into(),
            ..identity.clone()
        };
        assert!(!rebooted.kill_group_if_same());
        assert!(child.try_wait().unwrap().is_none(), "still running");
        assert!(identity.kill_group_if_same());
        let status = child.wait().unwrap();
        assert!(!status.success());
        assert!(!identity.is_still_running());
    }
}
