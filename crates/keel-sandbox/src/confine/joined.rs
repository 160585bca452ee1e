//! A command that joins a session holder's namespaces. Part of the one audited `pre_exec`
//! path (see the parent module): the same rules hold — system calls on values made before the
//! fork, no allocation, no lock, no panic.
//!
//! keel's child (the outer process) enters the holder's namespaces: the user namespace first
//! (its capabilities are what lets the others be entered), the PID namespace last (it is the
//! children's, not this process's). Then it clones the command's process into the PID
//! namespace with `CLONE_VM | CLONE_VFORK`: the command's process shares the outer process's
//! memory on a stack of its own until it execs, so nothing of keel's memory is copied again
//! (a second fork would copy all of it). It ties its life to the outer process, is confined
//! (`restrict`) and execs what `Exec` holds.
//!
//! Invariants:
//! - The outer process is suspended until the command's process has exec'd or ended
//!   (`CLONE_VFORK`); the command's process writes nothing of the outer process's memory but
//!   the `failure` slot of `Start`, which the outer process reads only after that (and
//!   `errno`: the two share thread-local storage; the outer process reads `errno` only after
//!   its own calls). Until the command's process execs, keel's signal handlers are installed
//!   in it, as in any child std starts with a `pre_exec` hook (resetting 64 of them would
//!   double the window's cost); the terminal's signals do not reach it (it is not in the
//!   foreground process group); another command of the session running at once could see
//!   it in `/proc`, and signal it only without Landlock scoping (ABI 6): a handler would then
//!   run on the outer process's copy of keel's memory, and at most wake keel.
//! - A failure before exec reaches keel as `spawn`'s error: the outer process returns it from
//!   `pre_exec` (set-up failures are also reported on the report pipe, naming their step).
//! - After the exec the outer process closes everything (std's exec-status pipe too, so
//!   `spawn` returns), waits, and ends the way the command ended.
//! - The command's process dies with the outer process; one whose outer process is gone
//!   before that was set does not run.
#![allow(unsafe_code)]

use super::init::{close_all_but, default_signals, encode, exit_like, parent_is_gone, wait_for};
use super::{Joined, Prepared, Step, check, errno, fail, restrict};
use libc::{c_int, c_long, c_void};
use std::os::fd::AsRawFd;

/// The command's process's stack, and the inaccessible page below it (an overflow faults
/// instead of writing into the outer process's memory).
const STACK_SIZE: usize = 256 * 1024;
const GUARD_SIZE: usize = 4096;

/// Shared between the outer process and the command's process (same memory until exec).
struct Start<'a> {
    prepared: &'a Prepared,
    lifeline: [c_int; 2],
    /// The errno of a failure before exec (0: none).
    failure: c_int,
}

/// Enter `joined`, start the command in it, and (in the outer process) wait for it. Returns
/// only with a failure.
pub(super) fn run(prepared: &Prepared, joined: &Joined) -> std::io::Result<()> {
    let entries = [
        (Some(&joined.user), libc::CLONE_NEWUSER),
        (Some(&joined.mount), libc::CLONE_NEWNS),
        (joined.ipc.as_ref(), libc::CLONE_NEWIPC),
        (joined.net.as_ref(), libc::CLONE_NEWNET),
        (Some(&joined.pid), libc::CLONE_NEWPID),
    ];
    for (index, (fd, kind)) in entries.into_iter().enumerate() {
        if let Some(fd) = fd {
            // SAFETY: a plain system call on a descriptor `prepared` owns.
            let entered = unsafe { libc::setns(fd.as_raw_fd(), kind) };
            check(entered as c_long, prepared, Step::Join, index)?;
        }
    }
    if prepared.exec.is_none() {
        // SAFETY: setting errno, then reporting it.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return Err(fail(prepared, Step::Exec, 0));
    }
    let mut start = Start {
        prepared,
        lifeline: [-1; 2],
        failure: 0,
    };
    // SAFETY: a pipe, an anonymous mapping and a clone whose child runs `start_command` on
    // that mapping's memory; the outer process reads `start` only after the child has exec'd
    // or ended (CLONE_VFORK), and unmaps the stack only then.
    unsafe {
        check(
            libc::pipe2(start.lifeline.as_mut_ptr(), libc::O_CLOEXEC) as c_long,
            prepared,
            Step::Fork,
            5,
        )?;
        let mapped = GUARD_SIZE + STACK_SIZE;
        let stack = libc::mmap(
            std::ptr::null_mut(),
            mapped,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        );
        if stack == libc::MAP_FAILED {
            return Err(fail(prepared, Step::Fork, 6));
        }
        if libc::mprotect(stack, GUARD_SIZE, libc::PROT_NONE) < 0 {
            let error = fail(prepared, Step::Fork, 6);
            libc::munmap(stack, mapped);
            return Err(error);
        }
        let top = stack.cast::<u8>().add(mapped).cast::<c_void>();
        let command = libc::clone(
            start_command,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut start).cast::<c_void>(),
        );
        if command < 0 {
            let error = fail(prepared, Step::Fork, 7);
            libc::munmap(stack, mapped);
            return Err(error);
        }
        libc::munmap(stack, mapped);
        let failure = std::ptr::read_volatile(&raw const start.failure);
        if failure != 0 {
            wait_for(command);
            return Err(std::io::Error::from_raw_os_error(failure));
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        default_signals();
        close_all_but(&[]);
        let status = wait_for(command).map_or([1, libc::SIGKILL as u8], encode);
        exit_like(status)
    }
}

/// The command's process: tied to the outer process, confined, exec'd.
extern "C" fn start_command(argument: *mut c_void) -> c_int {
    // SAFETY: `argument` is the outer process's `Start`, alive and untouched by it until this
    // process has exec'd or ended; only async-signal-safe calls follow.
    unsafe {
        let start = argument.cast::<Start>();
        let prepared = (*start).prepared;
        let lifeline = (*start).lifeline;
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if parent_is_gone(lifeline) {
            // The outer process is gone (so is keel): nothing runs.
            std::ptr::write_volatile(&raw mut (*start).failure, libc::ESRCH);
            libc::_exit(1);
        }
        libc::close(lifeline[0]);
        if let Err(error) = restrict(prepared) {
            let code = error.raw_os_error().unwrap_or(libc::EIO);
            std::ptr::write_volatile(&raw mut (*start).failure, code);
            libc::_exit(127);
        }
        if let Some(exec) = &prepared.exec {
            libc::execve(
                exec.path.as_ptr(),
                exec.argv.as_ptr().cast::<*const libc::c_char>(),
                exec.envp.as_ptr().cast::<*const libc::c_char>(),
            );
        }
        // keel found the program before the spawn: what stops it here is the sandbox's view
        // (a hidden directory) or the file itself, named as this step.
        let code = match errno() {
            0 => libc::ENOEXEC,
            code => code,
        };
        *libc::__errno_location() = code;
        fail(prepared, Step::Exec, 0);
        std::ptr::write_volatile(&raw mut (*start).failure, code);
        libc::_exit(127)
    }
}
