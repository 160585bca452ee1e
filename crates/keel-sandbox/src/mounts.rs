//! What a confined command sees of the file system: the mount steps its child runs, in order.
//!
//! Invariants:
//! - Order: private propagation → the session's temp dir on `/tmp` (roots under `/tmp`
//!   attached back at their paths) → **everything read-only and without devices**
//!   (recursively: no chmod, chown, utime or xattr change anywhere — Landlock does not cover
//!   those — and no disk, console or camera opened) → the harmless devices opened again → the
//!   writable roots and
//!   the temp dir opened again, each a mount of its own → `forbid_read` hidden, the
//!   directories on the way to one inside a writable root pinned first (a directory
//!   under an empty, closed, read-only tmpfs; one that holds roots under a tmpfs that cannot
//!   be listed, with those roots attached back at their paths; a file under `/dev/null`
//!   sealed without devices, so opening it is refused) → a private `/dev/shm` and a private devpts (no other terminal
//!   of the user is reachable) → each protected path's ancestors made mount points, then the
//!   path bound on itself and sealed read-only.
//! - The directories made inside the temp dir to attach roots under the new `/tmp` are checked
//!   first: a symlink a command planted there is removed, so no mount follows it out.
//! - Every step has a description, so a failure names what it was doing.

use crate::SandboxError;
use crate::confine::{self, MAX_TREES, MountOp};
use crate::policy::SandboxPolicy;
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The mounts, and whether `/tmp` is the session's temp dir in the child.
pub(crate) struct Mounts {
    pub ops: Vec<MountOp>,
    pub steps: Vec<String>,
    pub tmp_replaced: bool,
    /// The directories made in the temp dir down to the roots attached under the new `/tmp`,
    /// each a mount point (so that none can be moved away for a decoy), once each.
    pub pins: Vec<PathBuf>,
}

impl Mounts {
    fn push(&mut self, op: MountOp, step: String) {
        self.ops.push(op);
        self.steps.push(step);
    }

    fn seal(&mut self, path: &Path, attributes: u64, recursive: bool, step: String) -> Done {
        self.push(
            MountOp::Seal {
                target: c_path(path)?,
                attributes,
                cleared: 0,
                recursive,
            },
            step,
        );
        Ok(())
    }

    /// `path` a mount of its own, writable again.
    fn reopen(&mut self, path: &Path, bind: bool) -> Done {
        let target = c_path(path)?;
        if bind {
            self.push(
                MountOp::Bind {
                    source: target.clone(),
                    target: target.clone(),
                },
                format!("keeping {} writable", path.display()),
            );
        }
        self.push(
            MountOp::Seal {
                target,
                attributes: 0,
                cleared: libc::MOUNT_ATTR_RDONLY,
                recursive: false,
            },
            format!("keeping {} writable", path.display()),
        );
        Ok(())
    }

    fn filesystem(&mut self, kind: &str, path: &Path, flags: libc::c_ulong, options: &str) -> Done {
        let text = |value: &str| {
            CString::new(value).map_err(|_| SandboxError::Path {
                path: path.to_path_buf(),
                reason: format!("bad mount option {value:?}"),
            })
        };
        self.push(
            MountOp::Filesystem {
                kind: text(kind)?,
                target: c_path(path)?,
                flags,
                options: text(options)?,
            },
            format!("mounting a new {kind} on {}", path.display()),
        );
        Ok(())
    }
}

type Done = Result<(), SandboxError>;

fn c_path(path: &Path) -> Result<CString, SandboxError> {
    confine::c_path(path).ok_or_else(|| SandboxError::Path {
        path: path.to_path_buf(),
        reason: "it contains a NUL byte".into(),
    })
}

/// The devices every command may use: read, write and (where Landlock has it) ioctl.
pub(crate) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The private `/dev/shm`: anyone's, like the host's, and bounded.
const SHM_TMPFS: &str = "mode=1777,size=25%";

/// A devpts of the sandbox's own: ptys it opens are its own; the user's terminals are not
/// there.
const PRIVATE_DEVPTS: &str = "newinstance,ptmxmode=0666,mode=620";

pub(crate) fn mounts(policy: &SandboxPolicy) -> Result<Mounts, SandboxError> {
    let mut mounts = Mounts {
        ops: Vec::new(),
        steps: Vec::new(),
        tmp_replaced: false,
        pins: Vec::new(),
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
    let back: Vec<&PathBuf> = roots.iter().filter(|root| root.starts_with(tmp)).collect();
    if let Some(temp) = &policy.temp_dir
        && policy.private_tmp
        && tmp
            .symlink_metadata()
            .is_ok_and(|meta| meta.file_type().is_dir())
        && temp != tmp
        && back.len() <= MAX_TREES
        && !roots.iter().any(|root| tmp.starts_with(root))
    {
        replace_tmp(&mut mounts, temp, &back)?;
    }
    mounts.seal(
        Path::new("/"),
        libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NODEV,
        true,
        "making everything read-only and without devices".into(),
    )?;
    // The harmless devices, opened again (a disk, a console, a camera stay closed).
    for device in DEVICES.iter().map(Path::new).filter(|path| path.exists()) {
        let target = c_path(device)?;
        mounts.push(
            MountOp::Bind {
                source: target.clone(),
                target: target.clone(),
            },
            format!("keeping {} usable", device.display()),
        );
        mounts.push(
            MountOp::Seal {
                target,
                attributes: 0,
                cleared: libc::MOUNT_ATTR_NODEV,
                recursive: false,
            },
            format!("keeping {} usable", device.display()),
        );
    }
    for root in &policy.writable {
        mounts.reopen(root, true)?;
        // A device the user allowed (`allow_write = ["/dev/kvm"]`) opens again.
        if root.starts_with("/dev") {
            mounts.push(
                MountOp::Seal {
                    target: c_path(root)?,
                    attributes: 0,
                    cleared: libc::MOUNT_ATTR_NODEV,
                    recursive: false,
                },
                format!("keeping {} usable", root.display()),
            );
        }
    }
    match &policy.temp_dir {
        Some(_) if mounts.tmp_replaced => {
            mounts.reopen(tmp, false)?;
            // As writable as the temp dir they are in (`mkdir ../build` beside a workspace).
            for pin in mounts.pins.clone() {
                mounts.push(
                    MountOp::Seal {
                        target: c_path(&pin)?,
                        attributes: 0,
                        cleared: libc::MOUNT_ATTR_RDONLY,
                        recursive: false,
                    },
                    format!("keeping {} writable", pin.display()),
                );
            }
        }
        Some(temp) => mounts.reopen(temp, true)?,
        None => {}
    }
    let tmp_replaced = mounts.tmp_replaced;
    let visible = |path: &Path| {
        !(tmp_replaced && path.starts_with(tmp)) || back.iter().any(|root| path.starts_with(root))
    };
    let mut pinned: Vec<&Path> = Vec::new();
    for path in policy.forbid_read.iter().filter(|path| visible(path)) {
        // Inside a writable root, the directories on the way are pinned: moving one
        // (`mv ~/.config ~/c`) would carry the hidden path out from under its cover for the
        // next command.
        if let Some(root) = policy
            .writable
            .iter()
            .find(|root| path.starts_with(root) && path != *root)
        {
            let mut ancestors: Vec<&Path> = path
                .ancestors()
                .skip(1)
                .take_while(|ancestor| *ancestor != root.as_path())
                .collect();
            ancestors.reverse();
            for ancestor in ancestors {
                pin(&mut mounts, &mut pinned, ancestor)?;
            }
        }
        let inside = policy.roots_inside(path);
        if inside.is_empty() {
            hide(&mut mounts, path)?;
        } else {
            cover(&mut mounts, path, &inside)?;
        }
    }
    let nothing_strange = libc::MS_NOSUID | libc::MS_NODEV;
    if Path::new("/dev/shm").is_dir() {
        mounts.filesystem("tmpfs", Path::new("/dev/shm"), nothing_strange, SHM_TMPFS)?;
    }
    if Path::new("/dev/pts").is_dir() {
        let pts = libc::MS_NOSUID | libc::MS_NOEXEC;
        mounts.filesystem("devpts", Path::new("/dev/pts"), pts, PRIVATE_DEVPTS)?;
        if Path::new("/dev/ptmx").exists() {
            mounts.push(
                MountOp::Bind {
                    source: c"/dev/pts/ptmx".to_owned(),
                    target: c"/dev/ptmx".to_owned(),
                },
                "using the private devpts for new terminals".into(),
            );
        }
    }
    protect(&mut mounts, policy)?;
    // Roots asked for inside a home's dot entry, sealed with it just above: writable again
    // (what is protected inside them stays so: their own mounts).
    if policy.mode == crate::SandboxMode::WorkspaceWrite
        && let Some(rule) = &policy.home_dots
    {
        for root in rule.open_inside.iter().filter(|root| root.is_dir()) {
            mounts.reopen(root, true)?;
        }
    }
    Ok(mounts)
}

/// The temp dir on `/tmp`, with the roots under `/tmp` attached back at their own paths.
fn replace_tmp(mounts: &mut Mounts, temp: &Path, back: &[&PathBuf]) -> Done {
    let tmp = Path::new("/tmp");
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
        let skeleton: Vec<&Path> = root
            .ancestors()
            .filter(|ancestor| ancestor.starts_with(tmp) && *ancestor != tmp)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        // Made in the temp dir, which commands write: nothing there may lead elsewhere.
        for dir in &skeleton {
            let Ok(inside) = dir.strip_prefix(tmp) else {
                continue;
            };
            let on_disk = temp.join(inside);
            if on_disk
                .symlink_metadata()
                .is_ok_and(|meta| !meta.file_type().is_dir())
            {
                std::fs::remove_file(&on_disk).map_err(|error| SandboxError::Path {
                    path: on_disk.clone(),
                    reason: format!("something a command left in the temp dir: {error}"),
                })?;
            }
        }
        let mut make_dirs = Vec::new();
        for dir in skeleton {
            let pin = dir != root.as_path() && !mounts.pins.iter().any(|pinned| pinned == dir);
            if pin {
                mounts.pins.push(dir.to_path_buf());
            }
            make_dirs.push((c_path(dir)?, pin));
        }
        mounts.push(
            MountOp::AttachTree {
                slot,
                target: c_path(root)?,
                make_dirs,
            },
            format!("attaching {} under the new /tmp", root.display()),
        );
    }
    mounts.tmp_replaced = true;
    Ok(())
}

/// Each protected path read-only, its ancestors pinned as mount points first.
fn protect(mounts: &mut Mounts, policy: &SandboxPolicy) -> Done {
    let mut points: Vec<&Path> = Vec::new();
    for protected in &policy.read_only {
        // Gone since the session started (another branch checked out): nothing to protect.
        if protected.path.symlink_metadata().is_err() {
            continue;
        }
        for ancestor in &protected.ancestors {
            pin(mounts, &mut points, ancestor)?;
        }
        let target = c_path(&protected.path)?;
        mounts.push(
            MountOp::Bind {
                source: target.clone(),
                target,
            },
            format!("protecting {}", protected.path.display()),
        );
        mounts.seal(
            &protected.path,
            libc::MOUNT_ATTR_RDONLY,
            true,
            format!("making {} read-only", protected.path.display()),
        )?;
    }
    Ok(())
}

/// `path` a mount point of its own (so it cannot be renamed or removed), once.
fn pin<'a>(mounts: &mut Mounts, pinned: &mut Vec<&'a Path>, path: &'a Path) -> Done {
    if pinned.contains(&path) {
        return Ok(());
    }
    pinned.push(path);
    let target = c_path(path)?;
    mounts.push(
        MountOp::Bind {
            source: target.clone(),
            target,
        },
        format!("pinning {} in place", path.display()),
    );
    Ok(())
}

/// Hide the directory `hidden` whole under a tmpfs that cannot be listed, with `roots` (the
/// session's roots inside it) attached back at their own paths: nothing else of it is seen,
/// not even what appears there later. Each root is taken (with what is mounted below it)
/// before the cover goes on, the directories down to it made in the tmpfs, and the tmpfs
/// sealed read-only last (the roots keep their own mounts' flags).
fn cover(mounts: &mut Mounts, hidden: &Path, roots: &[PathBuf]) -> Done {
    if roots.len() > MAX_TREES {
        return Err(SandboxError::Path {
            path: hidden.to_path_buf(),
            reason: format!(
                "it is hidden and holds {} of the session's roots; at most {MAX_TREES} can be \
                 kept reachable inside a hidden directory",
                roots.len()
            ),
        });
    }
    for (slot, root) in roots.iter().enumerate() {
        mounts.push(
            MountOp::CloneTree {
                source: c_path(root)?,
                slot,
            },
            format!("keeping {} reachable", root.display()),
        );
    }
    let mut skeletons = Vec::new();
    for root in roots {
        let skeleton: Vec<&Path> = root
            .ancestors()
            .take_while(|ancestor| *ancestor != hidden)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        skeletons.push(skeleton);
    }
    let inodes = skeletons.iter().map(Vec::len).sum::<usize>() + 1;
    let options = CString::new(format!("size=16k,nr_inodes={inodes},mode=0111")).map_err(|_| {
        SandboxError::Path {
            path: hidden.to_path_buf(),
            reason: "bad mount option".into(),
        }
    })?;
    mounts.push(
        MountOp::Filesystem {
            kind: c"tmpfs".to_owned(),
            target: c_path(hidden)?,
            flags: libc::MS_NOSUID | libc::MS_NODEV,
            options,
        },
        format!("hiding {}", hidden.display()),
    );
    for (slot, (root, skeleton)) in roots.iter().zip(skeletons).enumerate() {
        let make_dirs = skeleton
            .into_iter()
            .map(|dir| Ok((c_path(dir)?, false)))
            .collect::<Result<Vec<_>, SandboxError>>()?;
        mounts.push(
            MountOp::AttachTree {
                slot,
                target: c_path(root)?,
                make_dirs,
            },
            format!(
                "keeping {} reachable inside the hidden {}",
                root.display(),
                hidden.display()
            ),
        );
    }
    mounts.seal(
        hidden,
        libc::MOUNT_ATTR_RDONLY
            | libc::MOUNT_ATTR_NODEV
            | libc::MOUNT_ATTR_NOEXEC
            | libc::MOUNT_ATTR_NOSUID,
        false,
        format!("hiding {}", hidden.display()),
    )
}

/// Hide `path`: a directory under an empty closed tmpfs, anything else under `/dev/null`,
/// sealed so that opening it is refused.
fn hide(mounts: &mut Mounts, path: &Path) -> Done {
    mounts.push(
        MountOp::Hide {
            target: c_path(path)?,
            directory: path.is_dir(),
        },
        format!("hiding {}", path.display()),
    );
    Ok(())
}
