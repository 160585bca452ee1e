//! Projection of the canonical history onto a wire protocol's request body.
//!
//! Invariants:
//! - `project` is pure: the same (profile, model, system, tools, history) gives the same bytes.
//! - Every request body ends with its message list, so for an append-only history the body of
//!   request N minus its closing `]}` is a byte prefix of request N+1 (the "stable prefix").
//! - The replay contract is the profile's explicit `reasoning_protocol`; nothing here looks at a
//!   model name or a domain.

mod anthropic;
mod chat;
mod responses;

use crate::profile::ProviderProfile;
use keel_types::{Item, WireProtocol};
use sha2::{Digest, Sha256};

pub use keel_types::ToolSpec;

/// Everything a request is made of, besides the profile.
#[derive(Clone, Copy, Debug)]
pub struct ProjectionInput<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub tools: &'a [ToolSpec],
    pub history: &'a [Item],
}

/// A request body ready to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectedRequest {
    pub body: Vec<u8>,
    /// Number of provider-visible messages (or input items) in the body.
    pub message_count: usize,
    /// First 16 hex digits of the SHA-256 of the stable prefix.
    pub prefix_hash: String,
}

impl ProjectedRequest {
    /// The body without the closing bytes of its message list: what the next request of an
    /// append-only session starts with.
    pub fn stable_prefix(&self) -> &[u8] {
        self.body.strip_suffix(b"]}").unwrap_or(&self.body)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot serialize the request: {0}")]
pub struct ProjectionError(#[from] serde_json::Error);

pub fn project(
    profile: &ProviderProfile,
    input: &ProjectionInput<'_>,
) -> Result<ProjectedRequest, ProjectionError> {
    let (body, message_count) = match profile.protocol {
        WireProtocol::Chat => chat::project(profile, input)?,
        WireProtocol::Anthropic => anthropic::project(profile, input)?,
        WireProtocol::Responses => responses::project(profile, input)?,
    };
    let mut request = ProjectedRequest {
        body,
        message_count,
        prefix_hash: String::new(),
    };
    let digest = Sha256::digest(request.stable_prefix());
    request.prefix_hash = digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    Ok(request)
}

/// A tool call's raw arguments as a JSON object for protocols that need one (Anthropic):
/// valid object text is passed through byte for byte; empty text is `{}`; anything else is
/// wrapped so the model still sees exactly what it wrote.
fn arguments_as_object(raw: &str) -> Box<serde_json::value::RawValue> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return raw_json("{}".to_string());
    }
    if trimmed.starts_with('{') && serde_json::from_str::<serde_json::Map<_, _>>(trimmed).is_ok() {
        return raw_json(trimmed.to_string());
    }
    let wrapped = serde_json::json!({ "invalid_arguments": raw }).to_string();
    raw_json(wrapped)
}

fn raw_json(text: String) -> Box<serde_json::value::RawValue> {
    match serde_json::value::RawValue::from_string(text) {
        Ok(raw) => raw,
        // Unreachable for the inputs above (they are checked JSON); stay total anyway.
        Err(_) => serde_json::value::to_raw_value(&serde_json::json!({}))
            .unwrap_or_else(|_| Box::<serde_json::value::RawValue>::default()),
    }
}

#[cfg(test)]
mod tests;
