//! Provider profiles: where to send requests, in which protocol, with which accounts and policy.
//!
//! Invariants:
//! - A profile names environment variables for keys, never the keys themselves; a key is read
//!   from the environment only when a request is about to be sent.
//! - `base_url` is an absolute http(s) URL without a trailing `/`.

use crate::retry::RetryPolicy;
use keel_types::{ReasoningProtocol, WireProtocol};
use std::time::Duration;

/// One credential of a provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// A label shown in events (`account/rotated`); never the key.
    pub name: String,
    /// The environment variable that holds the key.
    pub api_key_env: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProviderProfile {
    pub name: String,
    pub protocol: WireProtocol,
    pub base_url: String,
    /// What chose `base_url`, as a person reads it (`` `base_url` in [providers.deepseek]
    /// (~/.keel/config.toml:3) ``, `DEEPSEEK_BASE_URL`, the preset); named when the provider
    /// cannot be reached. Empty where nothing says.
    pub base_url_setting: String,
    pub accounts: Vec<Account>,
    pub reasoning_protocol: ReasoningProtocol,
    pub retry: RetryPolicy,
    /// Longest silence tolerated inside a stream before the attempt fails with `timeout`.
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    /// Output token limit sent with each request (required by Anthropic).
    pub max_output_tokens: u32,
    /// Offer the provider's own web search tool (Anthropic and Responses only).
    pub native_web_search: bool,
    /// The longest SSE line or event accepted; a longer one fails with `stream_corrupt`.
    pub max_event_bytes: usize,
    /// The model's context window in tokens, when known (`context_window` in config).
    pub context_window: Option<u64>,
    /// The user's price for this provider (`[providers.X.price]`), over keel's table.
    pub price: Option<crate::price::Price>,
    /// Which of the provider's regional price lists applies (`[providers.X] region`).
    pub region: Option<crate::price::Region>,
    /// How hard the model reasons (`reasoning_effort`); `None` sends nothing.
    pub reasoning_effort: Option<crate::effort::ReasoningEffort>,
}

impl ProviderProfile {
    /// The request fields that say the effort (empty when unset).
    pub(crate) fn effort_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        self.reasoning_effort
            .map(|effort| {
                effort.fields(
                    self.protocol,
                    self.reasoning_protocol,
                    self.max_output_tokens,
                )
            })
            .unwrap_or_default()
    }
}

impl ProviderProfile {
    /// The URL requests are posted to (docs/configuration.md#providers-and-endpoints).
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        match self.protocol {
            WireProtocol::Chat => format!("{base}/chat/completions"),
            WireProtocol::Responses => format!("{base}/responses"),
            WireProtocol::Anthropic => format!("{base}/v1/messages"),
        }
    }
}

/// A built-in provider: the defaults a `[providers.NAME]` table starts from.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
    pub protocol: WireProtocol,
    /// `None` where the user must give one (`openai-compatible`).
    pub base_url: Option<&'static str>,
    pub api_key_env: &'static str,
    pub reasoning_protocol: ReasoningProtocol,
}

pub const PRESETS: [Preset; 7] = [
    Preset {
        name: "deepseek",
        protocol: WireProtocol::Chat,
        base_url: Some("https://api.deepseek.com"),
        api_key_env: "DEEPSEEK_API_KEY",
        reasoning_protocol: ReasoningProtocol::Deepseek,
    },
    Preset {
        name: "deepseek-anthropic",
        protocol: WireProtocol::Anthropic,
        base_url: Some("https://api.deepseek.com/anthropic"),
        api_key_env: "DEEPSEEK_API_KEY",
        reasoning_protocol: ReasoningProtocol::Deepseek,
    },
    Preset {
        name: "deepseek-responses",
        protocol: WireProtocol::Responses,
        base_url: Some("https://api.deepseek.com"),
        api_key_env: "DEEPSEEK_API_KEY",
        reasoning_protocol: ReasoningProtocol::Deepseek,
    },
    Preset {
        name: "kimi",
        protocol: WireProtocol::Chat,
        base_url: Some("https://api.moonshot.ai/v1"),
        api_key_env: "MOONSHOT_API_KEY",
        reasoning_protocol: ReasoningProtocol::Kimi,
    },
    Preset {
        name: "mimo",
        protocol: WireProtocol::Chat,
        base_url: Some("https://api.xiaomimimo.com/v1"),
        api_key_env: "MIMO_API_KEY",
        reasoning_protocol: ReasoningProtocol::Mimo,
    },
    Preset {
        name: "openai",
        protocol: WireProtocol::Responses,
        base_url: Some("https://api.openai.com/v1"),
        api_key_env: "OPENAI_API_KEY",
        reasoning_protocol: ReasoningProtocol::None,
    },
    Preset {
        name: "openai-compatible",
        protocol: WireProtocol::Chat,
        base_url: None,
        api_key_env: "OPENAI_API_KEY",
        reasoning_protocol: ReasoningProtocol::None,
    },
];

pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|preset| preset.name == name)
}

pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_follow_the_contract_and_ignore_a_trailing_slash() {
        let mut profile = ProviderProfile {
            name: "x".into(),
            protocol: WireProtocol::Chat,
            base_url: "https://api.deepseek.com/".into(),
            base_url_setting: String::new(),
            accounts: vec![],
            reasoning_protocol: ReasoningProtocol::Deepseek,
            retry: RetryPolicy::default(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            native_web_search: false,
            max_event_bytes: crate::profile::DEFAULT_MAX_EVENT_BYTES,
            context_window: None,
            price: None,
            region: None,
            reasoning_effort: None,
        };
        assert_eq!(
            profile.endpoint(),
            "https://api.deepseek.com/chat/completions"
        );
        profile.protocol = WireProtocol::Responses;
        assert_eq!(profile.endpoint(), "https://api.deepseek.com/responses");
        profile.protocol = WireProtocol::Anthropic;
        profile.base_url = "https://api.deepseek.com/anthropic".into();
        assert_eq!(
            profile.endpoint(),
            "https://api.deepseek.com/anthropic/v1/messages"
        );
    }

    #[test]
    fn every_preset_is_findable() {
        for name in [
            "deepseek",
            "deepseek-anthropic",
            "deepseek-responses",
            "kimi",
            "mimo",
            "openai",
            "openai-compatible",
        ] {
            assert_eq!(preset(name).map(|p| p.name), Some(name));
        }
        assert!(preset("nope").is_none());
    }
}
