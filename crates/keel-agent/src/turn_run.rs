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

use crate::Shared;
use keel_llm::AccountCursor;
use keel_types::{EventBody, InputKind, Usage};
use std::sync::atomic::Ordering;
use tokio::sync::watch;

/// What starts a turn.
pub(crate) struct TurnInput {
    /// The user text the turn commits (none for a compaction-only turn).
    pub text: String,
    pub kind: InputKind,
    /// What a compaction's summary should focus on (`/compact [focus]`).
    pub focus: Option<String>,
}

pub struct TurnRun<'a> {
    pub shared: &'a Shared,
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
}

/// What a turn's responses used, and cost, each priced at the hour it completed (no amount
/// without a price).
pub(crate) struct Spent {
    pub usage: Usage,
    price: Option<keel_llm::price::Price>,
    amount: f64,
}

impl TurnRun<'_> {
    /// Count a response's tokens (priced now), also where a turn ending on an error finds them.
    pub fn charge(&mut self, usage: &Usage) {
        self.spent.charge(usage);
        *self
            .shared
            .turn_spent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = self.spent.if_any();
    }
}

impl Spent {
    fn for_model(shared: &Shared) -> Spent {
        Spent {
            usage: Usage::default(),
            price: keel_llm::price::price_for(&shared.settings.profile, &shared.settings.model),
            amount: 0.0,
        }
    }

    /// Count a response's tokens, priced now.
    fn charge(&mut self, usage: &Usage) {
        self.usage.add(usage);
        if let Some(price) = &self.price {
            self.amount += price.charge_now(usage).amount;
        }
    }

    /// The cost so far, where the model has a price.
    pub fn cost(&self) -> Option<keel_types::Cost> {
        self.price.as_ref().map(|price| keel_types::Cost {
            amount: self.amount,
            currency: price.currency.clone(),
        })
    }

    /// What a failed or cancelled turn's event says it used: nothing when no response came.
    pub fn if_any(&self) -> (Option<Usage>, Option<keel_types::Cost>) {
        if self.usage == Usage::default() {
            (None, None)
        } else {
            (Some(self.usage), self.cost())
        }
    }
}

impl<'a> TurnRun<'a> {
    /// A run of `turn`, belonging to `generation` (the one current when it was admitted, so a
    /// cancel between admission and start still cancels it).
    pub fn start(shared: &'a Shared, turn: u64, generation: u64) -> TurnRun<'a> {
        *shared
            .turn_spent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = (None, None);
        TurnRun {
            shared,
            turn,
            generation,
            signal: shared.cancel_signal.subscribe(),
            accounts: AccountCursor::new(&shared.settings.profile),
            unconfined_offered: false,
            spent: Spent::for_model(shared),
        }
    }

    /// Whether the turn has not been cancelled.
    pub fn is_current(&self) -> bool {
        self.shared.generation.load(Ordering::SeqCst) == self.generation
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
        self.shared.emit(Some(self.turn), body);
    }
}
