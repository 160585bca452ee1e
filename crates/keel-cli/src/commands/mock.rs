//! `keel mock`: serve the fake provider until interrupted.
//!
//! Invariant: the first line on stdout is the base URL, flushed before serving, so scripts and
//! tests can read it; request notes go to stderr.

use crate::cli::MockArgs;
use crate::{Outcome, UsageError};
use keel_mock::{MockServer, Scenario};
use std::io::Write;
use std::path::Path;

pub fn load_scenario(name_or_file: &str) -> anyhow::Result<Scenario> {
    let path = Path::new(name_or_file);
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|error| {
            UsageError(format!("cannot read scenario {}: {error}", path.display()))
        })?;
        return Scenario::parse(&text)
            .map_err(|error| UsageError(format!("scenario {}: {error}", path.display())).into());
    }
    keel_mock::builtin(name_or_file).map_err(|error| UsageError(error.to_string()).into())
}

/// What to do to send keel to the mock at `base_url`: one command, or config lines.
fn how_to_point_keel_at(base_url: &str) -> String {
    format!(
        "keel mock: point keel at it for one run with\n  \
         DEEPSEEK_BASE_URL={base_url} DEEPSEEK_API_KEY=anything keel run \"hello\"\n\
         or in $KEEL_HOME/config.toml:\n  \
         model = \"deepseek/mock-model\"\n  \
         [providers.deepseek]\n  \
         base_url = \"{base_url}\""
    )
}

pub async fn run(args: MockArgs) -> anyhow::Result<Outcome> {
    if !args.addr.ip().is_loopback() {
        return Err(UsageError(format!(
            "--addr {}: the fake provider only listens on loopback (127.0.0.1 or ::1)",
            args.addr
        ))
        .into());
    }
    let scenario = load_scenario(&args.scenario)?;
    let server = MockServer::start(args.addr, scenario)
        .await
        .map_err(|error| UsageError(format!("cannot bind {}: {error}", args.addr)))?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{}", server.base_url())?;
        stdout.flush()?;
    }
    eprintln!(
        "keel mock: serving scenario `{}` (Ctrl-C to stop)",
        args.scenario
    );
    eprintln!("{}", how_to_point_keel_at(&server.base_url()));
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = server.wait() => {}
    }
    Ok(Outcome::Completed)
}
