//! The running turn as a value: its number, its generation and cancel signal, its account
//! cursor. Every step of a turn takes this instead of loose parameters.
//!
//! Invariants:
//! - A turn belongs to the generation that was current when it started; once the controller
//!   moves the generation on (a cancel), `is_current` is false for ever and `cancelled`
//!   resolves, so nothing of this turn is committed or started afterwards.
//! - Events a turn emits carry its number.
//! - `spent` holds every response the turn received, each priced at the hour it completed:
//!   however the turn ends (completed, failed, cancelled), its event says what was used.

use crate::agent::Agent;
use crate::spend::Spent;
use futures_util::future::BoxFuture;
use keel_llm::AccountCursor;
use keel_types::{EventBody, InputKind, Usage};
use std::sync::Arc;
use tokio::sync::watch;

/// How a turn ended.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnOutcome {
    Completed {
        usage: Usage,
        readiness: crate::recovery::readiness::Readiness,
    },
    /// The turn failed; `recovery_id` names the explicit recovery offered for it, if any.
    Failed {
        diagnostic: keel_types::FailureDiagnostic,
        recovery_id: Option<String>,
    },
    Cancelled,
}

/// A subagent's turn as the engine runs it, handed to every turn (`TurnRun::child_turn`): the
/// tool round that starts subagents cannot name the turn engine that calls it.
pub(crate) type ChildTurn = fn(Arc<Agent>, TurnInput, u64) -> BoxFuture<'static, ChildTurnEnd>;

/// How a subagent's turn ended: its outcome, its final answer (held for its parent to commit),
/// and what it said last where it gave none.
pub(crate) struct ChildTurnEnd {
    pub outcome: Result<TurnOutcome, crate::error::AgentError>,
    pub answer: Option<(u64, keel_types::Item)>,
    pub last_words: Option<String>,
    /// Its responses (its rounds).
    pub rounds: u32,
    /// Why it stopped at a budget, if it did.
    pub budget_stop: Option<String>,
    /// What its turn used and cost (its `turn/completed` or `turn/failed`, as emitted), and
    /// the cache-hit tokens of its first response.
    pub usage: keel_types::Usage,
    pub cost: Option<keel_types::Cost>,
    pub cache_hit_first: u64,
}

/// What starts a turn.
pub(crate) struct TurnInput {
    /// The user text the turn commits (none for a compaction-only turn).
    pub text: String,
    pub kind: InputKind,
    /// What a compaction's summary should focus on (`/compact [focus]`).
    pub focus: Option<String>,
}

pub struct TurnRun {
    /// The agent the turn runs on (shared, so the turn can run on a task of its own).
    pub agent: Arc<Agent>,
    pub turn: u64,
    generation: u64,
    signal: watch::Receiver<u64>,
    /// Which of the provider's accounts are still usable in this turn.
    pub accounts: AccountCursor,
    /// An unconfined re-run was offered in this turn (at most one is: a command's own output
    /// triggers the offer, so a model cannot make it ask again and again).
    pub unconfined_offered: bool,
    /// What the turn's responses used and cost so far.
    pub spent: Spent,
    /// How the subagents its `task` calls start run their turn.
    pub(crate) child_turn: ChildTurn,
}

impl TurnRun {
    /// Count a response's tokens (priced now), also where a turn ending on an error finds them.
    pub fn charge(&mut self, usage: &Usage) {
        self.spent.charge(usage);
        self.agent.spend.set_running(self.spent.if_any());
    }

    /// A run of `turn`, belonging to `generation` (the one current when it was admitted, so a
    /// cancel between admission and start still cancels it).
    pub(crate) fn start(
        agent: Arc<Agent>,
        turn: u64,
        generation: u64,
        child_turn: ChildTurn,
    ) -> TurnRun {
        agent.spend.set_running((None, None));
        TurnRun {
            turn,
            generation,
            signal: agent.cancellation.watch(),
            accounts: AccountCursor::new(&agent.settings.profile),
            unconfined_offered: false,
            spent: Spent::for_model(&agent.settings.profile, &agent.settings.model),
            child_turn,
            agent,
        }
    }

    /// The generation the turn belongs to (a subagent it starts checks it too).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the turn has not been cancelled.
    pub fn is_current(&self) -> bool {
        self.agent.cancellation.is_current(self.generation)
    }

    /// Resolves once the turn is cancelled.
    pub async fn cancelled(&mut self) {
        while *self.signal.borrow_and_update() == self.generation {
            if self.signal.changed().await.is_err() {
                // The controller is gone: nothing can cancel any more.
                std::future::pending::<()>().await;
            }
        }
    }

    pub fn emit(&self, body: EventBody) {
        self.agent.emit(Some(self.turn), body);
    }
}
