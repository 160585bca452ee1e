//! API errors: a status and a JSON body `{error: {code, message}}` (docs/serve-api.md#errors).
//!
//! Invariant: a message says what was wrong and what to do; it never carries a secret or a
//! provider's response body.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use keel_agent::{AgentError, RecoveryRefusal};

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, code, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<AgentError> for ApiError {
    fn from(error: AgentError) -> ApiError {
        let message = error.to_string();
        match &error {
            AgentError::Busy(_) | AgentError::AlreadyOpen(_) => ApiError::conflict("busy", message),
            AgentError::CannotCompact(_) => ApiError::conflict("cannot_compact", message),
            AgentError::CannotRewind(_) => ApiError::conflict("cannot_rewind", message),
            AgentError::CannotFork(_) => ApiError::conflict("cannot_fork", message),
            AgentError::RecoveryRefused(refusal) => match refusal {
                RecoveryRefusal::TurnRunning => ApiError::conflict("busy", message),
                RecoveryRefusal::NoSuchRecord { .. }
                | RecoveryRefusal::NonePending { .. }
                | RecoveryRefusal::Unreadable { .. }
                | RecoveryRefusal::WrongAction { .. }
                | RecoveryRefusal::AlreadyUsed { .. }
                | RecoveryRefusal::Expired { .. }
                | RecoveryRefusal::OtherScope { .. }
                | RecoveryRefusal::HistoryChanged { .. }
                | RecoveryRefusal::ReceiptsChanged { .. } => {
                    ApiError::conflict("stale_recovery", message)
                }
                RecoveryRefusal::NotPersisted { .. } | RecoveryRefusal::CannotPrepare(_) => {
                    ApiError::internal(message)
                }
            },
            AgentError::Store(_) if error.is_for_the_user() => {
                ApiError::conflict("session_unavailable", message)
            }
            AgentError::Store(_)
            | AgentError::UndecodableHistory { .. }
            | AgentError::Workspace { .. }
            | AgentError::SessionTemp { .. }
            | AgentError::Tools(_)
            | AgentError::Projection(_)
            | AgentError::Snapshot(_)
            | AgentError::Agents(_)
            | AgentError::Client(_) => ApiError::internal(message),
        }
    }
}
