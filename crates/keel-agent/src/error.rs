//! What can go wrong for a session, and whose it is to fix.
//!
//! Invariant: `is_for_the_user` decides the exit code (2: the person must act) for every
//! variant; a new variant does not compile until it is decided there.

use crate::recovery::refusal::RecoveryRefusal;
use keel_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("a turn is already running in session {0}; wait for it or cancel it")]
    Busy(String),
    #[error("session {0} is already open in this process")]
    AlreadyOpen(String),
    #[error(
        "session {session}: history item {revision} cannot be read ({reason}); the session cannot continue safely, but `keel session show` still shows it"
    )]
    UndecodableHistory {
        session: String,
        revision: u64,
        reason: String,
    },
    #[error("cannot use the workspace {workspace}: {source}")]
    Workspace {
        workspace: String,
        source: std::io::Error,
    },
    #[error("cannot create the session's temp dir under {dir}: {cause}")]
    SessionTemp { dir: String, cause: std::io::Error },
    #[error(transparent)]
    Tools(#[from] keel_tools::SchemaError),
    #[error(transparent)]
    Client(#[from] keel_llm::client::ClientBuildError),
    #[error("recovery refused: {0}")]
    RecoveryRefused(RecoveryRefusal),
    #[error("cannot compact: {0}")]
    CannotCompact(String),
    #[error("cannot rewind: {0}")]
    CannotRewind(String),
    #[error("cannot fork: {0}")]
    CannotFork(String),
    #[error("cannot build the request: {0}")]
    Projection(String),
    #[error("cannot read the workspace's snapshots: {0}")]
    Snapshot(String),
    /// Agents linked or opened in a way their services cannot serve (another workspace or
    /// sandbox on one session's services, a session that would follow itself).
    #[error("{0}")]
    Agents(String),
}

impl AgentError {
    /// Whether the person running keel must act on this (exit code 2 in the terminal).
    pub fn is_for_the_user(&self) -> bool {
        match self {
            AgentError::Store(error) => error.is_for_the_user(),
            AgentError::AlreadyOpen(_)
            | AgentError::Workspace { .. }
            | AgentError::SessionTemp { .. }
            | AgentError::RecoveryRefused(_)
            | AgentError::CannotCompact(_)
            | AgentError::CannotRewind(_)
            | AgentError::CannotFork(_) => true,
            AgentError::Busy(_)
            | AgentError::UndecodableHistory { .. }
            | AgentError::Tools(_)
            | AgentError::Projection(_)
            | AgentError::Snapshot(_)
            | AgentError::Agents(_)
            | AgentError::Client(_) => false,
        }
    }
}
