//! `keel serve`: the HTTP API and browser UI for this workspace (`keel-serve`), with sessions
//! built from the user's configuration exactly as `keel run` builds them.
//!
//! Invariants:
//! - Loopback by default; a non-loopback address is refused unless a token was given
//!   explicitly (a generated token printed in a URL is for this machine only).
//! - The first line on stdout is the URL; with a generated token it carries the token in the
//!   fragment (`#token=…`), which browsers never send to a server.
//! - A missing or malformed key is refused at start (exit 2), before anything listens.
//! - Ctrl-C, SIGTERM and SIGHUP stop the server the same way: no new connections, running
//!   turns cancelled and settled, then exit 0.

use crate::cli::{CommonArgs, ServeArgs};
use crate::session_setup::{args_for, open_controller, open_host, prepare, prepare_on};
use crate::signals::StopSignals;
use crate::{Outcome, UsageError, settings};
use keel_agent::{AgentError, Approver, Controller, Host, SessionChoice, SessionInfo};
use keel_serve::{Access, OpenError, SessionFactory};
use std::io::Write;
use std::sync::Arc;

/// Sessions of this workspace, configured like `keel run`'s.
struct CliSessions {
    common: CommonArgs,
    host: Host,
    workspace: String,
}

impl SessionFactory for CliSessions {
    fn open(
        &self,
        choice: SessionChoice,
        model: Option<String>,
        approver: Arc<dyn Approver>,
    ) -> Result<Controller, OpenError> {
        let mut common = args_for(&self.common, choice);
        if model.is_some() {
            common.model = model;
        }
        let opened = prepare_on(&common, "keel serve", self.host.clone())
            .and_then(|setup| open_controller(setup, approver));
        opened.map_err(|error| match error.downcast::<AgentError>() {
            Ok(agent) => OpenError::Agent(agent),
            Err(other) => OpenError::Refused(format!("{other:#}")),
        })
    }

    fn sessions(&self) -> Result<Vec<SessionInfo>, AgentError> {
        self.host.sessions_for_workspace(&self.workspace)
    }

    /// Sessions of this workspace only: `keel serve` drives the workspace it was started in.
    fn exists(&self, id: &str) -> Result<bool, AgentError> {
        Ok(self
            .host
            .session(id)?
            .is_some_and(|session| session.workspace == self.workspace))
    }
}

pub async fn run(common: &CommonArgs, args: ServeArgs) -> anyhow::Result<Outcome> {
    if !args.addr.ip().is_loopback() && args.token.is_none() {
        return Err(UsageError(format!(
            "{} is not a loopback address: serving beyond this machine needs an explicit \
             --token (and a network you trust)",
            args.addr
        ))
        .into());
    }
    if let Some(token) = &args.token
        && (token.len() < 16 || token.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        return Err(UsageError(
            "--token must be at least 16 characters without spaces (or leave it out and keel \
             generates one)"
                .into(),
        )
        .into());
    }
    // Fail now, like `keel run`, on a bad config or a missing key.
    prepare(common, "keel serve")?;
    let workspace = settings::workspace(common)?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|error| UsageError(format!("cannot listen on {}: {error}", args.addr)))?;
    let bound = listener.local_addr()?;
    let (token, url) = match (&args.token, args.no_auth) {
        (Some(token), _) => (Some(token.clone()), format!("http://{bound}/")),
        (None, true) => (None, format!("http://{bound}/")),
        (None, false) => {
            let token = keel_serve::generate_token();
            let url = format!("http://{bound}/#token={token}");
            (Some(token), url)
        }
    };
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{url}")?;
        stdout.flush()?;
    }
    eprintln!(
        "keel serve: {} in {} (Ctrl-C stops)",
        if token.is_some() {
            "the API needs the token in the URL above"
        } else {
            "no token (--no-auth)"
        },
        crate::terminal_text::visible_line(&workspace.display().to_string())
    );
    if args.open {
        let _ = std::process::Command::new("xdg-open")
            .arg(&url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    let factory = Arc::new(CliSessions {
        common: common.clone(),
        host: open_host()?,
        workspace: workspace.display().to_string(),
    });
    let mut signals = StopSignals::register()?;
    let shutdown = async move {
        let stop = signals.next().await;
        eprintln!("keel serve: {} received, stopping", stop.name());
    };
    keel_serve::serve(listener, Access::new(token, bound), factory, shutdown).await?;
    Ok(Outcome::Completed)
}
