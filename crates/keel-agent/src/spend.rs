//! What a session's turns used and cost, summed from their `turn/completed` and `turn/failed`
//! events.
//!
//! Invariants:
//! - Every turn's tokens count, whether it completed, failed or was stopped.
//! - An amount is never a part passed for the whole: tokens without a price (another model,
//!   no price known) or priced in another currency than the first set `partial`, and the
//!   display says so.

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
