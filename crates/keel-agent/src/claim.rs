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

impl Drop for OpenSession {
    fn drop(&mut self) {
        lock(&self.open).remove(&self.id);
    }
}

pub(crate) fn lock(open: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
