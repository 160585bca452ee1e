//! The events every front end receives, in one order (docs/events.md#the-event-stream).
//!
//! Invariants:
//! - The `type` names and their fields are a public contract; add fields, never rename them.
//! - `llm/text` and `llm/reasoning` deltas are provisional until the `llm/response` of the same
//!   attempt; an `llm/retry` tells front ends to drop what the failed attempt streamed.
//! - No event carries a secret or a provider's response body.

use crate::{FailureDiagnostic, FailureKind, FinishReason, ReceiptState, Usage, WireProtocol};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The event's index in the session's stored event log (its SSE id); absent for streaming
    /// deltas, which are not stored. Replays resume after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    #[serde(flatten)]
    pub body: EventBody,
}

/// The largest file text (before or after) a `tool/preview` event carries.
pub const PREVIEW_EVENT_BYTES: usize = 64 * 1024;

/// The three sets of "delta" events, side by side: each answers its own question, and they
/// differ on purpose (`provider/said` is live only, yet never hidden or skipped).
impl EventBody {
    /// Whether the event is live only: never stored (so never replayed, and no id): what
    /// streams (`llm/text`, `llm/reasoning`, `tool/output`, `tool/preview`) and what only a
    /// person may read (`provider/said`).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            EventBody::LlmText { .. }
                | EventBody::LlmReasoning { .. }
                | EventBody::ToolOutput { .. }
                | EventBody::ToolPreview { .. }
                | EventBody::ProviderSaid { .. }
        )
    }

    /// Whether the event is the model's words as they stream (`llm/text`, `llm/reasoning`):
    /// hidden while keel has the model write a summary, which the person does not read as an
    /// answer.
    pub fn is_model_delta(&self) -> bool {
        matches!(
            self,
            EventBody::LlmText { .. } | EventBody::LlmReasoning { .. }
        )
    }

    /// Whether a consumer with no room for the event may simply miss it and stay subscribed:
    /// a live view's extra (a command's output as it runs, a change about to be made) whose
    /// substance the result carries. Missing anything else means the consumer fell behind.
    pub fn is_live_extra(&self) -> bool {
        matches!(
            self,
            EventBody::ToolOutput { .. } | EventBody::ToolPreview { .. }
        )
    }
}

/// The most characters of a provider's message a `provider/said` event carries.
pub const PROVIDER_SAID_CHARS: usize = 300;

/// The longest tool output excerpt an event carries.
pub const OUTPUT_EXCERPT_CHARS: usize = 2000;

/// What a `tool/result` event carries of a (redacted) result: its start (with `…` when cut),
/// its end when the start does not reach it, and how many lines it has.
pub fn output_view(content: &str) -> (String, String, u64) {
    let mut start: String = content.chars().take(OUTPUT_EXCERPT_CHARS).collect();
    let cut = start.len() < content.len();
    let tail = if cut {
        let skip = content.chars().count().saturating_sub(OUTPUT_EXCERPT_CHARS);
        let end: String = content.chars().skip(skip).collect();
        start.push('…');
        end
    } else {
        String::new()
    };
    (start, tail, content.lines().count() as u64)
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// What started a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    User,
    ProtocolRecovery,
    FinalReadinessRecovery,
    /// `/compact [focus]` with no context-limit recovery pending: compaction only.
    Compaction,
    /// The recovery offered after a context-limit rejection: compact, then go on with the task.
    ContextRecovery,
}

/// How full the model's context is, in tokens (the provider's count after each response, an
/// estimate between responses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowUse {
    pub used: u64,
    pub window: u64,
}

impl WindowUse {
    /// Percent of the window used, rounded down (above 100 when over the window).
    pub fn percent(&self) -> u64 {
        (self.used.saturating_mul(100))
            .checked_div(self.window)
            .unwrap_or(0)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EventBody {
    #[serde(rename = "session/started")]
    SessionStarted {
        workspace: String,
        model: String,
        provider: String,
        resumed: bool,
    },
    #[serde(rename = "turn/started")]
    TurnStarted { input_kind: InputKind },
    #[serde(rename = "llm/request")]
    LlmRequest {
        attempt: u32,
        protocol: WireProtocol,
        model: String,
        message_count: usize,
        prefix_hash: String,
        /// The name of the account used (never its key).
        account: String,
    },
    #[serde(rename = "llm/retry")]
    LlmRetry {
        attempt: u32,
        max_retries: u32,
        kind: FailureKind,
        status: Option<u16>,
        delay_ms: u64,
        /// The host being retried (from the provider's `base_url`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
    },
    /// The provider's own words about a request it refused (its structured error message,
    /// never raw bytes): for a person only. Transient: never stored, never in the diagnostic,
    /// never sent to the model; dropped when it shares `ECHO_RUN` bytes with a secret;
    /// control characters escaped; at most `PROVIDER_SAID_CHARS` characters. For a retried
    /// failure, the last attempt's.
    #[serde(rename = "provider/said")]
    ProviderSaid {
        status: Option<u16>,
        message: String,
    },
    #[serde(rename = "llm/text")]
    LlmText { delta: String },
    #[serde(rename = "llm/reasoning")]
    LlmReasoning { delta: String },
    #[serde(rename = "llm/response")]
    LlmResponse {
        finish_reason: FinishReason,
        usage: Usage,
    },
    #[serde(rename = "tool/call")]
    ToolCall {
        call_id: String,
        name: String,
        arguments: String,
        /// What the call acts on as permission rules see it: the command, or the resolved
        /// path (relative to the workspace, absolute outside it). Absent for invalid calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
    },
    /// A call's tool starts running (its receipt is durably `started`). `read_only`: a command
    /// confined to reading — one of the read-only list run without a question, or any in
    /// read-only or plan mode (absent when false).
    #[serde(rename = "tool/started")]
    ToolStarted {
        call_id: String,
        name: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        read_only: bool,
    },
    /// Output of a running command as it arrives (redacted before it is sent), for surfaces
    /// that show it live. Transient like `llm/text`: never stored; the whole result is in
    /// `tool/result` and the history.
    #[serde(rename = "tool/output")]
    ToolOutput { call_id: String, delta: String },
    /// What a write or an edit allowed without a question is about to change (the text before,
    /// absent for a new file, and after; redacted; only for text files of at most
    /// `PREVIEW_EVENT_BYTES` each), for surfaces that show it as a diff. Transient: never stored.
    #[serde(rename = "tool/preview")]
    ToolPreview {
        call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<String>,
        after: String,
    },
    /// A call waits for the user's decision (a surface shows it on the call's card).
    #[serde(rename = "approval/requested")]
    ApprovalRequested {
        call_id: String,
        name: String,
        /// The exact command, or the resolved path.
        subject: String,
        /// The subject folded for a person (`approval_view`): what every surface shows.
        #[serde(default)]
        view: crate::ApprovalView,
        /// Running the command again outside the sandbox, after it failed inside: a surface
        /// says so, and offers no "always" (absent when false).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unconfined: bool,
        /// Why it is asked where the subject alone does not say (a read outside the
        /// workspace); absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// A subagent's call (the event's `session_id` is its child session): the agent that
        /// asks; absent for the session's own calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// What the subagent was started for (its `task` call's description).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    #[serde(rename = "tool/result")]
    ToolResult {
        call_id: String,
        name: String,
        state: ReceiptState,
        summary: String,
        /// The start of what the tool returned (redacted, at most `OUTPUT_EXCERPT_CHARS`
        /// characters), for surfaces that show it; the whole result is in the history.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        output: String,
        /// The end of what the tool returned, when `output` does not reach it (redacted, at
        /// most `OUTPUT_EXCERPT_CHARS` characters): what a terminal shows folded.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        tail: String,
        /// How many lines the whole result has.
        #[serde(default, skip_serializing_if = "is_zero")]
        lines: u64,
    },
    /// A provider-native web search in a committed response.
    #[serde(rename = "search/result")]
    SearchResult {
        query: String,
        /// `None` only for records written before the field existed (never inferred).
        sources_status: Option<crate::SourcesStatus>,
        sources: usize,
    },
    #[serde(rename = "account/rotated")]
    AccountRotated {
        provider: String,
        from: String,
        to: String,
        reason: FailureKind,
    },
    #[serde(rename = "turn/completed")]
    TurnCompleted {
        usage: Usage,
        cache_hit_ratio: f64,
        /// False when the turn ended with open plan items, right after a failed tool, or with an
        /// answer that was cut off or filtered; a `final_readiness_recovery` is then offered.
        #[serde(default = "ready_by_default")]
        ready: bool,
        /// Why the turn is not ready (absent when it is): open work, or an answer cut off at
        /// the output limit or filtered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_ready_reason: Option<String>,
        /// Context used / window after the turn, when the model's window is known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<WindowUse>,
        /// What the turn's tokens cost, where the model has a price (keel's table or the
        /// user's `[providers.X.price]`); absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<crate::Cost>,
    },
    #[serde(rename = "turn/failed")]
    TurnFailed {
        diagnostic: FailureDiagnostic,
        /// What the responses the turn received before it ended used (the provider bills
        /// them): absent when it received none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// What those tokens cost, where the model has a price.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<crate::Cost>,
    },
    #[serde(rename = "recovery/offered")]
    RecoveryOffered {
        recovery_id: String,
        /// `protocol_recovery` or `final_readiness_recovery`.
        action: InputKind,
    },
    #[serde(rename = "recovery/consumed")]
    RecoveryConsumed { recovery_id: String },
    #[serde(rename = "recovery/expired")]
    RecoveryExpired { recovery_id: String },
    /// The history was compacted into a new revision (the prefix cache breaks here).
    #[serde(rename = "context/compacted")]
    ContextCompacted {
        revision: u64,
        tokens_before: u64,
        tokens_after: u64,
        /// `threshold` (compact_at reached), `manual` (`/compact`) or `context_limit` (the
        /// recovery after a context-limit rejection).
        reason: String,
    },
    /// The canonical history was rewritten: every derived view must be rebuilt from it.
    #[serde(rename = "history/rewritten")]
    HistoryRewritten { revision: u64, reason: String },
    /// The request prefix changes from the next request on (`compaction`, `model_switched`…).
    #[serde(rename = "prefix/changed")]
    PrefixChanged { reason: String },
    /// Files and/or the conversation were put back as before `to_turn` (`revision`: the
    /// conversation's new history revision; `conflicts`: the paths left alone).
    #[serde(rename = "session/rewound")]
    SessionRewound {
        to_turn: u64,
        code: bool,
        conversation: bool,
        revision: Option<u64>,
        conflicts: Vec<String>,
    },
    /// keel could not snapshot the workspace on `side` (`before` or `after`) of the commands
    /// `call_ids`: a rewind cannot tell what they changed from what anyone else did.
    #[serde(rename = "snapshot/failed")]
    SnapshotFailed {
        side: String,
        call_ids: Vec<String>,
        reason: String,
    },
    /// keel's snapshot store of the workspace reached `checkpoint_max_bytes`: its oldest
    /// `brackets` were removed (a rewind past them says so).
    #[serde(rename = "snapshot/pruned")]
    SnapshotPruned {
        brackets: u64,
        bytes_before: u64,
        bytes_after: u64,
    },
    /// A value a project file asked for that was not applied: the workspace is not trusted
    /// (docs/security.md#repository-trust). Sent after `session/started`, one per value.
    #[serde(rename = "trust/ignored")]
    TrustIgnored(IgnoredSetting),
    /// A `task` call started its subagent in the child session `child_session_id` (the child's
    /// own events carry that session id). Sent on the parent's stream.
    #[serde(rename = "agent/started")]
    AgentStarted {
        call_id: String,
        child_session_id: String,
        agent: String,
        description: String,
    },
    /// A subagent ended: how (`state`), with what its requests used (`usage`, its whole run)
    /// and the cache-hit tokens of its first request (`cache_hit_first`: how much of the
    /// parent's prefix the provider's cache served it). Sent on the parent's stream.
    #[serde(rename = "agent/finished")]
    AgentFinished {
        call_id: String,
        child_session_id: String,
        agent: String,
        description: String,
        state: AgentEnd,
        /// The failure's kind when `state` is `failed`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<FailureKind>,
        rounds: u32,
        usage: Usage,
        cache_hit_first: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<crate::Cost>,
    },
    /// A background job started (`bash` with `run_in_background`): its id (`job-N`, per
    /// session), the call that started it, its command (redacted) and its pid.
    #[serde(rename = "job/started")]
    JobStarted {
        job: String,
        call_id: String,
        command: String,
        /// Its process (and process group) id on this machine, for a person or a script that
        /// watches it.
        pid: u32,
    },
    /// A background job ended: its exit code, or the signal that ended it (`job_kill`, the
    /// session's end, a load that found it left by a keel that died).
    #[serde(rename = "job/exited")]
    JobExited {
        job: String,
        call_id: String,
        command: String,
        exit_code: Option<i32>,
        signal: Option<i32>,
    },
    /// A hook ran (docs/hooks.md): its event, matcher and command (redacted), how it ended
    /// (`exit`: `None` when killed, timed out or never started) and what it decided.
    #[serde(rename = "hook/ran")]
    HookRan {
        event: String,
        matcher: Option<String>,
        command: String,
        exit: Option<i32>,
        duration_ms: u64,
        decision: String,
        /// What the hook says to the person (its `systemMessage`, or the reason it blocked a
        /// prompt), redacted and capped; never sent to the model by this event.
        message: Option<String>,
    },
}

/// How a subagent ended (`agent/finished`, the `task` result's footer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentEnd {
    /// It answered.
    Completed,
    /// A request failed (after its retries) or its turn stopped making progress.
    Failed,
    /// The person stopped the parent's turn.
    Cancelled,
    /// It reached `[agents] max_rounds` or `max_child_tokens`.
    BudgetExhausted,
}

impl AgentEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentEnd::Completed => "completed",
            AgentEnd::Failed => "failed",
            AgentEnd::Cancelled => "cancelled",
            AgentEnd::BudgetExhausted => "budget_exhausted",
        }
    }
}

/// A project-file value not applied because the workspace is not trusted. The file path and
/// the key come from outside (a directory name, a TOML key): surfaces show them escaped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IgnoredSetting {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// The dotted key, e.g. `providers.deepseek.base_url`.
    pub key: String,
    /// Why it was not applied, in keel's words.
    pub reason: String,
}

fn ready_by_default() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_contract_type_names() {
        let event = Event {
            id: None,
            session_id: "s1".into(),
            turn: Some(1),
            body: EventBody::LlmRetry {
                attempt: 2,
                max_retries: 5,
                kind: FailureKind::Server,
                status: Some(500),
                delay_ms: 512,
                host: Some("api.deepseek.com".into()),
            },
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "llm/retry");
        assert_eq!(json["session_id"], "s1");
        assert_eq!(json["turn"], 1);
        assert_eq!(json["kind"], "server");
        assert_eq!(json["status"], 500);
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);

        let failed = Event {
            id: None,
            session_id: "s1".into(),
            turn: Some(1),
            body: EventBody::TurnFailed {
                diagnostic: FailureDiagnostic::new(FailureKind::Quota, Some(402)),
                usage: None,
                cost: None,
            },
        };
        let json = serde_json::to_value(&failed).unwrap();
        assert_eq!(json["type"], "turn/failed");
        assert_eq!(json["diagnostic"]["kind"], "quota");
        assert_eq!(json["diagnostic"]["status"], 402);
        assert!(json["diagnostic"]["trace_id"].is_null());
        assert!(json.get("usage").is_none() && json.get("cost").is_none());
    }
}
