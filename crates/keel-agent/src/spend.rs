//! What an agent's turns used and cost: the running turn's responses as they come (`Spent`),
//! the turns completed through this agent, and the session's totals summed from its stored
//! `turn/completed` and `turn/failed` events (`SessionSpend`); and what a surface shows while a
//! turn runs — the stored totals plus the running turn's responses, and the tokens of the
//! controllers a terminal left behind (`SurfaceSpend`). One spend rolls up into another with
//! `SessionSpend::merge` (a left controller's, a child agent's).
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

    /// Roll `other` up into this (a child agent's spend into its parent's, a running turn's
    /// into the stored totals): tokens add, costs add in one currency, and an unpriced part
    /// stays said.
    pub fn merge(&mut self, other: &SessionSpend) {
        let partial = self.partial || other.partial;
        self.add(&other.usage, other.cost.as_ref());
        self.partial |= partial;
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

/// What a surface shows of a session's spend: the stored totals as of the last turn's end plus
/// the running turn's responses as their events come (the store is not read again during a
/// turn: it may already hold the turn's end), and the tokens of the controllers a terminal
/// switched away from (they still count in `/cost`).
#[derive(Clone, Debug, Default)]
pub struct SurfaceSpend {
    stored: Option<SessionSpend>,
    running: SessionSpend,
    left: Usage,
}

impl SurfaceSpend {
    /// A response of the running turn, on `model` of `profile` (priced now, where keel knows
    /// its price).
    pub fn response(&mut self, usage: &Usage, profile: &keel_llm::ProviderProfile, model: &str) {
        let cost = keel_llm::price::price_for(profile, model).map(|price| price.charge_now(usage));
        self.running.add(usage, cost.as_ref());
    }

    /// The turn ended and is stored: the next figure reads the store again.
    pub fn turn_ended(&mut self) {
        self.running = SessionSpend::default();
        self.stored = None;
    }

    /// The session's figure now: during a turn (`busy`) the totals read at its start plus its
    /// responses so far; otherwise the store's totals, read by `read_stored`.
    pub fn now(
        &mut self,
        busy: bool,
        read_stored: impl FnOnce() -> Option<SessionSpend>,
    ) -> Option<SessionSpend> {
        let stored = match self.stored.take() {
            Some(stored) if busy => Some(stored),
            _ => read_stored(),
        };
        self.stored = stored.clone();
        stored.map(|mut spend| {
            spend.merge(&self.running);
            spend
        })
    }

    /// A controller this terminal switched away from used `usage`.
    pub fn left(&mut self, usage: &Usage) {
        self.left.add(usage);
    }

    /// Tokens of the controllers this terminal left.
    pub fn left_behind(&self) -> Usage {
        self.left
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
    /// Some tokens counted here have no price in this turn's currency (a subagent on another
    /// model): the turn then says no amount rather than a part of one.
    unpriced: bool,
}

impl Spent {
    /// Nothing spent yet, on `model` of `profile` (priced where keel knows its price).
    pub(crate) fn for_model(profile: &keel_llm::ProviderProfile, model: &str) -> Spent {
        Spent {
            usage: Usage::default(),
            price: keel_llm::price::price_for(profile, model),
            amount: 0.0,
            unpriced: false,
        }
    }

    /// Count a response's tokens, priced now.
    pub(crate) fn charge(&mut self, usage: &Usage) {
        self.usage.add(usage);
        if let Some(price) = &self.price {
            self.amount += price.charge_now(usage).amount;
        }
    }

    /// Count what a subagent's responses used and cost (each priced when it came); its cost
    /// counts where this turn has a price in the same currency (a child runs on its parent's
    /// model, so it does).
    pub(crate) fn add_priced(&mut self, usage: &Usage, cost: Option<&Cost>) {
        self.usage.add(usage);
        match (&self.price, cost) {
            (Some(price), Some(cost)) if price.currency == cost.currency => {
                self.amount += cost.amount;
            }
            _ => self.unpriced |= usage.input + usage.output > 0,
        }
    }

    /// The cost so far, where the model has a price.
    pub fn cost(&self) -> Option<Cost> {
        if self.unpriced {
            return None;
        }
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
    fn a_surface_adds_the_running_turn_to_totals_read_once_per_turn() {
        let mut seen = SurfaceSpend::default();
        let mut reads = 0;
        let mut stored = || {
            reads += 1;
            let mut spend = SessionSpend::default();
            spend.add(&usage(100), Some(&cost(0.5, "USD")));
            Some(spend)
        };
        assert_eq!(
            seen.now(true, &mut stored).map(|s| s.usage.input),
            Some(100)
        );
        seen.running.add(&usage(7), None);
        let during = seen.now(true, &mut stored).unwrap();
        assert_eq!(during.usage.input, 107);
        assert!(during.partial, "an unpriced response is said: {during:?}");
        seen.turn_ended();
        assert_eq!(
            seen.now(false, &mut stored).map(|s| s.usage.input),
            Some(100)
        );
        assert_eq!(
            reads, 2,
            "the store is read at the turn's start and after its end only"
        );
    }

    #[test]
    fn merging_keeps_a_part_unpriced_and_adds_one_currency() {
        let mut parent = SessionSpend::default();
        parent.add(&usage(100), Some(&cost(0.5, "USD")));
        let mut child = SessionSpend::default();
        child.add(&usage(20), Some(&cost(0.1, "USD")));
        parent.merge(&child);
        assert_eq!(parent.usage.input, 120);
        assert!(!parent.partial);
        assert_eq!(parent.cost_display(), Some(cost(0.6, "USD").display()));
        let mut unpriced = SessionSpend::default();
        unpriced.add(&usage(5), None);
        parent.merge(&unpriced);
        assert!(parent.partial);
        let mut partial_child = SessionSpend {
            partial: true,
            ..SessionSpend::default()
        };
        partial_child.usage.input = 0;
        let mut clean = SessionSpend::default();
        clean.add(&usage(1), Some(&cost(0.1, "USD")));
        clean.merge(&partial_child);
        assert!(clean.partial, "a child's unpriced part stays said");
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

    #[test]
    fn a_subagents_spend_without_a_price_in_the_turns_currency_leaves_the_turn_without_an_amount() {
        let mut spent = Spent {
            usage: Usage::default(),
            price: keel_llm::price::known_price(
                "https://api.deepseek.com",
                "deepseek-v4-flash",
                None,
            ),
            amount: 0.0,
            unpriced: false,
        };
        spent.charge(&usage(1000));
        let own = spent.cost().expect("deepseek-v4-flash has a price");
        // A child on the same currency adds its amount.
        spent.add_priced(&usage(10), Some(&cost(0.25, &own.currency)));
        assert!((spent.cost().unwrap().amount - own.amount - 0.25).abs() < 1e-9);
        assert_eq!(spent.usage.input, 1010);
        // One priced in another currency: no amount is a part passed for the whole.
        spent.add_priced(&usage(10), Some(&cost(1.0, "XXX")));
        assert_eq!(spent.cost(), None);
        assert_eq!(spent.usage.input, 1020, "its tokens still count");
    }
}
