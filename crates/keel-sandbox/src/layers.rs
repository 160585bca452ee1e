//! The kernel features a confined command can get, and what they add up to.
//!
//! Invariants:
//! - "Enforced" (`meet_minimum`) means Landlock file rules (ABI 2: renames across
//!   directories), seccomp, a user and mount
//!   namespace (hidden and protected paths, everything else read-only), and isolation from
//!   keel: Landlock's scoping (ABI 6), or a PID and a network namespace. With the network
//!   on there is no network namespace, and nothing but scoping keeps a command from the
//!   host's abstract sockets (an X server: keystrokes into any window), so ABI 6 is the least.
//! - `without` can only take layers away, never add one.

/// The kernel features a confined command can get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layers {
    /// The Landlock ABI (0: none).
    pub landlock_abi: i32,
    pub seccomp: bool,
    /// A user namespace, and with it a mount namespace (hidden paths, read-only protected
    /// paths, the private `/tmp` and `/dev/shm`).
    pub user_namespace: bool,
    /// A PID namespace with its own `/proc`.
    pub pid_namespace: bool,
    /// A network namespace with its own loopback.
    pub net_namespace: bool,
    pub ipc_namespace: bool,
}

impl Layers {
    /// Nothing at all.
    pub const NONE: Layers = Layers {
        landlock_abi: 0,
        seccomp: false,
        user_namespace: false,
        pid_namespace: false,
        net_namespace: false,
        ipc_namespace: false,
    };

    /// Whether these layers meet the minimum of an enforced sandbox: Landlock file rules,
    /// seccomp, a mount namespace (without it nothing is hidden, nothing protected, and no
    /// metadata change is refused outside the writable roots), and isolation from keel.
    /// `network_on`: the command reaches the host's network (and its abstract sockets).
    pub fn meet_minimum(&self, network_on: bool) -> bool {
        self.landlock_abi >= 2
            && self.seccomp
            && self.user_namespace
            && (self.landlock_abi >= 6 || (!network_on && self.pid_namespace && self.net_namespace))
    }

    /// What is missing, in words (empty when nothing is), for a command with the network on
    /// or off.
    pub fn missing(&self, network_on: bool) -> Vec<String> {
        let mut missing = Vec::new();
        if self.landlock_abi < 1 {
            missing.push("Landlock (file rules)".to_string());
        } else if self.landlock_abi < 2 {
            missing.push(
                "Landlock ABI 2 (Linux 5.19: renames and links across directories; ABI 1 \
                 refuses them all)"
                    .to_string(),
            );
        } else if self.landlock_abi < 6 {
            missing.push(if network_on {
                format!(
                    "Landlock scoping (ABI 6; this kernel has ABI {}): with the network on, \
                     nothing else keeps a command from the host's abstract sockets, an X \
                     server's among them",
                    self.landlock_abi
                )
            } else {
                format!(
                    "Landlock scoping of signals and abstract sockets (ABI 6; this kernel has \
                     ABI {})",
                    self.landlock_abi
                )
            });
        }
        if !self.seccomp {
            missing.push("seccomp".to_string());
        }
        if !self.user_namespace {
            missing.push(
                "user namespaces (no hidden paths, no read-only .git hooks, no private /tmp)"
                    .to_string(),
            );
        } else {
            if !self.pid_namespace {
                missing.push("a PID namespace (other processes stay visible)".to_string());
            }
            if !self.net_namespace {
                missing.push(
                    "a network namespace (network off is Landlock TCP rules and no internet \
                     sockets)"
                        .to_string(),
                );
            }
            if !self.ipc_namespace {
                missing.push("an IPC namespace".to_string());
            }
        }
        missing
    }

    /// What applies, in words.
    pub fn applied(&self) -> Vec<String> {
        let mut applied = Vec::new();
        if self.landlock_abi >= 1 {
            applied.push(format!(
                "Landlock ABI {}: file rules{}{}",
                self.landlock_abi,
                if self.landlock_abi >= 4 {
                    ", TCP rules"
                } else {
                    ""
                },
                if self.landlock_abi >= 6 {
                    ", scoping (no signals, ptrace or abstract sockets outside)"
                } else {
                    ", no ptrace outside"
                }
            ));
        }
        if self.seccomp {
            applied.push(
                "seccomp: socket families, io_uring, bpf, perf, keyring and mount calls refused"
                    .to_string(),
            );
        }
        if self.user_namespace {
            applied.push(
                "user and mount namespaces: hidden paths, read-only protected paths, private \
                 /tmp and /dev/shm"
                    .to_string(),
            );
        }
        if self.pid_namespace {
            applied.push(
                "PID namespace: its own /proc, no other process visible, all die with it"
                    .to_string(),
            );
        }
        if self.net_namespace {
            applied.push("network namespace: its own loopback when the network is off".into());
        }
        if self.ipc_namespace {
            applied.push("IPC namespace".into());
        }
        applied
    }

    /// What both have (a caller may ask for fewer layers than the kernel has, never more).
    pub fn intersect(&self, other: &Layers) -> Layers {
        Layers {
            landlock_abi: self.landlock_abi.min(other.landlock_abi),
            seccomp: self.seccomp && other.seccomp,
            user_namespace: self.user_namespace && other.user_namespace,
            pid_namespace: self.pid_namespace && other.pid_namespace,
            net_namespace: self.net_namespace && other.net_namespace,
            ipc_namespace: self.ipc_namespace && other.ipc_namespace,
        }
    }

    /// These layers without the ones named in `unsupported` (see `UNSUPPORTED_ENV`).
    pub fn without(mut self, unsupported: &str) -> Layers {
        for name in unsupported.split(',').map(str::trim) {
            match name {
                "landlock" => self.landlock_abi = 0,
                // A kernel before Linux 6.12: Landlock without scoping.
                "landlock-scoping" => self.landlock_abi = self.landlock_abi.min(5),
                "seccomp" => self.seccomp = false,
                "userns" => {
                    self.user_namespace = false;
                    self.pid_namespace = false;
                    self.net_namespace = false;
                    self.ipc_namespace = false;
                }
                "pidns" => self.pid_namespace = false,
                "netns" => self.net_namespace = false,
                "ipcns" => self.ipc_namespace = false,
                _ => {}
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minimum_needs_landlock_seccomp_and_isolation_from_keel() {
        let full = Layers {
            landlock_abi: 7,
            seccomp: true,
            user_namespace: true,
            pid_namespace: true,
            net_namespace: true,
            ipc_namespace: true,
        };
        assert!(full.meet_minimum(false) && full.missing(false).is_empty());
        assert!(!full.without("landlock").meet_minimum(false));
        assert!(!full.without("seccomp").meet_minimum(false));
        let old_kernel = Layers {
            landlock_abi: 4,
            ..full
        };
        assert!(
            old_kernel.meet_minimum(false),
            "namespaces isolate it from keel"
        );
        assert!(!old_kernel.without("netns").meet_minimum(false));
        assert!(
            !full.without("userns").meet_minimum(false),
            "no hidden or protected path without a mount namespace"
        );
        assert!(
            full.without("pidns").meet_minimum(false),
            "scoping isolates it"
        );
        assert!(full.without("userns").missing(false)[0].contains("user namespaces"));
        assert!(full.without("landlock").missing(false)[0].contains("Landlock"));
        // With the network on, only scoping keeps the host's abstract sockets out of reach.
        assert!(full.meet_minimum(true));
        assert!(!old_kernel.meet_minimum(true));
        assert!(!full.without("landlock-scoping").meet_minimum(true));
        assert!(full.without("landlock-scoping").meet_minimum(false));
        let said = old_kernel.missing(true);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("abstract sockets"), "{said:?}");
    }
}
