//! keel's sandbox: a policy value in, a command confined by the kernel out.
//!
//! Which kernel feature enforces which rule:
//!
//! | rule | enforced by |
//! |---|---|
//! | writes only in the workspace, added dirs, `allow_write`, the temp dir and a few devices | Landlock file rules (ABI 1+; truncation ABI 3+, device ioctls ABI 5+), and the mount namespace's read-only rest |
//! | renames and links cannot move a file out of where it may be written | Landlock `refer` (ABI 2+) |
//! | no permission, owner, time or xattr change outside the writable roots | mount namespace: everything else read-only (Landlock does not cover these) |
//! | `forbid_read` paths (credentials, agents' sockets, keel's own state) unreadable | mount namespace: an empty, closed, read-only tmpfs on a directory; `/dev/null` sealed without devices on a file |
//! | `.git/config`, `.git/hooks`, `.git/info`, `.git/modules`, `.git/worktrees`, `keel.toml`, `.mcp.json`, `.keel/` unchangeable | mount namespace: bound read-only on themselves, their ancestors made mount points (no rename, no `rm -rf`); git redirect files and home startup files a command makes are undone after it (`undo_planted`) |
//! | the session's temp dir is `/tmp`; `/dev/shm` and devpts private; `/run`, `$XDG_RUNTIME_DIR` hidden (the Docker socket, the D-Bus bus) | mount namespace |
//! | no signals to, ptrace of, or `/proc/PID/environ` of keel or its parent | Landlock's ptrace restriction (ABI 1+) and scoping (ABI 6+); a PID namespace with its own `/proc` (keel is not even visible) |
//! | no abstract unix socket outside | Landlock scoping (ABI 6+); a network namespace |
//! | network off: nothing reaches the host's ports or beyond; the command's own loopback works | network namespace (lo only); without one, Landlock TCP rules (ABI 4+) and no internet sockets (seccomp) |
//! | socket families allowlisted; io_uring, bpf, perf, keyring, mount calls, `TIOCSTI` refused; other ABIs killed | seccomp |
//! | no controlling terminal | let go of before exec (`TIOCNOTTY`); a session of its own (`setsid`) where the command's own init starts it |
//! | no nested user namespace (every capability again, in it) | `max_user_namespaces` = 0 in its own |
//! | no privilege gained (setuid, file capabilities) or kept (root) | `no_new_privs`, the capability bounding set emptied, `SECBIT_NOROOT` |
//! | no descriptor keel inherited reaches it | close-on-exec on every descriptor above stderr |
//! | every process of a command dies with it, and with keel | a PID namespace: the session's, whose init kills all that is left in it when the last running command of the session ends (`holders`), or the command's own (an MCP server's, keel's git), all dying with its init; parent-death signals from a thread that lives as long as keel (without a PID namespace, only the command itself has one) |
//! | a session's commands cost a fraction of making all this each time | the namespaces, mounts and `/proc` are made once per session and plan, by a holder process, and joined (`holders`, `confine::joined`) |
//!
//! Invariants:
//! - `Sandbox::confine` either arranges every layer its policy uses on this kernel or fails:
//!   a command never runs with less than `enforcement` says.
//! - A `SandboxMode::Off` session confines nothing, and says so (`Enforcement::Off`).
//! - Below the minimum (`Enforcement::BelowMinimum`) `confine` still applies what the kernel
//!   has; deciding whether to run at all is the caller's (ask, or refuse).

mod confine;
mod exec;
mod filter;
mod holders;
mod home_dots;
mod layers;
mod mounts;
mod paths;
mod plan;
mod planted_code;
mod policy;
mod sockets_and_links;
mod spawner_thread;
mod support;
mod temp;

pub use confine::{keep_file_limit, set_children_file_limit};
pub use filter::FilterError;
pub use home_dots::HomeDots;
pub use layers::Layers;
pub use plan::Failures;
pub use planted_code::{Planted, Undo, Undone};
pub use policy::{
    GIT_REDIRECTS, HOME_SECRETS, KEEL_HOME_PRIVATE, Network, PROTECTED_IN_ROOT, Places,
    ProjectWrite, Protected, RUNTIME_DIRS, STARTUP_IN_HOME, SYSTEM_SECRETS, SandboxMode,
    SandboxPolicy, SandboxSettings, project_write_target,
};
pub use spawner_thread::on_lasting_thread;
pub use support::{UNSUPPORTED_ENV, detected, meets_minimum, warm_up};
pub use temp::TempDir;

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("keel sandbox: {0}")]
    Filter(#[from] FilterError),
    #[error("keel sandbox: the Landlock rules could not be made: {0}")]
    Landlock(String),
    #[error("keel sandbox: `{}` cannot be used: {reason}", path.display())]
    Path { path: PathBuf, reason: String },
    #[error("keel sandbox: setting up the sandbox failed while {step}: {source}")]
    SetUp {
        step: String,
        #[source]
        source: std::io::Error,
    },
    #[error("keel sandbox: the probe failed: {0}")]
    Probe(String),
    #[error("keel sandbox: {0}")]
    Io(std::io::Error),
}

/// Where a session's commands stand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Enforcement {
    /// `mode = "off"`: commands run unconfined, by the user's choice.
    Off,
    /// Confined by at least Landlock file rules, seccomp, a user and mount namespace and
    /// isolation from keel (what else applies: `detected`).
    Enforced,
    /// This kernel cannot confine commands as the policy says; what it lacks.
    BelowMinimum { missing: Vec<String> },
}

impl Enforcement {
    pub fn is_enforced(&self) -> bool {
        matches!(self, Self::Enforced)
    }

    /// One line for a banner or a status line.
    pub fn summary(&self, mode: SandboxMode) -> String {
        match self {
            Self::Off => "sandbox off: commands run unconfined".into(),
            Self::Enforced => format!("sandbox {}", mode.name()),
            Self::BelowMinimum { missing } => format!(
                "sandbox {} NOT enforced: this kernel lacks {}",
                mode.name(),
                missing.join("; ")
            ),
        }
    }
}

/// How an MCP stdio server is confined (`[mcp_servers.NAME] sandbox`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerConfinement {
    /// Read anywhere but `forbid_read`; write its temp dir, `~/.npm` and `~/.cache`; network on.
    #[default]
    Mcp,
    /// Like a command of the session.
    WorkspaceWrite,
    /// Unconfined (the user's own choice only).
    Off,
}

impl ServerConfinement {
    pub fn name(self) -> &'static str {
        match self {
            Self::Mcp => "mcp",
            Self::WorkspaceWrite => "workspace-write",
            Self::Off => "off",
        }
    }
}

/// Where MCP servers keep their caches under the `mcp` policy (below `$KEEL_HOME`, one
/// directory per server): npm's (`npx` installs there) and the XDG cache (uv, pip, corepack,
/// go). Never the user's own `~/.npm` and `~/.cache`, which the user's unconfined tools run
/// code from.
pub const SERVER_CACHE: &str = "cache/mcp";

/// The directory name of a server's cache: its name's plain characters and a digest of the
/// whole identity (FNV-1a: stable across builds, which std's hasher is not; no crate needed for
/// a name).
fn server_cache_name(server: &str) -> String {
    let plain: String = server
        .chars()
        .take_while(|c| *c != '\0')
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(32)
        .collect();
    let digest = server
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{plain}-{digest:016x}")
}

/// A session's sandbox: its settings, its places, and the paths protected at its start.
#[derive(Clone, Debug)]
pub struct Sandbox {
    settings: SandboxSettings,
    places: Places,
    /// The policy as resolved when the session started: its roots are fixed then (a command
    /// cannot move the next one's by replacing a directory with a link).
    start: SandboxPolicy,
    /// The git redirect files and startup files absent at the start (`not_to_create`): a
    /// command that creates one has it undone (`undo_planted`).

    /// Whether commands join the session's namespaces (`sharing_namespaces`).
    shares_namespaces: bool,
    /// The namespaces the session's commands join.
    holders: std::sync::Arc<std::sync::Mutex<holders::Holders>>,
    /// A temp dir this sandbox owns (removed with its last clone).
    _owned_temp: Option<std::sync::Arc<TempDir>>,
    /// The directories of the home that hold sockets, found once, the first time a policy is
    /// made (a walk of the home is not for the start-up path).
    found_sockets: std::sync::Arc<std::sync::OnceLock<Vec<PathBuf>>>,
    /// Where the links inside the credential stores lead (a dotfiles repository holding the
    /// real `~/.ssh/id_ed25519`), found once with the sockets: hidden too.
    found_link_targets: std::sync::Arc<std::sync::OnceLock<Vec<PathBuf>>>,
}

/// How deep and how much of the home directory is searched for sockets.
const SOCKET_SEARCH_DEPTH: usize = 3;
const SOCKET_SEARCH_BUDGET: usize = 20_000;
/// Entries looked at in each credential store for links leading out of it.
const LINK_SEARCH_BUDGET: usize = 1_000;

/// A command set up to run confined; explains a failed spawn. Keep it until the command has
/// ended: when the last command of a session's namespaces lets go of its own, what they left
/// behind there is killed (the command too, if it still runs).
#[derive(Debug)]
#[must_use = "keep it until the command has ended: dropping it ends what runs in the session's namespaces"]
pub struct Confinement {
    failures: Option<Failures>,
    mode: SandboxMode,
    _running: Option<holders::Running>,
}

impl Confinement {
    /// Nothing confines the command (`off`).
    fn unconfined(mode: SandboxMode) -> Confinement {
        Confinement {
            failures: None,
            mode,
            _running: None,
        }
    }

    /// The command ended on its own: it was waited for and nobody killed it. What it left
    /// behind in the session's namespaces is looked for more cheaply (see `holders`); a
    /// `Confinement` merely dropped is always swept.
    pub fn ended(self) {
        if let Some(running) = self._running {
            running.ended();
        }
    }

    /// The mode the command runs under.
    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// What a failed spawn of the confined command was doing, if the child said.
    pub fn explain(&self, error: std::io::Error) -> SandboxError {
        match self.failures.as_ref().and_then(Failures::reported) {
            Some((step, source)) => SandboxError::SetUp { step, source },
            None => SandboxError::Io(error),
        }
    }
}

/// What of the session's namespaces a command shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sharing {
    /// Nothing: namespaces of its own (a one-off sandbox, an MCP server).
    Nothing,
    /// The session's network only, with a PID namespace of its own (a background job).
    Network,
    /// A holder's namespaces where one serves its plan, else the session's network.
    All,
}

impl From<bool> for Sharing {
    fn from(shared: bool) -> Sharing {
        if shared {
            Sharing::All
        } else {
            Sharing::Nothing
        }
    }
}

impl Sandbox {
    pub fn new(settings: SandboxSettings, places: Places) -> Sandbox {
        let start = SandboxPolicy::resolve(&settings, &places, SandboxMode::WorkspaceWrite);
        Sandbox {
            settings,
            places,
            start,
            shares_namespaces: false,
            holders: std::sync::Arc::default(),
            _owned_temp: None,
            found_sockets: std::sync::Arc::default(),
            found_link_targets: std::sync::Arc::default(),
        }
    }

    /// A sandbox whose temp dir is `temp`, removed when the last clone of it is dropped.
    pub fn owning_temp(settings: SandboxSettings, places: Places, temp: TempDir) -> Sandbox {
        let places = Places {
            temp_dir: Some(temp.path().to_path_buf()),
            ..places
        };
        Sandbox {
            _owned_temp: Some(std::sync::Arc::new(temp)),
            ..Sandbox::new(settings, places)
        }
    }

    /// Commands confined by `confine` join namespaces made once, for the first command with
    /// their plan, by a holder process (see `holders`): a fraction of making them each time.
    /// They live as long as the sandbox or a command's `Confinement`, whichever is last. For a
    /// session's sandbox; a one-off command gains nothing.
    pub fn sharing_namespaces(self) -> Sandbox {
        Sandbox {
            shares_namespaces: true,
            ..self
        }
    }

    /// The mode the settings choose.
    pub fn mode(&self) -> SandboxMode {
        self.settings.mode
    }

    pub fn settings(&self) -> &SandboxSettings {
        &self.settings
    }

    pub fn places(&self) -> &Places {
        &self.places
    }

    /// The policy in `mode` now (hidden paths found again; protected paths as at the start).
    pub fn policy(&self, mode: SandboxMode) -> SandboxPolicy {
        let sockets = self.found_sockets.get_or_init(|| {
            let Some(home) = &self.places.home else {
                return Vec::new();
            };
            let skip = [self.places.workspace.clone()];
            sockets_and_links::socket_dirs_in(
                home,
                &skip,
                SOCKET_SEARCH_DEPTH,
                SOCKET_SEARCH_BUDGET,
            )
        });
        let places = Places {
            socket_dirs: self
                .places
                .socket_dirs
                .iter()
                .chain(sockets)
                .cloned()
                .collect(),
            ..self.places.clone()
        };
        let mut policy = self.start.with_mode(mode);
        policy.forbid_read = policy.hidden_now(&self.settings, &places);
        policy.protect_home_now();
        let targets = self.found_link_targets.get_or_init(|| {
            sockets_and_links::secret_link_targets(&self.settings, &self.places, LINK_SEARCH_BUDGET)
        });
        // Never one holding a root (it would hide the workspace itself).
        let roots: Vec<&PathBuf> = std::iter::once(&policy.workspace)
            .chain(&policy.writable)
            .chain(policy.temp_dir.iter())
            .collect();
        policy.forbid_read.extend(
            targets
                .iter()
                .filter(|target| !roots.iter().any(|root| root.starts_with(target)))
                .cloned(),
        );
        policy
    }

    /// The policy of keel's own git runs (checkpoint snapshots of the workspace): reading what
    /// commands read, writing only `store` (a directory under keel's home, hidden from
    /// commands), no network.
    pub fn snapshot_policy(&self, store: &Path) -> SandboxPolicy {
        let mut policy = self.policy(SandboxMode::ReadOnly);
        // A root like any other: a hidden directory holding it stays hidden around it.
        policy.writable = vec![store.to_path_buf()];
        // The repository may be above the workspace, under the host's /tmp: git must see it.
        policy.private_tmp = false;
        policy
    }

    /// The policy of an MCP stdio server (`None`: it runs unconfined). `server` names it
    /// (name, where declared, command): under the `mcp` policy each server has a cache of its
    /// own, so one cannot leave code there for another to run.
    pub fn server_policy(
        &self,
        confinement: ServerConfinement,
        server: &str,
    ) -> Option<SandboxPolicy> {
        let mut policy = match confinement {
            ServerConfinement::Off => return None,
            ServerConfinement::WorkspaceWrite => self.policy(SandboxMode::WorkspaceWrite),
            ServerConfinement::Mcp => {
                let mut policy = self.policy(SandboxMode::ReadOnly);
                let cache = self
                    .places
                    .keel_home
                    .join(SERVER_CACHE)
                    .join(server_cache_name(server));
                let npm = cache.join("npm");
                let xdg = cache.join("xdg");
                let _ = keel_types::private_files::create_private_dir(
                    &self.places.keel_home.join("cache"),
                );
                if std::fs::create_dir_all(&npm).is_ok()
                    && std::fs::create_dir_all(&xdg).is_ok()
                    && let Ok(cache) = cache.canonicalize()
                {
                    policy.env = vec![
                        ("npm_config_cache", cache.join("npm").display().to_string()),
                        ("XDG_CACHE_HOME", cache.join("xdg").display().to_string()),
                    ];
                    policy.writable = vec![cache];
                }
                policy.network = Network::On;
                policy
            }
        };
        // A server's declaration may name files under /tmp: the host's stays readable, but
        // for the directories there that hold sockets (X11, tmux, agents).
        policy.private_tmp = false;
        let roots: Vec<PathBuf> = std::iter::once(policy.workspace.clone())
            .chain(policy.writable.iter().cloned())
            .chain(policy.temp_dir.iter().cloned())
            .collect();
        for dir in sockets_and_links::socket_dirs_in(Path::new("/tmp"), &roots, 2, 20_000) {
            if !roots.iter().any(|root| root.starts_with(&dir)) {
                policy.forbid_read.push(dir);
            }
        }
        // Kerberos ticket caches: a ticket is the user's identity on the network.
        if let Ok(children) = std::fs::read_dir("/tmp") {
            policy.forbid_read.extend(
                children
                    .flatten()
                    .filter(|child| child.file_name().to_string_lossy().starts_with("krb5cc"))
                    .map(|child| child.path()),
            );
        }
        Some(policy)
    }

    /// What a command could plant, as it is now (the paths it must not create that are
    /// absent, the home's dot entries): take this just before a command, and give it to
    /// `undo_planted` after.
    pub fn planted_absent_now(&self) -> Planted {
        planted_code::before(&self.start.not_to_create, self.start.home_dots.as_ref())
    }

    /// Undo what a command made, of `before` (`planted_absent_now`), that would run code
    /// outside the sandbox later (see `planted`); each with how, or why not.
    pub fn undo_planted(&self, before: &Planted) -> Vec<Undone> {
        planted_code::undo(before)
    }

    /// What a session in a writable home is told at its start (`home_dots`), if it is one.
    pub fn home_notice(&self) -> Option<String> {
        self.start.home_dots.as_ref().map(HomeDots::notice)
    }

    /// Where commands stand in `mode` on this kernel.
    pub fn enforcement(&self, mode: SandboxMode) -> Enforcement {
        if mode == SandboxMode::Off {
            return Enforcement::Off;
        }
        let network_on = self.settings.allow_network;
        if meets_minimum(network_on) {
            Enforcement::Enforced
        } else {
            Enforcement::BelowMinimum {
                missing: detected().missing(network_on),
            }
        }
    }

    /// Arrange for `command` to run confined in `mode` (nothing when `Off`). Spawn it with
    /// `on_lasting_thread`, so that it dies with keel; change nothing of it after this (a
    /// command that joins the session's namespaces runs its program, arguments and
    /// environment as they are now), and keep the `Confinement` until it has ended.
    pub fn confine(
        &self,
        command: &mut std::process::Command,
        mode: SandboxMode,
    ) -> Result<Confinement, SandboxError> {
        if mode == SandboxMode::Off {
            return Ok(Confinement::unconfined(mode));
        }
        self.confine_with(command, mode, &detected())
    }

    /// `confine` with at most `layers` (what the kernel has and `layers` allow): for measuring
    /// each layer's cost, never for adding one.
    pub fn confine_with(
        &self,
        command: &mut std::process::Command,
        mode: SandboxMode,
        layers: &Layers,
    ) -> Result<Confinement, SandboxError> {
        if mode == SandboxMode::Off {
            return Ok(Confinement::unconfined(mode));
        }
        let layers = detected().intersect(layers);
        self.confine_under(command, &self.policy(mode), &layers, self.shares_namespaces)
    }

    /// Arrange for `command` to run confined by `policy` (an MCP server's, say). It gets
    /// namespaces of its own: a server lives long, and shares no loopback with the session's
    /// commands or another server.
    pub fn confine_policy(
        &self,
        command: &mut std::process::Command,
        policy: &SandboxPolicy,
    ) -> Result<Confinement, SandboxError> {
        self.confine_under(command, policy, &detected(), false)
    }

    /// Arrange for `command` to run as a background job of the session, confined by `mode`:
    /// in the session's network (a server it runs is reached by the session's other commands,
    /// whatever their mode) but in a PID namespace of its own — its own kill domain: the end
    /// of a foreground command never sweeps it, and the end of its process (the namespace's
    /// init) ends everything it started. Without a PID namespace (an old kernel) it gets a
    /// network of its own too.
    pub fn confine_job(
        &self,
        command: &mut std::process::Command,
        mode: SandboxMode,
    ) -> Result<Confinement, SandboxError> {
        if mode == SandboxMode::Off {
            return Ok(Confinement::unconfined(mode));
        }
        let layers = detected();
        let policy = self.policy(mode);
        // The session's network is made by its first holder: made now if no command ran yet.
        if self.shares_namespaces && holders::anchor(&self.holders).is_none() {
            let mut first = plan::prepare(&policy, &layers, None, None)?;
            drop(holders::join(&self.holders, &mut first, &policy, &layers)?);
        }
        self.confine_under(command, &policy, &layers, Sharing::Network)
    }

    /// `shared`: the command joins the session's namespaces (a holder's, made for the first
    /// command with this plan) where it would make a PID namespace; without one, a command's
    /// survivors would stay in the namespaces the next commands use, so each makes its own.
    fn confine_under(
        &self,
        command: &mut std::process::Command,
        policy: &SandboxPolicy,
        layers: &Layers,
        shared: impl Into<Sharing>,
    ) -> Result<Confinement, SandboxError> {
        let sharing = shared.into();
        let shared = sharing == Sharing::All;
        let mode = policy.mode;
        if let Some(moved) = policy.moved_root() {
            return Err(SandboxError::Path {
                path: moved.to_path_buf(),
                reason: "it no longer leads where it did when the session started (a link \
                         replaced a directory on its path); keel confines nothing to where it \
                         leads now"
                    .into(),
            });
        }
        // A session's commands share its network namespace, whatever their mode (a holder
        // made it; a command that makes its own namespaces enters it too).
        let anchor = (sharing != Sharing::Nothing && self.shares_namespaces)
            .then(|| holders::anchor(&self.holders))
            .flatten();
        let mut plan = plan::prepare(policy, layers, None, anchor)?;

        for (name, value) in &plan.env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        // The policy's places, unless the declaration chose its own (which writes only
        // where the policy lets it anyway).
        for (name, value) in &policy.env {
            if !command.get_envs().any(|(set, _)| set == *name) {
                command.env(name, value);
            }
        }
        let running = if shared {
            holders::join(&self.holders, &mut plan, policy, layers)?
        } else {
            None
        };
        if running.is_some() {
            plan.prepared.exec = Some(exec::Exec::of(command)?);
        }
        confine::install(command, plan.prepared);
        Ok(Confinement {
            failures: Some(plan.failures),
            mode,
            _running: running,
        })
    }

    /// The process ids of the session's namespace holders alive (keel's children).
    pub fn namespace_holder_pids(&self) -> Vec<u32> {
        self.holders
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .alive_pids()
    }

    /// How many namespace holders the session has started.
    pub fn namespace_holders(&self) -> usize {
        self.holders
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .count()
    }

    /// What a command gets in `mode`, line by line (for `keel sandbox` and the banner).
    pub fn describe(&self, mode: SandboxMode) -> Vec<String> {
        let enforcement = self.enforcement(mode);
        let mut lines = vec![enforcement.summary(mode)];
        if mode == SandboxMode::Off {
            return lines;
        }
        let policy = self.policy(mode);
        let list = |paths: &mut dyn Iterator<Item = &PathBuf>| {
            let shown: Vec<String> = paths.map(|path| path.display().to_string()).collect();
            if shown.is_empty() {
                "(none)".to_string()
            } else {
                shown.join(", ")
            }
        };
        lines.push(format!(
            "writes: {}",
            list(&mut policy.writable.iter().chain(policy.temp_dir.iter()))
        ));
        lines.push(format!("hidden: {}", list(&mut policy.forbid_read.iter())));
        lines.push(format!(
            "read-only: {}",
            list(&mut policy.read_only.iter().map(|protected| &protected.path))
        ));
        for (entry, target) in &policy.refused_writes {
            lines.push(format!(
                "refused: the project's allow_write {} leads to {}, outside the workspace",
                entry.display(),
                target.display()
            ));
        }
        lines.push(format!(
            "network: {}",
            match policy.network {
                Network::Off => "off (the command's own loopback only)",
                Network::On => "on",
            }
        ));
        let layers = detected();
        lines.extend(
            layers
                .applied()
                .into_iter()
                .map(|line| format!("kernel: {line}")),
        );
        lines.extend(
            layers
                .missing(self.settings.allow_network)
                .into_iter()
                .map(|line| format!("missing: {line}")),
        );
        lines
    }
}
