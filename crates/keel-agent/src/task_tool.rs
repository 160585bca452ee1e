//! The `task` tool: a batch of consecutive `task` calls, each starting a subagent in a child
//! session of its own, run at the same time (docs/agents.md).
//!
//! Invariants:
//! - Consecutive `task` calls form one batch; their subagents run at the same time, at most
//!   `[agents] max_concurrent` at once. One waiting for its turn keeps its receipt `pending`.
//! - A `task` call is never asked about (its subagent's tool calls are). Deny rules on `task`
//!   refuse it (its subject is the agent's name); in plan mode only a read-only agent starts;
//!   a subagent's own `task` call is refused (depth 1).
//! - Its receipt is durably `started`, naming the child session, before the child's first
//!   request; the child's final answer commits with the parent's result in one transaction
//!   (`tool_results::finish_with`). keel starts a child only for a new `task` call: a retry or
//!   a recovery of the parent's request never reaches this code for a call already answered.
//! - Cancelling the parent's turn cancels every running child (each ends `cancelled`, its own
//!   turn settling its receipts; nothing late is committed); a child that had not started is
//!   `not_started`.
//! - A batch whose agents may change files is bracketed by the parent's snapshots (children
//!   take none of their own), so rewinding the parent's turn undoes what they changed.
//! - What a child's requests used rolls into the parent's turn (its usage and cost).

use crate::agent::Agent;
use crate::agent_definitions::AgentDefinition;
use crate::agent_state::AgentState;
use crate::error::AgentError;
use crate::snapshot::Bracketed;
use crate::task_report::{ChildEnded, Report};
use crate::tool_results::{
    BatchEnd, ChildAnswer, ToolRound, announce, finish, finish_with, settle,
};
use crate::turn_run::{TurnInput, TurnRun};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use keel_tools::{BuiltinTool, Decision, PermissionMode, Reach, ToolOutput};
use keel_types::kill_point::kill_point;
use keel_types::{ContextBlock, EventBody, InputKind, ReceiptState, ToolCall, ToolReceipt};
use std::ops::Range;
use std::sync::Arc;

/// How many of `calls`, from the first, are `task` calls (one batch).
pub(crate) fn consecutive_tasks(calls: &[ToolCall]) -> usize {
    calls
        .iter()
        .take_while(|call| call.name == BuiltinTool::Task.name())
        .count()
}

/// A `task` call that may start its subagent.
struct Delegation {
    definition: AgentDefinition,
    description: String,
    prompt: String,
}

/// The parent's turn as a child sees it: whose it is and whether it still runs.
#[derive(Clone)]
struct ParentTurn {
    agent: Arc<Agent>,
    turn: u64,
    generation: u64,
    child_turn: crate::turn_run::ChildTurn,
}

impl ParentTurn {
    fn is_current(&self) -> bool {
        self.agent.cancellation.is_current(self.generation)
    }

    fn emit(&self, body: EventBody) {
        self.agent.emit(Some(self.turn), body);
    }
}

/// Run the `task` calls of `round` in `range` (see the module invariants).
pub(crate) async fn run_tasks(
    run: &mut TurnRun,
    state: &mut AgentState,
    round: &mut ToolRound,
    range: Range<usize>,
) -> Result<BatchEnd, AgentError> {
    let agent = run.agent.clone();
    let mut starting = Vec::new();
    for position in range {
        let call = &round.calls[position];
        let checked = check(&agent, call);
        let subject = checked
            .as_ref()
            .ok()
            .map(|delegation| delegation.definition.name.clone());
        announce(run, call, subject);
        match checked {
            Ok(delegation) => starting.push((position, delegation)),
            Err((final_state, why)) => {
                let output = ToolOutput::error(why);
                finish(run, state, round, position, final_state, output)?;
            }
        }
    }
    if starting.is_empty() {
        return Ok(BatchEnd::Ran);
    }
    if !run.is_current() {
        for (position, _) in &starting {
            settle(
                run,
                state,
                round,
                *position..*position + 1,
                ReceiptState::NotStarted,
            )?;
        }
        return Ok(BatchEnd::Cancelled);
    }
    let context = crate::child_agent::parents_block(state)?;
    let bracketed = bracket(run, state, round, &starting).await;
    let permits = Arc::new(tokio::sync::Semaphore::new(
        agent.settings.subagents.max_concurrent.max(1) as usize,
    ));
    let parent = ParentTurn {
        agent: agent.clone(),
        turn: run.turn,
        generation: run.generation(),
        child_turn: run.child_turn,
    };
    let mut running: FuturesUnordered<_> = starting
        .into_iter()
        .map(|(position, delegation)| {
            let child = run_child(
                parent.clone(),
                permits.clone(),
                context.clone(),
                round.calls[position].id.clone(),
                round.receipts[position].clone(),
                delegation,
            );
            async move { (position, child.await) }
        })
        .collect();
    // Each child's end commits as it comes: a slow child never holds back another's answer.
    // A commit that fails (the store) stops the batch: every child is cancelled and waited
    // for (each settles its own receipts), the others' ends are still committed where they
    // can be, and the first failure is returned.
    let mut failed = None;
    while let Some((position, ended)) = running.next().await {
        if let Err(error) = commit(run, state, round, position, ended)
            && failed.is_none()
        {
            run.agent.cancellation.cancel();
            failed = Some(error);
        }
    }
    if let Some(bracketed) = &bracketed {
        state.bracket.close(bracketed);
    }
    if let Some(error) = failed {
        return Err(error);
    }
    Ok(if run.is_current() {
        BatchEnd::Ran
    } else {
        BatchEnd::Cancelled
    })
}

/// Whether `call` may start its subagent; the receipt state and the result that say why not.
fn check(agent: &Agent, call: &ToolCall) -> Result<Delegation, (ReceiptState, String)> {
    let valid = agent
        .services
        .registry
        .validate(&call.name, &call.arguments)
        .map_err(|error| (ReceiptState::Failed, error.to_string()))?;
    if let Some(refusal) = agent
        .role
        .as_ref()
        .and_then(|role| role.refuses(&call.name))
    {
        return Err((ReceiptState::Denied, refusal));
    }
    let text = |key: &str| {
        valid
            .args
            .get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let name = text("agent");
    // A `task` is never asked about: only the rules that deny it apply.
    if let Decision::Deny(reason) =
        agent
            .policy_now()
            .decide(&call.name, &name, Reach::ReadsWorkspace)
    {
        return Err((
            ReceiptState::Denied,
            format!("{reason}; the subagent was not started"),
        ));
    }
    let agents = &agent.services.surface.agents;
    let Some(definition) = agents.get(&name) else {
        let known: Vec<String> = agents.list().map(|agent| agent.name.clone()).collect();
        return Err((
            ReceiptState::Failed,
            format!(
                "there is no agent named `{name}`; the agents: {}",
                known.join(", ")
            ),
        ));
    };
    if agent.permission_mode() == PermissionMode::Plan && !definition.is_read_only() {
        let read_only: Vec<String> = agents
            .list()
            .filter(|agent| agent.is_read_only())
            .map(|agent| agent.name.clone())
            .collect();
        return Err((
            ReceiptState::Denied,
            format!(
                "in plan mode only a read-only agent may be started ({}); `{name}` may change \
                 things, so it was not started",
                read_only.join(", ")
            ),
        ));
    }
    Ok(Delegation {
        definition: definition.clone(),
        description: text("description"),
        prompt: text("prompt"),
    })
}

/// The parent's snapshots around a batch whose agents may change files (see the module
/// invariants); `None` where nothing is bracketed.
async fn bracket(
    run: &TurnRun,
    state: &mut AgentState,
    round: &ToolRound,
    starting: &[(usize, Delegation)],
) -> Option<Bracketed> {
    let changes_files = starting
        .iter()
        .any(|(_, delegation)| !delegation.definition.is_read_only());
    if !changes_files || !state.bracket.is_active() {
        return None;
    }
    // The last command's "after" snapshot must not see what this batch changes.
    if let Some(failed) = state.bracket.settle().await {
        run.emit(failed);
    }
    let seqs = starting
        .iter()
        .map(|(position, _)| round.receipts[*position].seq);
    let bracketed = Bracketed {
        first: seqs.clone().min().unwrap_or(0),
        last: seqs.max().unwrap_or(0),
        call_ids: starting
            .iter()
            .map(|(position, _)| round.calls[*position].id.clone())
            .collect(),
    };
    for failed in state.bracket.open(&bracketed).await {
        run.emit(failed);
    }
    Some(bracketed)
}

/// Start one subagent when a place is free, and run it to its end.
async fn run_child(
    parent: ParentTurn,
    permits: Arc<tokio::sync::Semaphore>,
    context: ContextBlock,
    call_id: String,
    mut receipt: ToolReceipt,
    delegation: Delegation,
) -> ChildEnded {
    // Waiting for a place: the receipt stays `pending`.
    let Ok(_place) = permits.acquire_owned().await else {
        return ChildEnded::NotStarted;
    };
    if !parent.is_current() {
        return ChildEnded::NotStarted;
    }
    let agent = &parent.agent;
    let Delegation {
        definition,
        description,
        prompt,
    } = delegation;
    let (child, mode_refused) = match crate::child_agent::open(
        agent,
        context,
        &definition,
        &description,
        agent.settings.subagents.max_rounds,
    ) {
        Ok(opened) => opened,
        Err(error) => return ChildEnded::NotOpened(error.to_string()),
    };
    child.events.forward_to(agent.events.clone());
    agent.cancellation.adopt(&child.cancellation);
    let generation = child.cancellation.generation();
    let child_id = child.session.id.clone();
    // Cancelled while it opened: it never starts (and leaves no session behind).
    if !parent.is_current() {
        drop(child);
        let _ = agent.services.store.remove_session(&child_id);
        return ChildEnded::NotStarted;
    }
    receipt.state = ReceiptState::Started;
    receipt.child_session = Some(child_id.clone());
    kill_point("before_task_started");
    if let Err(error) = agent.services.store.start_with_pre_images(
        &agent.session.id,
        &receipt,
        &[],
        agent.settings.checkpoint_max_bytes,
    ) {
        drop(child);
        let _ = agent.services.store.remove_session(&child_id);
        return ChildEnded::NotOpened(format!("its receipt could not be written: {error}"));
    }
    kill_point("after_task_started");
    parent.emit(EventBody::ToolStarted {
        call_id: call_id.clone(),
        name: BuiltinTool::Task.name().into(),
        read_only: false,
    });
    parent.emit(EventBody::AgentStarted {
        call_id,
        child_session_id: child_id,
        agent: definition.name.clone(),
        description: description.clone(),
    });
    let child = Arc::new(child);
    let input = TurnInput {
        text: delegated_prompt(&definition, &description, &prompt),
        kind: InputKind::User,
        focus: None,
    };
    let ended = (parent.child_turn)(child.clone(), input, generation).await;
    // A subagent's background jobs end with it.
    child.jobs.end_all(keel_tools::jobs::EndCause::SessionEnded);
    ChildEnded::Ran(Box::new(Report::of(
        child,
        definition,
        description,
        mode_refused,
        ended,
    )))
}

/// The child's first prompt: who it is and for what, its agent's instructions, then what its
/// parent asked.
fn delegated_prompt(definition: &AgentDefinition, description: &str, prompt: &str) -> String {
    let description: String = description
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!(
        "[keel: you are the `{}` subagent. Another agent delegated this task to you; it sees \
         only your final answer, so make that answer complete.]\n\nTask: {}\n\n{}\n\n{}",
        definition.name,
        description.trim(),
        definition.instructions.trim(),
        prompt.trim()
    )
}

/// Commit a child's end as its `task` call's result (with its final answer, in one
/// transaction), say that it finished, and count what it spent in this turn.
fn commit(
    run: &mut TurnRun,
    state: &mut AgentState,
    round: &mut ToolRound,
    position: usize,
    ended: ChildEnded,
) -> Result<(), AgentError> {
    let report = match ended {
        ChildEnded::NotStarted => {
            return settle(
                run,
                state,
                round,
                position..position + 1,
                ReceiptState::NotStarted,
            );
        }
        ChildEnded::NotOpened(why) => {
            let output = ToolOutput::error(format!("the subagent was not started: {why}"));
            return finish(run, state, round, position, ReceiptState::Failed, output);
        }
        ChildEnded::Ran(report) => report,
    };
    round.receipts[position].child_session = Some(report.child.session.id.clone());
    let answer: Vec<keel_types::Item> =
        report.answer.iter().map(|(_, item)| item.clone()).collect();
    let child_answer = report.answer.as_ref().map(|(turn, _)| ChildAnswer {
        session: &report.child.session.id,
        turn: *turn,
        items: &answer,
    });
    finish_with(
        run,
        state,
        round,
        position,
        report.receipt_state(),
        report.output(),
        child_answer,
    )?;
    kill_point("after_task_commit");
    run.spent.add_priced(&report.usage, report.cost.as_ref());
    run.agent.spend.set_running(run.spent.if_any());
    run.emit(report.finished_event(&round.calls[position].id));
    Ok(())
}
