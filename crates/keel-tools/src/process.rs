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

/// A `ProcessLog` in a `ToolServices`.
pub type SharedProcessLog = Arc<dyn ProcessLog>;

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|id| id.trim().to_string())
}

/// `/proc/PID/stat` field `field` (1-based, 3 or more: after the command name), as text.
fn stat_text(pid: &str, field: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name
        .split_whitespace()
        .nth(field - 3)
        .map(str::to_string)
}

/// `/proc/PID/stat` field `field`, as a number.
fn stat_field(pid: &str, field: usize) -> Option<u64> {
    stat_text(pid, field)?.parse().ok()
}

/// The start time of `pid` in clock ticks after boot (field 22).
fn start_ticks(pid: i32) -> Option<u64> {
    stat_field(&pid.to_string(), 22)
}

/// Whether a process of group `pgid` started at or after `since` is still running (the group
/// outlived its leader: `cmd &` left behind).
fn group_members_since(pgid: i32, since: u64) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        // A zombie (state `Z`) is dead already; it only waits for its parent.
        stat_field(pid, 5) == u64::try_from(pgid).ok()
            && stat_text(pid, 3).is_some_and(|state| state != "Z")
            && stat_field(pid, 22).is_some_and(|started| started >= since)
    })
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

    /// Whether the recorded group is still running: its leader, the very process recorded
    /// (same start time, same boot), or — once the leader is gone — members that started no
    /// earlier than it did. (Linux never hands out a pid that is still some group's id, so with
    /// the leader gone the group id cannot belong to anyone else.)
    pub fn is_still_running(&self) -> bool {
        if self.pgid <= 1 || boot_id().as_deref() != Some(self.boot_id.as_str()) {
            return false;
        }
        match start_ticks(self.pgid) {
            Some(started) => started == self.start_ticks,
            None => group_members_since(self.pgid, self.start_ticks),
        }
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

    #[test]
    fn a_group_whose_leader_exited_is_still_found_and_killed() {
        use std::os::unix::process::CommandExt;
        let marker = format!("sleep 37.{}", std::process::id());
        let leader = std::process::Command::new("sh")
            .args(["-c", &format!("{marker} >/dev/null 2>&1 & echo started")])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = i32::try_from(leader.id()).unwrap();
        let identity = ProcessIdentity::of(pid).unwrap();
        let _ = leader.wait_with_output().unwrap();
        assert!(
            identity.is_still_running(),
            "the background job outlived its leader"
        );
        assert!(identity.kill_group_if_same());
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!identity.is_still_running());
        let left = std::process::Command::new("pgrep")
            .args(["-f", &marker])
            .output()
            .unwrap();
        assert!(left.stdout.is_empty(), "the background job was killed");
    }
}
