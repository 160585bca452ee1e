//! One attempt: send a projected request, read the answer, stream it through the assembler.
//!
//! Invariants:
//! - An attempt either returns a complete `Completion` or a `FailureDiagnostic`; deltas it
//!   streamed before failing are provisional and the caller must drop them.
//! - The API key goes only into the request header; it is never formatted into an error.
//! - A stream that stays silent for the profile's idle timeout fails with `timeout`.
//! - Error bodies are read (at most `MAX_ERROR_BODY` bytes) only to classify them.
//! - No SSE line or event longer than the profile's `max_event_bytes` is buffered: past it the
//!   attempt fails with `stream_corrupt`. A 200 with nothing in it is `empty_response`.

use crate::assemble::{Assembler, Completion, Delta, Progress, parse_complete_response};
use crate::classify::{
    classify_http_failure, retry_after_from_headers, trace_id_from_headers, with_unknown_model,
};
use crate::profile::ProviderProfile;
use crate::sse::{FrameError, SseEvent, SseFramer};
use futures_util::StreamExt;
use keel_types::{AssistantPart, FailureDiagnostic, FailureKind, WireProtocol};
use std::ops::ControlFlow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MAX_ERROR_BODY: usize = 64 * 1024;
const MAX_JSON_BODY: usize = 32 * 1024 * 1024;

/// Why an attempt failed, how long the provider asked us to wait, and what it said (its
/// structured error message, kept beside the diagnostic: never in it, never stored).
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptFailure {
    pub diagnostic: FailureDiagnostic,
    pub retry_after: Option<Duration>,
    pub said: Option<crate::said::ProviderWords>,
}

impl From<FailureDiagnostic> for AttemptFailure {
    fn from(diagnostic: FailureDiagnostic) -> Self {
        Self {
            diagnostic,
            retry_after: None,
            said: None,
        }
    }
}

#[derive(Clone, Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct ClientBuildError(String);

/// Two clients: one for `http://` endpoints that never loads the system's TLS roots (tens of
/// milliseconds on a busy disk), and one for `https://` built once, on first use or ahead of it
/// on another thread (`prepare_for`), so the roots load off the critical path.
#[derive(Clone, Debug)]
pub struct HttpClient {
    plain: reqwest::Client,
    tls: Arc<OnceLock<Result<reqwest::Client, ClientBuildError>>>,
    connect_timeout: Duration,
}

fn is_https(endpoint: &str) -> bool {
    endpoint
        .get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

fn build_client(
    connect_timeout: Duration,
    system_roots: bool,
) -> Result<reqwest::Client, ClientBuildError> {
    // Installing fails only if a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")));
    // Without the system's roots no certificate is trusted: an https URL given to the plain
    // client fails closed.
    let builder = if system_roots {
        builder
    } else {
        builder.tls_certs_only([])
    };
    builder
        .build()
        .map_err(|error| ClientBuildError(error_chain(&error)))
}

/// A plain HTTP client for requests to `base_url` built the way keel's own are (rustls with
/// ring; the system's roots only for `https`), for tools that speak to a provider on keel's
/// behalf (`keel eval`'s metering proxy).
pub fn client_for_base(
    base_url: &str,
    connect_timeout: Duration,
) -> Result<reqwest::Client, ClientBuildError> {
    build_client(connect_timeout, is_https(base_url))
}

impl HttpClient {
    pub fn new(connect_timeout: Duration) -> Result<HttpClient, ClientBuildError> {
        Ok(HttpClient {
            plain: build_client(connect_timeout, false)?,
            tls: Arc::default(),
            connect_timeout,
        })
    }

    /// For an `https` endpoint, start loading the TLS roots on another thread now.
    pub fn prepare_for(&self, endpoint: &str) {
        if !is_https(endpoint) {
            return;
        }
        let tls = Arc::clone(&self.tls);
        let connect_timeout = self.connect_timeout;
        std::thread::spawn(move || {
            tls.get_or_init(|| build_client(connect_timeout, true));
        });
    }

    /// The client for `endpoint` (the TLS one is built here if nobody started it).
    fn client_for(&self, endpoint: &str) -> Result<&reqwest::Client, ClientBuildError> {
        if !is_https(endpoint) {
            return Ok(&self.plain);
        }
        self.tls
            .get_or_init(|| build_client(self.connect_timeout, true))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// One attempt against `profile` with `api_key`.
    pub async fn attempt(
        &self,
        profile: &ProviderProfile,
        api_key: &str,
        body: Vec<u8>,
        sink: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Completion, AttemptFailure> {
        let endpoint = profile.endpoint();
        let client = self.client_for(&endpoint).map_err(|error| {
            FailureDiagnostic::with_message(FailureKind::Transport, None, error.to_string())
        })?;
        let mut request = client
            .post(&endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body);
        request = match profile.protocol {
            WireProtocol::Anthropic => request
                .header("x-api-key", api_key)
                .header("anthropic-version", "2023-06-01"),
            WireProtocol::Chat | WireProtocol::Responses => request.bearer_auth(api_key),
        };
        keel_types::startup_trace::first_request();
        let response = match tokio::time::timeout(profile.idle_timeout, request.send()).await {
            Err(_) => return Err(idle_timeout(profile.idle_timeout, "for response headers").into()),
            Ok(Err(error)) => return Err(request_error(&error, &endpoint).into()),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let trace_id = trace_id_from_headers(&headers);
        if !response.status().is_success() {
            let body = read_capped(response, MAX_ERROR_BODY, profile.idle_timeout).await;
            let diagnostic = with_unknown_model(
                classify_http_failure(status, &body),
                profile.protocol,
                status,
                &body,
            )
            .with_trace_id(trace_id);
            return Err(AttemptFailure {
                diagnostic,
                retry_after: retry_after_from_headers(&headers),
                said: crate::said::said_in(profile.protocol, &body),
            });
        }
        let content_type = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let with_trace = |diagnostic: FailureDiagnostic| AttemptFailure {
            diagnostic: diagnostic.with_trace_id(trace_id.clone()),
            retry_after: None,
            said: None,
        };
        if content_type.starts_with("text/event-stream") {
            return stream_events(profile, response, sink)
                .await
                .map_err(with_trace);
        }
        let body = read_capped(response, MAX_JSON_BODY, profile.idle_timeout).await;
        if body.trim_ascii().is_empty() {
            return Err(with_trace(empty_response("an empty body")));
        }
        if content_type.contains("json") || body.trim_ascii_start().starts_with(b"{") {
            // A server that ignored `stream: true`: show the whole answer as one delta each.
            let completion =
                parse_complete_response(profile.protocol, &body).map_err(with_trace)?;
            for part in &completion.item.parts {
                match part {
                    AssistantPart::Reasoning { text, .. } if !text.is_empty() => {
                        sink(Delta::Reasoning(text));
                    }
                    AssistantPart::Text { text } if !text.is_empty() => sink(Delta::Text(text)),
                    AssistantPart::Reasoning { .. }
                    | AssistantPart::Text { .. }
                    | AssistantPart::ToolCall(_)
                    | AssistantPart::WebSearch(_) => {}
                }
            }
            return Ok(completion);
        }
        let looks_like_html = content_type.contains("html")
            || body
                .trim_ascii_start()
                .first()
                .is_some_and(|byte| *byte == b'<');
        let message = if looks_like_html {
            "the provider answered with an HTML page instead of an API response: check that \
             base_url is the API endpoint"
        } else {
            "the provider answered with content that is neither an event stream nor JSON: check \
             that base_url is the API endpoint"
        };
        Err(with_trace(FailureDiagnostic::with_message(
            FailureKind::Unknown,
            None,
            message,
        )))
    }
}

async fn stream_events(
    profile: &ProviderProfile,
    mut response: reqwest::Response,
    sink: &mut (dyn FnMut(Delta<'_>) + Send),
) -> Result<Completion, FailureDiagnostic> {
    let mut framer = SseFramer::new(profile.max_event_bytes);
    let mut assembler = Assembler::new(profile.protocol);
    let mut saw_event = false;
    loop {
        let read = match tokio::time::timeout(profile.idle_timeout, response.chunk()).await {
            Err(_) => return Err(idle_timeout(profile.idle_timeout, "inside the stream")),
            Ok(Err(error)) => return Err(request_error(&error, &profile.endpoint())),
            Ok(Ok(None)) => break,
            Ok(Ok(Some(read))) => read,
        };
        let flow = framer.feed::<FailureDiagnostic>(&read, &mut |event: SseEvent<'_>| {
            saw_event = true;
            Ok(match assembler.push(event.event, event.data, sink)? {
                Progress::Done => ControlFlow::Break(()),
                Progress::Continue => ControlFlow::Continue(()),
            })
        })?;
        if flow.is_break() {
            break;
        }
    }
    if !saw_event {
        return Err(empty_response("an event stream without a single event"));
    }
    assembler.finish()
}

/// A stream the framer refused is corrupt; the diagnostic says which bound or rule it broke.
impl From<FrameError> for FailureDiagnostic {
    fn from(error: FrameError) -> Self {
        match error {
            FrameError::LineTooLong(_) | FrameError::EventTooLong(_) => {
                FailureDiagnostic::with_message(
                    FailureKind::StreamCorrupt,
                    None,
                    format!(
                        "{error} (max_event_bytes); the stream was abandoned and is not retried \
                         (the same request would send it again)"
                    ),
                )
                .with_sub_reason(keel_types::SubReason::EventTooLarge)
            }
            FrameError::NotUtf8 => FailureDiagnostic::with_message(
                FailureKind::StreamCorrupt,
                None,
                "the stream is not valid server-sent events (it is not UTF-8)",
            ),
        }
    }
}

fn empty_response(what: &str) -> FailureDiagnostic {
    FailureDiagnostic::with_message(
        FailureKind::EmptyResponse,
        None,
        format!("the provider answered with {what}"),
    )
}

async fn read_capped(response: reqwest::Response, cap: usize, idle: Duration) -> Vec<u8> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while body.len() < cap {
        match tokio::time::timeout(idle, chunks.next()).await {
            Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
            Ok(Some(Err(_))) | Ok(None) | Err(_) => break,
        }
    }
    body.truncate(cap);
    body
}

fn idle_timeout(limit: Duration, place: &str) -> FailureDiagnostic {
    FailureDiagnostic::with_message(
        FailureKind::Timeout,
        None,
        format!(
            "the provider sent nothing for {} s {place} (idle timeout)",
            limit.as_secs()
        ),
    )
}

fn request_error(error: &reqwest::Error, endpoint: &str) -> FailureDiagnostic {
    let kind = if error.is_timeout() {
        FailureKind::Timeout
    } else {
        FailureKind::Transport
    };
    let cause = error_chain(error);
    let message = if error.is_body() || error.is_decode() {
        format!("the connection dropped in the middle of the response ({cause})")
    } else if error.is_connect() {
        format!("cannot connect to the provider ({cause})")
    } else {
        format!("{} ({cause})", kind.describe())
    };
    let diagnostic = FailureDiagnostic::with_message(kind, None, message);
    if error.is_connect() && refused(error) && is_loopback(endpoint) {
        diagnostic.with_sub_reason(keel_types::SubReason::LoopbackRefused)
    } else {
        diagnostic
    }
}

/// Whether the connection was refused (an `ECONNREFUSED` somewhere in the chain).
fn refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = current {
        if cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        current = cause.source();
    }
    false
}

/// Whether `url` names this machine's loopback (`127.0.0.0/8`, `::1`, `localhost`).
fn is_loopback(url: &str) -> bool {
    match url::Url::parse(url)
        .ok()
        .and_then(|url| url.host().map(|host| host.to_owned()))
    {
        Some(url::Host::Ipv4(address)) => address.is_loopback(),
        Some(url::Host::Ipv6(address)) => address.is_loopback(),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
        None => false,
    }
}

/// The innermost causes of an error, which name the OS-level problem; never a body.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut causes = Vec::new();
    let mut current = error.source();
    while let Some(cause) = current {
        causes.push(cause.to_string());
        current = cause.source();
    }
    match causes.last() {
        Some(innermost) => innermost.clone(),
        None => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_https_endpoint_loads_the_system_roots() {
        let client = HttpClient::new(Duration::from_secs(1)).expect("client");
        let plain = client.client_for("http://127.0.0.1:1/chat/completions");
        assert!(plain.is_ok());
        assert!(
            client.tls.get().is_none(),
            "an http endpoint loads no roots"
        );
        assert!(client.client_for("HTTPS://api.deepseek.com").is_ok());
        assert!(client.tls.get().is_some(), "an https endpoint does");
    }
}
