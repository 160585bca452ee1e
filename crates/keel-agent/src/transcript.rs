//! A session's history and receipts as a surface shows them, read from the store.
//!
//! Invariant: reading never writes: receipts are shown as the next load would settle them when
//! no live process holds the session, but the store is left as it is.

use crate::error::AgentError;
use keel_store::{SessionInfo, Store, StoredItem};
use keel_types::ToolReceipt;

/// A session's canonical history and its tool receipts.
#[derive(Clone, Debug)]
pub struct Transcript {
    pub session: SessionInfo,
    pub items: Vec<StoredItem>,
    pub receipts: Vec<ToolReceipt>,
    /// The history revision `items` belong to.
    pub revision: u64,
    /// Every revision of the history, oldest first (more than one after a compaction).
    pub revisions: Vec<keel_store::RevisionInfo>,
}

pub(crate) fn transcript(store: &Store, id: &str) -> Result<Transcript, AgentError> {
    transcript_at(store, id, None)
}

/// The transcript of one history revision (`None`: the current one).
pub(crate) fn transcript_at(
    store: &Store,
    id: &str,
    revision: Option<u64>,
) -> Result<Transcript, AgentError> {
    let session = store.require_session(id)?;
    let revisions = store.revisions(id)?;
    let current = revisions.last().map_or(1, |info| info.revision);
    let (revision, items) = match revision {
        Some(revision) => (revision, store.items_of_revision(id, revision)?),
        None => (current, store.items(id)?),
    };
    Ok(Transcript {
        items,
        receipts: crate::load::receipts_for_display(store, id)?,
        session,
        revision,
        revisions,
    })
}
