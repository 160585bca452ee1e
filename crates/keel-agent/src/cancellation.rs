//! An agent's cancellation: a generation counter and the signal that wakes whatever waits on
//! it, and the children whose cancellation follows it.
//!
//! Invariants:
//! - `cancel` moves the generation on for good: whatever belongs to an older generation (a
//!   late reply, a tool result) is never committed and never starts a tool.
//! - A child (a subagent's cancellation) is cancelled whenever its parent is; cancelling a
//!   child leaves the parent alone. A child dropped before its parent is forgotten.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::watch;

/// One agent's cancellation.
pub(crate) struct Cancellation {
    generation: AtomicU64,
    signal: watch::Sender<u64>,
    children: Mutex<Vec<Weak<Cancellation>>>,
}

impl Cancellation {
    pub(crate) fn new() -> Arc<Cancellation> {
        let (signal, _) = watch::channel(0);
        Arc::new(Cancellation {
            generation: AtomicU64::new(0),
            signal,
            children: Mutex::new(Vec::new()),
        })
    }

    /// A cancellation that follows this one: cancelled whenever this one is.
    #[cfg(test)]
    pub(crate) fn child(&self) -> Arc<Cancellation> {
        let child = Cancellation::new();
        self.adopt(&child);
        child
    }

    /// From now on `child` is cancelled whenever this one is.
    pub(crate) fn adopt(&self, child: &Arc<Cancellation>) {
        let mut children = self
            .children
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        children.retain(|known| known.strong_count() > 0);
        children.push(Arc::downgrade(child));
    }

    /// The generation now: a turn admitted now belongs to it.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Whether `generation` is still the current one (nothing cancelled it).
    pub(crate) fn is_current(&self, generation: u64) -> bool {
        self.generation() == generation
    }

    /// A receiver that changes when the generation moves on.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.signal.subscribe()
    }

    /// Cancel what runs now (this agent's turn, and every child's).
    pub(crate) fn cancel(&self) {
        let next = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        // Two cancels at once (a parent's reaching a child while the child's own runs) must
        // leave the signal at the newest generation, never an older one.
        self.signal
            .send_modify(|signalled| *signalled = (*signalled).max(next));
        let children: Vec<Arc<Cancellation>> = self
            .children
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for child in children {
            child.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cancellation;

    #[test]
    fn a_child_follows_its_parent_and_not_the_other_way() {
        let parent = Cancellation::new();
        let child = parent.child();
        let (parent_turn, child_turn) = (parent.generation(), child.generation());
        child.cancel();
        assert!(parent.is_current(parent_turn), "the parent goes on");
        let child_turn = {
            assert!(!child.is_current(child_turn));
            child.generation()
        };
        let woken = child.watch();
        parent.cancel();
        assert!(!parent.is_current(parent_turn));
        assert!(
            !child.is_current(child_turn),
            "the child is cancelled with it"
        );
        assert!(woken.has_changed().unwrap_or(false));
    }

    #[test]
    fn a_dropped_child_is_forgotten() {
        let parent = Cancellation::new();
        drop(parent.child());
        let _kept = parent.child();
        parent.cancel();
        assert_eq!(parent.children.lock().unwrap().len(), 1);
    }
}
