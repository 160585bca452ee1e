//! `keel serve`: the HTTP API and browser UI for this workspace (`keel-serve`), with sessions
//! built from the user's configuration exactly as `keel run` builds them.
//!
//! Invariants:
//! - Loopback by default; a non-loopback address is refused unless a token was given
//!   explicitly (a generated token printed in a URL is for this machine only).
//! - The first line on stdout is the URL; with a generated token it carries the token in the
//!   fragment (`#token=…`), which browsers never send to a server.
//! - No credential is ever on an argv keel starts: the token comes from `KEEL_SERVE_TOKEN` or
//!   an owner-only `--token-file` (or `--token`, which the user chose to expose), and `--open`
//!   hands the browser an owner-only page under `$KEEL_HOME` holding a one-time code.
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

    fn sessions(&self) -> Result<Vec<keel_agent::SessionOverview>, AgentError> {
        self.host.session_overviews(&self.workspace)
    }

    fn fork(&self, source: &str, at: Option<u64>) -> Result<SessionInfo, AgentError> {
        self.host.fork(source, at)
    }

    fn child_transcript(&self, id: &str) -> Result<Option<keel_agent::Transcript>, AgentError> {
        let child = self
            .host
            .session(id)?
            .filter(|session| session.workspace == self.workspace && session.parent.is_some());
        child.map(|_| self.host.transcript(id)).transpose()
    }

    /// Sessions of this workspace only: `keel serve` drives the workspace it was started in.
    fn exists(&self, id: &str) -> Result<bool, AgentError> {
        Ok(self
            .host
            .session(id)?
            .is_some_and(|session| session.workspace == self.workspace))
    }
}

/// The token the user gave: `--token`, `--token-file` (owner-only), or `KEEL_SERVE_TOKEN`.
fn given_token(args: &ServeArgs) -> anyhow::Result<Option<String>> {
    if let Some(token) = &args.token {
        return Ok(Some(token.clone()));
    }
    if let Some(path) = &args.token_file {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path)
            .map_err(|error| UsageError(format!("--token-file {}: {error}", path.display())))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(UsageError(format!(
                "--token-file {}: other users can read it (mode {:o}); run `chmod 600 {}`",
                path.display(),
                meta.permissions().mode() & 0o777,
                path.display()
            ))
            .into());
        }
        let text = std::fs::read_to_string(path)
            .map_err(|error| UsageError(format!("--token-file {}: {error}", path.display())))?;
        // No command or tool of a session reads it.
        settings::refer_to_file(path);
        return Ok(Some(text.trim().to_string()));
    }
    Ok(std::env::var("KEEL_SERVE_TOKEN")
        .ok()
        .filter(|token| !token.is_empty()))
}

/// `--open`: a launch page in `$KEEL_HOME/state` (hidden from every command and server, even
/// one started before the page was written), owner-only, that takes the browser to the UI with
/// a one-time code in the fragment (redeemed for the token): no credential on any argv.
fn write_launch_page(
    bound: std::net::SocketAddr,
    code: Option<&str>,
) -> anyhow::Result<std::path::PathBuf> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let state = settings::keel_home()?.join("state");
    keel_types::private_files::create_private_dir(&state)?;
    let path = state.join(format!("serve-launch-{}.html", bound.port()));
    let target = match code {
        Some(code) => format!("http://{bound}/#code={code}"),
        None => format!("http://{bound}/"),
    };
    let page = format!(
        "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={target}\">\
         <title>keel</title><p>Opening keel…</p>\n"
    );
    let _ = std::fs::remove_file(&path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    file.write_all(page.as_bytes())?;
    Ok(path)
}

pub async fn run(common: &CommonArgs, args: ServeArgs) -> anyhow::Result<Outcome> {
    let given = given_token(&args)?;
    if !args.addr.ip().is_loopback() && given.is_none() {
        return Err(UsageError(format!(
            "{} is not a loopback address: serving beyond this machine needs an explicit \
             --token (and a network you trust)",
            args.addr
        ))
        .into());
    }
    if let Some(token) = &given
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
    let (token, url) = match (&given, args.no_auth) {
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
        keel_render::visible_line(&workspace.display().to_string())
    );
    let file_limit = raise_file_limit();
    let max_connections = keel_serve::connection_cap(file_limit);
    eprintln!(
        "keel serve: up to {max_connections} connections at once (file limit {file_limit}); \
         when full, the oldest that never presented the token gives way"
    );
    let mut access = Access::new(token.clone(), bound);
    if args.open {
        let code = token.as_ref().map(|_| keel_serve::generate_token());
        let page = write_launch_page(bound, code.as_deref())?;
        if let Some(code) = code {
            access = access.with_launch_code(code);
        }
        let _ = std::process::Command::new("xdg-open")
            .arg(&page)
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
    keel_serve::serve(listener, access, factory, max_connections, shutdown).await?;
    Ok(Outcome::Completed)
}

/// Raise the soft limit of open files to the hard one (connections are files); the limit in
/// force after. The commands and servers keel starts keep the limit keel was started with.
fn raise_file_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    // An unlimited hard limit is still bounded by the kernel's `nr_open`.
    let wanted = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .map_or(hard, |most| hard.min(most));
    if wanted > soft && setrlimit(Resource::RLIMIT_NOFILE, wanted, hard).is_ok() {
        keel_sandbox::set_children_file_limit(soft);
        return wanted;
    }
    soft
}
