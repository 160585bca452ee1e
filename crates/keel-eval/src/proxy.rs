//! The metering proxy: one per trial, on loopback, in front of the provider (or the mock).
//! It counts what the provider really received and answered, and injects the faults asked
//! for, so a trial's numbers never rest on the agent's own report.
//!
//! Invariants:
//! - Every request is counted, faulted or forwarded; the response's usage is read from the
//!   bytes the provider sent (a stream's events or a JSON body). A response with no usage is
//!   `unmeasured`, never zero, and a trial with one unmeasured response has no token total.
//! - An injected fault never reaches the provider (nothing is spent on it) and is counted.
//! - Headers are forwarded as they are (the key included), never stored or logged.

use crate::faults::{FaultPlan, Injected};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// What the proxy saw, for one trial.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metered {
    /// Requests the provider received (injected faults and budget refusals never reach it).
    pub requests: u32,
    /// Faults injected.
    pub faults: u32,
    /// HTTP statuses, in order (faults and refusals included).
    pub statuses: Vec<u16>,
    /// Input and output tokens the provider reported; `None` once a response had no usage.
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Responses with no usage.
    pub unmeasured: u32,
    /// Requests that could not reach the provider at all.
    pub unreachable: u32,
    /// The trial's token budget was spent: later requests were refused, never forwarded.
    #[serde(default)]
    pub budget_exhausted: bool,
}

/// The bytes of the responses still streaming, by number.
type Open = Arc<Mutex<std::collections::BTreeMap<u64, Arc<Mutex<Vec<u8>>>>>>;

impl Metered {
    fn add_usage(&mut self, usage: Option<(u64, u64)>) {
        match usage {
            Some((input, output)) if self.unmeasured == 0 => {
                self.input_tokens = Some(self.input_tokens.unwrap_or(0) + input);
                self.output_tokens = Some(self.output_tokens.unwrap_or(0) + output);
            }
            Some(_) => {}
            None => {
                self.unmeasured += 1;
                self.input_tokens = None;
                self.output_tokens = None;
            }
        }
    }
}

#[derive(Clone)]
struct ProxyState {
    upstream: String,
    /// Input and output tokens the trial may spend (`max_tokens` of its task).
    budget: Option<u64>,
    client: reqwest::Client,
    metered: Arc<Mutex<Metered>>,
    open: Open,
    faults: Arc<Mutex<FaultPlan>>,
}

impl ProxyState {
    fn metered(&self) -> std::sync::MutexGuard<'_, Metered> {
        self.metered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running proxy.
pub struct Proxy {
    addr: SocketAddr,
    state: ProxyState,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Serve on a free loopback port, forwarding to `upstream` (a base URL), refusing any
    /// request once `budget` tokens are spent.
    pub async fn start(
        upstream: &str,
        faults: FaultPlan,
        budget: Option<u64>,
    ) -> std::io::Result<Proxy> {
        let client =
            keel_llm::client::client_for_base(upstream, keel_llm::profile::DEFAULT_CONNECT_TIMEOUT)
                .map_err(|error| std::io::Error::other(error.to_string()))?;
        let state = ProxyState {
            upstream: upstream.trim_end_matches('/').to_string(),
            budget,
            client,
            metered: Arc::default(),
            open: Arc::default(),
            faults: Arc::new(Mutex::new(faults)),
        };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let app = Router::new().fallback(forward).with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Proxy { addr, state, task })
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What was measured. A response whose end was not seen yet is read as far as it came:
    /// its usage counts if it arrived (the stream was whole), else it is unmeasured (cut off).
    pub fn metered(&self) -> Metered {
        let mut metered = self.state.metered().clone();
        let open = self
            .state
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for bytes in open.values() {
            let bytes = bytes.lock().map(|bytes| bytes.clone()).unwrap_or_default();
            metered.add_usage(usage_in(&bytes));
        }
        metered
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(
    State(state): State<ProxyState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let injected = {
        let mut faults = state
            .faults
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        faults.next(&body)
    };
    let spent = {
        let metered = state.metered();
        metered.input_tokens.unwrap_or(0) + metered.output_tokens.unwrap_or(0)
    };
    if state.budget.is_some_and(|budget| spent >= budget) {
        let mut metered = state.metered();
        metered.statuses.push(402);
        metered.budget_exhausted = true;
        let body = serde_json::json!({"error": {
            "message": "keel eval: this trial's token budget (max_tokens) is spent",
            "type": "insufficient_quota", "code": "insufficient_quota"}});
        return (StatusCode::PAYMENT_REQUIRED, axum::Json(body)).into_response();
    }
    if let Some(Injected { status, body }) = injected {
        let mut metered = state.metered();
        metered.faults += 1;
        metered.statuses.push(status);
        return (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [("content-type", "application/json")],
            body,
        )
            .into_response();
    }
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |path| path.as_str().to_string());
    let mut request = state
        .client
        .request(method, format!("{}{path}", state.upstream))
        .body(body);
    for (name, value) in &headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection") {
            request = request.header(name, value);
        }
    }
    let upstream = match request.send().await {
        Ok(upstream) => upstream,
        Err(_) => {
            let mut metered = state.metered();
            metered.unreachable += 1;
            metered.statuses.push(502);
            return (
                StatusCode::BAD_GATEWAY,
                "keel eval proxy: the provider is unreachable",
            )
                .into_response();
        }
    };
    let status = upstream.status().as_u16();
    let success = (200..300).contains(&status);
    let number = {
        let mut metered = state.metered();
        metered.requests += 1;
        metered.statuses.push(status);
        u64::from(metered.requests)
    };
    let mut response =
        Response::builder().status(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY));
    for (name, value) in upstream.headers() {
        if !matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            response = response.header(name, value);
        }
    }
    // The bytes go on as they come; a copy is read for usage when the stream ends (or when
    // the trial ends first).
    let seen = Arc::new(Mutex::new(Vec::<u8>::new()));
    if success {
        state
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(number, seen.clone());
    }
    let tee = seen.clone();
    let metered = state.metered.clone();
    let open = state.open.clone();
    let stream = upstream
        .bytes_stream()
        .map(move |chunk| {
            if let Ok(bytes) = &chunk
                && let Ok(mut seen) = tee.lock()
            {
                seen.extend_from_slice(bytes);
            }
            chunk
        })
        .chain(futures_util::stream::once(async move {
            let ended = open
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .remove(&number);
            if ended.is_some() {
                let bytes = seen.lock().map(|seen| seen.clone()).unwrap_or_default();
                metered
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .add_usage(usage_in(&bytes));
            }
            Ok(Bytes::new())
        }));
    response
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

/// The (input, output) tokens a response reports, from a stream's events or a JSON body, in
/// any of the three protocols; `None` when it reports none.
pub(crate) fn usage_in(bytes: &[u8]) -> Option<(u64, u64)> {
    let text = String::from_utf8_lossy(bytes);
    let mut input = None;
    let mut output = None;
    let objects: Vec<Value> = if text.trim_start().starts_with('{') {
        serde_json::from_str(&text).ok().into_iter().collect()
    } else {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    };
    let number = |value: &Value, key: &str| value.get(key).and_then(Value::as_u64);
    for object in &objects {
        let usages = [
            object.get("usage"),
            object.pointer("/message/usage"),
            object.pointer("/response/usage"),
        ];
        for usage in usages.into_iter().flatten() {
            if let Some(tokens) = number(usage, "prompt_tokens").or(number(usage, "input_tokens")) {
                // Anthropic counts cached input apart.
                let cached = number(usage, "cache_read_input_tokens").unwrap_or(0)
                    + number(usage, "cache_creation_input_tokens").unwrap_or(0);
                input = Some(tokens + cached);
            }
            if let Some(tokens) =
                number(usage, "completion_tokens").or(number(usage, "output_tokens"))
            {
                output = Some(tokens);
            }
        }
    }
    match (input, output) {
        (None, None) => None,
        (input, output) => Some((input.unwrap_or(0), output.unwrap_or(0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_read_from_each_protocols_stream_or_body() {
        let chat = "data: {\"choices\":[]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";
        assert_eq!(usage_in(chat.as_bytes()), Some((12, 3)));
        let anthropic = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n";
        assert_eq!(usage_in(anthropic.as_bytes()), Some((15, 7)));
        let responses = "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":4}}}\n\n";
        assert_eq!(usage_in(responses.as_bytes()), Some((9, 4)));
        let body = "{\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1}}";
        assert_eq!(usage_in(body.as_bytes()), Some((2, 1)));
        assert_eq!(usage_in(b"data: {\"choices\":[]}\n\n"), None);
    }

    #[tokio::test]
    async fn a_response_cut_off_before_its_end_is_unmeasured() {
        // An upstream that sends headers and part of a stream, then stops answering.
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let upstream = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buffer = [0u8; 4096];
            let _ = socket.read(&mut buffer).await;
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n10\r\ndata: {\"x\":1}\n\n\r\n")
                .await;
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        });
        let proxy = Proxy::start(&upstream, FaultPlan::default(), None)
            .await
            .unwrap();
        let client = reqwest::Client::new();
        let response = client
            .post(format!("{}/chat/completions", proxy.base_url()))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        drop(response); // keel is gone before the end
        let metered = proxy.metered();
        assert_eq!((metered.requests, metered.unmeasured), (1, 1));
        assert_eq!(metered.input_tokens, None, "never zero");
    }

    #[test]
    fn one_unmeasured_response_leaves_the_total_unknown_never_zero() {
        let mut metered = Metered::default();
        metered.add_usage(Some((10, 2)));
        assert_eq!(metered.input_tokens, Some(10));
        metered.add_usage(None);
        metered.add_usage(Some((10, 2)));
        assert_eq!((metered.input_tokens, metered.unmeasured), (None, 1));
    }
}
