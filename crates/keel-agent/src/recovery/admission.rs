//! Recording incidents and admitting explicit recoveries.
//!
//! Invariants:
//! - An incident is recorded only for `upstream_reason_missing` or `reasoning_replay`, only when
//!   the history since the last repair replays a tool round (a different projection could change
//!   the request); never for credentials, quota, parameter errors or a spent incident. A
//!   context-limit (`limit`) rejection records a compaction offer instead, only when compaction
//!   can make the request fit.
//! - Admission re-checks everything (running turn, id, session, state, scope, fingerprint,
//!   receipts) and binds the id before anything is queued.
//! - Order: prepare the request → persist `consumed` → send. If the persist fails, nothing is
//!   sent; the id is spent in memory before the write, so an uncertain write counts as consumed.
//! - Nothing here ever sends a request or runs a turn: admission returns the turn to run and
//!   the controller runs it (data flows one way: controller → admission, never back).

use super::readiness::continue_prompt;
use super::record::{RECORD_VERSION, RecordState, RecoveryRecord, StoredRecord};
use super::refusal::RecoveryRefusal;
use super::stored::{load_records, save};
use super::{
    anchor, apply_repair, boundary_of, evidence, fingerprint, projection_could_change,
    recovery_prompt, scope,
};
use crate::agent::Agent;
use crate::agent_state::AgentState;
use crate::error::AgentError;
use crate::turn_run::TurnInput;
use keel_types::kill_point::kill_point;
use keel_types::{EventBody, FailureDiagnostic, FailureKind, InputKind, Item};

fn current_scope(agent: &Agent) -> String {
    settings_scope(&agent.session.id, &agent.settings)
}

/// The scope of `session` under `settings`: its provider, endpoint and model.
pub(crate) fn settings_scope(session: &str, settings: &crate::settings::AgentSettings) -> String {
    let profile = &settings.profile;
    scope(session, &profile.name, &profile.endpoint(), &settings.model)
}

/// The repair in force after a restart: the prefix of the latest consumed, projected record.
pub(crate) fn repair_in_force(records: &[StoredRecord], history: &[Item]) -> Option<usize> {
    records.iter().rev().find_map(|stored| match stored {
        StoredRecord::Known(record)
            if record.state == RecordState::Consumed && record.projected =>
        {
            boundary_of(history, &record.fingerprint)
        }
        StoredRecord::Known(_) | StoredRecord::Unrecoverable { .. } => None,
    })
}

/// The smallest request size a compaction offer recorded as rejected (see `ContextMeter`) by
/// the provider, endpoint and model of `scope`: another model's window says nothing of this
/// one's.
pub(crate) fn rejected_tokens(records: &[StoredRecord], scope: &str) -> Option<u64> {
    records
        .iter()
        .filter_map(|stored| match stored {
            StoredRecord::Known(record) if record.scope == scope => record.rejected_tokens,
            StoredRecord::Known(_) | StoredRecord::Unrecoverable { .. } => None,
        })
        .min()
}

/// After a failed request: record an incident if a different projection could change it.
/// `sent_messages` is the provider-visible message count of the request that failed.
pub(crate) fn record_incident(
    agent: &Agent,
    state: &AgentState,
    turn: u64,
    diagnostic: &FailureDiagnostic,
    sent_messages: Option<usize>,
) -> Result<Option<String>, AgentError> {
    match diagnostic.kind {
        FailureKind::UpstreamReasonMissing | FailureKind::ReasoningReplay => {}
        FailureKind::Cancelled
        | FailureKind::Auth
        | FailureKind::Quota
        | FailureKind::Limit
        | FailureKind::RateLimit
        | FailureKind::Server
        | FailureKind::Timeout
        | FailureKind::Transport
        | FailureKind::EmptyResponse
        | FailureKind::StreamCorrupt
        | FailureKind::InvalidRequest
        | FailureKind::Hook
        | FailureKind::Unknown => return Ok(None),
    }
    let since_repair = &state.history[state.repair.unwrap_or(0).min(state.history.len())..];
    if !projection_could_change(since_repair) {
        // The same failing prefix (or nothing a projection could change): no new budget.
        return Ok(None);
    }
    let receipts = agent.services.store.receipts(&agent.session.id)?;
    let prefix = sent_messages.unwrap_or(state.history.len()) as u64;
    let record = pending_record(agent, state, turn, &receipts, prefix, None);
    store_new(agent, record)
}

fn refuse(refusal: RecoveryRefusal) -> AgentError {
    AgentError::RecoveryRefused(refusal)
}

/// Which explicit action a record offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    ProtocolRecovery,
    FinalReadiness,
    ContextRecovery,
}

impl Action {
    fn of(record: &RecoveryRecord) -> Action {
        match record.action {
            Some(InputKind::FinalReadinessRecovery) => Action::FinalReadiness,
            Some(InputKind::ContextRecovery) => Action::ContextRecovery,
            Some(InputKind::ProtocolRecovery | InputKind::User | InputKind::Compaction) | None => {
                Action::ProtocolRecovery
            }
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Action::ProtocolRecovery => "recovery",
            Action::FinalReadiness => "continue-checks offer",
            Action::ContextRecovery => "compaction offer",
        }
    }

    fn input_kind(self) -> InputKind {
        match self {
            Action::ProtocolRecovery => InputKind::ProtocolRecovery,
            Action::FinalReadiness => InputKind::FinalReadinessRecovery,
            Action::ContextRecovery => InputKind::ContextRecovery,
        }
    }
}

/// Bind the id now: a shortcut without an id acts on exactly the offer pending now.
fn bind(
    records: &[StoredRecord],
    id: Option<&str>,
    action: Action,
    session: &str,
) -> Result<StoredRecord, AgentError> {
    if let Some(id) = id {
        return records
            .iter()
            .find(|r| r.id() == id)
            .cloned()
            .ok_or_else(|| {
                refuse(RecoveryRefusal::NoSuchRecord {
                    id: id.to_string(),
                    session: session.to_string(),
                })
            });
    }
    let pending = records.iter().rev().find(|r| {
        matches!(r, StoredRecord::Known(k) if k.state == RecordState::Pending && Action::of(k) == action)
    });
    if let Some(found) = pending {
        return Ok(found.clone());
    }
    let latest = match records.last() {
        Some(StoredRecord::Known(record)) => {
            Some((record.id.clone(), format!("is {}", record.state.as_str())))
        }
        Some(StoredRecord::Unrecoverable { id, .. }) => {
            Some((id.clone(), "cannot be read by this keel".to_string()))
        }
        None => None,
    };
    Err(refuse(RecoveryRefusal::NonePending {
        noun: action.noun(),
        session: session.to_string(),
        latest,
    }))
}

/// Every admission check, with the id bound first. Returns the record to consume.
fn admit(
    agent: &Agent,
    state: &AgentState,
    id: Option<&str>,
    action: Action,
) -> Result<(RecoveryRecord, Vec<keel_types::ToolReceipt>), AgentError> {
    let records = load_records(agent)?;
    let target = bind(&records, id, action, &agent.session.id)?;
    let mut record = match target {
        StoredRecord::Unrecoverable { id, reason, .. } => {
            return Err(refuse(RecoveryRefusal::Unreadable { id, reason }));
        }
        StoredRecord::Known(record) => record,
    };
    if Action::of(&record) != action {
        return Err(refuse(RecoveryRefusal::WrongAction {
            id: record.id,
            noun: action.noun(),
        }));
    }
    match record.state {
        RecordState::Pending => {}
        RecordState::Consumed => {
            return Err(refuse(RecoveryRefusal::AlreadyUsed { id: record.id }));
        }
        RecordState::Expired => {
            return Err(refuse(RecoveryRefusal::Expired { id: record.id }));
        }
    }
    if state.spent.contains(&record.id) {
        return Err(refuse(RecoveryRefusal::AlreadyUsed { id: record.id }));
    }
    if record.scope != current_scope(agent) {
        return Err(refuse(RecoveryRefusal::OtherScope { id: record.id }));
    }
    if boundary_of(&state.history, &record.fingerprint) != Some(state.history.len()) {
        return Err(refuse(RecoveryRefusal::HistoryChanged { id: record.id }));
    }
    let receipts = agent.services.store.receipts(&agent.session.id)?;
    if evidence(&receipts) != record.evidence {
        record.state = RecordState::Expired;
        save(agent, &record)?;
        agent.emit(
            None,
            EventBody::RecoveryExpired {
                recovery_id: record.id.clone(),
            },
        );
        return Err(refuse(RecoveryRefusal::ReceiptsChanged { id: record.id }));
    }
    Ok((record, receipts))
}

/// Whether consuming a record puts the fault projection in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Projection {
    Repaired,
    Unchanged,
}

/// Persist `consumed` (spent in memory first); an error means nothing may be sent.
fn consume(
    agent: &Agent,
    state: &mut AgentState,
    mut record: RecoveryRecord,
    projection: Projection,
) -> Result<(), AgentError> {
    state.spent.insert(record.id.clone());
    record.state = RecordState::Consumed;
    record.projected = projection == Projection::Repaired;
    kill_point("before_recovery_consumed");
    if let Err(error) = save(agent, &record) {
        return Err(refuse(RecoveryRefusal::NotPersisted {
            id: record.id,
            reason: error.to_string(),
        }));
    }
    kill_point("after_recovery_consumed");
    agent.emit(
        None,
        EventBody::RecoveryConsumed {
            recovery_id: record.id,
        },
    );
    Ok(())
}

/// The request keel would send for `history` (system prompt and tools included).
fn prepare_request(
    agent: &Agent,
    history: &[Item],
    mcp_tools: &[keel_types::ToolSpec],
) -> Result<keel_llm::ProjectedRequest, AgentError> {
    agent
        .project(history, mcp_tools)
        .map_err(|error| refuse(RecoveryRefusal::CannotPrepare(error.to_string())))
}

/// `/recover-context [id] [guidance]`: admit, prepare, consume. Returns the turn the
/// controller runs next; the fault projection is in force from now on.
pub(crate) fn admit_recovery(
    agent: &Agent,
    state: &mut AgentState,
    id: Option<&str>,
    guidance: Option<&str>,
) -> Result<TurnInput, AgentError> {
    let (record, receipts) = admit(agent, state, id, Action::ProtocolRecovery)?;
    // Prepare the request before anything is persisted.
    let boundary = state.history.len();
    let prompt = recovery_prompt(guidance);
    let mut prepared = apply_repair(&state.history, boundary, &receipts);
    prepared.push(Item::User {
        text: prompt.clone(),
    });
    prepare_request(agent, &prepared, &state.mcp_tools)?;
    consume(agent, state, record, Projection::Repaired)?;
    state.repair = Some(boundary);
    Ok(TurnInput {
        text: prompt,
        kind: InputKind::ProtocolRecovery,
        focus: None,
    })
}

/// The "continue checks" action offered by final readiness: admit and consume; returns the
/// turn the controller runs next.
pub(crate) fn admit_readiness(
    agent: &Agent,
    state: &mut AgentState,
    id: Option<&str>,
) -> Result<TurnInput, AgentError> {
    let (record, _) = admit(agent, state, id, Action::FinalReadiness)?;
    let prompt = continue_prompt(
        record
            .reason
            .as_deref()
            .unwrap_or("the last turn was not ready"),
    );
    consume(agent, state, record, Projection::Unchanged)?;
    Ok(TurnInput {
        text: prompt,
        kind: InputKind::FinalReadinessRecovery,
        focus: None,
    })
}

/// What the model is told after the compaction recovery: go on with the task.
pub const CONTEXT_RECOVERY_PROMPT: &str = "The request before this one was larger than the model's context window, so keel compacted the conversation: the summary above stands for it. Continue the task from there. Do not repeat completed actions or actions with unknown outcomes; inspect unknown effects with permitted read-only tools first.";

/// `/compact [focus]`: the recovery after a context-limit rejection when one is pending (or
/// named by id) — admitted and consumed like any recovery — else a compaction by hand, which
/// is refused now when there is nothing it could compact.
pub(crate) fn admit_compaction(
    agent: &Agent,
    state: &mut AgentState,
    id: Option<&str>,
    focus: Option<&str>,
) -> Result<TurnInput, AgentError> {
    let focus = focus.map(str::to_string);
    let pending_offer = load_records(agent)?.iter().any(|stored| {
        matches!(stored, StoredRecord::Known(record)
            if record.state == RecordState::Pending && Action::of(record) == Action::ContextRecovery)
    });
    if id.is_some() || pending_offer {
        let (record, _) = admit(agent, state, id, Action::ContextRecovery)?;
        crate::compaction::plan(agent, state)
            .map_err(|why| refuse(RecoveryRefusal::CannotPrepare(why.to_string())))?;
        consume(agent, state, record, Projection::Unchanged)?;
        return Ok(TurnInput {
            text: CONTEXT_RECOVERY_PROMPT.to_string(),
            kind: InputKind::ContextRecovery,
            focus,
        });
    }
    crate::compaction::plan(agent, state)
        .map_err(|why| AgentError::CannotCompact(why.to_string()))?;
    Ok(TurnInput {
        text: String::new(),
        kind: InputKind::Compaction,
        focus,
    })
}

/// A request was rejected as larger than the window: offer the compaction recovery when
/// compaction can make it fit (returns the record id), else say why not.
pub(crate) fn record_context_incident(
    agent: &Agent,
    state: &AgentState,
    turn: u64,
    rejected_tokens: u64,
) -> Result<Result<String, crate::compaction::CannotCompact>, AgentError> {
    if let Err(why) = crate::compaction::plan(agent, state) {
        return Ok(Err(why));
    }
    let receipts = agent.services.store.receipts(&agent.session.id)?;
    let mut record = pending_record(
        agent,
        state,
        turn,
        &receipts,
        state.history.len() as u64,
        None,
    );
    record.action = Some(InputKind::ContextRecovery);
    record.rejected_tokens = Some(rejected_tokens);
    save(agent, &record)?;
    Ok(Ok(record.id))
}

/// A turn that ended not ready: offer "continue checks" (same record, same admission).
pub(crate) fn record_readiness(
    agent: &Agent,
    state: &AgentState,
    turn: u64,
    reason: &str,
) -> Result<Option<String>, AgentError> {
    let receipts = agent.services.store.receipts(&agent.session.id)?;
    let prefix = state.history.len() as u64;
    let record = pending_record(agent, state, turn, &receipts, prefix, Some(reason));
    store_new(agent, record)
}

/// A new pending record for the current history; `readiness` carries the not-ready reason.
fn pending_record(
    agent: &Agent,
    state: &AgentState,
    turn: u64,
    receipts: &[keel_types::ToolReceipt],
    prefix: u64,
    readiness: Option<&str>,
) -> RecoveryRecord {
    RecoveryRecord {
        version: RECORD_VERSION,
        id: super::new_record_id(),
        state: RecordState::Pending,
        scope: current_scope(agent),
        fingerprint: fingerprint(&state.history),
        prefix: prefix.max(1),
        count: 1,
        anchor: anchor(&state.history),
        run: turn,
        evidence: evidence(receipts),
        projected: false,
        action: readiness.map(|_| InputKind::FinalReadinessRecovery),
        reason: readiness.map(str::to_string),
        rejected_tokens: None,
        unknown: Default::default(),
    }
}

fn store_new(agent: &Agent, record: RecoveryRecord) -> Result<Option<String>, AgentError> {
    save(agent, &record)?;
    Ok(Some(record.id))
}

/// The pending record a front end may offer, if no turn is running.
pub(crate) fn pending(agent: &Agent) -> Option<PendingAction> {
    let _running = agent.state.try_lock().ok()?;
    let records = load_records(agent).ok()?;
    records.into_iter().rev().find_map(|stored| match stored {
        StoredRecord::Known(record) if record.state == RecordState::Pending => {
            Some(PendingAction {
                action: Action::of(&record).input_kind(),
                recovery_id: record.id,
            })
        }
        StoredRecord::Known(_) | StoredRecord::Unrecoverable { .. } => None,
    })
}

/// The recovery action a surface may offer now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingAction {
    pub recovery_id: String,
    /// `ProtocolRecovery` or `FinalReadinessRecovery`.
    pub action: keel_types::InputKind,
}
