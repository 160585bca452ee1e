//! Turning a policy and the kernel's layers into what the child runs (`confine::Prepared`):
//! the mount steps, the Landlock ruleset, the seccomp program, the environment.
//!
//! Invariants:
//! - Everything the child needs is built here, before the fork: strings, the ruleset's fd,
//!   the program. A path that cannot be expressed (a NUL in it) is an error, never skipped.
//! - Mount order: private propagation → the session's temp dir on `/tmp` (the writable roots
//!   under `/tmp` attached back at their paths, sealed read-only unless writable: Landlock
//!   walks up through a mount point, and the temp dir above it is writable) → `forbid_read` hidden (a directory under an
//!   empty, read-only, mode-000 tmpfs; a file under `/dev/null` sealed read-only without
//!   devices, so opening it is refused) → `/run` and `$XDG_RUNTIME_DIR` hidden, `/dev/shm`
//!   private → each protected path's ancestors made mount points, then the path bound on
//!   itself and sealed read-only.
//! - Landlock grants reading everywhere, everything in the writable roots, the temp dir and
//!   the private `/dev/shm` (a rule added in the child: its tmpfs only exists there), and
//!   reading and writing the harmless devices; nothing else. Without a network namespace
//!   and with the network off it also handles TCP (no port is granted).
//! - Every step has a description, so a failure names what it was doing.

use crate::SandboxError;
use crate::confine::{self, Joined, LateRule, LoopbackUp, Prepared, REPORT_LEN, Step};
use crate::filter::{self, InternetSockets};
use crate::layers::Layers;
use crate::mounts::{DEVICES, Mounts, mounts};
use crate::policy::{Network, SandboxPolicy};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::path::Path;

/// What the child will run, and how to read its failure reports.
pub(crate) struct Plan {
    pub prepared: Prepared,
    /// Environment changes: set (`Some`) or removed (`None`).
    pub env: Vec<(&'static str, Option<String>)>,
    pub failures: Failures,
}

/// The read end of a spawn's failure reports, with what each mount step was doing.
#[derive(Debug)]
pub struct Failures {
    report: UnixDatagram,
    mount_steps: Vec<String>,
}

fn c_path(path: &Path) -> Result<CString, SandboxError> {
    confine::c_path(path).ok_or_else(|| SandboxError::Path {
        path: path.to_path_buf(),
        reason: "it contains a NUL byte".into(),
    })
}

fn landlock_error(error: impl std::fmt::Display) -> SandboxError {
    SandboxError::Landlock(error.to_string())
}

fn ruleset(policy: &SandboxPolicy, layers: &Layers) -> Result<Option<OwnedFd>, SandboxError> {
    if layers.landlock_abi < 1 {
        return Ok(None);
    }
    let abi = ABI::from(layers.landlock_abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(landlock_error)?;
    if policy.network == Network::Off && !layers.net_namespace && layers.landlock_abi >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(landlock_error)?;
    }
    if layers.landlock_abi >= 6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(landlock_error)?;
    }
    let mut created = ruleset.create().map_err(landlock_error)?;
    let rule = |path: &Path, access: BitFlags<AccessFs>| -> Result<_, SandboxError> {
        let fd = PathFd::new(path).map_err(landlock_error)?;
        Ok(PathBeneath::new(fd, access))
    };
    created = created
        .add_rule(rule(Path::new("/"), AccessFs::from_read(abi))?)
        .map_err(landlock_error)?;
    let writable = policy.writable.iter().chain(policy.temp_dir.iter());
    for root in writable {
        // A file (`allow_write = ["/dev/kvm"]`, a lock file) takes only the rights a file has.
        let access = if root.is_dir() {
            AccessFs::from_all(abi)
        } else {
            AccessFs::from_file(abi)
        };
        created = created
            .add_rule(rule(root, access)?)
            .map_err(landlock_error)?;
    }
    let mut device = AccessFs::ReadFile | AccessFs::WriteFile;
    if layers.landlock_abi >= 3 {
        device |= AccessFs::Truncate;
    }
    if layers.landlock_abi >= 5 {
        device |= AccessFs::IoctlDev;
    }
    for path in DEVICES.iter().map(Path::new).filter(|path| path.exists()) {
        created = created
            .add_rule(rule(path, device)?)
            .map_err(landlock_error)?;
    }
    if !layers.user_namespace {
        // No private devpts: the host's ptys (the user's other terminals among them).
        for (path, access) in [
            ("/dev/pts", device | AccessFs::ReadDir),
            ("/dev/ptmx", device),
        ] {
            if Path::new(path).exists() {
                created = created
                    .add_rule(rule(Path::new(path), access)?)
                    .map_err(landlock_error)?;
            }
        }
    }
    if !layers.user_namespace && Path::new("/dev/shm").is_dir() {
        // No private one: the host's, shared (POSIX semaphores and shared memory need it).
        created = created
            .add_rule(rule(Path::new("/dev/shm"), AccessFs::from_all(abi))?)
            .map_err(landlock_error)?;
    }
    Ok(created.into())
}

/// The rules for what only exists in the child: its private `/dev/shm` and devpts.
fn late_rules(layers: &Layers) -> Vec<LateRule> {
    if layers.landlock_abi < 1 || !layers.user_namespace {
        return Vec::new();
    }
    let abi = ABI::from(layers.landlock_abi);
    let mut device = AccessFs::ReadFile | AccessFs::WriteFile;
    if layers.landlock_abi >= 3 {
        device |= AccessFs::Truncate;
    }
    if layers.landlock_abi >= 5 {
        device |= AccessFs::IoctlDev;
    }
    let mut rules = Vec::new();
    if Path::new("/dev/shm").is_dir() {
        rules.push(LateRule {
            path: c"/dev/shm".to_owned(),
            access: AccessFs::from_all(abi).bits(),
        });
    }
    if Path::new("/dev/pts").is_dir() {
        rules.push(LateRule {
            path: c"/dev/pts".to_owned(),
            access: (device | AccessFs::ReadDir).bits(),
        });
        if Path::new("/dev/ptmx").exists() {
            rules.push(LateRule {
                path: c"/dev/ptmx".to_owned(),
                access: device.bits(),
            });
        }
    }
    rules
}

/// This process's argument and environment string ranges (`/proc/self/stat` fields 48–51),
/// read once: the kernel fixes them at exec.
fn own_strings() -> [(usize, usize); 2] {
    static STRINGS: std::sync::OnceLock<[(usize, usize); 2]> = std::sync::OnceLock::new();
    *STRINGS.get_or_init(read_own_strings)
}

fn read_own_strings() -> [(usize, usize); 2] {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name may hold spaces: count from the last `)` (field 3 comes after it).
    let fields: Vec<usize> = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .map(|f| f.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    let field = |number: usize| fields.get(number - 3).copied().unwrap_or(0);
    [(field(48), field(49)), (field(50), field(51))]
}

/// The kernel's last capability, read once.
fn last_capability() -> libc::c_int {
    static LAST: std::sync::OnceLock<libc::c_int> = std::sync::OnceLock::new();
    *LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(40)
    })
}

/// The seccomp program for `internet` (and whether keel runs as root), built once each.
fn cached_program(
    internet: InternetSockets,
    root: bool,
) -> Result<Vec<libc::sock_filter>, SandboxError> {
    type Built = Vec<((InternetSockets, bool), Vec<libc::sock_filter>)>;
    static BUILT: std::sync::Mutex<Built> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, program)) = built.iter().find(|(key, _)| *key == (internet, root)) {
        return Ok(program.clone());
    }
    let program = filter::program(internet, root)?;
    built.push(((internet, root), program.clone()));
    Ok(program)
}

impl Plan {
    /// Join a holder's namespaces instead of making them: nothing is mounted, mapped or
    /// brought up again, and no init is forked (the holder's PID 1 is the namespace's).
    pub(crate) fn join(&mut self, joined: Joined) {
        let prepared = &mut self.prepared;
        prepared.join = Some(joined);
        prepared.anchor = None;
        prepared.loopback = None;
        prepared.mounts.clear();
        prepared.pid_namespace = false;
    }
}

/// The plan for `policy` under `layers`; `hold`: this spawn is a session's holder, whose PID 1
/// sends its namespaces over this socket.
pub(crate) fn prepare(
    policy: &SandboxPolicy,
    layers: &Layers,
    hold: Option<OwnedFd>,
    anchor: Option<confine::Anchor>,
) -> Result<Plan, SandboxError> {
    let (report, report_writer) = UnixDatagram::pair().map_err(SandboxError::Io)?;
    report.set_nonblocking(true).map_err(SandboxError::Io)?;
    let mut unshare_flags = 0;
    let mut mount_plan = Mounts {
        ops: Vec::new(),
        steps: Vec::new(),
        tmp_replaced: false,
        pins: Vec::new(),
    };
    let mut loopback = None;
    if layers.user_namespace {
        unshare_flags |= libc::CLONE_NEWUSER | libc::CLONE_NEWNS;
        if layers.pid_namespace {
            unshare_flags |= libc::CLONE_NEWPID;
        }
        if layers.ipc_namespace {
            unshare_flags |= libc::CLONE_NEWIPC;
        }
        if layers.net_namespace && policy.network == Network::Off {
            unshare_flags |= libc::CLONE_NEWNET;
            loopback = Some(LoopbackUp::new());
        }
        mount_plan = mounts(policy)?;
    }
    let (uid, gid) = confine::ids();
    let own_network = unshare_flags & libc::CLONE_NEWNET != 0;
    let internet = if policy.network == Network::On || own_network {
        InternetSockets::Allowed
    } else {
        InternetSockets::Refused
    };
    let filter = if layers.seccomp {
        Some(cached_program(internet, uid == 0 || gid == 0)?)
    } else {
        None
    };
    let mut env: Vec<(&'static str, Option<String>)> =
        vec![("SSH_AUTH_SOCK", None), ("DBUS_SESSION_BUS_ADDRESS", None)];
    if mount_plan.tmp_replaced {
        env.push(("TMPDIR", Some("/tmp".into())));
    } else if let Some(temp) = &policy.temp_dir {
        env.push(("TMPDIR", Some(temp.display().to_string())));
    }
    let prepared = Prepared {
        unshare_flags,
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        loopback,
        mounts: mount_plan.ops,
        pid_namespace: layers.user_namespace && layers.pid_namespace,
        keel_pid: confine::own_pid(),
        keel_strings: own_strings(),
        join: None,
        // Only where this spawn would make both itself, and a PID namespace whose end takes
        // everything it started with it: without one, a command's survivors would linger in
        // the network the session's other commands use.
        anchor: anchor.filter(|_| {
            let wanted = libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWPID;
            unshare_flags & wanted == wanted
        }),
        file_limit: confine::children_file_limit(),
        exec: None,
        hold: hold.filter(|_| layers.user_namespace && layers.pid_namespace),
        ruleset: ruleset(policy, layers)?,
        late_rules: late_rules(layers),
        filter,
        last_capability: last_capability(),
        workspace: c_path(&policy.workspace)?,
        report: OwnedFd::from(report_writer),
    };
    Ok(Plan {
        prepared,
        env,
        failures: Failures {
            report,
            mount_steps: mount_plan.steps,
        },
    })
}

impl Failures {
    /// The failure the child reported, in words, if it reported one.
    pub fn reported(&self) -> Option<(String, std::io::Error)> {
        let mut record = [0u8; REPORT_LEN];
        let read = self.report.recv(&mut record).ok()?;
        if read != REPORT_LEN {
            return None;
        }
        let step = Step::ALL.iter().find(|step| **step as u8 == record[0])?;
        let index = usize::from(u16::from_le_bytes([record[1], record[2]]));
        let code = i32::from_le_bytes([record[4], record[5], record[6], record[7]]);
        let what = match step {
            Step::MakePrivate
            | Step::CloneTree
            | Step::Bind
            | Step::MakeDir
            | Step::AttachTree
            | Step::Filesystem
            | Step::Seal => self
                .mount_steps
                .get(index)
                .cloned()
                .unwrap_or_else(|| format!("mount step {index}")),
            Step::ParentDeath => "tying the command's life to keel's".into(),
            Step::Unshare => "entering new namespaces".into(),
            Step::Join => "entering the session's namespaces".into(),
            Step::SetGroups | Step::UidMap | Step::GidMap => "mapping the user".into(),
            Step::NoNestedUsers => "forbidding nested user namespaces".into(),
            Step::Loopback => "bringing up the loopback".into(),
            Step::Fork => "starting the namespace's init".into(),
            Step::ProcMount => "mounting the namespace's /proc".into(),
            Step::NoNewPrivs => "forbidding new privileges".into(),
            Step::DropCapabilities => "dropping capabilities".into(),
            Step::Landlock => "enforcing the Landlock rules".into(),
            Step::Seccomp => "installing the seccomp filter".into(),
            Step::Chdir => "entering the workspace".into(),
            Step::CloseDescriptors => "closing the descriptors keel holds".into(),
            Step::Exec => "starting the command in the session's namespaces".into(),
        };
        Some((what, std::io::Error::from_raw_os_error(code)))
    }
}
