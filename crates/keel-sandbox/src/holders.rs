//! A session's namespace holders: one long-lived process per distinct mount plan, whose
//! namespaces (user, mount, IPC, network, PID with its own `/proc`) every command of the
//! session with that plan joins. Making them is most of a confined spawn's cost (the mounts,
//! a network namespace, an init and its `/proc`); joining them is a few `setns` calls.
//!
//! Invariants:
//! - A command joins a holder only when everything its own plan would mount is what the
//!   holder mounted (`Key`): the same steps on the same paths, and each path still the same
//!   file (device and inode) — a directory replaced since (a `.git` made again, a hidden
//!   directory removed) gets a new holder, never a mount pinned to what is gone.
//! - A holder is spawned from the lasting thread: it dies with keel, and everything in its
//!   PID namespace dies with its PID 1. It ends with the session (the last clone of the
//!   sandbox), killed and reaped.
//! - What a command leaves behind dies when it ends, as if the namespaces were its own: each
//!   command that joins a holder holds a `Running` until it has ended; when the last one goes,
//!   the holder's PID 1 kills every other process in the namespace and says so before `Running`
//!   is gone. Joining and that sweep both happen under the holders' lock, so no command is
//!   swept as it starts.
//! - At most `MOST_HOLDERS` per session: past them a command makes its own namespaces, as a
//!   spawn without a holder does.
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
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Holders a session keeps at most (a plan changes when a hidden or protected path appears
/// or goes, or the mode changes: rarely).
const MOST_HOLDERS: usize = 8;

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
}

#[derive(Debug)]
struct Holder {
    key: Key,
    joined: Joined,
    process: std::process::Child,
    /// keel's end of the socket its PID 1 sent the namespaces over, and reads sweeps from.
    socket: UnixStream,
    /// Commands joined and not yet ended (their `Running` not dropped).
    running: usize,
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
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
                holder.sweep();
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
    let index = match locked.made.iter().position(|holder| holder.key == key) {
        Some(index) => index,
        None if locked.made.len() >= MOST_HOLDERS => return Ok(None),
        None => {
            locked.made.push(Holder::start(key, policy, layers)?);
            locked.made.len() - 1
        }
    };
    let holder = &mut locked.made[index];
    let joined = holder.joined.try_clone().map_err(SandboxError::Io)?;
    holder.running += 1;
    plan.join(joined);
    Ok(Some(Running {
        holders: holders.clone(),
        index,
    }))
}

impl Holders {
    /// How many holders the session has (for tests and the bench).
    pub(crate) fn count(&self) -> usize {
        self.made.len()
    }
}

impl Holder {
    fn start(key: Key, policy: &SandboxPolicy, layers: &Layers) -> Result<Holder, SandboxError> {
        let (receiver, sender) = UnixStream::pair().map_err(SandboxError::Io)?;
        let Plan {
            prepared, failures, ..
        } = plan::prepare(policy, layers, Some(OwnedFd::from(sender)))?;
        let flags = prepared.unshare_flags;
        // Never run: the holder's PID 1 stays in `pre_exec` until it is killed.
        let mut command = std::process::Command::new("true");
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env_clear();
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
        Ok(Holder {
            key,
            joined,
            process,
            socket: receiver,
            running: 0,
        })
    }

    /// Have PID 1 kill every other process in the namespace, and wait (a while) until it has.
    fn sweep(&mut self) {
        let mut answer = [0u8; 1];
        let _ = self.socket.set_read_timeout(Some(SWEEP_WAIT));
        if self.socket.write_all(&[1]).is_ok() {
            let _ = self.socket.read_exact(&mut answer);
        }
    }
}
