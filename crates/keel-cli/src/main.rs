//! The `keel` binary: argument parsing, configuration, and the terminal surfaces.
//!
//! Invariants:
//! - Exit codes follow CONTRACT.md: 0 completed, 1 turn failed, 2 usage or configuration
//!   error, 130 cancelled.
//! - Nothing is written outside `KEEL_HOME` and the workspace.

mod cli;
mod demo;
mod mock_command;
mod render;
mod settings;
mod turn;

use clap::Parser;
use std::process::ExitCode;

/// How a command ended, mapped to the process exit code.
#[derive(Debug)]
pub enum Outcome {
    Completed,
    TurnFailed,
    Cancelled,
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
    let cli = cli::Cli::parse();
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
    match result {
        Ok(Outcome::Completed) => ExitCode::SUCCESS,
        Ok(Outcome::TurnFailed) => ExitCode::from(1),
        Ok(Outcome::Cancelled) => ExitCode::from(130),
        Err(error) => {
            eprintln!("error: {error:#}");
            if error.downcast_ref::<UsageError>().is_some()
                || error.downcast_ref::<keel_llm::ConfigError>().is_some()
            {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

async fn dispatch(cli: cli::Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Some(cli::Command::Run(args)) => turn::run_command(&cli.common, &args.prompt).await,
        Some(cli::Command::Mock(args)) => mock_command::run(args).await,
        Some(cli::Command::Demo) => demo::run(&cli.common).await,
        None => Err(UsageError(
            "the interactive session is not built yet: use `keel run PROMPT`, or `keel demo` to \
             see keel work without a key"
                .into(),
        )
        .into()),
    }
}
