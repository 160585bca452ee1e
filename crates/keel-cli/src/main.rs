//! The `keel` binary: argument parsing, configuration, and the terminal surfaces.
//!
//! Invariants:
//! - Exit codes: 0 completed, 1 turn failed, 2 usage or configuration
//!   error, 130 cancelled (docs/configuration.md#exit-codes).
//! - Nothing is written outside `KEEL_HOME` and the workspace.

mod cli;
mod commands;
mod render;
mod session_setup;
mod settings;
mod signals;
mod slash;
mod terminal;

use clap::Parser;
use std::process::ExitCode;

/// How a command ended, mapped to the process exit code.
#[derive(Debug)]
pub enum Outcome {
    Completed,
    TurnFailed,
    /// The provider refused the key (failure kind `auth`): the user's to fix, like a usage
    /// error (exit 2).
    KeyRefused,
    Cancelled,
    /// Stopped by SIGTERM or SIGHUP after cancelling cleanly: the signal's exit code.
    Stopped(u8),
    /// `keel sandbox`: the command's own exit code.
    Exited(u8),
}

/// An error that is the user's to fix (exit 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn main() -> ExitCode {
    keel_types::startup_trace::begin();
    // keel's memory and environment hold provider keys: other processes of this user, the
    // commands keel runs included, may not read them through /proc/<keel>/ (root still can).
    let _ = nix::sys::prctl::set_dumpable(false);
    let cli = cli::Cli::parse();
    keel_types::startup_trace::mark("arguments");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(dispatch(cli));
    // A tool thread stuck in a system call must not keep keel alive after its turn ended.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match result {
        Ok(Outcome::Completed) => ExitCode::SUCCESS,
        Ok(Outcome::TurnFailed) => ExitCode::from(1),
        Ok(Outcome::KeyRefused) => ExitCode::from(2),
        Ok(Outcome::Cancelled) => ExitCode::from(130),
        Ok(Outcome::Stopped(code) | Outcome::Exited(code)) => ExitCode::from(code),
        Err(error) => {
            // Errors name paths and config keys, which come from outside: shown escaped.
            eprintln!("error: {}", keel_render::visible(&format!("{error:#}")));
            ExitCode::from(exit_code_of(&error))
        }
    }
}

/// What ended a command with an error.
enum Cause<'a> {
    /// Bad arguments or configuration: the user's to fix.
    Usage,
    Agent(&'a keel_agent::AgentError),
    Other,
}

impl<'a> Cause<'a> {
    fn of(error: &'a anyhow::Error) -> Cause<'a> {
        if error.is::<UsageError>()
            || error.is::<keel_config::ConfigError>()
            || error
                .downcast_ref::<keel_eval::EvalError>()
                .is_some_and(keel_eval::EvalError::is_for_the_user)
        {
            Cause::Usage
        } else if let Some(agent) = error.downcast_ref::<keel_agent::AgentError>() {
            Cause::Agent(agent)
        } else {
            Cause::Other
        }
    }
}

/// 2 for what the user must fix, 1 for any other failure (docs/configuration.md#exit-codes).
fn exit_code_of(error: &anyhow::Error) -> u8 {
    match Cause::of(error) {
        Cause::Usage => 2,
        Cause::Agent(agent) if agent.is_for_the_user() => 2,
        Cause::Agent(_) | Cause::Other => 1,
    }
}

async fn dispatch(cli: cli::Cli) -> anyhow::Result<Outcome> {
    use cli::{Command, McpCommand, SessionCommand};
    if let Some((flag, command)) = cli.misplaced_option() {
        return Err(UsageError(format!(
            "`{flag}` does not apply to `keel {command}` (`keel {command} --help` lists its options)"
        ))
        .into());
    }
    let base = cli.before_command();
    match cli.command {
        Some(Command::Run(args)) => {
            let common = base
                .with_agent(&args.agent)
                .with_reach(&args.reach)
                .with_resume(&args.resume)
                .with_place(&args.place)
                .with_output(&cli::OutputArgs { json: args.json });
            let prompt = crate::commands::run::prompt_of(args.prompt)?;
            crate::commands::run::run_command(&common, &prompt).await
        }
        Some(Command::Mock(args)) => crate::commands::mock::run(args).await,
        Some(Command::Demo(output)) => crate::commands::demo::run(&base.with_output(&output)).await,
        Some(Command::Sessions(args)) => {
            let common = base.with_place(&args.place).with_output(&args.output);
            match args.prune {
                Some(age) => crate::commands::sessions::prune(&common, &age),
                None => crate::commands::sessions::list(&common, args.all),
            }
        }
        Some(Command::Session(SessionCommand::Rm { id, output })) => {
            crate::commands::sessions::remove(&base.with_output(&output), &id)
        }
        Some(Command::Config(args)) => {
            let common = base
                .with_agent(&args.agent)
                .with_reach(&args.reach)
                .with_place(&args.place)
                .with_output(&args.output);
            crate::commands::config::run(&common)
        }
        Some(Command::Serve(args)) => {
            let common = base
                .with_agent(&args.agent)
                .with_reach(&args.reach)
                .with_place(&args.place);
            crate::commands::serve::run(&common, args).await
        }
        Some(Command::Acp(args)) => {
            crate::commands::acp::run(&base.with_agent(&args.agent).with_reach(&args.reach)).await
        }
        Some(Command::Mcp(McpCommand::List {
            reach,
            place,
            output,
        })) => {
            let common = base
                .with_reach(&reach)
                .with_place(&place)
                .with_output(&output);
            crate::commands::mcp::list(&common).await
        }
        Some(Command::Session(SessionCommand::Show {
            id,
            revision,
            saved,
            output,
        })) => {
            let common = base.with_output(&output);
            match saved {
                Some(path) => crate::commands::sessions::show_saved(&common, &id, &path),
                None => crate::commands::sessions::show(&common, &id, revision),
            }
        }
        Some(Command::Session(SessionCommand::Recovery { id, output })) => {
            crate::commands::sessions::recovery(&base.with_output(&output), &id)
        }
        Some(Command::Session(SessionCommand::Fork {
            id,
            at,
            code,
            reach,
        })) => crate::slash::rewind::fork(&base.with_reach(&reach), &id, at, code),
        Some(Command::Session(SessionCommand::Rewind {
            id,
            to,
            code,
            conversation,
            both: _,
            force,
            reach,
        })) => {
            let scope = keel_agent::RewindScope {
                code: !conversation,
                conversation: !code,
            };
            crate::slash::rewind::run(&base.with_reach(&reach), &id, to, scope, force)
        }
        Some(Command::Trust(args)) => {
            crate::commands::trust::run(&base.with_place(&args.place), &args)
        }
        Some(Command::Sandbox(args)) => {
            let common = base.with_reach(&args.reach).with_place(&args.place);
            crate::commands::sandbox::run(&common, &args)
        }
        Some(Command::Eval(args)) => {
            let common = cli::CommonArgs {
                sandbox: args.sandbox.or(base.sandbox),
                ..base.with_output(&args.output)
            };
            crate::commands::eval::run_command(&common, args).await
        }
        Some(Command::Auth(cli::AuthCommand::Login { provider, place })) => {
            crate::commands::auth::login(&base.with_place(&place), provider.as_deref())
        }
        Some(Command::Auth(cli::AuthCommand::Logout { provider, place })) => {
            crate::commands::auth::logout(&base.with_place(&place), provider.as_deref())
        }
        Some(Command::Prompt(words)) => {
            let prompt = crate::terminal::start_prompt::prompt_of(&words)?;
            if crate::terminal::live::wanted(&base) {
                crate::terminal::live::run(&base, Some(prompt)).await
            } else {
                crate::terminal::line_mode::run(&base, Some(prompt)).await
            }
        }
        None if crate::terminal::live::wanted(&base) => {
            crate::terminal::live::run(&base, None).await
        }
        None => crate::terminal::line_mode::run(&base, None).await,
    }
}
