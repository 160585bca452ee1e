//! Tool receipts: the write-ahead record of every tool call (docs/recovery.md#tool-receipts).
//!
//! Invariants:
//! - A receipt is durable in state `started` before its tool runs, and reaches a final state
//!   before the next model request.
//! - `started` found on load means the process died mid-tool: it becomes `unknown` and is never
//!   re-run automatically.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptState {
    /// Recorded with its assistant message; not started yet.
    Pending,
    /// The tool is running (or the process died while it ran).
    Started,
    Completed,
    Failed,
    /// A permission rule or the user refused it.
    Denied,
    /// The turn was cancelled while it ran.
    Cancelled,
    /// The turn ended (cancelled or failed) before it started.
    NotStarted,
    /// It was started and its outcome cannot be known.
    Unknown,
}

impl ReceiptState {
    /// The state a receipt has once its process is gone: `started` is `unknown` (it may or may
    /// not have taken effect), `pending` is `not_started`; final states stay.
    pub fn after_interruption(self) -> ReceiptState {
        match self {
            ReceiptState::Started => ReceiptState::Unknown,
            ReceiptState::Pending => ReceiptState::NotStarted,
            ReceiptState::Completed
            | ReceiptState::Failed
            | ReceiptState::Denied
            | ReceiptState::Cancelled
            | ReceiptState::NotStarted
            | ReceiptState::Unknown => self,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Started => "started",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Denied => "denied",
            Self::Cancelled => "cancelled",
            Self::NotStarted => "not_started",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(name: &str) -> Option<ReceiptState> {
        [
            Self::Pending,
            Self::Started,
            Self::Completed,
            Self::Failed,
            Self::Denied,
            Self::Cancelled,
            Self::NotStarted,
            Self::Unknown,
        ]
        .into_iter()
        .find(|state| state.as_str() == name)
    }

    /// Whether the receipt will not change any more.
    pub fn is_final(self) -> bool {
        match self {
            Self::Pending | Self::Started => false,
            Self::Completed
            | Self::Failed
            | Self::Denied
            | Self::Cancelled
            | Self::NotStarted
            | Self::Unknown => true,
        }
    }
}

impl fmt::Display for ReceiptState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolReceipt {
    pub call_id: String,
    pub tool: String,
    /// SHA-256 (hex) of the raw argument string.
    pub args_digest: String,
    pub state: ReceiptState,
    pub turn: u64,
    /// Order of the receipt within the session (call ids may repeat across providers).
    pub seq: u64,
    /// A short summary of the result, once there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The sandbox a command ran under (`workspace-write`, `read-only`, `off`), recorded when
    /// it starts; none for tools that run no command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// The child session a `task` call started, named before the child's first request (so a
    /// crash can never leave a child nobody knows of); none for every other tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_session: Option<String>,
}
