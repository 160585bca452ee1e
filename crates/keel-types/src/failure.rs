//! Failure classification results.
//!
//! Invariants:
//! - A `FailureDiagnostic` never carries a response body or any provider-written text: only the
//!   kind, the HTTP status, a trace id that passed `is_safe_trace_id`, and a message keel wrote.
//! - `upstream_reason_missing` is never described as "reasoning missing".

use serde::{Deserialize, Serialize};
use std::fmt;

/// Every way a request to a provider can fail. Classified from evidence, never guessed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The turn was cancelled by the user.
    Cancelled,
    /// The credentials were refused (401/403) or are missing.
    Auth,
    /// The account has no balance or quota left (402, insufficient balance/quota).
    Quota,
    /// The context window or an output limit was exceeded.
    Limit,
    /// The provider said reasoning must be passed back with the replayed history.
    ReasoningReplay,
    /// An HTTP 400 with an empty body or a JSON object with no key but `model` (`{}` too).
    UpstreamReasonMissing,
    /// Too many requests (429).
    RateLimit,
    /// The provider failed (5xx, an error event mid-stream, an overloaded server).
    Server,
    /// No answer or no progress in time (connect, idle stream, 408/504).
    Timeout,
    /// The connection failed, or delivered bytes that are not a frame of the protocol.
    Transport,
    /// The provider answered with nothing: no text, no reasoning, no tool call.
    EmptyResponse,
    /// A well-formed stream whose content contradicts the protocol.
    StreamCorrupt,
    /// The provider gave a reason for refusing the request (a parameter error).
    InvalidRequest,
    /// A hook stopped it: blocked the prompt, ended the turn, or kept a `Stop` going past its
    /// cap (docs/hooks.md).
    Hook,
    /// Anything the evidence does not place in another kind.
    Unknown,
}

impl FailureKind {
    pub const ALL: [FailureKind; 15] = [
        Self::Cancelled,
        Self::Auth,
        Self::Quota,
        Self::Limit,
        Self::ReasoningReplay,
        Self::UpstreamReasonMissing,
        Self::RateLimit,
        Self::Server,
        Self::Timeout,
        Self::Transport,
        Self::EmptyResponse,
        Self::StreamCorrupt,
        Self::InvalidRequest,
        Self::Hook,
        Self::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled",
            Self::Auth => "auth",
            Self::Quota => "quota",
            Self::Limit => "limit",
            Self::ReasoningReplay => "reasoning_replay",
            Self::UpstreamReasonMissing => "upstream_reason_missing",
            Self::RateLimit => "rate_limit",
            Self::Server => "server",
            Self::Timeout => "timeout",
            Self::Transport => "transport",
            Self::EmptyResponse => "empty_response",
            Self::StreamCorrupt => "stream_corrupt",
            Self::InvalidRequest => "invalid_request",
            Self::Hook => "hook",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(name: &str) -> Option<FailureKind> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// Kinds that no retry policy may retry: repeating the same request cannot succeed, or
    /// (for `quota`) the right move is another account, never the same one again.
    pub fn is_never_retryable(self) -> bool {
        match self {
            Self::Cancelled
            | Self::Auth
            | Self::Quota
            | Self::Limit
            | Self::ReasoningReplay
            | Self::Hook => true,
            Self::UpstreamReasonMissing
            | Self::RateLimit
            | Self::Server
            | Self::Timeout
            | Self::Transport
            | Self::EmptyResponse
            | Self::StreamCorrupt
            | Self::InvalidRequest
            | Self::Unknown => false,
        }
    }

    /// What keel tells the user about this kind of failure.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Cancelled => "the turn was cancelled",
            Self::Auth => "the provider refused the credentials",
            Self::Quota => "the account has no balance or quota left",
            Self::Limit => "the request exceeded the model's context window or output limit",
            Self::ReasoningReplay => {
                "the provider requires the reasoning of earlier tool calls to be passed back"
            }
            Self::UpstreamReasonMissing => {
                "the upstream rejected the request without giving a reason"
            }
            Self::RateLimit => "the provider is rate limiting requests",
            Self::Server => "the provider failed to answer",
            Self::Timeout => "the provider did not answer in time",
            Self::Transport => "the connection to the provider failed",
            Self::EmptyResponse => "the provider returned an empty response",
            Self::StreamCorrupt => "the provider's stream broke the protocol",
            Self::InvalidRequest => "the provider rejected the request as invalid",
            Self::Hook => "a hook stopped the turn",
            Self::Unknown => "the request failed for an unrecognised reason",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The truthful account of one failed request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureDiagnostic {
    pub kind: FailureKind,
    /// The HTTP status, when the failure came with one.
    pub status: Option<u16>,
    /// A provider trace id from response headers, only if `is_safe_trace_id` accepted it.
    pub trace_id: Option<String>,
    /// keel's own explanation; never provider-written text.
    pub message: String,
    /// A finer reason under the same kind, where keel must tell cases apart (the kind list
    /// stays as it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_reason: Option<SubReason>,
}

/// A finer reason under a failure kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubReason {
    /// `stream_corrupt`: an SSE line or event longer than `max_event_bytes`. Never retried:
    /// the same request would stream the same oversized event.
    EventTooLarge,
    /// `invalid_request`: the provider's own error code says it does not know the model.
    UnknownModel,
    /// `transport`: a loopback address refused the connection — nothing listens there (a
    /// local server that is not running, a wrong port). Never retried: waiting changes nothing.
    LoopbackRefused,
}

impl SubReason {
    /// The sub-reasons that are never retried, whatever the policy lists (for `keel config`).
    pub const NEVER_RETRIED: [(FailureKind, SubReason); 2] = [
        (FailureKind::Transport, SubReason::LoopbackRefused),
        (FailureKind::StreamCorrupt, SubReason::EventTooLarge),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SubReason::EventTooLarge => "event_too_large",
            SubReason::UnknownModel => "unknown_model",
            SubReason::LoopbackRefused => "loopback_refused",
        }
    }
}

impl FailureDiagnostic {
    /// A diagnostic whose message is the kind's standard description.
    pub fn new(kind: FailureKind, status: Option<u16>) -> Self {
        Self {
            kind,
            status,
            trace_id: None,
            message: kind.describe().to_string(),
            sub_reason: None,
        }
    }

    /// A diagnostic with a more specific message (which must not quote the provider).
    pub fn with_message(
        kind: FailureKind,
        status: Option<u16>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            status,
            trace_id: None,
            message: message.into(),
            sub_reason: None,
        }
    }

    pub fn with_sub_reason(mut self, sub_reason: SubReason) -> Self {
        self.sub_reason = Some(sub_reason);
        self
    }

    /// Whether this failure may never be retried, whatever the policy lists: its kind is never
    /// retryable, or its sub-reason says repeating the request cannot help.
    pub fn is_never_retryable(&self) -> bool {
        self.kind.is_never_retryable()
            || self.sub_reason.is_some_and(|sub| {
                SubReason::NEVER_RETRIED
                    .iter()
                    .any(|(_, never)| *never == sub)
            })
    }

    pub fn with_trace_id(mut self, trace_id: Option<String>) -> Self {
        self.trace_id = trace_id.filter(|id| is_safe_trace_id(id));
        self
    }
}

impl FailureDiagnostic {
    /// The diagnostic as a person reads it: keel's words, then the HTTP status and the trace
    /// id to quote to the provider. The kind (`upstream_reason_missing`, …) stays in `--json`,
    /// the events and the logs.
    pub fn plain(&self) -> String {
        let mut facts = Vec::new();
        if let Some(status) = self.status {
            facts.push(format!("HTTP {status}"));
        }
        if let Some(trace_id) = &self.trace_id {
            facts.push(format!("trace id {trace_id}"));
        }
        if facts.is_empty() {
            self.message.clone()
        } else {
            format!("{} ({})", self.message, facts.join(", "))
        }
    }
}

impl fmt::Display for FailureDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.message, self.kind)?;
        if let Some(status) = self.status {
            write!(f, ", HTTP {status}")?;
        }
        if let Some(trace_id) = &self.trace_id {
            write!(f, ", trace id {trace_id}")?;
        }
        f.write_str(")")
    }
}

/// A trace id is shown only if it is 1..=128 characters of `[A-Za-z0-9-_.:]`.
pub fn is_safe_trace_id(candidate: &str) -> bool {
    !candidate.is_empty()
        && candidate.len() <= 128
        && candidate
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// The body DeepSeek's API answers a request longer than the model's window with (HTTP 400);
/// `{window}` and `{requested}` stand for the numbers. The fake provider answers with it.
pub const DEEPSEEK_CONTEXT_LIMIT_BODY: &str = r#"{"error":{"message":"This model's maximum context length is {window} tokens. However, you requested {requested} tokens ({requested} in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_round_trip_and_match_serde() {
        for kind in FailureKind::ALL {
            assert_eq!(FailureKind::parse(kind.as_str()), Some(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        assert_eq!(FailureKind::parse("nope"), None);
    }

    #[test]
    fn trace_id_rules() {
        assert!(is_safe_trace_id("req-123_abc.def:9"));
        assert!(is_safe_trace_id(&"a".repeat(128)));
        assert!(!is_safe_trace_id(&"a".repeat(129)));
        assert!(!is_safe_trace_id(""));
        assert!(!is_safe_trace_id("has space"));
        assert!(!is_safe_trace_id("<script>"));
        assert!(!is_safe_trace_id("ünï"));
        let diagnostic = FailureDiagnostic::new(FailureKind::Server, Some(500))
            .with_trace_id(Some("bad value!".into()));
        assert_eq!(diagnostic.trace_id, None);
    }

    #[test]
    fn opaque_message_never_claims_reasoning_was_missing() {
        let text = FailureKind::UpstreamReasonMissing.describe();
        assert_eq!(
            text,
            "the upstream rejected the request without giving a reason"
        );
        assert!(!text.contains("reasoning"));
    }
}
