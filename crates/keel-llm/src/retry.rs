//! Bounded, per-provider retry policy (docs/configuration.md#retries).
//!
//! Invariants:
//! - A retry is bounded by `max_retries`; there is no unbounded mode.
//! - Kinds that `FailureKind::is_never_retryable` are never retried, whatever the config says
//!   (config validation also rejects them with a clear error).
//! - The delay before retry `n` (1-based) is `base * 2^(n-1)`, capped at `max_delay`, spread by
//!   `±jitter`; a `Retry-After` from the provider replaces it, capped at `retry_after_cap`.
//! - `policy_key` is a pure function of the fields it names, with `retry_on` in a fixed order
//!   (sorted by name), so two policies that retry alike print the same key.

use keel_types::FailureKind;
use rand::Rng;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryMode {
    /// Retry the kinds of `retry_on`, at most `max_retries` times.
    Normal,
    /// Never retry.
    Off,
}

impl RetryMode {
    pub fn parse(name: &str) -> Option<RetryMode> {
        match name {
            "normal" => Some(Self::Normal),
            "off" => Some(Self::Off),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Off => "off",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    pub mode: RetryMode,
    pub max_retries: u32,
    pub retry_on: Vec<FailureKind>,
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// Relative spread of each delay, in `0.0..=1.0`.
    pub jitter: f64,
    /// The longest `Retry-After` keel will wait for.
    pub retry_after_cap: Duration,
    /// Kinds that switch to the next account of the provider instead of retrying.
    pub rotate_on: Vec<FailureKind>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            mode: RetryMode::Normal,
            max_retries: 5,
            retry_on: vec![
                FailureKind::EmptyResponse,
                FailureKind::RateLimit,
                FailureKind::Server,
                FailureKind::StreamCorrupt,
                FailureKind::Timeout,
                FailureKind::Transport,
            ],
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_millis(10_000),
            jitter: 0.1,
            retry_after_cap: Duration::from_secs(60),
            rotate_on: vec![FailureKind::Quota],
        }
    }
}

impl RetryPolicy {
    /// Whether a failure of `kind` may be retried after `retries_done` retries.
    pub fn allows_retry(&self, kind: FailureKind, retries_done: u32) -> bool {
        match self.mode {
            RetryMode::Off => false,
            RetryMode::Normal => {
                !kind.is_never_retryable()
                    && self.retry_on.contains(&kind)
                    && retries_done < self.max_retries
            }
        }
    }

    /// The policy as one line, the form other tools print it in:
    /// `[mode, max_retries, retry_on (sorted), base_delay_ms, max_delay_ms, jitter]`, e.g.
    /// `["normal",5,["empty_response","rate_limit","server","timeout","transport"],500,10000,0.1]`.
    pub fn policy_key(&self) -> String {
        let mut kinds: Vec<&str> = self.retry_on.iter().map(|kind| kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        let millis = |delay: Duration| u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        serde_json::json!([
            self.mode.as_str(),
            self.max_retries,
            kinds,
            millis(self.base_delay),
            millis(self.max_delay),
            self.jitter,
        ])
        .to_string()
    }

    pub fn rotates_on(&self, kind: FailureKind) -> bool {
        self.rotate_on.contains(&kind)
    }

    /// The delay before retry number `retry` (1-based), before jitter.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exponent = retry.saturating_sub(1).min(30);
        let delay = self.base_delay.saturating_mul(1u32 << exponent);
        delay.min(self.max_delay)
    }

    /// The delay to wait before retry number `retry`, honouring `Retry-After` (capped).
    pub fn delay_for(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(asked) = retry_after {
            return asked.min(self.retry_after_cap);
        }
        let delay = self.backoff(retry);
        if self.jitter <= 0.0 {
            return delay;
        }
        let spread = rand::rng().random_range(-self.jitter..=self.jitter);
        delay.mul_f64((1.0 + spread).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_matches_product_spec() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.max_retries, 5);
        assert_eq!(policy.base_delay, Duration::from_millis(500));
        assert_eq!(policy.max_delay, Duration::from_secs(10));
        assert_eq!(policy.jitter, 0.1);
        for kind in FailureKind::ALL {
            let expected = matches!(
                kind,
                FailureKind::EmptyResponse
                    | FailureKind::RateLimit
                    | FailureKind::Server
                    | FailureKind::StreamCorrupt
                    | FailureKind::Timeout
                    | FailureKind::Transport
            );
            assert_eq!(policy.allows_retry(kind, 0), expected, "{kind}");
        }
        assert!(policy.allows_retry(FailureKind::Server, 4));
        assert!(!policy.allows_retry(FailureKind::Server, 5));
    }

    #[test]
    fn never_retryable_kinds_stay_unretried_even_if_listed() {
        let policy = RetryPolicy {
            retry_on: FailureKind::ALL.to_vec(),
            ..RetryPolicy::default()
        };
        for kind in [
            FailureKind::Auth,
            FailureKind::Quota,
            FailureKind::Limit,
            FailureKind::ReasoningReplay,
            FailureKind::Cancelled,
        ] {
            assert!(!policy.allows_retry(kind, 0), "{kind}");
        }
        assert!(policy.allows_retry(FailureKind::UpstreamReasonMissing, 0));
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_jitter_stays_in_bounds() {
        let policy = RetryPolicy {
            jitter: 0.0,
            ..RetryPolicy::default()
        };
        let delays: Vec<u64> = (1..=7)
            .map(|n| policy.backoff(n).as_millis() as u64)
            .collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
        let jittered = RetryPolicy::default();
        for _ in 0..200 {
            let delay = jittered.delay_for(2, None).as_millis();
            assert!((900..=1100).contains(&delay), "{delay}");
        }
    }

    #[test]
    fn retry_after_wins_and_is_capped() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.delay_for(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            policy.delay_for(1, Some(Duration::from_secs(3600))),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn policy_key_is_one_line_with_sorted_kinds() {
        assert_eq!(
            RetryPolicy::default().policy_key(),
            r#"["normal",5,["empty_response","rate_limit","server","stream_corrupt","timeout","transport"],500,10000,0.1]"#
        );
        let custom = RetryPolicy {
            mode: RetryMode::Off,
            max_retries: 2,
            retry_on: vec![FailureKind::Server, FailureKind::InvalidRequest],
            jitter: 0.0,
            ..RetryPolicy::default()
        };
        assert_eq!(
            custom.policy_key(),
            r#"["off",2,["invalid_request","server"],500,10000,0.0]"#
        );
    }

    #[test]
    fn off_mode_never_retries() {
        let policy = RetryPolicy {
            mode: RetryMode::Off,
            ..RetryPolicy::default()
        };
        assert!(!policy.allows_retry(FailureKind::Server, 0));
    }
}
