//! A session's namespace holders: one long-lived process per distinct mount plan, whose
//! namespaces (mount, IPC, PID with its own `/proc`, in the session's user and network
//! namespaces) every command of the session with that plan joins. Making them is most of a confined spawn's cost (the mounts,
//! a network namespace, an init and its `/proc`); joining them is a few `setns` calls.
//!
//! Invariants:
//! - One user and one network namespace per session (`Anchor`): the first holder makes them
//!   (the maps, nested user namespaces refused, the loopback up) and keel keeps handles on
//!   them until the session ends; every later holder, of any plan, and every command that makes
//!   its own namespaces (a PID namespace among them) for want of a holder enters them before
//!   making the rest. A command without a PID namespace never does: its survivors would linger
//!   in the network the others use. So all of a
//!   session's commands share one loopback, whatever their mode, and a holder that retires
//!   splits nothing. A sandbox that shares no namespaces (a one-off, an MCP server's) never
//!   enters them.
//! - A command joins a holder only when everything its own plan would mount is what the
//!   holder mounted (`Key`): the same steps on the same paths, and each path still the same
//!   file (device and inode) — a directory replaced since (a `.git` made again, a hidden
//!   directory removed) gets a new holder, never a mount pinned to what is gone — and only
//!   while the holder's mount table is as it made it: a path removed or renamed over on the
//!   host takes its mounts in other namespaces with it (git rewrites `.git/config` that way),
//!   so a holder whose table changed at all (`/proc/PID/mountinfo` polled) is retired, even
//!   where the inode at the path is the same again. A holder that died (a signal meant for
//!   keel's terminal cannot reach it: it has a process group of its own) is retired too.
//! - A holder is spawned from the spawner thread: it dies with keel, and everything in its
//!   PID namespace dies with its PID 1. It ends with the session (the last clone of the
//!   sandbox), killed and reaped.
//! - What a command leaves behind dies when it ends, as if the namespaces were its own: each
//!   command that joins a holder holds a `Running` until it has ended; when the last one goes,
//!   the holder's PID 1 kills every other process in the namespace and says so before `Running`
//!   is gone. Joining and that sweep both happen under the holders' lock, so no command is
//!   swept as it starts.
//! - A sweep is answered once nothing else is left in the namespace (PID 1 waits for what it
//!   killed to be gone); a sweep that is not (a process stuck in the kernel) ends the holder.
//!   The sweep is skipped only after a command that ended on its own (`Running::ended`) left
//!   PID 1 without children: every process it left behind is then PID 1's child or below one
//!   (orphans are given to PID 1 before their parent's end is seen). A command killed or
//!   still running is always swept.
//! - At most `MOST_HOLDERS` alive per session: past them the longest unused idle one ends; if
//!   none is idle, a command makes its own namespaces, as a spawn without a holder does. A
//!   retired holder ends when its last command has; an ended holder's slot (and with it its
//!   namespaces) is let go, and the slot is used again.
//! - A holder whose namespaces do not arrive, or whose paths changed while it started, is
//!   killed; the command does not run, or makes its own namespaces.
//! - The holder's two processes are copies of keel (not dumpable, keel's arguments and
//!   environment cleared in PID 1): they keep the pages keel had when they forked, until the
//!   session ends.

use crate::SandboxError;
use crate::confine::{self, Anchor, Joined, MountOp};
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

/// How long keel waits for a sweep's answer (PID 1 answers within 2 s).
const SWEEP_WAIT: Duration = Duration::from_secs(3);

/// What a holder made, as a command's plan would make it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Key {
    unshare_flags: libc::c_int,
    mounts: Vec<MountOp>,
    /// Device and inode of every path the mounts name, as found when the key was made.
    identities: Vec<Option<(u64, u64)>>,
}

/// What a holder for `plan`'s namespaces must have made (`None`: the plan makes no PID
/// namespace, so no holder serves it).
fn key_of(plan: &Plan) -> Option<Key> {
    let prepared = &plan.prepared;
    prepared
        .pid_namespace
        .then(|| Key::new(prepared.unshare_flags, &prepared.mounts))
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

/// A session's holders, in slots that `Running` points at (a slot in use is never emptied).
#[derive(Debug, Default)]
pub(crate) struct Holders {
    slots: Vec<Option<Holder>>,
    /// The session's user and network namespaces, made by its first holder: every later
    /// holder (of any plan) and every command that makes its own namespaces enters them, so
    /// all share one loopback; kept until the session ends.
    anchor: Option<Anchor>,
    /// Holders started (for tests and diagnostics).
    started: usize,
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
    /// The holder's mount table, opened by PID 1 once its mounts were made, polled for any
    /// change since.
    mount_table: OwnedFd,
    /// Where the kernel lists PID 1's children.
    init_children: Option<std::path::PathBuf>,
    /// Commands joined and not yet ended (their `Running` not dropped).
    running: usize,
    /// Whether every command since the last sweep ended on its own.
    all_ended_on_their_own: bool,
    /// When it was last joined (a count of joins in the session).
    last_used: u64,
    /// No longer joined (its mounts changed, it died, or it was evicted); ended when its last
    /// command has.
    retired: bool,
}

impl Drop for Holder {
    /// Killed and reaped: everything in its namespaces dies with its PID 1.
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A command joined to a holder, until it has ended: keep it until then.
#[derive(Debug)]
pub(crate) struct Running {
    holders: Arc<Mutex<Holders>>,
    index: usize,
    ended_on_its_own: bool,
}

impl Running {
    /// The command ended on its own (it was waited for, and nobody killed it).
    pub(crate) fn ended(mut self) {
        self.ended_on_its_own = true;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut holders = self
            .holders
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(slot) = holders.slots.get_mut(self.index) else {
            return;
        };
        let Some(holder) = slot.as_mut() else {
            return;
        };
        holder.running = holder.running.saturating_sub(1);
        holder.all_ended_on_their_own &= self.ended_on_its_own;
        if holder.running > 0 {
            return;
        }
        let swept = !holder.retired && holder.sweep();
        holder.all_ended_on_their_own = true;
        if !swept {
            *slot = None;
        }
    }
}

/// Have `plan` join the namespaces of the holder made for it, starting one (confined by
/// `policy` under `layers`) when there is none; what the command holds until it has ended. A
/// plan that makes no PID namespace, or a session with `MOST_HOLDERS` busy, is left to make its
/// own.
pub(crate) fn join(
    holders: &Arc<Mutex<Holders>>,
    plan: &mut Plan,
    policy: &SandboxPolicy,
    layers: &Layers,
) -> Result<Option<Running>, SandboxError> {
    let Some(key) = key_of(plan) else {
        return Ok(None);
    };
    let mut locked = holders
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let locked = &mut *locked;
    locked.joins += 1;
    for slot in &mut locked.slots {
        if let Some(holder) = slot
            && !holder.retired
            && holder.key == key
            && !holder.usable()
        {
            retire(slot);
        }
    }
    let found = locked.slots.iter().position(|slot| {
        slot.as_ref()
            .is_some_and(|holder| !holder.retired && holder.key == key)
    });
    let index = match found {
        Some(index) => index,
        None => {
            let Some(index) = locked.free_slot() else {
                return Ok(None);
            };
            let anchor = locked
                .anchor
                .as_ref()
                .map(Anchor::try_clone)
                .transpose()
                .map_err(SandboxError::Io)?;
            let mut holder = Holder::start(policy, layers, anchor)?;
            locked.started += 1;
            if locked.anchor.is_none()
                && let Some(net) = &holder.joined.net
            {
                locked.anchor = Some(Anchor {
                    user: holder.joined.user.try_clone().map_err(SandboxError::Io)?,
                    net: net.try_clone().map_err(SandboxError::Io)?,
                });
            }
            // What it mounted is what this command's plan would: same steps, same files, and
            // nothing changed since in its mount table.
            if holder.key != key || !holder.usable() {
                return Ok(None);
            }
            locked.slots[index] = Some(holder);
            index
        }
    };
    let Some(holder) = locked.slots[index].as_mut() else {
        return Ok(None);
    };
    let joined = holder.joined.try_clone().map_err(SandboxError::Io)?;
    holder.running += 1;
    holder.last_used = locked.joins;
    plan.join(joined);
    Ok(Some(Running {
        holders: holders.clone(),
        index,
        ended_on_its_own: false,
    }))
}

/// The session's network anchor, if a holder made it (another handle on it).
pub(crate) fn anchor(holders: &Arc<Mutex<Holders>>) -> Option<Anchor> {
    holders
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .anchor
        .as_ref()
        .and_then(|anchor| anchor.try_clone().ok())
}

/// Joined no more; ended (its slot emptied) now if no command of it runs.
fn retire(slot: &mut Option<Holder>) {
    if let Some(holder) = slot {
        holder.retired = true;
        if holder.running == 0 {
            *slot = None;
        }
    }
}

impl Holders {
    /// How many holders the session has started.
    pub(crate) fn count(&self) -> usize {
        self.started
    }

    /// The process ids of the holders alive.
    pub(crate) fn alive_pids(&self) -> Vec<u32> {
        self.slots
            .iter()
            .flatten()
            .map(|holder| holder.process.id())
            .collect()
    }

    /// A slot for another holder: an empty one, or a new one while fewer than `MOST_HOLDERS`
    /// are alive, or the longest unused idle holder's (ended); none when all are busy.
    fn free_slot(&mut self) -> Option<usize> {
        if let Some(empty) = self.slots.iter().position(Option::is_none) {
            return Some(empty);
        }
        if self.slots.len() < MOST_HOLDERS {
            self.slots.push(None);
            return Some(self.slots.len() - 1);
        }
        let idle = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(index, slot)| slot.as_ref().map(|holder| (index, holder)))
            .filter(|(_, holder)| holder.running == 0)
            .min_by_key(|(_, holder)| holder.last_used)
            .map(|(index, _)| index)?;
        self.slots[idle] = None;
        Some(idle)
    }
}

impl Holder {
    /// A holder for `policy` under `layers`, keyed by what it mounted.
    fn start(
        policy: &SandboxPolicy,
        layers: &Layers,
        anchor: Option<Anchor>,
    ) -> Result<Holder, SandboxError> {
        let (receiver, sender) = UnixStream::pair().map_err(SandboxError::Io)?;
        let plan = plan::prepare(policy, layers, Some(OwnedFd::from(sender)), anchor)?;
        let key = key_of(&plan).ok_or_else(|| SandboxError::SetUp {
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
        let Some((joined, mount_table)) = confine::received_namespaces(&receiver, flags) else {
            let _ = process.kill();
            let _ = process.wait();
            return Err(SandboxError::SetUp {
                step: "starting the session's namespaces".into(),
                source: std::io::Error::other("their holder sent none"),
            });
        };
        let outer = process.id();
        let init_children = std::fs::read_to_string(format!("/proc/{outer}/task/{outer}/children"))
            .ok()
            .and_then(|children| children.split_whitespace().next().map(str::to_string))
            .map(|init| format!("/proc/{init}/task/{init}/children").into());
        // The files the mounts name, found again now that they are made: one replaced while
        // the holder started is not what it mounted.
        let key = Key {
            identities: Key::new(key.unshare_flags, &key.mounts).identities,
            ..key
        };
        Ok(Holder {
            key,
            joined,
            process,
            socket: receiver,
            mount_table,
            init_children,
            running: 0,
            all_ended_on_their_own: true,
            last_used: 0,
            retired: false,
        })
    }

    /// Alive, and its mount table as it made it.
    fn usable(&mut self) -> bool {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        if !matches!(self.process.try_wait(), Ok(None)) {
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

    /// Have PID 1 kill every other process in the namespace and wait until none is left;
    /// whether it did. Skipped when every command since the last sweep ended on its own and
    /// left PID 1 without children. An answer left from an earlier sweep is read first.
    fn sweep(&mut self) -> bool {
        let left_nothing = self.all_ended_on_their_own
            && self.init_children.as_ref().is_some_and(|children| {
                std::fs::read_to_string(children).is_ok_and(|listed| listed.trim().is_empty())
            });
        if left_nothing {
            return true;
        }
        let mut answer = [0u8; 1];
        if self.socket.set_nonblocking(true).is_ok() {
            while matches!(self.socket.read(&mut answer), Ok(1)) {}
        }
        let _ = self.socket.set_nonblocking(false);
        let _ = self.socket.set_read_timeout(Some(SWEEP_WAIT));
        answer[0] = 0;
        self.socket.write_all(&[1]).is_ok()
            && self.socket.read_exact(&mut answer).is_ok()
            && answer[0] == 1
    }
}
