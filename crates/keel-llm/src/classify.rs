//! Failure classification of HTTP answers and stream errors (docs/configuration.md#failure-kinds).
//!
//! Invariants:
//! - The body is read only to choose a kind; it never leaves this module (not in the
//!   diagnostic, not in a log, not in an error message).
//! - `upstream_reason_missing` is exactly: HTTP 400 whose trimmed body is empty, or is a JSON
//!   object with no key other than `model` (`{}` included, as DeepSeek-Reasonix's own
//!   classifier has it). Any other structured body may carry a reason.
//! - A trace id is taken from headers only if `is_safe_trace_id` accepts it.

use keel_types::failure::is_safe_trace_id;
use keel_types::{FailureDiagnostic, FailureKind, SubReason, WireProtocol};
use std::time::Duration;

/// Response headers that providers use for a request or trace id, in order of preference.
const TRACE_HEADERS: [&str; 7] = [
    "x-request-id",
    "request-id",
    "x-trace-id",
    "trace-id",
    "x-ds-trace-id",
    "x-amzn-requestid",
    "cf-ray",
];

/// The first safe trace id found among the known trace headers.
pub fn trace_id_from_headers(headers: &reqwest::header::HeaderMap) -> Option<String> {
    TRACE_HEADERS.iter().find_map(|name| {
        let value = headers.get(*name)?.to_str().ok()?.trim();
        is_safe_trace_id(value).then(|| value.to_string())
    })
}

/// `Retry-After` in seconds (integer or fractional). HTTP dates are not honoured: keel's
/// clock and the provider's may disagree, and the backoff policy applies instead. A value
/// too large for a `Duration` is `Duration::MAX` (the policy caps it); negative, NaN or
/// unparsable values are ignored. Never panics, whatever the provider sends.
pub fn retry_after_from_headers(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    retry_after_seconds(value)
}

fn retry_after_seconds(value: &str) -> Option<Duration> {
    let seconds: f64 = value.parse().ok()?;
    if seconds.is_nan() || seconds < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
}

/// The opaque-400 rule, on the raw body.
pub fn is_opaque_bad_request(body: &[u8]) -> bool {
    let trimmed = body.trim_ascii();
    if trimmed.is_empty() {
        return true;
    }
    match serde_json::from_slice::<serde_json::Value>(trimmed) {
        // No key but `model`: `{}` and `{"model": …}` carry no reason.
        Ok(serde_json::Value::Object(map)) => map.keys().all(|key| key == "model"),
        Ok(_) | Err(_) => false,
    }
}

/// Classify a non-success HTTP answer. `body` is only inspected, never kept.
pub fn classify_http_failure(status: u16, body: &[u8]) -> FailureDiagnostic {
    let lowered = String::from_utf8_lossy(body).to_ascii_lowercase();
    let kind = match status {
        400 if is_opaque_bad_request(body) => FailureKind::UpstreamReasonMissing,
        400 | 404 | 409 | 422 => classify_reasoned_rejection(&lowered),
        401 | 403 => FailureKind::Auth,
        402 => FailureKind::Quota,
        413 => FailureKind::Limit,
        408 | 504 => FailureKind::Timeout,
        429 if mentions_quota(&lowered) => FailureKind::Quota,
        429 => FailureKind::RateLimit,
        500..=599 => FailureKind::Server,
        _ => FailureKind::Unknown,
    };
    let message = match kind {
        FailureKind::Unknown => {
            format!("the provider answered with unexpected HTTP status {status}")
        }
        FailureKind::Cancelled
        | FailureKind::Auth
        | FailureKind::Quota
        | FailureKind::Limit
        | FailureKind::ReasoningReplay
        | FailureKind::UpstreamReasonMissing
        | FailureKind::RateLimit
        | FailureKind::Server
        | FailureKind::Timeout
        | FailureKind::Transport
        | FailureKind::EmptyResponse
        | FailureKind::StreamCorrupt
        | FailureKind::InvalidRequest
        | FailureKind::Hook => kind.describe().to_string(),
    };
    FailureDiagnostic::with_message(kind, Some(status), message)
}

/// The structured error fields, and their values, by which the providers of each protocol say
/// the model does not exist. Matched exactly (ignoring case), never on free text.
/// - Chat and Responses (OpenAI, DeepSeek, Kimi, MiMo and other OpenAI-shaped servers):
///   `error.code`, as OpenAI documents `model_not_found` and its kin spell it.
/// - Anthropic: none. Its `not_found_error` type is also what a wrong path gets, so it cannot
///   say "unknown model" on its own (the 404 advice, check `base_url` and the model, covers it).
fn unknown_model_codes(protocol: WireProtocol) -> &'static [(&'static str, &'static str)] {
    match protocol {
        WireProtocol::Chat | WireProtocol::Responses => &[
            ("code", "model_not_found"),
            ("code", "model_not_exist"),
            ("code", "model_does_not_exist"),
            ("code", "invalid_model"),
            ("code", "unknown_model"),
            ("type", "model_not_found"),
            ("type", "model_not_found_error"),
        ],
        WireProtocol::Anthropic => &[],
    }
}

/// `diagnostic` (of an HTTP `status` with `body` from a `protocol` provider), marked
/// `unknown_model` when the body's structured error says the model does not exist.
pub fn with_unknown_model(
    diagnostic: FailureDiagnostic,
    protocol: WireProtocol,
    status: u16,
    body: &[u8],
) -> FailureDiagnostic {
    if !matches!(status, 400 | 404) {
        return diagnostic;
    }
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return diagnostic;
    };
    let error = value.get("error").unwrap_or(&value);
    let says_so = unknown_model_codes(protocol).iter().any(|(field, code)| {
        error
            .get(field)
            .and_then(serde_json::Value::as_str)
            .is_some_and(|given| given.eq_ignore_ascii_case(code))
    });
    if says_so {
        diagnostic.with_sub_reason(SubReason::UnknownModel)
    } else {
        diagnostic
    }
}

/// A rejection that came with a body that may hold a reason.
fn classify_reasoned_rejection(lowered_body: &str) -> FailureKind {
    if mentions_reasoning_replay(lowered_body) {
        FailureKind::ReasoningReplay
    } else if mentions_context_limit(lowered_body) {
        FailureKind::Limit
    } else if mentions_quota(lowered_body) {
        FailureKind::Quota
    } else {
        FailureKind::InvalidRequest
    }
}

/// The provider said reasoning must be passed back (DeepSeek, Kimi and MiMo phrasings).
fn mentions_reasoning_replay(lowered: &str) -> bool {
    let names_field =
        lowered.contains("reasoning_content") || lowered.contains("reasoning content");
    names_field
        && (lowered.contains("missing")
            || lowered.contains("must be passed back")
            || lowered.contains("must be provided")
            || lowered.contains("is required")
            || lowered.contains("required"))
}

fn mentions_context_limit(lowered: &str) -> bool {
    [
        "context_length_exceeded",
        "maximum context length",
        "context length",
        "context window",
        "exceed_context_size",
        "prompt is too long",
        "too many tokens",
        "reduce the length",
    ]
    .iter()
    .any(|needle| lowered.contains(needle))
}

fn mentions_quota(lowered: &str) -> bool {
    [
        "insufficient balance",
        "insufficient_balance",
        "insufficient_quota",
        "exceeded your current quota",
    ]
    .iter()
    .any(|needle| lowered.contains(needle))
}

/// Classify an error payload that arrived inside a 200 stream (an SSE `error` event, or a data
/// line holding an `error` object). The payload's text is inspected, never kept.
pub fn classify_stream_error(payload: &serde_json::Value) -> FailureDiagnostic {
    let error = payload
        .get("error")
        .filter(|inner| inner.is_object())
        .unwrap_or(payload);
    let code = error.get("code").and_then(|code| {
        code.as_u64()
            .or_else(|| code.as_str().and_then(|text| text.parse().ok()))
    });
    let error_type = error
        .get("type")
        .or_else(|| error.get("code"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    let kind = match code.and_then(|code| u16::try_from(code).ok()) {
        Some(status) if (400..600).contains(&status) => {
            classify_http_failure(status, error.to_string().as_bytes()).kind
        }
        Some(_) | None => {
            if error_type.contains("overloaded") || error_type.contains("server") {
                FailureKind::Server
            } else if error_type.contains("rate_limit") {
                FailureKind::RateLimit
            } else if error_type.contains("invalid_request") {
                classify_reasoned_rejection(&error.to_string().to_ascii_lowercase())
            } else if error_type.contains("authentication") || error_type.contains("permission") {
                FailureKind::Auth
            } else {
                FailureKind::Server
            }
        }
    };
    FailureDiagnostic::with_message(
        kind,
        None,
        format!(
            "{} (an error event arrived in the middle of the stream)",
            kind.describe()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn opaque_400_rule_matches_the_seed_edge_cases() {
        for body in [
            "",
            "   ",
            "\n\t ",
            "{\"model\":\"x\"}",
            "\n{\"model\":\"x\"}",
            "  {\"model\": \"deepseek-v4\"}\n",
            // DeepSeek-Reasonix's classifier: an empty object carries no reason either.
            "{}",
            " { } ",
        ] {
            assert!(
                is_opaque_bad_request(body.as_bytes()),
                "{body:?} should be opaque"
            );
            let diagnostic = classify_http_failure(400, body.as_bytes());
            assert_eq!(
                diagnostic.kind,
                FailureKind::UpstreamReasonMissing,
                "{body:?}"
            );
            assert_eq!(
                diagnostic.message,
                "the upstream rejected the request without giving a reason"
            );
        }
        for body in [
            "{\"model\":\"x\",\"error\":{\"message\":\"bad\"}}",
            "{\"error\":\"bad\"}",
            "[\"model\"]",
            "\"model\"",
            "Bad Request",
            "{\"model\":",
        ] {
            assert!(
                !is_opaque_bad_request(body.as_bytes()),
                "{body:?} is not opaque"
            );
            let kind = classify_http_failure(400, body.as_bytes()).kind;
            assert_eq!(kind, FailureKind::InvalidRequest, "{body:?}");
        }
        // The rule applies only to HTTP 400.
        assert_eq!(classify_http_failure(500, b"").kind, FailureKind::Server);
    }

    #[test]
    fn statuses_map_to_kinds() {
        let cases: [(u16, &str, FailureKind); 14] = [
            (401, "{\"error\":\"bad key\"}", FailureKind::Auth),
            (403, "", FailureKind::Auth),
            (
                402,
                "{\"error\":{\"message\":\"Insufficient Balance\"}}",
                FailureKind::Quota,
            ),
            (
                429,
                "{\"error\":{\"message\":\"slow down\"}}",
                FailureKind::RateLimit,
            ),
            (
                429,
                "{\"error\":{\"code\":\"insufficient_quota\"}}",
                FailureKind::Quota,
            ),
            (
                400,
                "{\"error\":{\"message\":\"Insufficient Balance\"}}",
                FailureKind::Quota,
            ),
            (500, "oops", FailureKind::Server),
            (503, "", FailureKind::Server),
            (529, "", FailureKind::Server),
            (504, "", FailureKind::Timeout),
            (408, "", FailureKind::Timeout),
            (413, "", FailureKind::Limit),
            (418, "", FailureKind::Unknown),
            (
                400,
                "{\"error\":{\"message\":\"Missing `reasoning_content` field in the assistant message at message index 2\"}}",
                FailureKind::ReasoningReplay,
            ),
        ];
        for (status, body, kind) in cases {
            let diagnostic = classify_http_failure(status, body.as_bytes());
            assert_eq!(diagnostic.kind, kind, "{status} {body}");
            assert_eq!(diagnostic.status, Some(status));
            assert!(!diagnostic.message.contains(body) || body.is_empty());
        }
    }

    #[test]
    fn context_overflow_from_llama_server_is_a_limit() {
        let body =
            include_bytes!("../tests/fixtures/llama-server/error-context-overflow/response.body");
        assert_eq!(classify_http_failure(400, body).kind, FailureKind::Limit);
    }

    #[test]
    fn deepseek_context_length_rejection_is_a_limit() {
        let body = keel_types::DEEPSEEK_CONTEXT_LIMIT_BODY
            .replace("{window}", "131072")
            .replace("{requested}", "140000");
        assert_eq!(
            classify_http_failure(400, body.as_bytes()).kind,
            FailureKind::Limit
        );
    }

    #[test]
    fn llama_server_bad_json_is_a_server_error() {
        let body = include_bytes!("../tests/fixtures/llama-server/error-bad-json/response.body");
        assert_eq!(classify_http_failure(500, body).kind, FailureKind::Server);
    }

    #[test]
    fn stream_error_payloads() {
        let llama = json!({"error":{"code":500,"message":"peg","type":"server_error"}});
        assert_eq!(classify_stream_error(&llama).kind, FailureKind::Server);
        let anthropic = json!({"type":"error","error":{"type":"overloaded_error","message":"x"}});
        assert_eq!(classify_stream_error(&anthropic).kind, FailureKind::Server);
        let llama_anthropic = json!({"code":500,"message":"x","type":"server_error"});
        assert_eq!(
            classify_stream_error(&llama_anthropic).kind,
            FailureKind::Server
        );
        let limited = json!({"type":"error","error":{"type":"rate_limit_error"}});
        assert_eq!(classify_stream_error(&limited).kind, FailureKind::RateLimit);
        let diagnostic = classify_stream_error(&llama);
        assert!(!diagnostic.message.contains("peg"));
    }

    #[test]
    fn any_retry_after_is_read_without_panicking() {
        let cases = [
            ("1e30", Some(Duration::MAX)),
            ("18446744073709551616", Some(Duration::MAX)),
            ("inf", Some(Duration::MAX)),
            ("-5", None),
            ("-inf", None),
            ("NaN", None),
            ("2.5", Some(Duration::from_millis(2500))),
            ("0", Some(Duration::ZERO)),
            ("soon", None),
        ];
        for (value, wanted) in cases {
            assert_eq!(retry_after_seconds(value), wanted, "{value}");
        }
    }

    #[test]
    fn headers_give_safe_trace_ids_and_retry_after() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-request-id", "has space".parse().unwrap());
        headers.insert("x-trace-id", "abc-123".parse().unwrap());
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(trace_id_from_headers(&headers).as_deref(), Some("abc-123"));
        assert_eq!(
            retry_after_from_headers(&headers),
            Some(Duration::from_secs(2))
        );
        headers.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after_from_headers(&headers), None);
        headers.insert("x-trace-id", "x".repeat(129).parse().unwrap());
        assert_eq!(trace_id_from_headers(&headers), None);
    }

    #[test]
    fn an_unknown_model_is_read_from_the_protocols_own_code_fields_only() {
        let said = |protocol, status, body: &str| {
            with_unknown_model(
                classify_http_failure(status, body.as_bytes()),
                protocol,
                status,
                body.as_bytes(),
            )
            .sub_reason
        };
        let coded =
            r#"{"error":{"message":"x","type":"invalid_request_error","code":"model_not_found"}}"#;
        for protocol in [WireProtocol::Chat, WireProtocol::Responses] {
            assert_eq!(said(protocol, 400, coded), Some(SubReason::UnknownModel));
            assert_eq!(said(protocol, 404, coded), Some(SubReason::UnknownModel));
            assert_eq!(
                said(protocol, 500, coded),
                None,
                "not a rejection of the request"
            );
        }
        // Free text is never read; Anthropic has no code that means only this.
        let worded = r#"{"error":{"message":"model_not_found","type":"invalid_request_error"}}"#;
        assert_eq!(said(WireProtocol::Chat, 400, worded), None);
        let anthropic =
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: x"}}"#;
        assert_eq!(said(WireProtocol::Anthropic, 404, anthropic), None);
        assert_eq!(said(WireProtocol::Anthropic, 400, coded), None);
    }
}
