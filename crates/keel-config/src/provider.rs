//! Resolving one provider: its preset (if any), then the files, then the environment — each
//! field with its source — into the `ProviderProfile` keel-llm runs on.
//!
//! Invariants:
//! - Fields are resolved and checked in one fixed order, so a config with several mistakes
//!   always reports the same one first.
//! - Keys are never read: an account names its environment variable only.
//! - `base_url` is an absolute http(s) URL with a host, without credentials, query or fragment,
//!   and without a trailing `/`.
//! - A retry policy never lists a kind that can never be retried, and rotates accounts only
//!   on `quota` or `rate_limit`; `max_delay_ms` is never below `base_delay_ms`.

use crate::config::KeelConfig;
use crate::error::ConfigError;
use crate::layer::{Layer, RawProvider, RawRetry};
use crate::source::{Source, Sourced};
use keel_llm::price::{Price, Rates};
use keel_llm::profile::{
    self, Account, DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_MAX_OUTPUT_TOKENS, Preset, ProviderProfile,
};
use keel_llm::{ReasoningEffort, RetryMode, RetryPolicy};
use keel_types::{FailureKind, ReasoningProtocol, WireProtocol};
use std::time::Duration;
use toml::Spanned;

pub use crate::resolved::{ResolvedProvider, ResolvedRetry};

impl KeelConfig {
    /// Resolve provider `name` into the profile requests are sent with.
    pub fn profile(&self, name: &str) -> Result<ProviderProfile, ConfigError> {
        Ok(self.provider(name)?.profile())
    }

    /// Resolve provider `name`: preset defaults, then files, then environment.
    pub fn provider(&self, name: &str) -> Result<ResolvedProvider, ConfigError> {
        let preset = profile::preset(name);
        if preset.is_none() && !self.has_provider_table(name) {
            return Err(ConfigError::Setting {
                origin: format!("provider `{name}`"),
                message: "is neither a preset nor configured in a [providers] table".into(),
            });
        }
        let protocol = self.layered(
            name,
            |p| p.protocol.as_ref(),
            preset_or(preset, |p| p.protocol, WireProtocol::Chat),
        );
        let reasoning_protocol = self.layered(
            name,
            |p| p.reasoning_protocol.as_ref(),
            preset_or(preset, |p| p.reasoning_protocol, ReasoningProtocol::None),
        );
        let base_url = self.base_url(name, preset)?;
        let accounts = self.accounts(name, preset)?;
        let secs = |field: fn(&RawProvider) -> Option<&Spanned<u64>>, default: Duration| match self
            .provider_field(name, field)
        {
            Some((layer, value)) if *value.get_ref() == 0 => {
                Err(layer.error(value.span(), "must be at least 1 second"))
            }
            Some((layer, value)) => Ok(layer.sourced(value).map(Duration::from_secs)),
            None => Ok(Sourced::default_value(default)),
        };
        let idle_timeout = secs(|p| p.idle_timeout_secs.as_ref(), DEFAULT_IDLE_TIMEOUT)?;
        let connect_timeout = secs(|p| p.connect_timeout_secs.as_ref(), DEFAULT_CONNECT_TIMEOUT)?;
        let max_output_tokens = match self.provider_field(name, |p| p.max_output_tokens.as_ref()) {
            Some((layer, value)) if *value.get_ref() == 0 => {
                return Err(layer.error(value.span(), "must be at least 1"));
            }
            Some((layer, value)) => layer.sourced(value),
            None => Sourced::default_value(DEFAULT_MAX_OUTPUT_TOKENS),
        };
        let web_search = match self.provider_field(name, |p| p.web_search.as_ref()) {
            Some((layer, value)) if *value.get_ref() && protocol.value == WireProtocol::Chat => {
                return Err(layer.error(
                    value.span(),
                    "provider-native web search needs protocol \"anthropic\" or \"responses\"",
                ));
            }
            Some((layer, value)) => layer.sourced(value),
            None => Sourced::default_value(false),
        };
        let max_event_bytes = match self.provider_field(name, |p| p.max_event_bytes.as_ref()) {
            Some((layer, value)) if *value.get_ref() < 1024 => {
                return Err(layer.error(value.span(), "must be at least 1024 bytes"));
            }
            Some((layer, value)) => layer
                .sourced(value)
                .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX)),
            None => Sourced::default_value(DEFAULT_MAX_EVENT_BYTES),
        };
        let context_window = match self.provider_field(name, |p| p.context_window.as_ref()) {
            Some((layer, value)) if *value.get_ref() < 1024 => {
                return Err(layer.error(value.span(), "must be at least 1024 tokens"));
            }
            Some((layer, value)) => layer.sourced(value).map(Some),
            None => Sourced::default_value(None),
        };
        let price = match self.provider_field(name, |p| p.price.as_ref()) {
            Some((layer, value)) => {
                let raw = value.get_ref();
                let rates = [
                    raw.input_cache_hit,
                    raw.input_cache_miss,
                    raw.output,
                    raw.input_cache_write.unwrap_or(0.0),
                ];
                if rates.iter().any(|rate| !rate.is_finite() || *rate < 0.0) {
                    return Err(layer.error(
                        value.span(),
                        "prices must be numbers of zero or more (per million tokens)",
                    ));
                }
                let currency = raw.currency.trim();
                if currency.is_empty()
                    || currency.len() > 8
                    || !currency.chars().all(|c| c.is_ascii_alphabetic())
                {
                    return Err(layer.error(
                        value.span(),
                        "`currency` must be a currency code such as \"USD\" or \"CNY\"",
                    ));
                }
                let price = Price::flat(
                    Rates {
                        input_cache_hit: raw.input_cache_hit,
                        input_cache_miss: raw.input_cache_miss,
                        input_cache_write: raw.input_cache_write,
                        output: raw.output,
                    },
                    currency.to_ascii_uppercase(),
                );
                layer.sourced(value).map(|_| Some(price))
            }
            None => Sourced::default_value(None),
        };
        let region = match self.provider_field(name, |p| p.region.as_ref()) {
            Some((layer, value)) => match keel_llm::price::Region::parse(value.get_ref()) {
                Some(region) => layer.sourced(value).map(|_| Some(region)),
                None => {
                    return Err(layer.error(
                        value.span(),
                        "`region` must be \"domestic\" or \"overseas\" (which of the \
                         provider's price lists applies)",
                    ));
                }
            },
            None => Sourced::default_value(None),
        };
        let reasoning_effort = self.reasoning_effort(protocol.value, reasoning_protocol.value)?;
        Ok(ResolvedProvider {
            name: name.to_string(),
            reasoning_effort,
            protocol,
            base_url,
            accounts,
            reasoning_protocol,
            retry: self.retry(name)?,
            idle_timeout,
            connect_timeout,
            max_output_tokens,
            web_search,
            max_event_bytes,
            context_window,
            price,
            region,
        })
    }

    /// `reasoning_effort`, as this protocol can say it.
    fn reasoning_effort(
        &self,
        protocol: WireProtocol,
        reasoning: ReasoningProtocol,
    ) -> Result<Sourced<Option<ReasoningEffort>>, ConfigError> {
        let Some((layer, value)) = self.layers.iter().find_map(|layer| {
            layer
                .raw
                .reasoning_effort
                .as_ref()
                .map(|value| (layer, value))
        }) else {
            return Ok(Sourced::default_value(None));
        };
        let Some(effort) = ReasoningEffort::parse(value.get_ref()) else {
            let names: Vec<&str> = ReasoningEffort::ALL.iter().map(|e| e.name()).collect();
            return Err(layer.error(
                value.span(),
                format!(
                    "{:?} is not an effort: use one of {}",
                    value.get_ref(),
                    names.join(", ")
                ),
            ));
        };
        if let Some(why) = effort.unsupported(protocol, reasoning) {
            return Err(layer.error(value.span(), why));
        }
        Ok(layer.sourced(value).map(|_| Some(effort)))
    }

    /// The highest-precedence layer that sets a field of provider `name`.
    fn provider_field<T>(
        &self,
        name: &str,
        field: impl Fn(&RawProvider) -> Option<&Spanned<T>>,
    ) -> Option<(&Layer, &Spanned<T>)> {
        self.layers.iter().find_map(|layer| {
            layer
                .raw
                .providers
                .get(name)
                .and_then(&field)
                .map(|v| (layer, v))
        })
    }

    /// A field of provider `name` from the files, or `fallback`.
    fn layered<T: Clone>(
        &self,
        name: &str,
        field: impl Fn(&RawProvider) -> Option<&Spanned<T>>,
        fallback: Sourced<T>,
    ) -> Sourced<T> {
        self.provider_field(name, field)
            .map_or(fallback, |(layer, value)| layer.sourced(value))
    }

    fn retry_field<T>(
        &self,
        name: &str,
        field: impl Fn(&RawRetry) -> Option<&Spanned<T>>,
    ) -> Option<(&Layer, &Spanned<T>)> {
        self.provider_field(name, |provider| provider.retry.as_ref().and_then(&field))
    }

    fn base_url(
        &self,
        name: &str,
        preset: Option<&Preset>,
    ) -> Result<Sourced<String>, ConfigError> {
        if name == "deepseek"
            && let Some(url) = &self.overrides.deepseek_base_url_env
        {
            return validate_base_url(url)
                .map(|url| Sourced::new(url, Source::Env("DEEPSEEK_BASE_URL")))
                .map_err(|message| ConfigError::Setting {
                    origin: "environment variable DEEPSEEK_BASE_URL".into(),
                    message,
                });
        }
        if let Some((layer, value)) = self.provider_field(name, |p| p.base_url.as_ref()) {
            return validate_base_url(value.get_ref())
                .map(|url| Sourced::new(url, layer.source(value.span())))
                .map_err(|message| layer.error(value.span(), message));
        }
        match preset.and_then(|p| p.base_url.map(|url| (p.name, url))) {
            Some((preset, url)) => Ok(Sourced::new(url.to_string(), Source::Preset(preset))),
            None => Err(ConfigError::Setting {
                origin: format!("provider `{name}`"),
                message: format!("has no base_url: set `base_url` in [providers.{name}]"),
            }),
        }
    }

    pub(crate) fn accounts(
        &self,
        name: &str,
        preset: Option<&Preset>,
    ) -> Result<Sourced<Vec<Account>>, ConfigError> {
        if let Some((layer, accounts)) = self.provider_field(name, |p| p.accounts.as_ref()) {
            if accounts.get_ref().is_empty() {
                return Err(layer.error(accounts.span(), "needs at least one account"));
            }
            let mut seen: Vec<&str> = Vec::new();
            for account in accounts.get_ref() {
                if !is_env_var_name(&account.api_key_env) {
                    return Err(layer.error(
                        accounts.span(),
                        format!(
                            "`{}` is not an environment variable name",
                            account.api_key_env
                        ),
                    ));
                }
                if seen.contains(&account.name.as_str()) {
                    return Err(layer.error(
                        accounts.span(),
                        format!("account name `{}` is used twice", account.name),
                    ));
                }
                seen.push(&account.name);
            }
            let resolved = accounts
                .get_ref()
                .iter()
                .map(|a| Account {
                    name: a.name.clone(),
                    api_key_env: a.api_key_env.clone(),
                })
                .collect();
            return Ok(Sourced::new(resolved, layer.source(accounts.span())));
        }
        let api_key_env = match self.provider_field(name, |p| p.api_key_env.as_ref()) {
            Some((layer, value)) => {
                if !is_env_var_name(value.get_ref()) {
                    return Err(layer.error(
                        value.span(),
                        format!("`{}` is not an environment variable name", value.get_ref()),
                    ));
                }
                layer.sourced(value)
            }
            None => match preset {
                Some(preset) => {
                    Sourced::new(preset.api_key_env.to_string(), Source::Preset(preset.name))
                }
                None => {
                    return Err(ConfigError::Setting {
                        origin: format!("provider `{name}`"),
                        message: format!(
                            "has no key: set `api_key_env` (or `accounts`) in [providers.{name}]"
                        ),
                    });
                }
            },
        };
        Ok(api_key_env.map(|api_key_env| {
            vec![Account {
                name: "default".into(),
                api_key_env,
            }]
        }))
    }

    fn retry(&self, name: &str) -> Result<ResolvedRetry, ConfigError> {
        let defaults = RetryPolicy::default();
        let mode = match self.retry_field(name, |r| r.mode.as_ref()) {
            Some((layer, mode)) => {
                let parsed = RetryMode::parse(mode.get_ref()).ok_or_else(|| {
                    layer.error(
                        mode.span(),
                        format!(
                            "unknown retry mode `{}`: use `normal` or `off`",
                            mode.get_ref()
                        ),
                    )
                })?;
                Sourced::new(parsed, layer.source(mode.span()))
            }
            None => Sourced::default_value(defaults.mode),
        };
        let max_retries = match self.retry_field(name, |r| r.max_retries.as_ref()) {
            Some((layer, value)) => layer.sourced(value),
            None => Sourced::default_value(defaults.max_retries),
        };
        let retry_on = match self.retry_field(name, |r| r.retry_on.as_ref()) {
            Some((layer, kinds)) => parse_kinds(layer, kinds, |kind| {
                kind.is_never_retryable().then(|| {
                    format!("`{kind}` can never be retried (repeating the request cannot help)")
                })
            })?,
            None => Sourced::default_value(defaults.retry_on),
        };
        let rotate_on = match self.retry_field(name, |r| r.rotate_on.as_ref()) {
            Some((layer, kinds)) => parse_kinds(layer, kinds, |kind| {
                (!matches!(kind, FailureKind::Quota | FailureKind::RateLimit)).then(|| {
                    format!("`{kind}` cannot rotate accounts: use `quota` or `rate_limit`")
                })
            })?,
            None => Sourced::default_value(defaults.rotate_on),
        };
        let millis = |field: fn(&RawRetry) -> Option<&Spanned<u64>>, default: Duration| match self
            .retry_field(name, field)
        {
            Some((layer, value)) => layer.sourced(value).map(Duration::from_millis),
            None => Sourced::default_value(default),
        };
        let base_delay = millis(|r| r.base_delay_ms.as_ref(), defaults.base_delay);
        let max_delay = millis(|r| r.max_delay_ms.as_ref(), defaults.max_delay);
        if let Some((layer, value)) = self.retry_field(name, |r| r.max_delay_ms.as_ref())
            && max_delay.value < base_delay.value
        {
            return Err(layer.error(value.span(), "must not be smaller than base_delay_ms"));
        }
        let jitter = match self.retry_field(name, |r| r.jitter.as_ref()) {
            Some((layer, value)) if !(0.0..=1.0).contains(value.get_ref()) => {
                return Err(layer.error(value.span(), "must be between 0.0 and 1.0"));
            }
            Some((layer, value)) => layer.sourced(value),
            None => Sourced::default_value(defaults.jitter),
        };
        let retry_after_cap = millis(|r| r.retry_after_cap_ms.as_ref(), defaults.retry_after_cap);
        Ok(ResolvedRetry {
            mode,
            max_retries,
            retry_on,
            base_delay,
            max_delay,
            jitter,
            retry_after_cap,
            rotate_on,
        })
    }
}

/// The preset's value, or keel's default for a provider without a preset.
fn preset_or<T>(preset: Option<&Preset>, value: impl Fn(&Preset) -> T, default: T) -> Sourced<T> {
    match preset {
        Some(preset) => Sourced::new(value(preset), Source::Preset(preset.name)),
        None => Sourced::default_value(default),
    }
}

fn parse_kinds(
    layer: &Layer,
    kinds: &Spanned<Vec<String>>,
    refuse: impl Fn(FailureKind) -> Option<String>,
) -> Result<Sourced<Vec<FailureKind>>, ConfigError> {
    let mut parsed = Vec::new();
    for name in kinds.get_ref() {
        let kind = FailureKind::parse(name).ok_or_else(|| {
            let known: Vec<&str> = FailureKind::ALL.iter().map(|k| k.as_str()).collect();
            layer.error(
                kinds.span(),
                format!(
                    "unknown failure kind `{name}`: known kinds are {}",
                    known.join(", ")
                ),
            )
        })?;
        if let Some(message) = refuse(kind) {
            return Err(layer.error(kinds.span(), message));
        }
        if !parsed.contains(&kind) {
            parsed.push(kind);
        }
    }
    Ok(Sourced::new(parsed, layer.source(kinds.span())))
}

fn is_env_var_name(name: &str) -> bool {
    keel_llm::key_store::is_variable_name(name)
}

/// An absolute http(s) URL with a host, no credentials, no query; returned without a
/// trailing `/`.
pub fn validate_base_url(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text.trim())
        .map_err(|error| format!("`{text}` is not a valid URL ({error})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("`{text}` must start with http:// or https://"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{text}` has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a base URL must not contain credentials: use api_key_env".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("`{text}` must not have a query or fragment"));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}
