//! Context accounting: how many tokens the next request takes, against the model's window.
//!
//! Invariants:
//! - The provider's reported input tokens are the truth; between responses the count is the
//!   request's bytes divided by a bytes-per-token ratio calibrated on the provider's own counts
//!   in this session (4 until the first response).
//! - A window is known only from the configuration or the model table; without one nothing is
//!   compacted by threshold and no percentage is shown — until a provider rejects a request as
//!   too long: its size is then an upper bound the compaction works under.

use keel_types::{Item, Usage, WindowUse};

/// Bytes per token before the provider has counted anything.
const DEFAULT_BYTES_PER_TOKEN: f64 = 4.0;

#[derive(Clone, Debug)]
pub(crate) struct ContextMeter {
    bytes_per_token: f64,
    /// Tokens of the context after the last response: its input plus its output.
    after_last_response: Option<u64>,
    /// The smallest request (tokens) a provider rejected as longer than its window.
    rejected_at: Option<u64>,
}

impl Default for ContextMeter {
    fn default() -> Self {
        ContextMeter {
            bytes_per_token: DEFAULT_BYTES_PER_TOKEN,
            after_last_response: None,
            rejected_at: None,
        }
    }
}

impl ContextMeter {
    /// Tokens of `bytes` of request text.
    pub fn tokens_of_bytes(&self, bytes: usize) -> u64 {
        (bytes as f64 / self.bytes_per_token).ceil() as u64
    }

    /// Estimated tokens of one history item as the provider sees it.
    pub fn tokens_of_item(&self, item: &Item) -> u64 {
        self.tokens_of_bytes(serde_json::to_string(item).map_or(0, |text| text.len()))
    }

    /// A response to a request of `request_bytes` came back with `usage`: calibrate.
    pub fn observe(&mut self, request_bytes: usize, usage: &Usage) {
        if usage.input > 0 && request_bytes > 0 {
            let ratio = request_bytes as f64 / usage.input as f64;
            // Guard against a provider that reports nonsense.
            self.bytes_per_token = ratio.clamp(1.0, 16.0);
        }
        if usage.input > 0 {
            self.after_last_response = Some(usage.input + usage.output);
        }
    }

    /// The context after the last response, against `window`.
    pub fn last_use(&self, window: Option<u64>) -> Option<WindowUse> {
        Some(WindowUse {
            used: self.after_last_response?,
            window: window?,
        })
    }

    /// A request of `tokens` was rejected as longer than the window.
    pub fn rejected(&mut self, tokens: u64) {
        self.rejected_at = Some(self.rejected_at.map_or(tokens, |known| known.min(tokens)));
    }

    pub fn rejected_at(&self) -> Option<u64> {
        self.rejected_at
    }

    /// Set the known context use directly (an estimate after a compaction).
    pub fn set_estimate(&mut self, tokens: u64) {
        self.after_last_response = Some(tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_count_calibrates_the_estimate() {
        let mut meter = ContextMeter::default();
        assert_eq!(meter.tokens_of_bytes(4000), 1000);
        meter.observe(
            3000,
            &Usage {
                input: 1000,
                output: 20,
                ..Usage::default()
            },
        );
        assert_eq!(meter.tokens_of_bytes(6000), 2000);
        assert_eq!(
            meter.last_use(Some(4000)),
            Some(WindowUse {
                used: 1020,
                window: 4000
            })
        );
        assert_eq!(meter.last_use(None), None);
        // A nonsense count does not make every estimate zero.
        meter.observe(
            10,
            &Usage {
                input: 1_000_000,
                ..Usage::default()
            },
        );
        assert_eq!(meter.tokens_of_bytes(100), 100);
    }
}
