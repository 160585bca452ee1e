//! `keel sandbox [--mode M] -- CMD`: one command under the session's sandbox policy, with what
//! is enforced printed first — for a user looking into a refusal.
//!
//! Invariants:
//! - The policy is the one a session in this workspace would get (same configuration, same
//!   trust decision, same `--add-dir`), with a temp dir of its own that is removed after.
//! - The command never sees keel's secrets, like a tool's command.
//! - keel exits with the command's exit code (128 + N for a signal N), after undoing (and
//!   naming) the git redirect files the command made, as after a tool's command.
//! - Below the minimum the command still runs, with what the kernel has, and that is said
//!   first: this is a tool for looking, which a user starts by hand.

use crate::cli::{CommonArgs, SandboxArgs};
use crate::{Outcome, settings};
use keel_render::visible_line;
use keel_sandbox::{Places, Sandbox, SandboxMode};

pub fn run(common: &CommonArgs, args: &SandboxArgs) -> anyhow::Result<Outcome> {
    let workspace = settings::workspace(common)?;
    let config = settings::load_config(common, &workspace)?;
    let setup = settings::sandbox_setup(&config)?;
    let mode = args
        .mode
        .map_or(setup.settings.mode, crate::cli::SandboxModeArg::mode);
    let temp = keel_sandbox::TempDir::create(
        &setup.keel_home,
        &format!("sandbox-{}", std::process::id()),
    )?;
    let extra_dirs = common
        .add_dirs
        .iter()
        .map(|dir| workspace.join(dir))
        .collect();
    let sandbox = Sandbox::new(
        setup.settings.clone(),
        Places {
            workspace: workspace.clone(),
            extra_dirs,
            keel_home: setup.keel_home.clone(),
            home: setup.home.clone(),
            temp_dir: Some(temp.path().to_path_buf()),
            referenced_files: setup.referenced_files.clone(),
            socket_dirs: Vec::new(),
        },
    );
    for line in sandbox.describe(mode) {
        eprintln!("keel sandbox: {}", visible_line(&line));
    }
    let Some((program, rest)) = args.command.split_first() else {
        return Err(crate::UsageError("keel sandbox needs a command after --".into()).into());
    };
    let mut command = std::process::Command::new(program);
    command.args(rest).current_dir(&workspace);
    for name in crate::session_setup::secrets(&config, Some(&crate::settings::keys()?)).env_names()
    {
        command.env_remove(name);
    }
    let absent_before = sandbox.planted_absent_now();
    let confinement = sandbox.confine(&mut command, mode)?;
    let status = match mode {
        SandboxMode::Off => command.status(),
        SandboxMode::WorkspaceWrite | SandboxMode::ReadOnly => {
            keel_sandbox::on_lasting_thread(move || command.status())?
        }
    }
    .map_err(|error| confinement.explain(error))?;
    if mode != SandboxMode::Off {
        for undone in sandbox.undo_planted(&absent_before) {
            eprintln!("keel sandbox: {}", visible_line(&undone.describe()));
        }
    }
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1);
    Ok(Outcome::Exited(u8::try_from(code).unwrap_or(1)))
}
