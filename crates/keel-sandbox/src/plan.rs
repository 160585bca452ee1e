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
use crate::confine::{self, LateRule, LoopbackUp, MAX_TREES, MountOp, Prepared, REPORT_LEN, Step};
use crate::filter::{self, InternetSockets};
use crate::layers::Layers;
use crate::policy::{Network, SandboxPolicy};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

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

/// The devices a command reads and writes wherever it runs.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

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
        created = created
            .add_rule(rule(root, AccessFs::from_all(abi))?)
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
    if Path::new("/dev/pts").is_dir() {
        created = created
            .add_rule(rule(Path::new("/dev/pts"), device | AccessFs::ReadDir)?)
            .map_err(landlock_error)?;
    }
    if !layers.user_namespace && Path::new("/dev/shm").is_dir() {
        // No private one: the host's, shared (POSIX semaphores and shared memory need it).
        created = created
            .add_rule(rule(Path::new("/dev/shm"), AccessFs::from_all(abi))?)
            .map_err(landlock_error)?;
    }
    Ok(created.into())
}

/// The rules for what only exists in the child: its private `/dev/shm`.
fn late_rules(layers: &Layers) -> Vec<LateRule> {
    if layers.landlock_abi < 1 || !layers.user_namespace || !Path::new("/dev/shm").is_dir() {
        return Vec::new();
    }
    let abi = ABI::from(layers.landlock_abi);
    vec![LateRule {
        path: c"/dev/shm".to_owned(),
        access: AccessFs::from_all(abi).bits(),
    }]
}

/// The mounts, and whether `/tmp` is the session's temp dir in the child.
struct Mounts {
    ops: Vec<MountOp>,
    steps: Vec<String>,
    tmp_replaced: bool,
}

impl Mounts {
    fn push(&mut self, op: MountOp, step: String) {
        self.ops.push(op);
        self.steps.push(step);
    }
}

/// Empty and closed: nothing can be listed, read or created under it.
const HIDING_TMPFS: &str = "size=4k,nr_inodes=1,mode=000";

fn mounts(policy: &SandboxPolicy) -> Result<Mounts, SandboxError> {
    let mut mounts = Mounts {
        ops: Vec::new(),
        steps: Vec::new(),
        tmp_replaced: false,
    };
    mounts.push(MountOp::MakePrivate, "making mounts private".into());
    let tmp = Path::new("/tmp");
    // Roots that stay reachable at their own paths (the workspace even in read-only mode).
    let mut roots: Vec<PathBuf> = vec![policy.workspace.clone()];
    for root in &policy.writable {
        if !roots.iter().any(|kept| root.starts_with(kept)) {
            roots.retain(|kept| !kept.starts_with(root));
            roots.push(root.clone());
        }
    }
    let tmp_is_plain = tmp
        .symlink_metadata()
        .is_ok_and(|meta| meta.file_type().is_dir());
    let back: Vec<&PathBuf> = roots.iter().filter(|root| root.starts_with(tmp)).collect();
    if let Some(temp) = &policy.temp_dir
        && tmp_is_plain
        && temp != tmp
        && back.len() <= MAX_TREES
        && !roots.iter().any(|root| tmp.starts_with(root))
    {
        for (slot, root) in back.iter().enumerate() {
            mounts.push(
                MountOp::CloneTree {
                    source: c_path(root)?,
                    slot,
                },
                format!("keeping {} reachable", root.display()),
            );
        }
        mounts.push(
            MountOp::Bind {
                source: c_path(temp)?,
                target: c_path(tmp)?,
            },
            format!("putting the session's temp dir {} on /tmp", temp.display()),
        );
        for (slot, root) in back.iter().enumerate() {
            let make_dirs = root
                .ancestors()
                .filter(|ancestor| ancestor.starts_with(tmp) && *ancestor != tmp)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .map(c_path)
                .collect::<Result<Vec<_>, _>>()?;
            mounts.push(
                MountOp::AttachTree {
                    slot,
                    target: c_path(root)?,
                    make_dirs,
                },
                format!("attaching {} under the new /tmp", root.display()),
            );
            // Below the temp dir, Landlock would let it be written through its mount point:
            // a root that is not writable is sealed read-only.
            if !policy.writable.contains(root) {
                mounts.push(
                    MountOp::Seal {
                        target: c_path(root)?,
                        attributes: libc::MOUNT_ATTR_RDONLY,
                        cleared: 0,
                    },
                    format!("keeping {} read-only", root.display()),
                );
                // A writable root inside it (an MCP server's `~/.cache` in a workspace that is
                // `~`) is a mount of its own again, writable.
                for inner in policy
                    .writable
                    .iter()
                    .filter(|inner| inner.starts_with(root))
                {
                    let target = c_path(inner)?;
                    mounts.push(
                        MountOp::Bind {
                            source: target.clone(),
                            target: target.clone(),
                        },
                        format!("keeping {} writable", inner.display()),
                    );
                    mounts.push(
                        MountOp::Seal {
                            target,
                            attributes: 0,
                            cleared: libc::MOUNT_ATTR_RDONLY,
                        },
                        format!("keeping {} writable", inner.display()),
                    );
                }
            }
        }
        mounts.tmp_replaced = true;
    }
    let tmp_replaced = mounts.tmp_replaced;
    let visible = |path: &Path| {
        !(tmp_replaced && path.starts_with(tmp)) || back.iter().any(|root| path.starts_with(root))
    };
    let mut hidden: Vec<PathBuf> = Vec::new();
    for path in policy.forbid_read.iter().filter(|path| visible(path)) {
        hide(&mut mounts, path)?;
        hidden.push(path.clone());
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    for run in [
        Some(PathBuf::from("/run")),
        Some(PathBuf::from("/var/run")),
        runtime,
    ]
    .into_iter()
    .flatten()
    .filter_map(|path| path.canonicalize().ok())
    {
        let holds_a_root = roots.iter().any(|root| root.starts_with(&run));
        let done = hidden.iter().any(|path| run.starts_with(path));
        if run.is_dir() && !holds_a_root && !done && visible(&run) {
            hide(&mut mounts, &run)?;
            hidden.push(run);
        }
    }
    if Path::new("/dev/shm").is_dir() {
        mounts.push(
            MountOp::Tmpfs {
                target: c_path(Path::new("/dev/shm"))?,
                read_only: false,
                options: c"mode=1777".to_owned(),
            },
            "giving the command its own /dev/shm".into(),
        );
    }
    let mut points: Vec<&Path> = Vec::new();
    for protected in &policy.read_only {
        for ancestor in &protected.ancestors {
            if !points.contains(&ancestor.as_path()) {
                points.push(ancestor);
                let target = c_path(ancestor)?;
                mounts.push(
                    MountOp::Bind {
                        source: target.clone(),
                        target,
                    },
                    format!("pinning {} in place", ancestor.display()),
                );
            }
        }
        let target = c_path(&protected.path)?;
        mounts.push(
            MountOp::Bind {
                source: target.clone(),
                target: target.clone(),
            },
            format!("protecting {}", protected.path.display()),
        );
        mounts.push(
            MountOp::Seal {
                target,
                attributes: libc::MOUNT_ATTR_RDONLY,
                cleared: 0,
            },
            format!("making {} read-only", protected.path.display()),
        );
    }
    Ok(mounts)
}

/// Hide `path`: a directory under an empty closed tmpfs, anything else under `/dev/null`,
/// sealed so that opening it is refused.
fn hide(mounts: &mut Mounts, path: &Path) -> Result<(), SandboxError> {
    let target = c_path(path)?;
    if path.is_dir() {
        mounts.push(
            MountOp::Tmpfs {
                target,
                read_only: true,
                options: CString::new(HIDING_TMPFS).map_err(|_| SandboxError::Path {
                    path: path.to_path_buf(),
                    reason: "bad tmpfs options".into(),
                })?,
            },
            format!("hiding {}", path.display()),
        );
    } else {
        mounts.push(
            MountOp::Bind {
                source: c"/dev/null".to_owned(),
                target: target.clone(),
            },
            format!("hiding {}", path.display()),
        );
        mounts.push(
            MountOp::Seal {
                target,
                attributes: libc::MOUNT_ATTR_RDONLY
                    | libc::MOUNT_ATTR_NODEV
                    | libc::MOUNT_ATTR_NOEXEC
                    | libc::MOUNT_ATTR_NOSUID,
                cleared: 0,
            },
            format!("sealing {}", path.display()),
        );
    }
    Ok(())
}

/// This process's argument and environment string ranges (`/proc/self/stat` fields 48–51).
fn own_strings() -> [(usize, usize); 2] {
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

fn last_capability() -> libc::c_int {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(40)
}

/// The plan for `policy` under `layers`.
pub(crate) fn prepare(policy: &SandboxPolicy, layers: &Layers) -> Result<Plan, SandboxError> {
    let (report, report_writer) = UnixDatagram::pair().map_err(SandboxError::Io)?;
    report.set_nonblocking(true).map_err(SandboxError::Io)?;
    let mut unshare_flags = 0;
    let mut mount_plan = Mounts {
        ops: Vec::new(),
        steps: Vec::new(),
        tmp_replaced: false,
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
    let internet = if policy.network == Network::On || loopback.is_some() {
        InternetSockets::Allowed
    } else {
        InternetSockets::Refused
    };
    let filter = if layers.seccomp {
        Some(filter::program(internet)?)
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
            | Step::Tmpfs
            | Step::Seal => self
                .mount_steps
                .get(index)
                .cloned()
                .unwrap_or_else(|| format!("mount step {index}")),
            Step::ParentDeath => "tying the command's life to keel's".into(),
            Step::Unshare => "entering new namespaces".into(),
            Step::SetGroups | Step::UidMap | Step::GidMap => "mapping the user".into(),
            Step::Loopback => "bringing up the loopback".into(),
            Step::Fork => "starting the namespace's init".into(),
            Step::ProcMount => "mounting the namespace's /proc".into(),
            Step::NoNewPrivs => "forbidding new privileges".into(),
            Step::DropCapabilities => "dropping capabilities".into(),
            Step::Landlock => "enforcing the Landlock rules".into(),
            Step::Seccomp => "installing the seccomp filter".into(),
            Step::Chdir => "entering the workspace".into(),
        };
        Some((what, std::io::Error::from_raw_os_error(code)))
    }
}
