//! A session's namespace holders: one long-lived process per distinct mount plan, whose
//! namespaces (user, mount, IPC, network, PID with its own `/proc`) every command of the
//! session with that plan joins. Making them is most of a confined spawn's cost (the mounts,
//! a network namespace, an init and its `/proc`); joining them is a few `setns` calls.
//!
//! Invariants:
//! - A command joins a holder only when everything its own plan would mount is what the
//!   holder mounted (`Key`): the same steps on the same paths, and each path still the same
//!   file (device and inode) — a directory replaced since (a `.git` made again, a hidden
//!   directory removed) gets a new holder, never a mount pinned to what is gone — and only
//!   while the holder's mount table is as it made it: a path removed or renamed over on the
//!   host takes its mounts in other namespaces with it (git rewrites `.git/config` that way),
//!   so a holder whose table changed at all (`/proc/PID/mountinfo` polled) is retired, even
//!   where the inode at the path is the same again. A holder that died (a signal meant for
//!   keel's terminal cannot reach it: it has a process group of its own) is retired too.
//! - A holder is spawned from the lasting thread: it dies with keel, and everything in its
//!   PID namespace dies with its PID 1. It ends with the session (the last clone of the
//!   sandbox), killed and reaped.
//! - What a command leaves behind dies when it ends, as if the namespaces were its own: each
//!   command that joins a holder holds a `Running` until it has ended; when the last one goes,
//!   the holder's PID 1 kills every other process in the namespace and says so before `Running`
//!   is gone. Joining and that sweep both happen under the holders' lock, so no command is
//!   swept as it starts.
//! - At most `MOST_HOLDERS` alive per session: past them the longest unused idle one ends; if
//!   none is idle, or `MOST_MADE` were made, a command makes its own namespaces, as a spawn
//!   without a holder does. A retired holder ends when its last command has.
//! - A holder whose namespaces do not arrive is killed, and the command does not run.

use crate::SandboxError;
use crate::confine::{self, Joined, MountOp};
use crate::layers::Layers;
use crate::plan::{self, Plan};
use crate::policy::SandboxPolicy;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Holders a session keeps alive at most (a plan changes when a hidden or protected path
/// appears or goes, or the mode changes: rarely).
const MOST_HOLDERS: usize = 4;
/// Holders a session makes at most (their records are kept for the commands that hold them).
const MOST_MADE: usize = 64;

/// What a holder made, as a command's plan would make it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Key {
    unshare_flags: libc::c_int,
    mounts: Vec<MountOp>,
    /// Device and inode of every path the mounts name, as found when the key was made.
    identities: Vec<Option<(u64, u64)>>,
}

impl Key {
    pub(crate) fn new(unshare_flags: libc::c_int, mounts: &[MountOp]) -> Key {
        let identity = |path: &std::ffi::CStr| {
            std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(path.to_bytes()))
                .ok()
                .map(|found| (found.dev(), found.ino()))
        };
        let identities = mounts
            .iter()
            .flat_map(|op| match op {
                MountOp::MakePrivate => Vec::new(),
                MountOp::CloneTree { source, .. } => vec![source],
                MountOp::Bind { source, target } => vec![source, target],
                MountOp::AttachTree { target, .. }
                | MountOp::Filesystem { target, .. }
                | MountOp::Hide { target, .. }
                | MountOp::Seal { target, .. } => vec![target],
            })
            .map(|path| identity(path))
            .collect();
        Key {
            unshare_flags,
            mounts: mounts.to_vec(),
            identities,
        }
    }
}

/// A session's holders.
#[derive(Debug, Default)]
pub(crate) struct Holders {
    made: Vec<Holder>,
    /// Joins so far (the clock of `last_used`).
    joins: u64,
}

#[derive(Debug)]
struct Holder {
    key: Key,
    joined: Joined,
    process: std::process::Child,
    /// keel's end of the socket its PID 1 sent the namespaces over, and reads sweeps from.
    socket: UnixStream,
    /// The holder's mount table, polled for any change since it was made.
    mount_table: std::fs::File,
    /// Where the kernel lists its PID 1's children: every process a finished command left
    /// behind is one of them or below one (orphans are given to PID 1 as their parent ends).
    init_children: Option<std::path::PathBuf>,
    /// Commands joined and not yet ended (their `Running` not dropped).
    running: usize,
    /// When it was last joined (a count of joins in the session).
    last_used: u64,
    /// No longer joined (its mounts changed, it died, or it was evicted).
    retired: bool,
    /// Killed and reaped.
    ended: bool,
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.end();
    }
}

/// How long a sweep may take before keel goes on without its answer.
const SWEEP_WAIT: Duration = Duration::from_secs(2);

/// A command joined to a holder, until it has ended: keep it until then.
#[derive(Debug)]
pub(crate) struct Running {
    holders: Arc<Mutex<Holders>>,
    index: usize,
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut holders = self
            .holders
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(holder) = holders.made.get_mut(self.index) {
            holder.running = holder.running.saturating_sub(1);
            if holder.running == 0 {
                if holder.retired {
                    holder.end();
                } else {
                    holder.sweep();
                }
            }
        }
    }
}

/// Have `plan` join the namespaces of the holder made for it, starting one (confined by
/// `policy` under `layers`) when there is none; what the command holds until it has ended. A
/// plan that makes no PID namespace, or a session past `MOST_HOLDERS`, is left to make its own.
pub(crate) fn join(
    holders: &Arc<Mutex<Holders>>,
    plan: &mut Plan,
    policy: &SandboxPolicy,
    layers: &Layers,
) -> Result<Option<Running>, SandboxError> {
    let Some(key) = plan.holder_key() else {
        return Ok(None);
    };
    let mut locked = holders
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let locked = &mut *locked;
    locked.joins += 1;
    for holder in &mut locked.made {
        if !holder.retired && holder.key == key && !holder.usable() {
            holder.retire();
        }
    }
    let found = locked
        .made
        .iter()
        .position(|holder| !holder.retired && holder.key == key);
    let index = match found {
        Some(index) => index,
        None => {
            if !locked.room_for_one_more() {
                return Ok(None);
            }
            let holder = Holder::start(policy, layers)?;
            if holder.key != key {
                // The file system changed between the two plans: this command makes its own.
                locked.made.push(holder);
                return Ok(None);
            }
            locked.made.push(holder);
            locked.made.len() - 1
        }
    };
    let holder = &mut locked.made[index];
    let joined = holder.joined.try_clone().map_err(SandboxError::Io)?;
    holder.running += 1;
    holder.last_used = locked.joins;
    plan.join(joined);
    Ok(Some(Running {
        holders: holders.clone(),
        index,
    }))
}

impl Holders {
    /// How many holders the session has started.
    pub(crate) fn count(&self) -> usize {
        self.made.len()
    }

    /// The process ids of the holders not ended.
    pub(crate) fn alive_pids(&self) -> Vec<u32> {
        self.made
            .iter()
            .filter(|holder| !holder.ended)
            .map(|holder| holder.process.id())
            .collect()
    }

    /// Whether another holder may start: fewer than `MOST_MADE` made, and fewer than
    /// `MOST_HOLDERS` alive once the longest unused idle one is ended if need be.
    fn room_for_one_more(&mut self) -> bool {
        if self.made.len() >= MOST_MADE {
            return false;
        }
        let alive = self.made.iter().filter(|holder| !holder.ended).count();
        if alive < MOST_HOLDERS {
            return true;
        }
        let idle = self
            .made
            .iter_mut()
            .filter(|holder| !holder.ended && holder.running == 0)
            .min_by_key(|holder| holder.last_used);
        match idle {
            Some(holder) => {
                holder.retire();
                true
            }
            None => false,
        }
    }
}

impl Holder {
    /// A holder for `policy` under `layers`, keyed by what it mounted.
    fn start(policy: &SandboxPolicy, layers: &Layers) -> Result<Holder, SandboxError> {
        let (receiver, sender) = UnixStream::pair().map_err(SandboxError::Io)?;
        let plan = plan::prepare(policy, layers, Some(OwnedFd::from(sender)))?;
        let key = plan.holder_key().ok_or_else(|| SandboxError::SetUp {
            step: "starting the session's namespaces".into(),
            source: std::io::Error::other("this kernel makes no PID namespace"),
        })?;
        let Plan {
            prepared, failures, ..
        } = plan;
        let flags = prepared.unshare_flags;
        // Never run: the holder's PID 1 stays in `pre_exec` until it is killed.
        let mut command = std::process::Command::new("true");
        // A process group of its own: Ctrl-C in keel's terminal is keel's, not the holder's.
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env_clear()
            .process_group(0);
        confine::install(&mut command, prepared);
        let spawned = crate::on_lasting_thread(move || command.spawn()).and_then(|spawned| spawned);
        let mut process = spawned.map_err(|error| match failures.reported() {
            Some((step, source)) => SandboxError::SetUp { step, source },
            None => SandboxError::Io(error),
        })?;
        let Some(joined) = confine::received_namespaces(&receiver, flags) else {
            let _ = process.kill();
            let _ = process.wait();
            return Err(SandboxError::SetUp {
                step: "starting the session's namespaces".into(),
                source: std::io::Error::other("their holder sent none"),
            });
        };
        // Its outer process is in the mount namespace it made (and PID 1 shares it).
        let table = format!("/proc/{}/mountinfo", process.id());
        let mount_table = match std::fs::File::open(&table) {
            Ok(file) => file,
            Err(error) => {
                let _ = process.kill();
                let _ = process.wait();
                return Err(SandboxError::SetUp {
                    step: format!("watching the session's mounts ({table})"),
                    source: error,
                });
            }
        };
        let outer = process.id();
        let init_children = std::fs::read_to_string(format!("/proc/{outer}/task/{outer}/children"))
            .ok()
            .and_then(|children| children.split_whitespace().next().map(str::to_string))
            .map(|init| format!("/proc/{init}/task/{init}/children").into());
        Ok(Holder {
            key,
            joined,
            process,
            socket: receiver,
            mount_table,
            init_children,
            running: 0,
            last_used: 0,
            retired: false,
            ended: false,
        })
    }

    /// Alive, and its mount table as it made it.
    fn usable(&mut self) -> bool {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        if self.ended || !matches!(self.process.try_wait(), Ok(None)) {
            return false;
        }
        let mut watched = [PollFd::new(self.mount_table.as_fd(), PollFlags::POLLPRI)];
        match poll(&mut watched, PollTimeout::ZERO) {
            Ok(0) => true,
            Ok(_) => !watched[0].revents().is_some_and(|events| {
                events.intersects(PollFlags::POLLPRI | PollFlags::POLLERR | PollFlags::POLLHUP)
            }),
            Err(_) => false,
        }
    }

    /// Joined no more; ended now when no command of it runs.
    fn retire(&mut self) {
        self.retired = true;
        if self.running == 0 {
            self.end();
        }
    }

    /// Killed and reaped: everything in its namespaces dies with its PID 1.
    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }

    /// Have PID 1 kill every other process in the namespace, and wait (a while) until it has.
    /// An answer left from a sweep that took too long is read first, so it is not taken for
    /// this one's.
    fn sweep(&mut self) {
        let left_nothing = self.init_children.as_ref().is_some_and(|children| {
            std::fs::read_to_string(children).is_ok_and(|listed| listed.trim().is_empty())
        });
        if left_nothing {
            return;
        }
        let mut answer = [0u8; 1];
        if self.socket.set_nonblocking(true).is_ok() {
            while matches!(self.socket.read(&mut answer), Ok(1)) {}
        }
        let _ = self.socket.set_nonblocking(false);
        let _ = self.socket.set_read_timeout(Some(SWEEP_WAIT));
        if self.socket.write_all(&[1]).is_ok() {
            let _ = self.socket.read_exact(&mut answer);
        }
    }
}
