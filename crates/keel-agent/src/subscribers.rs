//! Where a session's events go: each subscriber's channel, unbounded (a surface in this
//! process) or bounded (a remote client that resumes from its last event id if it falls
//! behind).
//!
//! Invariant: a bounded consumer with no room is dropped — it must resume from the store —
//! except for a live view's extras (`tool/output`, `tool/preview`), which it may simply miss.

use keel_types::Event;
use tokio::sync::mpsc;

/// Where a subscriber's events go.
pub(crate) enum Subscriber {
    Unbounded(mpsc::UnboundedSender<Event>),
    /// Dropped when full: a consumer that fell behind resumes from its last event id.
    Bounded(mpsc::Sender<Event>),
}

impl Subscriber {
    /// Send `event`; false when the subscriber is gone (or fell behind) and must be dropped.
    pub(crate) fn deliver(&self, event: &Event) -> bool {
        match self {
            Subscriber::Unbounded(sender) => sender.send(event.clone()).is_ok(),
            Subscriber::Bounded(sender) => match sender.try_send(event.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => event.body.is_live_extra(),
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::EventBody;

    #[test]
    fn a_full_consumer_misses_live_output_but_not_what_it_must_see() {
        let (sender, mut receiver) = mpsc::channel(1);
        let subscriber = Subscriber::Bounded(sender);
        let event = |body| Event {
            id: None,
            session_id: "s".into(),
            turn: Some(1),
            body,
        };
        let output = event(EventBody::ToolOutput {
            call_id: "c".into(),
            delta: "x".into(),
        });
        let result = event(EventBody::ToolStarted {
            call_id: "c".into(),
            name: "bash".into(),
            read_only: false,
        });
        assert!(subscriber.deliver(&output));
        // Full: more output is skipped and the consumer stays; anything else drops it.
        assert!(subscriber.deliver(&output));
        assert!(!subscriber.deliver(&result));
        assert!(receiver.try_recv().is_ok());
        assert!(receiver.try_recv().is_err());
    }
}
