//! The connections `keel serve` holds, and who gives way when they are too many: the real
//! client wins. A connection that has presented the token (or redeemed a launch code) is
//! kept; when every slot is taken, the oldest connection that never did — a half-sent
//! request, or a finished token-less one idling on keep-alive — is closed to make room.
//!
//! Invariants:
//! - At most `cap` connections are held at once.
//! - A connection that presented the token is never closed for room; a new connection is
//!   refused only when every held one has presented it.
//! - With no token (`--no-auth`) nothing is ever marked: the oldest connection gives way.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// Set on a connection once one of its requests presented the token (a request extension,
/// read by `access::check`).
#[derive(Clone, Debug, Default)]
pub struct ConnectionMark(Arc<AtomicBool>);

impl ConnectionMark {
    /// This connection presented the token.
    pub fn authenticated(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_authenticated(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The connections held, in the order they were accepted.
#[derive(Debug)]
pub(crate) struct Connections {
    cap: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    next: u64,
    open: BTreeMap<u64, Slot>,
}

#[derive(Debug)]
struct Slot {
    mark: ConnectionMark,
    /// Closes the connection (its task stops serving it and drops the socket).
    close: oneshot::Sender<()>,
}

/// A connection admitted: its mark, and the signal that it must give way. Its slot is freed
/// when this is dropped.
pub(crate) struct Admitted {
    pub mark: ConnectionMark,
    pub closed: oneshot::Receiver<()>,
    id: u64,
    connections: Arc<Connections>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.connections.held().open.remove(&self.id);
    }
}

impl Connections {
    pub(crate) fn new(cap: usize) -> Arc<Connections> {
        Arc::new(Connections {
            cap: cap.max(1),
            held: Mutex::new(Held::default()),
        })
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Admit a new connection, closing the oldest that never presented the token if every
    /// slot is taken; `None` when every held connection presented it.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut held = self.held();
        if held.open.len() >= self.cap && !Self::evict_oldest_stranger(&mut held) {
            return None;
        }
        let id = held.next;
        held.next += 1;
        let (close, closed) = oneshot::channel();
        let mark = ConnectionMark::default();
        held.open.insert(
            id,
            Slot {
                mark: mark.clone(),
                close,
            },
        );
        Some(Admitted {
            mark,
            closed,
            id,
            connections: self.clone(),
        })
    }

    /// Close the oldest connection that never presented the token (the process ran out of
    /// descriptors, say); whether there was one.
    pub(crate) fn make_room(&self) -> bool {
        Self::evict_oldest_stranger(&mut self.held())
    }

    fn evict_oldest_stranger(held: &mut Held) -> bool {
        let oldest = held
            .open
            .iter()
            .find(|(_, slot)| !slot.mark.is_authenticated())
            .map(|(id, _)| *id);
        match oldest.and_then(|id| held.open.remove(&id)) {
            Some(slot) => {
                let _ = slot.close.send(());
                true
            }
            None => false,
        }
    }

    /// How many connections are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held().open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_stranger_gives_way_and_a_client_with_the_token_never_does() {
        let connections = Connections::new(3);
        let real = connections.admit().unwrap();
        real.mark.authenticated();
        let mut first = connections.admit().unwrap();
        let mut second = connections.admit().unwrap();
        let third = connections.admit().unwrap();
        assert!(
            first.closed.try_recv().is_ok(),
            "the oldest stranger is closed"
        );
        assert!(second.closed.try_recv().is_err());
        drop(first);
        assert_eq!(connections.len(), 3);
        third.mark.authenticated();
        let mut fourth = connections.admit().unwrap();
        assert!(second.closed.try_recv().is_ok());
        fourth.mark.authenticated();
        assert!(fourth.closed.try_recv().is_err());
        drop(second);
        assert!(connections.admit().is_none(), "all hold the token");
        drop(real);
        assert!(connections.admit().is_some());
    }
}
