//! JSON-RPC 2.0 over newline-delimited JSON: the writer, requests to the client and their
//! answers.
//!
//! Invariants:
//! - Every message carries `"jsonrpc":"2.0"`; a notification has no `id` key; a response has
//!   exactly one of `result` and `error`. Everything goes through one writer, so messages reach
//!   the client in the order they were sent (updates before the response that follows them).
//! - Nothing but protocol is ever written to stdout.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// JSON-RPC error codes used here.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// keel: the session is busy or a recovery was refused.
    pub const REFUSED: i64 = -32010;
    /// keel: the turn failed (the provider's failure, classified); `data` says how.
    pub const TURN_FAILED: i64 = -32011;
}

/// An error answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    /// The error's `data`, when it has more to say than its message.
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, message)
    }
}

type Pending = Mutex<HashMap<i64, oneshot::Sender<Result<Value, RpcError>>>>;

/// The agent's side of the connection.
#[derive(Clone)]
pub struct Connection {
    out: mpsc::UnboundedSender<String>,
    next_id: Arc<AtomicI64>,
    pending: Arc<Pending>,
}

impl Connection {
    /// A connection writing lines to `out` (the task that owns stdout reads them).
    pub fn new(out: mpsc::UnboundedSender<String>) -> Connection {
        Connection {
            out,
            next_id: Arc::new(AtomicI64::new(1)),
            pending: Arc::default(),
        }
    }

    fn send(&self, message: Value) {
        let _ = self.out.send(message.to_string());
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    pub fn respond(&self, id: Value, result: Result<Value, RpcError>) {
        match result {
            Ok(result) => self.send(json!({"jsonrpc": "2.0", "id": id, "result": result})),
            Err(error) => {
                let mut body = json!({"code": error.code, "message": error.message});
                if let Some(data) = error.data {
                    body["data"] = data;
                }
                self.send(json!({"jsonrpc": "2.0", "id": id, "error": body}));
            }
        }
    }

    /// A request to the client; resolves with its answer (or an error if it never comes).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (sender, receiver) = oneshot::channel();
        self.lock().insert(id, sender);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        receiver
            .await
            .unwrap_or_else(|_| Err(RpcError::new(code::INTERNAL, "the client went away")))
    }

    /// An answer from the client to one of our requests.
    pub fn answer(&self, message: &Value) {
        let Some(id) = message.get("id").and_then(Value::as_i64) else {
            return;
        };
        let Some(waiting) = self.lock().remove(&id) else {
            return;
        };
        let result = match message.get("error") {
            Some(error) => Err(RpcError::new(
                error
                    .get("code")
                    .and_then(Value::as_i64)
                    .unwrap_or(code::INTERNAL),
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string(),
            )),
            None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
        };
        let _ = waiting.send(result);
    }

    /// Fail every request still waiting for the client (it went away).
    pub fn abandon_requests(&self) {
        self.lock().clear();
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<i64, oneshot::Sender<Result<Value, RpcError>>>> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
