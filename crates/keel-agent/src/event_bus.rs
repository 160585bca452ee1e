//! An agent's events: stamped with its session id, indexed in the store, delivered to every
//! subscriber in one order, and forwarded to a parent agent's subscribers where it has one.
//!
//! Invariants:
//! - Events reach every subscriber in one order; all but the live-only ones
//!   (`EventBody::is_transient`) are indexed in the store first and carry their index.
//! - Indexing and delivering happen under the subscribers' lock, so a subscriber that replays
//!   the store and then follows live events never misses or repeats one at the seam.
//! - An event is stamped with the session id of the agent that emitted it, also where a
//!   parent's subscribers see it: a child's events never pass for the parent's. A forwarded
//!   event carries no id (it is in the child's log only), and no bus forwards to itself.
//! - The event index is derived data: a failed index write never fails the turn.

use crate::subscribers::Subscriber;
use keel_store::{Store, StoreError};
use keel_types::{Event, EventBody};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::mpsc;

/// Where one agent's events go.
pub(crate) struct EventBus {
    session_id: String,
    store: Store,
    subscribers: Mutex<Vec<Subscriber>>,
    /// The parent agent's bus, whose live subscribers see this agent's events too.
    parent: Mutex<Option<Arc<EventBus>>>,
}

impl EventBus {
    pub(crate) fn new(session_id: &str, store: Store) -> EventBus {
        EventBus {
            session_id: session_id.to_string(),
            store,
            subscribers: Mutex::new(Vec::new()),
            parent: Mutex::new(None),
        }
    }

    fn lock_subscribers(&self) -> MutexGuard<'_, Vec<Subscriber>> {
        self.subscribers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// From now on, `parent`'s live subscribers also get this agent's events (stamped with
    /// this agent's session id, indexed in this agent's log only); false, and nothing changed,
    /// where `parent` is this bus or already forwards to it (events would go round for ever).
    pub(crate) fn forward_to(self: &Arc<Self>, parent: Arc<EventBus>) -> bool {
        let mut ancestor = Some(parent.clone());
        while let Some(bus) = ancestor {
            if Arc::ptr_eq(&bus, self) {
                return false;
            }
            ancestor = bus.parent();
        }
        *self
            .parent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(parent);
        true
    }

    /// Stamp, index and deliver an event (see the module invariants).
    pub(crate) fn emit(&self, turn: Option<u64>, body: EventBody) {
        let mut event = Event {
            id: None,
            session_id: self.session_id.clone(),
            turn,
            body,
        };
        {
            let mut subscribers = self.lock_subscribers();
            if !event.body.is_transient() {
                event.id = self.store.append_event(&event).ok();
            }
            subscribers.retain(|subscriber| subscriber.deliver(&event));
        }
        if let Some(parent) = self.parent() {
            // Not in the parent's log: no id of that log's sequence (a subscriber resuming the
            // parent's events from an id must never meet one of another session's).
            parent.deliver_forwarded(&Event { id: None, ..event });
        }
    }

    /// The bus this one forwards to, if any.
    fn parent(&self) -> Option<Arc<EventBus>> {
        self.parent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// A child's event, delivered as it is to this bus's live subscribers (and on up).
    fn deliver_forwarded(&self, event: &Event) {
        self.lock_subscribers()
            .retain(|subscriber| subscriber.deliver(event));
        if let Some(parent) = self.parent() {
            parent.deliver_forwarded(event);
        }
    }

    /// A new event stream: every event from now on, in order, never dropped.
    pub(crate) fn subscribe(&self) -> mpsc::UnboundedReceiver<Event> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.lock_subscribers().push(Subscriber::Unbounded(sender));
        receiver
    }

    /// The stored events after `after_event_id`, then every live event: no gap and no
    /// duplicate at the seam (the log is read and the stream registered under the lock `emit`
    /// holds). Live-only events are not replayed.
    pub(crate) fn subscribe_after(
        &self,
        after_event_id: u64,
    ) -> Result<mpsc::UnboundedReceiver<Event>, StoreError> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut subscribers = self.lock_subscribers();
        for stored in self.store.events_after(&self.session_id, after_event_id)? {
            let _ = sender.send(stored.event);
        }
        subscribers.push(Subscriber::Unbounded(sender));
        Ok(receiver)
    }

    /// `subscribe_after` for a consumer that may fall behind: at most `capacity` live events
    /// wait for it; past that it is dropped (its stream ends) and it can resume from the last
    /// event id it saw. The turn never waits for a subscriber.
    pub(crate) fn subscribe_after_bounded(
        &self,
        after_event_id: u64,
        capacity: usize,
    ) -> Result<mpsc::Receiver<Event>, StoreError> {
        let mut subscribers = self.lock_subscribers();
        let stored = self.store.events_after(&self.session_id, after_event_id)?;
        let (sender, receiver) = mpsc::channel(capacity.max(1) + stored.len());
        for stored in stored {
            let _ = sender.try_send(stored.event);
        }
        subscribers.push(Subscriber::Bounded(sender));
        Ok(receiver)
    }
}
