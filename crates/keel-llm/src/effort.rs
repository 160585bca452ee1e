//! How hard the model reasons (`reasoning_effort`): one keel name, spelled the way each
//! protocol spells it.
//!
//! Invariants:
//! - Unset sends nothing: the provider's default stands, and the request bytes are as before.
//! - A value the protocol has no spelling for is refused when the configuration is read
//!   (`unsupported`), never sent and never silently replaced by another.
//! - The fields are the same in every request of a session, so the prefix stays stable.
//!
//! | keel | Chat, `reasoning_protocol = deepseek` | Chat, others | Responses | Anthropic |
//! |---|---|---|---|---|
//! | `off` | `thinking.type = disabled` | refused | `reasoning.effort = none` | `thinking.type = disabled` |
//! | `low`… | `thinking.type = enabled`, `reasoning_effort` | `reasoning_effort` | `reasoning.effort` | `thinking` with a token budget (and `output_config.effort` for DeepSeek) |

use keel_types::{ReasoningProtocol, WireProtocol};
use serde_json::{Map, Value, json};

/// A reasoning effort, as keel names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningEffort {
    Off,
    Low,
    Medium,
    High,
    Max,
}

impl ReasoningEffort {
    pub const ALL: [ReasoningEffort; 5] = [
        ReasoningEffort::Off,
        ReasoningEffort::Low,
        ReasoningEffort::Medium,
        ReasoningEffort::High,
        ReasoningEffort::Max,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReasoningEffort::Off => "off",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
            ReasoningEffort::Max => "max",
        }
    }

    pub fn parse(name: &str) -> Option<ReasoningEffort> {
        Self::ALL.into_iter().find(|effort| effort.name() == name)
    }

    /// Why `protocol` (with `reasoning`) cannot say this effort; `None`: it can.
    pub fn unsupported(
        self,
        protocol: WireProtocol,
        reasoning: ReasoningProtocol,
    ) -> Option<String> {
        match (self, protocol, reasoning) {
            (ReasoningEffort::Off, WireProtocol::Chat, ReasoningProtocol::Deepseek) => None,
            (ReasoningEffort::Off, WireProtocol::Chat, _) => Some(
                "the Chat protocol turns thinking off only for DeepSeek \
                 (`reasoning_protocol = \"deepseek\"`); use low, medium, high or max, or leave \
                 `reasoning_effort` unset"
                    .into(),
            ),
            _ => None,
        }
    }

    /// The Anthropic thinking budget for this effort, below `max_tokens` (the API requires
    /// at least 1024 and less than the output limit).
    fn anthropic_budget(self, max_tokens: u32) -> u32 {
        let wanted = match self {
            ReasoningEffort::Off | ReasoningEffort::Low => 2048,
            ReasoningEffort::Medium => 8192,
            ReasoningEffort::High => 16384,
            ReasoningEffort::Max => 32768,
        };
        wanted.min(max_tokens.saturating_sub(1)).max(1024)
    }

    /// The top-level request fields that say this effort, for `protocol`.
    pub(crate) fn fields(
        self,
        protocol: WireProtocol,
        reasoning: ReasoningProtocol,
        max_tokens: u32,
    ) -> Map<String, Value> {
        let mut fields = Map::new();
        let deepseek = reasoning == ReasoningProtocol::Deepseek;
        match (protocol, self) {
            (WireProtocol::Chat, ReasoningEffort::Off) => {
                fields.insert("thinking".into(), json!({"type": "disabled"}));
            }
            (WireProtocol::Chat, level) => {
                if deepseek {
                    fields.insert("thinking".into(), json!({"type": "enabled"}));
                }
                fields.insert("reasoning_effort".into(), json!(level.name()));
            }
            (WireProtocol::Responses, ReasoningEffort::Off) => {
                fields.insert("reasoning".into(), json!({"effort": "none"}));
            }
            (WireProtocol::Responses, level) => {
                fields.insert("reasoning".into(), json!({"effort": level.name()}));
            }
            (WireProtocol::Anthropic, ReasoningEffort::Off) => {
                fields.insert("thinking".into(), json!({"type": "disabled"}));
            }
            (WireProtocol::Anthropic, level) => {
                fields.insert(
                    "thinking".into(),
                    json!({"type": "enabled", "budget_tokens": level.anthropic_budget(max_tokens)}),
                );
                if deepseek {
                    fields.insert("output_config".into(), json!({"effort": level.name()}));
                }
            }
        }
        fields
    }
}

impl std::fmt::Display for ReasoningEffort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(
        effort: ReasoningEffort,
        protocol: WireProtocol,
        reasoning: ReasoningProtocol,
    ) -> Value {
        Value::Object(effort.fields(protocol, reasoning, 8192))
    }

    #[test]
    fn each_protocol_spells_each_effort_its_own_way() {
        use ReasoningEffort::*;
        use ReasoningProtocol as R;
        use WireProtocol as W;
        assert_eq!(
            said(Off, W::Chat, R::Deepseek),
            json!({"thinking": {"type": "disabled"}})
        );
        assert_eq!(
            said(Max, W::Chat, R::Deepseek),
            json!({"thinking": {"type": "enabled"}, "reasoning_effort": "max"})
        );
        assert_eq!(
            said(Low, W::Chat, R::Kimi),
            json!({"reasoning_effort": "low"})
        );
        assert_eq!(
            said(Off, W::Responses, R::None),
            json!({"reasoning": {"effort": "none"}})
        );
        assert_eq!(
            said(High, W::Responses, R::Deepseek),
            json!({"reasoning": {"effort": "high"}})
        );
        assert_eq!(
            said(High, W::Anthropic, R::None),
            json!({"thinking": {"type": "enabled", "budget_tokens": 8191}}),
            "the budget stays below max_tokens"
        );
        assert_eq!(
            said(Low, W::Anthropic, R::Deepseek),
            json!({"thinking": {"type": "enabled", "budget_tokens": 2048},
                   "output_config": {"effort": "low"}})
        );
    }

    #[test]
    fn off_on_a_chat_endpoint_other_than_deepseek_is_refused_and_each_name_reads_back() {
        assert!(
            ReasoningEffort::Off
                .unsupported(WireProtocol::Chat, ReasoningProtocol::Kimi)
                .is_some()
        );
        assert!(
            ReasoningEffort::Off
                .unsupported(WireProtocol::Chat, ReasoningProtocol::Deepseek)
                .is_none()
        );
        for effort in ReasoningEffort::ALL {
            assert_eq!(ReasoningEffort::parse(effort.name()), Some(effort));
        }
        assert_eq!(ReasoningEffort::parse("extreme"), None);
    }
}
