//! The mount step between fork and exec: each `MountOp` that `plan` built, done with raw
//! system calls in the child (see the parent module's invariants: no allocation, no lock, no
//! panic path), its failure reported as the step and index it was.

use super::{MAX_TREES, MountOp, Prepared, Step, check, errno, fail};
use libc::{c_char, c_int, c_long, c_uint, c_void};
use std::ffi::CStr;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
pub(super) struct MountAttr {
    pub(super) attr_set: u64,
    pub(super) attr_clr: u64,
    pub(super) propagation: u64,
    pub(super) userns_fd: u64,
}

pub(super) fn mount(
    prepared: &Prepared,
    op: &MountOp,
    index: usize,
    trees: &mut [c_int; MAX_TREES],
) -> std::io::Result<()> {
    let null = std::ptr::null::<c_char>();
    // SAFETY: every pointer is a NUL-terminated string owned by `op` or a literal, or a stack
    // struct; slots are bounds-checked with `get`.
    unsafe {
        match op {
            MountOp::MakePrivate => check(
                libc::mount(
                    null,
                    c"/".as_ptr(),
                    null,
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) as c_long,
                prepared,
                Step::MakePrivate,
                index,
            ),
            MountOp::CloneTree { source, slot } => {
                let fd = libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    source.as_ptr(),
                    (libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC) as c_uint
                        | libc::AT_RECURSIVE as c_uint,
                );
                check(fd, prepared, Step::CloneTree, index)?;
                match trees.get_mut(*slot) {
                    Some(entry) => {
                        *entry = fd as c_int;
                        Ok(())
                    }
                    None => Err(fail(prepared, Step::CloneTree, index)),
                }
            }
            MountOp::Bind { source, target } => check(
                libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    null,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ) as c_long,
                prepared,
                Step::Bind,
                index,
            ),
            MountOp::AttachTree {
                slot,
                target,
                make_dirs,
            } => {
                for (dir, pin) in make_dirs {
                    if libc::mkdir(dir.as_ptr(), 0o700) < 0 && errno() != libc::EEXIST {
                        return Err(fail(prepared, Step::MakeDir, index));
                    }
                    // A directory on the way (in the temp dir, which commands write) made a
                    // mount point: it cannot be renamed or removed, so no later command of
                    // the session is led into a decoy put in its place.
                    if *pin
                        && libc::mount(dir.as_ptr(), dir.as_ptr(), null, libc::MS_BIND, null.cast())
                            < 0
                    {
                        return Err(fail(prepared, Step::MakeDir, index));
                    }
                }
                let Some(&fd) = trees.get(*slot) else {
                    return Err(fail(prepared, Step::AttachTree, index));
                };
                let result = libc::syscall(
                    libc::SYS_move_mount,
                    fd,
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    target.as_ptr(),
                    libc::MOVE_MOUNT_F_EMPTY_PATH,
                );
                libc::close(fd);
                check(result, prepared, Step::AttachTree, index)
            }
            MountOp::Filesystem {
                kind,
                target,
                flags,
                options,
            } => check(
                libc::mount(
                    kind.as_ptr(),
                    target.as_ptr(),
                    kind.as_ptr(),
                    *flags,
                    options.as_ptr().cast::<c_void>(),
                ) as c_long,
                prepared,
                Step::Filesystem,
                index,
            ),
            MountOp::Hide { target, directory } => {
                let made = if *directory {
                    libc::mount(
                        c"tmpfs".as_ptr(),
                        target.as_ptr(),
                        c"tmpfs".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_RDONLY,
                        HIDING_TMPFS.as_ptr().cast::<c_void>(),
                    )
                } else {
                    libc::mount(
                        c"/dev/null".as_ptr(),
                        target.as_ptr(),
                        null,
                        libc::MS_BIND,
                        std::ptr::null(),
                    )
                };
                if made < 0 {
                    if errno() == libc::ENOENT {
                        return Ok(());
                    }
                    return Err(fail(prepared, Step::Filesystem, index));
                }
                if *directory {
                    return Ok(());
                }
                let sealed = libc::MOUNT_ATTR_RDONLY
                    | libc::MOUNT_ATTR_NODEV
                    | libc::MOUNT_ATTR_NOEXEC
                    | libc::MOUNT_ATTR_NOSUID;
                check(
                    set_attributes(target, sealed, 0, false),
                    prepared,
                    Step::Seal,
                    index,
                )
            }
            MountOp::Seal {
                target,
                attributes,
                cleared,
                recursive,
            } => check(
                set_attributes(target, *attributes, *cleared, *recursive),
                prepared,
                Step::Seal,
                index,
            ),
        }
    }
}

/// Empty and closed: nothing can be listed, read or created under it.
const HIDING_TMPFS: &CStr = c"size=4k,nr_inodes=1,mode=000";

/// `mount_setattr` on the mount at `target` (and everything below it when `recursive`).
///
/// # Safety
/// A system call on a NUL-terminated string and a stack struct.
pub(super) unsafe fn set_attributes(
    target: &CStr,
    attributes: u64,
    cleared: u64,
    recursive: bool,
) -> c_long {
    let mut at = libc::AT_SYMLINK_NOFOLLOW as c_uint;
    if recursive {
        at |= libc::AT_RECURSIVE as c_uint;
    }
    let attr = MountAttr {
        attr_set: attributes,
        attr_clr: cleared,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: as the function's contract says.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            at,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    }
}
