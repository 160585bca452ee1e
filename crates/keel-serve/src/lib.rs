//! `keel serve` (docs/serve-api.md#routes): the HTTP API, SSE with replay from the store's
//! event ids, and the browser UI — all over keel's controller (`keel_agent::Host`,
//! `Controller`), never around it.
//!
//! Invariants:
//! - Every request passes `access::check` (Host, Origin, token) before any handler runs.
//! - A session is driven by one controller in this process; submits are admitted by the
//!   controller (`Controller::begin`) before the answer is sent, so a busy session or a stale
//!   recovery id is refused (409) and an accepted turn runs in its own task: a client that
//!   goes away never stops or blocks a turn.
//! - Events go to each client through a bounded buffer; a client too slow to keep up is
//!   disconnected and can resume from its last event id (`Last-Event-ID`) with nothing lost.
//! - On shutdown the server stops accepting, ends event streams, cancels running turns (their
//!   receipts settle as on Ctrl-C in the terminal) and waits for them, then ends every open
//!   session's background jobs, before returning.

mod access;
mod approvals;
mod connections;
mod error;
mod jobs_routes;
mod page_events;
mod routes;
mod ui;

pub use access::Access;
pub use approvals::{Approvals, Decision, SessionApprover};
pub use connections::ConnectionMark;
pub use error::ApiError;

use keel_agent::{AgentError, Approver, Controller, SessionChoice, SessionInfo, SessionOverview};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The largest request body accepted (413 past it).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Events buffered for one client before it counts as too slow and is disconnected.
pub const CLIENT_BUFFER: usize = 4096;

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// Something the client asked for is not usable (an unknown model, say).
    #[error("{0}")]
    Refused(String),
}

/// What the server needs from the binary: controllers for sessions of this workspace, built
/// from the user's configuration.
pub trait SessionFactory: Send + Sync + 'static {
    /// A controller for a new or resumed session; `model` (`PROVIDER/ID`) switches its model.
    fn open(
        &self,
        choice: SessionChoice,
        model: Option<String>,
        approver: Arc<dyn Approver>,
    ) -> Result<Controller, OpenError>;
    /// The sessions of this workspace, newest first.
    fn sessions(&self) -> Result<Vec<SessionOverview>, AgentError>;
    /// Whether a session with this id exists and this server may drive it.
    fn exists(&self, id: &str) -> Result<bool, AgentError>;
    /// A new session with `source`'s history up to turn `at` (all of it when `None`).
    fn fork(&self, source: &str, at: Option<u64>) -> Result<SessionInfo, AgentError>;
    /// The stored transcript of a subagent's child session of this workspace (`None`: `id` is
    /// not one). A child is never opened as a session of its own; it is only read.
    fn child_transcript(&self, id: &str) -> Result<Option<keel_agent::Transcript>, AgentError>;
}

/// A session this server drives.
struct OpenSession {
    controller: Controller,
}

pub(crate) struct AppState {
    factory: Arc<dyn SessionFactory>,
    approvals: Arc<Approvals>,
    sessions: tokio::sync::Mutex<HashMap<String, Arc<OpenSession>>>,
    /// Held while a session is opened (which may wait seconds for its MCP servers), so opens
    /// happen one at a time without holding `sessions` and stalling every other session.
    opening: tokio::sync::Mutex<()>,
    turns: Mutex<Vec<JoinHandle<()>>>,
    shutting_down: watch::Receiver<bool>,
}

impl AppState {
    fn lock_turns(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.turns
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Serve on `listener` until `shutdown` resolves; then stop accepting, end event streams,
/// cancel running turns and wait for them.
pub async fn serve(
    listener: tokio::net::TcpListener,
    access: Access,
    factory: Arc<dyn SessionFactory>,
    max_connections: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop, shutting_down) = watch::channel(false);
    let state = Arc::new(AppState {
        factory,
        approvals: Arc::new(Approvals::default()),
        sessions: tokio::sync::Mutex::new(HashMap::new()),
        opening: tokio::sync::Mutex::new(()),
        turns: Mutex::new(Vec::new()),
        shutting_down,
    });
    let app = routes::router(state.clone(), Arc::new(access));
    let cancelling = state.clone();
    let stopping = async move {
        shutdown.await;
        // At once: running turns are cancelled (receipts settle) and event streams end, so no
        // client can hold the shutdown back.
        let _ = stop.send(true);
        for session in cancelling.sessions.lock().await.values() {
            session.controller.cancel();
        }
    };
    accept_connections(listener, app, max_connections, stopping).await;
    let turns: Vec<JoinHandle<()>> = state.lock_turns().drain(..).collect();
    for turn in turns {
        let _ = turn.await;
    }
    // The sessions end with the server, and their background jobs with them.
    for session in state.sessions.lock().await.values() {
        session.controller.end_jobs();
    }
    Ok(())
}

/// The descriptors kept for everything but connections (the store, sessions' commands and
/// MCP servers, the listener): at least this many, or an eighth of the limit.
pub const RESERVED_DESCRIPTORS: u64 = 128;

/// The most connections to hold at once under a file limit of `limit` descriptors.
pub fn connection_cap(limit: u64) -> usize {
    let reserve = RESERVED_DESCRIPTORS.max(limit / 8);
    usize::try_from(limit.saturating_sub(reserve).clamp(16, 65_536)).unwrap_or(65_536)
}

/// How long a client may take to send a request's headers (a half-sent request holds a
/// connection for no longer).
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serve `app` on `listener` until `stop` resolves: each connection with a header-read timeout,
/// at most `cap` at once — when full, the oldest connection that never presented the token
/// gives way (`connections`); after `stop`, open connections get `SHUTDOWN_GRACE` to finish,
/// then they are dropped.
async fn accept_connections(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    cap: usize,
    stop: impl Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let connections = connections::Connections::new(cap);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors, say: a stranger's connection gives way, and the
                // accept is tried again a moment later (its socket closes with its task).
                Err(error) => {
                    if matches!(error.raw_os_error(), Some(EMFILE | ENFILE)) {
                        connections.make_room();
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        // Full of connections that presented the token: the new one is closed at once.
        let Some(admitted) = connections.admit() else {
            drop(stream);
            continue;
        };
        // Each request of the connection carries its mark, which the token check sets.
        let service = hyper_util::service::TowerToHyperService::new(tower_layer::Layer::layer(
            &axum::Extension(admitted.mark.clone()),
            app.clone(),
        ));
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let mut admitted = admitted;
            tokio::select! {
                _ = connection => {}
                // Closed to make room: dropping the connection drops its socket.
                _ = &mut admitted.closed => {}
            }
            drop(admitted);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {}
    }
}

/// `accept`'s errors for running out of descriptors (the process's, the system's): Linux's
/// numbers (no crate here knows them by name).
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

/// How long open connections may take to finish after a stop signal.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// A random token for a server started without `--token`.
pub fn generate_token() -> String {
    use rand::Rng;
    let bytes: [u8; 24] = rand::rng().random();
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
