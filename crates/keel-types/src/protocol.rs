//! The wire protocols keel speaks and the reasoning replay contracts it can honour.
//!
//! Invariant: both are chosen explicitly (config or preset), never guessed from a model name or
//! a vendor's domain; their serialized names are part of the config contract.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One of the three streaming wire protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireProtocol {
    /// OpenAI Chat Completions, DeepSeek flavour (`reasoning_content`).
    Chat,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses, always stateless (`store: false`).
    Responses,
}

impl WireProtocol {
    pub const ALL: [WireProtocol; 3] = [Self::Chat, Self::Anthropic, Self::Responses];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Anthropic => "anthropic",
            Self::Responses => "responses",
        }
    }
}

impl fmt::Display for WireProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How reasoning is replayed to a Chat-style (or Responses-compatible) endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningProtocol {
    /// An assistant message with tool calls always carries `reasoning_content` (maybe empty).
    Deepseek,
    /// Same replay rule as `deepseek`, for Xiaomi MiMo endpoints.
    Mimo,
    /// Same replay rule as `deepseek`, for Moonshot Kimi endpoints.
    Kimi,
    /// Reasoning is never sent back.
    None,
}

impl ReasoningProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deepseek => "deepseek",
            Self::Mimo => "mimo",
            Self::Kimi => "kimi",
            Self::None => "none",
        }
    }

    /// Whether assistant messages that carried tool calls must replay their reasoning.
    pub fn replays_reasoning_with_tool_calls(self) -> bool {
        match self {
            Self::Deepseek | Self::Mimo | Self::Kimi => true,
            Self::None => false,
        }
    }
}

impl fmt::Display for ReasoningProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
