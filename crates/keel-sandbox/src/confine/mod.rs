//! The code that runs between fork and exec: the only `unsafe` of keel (audited here, with
//! its submodules `init`, `joined`, `mounting` and `share`).
//!
//! `install` hands one closure to `Command::pre_exec`. It runs in the child of a fork of keel,
//! a copy of a multi-threaded process, where only async-signal-safe work is sound: so it makes
//! raw system calls on values that `plan` built before the spawn (`Prepared`: C strings,
//! the Landlock ruleset fd, the BPF program, the maps' bytes), and nothing else — no
//! allocation, no lock, no formatting, no panic path.
//!
//! Invariants:
//! - Order: parent-death signal → namespaces (user, mount, IPC, network, PID) → uid/gid maps
//!   → loopback up → mounts → [fork: the outer process waits; PID 1 mounts `/proc`, forks the
//!   command and reaps until it ends] → no-new-privs → capabilities dropped → Landlock (the
//!   rules for what the mounts made, then enforcement) →
//!   seccomp → `chdir` into the workspace again (so the working directory is the new mount,
//!   not the one under it) → exec. seccomp comes last: it forbids `mount`.
//! - A session's holder (`Prepared::hold`) runs the same steps up to PID 1's `/proc`, then
//!   PID 1 sends its namespaces to keel and stays, reaping, as long as keel keeps it. A command
//!   that joins them (`Prepared::join`) enters the user namespace first, then the mount, IPC,
//!   network and PID ones, forks into the PID namespace (the outer process waits and ends
//!   like the command) and goes on from no-new-privs: nothing is mounted again.
//! - Every failure is written to the report pipe as (step, index, errno) and returned as the
//!   errno, so `Command::spawn` fails and the caller can name the step. Nothing falls back
//!   here: a step that `plan` asked for either happens or the command does not run.
//! - The outer process and PID 1 never return: they close every descriptor they do not need
//!   (std's exec-status pipe too, so `spawn` returns once the command has exec'd), then wait
//!   and `_exit` with the command's status (a signal is passed on as that signal).
//! - Every process of the sandbox dies with keel: the outer process with keel's spawning
//!   thread (which lives as long as keel, see `spawner_thread`), PID 1 with the outer process, and
//!   everything in the PID namespace with PID 1.
#![allow(unsafe_code)]

use libc::{c_char, c_int, c_long, c_uint, c_ulong, c_void, pid_t};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

mod init;
mod joined;
mod mounting;
mod share;

pub(crate) use share::received_namespaces;

/// Most trees `CloneTree` may hold open at once.
pub(crate) const MAX_TREES: usize = 16;

/// One mount step, run in order in the new mount namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MountOp {
    /// Nothing done here reaches the parent namespace (`/` made private, recursively).
    MakePrivate,
    /// A detached copy of `source` kept in slot `slot` (before `/tmp` is covered).
    CloneTree { source: CString, slot: usize },
    /// `source` bound on `target` (recursive).
    Bind { source: CString, target: CString },
    /// The tree in `slot` attached at `target`, after creating `make_dirs` (in order; those
    /// marked bound on themselves, so that they cannot be moved away).
    AttachTree {
        slot: usize,
        target: CString,
        make_dirs: Vec<(CString, bool)>,
    },
    /// A new filesystem on `target`: an empty tmpfs (read-only when it hides something), or
    /// a private devpts.
    Filesystem {
        kind: CString,
        target: CString,
        flags: c_ulong,
        options: CString,
    },
    /// `target` hidden: a directory under an empty, closed, read-only tmpfs; anything else
    /// under `/dev/null` sealed without devices, so opening it is refused. A target gone since
    /// the plan was made (a socket directory removed meanwhile) has nothing left to hide.
    Hide { target: CString, directory: bool },
    /// `attributes` (`MOUNT_ATTR_*`) set on the mount at `target` and everything below it:
    /// read-only for protected paths; read-only and no devices for a file hidden under
    /// `/dev/null` (so opening it is refused, not a sink).
    Seal {
        target: CString,
        attributes: u64,
        /// `MOUNT_ATTR_*` cleared (a writable root, made read-only with the rest, opened again).
        cleared: u64,
        /// With everything mounted below it.
        recursive: bool,
    },
}

/// The `ifreq` of `SIOCSIFFLAGS` for `lo` (its own layout: libc's has a pointer in a union).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoopbackUp {
    name: [u8; 16],
    flags: i16,
    padding: [u8; 22],
}

impl LoopbackUp {
    pub(crate) fn new() -> LoopbackUp {
        let mut name = [0u8; 16];
        name[..2].copy_from_slice(b"lo");
        LoopbackUp {
            name,
            // IFF_UP | IFF_LOOPBACK | IFF_RUNNING, as `ip link set lo up` leaves it.
            flags: (libc::IFF_UP | libc::IFF_LOOPBACK | libc::IFF_RUNNING) as i16,
            padding: [0; 22],
        }
    }
}

/// A Landlock rule granting `access` beneath `path`, added in the child.
#[derive(Debug)]
pub(crate) struct LateRule {
    pub path: CString,
    pub access: u64,
}

/// `struct landlock_path_beneath_attr` (packed, as the kernel has it).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: c_int = 1;

/// Everything the child needs, built before the fork.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// `CLONE_NEW*` flags; 0 when no namespace is made.
    pub unshare_flags: c_int,
    /// Bytes for `/proc/self/uid_map` and `gid_map` ("inside outside 1\n").
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
    pub loopback: Option<LoopbackUp>,
    pub mounts: Vec<MountOp>,
    /// A PID namespace: fork PID 1, which mounts `/proc` and forks the command.
    pub pid_namespace: bool,
    /// keel's pid: the outer process checks it is still its parent after the death signal.
    pub keel_pid: pid_t,
    /// keel's argument and environment strings (start, end), as `/proc/self/stat` gives them:
    /// PID 1 is a copy of keel that the command can see, so it clears its copies of them.
    pub keel_strings: [(usize, usize); 2],
    /// The Landlock ruleset to enforce (none: Landlock is not used).
    pub ruleset: Option<OwnedFd>,
    /// Rules added in the child, after the mounts: for a fresh tmpfs (the private
    /// `/dev/shm`), whose root only exists there. Landlock does not look at a mount point
    /// that a mount hides, so a rule on what it covers would not reach it.
    pub late_rules: Vec<LateRule>,
    /// The seccomp program (none: no filter).
    pub filter: Option<Vec<libc::sock_filter>>,
    /// Capabilities to drop from the bounding set: 0..=last.
    pub last_capability: c_int,
    /// The workspace, entered again after the mounts.
    pub workspace: CString,
    /// Where failures are reported (the write end; keel holds the read end).
    pub report: OwnedFd,
    /// The session holder's namespaces, joined instead of made: the mounts, the maps, the
    /// loopback and `/proc` are the holder's, made once for every command of the session.
    pub join: Option<Joined>,
    /// The soft limit of open files the command starts with, where keel raised its own
    /// (`set_children_file_limit`); 0: keel's.
    pub file_limit: u64,
    /// This spawn is a session's holder: PID 1 sends its namespaces over this socket and stays.
    pub hold: Option<OwnedFd>,
    /// What a command that joins a holder's namespaces execs (it cannot return into std's).
    pub exec: Option<crate::exec::Exec>,
    /// The session's user and network namespaces, entered instead of made: every command and
    /// holder of the session then shares one network (one loopback), whatever its mode.
    pub anchor: Option<Anchor>,
}

/// A session's user namespace (maps written, nested ones refused) and its network namespace
/// (the loopback up), made by its first holder and kept for the session by these handles.
#[derive(Debug)]
pub(crate) struct Anchor {
    pub user: OwnedFd,
    pub net: OwnedFd,
}

impl Anchor {
    /// Another handle on the same namespaces.
    pub(crate) fn try_clone(&self) -> std::io::Result<Anchor> {
        Ok(Anchor {
            user: self.user.try_clone()?,
            net: self.net.try_clone()?,
        })
    }
}

/// A holder's namespaces: its user namespace (maps written, nested ones refused), its mount
/// namespace (every mount made, its own `/proc`), its PID namespace, and its IPC and network
/// namespaces where it made them (the loopback up).
#[derive(Debug)]
pub(crate) struct Joined {
    pub user: OwnedFd,
    pub mount: OwnedFd,
    pub ipc: Option<OwnedFd>,
    pub net: Option<OwnedFd>,
    pub pid: OwnedFd,
}

impl Joined {
    /// Another handle on the same namespaces.
    pub(crate) fn try_clone(&self) -> std::io::Result<Joined> {
        let optional = |fd: &Option<OwnedFd>| fd.as_ref().map(OwnedFd::try_clone).transpose();
        Ok(Joined {
            user: self.user.try_clone()?,
            mount: self.mount.try_clone()?,
            ipc: optional(&self.ipc)?,
            net: optional(&self.net)?,
            pid: self.pid.try_clone()?,
        })
    }
}

/// The steps named in failure reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Step {
    ParentDeath = 1,
    Unshare,
    Join,
    SetGroups,
    UidMap,
    GidMap,
    NoNestedUsers,
    Loopback,
    MakePrivate,
    CloneTree,
    Bind,
    MakeDir,
    AttachTree,
    Filesystem,
    Seal,
    Fork,
    ProcMount,
    NoNewPrivs,
    DropCapabilities,
    Landlock,
    Seccomp,
    Chdir,
    CloseDescriptors,
    Exec,
}

impl Step {
    pub(crate) const ALL: [Step; 24] = [
        Step::ParentDeath,
        Step::Unshare,
        Step::Join,
        Step::SetGroups,
        Step::UidMap,
        Step::GidMap,
        Step::NoNestedUsers,
        Step::Loopback,
        Step::MakePrivate,
        Step::CloneTree,
        Step::Bind,
        Step::MakeDir,
        Step::AttachTree,
        Step::Filesystem,
        Step::Seal,
        Step::Fork,
        Step::ProcMount,
        Step::NoNewPrivs,
        Step::DropCapabilities,
        Step::Landlock,
        Step::Seccomp,
        Step::Chdir,
        Step::CloseDescriptors,
        Step::Exec,
    ];
}

/// A failure as reported through the pipe: 8 bytes.
pub(crate) const REPORT_LEN: usize = 8;

/// Install the confinement on `command`.
pub(crate) fn install(command: &mut std::process::Command, prepared: Prepared) {
    // SAFETY: `confine` runs in the forked child before exec. It only makes system calls on
    // memory owned by `prepared` (allocated before the fork and never freed or resized in the
    // child), on stack values, and on file descriptors it opened; it allocates nothing, takes
    // no lock and cannot panic (no indexing out of bounds: slots are checked against
    // `MAX_TREES` when planned and again here).
    unsafe {
        command.pre_exec(move || confine(&prepared));
    }
}

fn errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Report `step` (with `index`) and the current errno; the error to return.
fn fail(prepared: &Prepared, step: Step, index: usize) -> std::io::Error {
    let code = errno();
    let index = u16::try_from(index).unwrap_or(u16::MAX).to_le_bytes();
    let code_bytes = code.to_le_bytes();
    let record: [u8; REPORT_LEN] = [
        step as u8,
        index[0],
        index[1],
        0,
        code_bytes[0],
        code_bytes[1],
        code_bytes[2],
        code_bytes[3],
    ];
    // SAFETY: a write of a stack buffer to a descriptor we own.
    unsafe {
        libc::write(
            prepared.report.as_raw_fd(),
            record.as_ptr().cast::<c_void>(),
            REPORT_LEN,
        );
    }
    std::io::Error::from_raw_os_error(code)
}

fn check(result: c_long, prepared: &Prepared, step: Step, index: usize) -> std::io::Result<()> {
    if result < 0 {
        return Err(fail(prepared, step, index));
    }
    Ok(())
}

/// Write all of `bytes` to the file at `path` (a `/proc/self` map).
fn write_file(path: &[u8], bytes: &[u8]) -> c_long {
    // SAFETY: `path` is a NUL-terminated literal; `bytes` is owned by the caller.
    unsafe {
        let fd = libc::open(
            path.as_ptr().cast::<c_char>(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return -1;
        }
        let written = libc::write(fd, bytes.as_ptr().cast::<c_void>(), bytes.len());
        let failure = errno();
        libc::close(fd);
        if written == bytes.len() as isize {
            0
        } else {
            // A short write leaves errno as it was: say what it was.
            *libc::__errno_location() = if written < 0 { failure } else { libc::EIO };
            -1
        }
    }
}

fn confine(prepared: &Prepared) -> std::io::Result<()> {
    // SAFETY: plain system calls with integer arguments.
    unsafe {
        let set = libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        check(set as c_long, prepared, Step::ParentDeath, 0)?;
        if libc::getppid() != prepared.keel_pid {
            // keel is already gone: nothing may run.
            libc::_exit(1);
        }
    }
    restore_file_limit(prepared.file_limit);
    if let Some(joined) = &prepared.join {
        return joined::run(prepared, joined);
    }
    if prepared.unshare_flags != 0 {
        enter_namespaces(prepared)?;
    }
    let mut trees: [c_int; MAX_TREES] = [-1; MAX_TREES];
    for (index, op) in prepared.mounts.iter().enumerate() {
        mounting::mount(prepared, op, index, &mut trees)?;
    }
    if prepared.pid_namespace {
        init::split_into_init_and_command(prepared)?;
    }
    restrict(prepared)
}

fn enter_namespaces(prepared: &Prepared) -> std::io::Result<()> {
    let mut flags = prepared.unshare_flags;
    // The session's user and network namespaces, entered first (the user namespace's
    // capabilities are what lets the network one be entered and the others be made in it):
    // their maps, the refusal of nested user namespaces and the loopback are already there.
    if let Some(anchor) = &prepared.anchor {
        // SAFETY: plain system calls on descriptors `prepared` owns.
        unsafe {
            let entered = libc::setns(anchor.user.as_raw_fd(), libc::CLONE_NEWUSER);
            check(entered as c_long, prepared, Step::Join, 8)?;
            let entered = libc::setns(anchor.net.as_raw_fd(), libc::CLONE_NEWNET);
            check(entered as c_long, prepared, Step::Join, 9)?;
        }
        flags &= !(libc::CLONE_NEWUSER | libc::CLONE_NEWNET);
    }
    // SAFETY: plain system calls; the maps' bytes are owned by `prepared`.
    unsafe {
        check(libc::unshare(flags) as c_long, prepared, Step::Unshare, 0)?;
    }
    if flags & libc::CLONE_NEWUSER != 0 {
        check(
            write_file(b"/proc/self/setgroups\0", b"deny"),
            prepared,
            Step::SetGroups,
            0,
        )?;
        check(
            write_file(b"/proc/self/uid_map\0", &prepared.uid_map),
            prepared,
            Step::UidMap,
            0,
        )?;
        check(
            write_file(b"/proc/self/gid_map\0", &prepared.gid_map),
            prepared,
            Step::GidMap,
            0,
        )?;
        // No user namespace inside this one: a nested one would hand the command every
        // capability again (in it), and the kernel's attack surface with them.
        check(
            write_file(b"/proc/sys/user/max_user_namespaces\0", b"0"),
            prepared,
            Step::NoNestedUsers,
            0,
        )?;
    }
    if let Some(request) = prepared.loopback.filter(|_| prepared.anchor.is_none()) {
        let mut request = request;
        // SAFETY: a socket we close again, and an ioctl on a stack copy of the request.
        unsafe {
            let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            check(socket as c_long, prepared, Step::Loopback, 0)?;
            let result = libc::ioctl(
                socket,
                libc::SIOCSIFFLAGS as c_ulong,
                (&raw mut request).cast::<c_void>(),
            );
            libc::close(socket);
            check(result as c_long, prepared, Step::Loopback, 1)?;
        }
    }
    Ok(())
}

/// The command's own restrictions, inherited by everything it starts.
fn restrict(prepared: &Prepared) -> std::io::Result<()> {
    // SAFETY: plain system calls; the BPF program and strings are owned by `prepared`.
    unsafe {
        if !prepared.pid_namespace {
            // No init to start a session: let go of the controlling terminal instead.
            let tty = libc::open(
                c"/dev/tty".as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            if tty >= 0 {
                libc::ioctl(tty, libc::TIOCNOTTY);
                libc::close(tty);
            }
        }
        // Descriptors keel was handed without close-on-exec do not reach the command.
        check(
            libc::syscall(
                libc::SYS_close_range,
                3,
                c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ),
            prepared,
            Step::CloseDescriptors,
            0,
        )?;
        check(
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as c_long,
            prepared,
            Step::NoNewPrivs,
            0,
        )?;
        drop_capabilities(prepared)?;
        if let Some(ruleset) = &prepared.ruleset {
            for (index, rule) in prepared.late_rules.iter().enumerate() {
                let fd = libc::open(rule.path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                check(fd as c_long, prepared, Step::Landlock, index + 1)?;
                let attr = PathBeneathAttr {
                    allowed_access: rule.access,
                    parent_fd: fd,
                };
                let added = libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset.as_raw_fd(),
                    RULE_PATH_BENEATH,
                    &raw const attr,
                    0,
                );
                libc::close(fd);
                check(added, prepared, Step::Landlock, index + 1)?;
            }
            check(
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0),
                prepared,
                Step::Landlock,
                0,
            )?;
        }
        if let Some(filter) = &prepared.filter {
            let program = libc::sock_fprog {
                len: u16::try_from(filter.len()).unwrap_or(u16::MAX),
                filter: filter.as_ptr().cast_mut(),
            };
            check(
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &raw const program,
                ),
                prepared,
                Step::Seccomp,
                0,
            )?;
        }
        check(
            libc::chdir(prepared.workspace.as_ptr()) as c_long,
            prepared,
            Step::Chdir,
            0,
        )?;
    }
    Ok(())
}

/// No capability survives exec: root (or the owner of a user namespace) runs the command
/// without privileges. Where the process holds none to drop, nothing needs doing.
fn drop_capabilities(prepared: &Prepared) -> std::io::Result<()> {
    // SAFETY: plain prctl calls with integer arguments.
    unsafe {
        for capability in 0..=prepared.last_capability {
            if libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) < 0 {
                if errno() == libc::EPERM && capability == 0 {
                    // Nothing to drop: an unprivileged process outside any user namespace.
                    return Ok(());
                }
                if errno() != libc::EINVAL {
                    return Err(fail(prepared, Step::DropCapabilities, capability as usize));
                }
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let bits = libc::SECBIT_NOROOT | libc::SECBIT_NOROOT_LOCKED;
        check(
            libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) as c_long,
            prepared,
            Step::DropCapabilities,
            usize::MAX,
        )?;
    }
    Ok(())
}

/// The Landlock ABI of this kernel (0: none).
pub(crate) fn landlock_abi() -> i32 {
    // SAFETY: the documented version query: no pointer is read.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    i32::try_from(version.max(0)).unwrap_or(0)
}

/// Whether this kernel has seccomp filters.
pub(crate) fn seccomp_available() -> bool {
    // SAFETY: a query without arguments.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// A C string of `path` (which holds no NUL: it came from the file system).
pub(crate) fn c_path(path: &std::path::Path) -> Option<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).ok()
}

/// This process's real user and group ids.
pub(crate) fn ids() -> (u32, u32) {
    // SAFETY: queries that cannot fail.
    unsafe { (libc::getuid(), libc::getgid()) }
}

/// This process's pid.
pub(crate) fn own_pid() -> pid_t {
    // SAFETY: a query that cannot fail.
    unsafe { libc::getpid() }
}

/// The soft limit of open files keel's children start with where keel raised its own (`keel
/// serve` does, for connections); 0: as keel's.
static CHILDREN_FILE_LIMIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Give every command and server keel starts from now on a soft limit of open files of
/// `soft` (the limit keel was started with), whatever keel raised its own to: a tool built for
/// the usual limit (`select`, a loop closing every descriptor) keeps working.
pub fn set_children_file_limit(soft: u64) {
    CHILDREN_FILE_LIMIT.store(soft, std::sync::atomic::Ordering::Relaxed);
}

/// The soft limit `set_children_file_limit` set (0: none).
pub(crate) fn children_file_limit() -> u64 {
    CHILDREN_FILE_LIMIT.load(std::sync::atomic::Ordering::Relaxed)
}

/// Lower the soft limit of open files to `soft` (0: leave it), in a child before exec.
fn restore_file_limit(soft: u64) {
    if soft == 0 {
        return;
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: two system calls on a stack value; lowering a soft limit cannot fail but for a
    // bad value, and a failure leaves the limit as it was.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0 && soft < limit.rlim_cur {
            limit.rlim_cur = soft;
            libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit);
        }
    }
}

/// For a command keel starts unconfined: start it with the soft limit of open files keel was
/// started with (`set_children_file_limit`), where keel raised its own.
pub fn keep_file_limit(command: &mut std::process::Command) {
    let soft = children_file_limit();
    if soft == 0 {
        return;
    }
    // SAFETY: the hook makes two system calls on a stack value (async-signal-safe), and
    // allocates nothing.
    unsafe {
        command.pre_exec(move || {
            restore_file_limit(soft);
            Ok(())
        });
    }
}
