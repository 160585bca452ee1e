//! A provider as configuration resolved it: every field with where it came from, and the
//! profile and retry policy keel-llm runs on.
//!
//! Invariant: plain data built by `provider` (which checks it); the config's resolved view
//! holds it without depending on how it was resolved.

use crate::source::{Source, Sourced};
use keel_llm::price::Price;
use keel_llm::profile::{Account, ProviderProfile};
use keel_llm::{ReasoningEffort, RetryMode, RetryPolicy};
use keel_types::{FailureKind, ReasoningProtocol, WireProtocol};
use std::time::Duration;

/// One provider, each field with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedProvider {
    pub name: String,
    pub protocol: Sourced<WireProtocol>,
    pub base_url: Sourced<String>,
    pub accounts: Sourced<Vec<Account>>,
    pub reasoning_protocol: Sourced<ReasoningProtocol>,
    pub idle_timeout: Sourced<Duration>,
    pub connect_timeout: Sourced<Duration>,
    pub max_output_tokens: Sourced<u32>,
    pub web_search: Sourced<bool>,
    pub max_event_bytes: Sourced<usize>,
    /// The model's context window in tokens; `None` when not configured.
    pub context_window: Sourced<Option<u64>>,
    pub retry: ResolvedRetry,
    /// The user's price for this provider; `None` leaves it to keel's table.
    pub price: Sourced<Option<Price>>,
    /// Which regional price list applies; `None` prices nothing that has regions.
    pub region: Sourced<Option<keel_llm::price::Region>>,
    /// `reasoning_effort`, checked against this provider's protocol; `None` sends nothing.
    pub reasoning_effort: Sourced<Option<ReasoningEffort>>,
}

impl ResolvedProvider {
    /// The profile requests are sent with.
    pub fn profile(&self) -> ProviderProfile {
        ProviderProfile {
            name: self.name.clone(),
            protocol: self.protocol.value,
            base_url: self.base_url.value.clone(),
            base_url_setting: match &self.base_url.source {
                Source::Env(variable) => format!("`{variable}`"),
                Source::File { path, line } => format!(
                    "`base_url` in [providers.{}] ({}:{line})",
                    self.name,
                    path.display()
                ),
                Source::Preset(name) => format!("the `{name}` preset's `base_url`"),
                Source::Default | Source::Flag(_) | Source::ModelTable => {
                    format!("`base_url` of [providers.{}]", self.name)
                }
            },
            accounts: self.accounts.value.clone(),
            reasoning_protocol: self.reasoning_protocol.value,
            retry: self.retry.policy(),
            idle_timeout: self.idle_timeout.value,
            connect_timeout: self.connect_timeout.value,
            max_output_tokens: self.max_output_tokens.value,
            native_web_search: self.web_search.value,
            max_event_bytes: self.max_event_bytes.value,
            context_window: self.context_window.value,
            price: self.price.value.clone(),
            region: self.region.value,
            reasoning_effort: self.reasoning_effort.value,
        }
    }
}

/// A provider's retry policy, each field with where it came from (`Source::Default` for the
/// fields of `RetryPolicy::default()` no file changed).
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedRetry {
    pub mode: Sourced<RetryMode>,
    pub max_retries: Sourced<u32>,
    pub retry_on: Sourced<Vec<FailureKind>>,
    pub base_delay: Sourced<Duration>,
    pub max_delay: Sourced<Duration>,
    pub jitter: Sourced<f64>,
    pub retry_after_cap: Sourced<Duration>,
    pub rotate_on: Sourced<Vec<FailureKind>>,
}

impl ResolvedRetry {
    /// The effective policy.
    pub fn policy(&self) -> RetryPolicy {
        RetryPolicy {
            mode: self.mode.value,
            max_retries: self.max_retries.value,
            retry_on: self.retry_on.value.clone(),
            base_delay: self.base_delay.value,
            max_delay: self.max_delay.value,
            jitter: self.jitter.value,
            retry_after_cap: self.retry_after_cap.value,
            rotate_on: self.rotate_on.value.clone(),
        }
    }
}
