//! `[agents]`: how many subagents run at once and how far each may go
//! (docs/configuration.md#agents).
//!
//! Invariants:
//! - A project file (trusted or not) may only lower a limit: a value above the user's own (or
//!   the default) is left out and reported, never applied (`lower_only`). `max_child_tokens = 0`
//!   means no limit, so a project's 0 never lifts the user's limit.
//! - The limits resolve like every value: the first layer that sets one wins, and it says where
//!   it came from.
//! - `max_concurrent` and `max_rounds` are at least 1: 0 in the user's file is an error naming
//!   its line (`check`); in a project's it is left out and reported (a repository cannot stop
//!   keel, nor every subagent).

use crate::ignored::{IgnoredBecause, IgnoredValue};
use crate::layer::{Layer, RawAgents};
use crate::source::Sourced;
use toml::Spanned;

/// Subagents running at once in one session, by default.
pub const DEFAULT_MAX_CONCURRENT: u32 = 4;
/// Rounds one subagent may take, by default.
pub const DEFAULT_AGENT_MAX_ROUNDS: u32 = 50;

/// The limits on a session's subagents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentLimits {
    /// Subagents running at once; the rest wait.
    pub max_concurrent: u32,
    /// Rounds one subagent may take before it ends `budget_exhausted`.
    pub max_rounds: u32,
    /// Input + output tokens one subagent may use (`None`: no limit).
    pub max_child_tokens: Option<u64>,
}

impl Default for AgentLimits {
    fn default() -> AgentLimits {
        AgentLimits {
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            max_rounds: DEFAULT_AGENT_MAX_ROUNDS,
            max_child_tokens: None,
        }
    }
}

/// The limits with where each came from (`keel config`).
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedAgentLimits {
    pub max_concurrent: Sourced<u32>,
    pub max_rounds: Sourced<u32>,
    /// 0: no limit.
    pub max_child_tokens: Sourced<u64>,
}

impl ResolvedAgentLimits {
    pub fn limits(&self) -> AgentLimits {
        AgentLimits {
            max_concurrent: self.max_concurrent.value,
            max_rounds: self.max_rounds.value,
            max_child_tokens: Some(self.max_child_tokens.value).filter(|tokens| *tokens > 0),
        }
    }
}

/// The limits `layers` resolve to (highest precedence first).
pub(crate) fn resolve(layers: &[Layer]) -> ResolvedAgentLimits {
    fn first<T: Clone>(
        layers: &[Layer],
        field: impl Fn(&RawAgents) -> Option<&Spanned<T>>,
        default: T,
    ) -> Sourced<T> {
        layers
            .iter()
            .find_map(|layer| field(&layer.raw.agents).map(|value| layer.sourced(value)))
            .unwrap_or(Sourced::default_value(default))
    }
    ResolvedAgentLimits {
        max_concurrent: first(
            layers,
            |agents| agents.max_concurrent.as_ref(),
            DEFAULT_MAX_CONCURRENT,
        ),
        max_rounds: first(
            layers,
            |agents| agents.max_rounds.as_ref(),
            DEFAULT_AGENT_MAX_ROUNDS,
        ),
        max_child_tokens: first(layers, |agents| agents.max_child_tokens.as_ref(), 0),
    }
}

/// Why 0 is no value for a count of subagents or rounds.
const AT_LEAST_ONE: &str = "must be at least 1 (0 would stop every subagent)";

/// The user's files: a 0 where at least 1 is needed is an error naming its line.
pub(crate) fn check(layers: &[Layer]) -> Result<(), crate::ConfigError> {
    for layer in layers {
        let agents = &layer.raw.agents;
        for value in [&agents.max_concurrent, &agents.max_rounds]
            .into_iter()
            .flatten()
        {
            if *value.get_ref() == 0 {
                return Err(layer.error(value.span(), AT_LEAST_ONE));
            }
        }
    }
    Ok(())
}

/// Take from a project layer every `[agents]` value that does not lower `user`'s (or is a 0
/// where at least 1 is needed); the reports.
pub(crate) fn lower_only(layer: &mut Layer, user: &AgentLimits) -> Vec<IgnoredValue> {
    let mut ignored = Vec::new();
    let mut raw = std::mem::take(&mut layer.raw.agents);
    for (key, value) in [
        ("agents.max_concurrent", &mut raw.max_concurrent),
        ("agents.max_rounds", &mut raw.max_rounds),
    ] {
        if let Some(zero) = value.take_if(|value| *value.get_ref() == 0) {
            ignored.push(crate::ignored::not_applied(
                layer,
                key,
                &zero,
                IgnoredBecause::NeverFromProject(AT_LEAST_ONE),
            ));
        }
    }
    let max_concurrent = raw
        .max_concurrent
        .take_if(|value| *value.get_ref() > user.max_concurrent);
    if let Some(value) = max_concurrent {
        let user = format!("agents.max_concurrent = {}", user.max_concurrent);
        ignored.push(looser(layer, "agents.max_concurrent", &value, user));
    }
    let max_rounds = raw
        .max_rounds
        .take_if(|value| *value.get_ref() > user.max_rounds);
    if let Some(value) = max_rounds {
        let user = format!("agents.max_rounds = {}", user.max_rounds);
        ignored.push(looser(layer, "agents.max_rounds", &value, user));
    }
    let max_child_tokens = raw.max_child_tokens.take_if(|value| {
        let asked = *value.get_ref();
        match user.max_child_tokens {
            // 0 is "no limit": above any limit the user set.
            Some(limit) => asked == 0 || asked > limit,
            None => false,
        }
    });
    if let Some(value) = max_child_tokens {
        let user = format!(
            "agents.max_child_tokens = {}",
            user.max_child_tokens.unwrap_or(0)
        );
        ignored.push(looser(layer, "agents.max_child_tokens", &value, user));
    }
    layer.raw.agents = raw;
    ignored
}

fn looser<T>(layer: &Layer, key: &str, value: &Spanned<T>, user: String) -> IgnoredValue {
    crate::ignored::not_applied(layer, key, value, IgnoredBecause::Looser { user })
}
