//! The `keel` binary: argument parsing, configuration, and the terminal surfaces.
//!
//! Invariants:
//! - Exit codes follow CONTRACT.md: 0 completed, 1 turn failed, 2 usage or configuration
//!   error, 130 cancelled.
//! - Nothing is written outside `KEEL_HOME` and the workspace.

mod acp_command;
mod approval_prompt;
mod cli;
mod completion;
mod config_command;
mod context_command;
mod demo;
mod eval_command;
mod live_answer;
mod mcp_command;
mod mock_command;
mod render;
mod repl;
mod rewind_command;
mod run;
mod sandbox_command;
mod serve_command;
mod session_setup;
mod sessions;
mod settings;
mod signals;
mod trust_command;
mod tui_session;
mod tui_terminal;

use clap::Parser;
use std::process::ExitCode;

/// How a command ended, mapped to the process exit code.
#[derive(Debug)]
pub enum Outcome {
    Completed,
    TurnFailed,
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

/// CONTRACT.md: 2 for what the user must fix, 1 for everything else that failed.
fn exit_code_of(error: &anyhow::Error) -> u8 {
    match Cause::of(error) {
        Cause::Usage => 2,
        Cause::Agent(agent) if agent.is_for_the_user() => 2,
        Cause::Agent(_) | Cause::Other => 1,
    }
}

async fn dispatch(cli: cli::Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Some(cli::Command::Run(args)) => {
            let prompt = run::prompt_of(args.prompt)?;
            run::run_command(&cli.common, &prompt).await
        }
        Some(cli::Command::Mock(args)) => mock_command::run(args).await,
        Some(cli::Command::Demo) => demo::run(&cli.common).await,
        Some(cli::Command::Sessions(args)) => match args.prune {
            Some(age) => sessions::prune(&cli.common, &age),
            None => sessions::list(&cli.common),
        },
        Some(cli::Command::Session(cli::SessionCommand::Rm { id })) => {
            sessions::remove(&cli.common, &id)
        }
        Some(cli::Command::Config) => config_command::run(&cli.common),
        Some(cli::Command::Serve(args)) => serve_command::run(&cli.common, args).await,
        Some(cli::Command::Acp) => acp_command::run(&cli.common).await,
        Some(cli::Command::Mcp(cli::McpCommand::List)) => mcp_command::list(&cli.common).await,
        Some(cli::Command::Session(cli::SessionCommand::Show { id, revision })) => {
            sessions::show(&cli.common, &id, revision)
        }
        Some(cli::Command::Session(cli::SessionCommand::Recovery { id })) => {
            sessions::recovery(&cli.common, &id)
        }
        Some(cli::Command::Session(cli::SessionCommand::Fork { id, at, code })) => {
            rewind_command::fork(&cli.common, &id, at, code)
        }
        Some(cli::Command::Session(cli::SessionCommand::Rewind {
            id,
            to,
            code,
            conversation,
            both: _,
            force,
        })) => {
            let scope = keel_agent::RewindScope {
                code: !conversation,
                conversation: !code,
            };
            rewind_command::run(&cli.common, &id, to, scope, force)
        }
        Some(cli::Command::Trust(args)) => trust_command::run(&cli.common, &args),
        Some(cli::Command::Sandbox(args)) => sandbox_command::run(&cli.common, &args),
        Some(cli::Command::Eval(args)) => eval_command::run_command(&cli.common, args).await,
        None if tui_session::wanted(&cli.common) => tui_session::run(&cli.common).await,
        None => repl::run(&cli.common).await,
    }
}
