//! The fake provider's HTTP server on loopback (axum).
//!
//! Invariants:
//! - Every model request is captured (path, protocol, exact body bytes, a fingerprint of the
//!   key — never the key) before it is answered, so tests can count and compare requests.
//! - Cache-hit tokens are the longest common prefix (in bytes / 4) of this request's prompt with
//!   any earlier request's prompt, the way a provider's prefix cache would see them.
//! - A Chat request replaying a tool-call assistant message without `reasoning_content` gets
//!   DeepSeek's 400, without consuming a step.

use crate::render::{self, Answer, Frame, MockUsage, Protocol, ScriptedAnswer};
use crate::scenario::{Fault, Scenario, Step, StreamFault};
use crate::stage;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// One request as the mock received it.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct CapturedRequest {
    pub path: String,
    pub protocol: String,
    pub body: String,
    /// First 12 hex digits of the SHA-256 of the key sent, if any.
    pub key_fingerprint: Option<String>,
    /// The 1-based step that answered it; `None` when the mock rejected it on its own.
    pub step: Option<usize>,
    /// When it arrived, in microseconds since the Unix epoch (for benchmarks).
    #[serde(default)]
    pub received_at_us: u64,
    /// The reasoning effort the request asked for, in keel's names (`None`: it said none).
    #[serde(default)]
    pub effort: Option<String>,
    /// The 1-based conversation whose step answered it (`None`: the default steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<usize>,
}

#[derive(Debug)]
struct MockState {
    scenario: Scenario,
    next_step: usize,
    /// The next step of each conversation.
    next_in_conversation: Vec<usize>,
    requests: Vec<CapturedRequest>,
    prompts: Vec<String>,
}

#[derive(Clone, Debug)]
struct Shared(Arc<Mutex<MockState>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, MockState> {
        // A poisoned lock only means another handler panicked; the data is still usable.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running fake provider.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl MockServer {
    /// Bind `addr` (use port 0 for any free port) and serve `scenario` in the background.
    pub async fn start(addr: SocketAddr, scenario: Scenario) -> std::io::Result<MockServer> {
        let shared = Shared(Arc::new(Mutex::new(MockState {
            next_in_conversation: vec![0; scenario.conversations.len()],
            scenario,
            next_step: 0,
            requests: Vec::new(),
            prompts: Vec::new(),
        })));
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let app = router(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockServer { addr, shared, task })
    }

    /// The base URL to configure as a provider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<CapturedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Wait until the server stops (it runs until the process ends).
    pub async fn wait(mut self) {
        let _ = (&mut self.task).await;
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn router(shared: Shared) -> Router {
    let chat = post(|s: State<Shared>, h: HeaderMap, b: Bytes| {
        model_request(s, h, b, Protocol::Chat, "/chat/completions")
    });
    let anthropic = post(|s: State<Shared>, h: HeaderMap, b: Bytes| {
        model_request(s, h, b, Protocol::Anthropic, "/v1/messages")
    });
    let responses = post(|s: State<Shared>, h: HeaderMap, b: Bytes| {
        model_request(s, h, b, Protocol::Responses, "/responses")
    });
    Router::new()
        .route("/chat/completions", chat.clone())
        .route("/v1/chat/completions", chat)
        .route("/messages", anthropic.clone())
        .route("/v1/messages", anthropic)
        .route("/responses", responses.clone())
        .route("/v1/responses", responses)
        .route(
            "/v1/models",
            get(|| async {
                axum::Json(json!({"object": "list", "data": [{"id": "mock", "object": "model"}]}))
            }),
        )
        .route(
            "/_mock/requests",
            get(|State(shared): State<Shared>| async move {
                axum::Json(shared.lock().requests.clone())
            }),
        )
        .with_state(shared)
}

fn key_fingerprint(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let key = bearer.or_else(|| {
        headers
            .get("x-api-key")
            .and_then(|value| value.to_str().ok())
    })?;
    let digest = Sha256::digest(key.as_bytes());
    Some(
        digest
            .iter()
            .take(6)
            .map(|byte| format!("{byte:02x}"))
            .collect(),
    )
}

fn error_json(status: StatusCode, message: &str, kind: &str) -> Response {
    (
        status,
        axum::Json(
            json!({"error": {"message": message, "type": kind, "param": null, "code": kind}}),
        ),
    )
        .into_response()
}

/// The prompt as a provider's cache sees it: system, tools and messages, in request order.
fn prompt_text(protocol: Protocol, body: &Value) -> String {
    let parts: [&str; 3] = match protocol {
        Protocol::Chat => ["system", "tools", "messages"],
        Protocol::Anthropic => ["system", "tools", "messages"],
        Protocol::Responses => ["instructions", "tools", "input"],
    };
    parts
        .iter()
        .map(|key| body.get(*key).map(Value::to_string).unwrap_or_default())
        .collect()
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// DeepSeek's check: every assistant message with tool calls must carry `reasoning_content`.
fn missing_reasoning_index(body: &Value) -> Option<usize> {
    let messages = body.get("messages")?.as_array()?;
    messages.iter().position(|message| {
        message.get("role").and_then(Value::as_str) == Some("assistant")
            && message
                .get("tool_calls")
                .and_then(Value::as_array)
                .is_some_and(|c| !c.is_empty())
            && message
                .get("reasoning_content")
                .is_none_or(|r| !r.is_string())
    })
}

async fn model_request(
    state: State<Shared>,
    headers: HeaderMap,
    body: Bytes,
    protocol: Protocol,
    path: &'static str,
) -> Response {
    let mut response = answer_request(state, headers, body, protocol, path);
    if let Some(LateBy(silence)) = response.extensions_mut().remove::<LateBy>() {
        // A stall before any header: the answer itself is late.
        tokio::time::sleep(silence).await;
    }
    response
}

/// How long to stay silent before sending a response's headers.
#[derive(Clone, Copy)]
struct LateBy(std::time::Duration);

/// The answer to one model request.
fn answer_request(
    State(shared): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
    protocol: Protocol,
    path: &'static str,
) -> Response {
    let text = String::from_utf8_lossy(&body).into_owned();
    let mut capture = CapturedRequest {
        path: path.to_string(),
        protocol: format!("{protocol:?}").to_ascii_lowercase(),
        body: text,
        key_fingerprint: key_fingerprint(&headers),
        step: None,
        received_at_us: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX))
            .unwrap_or(0),
        effort: None,
        conversation: None,
    };
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(parsed) => parsed,
        Err(_) => {
            shared.lock().requests.push(capture);
            return error_json(
                StatusCode::BAD_REQUEST,
                "keel mock: the request body is not valid JSON",
                "invalid_request_error",
            );
        }
    };
    capture.effort = crate::effort::effort_in_request(&parsed);
    let mut state = shared.lock();
    let replay_checked = protocol == Protocol::Chat && state.scenario.require_reasoning_replay;
    if let Some(index) = missing_reasoning_index(&parsed).filter(|_| replay_checked) {
        state.requests.push(capture);
        let message = format!(
            "Missing `reasoning_content` field in the assistant message at message index {index}. \
             The reasoning_content of tool-call turns must be passed back to the API."
        );
        return error_json(StatusCode::BAD_REQUEST, &message, "invalid_request_error");
    }
    let request_number = state.requests.len() + 1;
    let prompt = prompt_text(protocol, &parsed);
    let prompt_tokens = (prompt.len() as u64).div_ceil(4).max(1);
    if let Some(window) = state.scenario.context_window
        && prompt_tokens > window
    {
        state.requests.push(capture);
        let body = keel_types::DEEPSEEK_CONTEXT_LIMIT_BODY
            .replace("{window}", &window.to_string())
            .replace("{requested}", &prompt_tokens.to_string());
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
    }
    // What a prefix cache would have served: the longest prefix shared with an earlier prompt.
    let best_prefix = state
        .prompts
        .iter()
        .map(|earlier| common_prefix(earlier, &prompt))
        .max()
        .unwrap_or(0);
    state.prompts.push(prompt.clone());
    let which = state
        .scenario
        .conversation_of(&message_text(protocol, &parsed));
    let step_index = match which {
        Some(index) => state.next_in_conversation[index],
        None => state.next_step,
    };
    let summarising = prompt.contains(keel_types::COMPACTION_REQUEST_MARKER);
    let scripted_summary = matches!(
        state.scenario.script(which).0.get(step_index),
        Some(Step::Compact { .. })
    );
    if summarising && !scripted_summary {
        // No summary scripted here: answer with one of our own and keep the step for later.
        let messages = parsed
            .get(if protocol == Protocol::Responses {
                "input"
            } else {
                "messages"
            })
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let step = Step::Compact {
            fault: None,
            finish_reason: None,
            text: format!(
                "Summary by keel mock: {messages} messages so far; the task goes on from the \
                 latest tool round."
            ),
        };
        state.requests.push(capture);
        let stream = wants_stream(&parsed) && !state.scenario.ignore_stream;
        drop(state);
        let usage = Usage::of(prompt_tokens, best_prefix);
        return scripted_response(
            protocol,
            &step,
            request_number,
            &usage,
            stream,
            std::time::Duration::ZERO,
        );
    }
    let (steps, delays) = state.scenario.script(which);
    let Some(step) = steps.get(step_index).cloned() else {
        state.requests.push(capture);
        let within = which.map_or(String::new(), |index| {
            format!(" in conversation {}", index + 1)
        });
        let message = format!(
            "keel mock: the scenario has no step left for request {request_number}{within}"
        );
        return error_json(StatusCode::BAD_REQUEST, &message, "invalid_request_error");
    };
    let following = steps.get(step_index + 1).cloned();
    let step_delay = delays.get(&step_index).copied().unwrap_or_default();
    match which {
        Some(index) => state.next_in_conversation[index] += 1,
        None => state.next_step += 1,
    }
    capture.step = Some(step_index + 1);
    capture.conversation = which.map(|index| index + 1);
    state.requests.push(capture);
    let delay = state.scenario.chunk_delay;
    let stream = wants_stream(&parsed) && !state.scenario.ignore_stream;
    drop(state);
    let usage = Usage::of(prompt_tokens, best_prefix);
    let reply = Reply {
        protocol,
        request_number,
        usage: &usage,
        stream,
        delay,
        summarising,
    };
    let mut response = reply.with_step(step, following);
    if !step_delay.is_zero() {
        // Held back before any header, on top of a stall the step itself scripts.
        let earlier = response
            .extensions_mut()
            .remove::<LateBy>()
            .map_or(std::time::Duration::ZERO, |late| late.0);
        response
            .extensions_mut()
            .insert(LateBy(earlier + step_delay));
    }
    response
}

/// What answering a request needs besides its step.
struct Reply<'a> {
    protocol: Protocol,
    request_number: usize,
    usage: &'a Usage,
    stream: bool,
    delay: std::time::Duration,
    summarising: bool,
}

impl Reply<'_> {
    /// The response `step` makes (`following`: the step after it, which a cut-off answer
    /// borrows its text from).
    fn with_step(&self, mut step: Step, following: Option<Step>) -> Response {
        let Reply {
            protocol,
            request_number,
            usage,
            stream,
            delay,
            summarising,
        } = *self;
        if let Step::Compact {
            fault: Some(fault), ..
        } = &step
            && summarising
        {
            step = Step::Fault(fault.clone());
        }
        let frames = match &step {
            Step::Fault(Fault::Http {
                status,
                body,
                headers,
            }) => {
                let status =
                    StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut response = (status, body.clone()).into_response();
                let content_type = if body.trim_start().starts_with('{') {
                    "application/json"
                } else {
                    "text/plain"
                };
                if let Ok(value) = content_type.parse() {
                    response.headers_mut().insert(header::CONTENT_TYPE, value);
                }
                for (name, value) in headers {
                    if let (Ok(name), Ok(value)) = (
                        header::HeaderName::from_bytes(name.as_bytes()),
                        value.parse(),
                    ) {
                        response.headers_mut().insert(name, value);
                    }
                }
                return response;
            }
            Step::Fault(Fault::DropAfterContent) => {
                let fallback = Step::Say {
                    text: "This answer will be cut off.".into(),
                    reason: None,
                    finish_reason: None,
                    usage: None,
                };
                let source = following
                    .as_ref()
                    .filter(|s| !matches!(s, Step::Fault(_)))
                    .unwrap_or(&fallback);
                let scripted = ScriptedAnswer::of(source).unwrap_or_default();
                let answer = scripted.answer(request_number);
                let mut frames = render::stream_frames(protocol, &answer, usage.of_answer(&answer));
                frames.truncate(frames.len() / 2);
                // Let the server flush what was sent before cutting the connection.
                frames.push(Frame::Sleep(std::time::Duration::from_millis(50)));
                frames.push(Frame::Abort);
                frames
            }
            Step::Fault(Fault::Stall(duration)) => {
                vec![
                    render::opening_frame(protocol, request_number),
                    Frame::Sleep(*duration),
                    Frame::Abort,
                ]
            }
            Step::Fault(Fault::BadJsonChunk) => {
                vec![
                    render::opening_frame(protocol, request_number),
                    render::broken_frame(protocol),
                ]
            }
            Step::Fault(Fault::Staged { fault, at }) => {
                let mut frames = stage::frames_before(protocol, *at, request_number);
                let before_headers = *at == stage::Stage::BeforeHeaders;
                match fault {
                    StreamFault::BadJson => frames.push(render::broken_frame(protocol)),
                    StreamFault::Stall(silence) if before_headers => {
                        let mut response = stream_response(vec![Frame::Abort], delay);
                        response.extensions_mut().insert(LateBy(*silence));
                        return response;
                    }
                    StreamFault::Drop | StreamFault::Stall(_) => {
                        // A drop lets what was sent flush first; a stall stays silent. Before any
                        // header there is nothing to flush: the body fails at once.
                        let pause = match fault {
                            StreamFault::Stall(silence) => *silence,
                            StreamFault::Drop | StreamFault::BadJson => {
                                std::time::Duration::from_millis(50)
                            }
                        };
                        if !before_headers {
                            frames.push(Frame::Sleep(pause));
                        }
                        frames.push(Frame::Abort);
                    }
                }
                frames
            }
            Step::Say { .. } | Step::Tools { .. } | Step::Search { .. } | Step::Compact { .. } => {
                return scripted_response(protocol, &step, request_number, usage, stream, delay);
            }
        };
        stream_response(frames, delay)
    }
}

/// What the user said in a request: the text of its user messages — not the system prompt
/// (Chat sends it as a message), not the tool calls' arguments, not tool results — where a
/// conversation's marker is looked for.
fn message_text(protocol: Protocol, body: &Value) -> String {
    let key = match protocol {
        Protocol::Chat | Protocol::Anthropic => "messages",
        Protocol::Responses => "input",
    };
    let mut text = String::new();
    let messages = body
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for message in
        messages.filter(|message| message.get("role").and_then(Value::as_str) == Some("user"))
    {
        match message.get("content") {
            Some(Value::String(said)) => text.push_str(said),
            Some(Value::Array(blocks)) => {
                // Text blocks only (Anthropic's tool results are user-role blocks too).
                for block in blocks {
                    let kind = block.get("type").and_then(Value::as_str);
                    if matches!(kind, Some("text" | "input_text"))
                        && let Some(said) = block.get("text").and_then(Value::as_str)
                    {
                        text.push_str(said);
                        text.push('\n');
                    }
                }
            }
            _ => {}
        }
        text.push('\n');
    }
    text
}

fn wants_stream(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool).unwrap_or(false)
}

/// Token counts of one request: its prompt and how much of it an earlier request shared.
struct Usage {
    prompt_tokens: u64,
    shared_prefix_bytes: usize,
}

impl Usage {
    fn of(prompt_tokens: u64, shared_prefix_bytes: usize) -> Usage {
        Usage {
            prompt_tokens,
            shared_prefix_bytes,
        }
    }

    fn of_answer(&self, answer: &Answer<'_>) -> MockUsage {
        let produced = answer.text.map_or(0, str::len)
            + answer.reason.map_or(0, str::len)
            + answer
                .calls
                .iter()
                .map(|c| c.arguments.len() + c.name.len())
                .sum::<usize>();
        MockUsage {
            prompt: self.prompt_tokens,
            completion: (produced as u64).div_ceil(4).max(1),
            reasoning: (answer.reason.map_or(0, str::len) as u64).div_ceil(4),
            cache_hit: ((self.shared_prefix_bytes as u64) / 4).min(self.prompt_tokens),
        }
    }
}

/// The answer of a scripted (non-fault) step, whole or streamed.
fn scripted_response(
    protocol: Protocol,
    step: &Step,
    request_number: usize,
    usage: &Usage,
    stream: bool,
    delay: std::time::Duration,
) -> Response {
    let scripted = ScriptedAnswer::of(step).unwrap_or_default();
    let answer = scripted.answer(request_number);
    let usage = usage.of_answer(&answer);
    if !stream {
        return axum::Json(render::whole_body(protocol, &answer, usage)).into_response();
    }
    stream_response(render::stream_frames(protocol, &answer, usage), delay)
}

fn stream_response(frames: Vec<Frame>, delay: std::time::Duration) -> Response {
    let body = futures_util::stream::iter(frames).then(move |frame| async move {
        match frame {
            Frame::Bytes(bytes) => {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Ok(Bytes::from(bytes))
            }
            Frame::Sleep(duration) => {
                tokio::time::sleep(duration).await;
                Ok(Bytes::new())
            }
            Frame::Abort => Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "keel mock: connection cut",
            )),
        }
    });
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    response
}
