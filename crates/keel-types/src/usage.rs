//! Token usage of one response or one turn.
//!
//! Invariant: `input` counts every prompt token, cached or not; `cache_hit + cache_miss` equals
//! `input` whenever the provider reported a cache split (it may report none: both are then 0).

use serde::{Deserialize, Serialize};

/// Money spent, in the currency of the provider's price (absent wherever keel has no price:
/// tokens are shown alone, never a guessed amount).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub amount: f64,
    pub currency: String,
}

impl Cost {
    /// `12.3456 USD` → `$12.35`; small amounts keep four decimals (`$0.0012`).
    pub fn display(&self) -> String {
        let symbol = match self.currency.as_str() {
            "USD" => "$",
            "CNY" => "¥",
            "EUR" => "€",
            _ => "",
        };
        let digits = if self.amount != 0.0 && self.amount.abs() < 1.0 {
            4
        } else {
            2
        };
        if symbol.is_empty() {
            format!("{:.digits$} {}", self.amount, self.currency)
        } else {
            format!("{symbol}{:.digits$}", self.amount)
        }
    }

    /// `other` added when it is in the same currency (amounts in two currencies are not
    /// summed: the first stays).
    pub fn add(&mut self, other: &Cost) {
        if self.currency == other.currency {
            self.amount += other.amount;
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub reasoning: u64,
    pub cache_hit: u64,
    pub cache_miss: u64,
    /// Of `cache_miss`, the tokens written to the provider's cache where the protocol reports
    /// them (Anthropic's `cache_creation_input_tokens`), which some providers bill at their
    /// own rate; absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl Usage {
    /// Saturating: a provider's numbers can never overflow a total.
    pub fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.reasoning = self.reasoning.saturating_add(other.reasoning);
        self.cache_hit = self.cache_hit.saturating_add(other.cache_hit);
        self.cache_miss = self.cache_miss.saturating_add(other.cache_miss);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
    }

    /// Share of prompt tokens served from the provider's prefix cache, in `0.0..=1.0`.
    pub fn cache_hit_ratio(&self) -> f64 {
        let reported = self.cache_hit + self.cache_miss;
        if reported == 0 {
            0.0
        } else {
            self.cache_hit as f64 / reported as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_is_shown_with_its_symbol_and_small_amounts_keep_four_decimals() {
        let cost = |amount: f64, currency: &str| Cost {
            amount,
            currency: currency.into(),
        };
        assert_eq!(cost(12.3456, "USD").display(), "$12.35");
        assert_eq!(cost(0.00123, "USD").display(), "$0.0012");
        assert_eq!(cost(0.0, "CNY").display(), "¥0.00");
        assert_eq!(cost(2.5, "GBP").display(), "2.50 GBP");
        let mut total = cost(1.0, "USD");
        total.add(&cost(0.5, "USD"));
        total.add(&cost(100.0, "EUR"));
        assert_eq!(total, cost(1.5, "USD"), "other currencies are not summed");
    }

    #[test]
    fn ratio_is_zero_without_cache_report_and_exact_with_one() {
        assert_eq!(Usage::default().cache_hit_ratio(), 0.0);
        let usage = Usage {
            input: 100,
            cache_hit: 75,
            cache_miss: 25,
            ..Usage::default()
        };
        assert_eq!(usage.cache_hit_ratio(), 0.75);
        let mut total = usage;
        total.add(&usage);
        assert_eq!(total.input, 200);
        assert_eq!(total.cache_hit, 150);
    }
}
