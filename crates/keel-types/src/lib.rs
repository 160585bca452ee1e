//! keel's provider-neutral model: plain data and serde, no I/O — but for `private_files`,
//! the one way keel makes its own files owner-only, here because every crate that writes
//! into `$KEEL_HOME` depends on this one.
//!
//! Invariants:
//! - Every type here serializes deterministically: the same value always gives the same bytes
//!   (structs keep their field order, maps are never hash maps).
//! - Nothing here can hold a secret: API keys live only in the process environment and are read
//!   by the provider layer at request time.

pub mod approval_request;
pub mod approval_view;
pub mod event;
pub mod failure;
pub mod history;
pub mod hooks;
pub mod kill_point;
pub mod names;
pub mod parse_error;
pub mod private_files;
pub mod protocol;
pub mod receipt;
pub mod search;
pub mod secrets;
pub mod startup_trace;
pub mod tool;
pub mod usage;

pub use approval_request::{ApprovalRequest, AskedBy, Preview, StatedChange, stated_change};
pub use approval_view::{ApprovalView, approval_view, is_invisible};
pub use event::{AgentEnd, Event, EventBody, IgnoredSetting, InputKind, WindowUse};
pub use failure::{DEEPSEEK_CONTEXT_LIMIT_BODY, FailureDiagnostic, FailureKind, SubReason};
pub use history::{
    AssistantItem, AssistantPart, COMPACTION_REQUEST_MARKER, ContextBlock, ContextSource,
    DEFAULT_INSTRUCTION_FILES, FinishReason, Item, ReplayData, Summary, ToolCall, ToolResult,
    person_text,
};
pub use protocol::{ReasoningProtocol, WireProtocol};
pub use receipt::{ReceiptState, ToolReceipt};
pub use search::{SearchSource, SourcesStatus, WebSearch};
pub use secrets::Secrets;
pub use tool::ToolSpec;
pub use usage::{Cost, Usage};
