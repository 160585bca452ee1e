//! What an agent's turns used and cost: the running turn's responses as they come (`Spent`),
//! the turns completed through this agent, and the session's totals summed from its stored
//! `turn/completed` and `turn/failed` events (`SessionSpend`).
//!
//! Invariants:
//! - A turn that ends on an error or a panic still says what its responses used: the running
//!   turn's spend is kept here as each response is charged.
//! - Every turn's tokens count, whether it completed, failed or was stopped.
//! - An amount is never a part passed for the whole: tokens without a price (another model,
//!   no price known) or priced in another currency than the first set `partial`, and the
//!   display says so.

use keel_types::{Cost, Usage};
use std::sync::Mutex;

/// What a session's turns used, and cost where they had a price.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionSpend {
    pub usage: keel_types::Usage,
    pub cost: Option<keel_types::Cost>,
    /// Some tokens counted in `usage` are not in `cost`: a turn on a model with no price, or
    /// priced in another currency than the first.
    pub partial: bool,
}

impl SessionSpend {
    /// Count a turn's tokens and, where it has one, its cost.
    pub fn add(&mut self, usage: &keel_types::Usage, cost: Option<&keel_types::Cost>) {
        self.usage.add(usage);
        let billed = usage.input + usage.output > 0;
        match (&mut self.cost, cost) {
            (Some(total), Some(cost)) if total.currency == cost.currency => total.add(cost),
            (Some(_), Some(_)) => self.partial = true,
            (total @ None, Some(cost)) => {
                // Tokens counted before without a price stay unpriced.
                self.partial |= self.usage.input + self.usage.output > usage.input + usage.output;
                *total = Some(cost.clone());
            }
            (_, None) => self.partial |= billed,
        }
    }

    /// The money as a person reads it: `$0.0213`, with `+ unpriced tokens` when partial;
    /// `None` without any price.
    pub fn cost_display(&self) -> Option<String> {
        self.cost.as_ref().map(|cost| {
            if self.partial {
                format!("{} + unpriced tokens", cost.display())
            } else {
                cost.display()
            }
        })
    }
}

/// What one agent's turns used, kept where every way a turn can end finds it.
#[derive(Default)]
pub(crate) struct Spend {
    /// Tokens of the turns completed through this agent.
    completed: Mutex<Usage>,
    /// The session's totals from its stored turns, and the last event they counted.
    session: Mutex<(u64, SessionSpend)>,
    /// What the running turn's responses used so far, for a turn that ends on an error or a
    /// panic (its `turn/failed` still says it).
    running: Mutex<(Option<Usage>, Option<Cost>)>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Spend {
    /// Tokens used by the turns this agent completed.
    pub(crate) fn completed(&self) -> Usage {
        *lock(&self.completed)
    }

    /// Count a turn that ended (completed, or failed after responses came).
    pub(crate) fn add_completed(&self, usage: &Usage) {
        lock(&self.completed).add(usage);
    }

    /// The running turn's spend so far (a new turn starts at nothing).
    pub(crate) fn set_running(&self, spent: (Option<Usage>, Option<Cost>)) {
        *lock(&self.running) = spent;
    }

    /// The running turn's spend, taken as the turn ends.
    pub(crate) fn take_running(&self) -> (Option<Usage>, Option<Cost>) {
        std::mem::take(&mut *lock(&self.running))
    }

    /// The session's totals: every turn of it, in any process, from its stored events; each
    /// call reads only the events stored since the last.
    pub(crate) fn session_totals(
        &self,
        store: &keel_store::Store,
        session_id: &str,
    ) -> Result<SessionSpend, keel_store::StoreError> {
        let mut counted = lock(&self.session);
        let (last, spend) = &mut *counted;
        for stored in store.events_after(session_id, *last)? {
            let (turn, cost) = match &stored.event.body {
                keel_types::EventBody::TurnCompleted {
                    usage: turn, cost, ..
                } => (Some(turn), cost),
                keel_types::EventBody::TurnFailed {
                    usage: turn, cost, ..
                } => (turn.as_ref(), cost),
                _ => (None, &None),
            };
            if let Some(turn) = turn {
                spend.add(turn, cost.as_ref());
            }
            *last = (*last).max(stored.event.id.unwrap_or(*last));
        }
        Ok(spend.clone())
    }
}

/// What a turn's responses used, and cost, each priced at the hour it completed (no amount
/// without a price).
pub(crate) struct Spent {
    pub usage: Usage,
    price: Option<keel_llm::price::Price>,
    amount: f64,
}

impl Spent {
    /// Nothing spent yet, on `model` of `profile` (priced where keel knows its price).
    pub(crate) fn for_model(profile: &keel_llm::ProviderProfile, model: &str) -> Spent {
        Spent {
            usage: Usage::default(),
            price: keel_llm::price::price_for(profile, model),
            amount: 0.0,
        }
    }

    /// Count a response's tokens, priced now.
    pub(crate) fn charge(&mut self, usage: &Usage) {
        self.usage.add(usage);
        if let Some(price) = &self.price {
            self.amount += price.charge_now(usage).amount;
        }
    }

    /// The cost so far, where the model has a price.
    pub fn cost(&self) -> Option<Cost> {
        self.price.as_ref().map(|price| Cost {
            amount: self.amount,
            currency: price.currency.clone(),
        })
    }

    /// What a failed or cancelled turn's event says it used: nothing when no response came.
    pub fn if_any(&self) -> (Option<Usage>, Option<Cost>) {
        if self.usage == Usage::default() {
            (None, None)
        } else {
            (Some(self.usage), self.cost())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::{Cost, Usage};

    fn usage(input: u64) -> Usage {
        Usage {
            input,
            output: 10,
            ..Usage::default()
        }
    }

    fn cost(amount: f64, currency: &str) -> Cost {
        Cost {
            amount,
            currency: currency.into(),
        }
    }

    #[test]
    fn priced_turns_add_up_and_say_the_whole() {
        let mut spend = SessionSpend::default();
        spend.add(&usage(100), Some(&cost(0.5, "USD")));
        spend.add(&usage(50), Some(&cost(0.25, "USD")));
        assert_eq!(spend.usage.input, 150);
        assert!(!spend.partial);
        assert_eq!(spend.cost_display(), Some(cost(0.75, "USD").display()));
    }

    #[test]
    fn unpriced_tokens_before_or_after_a_price_make_it_partial() {
        let mut after = SessionSpend::default();
        after.add(&usage(100), Some(&cost(0.5, "USD")));
        after.add(&usage(100), None);
        let mut before = SessionSpend::default();
        before.add(&usage(100), None);
        assert_eq!(before.cost_display(), None, "no price at all: tokens only");
        before.add(&usage(100), Some(&cost(0.5, "USD")));
        for spend in [after, before] {
            assert!(spend.partial);
            assert_eq!(
                spend.cost_display(),
                Some(format!("{} + unpriced tokens", cost(0.5, "USD").display()))
            );
        }
    }

    #[test]
    fn another_currency_is_never_added_as_if_it_were_the_first() {
        let mut spend = SessionSpend::default();
        spend.add(&usage(100), Some(&cost(0.5, "USD")));
        spend.add(&usage(100), Some(&cost(9.0, "EUR")));
        assert_eq!(spend.cost, Some(cost(0.5, "USD")));
        assert!(spend.partial);
    }
}
