//! The processes between keel and a command in a PID namespace: the outer process (keel's
//! child, which waits and ends like the command) and PID 1 (the namespace's init, which
//! mounts `/proc`, starts a session of its own, forks the command and reaps until it ends).
//! A session's holder is the same pair, but its PID 1 sends its namespaces to keel and stays
//! (reaping what is left to it) instead of forking a command (a command that joins them:
//! `joined`).
//! Part of the one audited `pre_exec` path (see the parent module): the same rules hold —
//! system calls on values made before the fork, no allocation, no lock, no panic.
#![allow(unsafe_code)]

use super::{Prepared, Step, check, errno};
use libc::{c_int, c_long, c_uint, c_void, pid_t};
use std::ffi::CStr;
use std::os::fd::AsRawFd;

/// The parts of a fresh `/proc` that change the whole machine.
const PROC_CORNERS: [&CStr; 5] = [
    c"/proc/sys",
    c"/proc/sysrq-trigger",
    c"/proc/irq",
    c"/proc/bus",
    c"/proc/fs",
];

/// `path` bound on itself and sealed read-only; a path this kernel lacks is left alone.
fn seal_read_only(prepared: &Prepared, path: &CStr, index: usize) -> std::io::Result<()> {
    // SAFETY: system calls on a literal path and a stack struct.
    unsafe {
        if libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        ) < 0
        {
            if errno() == libc::ENOENT {
                return Ok(());
            }
            return Err(super::fail(prepared, Step::ProcMount, index + 1));
        }
        let sealed = super::mounting::set_attributes(path, libc::MOUNT_ATTR_RDONLY, 0, true);
        check(sealed, prepared, Step::ProcMount, index + 1)
    }
}

/// Every signal back to its default action (keel's handlers are not for these processes).
pub(super) fn default_signals() {
    for signal in 1..=64 {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            // SAFETY: `signal` with SIG_DFL is async-signal-safe.
            unsafe {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
    }
}

/// Close every descriptor but `keep` (sorted, distinct).
pub(super) fn close_all_but(keep: &[c_int]) {
    let mut from: c_uint = 0;
    for &fd in keep {
        let fd = fd as c_uint;
        if fd > from {
            close_range(from, fd - 1);
        }
        from = fd.saturating_add(1);
    }
    close_range(from, c_uint::MAX);
}

/// Close `first..=last`; where `close_range` is missing (before Linux 5.9), one by one up to
/// the descriptor limit.
fn close_range(first: c_uint, last: c_uint) {
    // SAFETY: closing descriptors of this process only; `rlimit` is a stack value.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, 0) == 0 {
            return;
        }
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0 {
            c_uint::try_from(limit.rlim_cur)
                .unwrap_or(65_536)
                .min(last.saturating_add(1))
        } else {
            65_536.min(last.saturating_add(1))
        };
        let mut fd = first;
        while fd < top {
            libc::close(fd as c_int);
            fd += 1;
        }
    }
}

/// In a child that has just asked for its parent-death signal: whether the parent was gone
/// before that (`lifeline` is a pipe whose write end only the parent still holds; this closes
/// the child's copy of it).
pub(super) fn parent_is_gone(lifeline: [c_int; 2]) -> bool {
    // SAFETY: a close and a poll on descriptors of this process and a stack struct.
    unsafe {
        libc::close(lifeline[1]);
        let mut poll = libc::pollfd {
            fd: lifeline[0],
            events: libc::POLLIN,
            revents: 0,
        };
        libc::poll(&raw mut poll, 1, 0) != 0
    }
}

/// Wait for `pid` (retrying when interrupted); its wait status.
pub(super) fn wait_for(pid: pid_t) -> Option<c_int> {
    let mut status: c_int = 0;
    loop {
        // SAFETY: `status` is a stack value.
        let result = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if result == pid {
            return Some(status);
        }
        if result < 0 && errno() != libc::EINTR {
            return None;
        }
    }
}

/// End this process the way `status` says the command ended.
pub(super) fn exit_like(status: [u8; 2]) -> ! {
    // SAFETY: async-signal-safe calls; the process ends here.
    unsafe {
        if status[0] == 1 {
            let signal = c_int::from(status[1]);
            // No core of a copy of keel.
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(c_int::from(status[1]))
    }
}

/// How a wait status is passed on: (0, code) or (1, signal).
pub(super) fn encode(status: c_int) -> [u8; 2] {
    if libc::WIFSIGNALED(status) {
        [1, libc::WTERMSIG(status) as u8]
    } else {
        [0, libc::WEXITSTATUS(status) as u8]
    }
}

/// Fork PID 1 of the new PID namespace; in the command's process, return to confine it. The
/// outer process and PID 1 stay here until the command ends.
pub(super) fn split_into_init_and_command(prepared: &Prepared) -> std::io::Result<()> {
    let mut status_pipe: [c_int; 2] = [-1; 2];
    let mut lifeline: [c_int; 2] = [-1; 2];
    // SAFETY: pipes and fork; every branch below either returns into the command's process or
    // ends with `_exit`.
    unsafe {
        check(
            libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) as c_long,
            prepared,
            Step::Fork,
            0,
        )?;
        check(
            libc::pipe2(lifeline.as_mut_ptr(), libc::O_CLOEXEC) as c_long,
            prepared,
            Step::Fork,
            1,
        )?;
        let init = libc::fork();
        check(init as c_long, prepared, Step::Fork, 2)?;
        if init > 0 {
            // The outer process: keel's child. Wait for PID 1 and end like the command.
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            default_signals();
            let keep = [
                status_pipe[0].min(lifeline[1]),
                status_pipe[0].max(lifeline[1]),
            ];
            close_all_but(&keep);
            let init_status = wait_for(init);
            let mut status = [0u8; 2];
            let read = libc::read(status_pipe[0], status.as_mut_ptr().cast::<c_void>(), 2);
            if read != 2 {
                status = init_status.map_or([1, libc::SIGKILL as u8], encode);
            }
            exit_like(status);
        }
        // PID 1. It dies with the outer process; if that is gone already, so is keel.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // A copy of keel the command can see: not dumpable (its memory and /proc files are
        // closed to the command, which has no capability in keel's user namespace), and with
        // keel's argv and environment cleared (the command's exec makes its own dumpable).
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        // A session of its own: no controlling terminal, so nothing in the sandbox can push
        // keystrokes into the user's terminal (TIOCSTI) or take it over.
        check(libc::setsid() as c_long, prepared, Step::Fork, 4)?;
        for (start, end) in prepared.keel_strings {
            if start != 0 && end > start {
                libc::memset(start as *mut c_void, 0, end - start);
            }
        }
        if parent_is_gone(lifeline) {
            libc::_exit(1);
        }
        check(
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) as c_long,
            prepared,
            Step::ProcMount,
            0,
        )?;
        // What a process of the host's root could write there (`kernel.core_pattern`, the
        // sysrq trigger, IRQ affinities) is read-only, whoever the command runs as.
        for (index, corner) in PROC_CORNERS.iter().enumerate() {
            seal_read_only(prepared, corner, index)?;
        }
        if let Some(socket) = &prepared.hold {
            super::share::send_namespaces(socket);
            hold_namespaces(socket.as_raw_fd());
        }
        let command = libc::fork();
        check(command as c_long, prepared, Step::Fork, 3)?;
        if command == 0 {
            libc::close(status_pipe[0]);
            libc::close(status_pipe[1]);
            libc::close(lifeline[0]);
            return Ok(());
        }
        default_signals();
        close_all_but(&[status_pipe[1]]);
        let mut status = [1u8, libc::SIGKILL as u8];
        loop {
            let mut raw: c_int = 0;
            let reaped = libc::waitpid(-1, &raw mut raw, 0);
            if reaped == command {
                status = encode(raw);
                break;
            }
            if reaped < 0 && errno() != libc::EINTR {
                break;
            }
        }
        libc::write(status_pipe[1], status.as_ptr().cast::<c_void>(), 2);
        // Everything else in the namespace dies with PID 1.
        libc::_exit(0)
    }
}

/// How many milliseconds a sweep waits at most for what it killed to be gone.
const SWEEP_TRIES: u32 = 2000;

/// A holder's PID 1 from here on: nothing open but keel's socket (so keel's `spawn` returns),
/// every process left to it reaped by the kernel (`SIGCHLD` ignored). Each byte keel sends
/// asks it to kill every other process in the namespace (no command of the session runs: what
/// they left behind goes), answered once none is left — 1 — or `SWEEP_TRIES` ms have passed
/// (a process stuck in the kernel) — 0, and keel ends the holder. When keel closes
/// the socket (the session ended, or keel did), it ends, and everything in the namespaces
/// dies with it.
fn hold_namespaces(socket: c_int) -> ! {
    default_signals();
    close_all_but(&[socket]);
    // SAFETY: async-signal-safe calls on a stack byte; the process never returns.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_IGN);
        let mut byte = [0u8; 1];
        loop {
            let read = libc::read(socket, byte.as_mut_ptr().cast::<c_void>(), 1);
            if read == 0 || (read < 0 && errno() != libc::EINTR) {
                libc::_exit(0);
            }
            if read == 1 {
                // In a PID namespace, -1 is every process in it but its init.
                libc::kill(-1, libc::SIGKILL);
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                };
                let mut tries = 0;
                while libc::kill(-1, 0) == 0 && tries < SWEEP_TRIES {
                    libc::nanosleep(&raw const pause, std::ptr::null_mut());
                    tries += 1;
                }
                byte[0] = u8::from(tries < SWEEP_TRIES);
                libc::write(socket, byte.as_ptr().cast::<c_void>(), 1);
            }
        }
    }
}
