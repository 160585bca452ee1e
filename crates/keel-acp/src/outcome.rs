//! How a prompt ends for the editor: its `session/prompt` answer, and the recovery it offers.
//!
//! Invariants:
//! - A turn that completed answers with a stop reason; its readiness goes in the answer's
//!   `_meta` (`keel/readiness`), never into the agent's message text.
//! - A provider failure answers with a JSON-RPC error: `message` is keel's plain-words
//!   diagnostic (never the provider's text), `data` is `{kind, status, trace_id, recoveryId?,
//!   action?}`. The round limit is not a failure of the provider: it stops with
//!   `max_turn_requests`.
//! - An offered recovery is also put on its command in the next `available_commands_update`
//!   (`_meta` `keel/recoveryId`, `keel/action`, `keel/offer`), and taken off again when it is
//!   used or expires.

use crate::rpc::{RpcError, code};
use keel_agent::{Readiness, TurnOutcome};
use keel_types::{EventBody, FailureKind, InputKind};
use serde_json::{Value, json};

/// A recovery the turn offered, as the editor is told it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Offered {
    /// The offer, when one was made and is still open.
    pub offer: Option<(String, InputKind)>,
    /// Why the turn is not ready, from its `turn/completed`.
    pub not_ready_reason: Option<String>,
}

impl Offered {
    /// Note what `body` says about an offer; whether one was made, used or expired.
    pub fn see(&mut self, body: &EventBody) -> bool {
        match body {
            EventBody::RecoveryOffered {
                recovery_id,
                action,
            } => {
                self.offer = Some((recovery_id.clone(), *action));
                true
            }
            // Offered by an earlier prompt, perhaps: the commands go out without it anyway.
            EventBody::RecoveryConsumed { .. } | EventBody::RecoveryExpired { .. } => {
                self.offer = None;
                true
            }
            EventBody::TurnCompleted {
                not_ready_reason, ..
            } => {
                self.not_ready_reason.clone_from(not_ready_reason);
                false
            }
            _ => false,
        }
    }

    /// What the offer says to a person, in plain words.
    fn words(&self, action: InputKind) -> String {
        match action {
            InputKind::FinalReadinessRecovery => match &self.not_ready_reason {
                Some(reason) => format!("Not ready: {reason} — continue checks?"),
                None => "The turn ended with open work — continue checks?".to_string(),
            },
            InputKind::ContextRecovery | InputKind::Compaction => {
                "The conversation no longer fits the model's context window — compact it and go \
                 on?"
                .to_string()
            }
            InputKind::ProtocolRecovery | InputKind::User => {
                "The provider rejected the replay of the tool history — continue from valid \
                 history?"
                    .to_string()
            }
        }
    }

    /// The offer's fields for a `_meta` or an error's `data`.
    fn fields(&self) -> Option<(String, &'static str, String)> {
        let (id, action) = self.offer.as_ref()?;
        Some((id.clone(), action_name(*action), self.words(*action)))
    }

    /// `commands` (an `availableCommands` list) with the open offer on the command that runs it.
    pub fn on_commands(&self, mut commands: Vec<Value>) -> Vec<Value> {
        let Some((id, action)) = &self.offer else {
            return commands;
        };
        let name = match action {
            InputKind::FinalReadinessRecovery => "continue-checks",
            InputKind::ContextRecovery | InputKind::Compaction => "compact",
            InputKind::ProtocolRecovery | InputKind::User => "recover-context",
        };
        for command in &mut commands {
            if command.get("name").and_then(Value::as_str) == Some(name) {
                command["_meta"] = json!({
                    "keel/recoveryId": id,
                    "keel/action": action_name(*action),
                    "keel/offer": self.words(*action),
                });
            }
        }
        commands
    }

    /// The `session/prompt` answer for `outcome`.
    pub fn answer(&self, outcome: TurnOutcome) -> Result<Value, RpcError> {
        match outcome {
            TurnOutcome::Completed { usage, readiness } => {
                let reason = match &readiness {
                    Readiness::CutOff(why) if why.contains("output limit") => "max_tokens",
                    Readiness::CutOff(_) => "refusal",
                    Readiness::Ready | Readiness::OpenWork(_) => "end_turn",
                };
                let mut state = json!({"ready": readiness.reason().is_none()});
                if let Some(why) = readiness.reason() {
                    state["reason"] = json!(why);
                }
                if let Some((id, action, offer)) = self.fields() {
                    state["recoveryId"] = json!(id);
                    state["action"] = json!(action);
                    state["offer"] = json!(offer);
                }
                Ok(json!({"stopReason": reason,
                          "_meta": {"keel/usage": usage, "keel/readiness": state}}))
            }
            TurnOutcome::Cancelled => Ok(json!({"stopReason": "cancelled"})),
            TurnOutcome::Failed { diagnostic, .. }
                if diagnostic.kind == FailureKind::Limit
                    && diagnostic.message.contains("max_rounds") =>
            {
                Ok(json!({"stopReason": "max_turn_requests",
                          "_meta": {"keel/failed": diagnostic}}))
            }
            TurnOutcome::Failed {
                diagnostic,
                recovery_id,
            } => {
                let mut data = json!({
                    "kind": diagnostic.kind,
                    "status": diagnostic.status,
                    "trace_id": diagnostic.trace_id,
                });
                let offered = self
                    .fields()
                    .filter(|(id, ..)| Some(id) == recovery_id.as_ref());
                let mut message = diagnostic.message.clone();
                if let Some((id, action, offer)) = offered {
                    data["recoveryId"] = json!(id);
                    data["action"] = json!(action);
                    message = format!("{message}. {offer}");
                } else if let Some(id) = recovery_id {
                    data["recoveryId"] = json!(id);
                }
                Err(RpcError::new(code::TURN_FAILED, message).with_data(data))
            }
        }
    }
}

/// The `keel/action` that runs an offer of `action`.
fn action_name(action: InputKind) -> &'static str {
    match action {
        InputKind::FinalReadinessRecovery => "final_readiness_recovery",
        InputKind::ContextRecovery | InputKind::Compaction => "context_recovery",
        InputKind::ProtocolRecovery | InputKind::User => "protocol_recovery",
    }
}
