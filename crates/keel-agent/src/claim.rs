//! A session claimed by an agent of this process: one agent per session here, as the store's
//! lease keeps other processes out.
//!
//! Invariant: the claim holds from the moment an agent opens a session until that agent is
//! dropped; a second claim of the same session is refused.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The sessions agents of one host hold now.
pub(crate) type Claimed = Arc<Mutex<HashSet<String>>>;

/// Marks a session open on its host until the controller holding it is dropped.
#[derive(Debug)]
pub(crate) struct OpenSession {
    pub(crate) open: Claimed,
    pub(crate) id: String,
}

/// Claim `id` in `open`; refused when an agent of this host holds it already.
pub(crate) fn claim_in(open: &Claimed, id: &str) -> Result<OpenSession, crate::error::AgentError> {
    if !lock(open).insert(id.to_string()) {
        return Err(crate::error::AgentError::AlreadyOpen(id.to_string()));
    }
    Ok(OpenSession {
        open: open.clone(),
        id: id.to_string(),
    })
}

impl OpenSession {
    /// Claim `id` on the host this session is claimed on (a child session of it).
    pub(crate) fn claim_another(&self, id: &str) -> Result<OpenSession, crate::error::AgentError> {
        claim_in(&self.open, id)
    }
}

impl Drop for OpenSession {
    fn drop(&mut self) {
        lock(&self.open).remove(&self.id);
    }
}

pub(crate) fn lock(open: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
