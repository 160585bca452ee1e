//! A turn admitted by `Controller::begin`, run to its end.
//!
//! Invariants:
//! - It holds its session's state for as long as it runs: one turn at a time per session.
//! - Every turn ends with `turn/completed` or `turn/failed`, even one that stops on an error
//!   or a panic (caught here); the history is what was committed.

use crate::agent::Agent;
use crate::agent_state::AgentState;
use crate::error::AgentError;
use crate::turn;
use crate::turn_run::TurnInput;
use crate::turn_run::TurnOutcome;
use keel_types::{EventBody, FailureDiagnostic};
use std::sync::Arc;

/// A turn that was admitted and holds its session until it has run.
pub struct AdmittedTurn {
    pub(crate) agent: Arc<Agent>,
    pub(crate) state: tokio::sync::OwnedMutexGuard<AgentState>,
    pub(crate) input: TurnInput,
    /// The generation current at admission: a cancel after it cancels this turn.
    pub(crate) generation: u64,
}

impl AdmittedTurn {
    /// Run the turn to its end. Every turn ends with `turn/completed` or `turn/failed`, even
    /// one that stops on an error or a bug (a panic is caught here and the turn fails; the
    /// session stays usable and its history is what was committed).
    pub async fn run(self) -> Result<TurnOutcome, AgentError> {
        use futures_util::FutureExt;
        let AdmittedTurn {
            agent,
            mut state,
            input,
            generation,
        } = self;
        let before = state.last_turn;
        let ran = std::panic::AssertUnwindSafe(turn::run_turn(
            &agent, &mut state, input, generation, child_turn,
        ))
        .catch_unwind()
        .await;
        // The number `run_turn` gave this turn (it may not have got that far).
        let turn = state.last_turn.max(before + 1);
        state.last_turn = turn;
        let internal = |what: &str| {
            FailureDiagnostic::with_message(
                keel_types::FailureKind::Unknown,
                None,
                format!("keel stopped the turn: {what}; the history committed so far is kept"),
            )
        };
        // What the turn's responses used, for a turn that ends on an error or a panic.
        let (usage, cost) = agent.spend.take_running();
        if let (Err(_) | Ok(Err(_)), Some(usage)) = (&ran, &usage) {
            agent.spend.add_completed(usage);
        }
        match ran {
            Ok(Ok(outcome)) => {
                if let TurnOutcome::Completed { usage, .. } = &outcome {
                    agent.spend.add_completed(usage);
                }
                Ok(outcome)
            }
            Ok(Err(error)) => {
                let diagnostic = internal(&error.to_string());
                agent.emit(
                    Some(turn),
                    EventBody::TurnFailed {
                        diagnostic,
                        usage,
                        cost,
                    },
                );
                Err(error)
            }
            Err(_panic) => {
                let diagnostic = internal("an internal error (a bug in keel)");
                agent.emit(
                    Some(turn),
                    EventBody::TurnFailed {
                        diagnostic: diagnostic.clone(),
                        usage,
                        cost,
                    },
                );
                Ok(TurnOutcome::Failed {
                    diagnostic,
                    recovery_id: None,
                })
            }
        }
    }
}

/// A subagent's one turn (`TurnRun::child_turn`), admitted like any turn (so a panic or an
/// error in it ends it with `turn/failed`, never its parent's batch), its answer held for its
/// parent to commit, and what it used read from the events it sent.
pub(crate) fn child_turn(
    child: Arc<Agent>,
    input: TurnInput,
    generation: u64,
) -> futures_util::future::BoxFuture<'static, crate::turn_run::ChildTurnEnd> {
    Box::pin(async move {
        let mut events = child.events.subscribe();
        let mut state = child.state.clone().lock_owned().await;
        state.hold_answer = true;
        let outcome = AdmittedTurn {
            agent: child.clone(),
            state,
            input,
            generation,
        }
        .run()
        .await;
        let mut state = child.state.lock().await;
        let mut end = crate::turn_run::ChildTurnEnd {
            outcome,
            answer: state.held_answer.take(),
            last_words: crate::task_report::last_words(&state.history),
            rounds: state.replies,
            budget_stop: state.budget_stop.take(),
            usage: keel_types::Usage::default(),
            cost: None,
            cache_hit_first: 0,
        };
        let mut first = true;
        while let Ok(event) = events.try_recv() {
            match event.body {
                EventBody::LlmResponse { usage, .. } if first => {
                    first = false;
                    end.cache_hit_first = usage.cache_hit;
                }
                EventBody::TurnCompleted { usage, cost, .. } => {
                    (end.usage, end.cost) = (usage, cost)
                }
                EventBody::TurnFailed { usage, cost, .. } => {
                    (end.usage, end.cost) = (usage.unwrap_or_default(), cost);
                }
                _ => {}
            }
        }
        end
    })
}

/// The session's state, unless a turn holds it. A reader (a status request estimating the
/// context, `/context`) holds it for moments only: wait those out (a turn holds it for its
/// whole run, so it still answers busy within `BETWEEN_TURNS_WAIT`).
pub(crate) fn lock_between_turns<T>(
    state: &Arc<tokio::sync::Mutex<T>>,
) -> Option<tokio::sync::OwnedMutexGuard<T>> {
    const BETWEEN_TURNS_WAIT: std::time::Duration = std::time::Duration::from_millis(100);
    let started = std::time::Instant::now();
    loop {
        if let Ok(guard) = state.clone().try_lock_owned() {
            return Some(guard);
        }
        if started.elapsed() >= BETWEEN_TURNS_WAIT {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moment_of_reading_is_waited_out_and_a_turn_is_not() {
        let state = Arc::new(tokio::sync::Mutex::new(0u32));
        // A reader holding the state for a moment (a status request): admitted after it.
        let (locked, on_lock) = std::sync::mpsc::channel();
        let reader = {
            let state = state.clone();
            std::thread::spawn(move || {
                let _guard = state.try_lock().unwrap();
                locked.send(()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(5));
            })
        };
        on_lock.recv().unwrap();
        assert!(lock_between_turns(&state).is_some(), "waited out");
        reader.join().unwrap();
        // A turn holds it throughout: busy.
        let _turn = state.clone().try_lock_owned().unwrap();
        assert!(lock_between_turns(&state).is_none());
    }
}
