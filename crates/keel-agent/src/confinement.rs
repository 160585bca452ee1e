//! A session's sandbox: built when the session opens, with its own temp dir, and the
//! permission decision for commands that depends on it (docs/sandbox.md).
//!
//! Invariants:
//! - The temp dir is `$KEEL_HOME/tmp/<session>`, owner-only, created when the session opens
//!   and removed when its controller is dropped (and `$KEEL_HOME/tmp` with the last one).
//! - In `read-only` and `plan` mode a command runs, without asking unless a rule says so, only under the
//!   read-only sandbox and only where it is enforced; otherwise it is refused, saying why.
//! - Where the sandbox cannot be enforced (and the user did not choose `off`), no command runs
//!   without a person's approval: an `allow` becomes `ask` (and a headless run, which cannot
//!   ask, refuses).
//! - In `ask` mode, where the sandbox is enforced, a command line on the read-only list
//!   (`keel_tools::read_only_commands`) is decided as `Reach::ReadOnlyCommand`: unless a rule
//!   or `ask_read_only_commands` asks, it runs without a question under the read-only sandbox
//!   (`Decision::AllowReadOnly`). Never where the sandbox is below the minimum or off.
//! - Deny rules win everywhere, as before.

use keel_sandbox::{Enforcement, Places, Sandbox, SandboxMode, SandboxSettings, TempDir};
use keel_tools::read_only_commands::{self, ReadPlaces};
use keel_tools::{
    CommandSandbox, Decision, PermissionMode, PermissionPolicy, Reach, WorkspaceGuard,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a surface says about confining the session's commands.
#[derive(Clone, Debug)]
pub struct SandboxSetup {
    pub settings: SandboxSettings,
    pub keel_home: PathBuf,
    /// The user's home directory (`~` in settings, the credential stores).
    pub home: Option<PathBuf>,
    /// Files a user layer refers to (`--token-file`): hidden like credentials.
    pub referenced_files: Vec<PathBuf>,
}

/// The session's command sandbox and its temp dir.
pub(crate) fn open(
    setup: &SandboxSetup,
    workspace: &Path,
    extra_dirs: &[PathBuf],
    session: &str,
    permission_mode: PermissionMode,
) -> std::io::Result<(CommandSandbox, TempDir)> {
    let temp = TempDir::create(&setup.keel_home, session)?;
    let places = Places {
        workspace: workspace.to_path_buf(),
        extra_dirs: extra_dirs.to_vec(),
        keel_home: setup.keel_home.clone(),
        home: setup.home.clone(),
        temp_dir: Some(temp.path().to_path_buf()),
        referenced_files: setup.referenced_files.clone(),
        socket_dirs: Vec::new(),
    };
    let sandbox = Sandbox::new(setup.settings.clone(), places).sharing_namespaces();
    let mode = effective_mode(setup.settings.mode, permission_mode);
    Ok((
        CommandSandbox {
            sandbox: Arc::new(sandbox),
            mode,
        },
        temp,
    ))
}

/// The mode commands run under: the configured one, read-only while keel is in read-only or
/// plan mode (`off` stays off: only the user's settings turn the sandbox off).
pub(crate) fn effective_mode(
    configured: SandboxMode,
    permission_mode: PermissionMode,
) -> SandboxMode {
    match (configured, permission_mode) {
        (SandboxMode::Off, _) => SandboxMode::Off,
        (_, PermissionMode::ReadOnly | PermissionMode::Plan) => SandboxMode::ReadOnly,
        (mode, PermissionMode::Ask | PermissionMode::Auto) => mode,
    }
}

/// Why a command that would otherwise read only is asked about, where the command alone does
/// not say (a path that leads outside through `~`, a link or a glob; git's repository).
pub(crate) fn why_asked(command: &str, guard: &WorkspaceGuard) -> Option<String> {
    use read_only_commands::NotReadOnly;
    match read_only_commands::check(command, &ReadPlaces::from_env(guard)) {
        Err(NotReadOnly::Outside(word)) => Some(format!("`{word}` leads outside the workspace")),
        Err(NotReadOnly::RepositoryOutside) => {
            Some("git would read a repository outside the workspace".into())
        }
        Err(NotReadOnly::GlobToOption(name)) => Some(format!(
            "a glob matches `{name}`, which the program would take as an option"
        )),
        _ => None,
    }
}

/// The decision for a `bash` call running `command` in the workspace `guard` guards.
pub(crate) fn decide_command(
    policy: &PermissionPolicy,
    sandbox: Option<&CommandSandbox>,
    command: &str,
    guard: &WorkspaceGuard,
) -> Decision {
    let Some(sandbox) = sandbox.filter(|sandbox| sandbox.mode != SandboxMode::Off) else {
        return policy.decide("bash", command, Reach::Sensitive);
    };
    let enforcement = sandbox.enforcement();
    let reading_only = policy.mode.only_reads();
    match (reading_only, &enforcement) {
        // Confined to reading: as harmless as a read, so it is decided like one.
        (true, Enforcement::Enforced) => policy.decide("bash", command, Reach::ReadsWorkspace),
        (true, Enforcement::BelowMinimum { missing }) => {
            match policy.decide("bash", command, Reach::ReadsWorkspace) {
                Decision::Deny(reason) => Decision::Deny(reason),
                Decision::Allow | Decision::AllowReadOnly | Decision::Ask => {
                    Decision::Deny(format!(
                        "denied: keel is in {} mode, {}, and this kernel lacks {}",
                        policy.mode.as_str(),
                        crate::recovery::readiness::SANDBOX_DENIAL,
                        missing.join("; ")
                    ))
                }
            }
        }
        (_, Enforcement::BelowMinimum { .. }) => {
            match policy.decide("bash", command, Reach::Sensitive) {
                Decision::Allow => Decision::Ask,
                other => other,
            }
        }
        (false, Enforcement::Enforced)
            if policy.mode == PermissionMode::Ask
                && !policy.asks_read_only_commands()
                && read_only_commands::check(command, &ReadPlaces::from_env(guard)).is_ok() =>
        {
            policy.decide("bash", command, Reach::ReadOnlyCommand)
        }
        (_, Enforcement::Enforced | Enforcement::Off) => {
            policy.decide("bash", command, Reach::Sensitive)
        }
    }
}
