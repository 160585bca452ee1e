//! Token usage of one response or one turn.
//!
//! Invariant: `input` counts every prompt token, cached or not; `cache_hit + cache_miss` equals
//! `input` whenever the provider reported a cache split (it may report none: both are then 0).

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub reasoning: u64,
    pub cache_hit: u64,
    pub cache_miss: u64,
}

impl Usage {
    /// Saturating: a provider's numbers can never overflow a total.
    pub fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.reasoning = self.reasoning.saturating_add(other.reasoning);
        self.cache_hit = self.cache_hit.saturating_add(other.cache_hit);
        self.cache_miss = self.cache_miss.saturating_add(other.cache_miss);
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
