//! The turn engine: project → attempt → commit → validate → write receipts ahead → run tools
//! → commit results → repeat until the model stops.
//!
//! Invariants:
//! - The assistant message and the `pending` receipts of its calls are committed in one
//!   transaction before any tool starts; calls present with `finish_reason: stop` still run.
//! - A reply that arrives after its turn was cancelled is never committed.
//! - Every round's request is built from the committed history only (nothing provisional),
//!   through the session's provider view (`Agent::provider_view`), and is projected
//!   once: the failure path sees the very request that was sent.
//! - A turn ends at `max_rounds`, or earlier when its tool rounds stop making progress
//!   (`progress::ProgressGuard`).
//! - A request whose estimate reaches `compact_at` is not sent: the history is compacted
//!   first (once per round), then the request is projected again from the new revision.
//! - A context-limit rejection offers the compaction recovery only when compaction can make
//!   the request fit; otherwise the diagnostic says why nothing is offered.

use crate::agent::Agent;
use crate::agent_state::AgentState;
use crate::call::digest;
use crate::compaction::{self, Compaction};
use crate::error::AgentError;
use crate::model_request::{Deltas, Reply, send_items};
use crate::progress::ProgressGuard;
use crate::recovery;
use crate::recovery::readiness::Readiness;
use crate::tool_results::ToolRound;
use crate::tools_round::{RoundEnd, run_tools};
use crate::turn_run::{TurnInput, TurnOutcome, TurnRun};
use keel_llm::Completion;
use keel_types::kill_point::kill_point;
use keel_types::{
    AssistantPart, EventBody, FailureDiagnostic, FailureKind, InputKind, Item, ReceiptState,
    ToolReceipt,
};
use std::sync::Arc;

/// Run one turn; `child_turn` is how the subagents its `task` calls start run theirs.
pub async fn run_turn(
    agent: &Arc<Agent>,
    state: &mut AgentState,
    input: TurnInput,
    generation: u64,
    child_turn: crate::turn_run::ChildTurn,
) -> Result<TurnOutcome, AgentError> {
    let outcome = run_turn_inner(agent, state, input, generation, child_turn).await;
    // A turn ends with its last snapshot taken: a rewind right after it sees the bracket closed.
    let turn = state.last_turn;
    if let Some(failed) = state.bracket.settle().await {
        agent.emit(Some(turn), failed);
    }
    let budget = agent.settings.checkpoint_max_bytes;
    if let Some(said) = state.bracket.keep_in_budget(budget).await {
        agent.emit(Some(turn), said);
    }
    outcome
}

async fn run_turn_inner(
    agent: &Arc<Agent>,
    state: &mut AgentState,
    input: TurnInput,
    generation: u64,
    child_turn: crate::turn_run::ChildTurn,
) -> Result<TurnOutcome, AgentError> {
    let turn = state.last_turn + 1;
    state.last_turn = turn;
    let mut run = TurnRun::start(agent.clone(), turn, generation, child_turn);
    let input_kind = input.kind;
    open(&run, input_kind)?;
    if !take_mcp_tools(&mut run, state).await {
        return Ok(end_cancelled(&run));
    }
    check_tools(&run, state)?;
    if let Some(reason) = compaction_of(input_kind) {
        match compaction::compact(&mut run, state, reason, input.focus.as_deref()).await? {
            Compaction::Done { usage: spent, .. } => run.charge(&spent),
            Compaction::Impossible(why) => {
                let diagnostic =
                    FailureDiagnostic::with_message(FailureKind::Limit, None, why.to_string());
                return Ok(end_failed(&run, diagnostic));
            }
            Compaction::Failed(diagnostic) => return Ok(end_failed(&run, diagnostic)),
            Compaction::Cancelled => return Ok(end_cancelled(&run)),
        }
        if input_kind == InputKind::Compaction {
            let readiness = Readiness::of(
                keel_types::FinishReason::Stop,
                &state.history,
                // The history's last round is an earlier turn's: its receipts decide.
                &denied_calls(agent, None),
            );
            return complete(&run, state, readiness, false);
        }
    }
    // A session's first prompt: the environment says how the repository stands (keel's git,
    // on its own snapshot store; the block is written once, so this runs once).
    if let (Some(block), Some(snapshots)) = (&mut state.pending_context, agent.snapshots.clone())
        && let Ok(Some(line)) = tokio::task::spawn_blocking(move || snapshots.status_line()).await
    {
        block.text = crate::instructions::with_environment_line(&block.text, &line);
    }
    let mut text = input.text;
    if input_kind == InputKind::User && agent.role.is_none() {
        let hooked = tokio::select! {
            biased;
            () = run.cancelled() => return Ok(end_cancelled(&run)),
            hooked = crate::hook_points::user_prompt_submit(agent, turn, &state.history, &text) => hooked,
        };
        if let Some(hooked) = hooked {
            // The prompt is not sent: the person hears why (`hook/ran`, the failure).
            if let Some(reason) = hooked.block.clone().or(hooked.stop.clone()) {
                let diagnostic = FailureDiagnostic::with_message(
                    FailureKind::Hook,
                    None,
                    format!(
                        "a UserPromptSubmit hook blocked the prompt, which was not sent: {reason}"
                    ),
                );
                return Ok(end_failed(&run, diagnostic));
            }
            if let Some(context) = hooked.context_text() {
                text = format!("{text}\n\n{context}");
            }
        }
    }
    commit_input(&run, state, input_kind, text)?;
    let mut progress = ProgressGuard::default();
    let mut stop_continuations = 0;
    let mut ran_tools = false;
    // A compaction that leaves the history at the threshold again would run every round:
    // after one, this turn stops compacting by threshold.
    let mut compaction_futile = false;
    for _round in 0..agent.settings.max_rounds {
        if let Some(diagnostic) = budget_spent(&run) {
            state.budget_stop = Some(diagnostic.message.clone());
            return Ok(end_failed(&run, diagnostic));
        }
        let mut reply = request(&mut run, state, !compaction_futile).await?;
        if let Reply::CompactionDue = reply {
            match compaction::compact(&mut run, state, compaction::Reason::Threshold, None).await? {
                Compaction::Done {
                    usage: spent,
                    tokens_after,
                } => {
                    run.charge(&spent);
                    compaction_futile = compaction::threshold(agent, state)
                        .is_some_and(|threshold| tokens_after >= threshold);
                }
                // A summary that freed nothing would free nothing next round either.
                Compaction::Impossible(compaction::CannotCompact::NoGain { .. }) => {
                    compaction_futile = true;
                }
                // Sent as it is (the provider may still take it); the next round plans again.
                Compaction::Impossible(_) => {}
                Compaction::Failed(diagnostic) => return Ok(end_failed(&run, diagnostic)),
                Compaction::Cancelled => return Ok(end_cancelled(&run)),
            }
            reply = request(&mut run, state, false).await?;
        }
        let completion = match reply {
            Reply::Cancelled => {
                state.interrupted = true;
                return Ok(end_cancelled(&run));
            }
            Reply::Failed {
                diagnostic,
                sent_messages,
                sent_bytes,
            } => return fail_request(&run, state, diagnostic, sent_messages, sent_bytes),
            Reply::Completed {
                completion,
                sent_bytes,
            } => {
                state.meter.observe(sent_bytes, &completion.usage);
                completion
            }
            // Not produced: the request after a compaction is sent without the check. Were it
            // ever, failing the turn says the truth and commits nothing.
            Reply::CompactionDue => {
                let diagnostic = FailureDiagnostic::with_message(
                    FailureKind::Limit,
                    None,
                    "the request still reached compact_at after compacting".to_string(),
                );
                return Ok(end_failed(&run, diagnostic));
            }
        };
        // Billed by the provider whether or not the turn keeps it.
        run.charge(&completion.usage);
        if !run.is_current() {
            // A late reply of a cancelled turn: dropped, never committed.
            return Ok(end_cancelled(&run));
        }
        let finish_reason = completion.finish_reason;
        let round = commit_reply(&run, state, completion)?;
        if round.calls.is_empty() {
            match stop_hooks(&mut run, state, stop_continuations).await? {
                StopHooks::Stop => {}
                StopHooks::Continue => {
                    stop_continuations += 1;
                    continue;
                }
                StopHooks::Ended(outcome) => return Ok(outcome),
            }
            // A subagent answers its parent, who is offered nothing.
            let may_offer = agent.role.is_none() && (input_kind == InputKind::User || ran_tools);
            let denied = denied_calls(agent, Some(run.turn));
            let readiness = match &state.held_answer {
                Some((_, answer)) => {
                    let mut answered = state.history.clone();
                    answered.push(answer.clone());
                    Readiness::of(finish_reason, &answered, &denied)
                }
                None => Readiness::of(finish_reason, &state.history, &denied),
            };
            return complete(&run, state, readiness, may_offer);
        }
        match run_tools(&mut run, state, round).await? {
            RoundEnd::Continue => ran_tools = true,
            RoundEnd::Cancelled => return Ok(end_cancelled(&run)),
            // The plan is the answer: nothing is left open.
            RoundEnd::PlanShown => return complete(&run, state, Readiness::Ready, false),
        }
        if let Some(diagnostic) = progress.observe(&state.history) {
            return Ok(end_failed(&run, diagnostic));
        }
    }
    let diagnostic = FailureDiagnostic::with_message(
        FailureKind::Limit,
        None,
        format!(
            "the turn stopped after {} tool rounds (max_rounds); ask keel to continue",
            agent.settings.max_rounds
        ),
    );
    // A subagent's parent hears of its budget in its own words.
    state.budget_stop = Some(format!(
        "it used all {} rounds a subagent may take ([agents] max_rounds)",
        agent.settings.max_rounds
    ));
    Ok(end_failed(&run, diagnostic))
}

/// What a turn's `Stop` hooks (`SubagentStop` for a subagent) said as the model answered.
enum StopHooks {
    Stop,
    /// Asked to go on: the reason is committed as a user item, the loop takes another round.
    Continue,
    Ended(TurnOutcome),
}

/// Run the stop hooks; a block is a continuation, at most `MAX_STOP_CONTINUATIONS` a turn (the
/// next one ends the turn, failed with kind `hook`).
async fn stop_hooks(
    run: &mut TurnRun,
    state: &mut AgentState,
    continuations: u32,
) -> Result<StopHooks, AgentError> {
    let agent = run.agent.clone();
    let turn = run.turn;
    let hooked = tokio::select! {
        biased;
        () = run.cancelled() => return Ok(StopHooks::Ended(end_cancelled(run))),
        hooked = crate::hook_points::stop(&agent, turn, &state.history, continuations > 0) => hooked,
    };
    let Some(reason) = hooked.and_then(|hooked| hooked.block) else {
        return Ok(StopHooks::Stop);
    };
    if continuations >= crate::hook_points::MAX_STOP_CONTINUATIONS {
        let diagnostic = FailureDiagnostic::with_message(
            FailureKind::Hook,
            None,
            format!(
                "a Stop hook kept the turn going {continuations} times and asked again; keel \
                 stopped it (at most {} continuations a turn): {reason}",
                crate::hook_points::MAX_STOP_CONTINUATIONS
            ),
        );
        return Ok(StopHooks::Ended(end_failed(run, diagnostic)));
    }
    let item = Item::User {
        text: format!("[keel: a Stop hook asks you to go on: {reason}]"),
    };
    agent
        .services
        .store
        .append_items(&agent.session.id, run.turn, std::slice::from_ref(&item))?;
    state.history.push(item);
    Ok(StopHooks::Continue)
}

/// At the turn boundary: the MCP tools this turn offers. The session's first request waits
/// for servers still in their first start (at most `first_wait` after their launch; a cancel
/// ends the wait and the turn: `false`). A server that came up late or said its list changed
/// changes the request prefix here, never mid-turn, and the break is named.
async fn take_mcp_tools(run: &mut TurnRun, state: &mut AgentState) -> bool {
    let hub = run.agent.services.surface.mcp.clone();
    tokio::select! {
        () = hub.first_start() => {}
        () = run.cancelled() => return false,
    }
    hub.refresh().await;
    let now = hub.specs();
    let opening = std::mem::take(&mut state.mcp_opening);
    if now != state.mcp_tools {
        state.mcp_tools = now;
        if !opening {
            run.emit(EventBody::PrefixChanged {
                reason: "mcp_tools_changed".into(),
            });
        }
    }
    true
}

/// Once per agent, before its first request: the built-in tool specs against the ones the
/// session's requests last carried. A keel that offers other tools (an upgrade added one)
/// changes the request prefix of a stored session: the break is named `keel_upgraded`. A new
/// session, or one a keel before the digest made, only records it.
fn check_tools(run: &TurnRun, state: &mut AgentState) -> Result<(), AgentError> {
    if std::mem::replace(&mut state.tools_checked, true) {
        return Ok(());
    }
    use sha2::Digest;
    let agent = &run.agent;
    let specs = serde_json::to_vec(&agent.services.registry.specs()).unwrap_or_default();
    let digest: String = sha2::Sha256::digest(&specs)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let store = &agent.services.store;
    let stored = store.tools_digest(&agent.session.id)?;
    if stored.as_deref() != Some(digest.as_str()) {
        if stored.is_some() {
            run.emit(EventBody::PrefixChanged {
                reason: "keel_upgraded".into(),
            });
        }
        store.set_tools_digest(&agent.session.id, &digest)?;
    }
    Ok(())
}

/// A subagent that used its token budget (`[agents] max_child_tokens`) sends no more requests:
/// the failure that ends its turn.
fn budget_spent(run: &TurnRun) -> Option<FailureDiagnostic> {
    let limit = run.agent.role.as_ref()?.max_tokens?;
    let used = run.spent.usage.input + run.spent.usage.output;
    (used >= limit).then(|| {
        FailureDiagnostic::with_message(
            FailureKind::Limit,
            None,
            format!("the subagent used {used} tokens, its budget is {limit} (max_child_tokens)"),
        )
    })
}

/// The compaction a turn of this kind starts with.
fn compaction_of(kind: InputKind) -> Option<compaction::Reason> {
    match kind {
        InputKind::Compaction => Some(compaction::Reason::Manual),
        InputKind::ContextRecovery => Some(compaction::Reason::ContextLimit),
        InputKind::User | InputKind::ProtocolRecovery | InputKind::FinalReadinessRecovery => None,
    }
}

/// Open the turn: new user input (a prompt, or `/compact` by hand) expires pending offers.
fn open(run: &TurnRun, kind: InputKind) -> Result<(), AgentError> {
    if matches!(kind, InputKind::User | InputKind::Compaction) {
        recovery::stored::expire_pending(&run.agent, run.turn)?;
    }
    run.emit(EventBody::TurnStarted { input_kind: kind });
    Ok(())
}

/// What the next prompt after a stopped answer says first, in its own user item (so every
/// request before it keeps its bytes).
pub(crate) const INTERRUPTED_NOTE: &str = "[keel: the user stopped your previous answer before \
     it was complete; what it had produced was not kept.]";

/// Commit the turn's input text; a prompt after a stopped answer carries the note first.
fn commit_input(
    run: &TurnRun,
    state: &mut AgentState,
    kind: InputKind,
    text: String,
) -> Result<(), AgentError> {
    let agent = run.agent.clone();
    let agent = &*agent;
    let mut job_notes = Vec::new();
    let text = if kind == InputKind::User {
        // In a fixed order: the interruption, the mode change, jobs that ended, then the prompt
        // and its files.
        let mut notes = Vec::new();
        if state.interrupted {
            state.interrupted = false;
            notes.push(INTERRUPTED_NOTE.to_string());
        }
        if let Some(mode) = agent.take_mode_change() {
            notes.push(crate::mode_notes::mode_note(mode));
        }
        job_notes = agent.jobs.exit_notes();
        notes.extend(job_notes.iter().map(|(_, note)| note.clone()));
        if let Some(note) = state.skills_note.take() {
            notes.push(note);
        }
        // A subagent's prompt is the model's words: it attaches nothing (a file it needs, it
        // reads with its tools, under its rules).
        let text = if agent.role.is_some() {
            text
        } else {
            with_attachments(agent, text)
        };
        if notes.is_empty() {
            text
        } else {
            format!("{}\n\n{text}", notes.join("\n"))
        }
    } else {
        text
    };
    // The session's context block goes first, once: with the first user item, or with the
    // next one of a session stored before blocks existed (its one named prefix break).
    let upgraded = state.pending_context.is_some() && !state.history.is_empty();
    let items: Vec<Item> = state
        .pending_context
        .iter()
        .cloned()
        .map(Item::Context)
        .chain([Item::User { text }])
        .collect();
    agent
        .services
        .store
        .append_items(&agent.session.id, run.turn, &items)?;
    let told: Vec<String> = job_notes.into_iter().map(|(job, _)| job).collect();
    agent.jobs.told(&told);
    state.pending_context = None;
    state.history.extend(items);
    if upgraded {
        run.emit(EventBody::PrefixChanged {
            reason: "keel_upgraded".into(),
        });
    }
    Ok(())
}

/// The most files one prompt attaches, and the most characters of them.
const MOST_ATTACHMENTS: usize = 8;
const MOST_ATTACHED_CHARS: usize = 128 * 1024;

/// A prompt with the files it mentions (`@path`) after it, each as `read_file` returns it
/// (the same guard and redaction), in the order mentioned; a file that may not be read is
/// named with the reason instead. Committed inside the prompt's own user item, so every
/// earlier request keeps its bytes.
fn with_attachments(agent: &Agent, text: String) -> String {
    let mut attached = String::new();
    let mut budget = MOST_ATTACHED_CHARS;
    for path in keel_tools::mentions(&text)
        .into_iter()
        .take(MOST_ATTACHMENTS)
    {
        match keel_tools::attachment(path, &agent.services.tool_services) {
            None => {}
            Some(Ok(content)) if content.len() <= budget => {
                budget -= content.len();
                attached.push_str(&format!(
                    "\n\n<attached path=\"{path}\">\n{content}\n</attached>"
                ));
            }
            Some(Ok(content)) => attached.push_str(&format!(
                "\n\n[keel: @{path} was not attached: its {} characters exceed what is left of \
                 the {MOST_ATTACHED_CHARS} a prompt may attach]",
                content.len()
            )),
            Some(Err(reason)) => {
                attached.push_str(&format!("\n\n[keel: @{path} was not attached: {reason}]"))
            }
        }
    }
    let attached = agent
        .services
        .tool_services
        .secrets
        .redact(&attached)
        .into_owned();
    format!("{text}{attached}")
}

/// Project the committed history once and send it (bounded retries, account rotation); with
/// `may_compact`, a request that reached `compact_at` is not sent (`Reply::CompactionDue`).
async fn request(
    run: &mut TurnRun,
    state: &AgentState,
    may_compact: bool,
) -> Result<Reply, AgentError> {
    let due_at = may_compact
        .then(|| compaction::threshold(&run.agent, state))
        .flatten();
    let history = run.agent.provider_view(state)?;
    send_items(
        run,
        &history,
        &state.mcp_tools,
        due_at,
        &state.meter,
        Deltas::Shown,
    )
    .await
}

/// A request failed: record an incident if a different projection could change it, then end
/// the turn with the offered recovery.
fn fail_request(
    run: &TurnRun,
    state: &mut AgentState,
    mut diagnostic: FailureDiagnostic,
    sent_messages: Option<usize>,
    sent_bytes: Option<usize>,
) -> Result<TurnOutcome, AgentError> {
    // A trace id that shares 8 characters with any of keel's secrets echoes one: dropped
    // before it reaches a recovery record, an event or the store.
    let secrets = &run.agent.services.tool_services.secrets;
    if diagnostic
        .trace_id
        .as_deref()
        .is_some_and(|id| secrets.shares_run(id, keel_types::secrets::ECHO_RUN))
    {
        diagnostic.trace_id = None;
    }
    let rejected = sent_bytes.filter(|_| diagnostic.kind == FailureKind::Limit);
    let (offered, action) = if let Some(bytes) = rejected {
        // What keel now knows of the window, also where it knew nothing.
        let tokens = state.meter.tokens_of_bytes(bytes);
        state.meter.rejected(tokens);
        match recovery::admission::record_context_incident(&run.agent, state, run.turn, tokens)? {
            Ok(recovery_id) => (Some(recovery_id), InputKind::ContextRecovery),
            Err(why) => {
                diagnostic.message =
                    format!("the request is larger than the model's window: {why}");
                (None, InputKind::ContextRecovery)
            }
        }
    } else {
        let offered = recovery::admission::record_incident(
            &run.agent,
            state,
            run.turn,
            &diagnostic,
            sent_messages,
        )?;
        (offered, InputKind::ProtocolRecovery)
    };
    emit_failed(run, diagnostic.clone());
    if let Some(recovery_id) = &offered {
        run.emit(EventBody::RecoveryOffered {
            recovery_id: recovery_id.clone(),
            action,
        });
    }
    Ok(TurnOutcome::Failed {
        diagnostic,
        recovery_id: offered,
    })
}

/// Commit the assistant message with `pending` receipts for its calls, in one transaction;
/// returns the tool round to run (empty when the model asked for no tool).
fn commit_reply(
    run: &TurnRun,
    state: &mut AgentState,
    completion: Completion,
) -> Result<ToolRound, AgentError> {
    let agent = run.agent.clone();
    let agent = &*agent;
    run.emit(EventBody::LlmResponse {
        finish_reason: completion.finish_reason,
        usage: completion.usage,
    });
    let calls: Vec<_> = completion.item.tool_calls().cloned().collect();
    let receipts: Vec<ToolReceipt> = calls
        .iter()
        .map(|call| {
            let seq = state.next_seq;
            state.next_seq += 1;
            ToolReceipt {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                args_digest: digest(&call.arguments),
                state: ReceiptState::Pending,
                turn: run.turn,
                seq,
                summary: None,
                sandbox: None,
                child_session: None,
            }
        })
        .collect();
    for part in &completion.item.parts {
        if let AssistantPart::WebSearch(search) = part {
            run.emit(EventBody::SearchResult {
                query: search.query.clone(),
                sources_status: search.sources_status,
                sources: search.sources.len(),
            });
        }
    }
    let assistant = Item::Assistant(completion.item);
    state.replies += 1;
    if calls.is_empty() && state.hold_answer {
        // A subagent's answer commits with its parent's `task` result, in one transaction.
        state.held_answer = Some((run.turn, assistant));
        return Ok(ToolRound {
            calls,
            receipts,
            hook_context: Default::default(),
        });
    }
    kill_point("before_assistant_commit");
    agent.services.store.append_with_receipts(
        &agent.session.id,
        run.turn,
        &assistant,
        &receipts,
    )?;
    kill_point("after_assistant_commit");
    state.history.push(assistant);
    Ok(ToolRound {
        calls,
        receipts,
        hook_context: Default::default(),
    })
}

/// The model answered without tools: judge readiness, offer "continue checks" if it is not
/// ready (unless a continue-checks turn did nothing new), and end the turn.
fn complete(
    run: &TurnRun,
    state: &AgentState,
    readiness: Readiness,
    may_offer: bool,
) -> Result<TurnOutcome, AgentError> {
    let (usage, cost) = (run.spent.usage, run.spent.cost());
    let offered = match readiness.reason() {
        Some(reason) if may_offer => {
            recovery::admission::record_readiness(&run.agent, state, run.turn, reason)?
        }
        Some(_) | None => None,
    };
    let window = compaction::window(&run.agent);
    run.emit(EventBody::TurnCompleted {
        usage,
        cache_hit_ratio: usage.cache_hit_ratio(),
        ready: readiness.reason().is_none(),
        not_ready_reason: readiness.reason().map(str::to_string),
        context: state.meter.last_use(window),
        cost,
    });
    if let Some(recovery_id) = offered {
        run.emit(EventBody::RecoveryOffered {
            recovery_id,
            action: InputKind::FinalReadinessRecovery,
        });
    }
    Ok(TurnOutcome::Completed { usage, readiness })
}

/// `turn/failed` with what the turn's responses used, which also counts in this controller's
/// usage (a completed turn's is counted where its outcome is taken).
fn emit_failed(run: &TurnRun, diagnostic: FailureDiagnostic) {
    let (usage, cost) = run.spent.if_any();
    if let Some(usage) = &usage {
        run.agent.spend.add_completed(usage);
    }
    run.emit(EventBody::TurnFailed {
        diagnostic,
        usage,
        cost,
    });
}

fn end_failed(run: &TurnRun, diagnostic: FailureDiagnostic) -> TurnOutcome {
    emit_failed(run, diagnostic.clone());
    TurnOutcome::Failed {
        diagnostic,
        recovery_id: None,
    }
}

fn end_cancelled(run: &TurnRun) -> TurnOutcome {
    emit_failed(run, FailureDiagnostic::new(FailureKind::Cancelled, None));
    TurnOutcome::Cancelled
}

/// Whether keel's receipt of a call id says it was denied (read once, at the turn's end).
fn denied_calls(agent: &Agent, turn: Option<u64>) -> impl Fn(&str) -> bool + use<> {
    let receipts = agent
        .services
        .store
        .receipts(&agent.session.id)
        .unwrap_or_default();
    crate::recovery::readiness::denials(receipts, turn)
}

#[cfg(test)]
mod person_text_tests {
    use super::*;
    use keel_types::person_text;

    #[test]
    fn the_notes_before_and_the_files_after_are_keels_not_the_persons() {
        let noted = format!(
            "{INTERRUPTED_NOTE}\n{}\n\nfix @src/a.rs please\n\n<attached path=\"src/a.rs\">\nfn a() {{}}\n</attached>\n\n[keel: @b.rs was not attached: missing]",
            crate::mode_notes::mode_note(keel_tools::PermissionMode::Auto)
        );
        assert_eq!(person_text(&noted), "fix @src/a.rs please");
        assert_eq!(person_text("just this"), "just this");
        // A person's own text that only looks like a note at its start stays.
        assert_eq!(
            person_text("[keel: mine]\nsecond line\n\nmore"),
            "[keel: mine]\nsecond line\n\nmore"
        );
    }
}
