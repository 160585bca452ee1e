//! Context windows: how many tokens a model takes, and how many of them keel keeps free for
//! the answer.
//!
//! Invariants:
//! - A configured `context_window` always wins over the table; the table is matched on the
//!   real model id (exact, then the longest prefix), never on a display name.
//! - Where a family's figure varies by version the table holds the smallest, so keel compacts
//!   early rather than meets a context-limit rejection.
//! - The output reserve never exceeds a quarter of the window, so a small window stays usable.

use crate::ProviderProfile;

/// Known windows, in tokens: (model id or id prefix ending in `*`, window).
const KNOWN_WINDOWS: &[(&str, u64)] = &[
    ("deepseek-chat", 131_072),
    ("deepseek-reasoner", 131_072),
    ("deepseek*", 131_072),
    ("kimi-k2*", 262_144),
    ("kimi-latest", 131_072),
    ("kimi*", 131_072),
    ("moonshot-v1-8k*", 8_192),
    ("moonshot-v1-32k*", 32_768),
    ("moonshot-v1-128k*", 131_072),
    ("mimo*", 131_072),
    ("gpt-5*", 400_000),
    ("gpt-4.1*", 1_047_576),
    ("gpt-4o*", 128_000),
    ("o3*", 200_000),
    ("o4-mini*", 200_000),
];

/// What to tell the user at start when keel knows no window for `model` (none configured, none
/// in the table): compaction cannot plan ahead. With the closest id keel knows, if one is close
/// enough to be a typo. `None` when there is nothing to say.
pub fn unknown_model_notice(profile: &ProviderProfile, model: &str) -> Option<String> {
    if profile.context_window.is_some() || known_window(model).is_some() {
        return None;
    }
    let table = KNOWN_WINDOWS
        .iter()
        .map(|(id, _)| id.trim_end_matches('*').trim_end_matches('-'));
    let priced = crate::price::known_models(&profile.base_url);
    let suggestion = keel_types::names::closest(model, table.chain(priced))
        .map(|known| format!(" Did you mean `{known}`?"))
        .unwrap_or_default();
    Some(format!(
        "keel does not know the context window of `{model}`, so it cannot compact ahead of the \
         limit.{suggestion} If the id is right, set `context_window` in [providers.{}] to \
         silence this.",
        profile.name
    ))
}

/// The window of `model` from the table, if it is known.
pub fn known_window(model: &str) -> Option<u64> {
    let exact = KNOWN_WINDOWS
        .iter()
        .find(|(id, _)| !id.ends_with('*') && *id == model);
    let prefix = || {
        KNOWN_WINDOWS
            .iter()
            .filter_map(|(id, window)| {
                let stem = id.strip_suffix('*')?;
                model.starts_with(stem).then_some((stem.len(), *window))
            })
            .max_by_key(|(length, _)| *length)
            .map(|(_, window)| window)
    };
    exact.map(|(_, window)| *window).or_else(prefix)
}

/// The window keel works with: the configured one, else the table's.
pub fn window_for(profile: &ProviderProfile, model: &str) -> Option<u64> {
    profile.context_window.or_else(|| known_window(model))
}

/// Tokens kept free for the answer: the requested output limit, at most a quarter of the window.
pub fn output_reserve(profile: &ProviderProfile, window: u64) -> u64 {
    u64::from(profile.max_output_tokens).min(window / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_ids_win_then_the_longest_prefix() {
        assert_eq!(known_window("deepseek-chat"), Some(131_072));
        assert_eq!(known_window("deepseek-v4-flash"), Some(131_072));
        assert_eq!(known_window("kimi-k2-0905-preview"), Some(262_144));
        assert_eq!(known_window("kimi-latest"), Some(131_072));
        assert_eq!(known_window("moonshot-v1-32k-vision"), Some(32_768));
        assert_eq!(known_window("gpt-4.1-mini"), Some(1_047_576));
        assert_eq!(known_window("mimo-v2-flash"), Some(131_072));
        assert_eq!(known_window("llama-3"), None);
    }

    #[test]
    fn configuration_wins_and_the_reserve_is_bounded() {
        let mut profile = ProviderProfile {
            name: "x".into(),
            protocol: keel_types::WireProtocol::Chat,
            base_url: "http://127.0.0.1:1".into(),
            base_url_setting: String::new(),
            accounts: vec![],
            reasoning_protocol: keel_types::ReasoningProtocol::None,
            retry: crate::RetryPolicy::default(),
            idle_timeout: crate::profile::DEFAULT_IDLE_TIMEOUT,
            connect_timeout: crate::profile::DEFAULT_CONNECT_TIMEOUT,
            max_output_tokens: crate::profile::DEFAULT_MAX_OUTPUT_TOKENS,
            native_web_search: false,
            max_event_bytes: crate::profile::DEFAULT_MAX_EVENT_BYTES,
            context_window: None,
            price: None,
            region: None,
            reasoning_effort: None,
        };
        assert_eq!(window_for(&profile, "deepseek-chat"), Some(131_072));
        profile.context_window = Some(4000);
        assert_eq!(window_for(&profile, "deepseek-chat"), Some(4000));
        assert_eq!(output_reserve(&profile, 4000), 1000);
        assert_eq!(output_reserve(&profile, 1_000_000), 8192);
    }
}
