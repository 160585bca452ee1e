//! A session's user and network namespaces passed between commands over an unnamed socket
//! pair (`SCM_RIGHTS`): the first network-off command sends its own, keel keeps them, later
//! commands join them. Part of the audited `pre_exec` path (see the parent module): the sender
//! runs in the child before exec (stack buffers only); the receiver runs in keel.
//!
//! Invariants:
//! - Sent only once the namespaces are whole (maps written, `setgroups` denied, nested user
//!   namespaces refused, `lo` up): a half-made one is never shared.
//! - Every descriptor that arrives is owned at once (closed on any mismatch), close-on-exec.
#![allow(unsafe_code)]

use super::Joined;
use libc::{c_int, c_void};
use std::os::fd::{AsRawFd, OwnedFd};

/// Send this process's user and network namespaces over `share` (best effort: a later
/// command that finds none makes its own).
pub(super) fn share_namespaces(share: &OwnedFd) {
    // SAFETY: opens and a sendmsg whose buffers are all on this stack; the descriptors opened
    // are closed again.
    unsafe {
        let user = libc::open(
            c"/proc/self/ns/user".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        let net = libc::open(
            c"/proc/self/ns/net".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if user >= 0 && net >= 0 {
            let mut byte = [0u8; 1];
            let mut io = libc::iovec {
                iov_base: byte.as_mut_ptr().cast::<c_void>(),
                iov_len: 1,
            };
            // cmsghdr (16 bytes) and two descriptors, 8-byte aligned.
            let mut control = [0u64; 4];
            let mut message: libc::msghdr = std::mem::zeroed();
            message.msg_iov = &raw mut io;
            message.msg_iovlen = 1;
            message.msg_control = control.as_mut_ptr().cast::<c_void>();
            message.msg_controllen =
                libc::CMSG_SPACE(2 * std::mem::size_of::<c_int>() as u32) as usize;
            let header = libc::CMSG_FIRSTHDR(&raw const message);
            if !header.is_null() {
                (*header).cmsg_level = libc::SOL_SOCKET;
                (*header).cmsg_type = libc::SCM_RIGHTS;
                (*header).cmsg_len = libc::CMSG_LEN(2 * std::mem::size_of::<c_int>() as u32) as _;
                let data = libc::CMSG_DATA(header).cast::<c_int>();
                data.write_unaligned(user);
                data.add(1).write_unaligned(net);
                libc::sendmsg(share.as_raw_fd(), &raw const message, libc::MSG_DONTWAIT);
            }
        }
        if user >= 0 {
            libc::close(user);
        }
        if net >= 0 {
            libc::close(net);
        }
    }
}

/// The user and network namespaces a command sent over `socket`, if it did.
pub(crate) fn received_namespaces(socket: &std::os::unix::net::UnixDatagram) -> Option<Joined> {
    use std::os::fd::FromRawFd;
    // SAFETY: a recvmsg into buffers on this stack; descriptors received are owned from here.
    unsafe {
        let mut byte = [0u8; 1];
        let mut io = libc::iovec {
            iov_base: byte.as_mut_ptr().cast::<c_void>(),
            iov_len: 1,
        };
        let mut control = [0u64; 4];
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
        let received: Vec<OwnedFd> = (0..count.min(4))
            .map(|index| OwnedFd::from_raw_fd(data.add(index).read_unaligned()))
            .collect();
        if message.msg_flags & libc::MSG_CTRUNC != 0 {
            return None;
        }
        let [user, net]: [OwnedFd; 2] = received.try_into().ok()?;
        Some(Joined { user, net })
    }
}
