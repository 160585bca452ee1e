//! What this kernel lets keel use, found once per process, and what that means for a policy.
//!
//! Invariants:
//! - Namespaces are not assumed from version numbers or sysctls: each is proven by a probe
//!   spawn that does exactly what a real spawn does with it (maps, a mount, `/proc`, the
//!   loopback), the first time a command is confined; a layer whose probe fails is not used.
//! - `KEEL_SANDBOX_UNSUPPORTED` (a comma list of `landlock`, `seccomp`, `userns`, `pidns`,
//!   `netns`, `ipcns`) makes detection report those layers missing, to show and test the
//!   unsupported-kernel path. It can only take layers away, never add one.
//! - "Enforced" is `Layers::meet_minimum` (Landlock ABI 2+, seccomp, a user and mount
//!   namespace, isolation from keel). Below that a policy is `BelowMinimum`, and the caller
//!   must not run a command as if it were confined.

use crate::SandboxError;
use crate::layers::Layers;
use crate::policy::{Network, SandboxPolicy};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable that hides layers from detection (tests, demonstrations).
pub const UNSUPPORTED_ENV: &str = "KEEL_SANDBOX_UNSUPPORTED";

static DETECTED: OnceLock<Layers> = OnceLock::new();

/// Start detecting on a thread of its own (a session does this once the provider answers its
/// first request, so the probes run while the answer streams: never before the request goes
/// out, and not when the first command waits for them).
pub fn warm_up() {
    if DETECTED.get().is_none() {
        let _ = std::thread::Builder::new()
            .name("keel-sandbox-detect".into())
            .spawn(|| {
                detected();
            });
    }
}

/// Whether this kernel meets the minimum. Landlock's ABI and seccomp are two system calls and
/// can say no at once; a yes is what detection found (the namespaces, and whether Landlock and
/// seccomp really work), never assumed.
/// `network_on`: for a command that reaches the host's network (see `Layers::meet_minimum`).
pub fn meets_minimum(network_on: bool) -> bool {
    let unsupported = std::env::var(UNSUPPORTED_ENV).unwrap_or_default();
    let quick = Layers {
        landlock_abi: crate::confine::landlock_abi(),
        seccomp: crate::confine::seccomp_available(),
        ..Layers::NONE
    }
    .without(&unsupported);
    if quick.landlock_abi < 1 || !quick.seccomp {
        return false;
    }
    detected().meet_minimum(network_on)
}

/// The layers of this kernel (probed once; `KEEL_SANDBOX_UNSUPPORTED` applied).
pub fn detected() -> Layers {
    *DETECTED.get_or_init(|| {
        let unsupported = std::env::var(UNSUPPORTED_ENV).unwrap_or_default();
        let mut layers = Layers {
            landlock_abi: crate::confine::landlock_abi(),
            seccomp: crate::confine::seccomp_available(),
            ..Layers::NONE
        }
        .without(&unsupported);
        // Everything at once first (one spawn, the usual case); one by one if that fails.
        let everything = Layers {
            user_namespace: true,
            pid_namespace: true,
            net_namespace: true,
            ipc_namespace: true,
            ..layers
        }
        .without(&unsupported);
        if probe(&everything).is_ok() {
            return everything;
        }
        // Each namespace is kept only if a probe with it (and those before) runs.
        let steps: [fn(&mut Layers, bool); 4] = [
            |layers, on| layers.user_namespace = on,
            |layers, on| layers.pid_namespace = on,
            |layers, on| layers.net_namespace = on,
            |layers, on| layers.ipc_namespace = on,
        ];
        let wanted = Layers {
            user_namespace: true,
            pid_namespace: true,
            net_namespace: true,
            ipc_namespace: true,
            ..layers
        }
        .without(&unsupported);
        let wants = [
            wanted.user_namespace,
            wanted.pid_namespace,
            wanted.net_namespace,
            wanted.ipc_namespace,
        ];
        for (index, step) in steps.iter().enumerate() {
            if !wants[index] || (index > 0 && !layers.user_namespace) {
                continue;
            }
            let mut trial = layers;
            step(&mut trial, true);
            // Namespaces are proven on their own; Landlock and seccomp after them.
            let bare = Layers {
                landlock_abi: 0,
                seccomp: false,
                ..trial
            };
            if probe(&bare).is_ok() {
                layers = trial;
            }
        }
        if probe(&layers).is_err() {
            // Landlock or seccomp refused in practice: say so rather than fail every command.
            let without_seccomp = Layers {
                seccomp: false,
                ..layers
            };
            layers = if probe(&without_seccomp).is_ok() {
                without_seccomp
            } else {
                Layers {
                    landlock_abi: 0,
                    seccomp: false,
                    ..layers
                }
            };
        }
        layers
    })
}

/// Run `true` under `layers` with a policy that uses each of them; the failure if any.
fn probe(layers: &Layers) -> Result<(), SandboxError> {
    let root = PathBuf::from("/");
    let policy = SandboxPolicy {
        mode: crate::SandboxMode::ReadOnly,
        network: Network::Off,
        workspace: root,
        writable: Vec::new(),
        temp_dir: None,
        forbid_read: Vec::new(),
        read_only: Vec::new(),
        private_tmp: true,
        env: Vec::new(),
        refused_writes: Vec::new(),
        home_dots: None,
        not_to_create: Vec::new(),
    };
    let plan = crate::plan::prepare(&policy, layers, None, None)?;
    let program = ["/bin/true", "/usr/bin/true"]
        .into_iter()
        .find(|path| Path::new(path).exists())
        .unwrap_or("true");
    let mut command = std::process::Command::new(program);
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let crate::plan::Plan {
        prepared, failures, ..
    } = plan;
    crate::confine::install(&mut command, prepared);
    let outcome = crate::spawner_thread::on_lasting_thread(move || command.status());
    match outcome {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(SandboxError::Probe(format!(
            "the probe exited with {status}"
        ))),
        Ok(Err(error)) | Err(error) => Err(match failures.reported() {
            Some((step, source)) => SandboxError::SetUp { step, source },
            None => SandboxError::Io(error),
        }),
    }
}
