//! A session holder's namespaces passed to keel over an unnamed socket pair (`SCM_RIGHTS`):
//! the holder's PID 1 sends them once `/proc` is mounted; keel keeps them for the commands
//! that join them. (The same socket then carries keel's sweeps, see `init`.) Part of the audited `pre_exec` path (see the parent module): the sender
//! runs in the child before exec (stack buffers only); the receiver runs in keel.
//!
//! Invariants:
//! - Sent only once the namespaces are whole (maps written, `setgroups` denied, nested user
//!   namespaces refused, `lo` up, every mount made, `/proc` mounted and its corners sealed):
//!   a half-made one is never shared.
//! - Always all six, in the order of `KINDS`; the receiver keeps the IPC and network ones
//!   only where the holder made its own (joining keel's would need keel's privileges).
//! - Every descriptor that arrives is owned at once (closed on any mismatch), close-on-exec.
#![allow(unsafe_code)]

use super::Joined;
use libc::{c_int, c_void};
use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd};

/// What is sent, in order: the namespaces, then the mount table (opened here, as soon as the
/// mounts are made: keel polls it for any change from then on).
const KINDS: [&CStr; 6] = [
    c"/proc/self/ns/user",
    c"/proc/self/ns/mnt",
    c"/proc/self/ns/ipc",
    c"/proc/self/ns/net",
    c"/proc/self/ns/pid",
    c"/proc/self/mountinfo",
];

/// Room for a `cmsghdr` (16 bytes) and five descriptors, 8-byte aligned.
type Control = [u64; 8];

/// Send this process's namespaces over `socket` (best effort: keel says so when none arrive,
/// and the command does not run).
pub(super) fn send_namespaces(socket: &OwnedFd) {
    let mut fds: [c_int; 6] = [-1; 6];
    // SAFETY: opens and a sendmsg whose buffers are all on this stack; the descriptors opened
    // are closed again.
    unsafe {
        for (slot, path) in fds.iter_mut().zip(KINDS) {
            *slot = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        }
        if fds.iter().all(|fd| *fd >= 0) {
            let mut byte = [0u8; 1];
            let mut io = libc::iovec {
                iov_base: byte.as_mut_ptr().cast::<c_void>(),
                iov_len: 1,
            };
            let mut control: Control = [0; 8];
            let size = (fds.len() * std::mem::size_of::<c_int>()) as u32;
            let mut message: libc::msghdr = std::mem::zeroed();
            message.msg_iov = &raw mut io;
            message.msg_iovlen = 1;
            message.msg_control = control.as_mut_ptr().cast::<c_void>();
            message.msg_controllen = libc::CMSG_SPACE(size) as usize;
            let header = libc::CMSG_FIRSTHDR(&raw const message);
            if !header.is_null() {
                (*header).cmsg_level = libc::SOL_SOCKET;
                (*header).cmsg_type = libc::SCM_RIGHTS;
                (*header).cmsg_len = libc::CMSG_LEN(size) as _;
                let data = libc::CMSG_DATA(header).cast::<c_int>();
                for (index, fd) in fds.iter().enumerate() {
                    data.add(index).write_unaligned(*fd);
                }
                libc::sendmsg(socket.as_raw_fd(), &raw const message, libc::MSG_DONTWAIT);
            }
        }
        for fd in fds {
            if fd >= 0 {
                libc::close(fd);
            }
        }
    }
}

/// The namespaces a holder sent over `socket`, and its mount table, if it did;
/// `unshare_flags` say which namespaces the holder made (the IPC and network ones are kept
/// only then).
pub(crate) fn received_namespaces(
    socket: &impl AsRawFd,
    unshare_flags: c_int,
) -> Option<(Joined, OwnedFd)> {
    use std::os::fd::FromRawFd;
    // SAFETY: a recvmsg into buffers on this stack; descriptors received are owned from here.
    unsafe {
        let mut byte = [0u8; 1];
        let mut io = libc::iovec {
            iov_base: byte.as_mut_ptr().cast::<c_void>(),
            iov_len: 1,
        };
        let mut control: Control = [0; 8];
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &raw mut io;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast::<c_void>();
        message.msg_controllen = std::mem::size_of_val(&control);
        let read = libc::recvmsg(
            socket.as_raw_fd(),
            &raw mut message,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        );
        let header = libc::CMSG_FIRSTHDR(&raw const message);
        if read < 1
            || header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            return None;
        }
        // Every descriptor that arrived is owned here, so none leaks whatever else is wrong.
        let header_len = libc::CMSG_LEN(0) as usize;
        let count =
            ((*header).cmsg_len as usize).saturating_sub(header_len) / std::mem::size_of::<c_int>();
        let data = libc::CMSG_DATA(header).cast::<c_int>();
        let received: Vec<OwnedFd> = (0..count.min(KINDS.len()))
            .map(|index| OwnedFd::from_raw_fd(data.add(index).read_unaligned()))
            .collect();
        if message.msg_flags & libc::MSG_CTRUNC != 0 {
            return None;
        }
        let [user, mount, ipc, net, pid, mount_table]: [OwnedFd; 6] = received.try_into().ok()?;
        let made = |flag: c_int, fd: OwnedFd| (unshare_flags & flag != 0).then_some(fd);
        let joined = Joined {
            user,
            mount,
            ipc: made(libc::CLONE_NEWIPC, ipc),
            net: made(libc::CLONE_NEWNET, net),
            pid,
        };
        Some((joined, mount_table))
    }
}
