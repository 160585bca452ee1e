//! The host of sessions over one store: read-side views for any surface, and controllers for
//! as many sessions at once as a surface wants (each holds its own lease).
//!
//! Invariants:
//! - Reading never writes: a transcript shows receipts as the next load would settle them
//!   when no live process holds the session, but the store is left as it is.
//! - One controller per session: the store's lease keeps other processes out, the host keeps
//!   a second controller of this process out.
//! - Surfaces reach sessions only through `Host` and `Controller`; the store and the recovery
//!   record format stay private to keel-agent.

use crate::claim::OpenSession;
use crate::controller::Controller;
use crate::error::AgentError;
use crate::recovery::record::{StoredRecord, decode};
use crate::services::{Services, SurfaceServices};
use crate::settings::AgentSettings;
use crate::settings::SessionChoice;
use crate::transcript::Transcript;
use keel_store::{SessionInfo, SessionOverview, Store};
use std::path::Path;

/// Sessions over one state database.
#[derive(Clone, Debug)]
pub struct Host {
    store: Store,
    /// Sessions a controller of this host holds now: the store's lease is per process, so
    /// the host keeps two controllers of this process off one session.
    open: crate::claim::Claimed,
}

impl Host {
    /// Open (creating if needed) the state database at `path`.
    pub fn open(path: &Path) -> Result<Host, AgentError> {
        let store = Store::open(path)?;
        keel_types::startup_trace::mark("store open");
        Ok(Host {
            store,
            open: std::sync::Arc::default(),
        })
    }

    pub fn session(&self, id: &str) -> Result<Option<SessionInfo>, AgentError> {
        Ok(self.store.session(id)?)
    }

    /// The sessions of `workspace`, newest first.
    pub fn sessions_for_workspace(&self, workspace: &str) -> Result<Vec<SessionInfo>, AgentError> {
        Ok(self.store.sessions_for_workspace(workspace)?)
    }

    /// The sessions of `workspace`, newest first, each with its turns and title.
    pub fn session_overviews(&self, workspace: &str) -> Result<Vec<SessionOverview>, AgentError> {
        Ok(self.store.session_overviews(workspace)?)
    }

    /// Remove session `id`: everything the store holds for it (refused while a live process
    /// holds it), then its files under `keel_home` — its temp dir, and its snapshot refs and
    /// index in every snapshot store (their objects go at the next prune). What could not be
    /// removed from disk is returned, named.
    pub fn remove_session(&self, id: &str, keel_home: &Path) -> Result<Vec<String>, AgentError> {
        let removed = self.store.remove_session(id)?;
        let mut left = Vec::new();
        let mut remove = |path: std::path::PathBuf| {
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            match removed {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    left.push(format!("{}: {error}", path.display()));
                }
                _ => {}
            }
        };
        remove(keel_home.join("tmp").join(id));
        let stores: Vec<std::path::PathBuf> = std::fs::read_dir(keel_home.join("snapshots"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|store| store.path())
            .collect();
        // The session's snapshot refs, and its children's (they share its temp dir).
        for (store, id) in stores
            .iter()
            .flat_map(|store| removed.iter().map(move |id| (store, id)))
        {
            remove(store.join("refs/keel").join(id));
            remove(store.join(format!("index-{id}")));
            remove(store.join(format!("pruned-{id}")));
            remove(store.join(format!("withheld-{id}")));
        }
        Ok(left)
    }

    pub fn transcript(&self, id: &str) -> Result<Transcript, AgentError> {
        crate::transcript::transcript(&self.store, id)
    }

    /// The versions of files rewinds of session `id` kept before overwriting them (what each
    /// held), oldest first, with their bytes.
    pub fn saved_versions(
        &self,
        id: &str,
    ) -> Result<Vec<(keel_store::SavedVersion, Vec<u8>)>, AgentError> {
        let mut versions = Vec::new();
        for version in self.store.saved_versions(id)? {
            let bytes = self.store.blob(&version.hash)?.unwrap_or_default();
            versions.push((version, bytes));
        }
        Ok(versions)
    }

    /// The transcript of session `id` at history revision `revision` (an earlier revision of
    /// a compacted history stays readable).
    pub fn transcript_at(&self, id: &str, revision: u64) -> Result<Transcript, AgentError> {
        crate::transcript::transcript_at(&self.store, id, Some(revision))
    }

    /// A new session that starts with `source`'s history (and the receipts of its calls) up
    /// to turn `up_to` (all of it when `None`): its requests begin with the source's bytes.
    pub fn fork(&self, source: &str, up_to: Option<u64>) -> Result<SessionInfo, AgentError> {
        self.store.require_session(source)?;
        let mut revision = None;
        if let Some(up_to) = up_to {
            let items = self.store.items(source)?;
            let last = items.iter().map(|row| row.turn).max().unwrap_or(0);
            if up_to == 0 || up_to > last {
                return Err(AgentError::CannotFork(format!(
                    "no turn {up_to} in session {source} (its history holds turns up to {last})"
                )));
            }
            // Where a compaction since summarised the turns: the newest revision that holds them.
            match self.store.revision_holding_before(source, up_to + 1)? {
                Some(found) => revision = Some(found),
                None => {
                    return Err(AgentError::CannotFork(format!(
                        "no revision of session {source} holds turn {up_to} verbatim any more"
                    )));
                }
            }
        }
        Ok(self
            .store
            .fork_session(source, &crate::opening::new_session_id(), up_to, revision)?)
    }

    /// The latest recovery record of session `id` (any state), decoded.
    pub fn latest_recovery(&self, id: &str) -> Result<Option<StoredRecord>, AgentError> {
        self.store.require_session(id)?;
        Ok(self
            .store
            .recovery_records(id)?
            .into_iter()
            .map(|(record_id, raw)| decode(&record_id, &raw))
            .next_back())
    }

    /// A controller for a new or resumed session; it holds the session's lease until dropped.
    /// Its services (client, sandbox, temp dir) are built for it, from what `surface` hands
    /// over.
    pub fn open_session(
        &self,
        choice: SessionChoice,
        settings: AgentSettings,
        surface: SurfaceServices,
    ) -> Result<Controller, AgentError> {
        Controller::open(self.store.clone(), choice, settings, surface, |id| {
            self.claim(id)
        })
    }

    /// A controller for another agent on `services` (those of a session opened before): a
    /// session of its own, sharing the client, the sandbox, the store and the approver.
    pub fn open_agent(
        &self,
        services: &Services,
        choice: SessionChoice,
        settings: AgentSettings,
    ) -> Result<Controller, AgentError> {
        Controller::open_on(services.clone(), choice, settings, |id| self.claim(id))
    }

    /// Mark session `id` open in this process (refused when it already is).
    fn claim(&self, id: &str) -> Result<OpenSession, AgentError> {
        crate::claim::claim_in(&self.open, id)
    }

    /// The child sessions (subagents') `parent` started, oldest first.
    pub fn children(&self, parent: &str) -> Result<Vec<SessionInfo>, AgentError> {
        Ok(self.store.children(parent)?)
    }
}
