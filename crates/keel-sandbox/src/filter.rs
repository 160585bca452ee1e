//! The seccomp filter of a confined command: what Landlock and the namespaces cannot say.
//!
//! Invariants:
//! - Sockets: an allowlist of families (`AF_UNIX`, `AF_NETLINK`, and `AF_INET`/`AF_INET6` only
//!   where the command may reach a network: its own namespace's loopback, or the network when
//!   allowed); `socketpair` only for `AF_UNIX`. Raw packets, Bluetooth, vsock, `AF_ALG`, … are
//!   refused.
//! - Refused outright: io_uring (it bypasses the other rules' hooks), `bpf`, `perf_event_open`,
//!   the keyring, every mount call (after set-up), `setns`, `userfaultfd`, module loading,
//!   `kexec`, `swapon`/`swapoff`, `reboot`, `acct`, `quotactl`; `ioctl` `TIOCSTI` (typing
//!   into a terminal) and `TIOCLINUX`, compared on the low 32 bits as the kernel reads them.
//! - No setuid file is made (a command run by root would leave a root shell in the workspace
//!   for any local user), and, where keel runs as root, no setgid one: `chmod`, `fchmod`,
//!   `fchmodat`, `fchmodat2`, `mknod`, `mknodat` with those bits in the mode, and `open`,
//!   `openat`, `creat` creating with them, are refused; `openat2` (its mode is in a struct the
//!   filter cannot read) answers `ENOSYS`, so callers fall back to `openat`. (A user's setgid
//!   bit carries only the user's own groups, and GNU `chmod` keeps a directory's: refusing it
//!   would break `chmod -R` under a shared setgid directory.)
//! - Other ABIs: a system call made through another architecture's entry (`int 0x80` on
//!   x86-64) kills the process; x32 numbers are refused.
//! - Every other refusal returns `EPERM` (the filter's own errno); nothing else is changed.
//! - Layout: the architecture check, then a binary search on the number that allows every
//!   call without a rule at once, then seccompiler's rules for the listed calls; it decides
//!   every call exactly as those rules alone would (a test runs both on every number).

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};
use std::collections::BTreeMap;

/// Whether the command may open internet sockets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InternetSockets {
    Allowed,
    Refused,
}

/// Why the filter could not be built (a bug, or an architecture seccompiler lacks).
#[derive(Debug, thiserror::Error)]
#[error("the seccomp filter could not be built: {0}")]
pub struct FilterError(String);

/// The system calls refused outright.
const REFUSED: &[i64] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_add_key,
    libc::SYS_keyctl,
    libc::SYS_request_key,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_userfaultfd,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
];

/// `ioctl` requests refused: pushing input into a terminal, and the console's own requests.
const REFUSED_IOCTLS: &[libc::Ioctl] = &[libc::TIOCSTI, libc::TIOCLINUX];

fn differs(arg: u8, value: i32) -> Result<SeccompCondition, FilterError> {
    SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        u64::try_from(value).map_err(|error| FilterError(error.to_string()))?,
    )
    .map_err(|error| FilterError(error.to_string()))
}

/// `fchmodat2` and `openat2`: the same numbers on every architecture (libc lacks the first on
/// some).
const SYS_FCHMODAT2: i64 = 452;
const SYS_OPENAT2: u32 = 437;

/// Mode bits no file a command makes may carry: setuid, and setgid where keel is root.
fn privilege_bits(root: bool) -> Vec<u32> {
    if root {
        vec![libc::S_ISUID, libc::S_ISGID]
    } else {
        vec![libc::S_ISUID]
    }
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, FilterError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|error| FilterError(error.to_string()))
}

/// Rules matching a `mode` argument (at `mode_arg`) with a privilege bit; with
/// `creating_flags_arg`, only when those flags create a file (`O_CREAT` or `O_TMPFILE`).
fn privileged_mode(
    mode_arg: u8,
    creating_flags_arg: Option<u8>,
    root: bool,
) -> Result<Vec<SeccompRule>, FilterError> {
    let mut rules = Vec::new();
    for bit in privilege_bits(root) {
        let has_bit = condition(mode_arg, SeccompCmpOp::MaskedEq(bit.into()), bit.into())?;
        let creations: Vec<Vec<SeccompCondition>> = match creating_flags_arg {
            None => vec![vec![has_bit]],
            Some(flags) => [libc::O_CREAT, libc::O_TMPFILE]
                .into_iter()
                .map(|creating| {
                    let creating =
                        u64::try_from(creating).map_err(|error| FilterError(error.to_string()))?;
                    Ok(vec![
                        condition(flags, SeccompCmpOp::MaskedEq(creating), creating)?,
                        has_bit.clone(),
                    ])
                })
                .collect::<Result<_, FilterError>>()?,
        };
        for conditions in creations {
            rules.push(
                SeccompRule::new(conditions).map_err(|error| FilterError(error.to_string()))?,
            );
        }
    }
    Ok(rules)
}

/// The calls that set a file's mode: (number, mode argument, flags argument when the call
/// only creates with `O_CREAT`).
fn mode_setters() -> Vec<(i64, u8, Option<u8>)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1, None),
        (libc::SYS_fchmodat, 2, None),
        (SYS_FCHMODAT2, 2, None),
        (libc::SYS_mknodat, 2, None),
        (libc::SYS_openat, 3, Some(2)),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, 1, None),
        (libc::SYS_mknod, 1, None),
        (libc::SYS_open, 2, Some(1)),
        // `creat` always creates: its flags are `O_CREAT|O_WRONLY|O_TRUNC`.
        (libc::SYS_creat, 1, None),
    ]);
    calls
}

/// The x32 system call bit of x86-64: numbers at or above it are refused.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// seccompiler's program of the rules, and the numbers that have rules (sorted).
/// `root`: keel runs as root (setgid bits are refused too).
fn rules_program(
    internet: InternetSockets,
    root: bool,
) -> Result<(Vec<u32>, Vec<libc::sock_filter>), FilterError> {
    let mut families = vec![libc::AF_UNIX, libc::AF_NETLINK];
    if internet == InternetSockets::Allowed {
        families.extend([libc::AF_INET, libc::AF_INET6]);
    }
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|number| (*number, Vec::new())).collect();
    let other_family = families
        .iter()
        .map(|family| differs(0, *family))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(other_family).map_err(|error| FilterError(error.to_string()))?],
    );
    // Compared on the low 32 bits, as the kernel reads the request (a request with high bits
    // set is the same request to it).
    let ioctls = REFUSED_IOCTLS
        .iter()
        .map(|request| {
            SeccompCondition::new(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                // `Ioctl` is 64 bits wide on every target keel builds for.
                #[allow(clippy::useless_conversion)]
                u64::from(*request),
            )
            .and_then(|condition| SeccompRule::new(vec![condition]))
            .map_err(|error| FilterError(error.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, ioctls);
    for (number, mode_arg, flags_arg) in mode_setters() {
        rules.insert(number, privileged_mode(mode_arg, flags_arg, root)?);
    }
    rules.insert(
        libc::SYS_socketpair,
        vec![
            SeccompRule::new(vec![differs(0, libc::AF_UNIX)?])
                .map_err(|error| FilterError(error.to_string()))?,
        ],
    );
    let listed = rules
        .keys()
        .map(|number| u32::try_from(*number).map_err(|error| FilterError(error.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let refuse = SeccompAction::Errno(libc::EPERM as u32);
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|error: seccompiler::BackendError| FilterError(error.to_string()))?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, refuse, arch)
        .map_err(|error| FilterError(error.to_string()))?;
    let compiled: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|error: seccompiler::BackendError| FilterError(error.to_string()))?;
    let compiled: Vec<libc::sock_filter> = compiled
        .iter()
        .map(|instruction| libc::sock_filter {
            code: instruction.code,
            jt: instruction.jt,
            jf: instruction.jf,
            k: instruction.k,
        })
        .collect();
    Ok((listed, compiled))
}

/// The BPF program: the architecture check, `openat2` and x32 answered, a quick dispatch
/// allowing every call without a rule, then the rules.
pub(crate) fn program(
    internet: InternetSockets,
    root: bool,
) -> Result<Vec<libc::sock_filter>, FilterError> {
    let (listed, compiled) = rules_program(internet, root)?;
    // seccompiler's program opens with its architecture check: load the arch, go on if it is
    // this one, else kill. The dispatch below needs it first too.
    let arch_check = compiled
        .get(..3)
        .filter(|head| u32::from(head[0].code) == LOAD_WORD && head[0].k == SECCOMP_DATA_ARCH)
        .ok_or_else(|| FilterError("seccompiler's program has no arch check first".into()))?;
    let mut program = Vec::with_capacity(compiled.len() + 2 * listed.len() + 10);
    program.extend_from_slice(arch_check);
    // Load the number; `openat2` is missing as far as the command can tell.
    program.push(statement(LOAD_WORD, SECCOMP_DATA_NR));
    program.push(jump(
        libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
        SYS_OPENAT2,
        0,
        1,
    ));
    program.push(statement(
        libc::BPF_RET | libc::BPF_K,
        libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
    ));
    if cfg!(target_arch = "x86_64") {
        // An x32 number is refused, any other goes on to the filter.
        program.push(jump(
            libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K,
            X32_SYSCALL_BIT,
            0,
            1,
        ));
        program.push(statement(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ));
    }
    program.extend(dispatch(&listed)?);
    program.extend(compiled);
    Ok(program)
}

/// `BPF_LD | BPF_W | BPF_ABS`: load a word of `struct seccomp_data`.
const LOAD_WORD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
/// Offsets in `struct seccomp_data`: the system call's number, and the architecture.
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;

/// Where a jump of the dispatch lands.
#[derive(Clone, Copy)]
enum Landing {
    /// An instruction of the dispatch, by index.
    At(usize),
    /// `return allow`, right after the dispatch's last test.
    Allow,
    /// The listed calls' rules, right after that.
    Rules,
}

/// A test of the dispatch before its jumps are resolved.
struct Test {
    code: u32,
    number: u32,
    if_true: Landing,
    if_false: Landing,
}

/// Most system calls (every one without a rule) are allowed after a binary search on the
/// number, in about `log2(listed)` tests; only the listed ones walk seccompiler's chain of
/// rules, which tests each listed number in turn. The kernel runs every number through the
/// whole program once when the filter is installed (to cache the calls it always allows), so
/// the chain alone made each confined spawn 0.2 ms slower. `listed` is sorted and distinct.
fn dispatch(listed: &[u32]) -> Result<Vec<libc::sock_filter>, FilterError> {
    fn search(listed: &[u32], tests: &mut Vec<Test>) {
        if listed.len() <= 3 {
            for (index, number) in listed.iter().enumerate() {
                let next = if index + 1 == listed.len() {
                    Landing::Allow
                } else {
                    Landing::At(tests.len() + 1)
                };
                tests.push(Test {
                    code: libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
                    number: *number,
                    if_true: Landing::Rules,
                    if_false: next,
                });
            }
            return;
        }
        let middle = listed.len() / 2;
        let split = tests.len();
        tests.push(Test {
            code: libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K,
            number: listed[middle],
            if_true: Landing::Allow,
            if_false: Landing::At(split + 1),
        });
        search(&listed[..middle], tests);
        tests[split].if_true = Landing::At(tests.len());
        search(&listed[middle..], tests);
    }
    let mut tests = Vec::new();
    search(listed, &mut tests);
    let allow = tests.len();
    let offset = |from: usize, landing: Landing| -> Result<u8, FilterError> {
        let to = match landing {
            Landing::At(index) => index,
            Landing::Allow => allow,
            Landing::Rules => allow + 1,
        };
        u8::try_from(to - from - 1)
            .map_err(|_| FilterError(format!("a dispatch jump of {} is too far", to - from)))
    };
    let mut program = tests
        .iter()
        .enumerate()
        .map(|(index, test)| {
            Ok(jump(
                test.code,
                test.number,
                offset(index, test.if_true)?,
                offset(index, test.if_false)?,
            ))
        })
        .collect::<Result<Vec<_>, FilterError>>()?;
    program.push(statement(
        libc::BPF_RET | libc::BPF_K,
        libc::SECCOMP_RET_ALLOW,
    ));
    Ok(program)
}

fn statement(code: u32, k: u32) -> libc::sock_filter {
    jump(code, k, 0, 0)
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: u16::try_from(code).unwrap_or(u16::MAX),
        jt,
        jf,
        k,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_builds_for_both_network_choices_and_is_small() {
        let open = program(InternetSockets::Allowed, true).unwrap();
        let closed = program(InternetSockets::Refused, true).unwrap();
        // Far below the kernel's 4096; a syscall walks about two instructions per listed call.
        assert!(
            open.len() < 500 && closed.len() < 500,
            "{} {}",
            open.len(),
            closed.len()
        );
        assert_ne!(open.len(), closed.len(), "the families differ");
        let as_user = program(InternetSockets::Allowed, false).unwrap();
        assert!(
            as_user.len() < open.len(),
            "setgid bits refused only for root"
        );
    }

    /// A `struct seccomp_data` as the filter reads it.
    struct Call {
        arch: u32,
        number: u32,
        args: [u64; 6],
    }

    impl Call {
        fn word(&self, offset: u32) -> u32 {
            match offset {
                0 => self.number,
                4 => self.arch,
                16..=63 if offset.is_multiple_of(4) => {
                    let arg = self.args[(offset as usize - 16) / 8];
                    if offset.is_multiple_of(8) {
                        arg as u32
                    } else {
                        (arg >> 32) as u32
                    }
                }
                other => panic!("the filter loads offset {other}"),
            }
        }
    }

    /// Run `program` on `call` as the kernel would: (its return value, instructions run).
    fn run(program: &[libc::sock_filter], call: &Call) -> (u32, usize) {
        let (mut pc, mut accumulator, mut steps) = (0usize, 0u32, 0usize);
        loop {
            let instruction = program[pc];
            steps += 1;
            let code = u32::from(instruction.code);
            let k = instruction.k;
            pc += 1;
            let condition = match code {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    accumulator = call.word(k);
                    continue;
                }
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => {
                    accumulator &= k;
                    continue;
                }
                c if c == libc::BPF_RET | libc::BPF_K => return (k, steps),
                c if c == libc::BPF_JMP | libc::BPF_JA => {
                    pc += k as usize;
                    continue;
                }
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => accumulator == k,
                c if c == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K => accumulator >= k,
                c if c == libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K => accumulator > k,
                c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => accumulator & k != 0,
                other => panic!("instruction {other:#x} is not interpreted here"),
            };
            pc += usize::from(if condition {
                instruction.jt
            } else {
                instruction.jf
            });
        }
    }

    /// Every argument shape a rule looks at, and some it must not care about.
    fn argument_shapes() -> Vec<[u64; 6]> {
        let mut shapes = vec![[0; 6]];
        for family in [
            libc::AF_UNIX,
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
            libc::AF_PACKET,
            libc::AF_BLUETOOTH,
            libc::AF_ALG,
        ] {
            shapes.push([family as u64, 0, 0, 0, 0, 0]);
        }
        let setuid = u64::from(libc::S_ISUID | 0o755);
        let setgid = u64::from(libc::S_ISGID | 0o755);
        let creating = (libc::O_CREAT | libc::O_WRONLY) as u64;
        let tmpfile = libc::O_TMPFILE as u64;
        for bits in [setuid, setgid, 0o644] {
            for flags in [0, creating, tmpfile] {
                shapes.push([3, bits, bits, bits, 0, 0]);
                shapes.push([3, flags, bits, bits, 0, 0]);
                shapes.push([3, bits, flags, bits, 0, 0]);
            }
        }
        for request in [libc::TIOCSTI, libc::TIOCLINUX, libc::FIONREAD] {
            shapes.push([1, request, 0, 0, 0, 0]);
            shapes.push([1, request | (1 << 32), 0, 0, 0, 0]);
        }
        shapes
    }

    #[test]
    fn the_dispatch_decides_every_call_as_the_rules_alone_do_and_allows_most_at_once() {
        let native: seccompiler::TargetArch = std::env::consts::ARCH.try_into().unwrap();
        for (internet, root) in [
            (InternetSockets::Allowed, true),
            (InternetSockets::Refused, false),
        ] {
            let full = program(internet, root).unwrap();
            let (listed, rules) = rules_program(internet, root).unwrap();
            let native_arch = rules[1].k;
            let mut slowest_unlisted = 0;
            for arch in [native_arch, 0x4000_0003] {
                for number in (0..=600).chain([X32_SYSCALL_BIT, X32_SYSCALL_BIT + 1]) {
                    for args in argument_shapes() {
                        let call = Call { arch, number, args };
                        let (decided, steps) = run(&full, &call);
                        let expected = if arch != native_arch {
                            libc::SECCOMP_RET_KILL_PROCESS
                        } else if number == SYS_OPENAT2 {
                            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
                        } else if number >= X32_SYSCALL_BIT {
                            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32
                        } else {
                            run(&rules, &call).0
                        };
                        assert_eq!(
                            decided, expected,
                            "{native:?} call {number} on arch {arch:#x} with {args:?}"
                        );
                        if arch == native_arch && !listed.contains(&number) {
                            slowest_unlisted = slowest_unlisted.max(steps);
                        }
                    }
                }
            }
            // The kernel walks the program for every number when it installs it: a call with
            // no rule is allowed within about log2(listed) tests, not after every listed one.
            assert!(
                slowest_unlisted <= 16,
                "a call without a rule ran {slowest_unlisted} instructions"
            );
        }
    }
}
