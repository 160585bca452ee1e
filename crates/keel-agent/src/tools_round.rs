//! Running the tool calls of one committed assistant message.
//!
//! Invariants:
//! - Arguments are validated before anything runs; an invalid call gets the specific error as
//!   its result (state `failed`) and uses no network retry.
//! - A call is checked once: validated, its path resolved and pinned, its subject computed. The
//!   card, the permission rules and the tool all see that one subject and path.
//! - A receipt is durably `started` before its tool starts and final (with the result item, in
//!   one transaction) before the next request.
//! - Consecutive read-only calls that need no approval run in parallel; anything that can
//!   change things runs alone, in order.
//! - Every result is redacted of keel's secrets before it is stored, announced or sent.
//! - On cancel the running tools are dropped (commands killed), their receipts become
//!   `cancelled`, the calls not yet started `not_started`; every call still gets a result.
//! - In a git repository a batch that runs a command (or an MCP tool) is bracketed by workspace
//!   snapshots (`snapshot`): the "before" is taken before it starts, the "after" once it ended
//!   (in the background, awaited before the next snapshot and at the turn's end).
//! - A tool the engine answers itself (`EngineTool`: `propose_plan`) is answered before any
//!   rule, never batched.
//! - Consecutive `task` calls run as one batch of subagents (`task_tool.rs`), never with
//!   another tool.
//! - A round reads gather → check → approve → run → settle: `check_and_approve` decides one
//!   call, `gather_batch` says which calls run together, `run_batch` runs and settles them.
//! - A mode the person chose while the turn runs is told at the end of the next result.
//! - A command allowed as read-only (`Decision::AllowReadOnly`) runs alone under the read-only
//!   sandbox: its receipt records `read-only`, `tool/started` says `read_only` (as for every
//!   command confined to reading, in read-only and plan mode too), no snapshot
//!   brackets it (it can change nothing) and no unconfined run is offered for it.

use crate::agent::Agent;
use crate::agent_state::AgentState;
use crate::approval::ApprovalRequest;
use crate::call::{Valid, validate_mcp};
use crate::engine_tools::{EngineAnswer, EngineTool};
use crate::error::AgentError;
use crate::snapshot::Bracketed;
use crate::tool_results::{BatchEnd, ToolRound, announce, finish, settle};
use crate::turn_run::TurnRun;
use futures_util::future::join_all;
use keel_tools::{Decision, Reach, ToolOutput, ToolServices, ValidationError};
use keel_types::kill_point::kill_point;
use keel_types::{EventBody, ReceiptState, ToolCall};

pub enum RoundEnd {
    Continue,
    Cancelled,
    /// A plan was shown in plan mode with nobody to approve it: the turn ends, the plan its
    /// answer.
    PlanShown,
}

/// A call checked once.
struct Checked {
    valid: Result<Valid, ValidationError>,
    /// What rules match and the card shows (`None` for an invalid call).
    subject: Option<String>,
}

enum Prepared {
    /// Runs; `read_only`: confined to reading whatever the session's sandbox mode is.
    Run { valid: Valid, read_only: bool },
    Finished {
        state: ReceiptState,
        output: ToolOutput,
    },
    /// A tool the engine answers itself, answered.
    Answered(EngineAnswer),
}

/// Run the calls of `round` in order: each is gathered into a batch, checked, approved, run
/// and settled.
pub async fn run_tools(
    run: &mut TurnRun,
    state: &mut AgentState,
    mut round: ToolRound,
) -> Result<RoundEnd, AgentError> {
    let mut index = 0;
    let mut plan_shown = false;
    while index < round.calls.len() {
        // Consecutive `task` calls start their subagents together (`task_tool.rs`).
        let tasks = crate::task_tool::consecutive_tasks(&round.calls[index..]);
        if tasks > 0 {
            let range = index..index + tasks;
            if crate::task_tool::run_tasks(run, state, &mut round, range).await?
                == BatchEnd::Cancelled
            {
                let rest = index + tasks..round.calls.len();
                settle(run, state, &mut round, rest, ReceiptState::NotStarted)?;
                return Ok(RoundEnd::Cancelled);
            }
            index += tasks;
            continue;
        }
        let Some(prepared) = check_and_approve(run, state, &mut round, index).await else {
            let rest = index..round.calls.len();
            settle(run, state, &mut round, rest, ReceiptState::NotStarted)?;
            return Ok(RoundEnd::Cancelled);
        };
        let (first, read_only) = match prepared {
            Prepared::Finished {
                state: final_state,
                output,
            } => {
                finish(run, state, &mut round, index, final_state, output)?;
                index += 1;
                continue;
            }
            Prepared::Answered(answer) => {
                plan_shown |= answer.ends_turn;
                finish(run, state, &mut round, index, answer.state, answer.output)?;
                index += 1;
                continue;
            }
            Prepared::Run { valid, read_only } => (valid, read_only),
        };
        let batch = if read_only {
            vec![(index, first)]
        } else {
            gather_batch(run, &state.mcp_tools, &round, index, first)
        };
        let end = index + batch.len();
        if run_batch(run, state, &mut round, &batch, read_only).await? == BatchEnd::Cancelled {
            let rest = end..round.calls.len();
            settle(run, state, &mut round, rest, ReceiptState::NotStarted)?;
            return Ok(RoundEnd::Cancelled);
        }
        index = end;
    }
    Ok(if plan_shown {
        RoundEnd::PlanShown
    } else {
        RoundEnd::Continue
    })
}

/// Check the call at `index`, announce it and decide it (asking where the rules say so);
/// `None` when the turn was cancelled first.
async fn check_and_approve(
    run: &mut TurnRun,
    state: &AgentState,
    round: &mut ToolRound,
    index: usize,
) -> Option<Prepared> {
    let agent = run.agent.clone();
    let checked = check(&agent, &state.mcp_tools, &round.calls[index]);
    if !run.is_current() {
        return None;
    }
    announce(run, &round.calls[index], checked.subject.clone());
    let call = round.calls[index].clone();
    let turn = run.turn;
    let offered = &state.mcp_tools;
    let history = &state.history;
    let decided = async {
        let hooked = match &checked.valid {
            Ok(_) => crate::hook_points::pre_tool_use(&agent, turn, history, &call).await,
            Err(_) => None,
        };
        let Some(hooked) = hooked else {
            return (prepare(&agent, turn, &call, checked, None).await, None);
        };
        let context = hooked.context_text();
        // The hook's arguments replace the model's: checked again from the start (validated,
        // the path resolved and pinned, the rules), and what the approval shows.
        let (call, checked) = match hooked.updated_input {
            Some(arguments) => {
                let call = ToolCall {
                    arguments: arguments.to_string(),
                    ..call
                };
                let checked = check(&agent, offered, &call);
                (call, checked)
            }
            None => (call, checked),
        };
        let permission = hooked.permission;
        let prepared = prepare(&agent, turn, &call, checked, permission.as_ref()).await;
        (prepared, context)
    };
    tokio::select! {
        biased;
        () = run.cancelled() => None,
        (prepared, context) = decided => {
            if let Some(context) = context {
                round.hook_context.insert(index, context);
            }
            Some(prepared)
        }
    }
}

/// Run one batch and settle its calls: their receipts `started`, the workspace bracketed by
/// snapshots where it runs a command, the tools run (their output shown live), each result
/// committed with its final receipt. On cancel the batch's calls are settled `cancelled`.
async fn run_batch(
    run: &mut TurnRun,
    state: &mut AgentState,
    round: &mut ToolRound,
    batch: &[(usize, Valid)],
    read_only: bool,
) -> Result<BatchEnd, AgentError> {
    let agent = run.agent.clone();
    // The last command's "after" snapshot must not see what this batch changes.
    if batch
        .iter()
        .any(|(_, valid)| valid.is_sensitive(&agent.services.tool_services))
        && let Some(failed) = state.bracket.settle().await
    {
        run.emit(failed);
    }
    let base_context = start_batch(run, round, batch, read_only)?;
    // Each call's commands are recorded under its id (a restart after a crash stops them),
    // and their output is shown live as `tool/output` (redacted by the tool, never stored).
    let (live_sender, mut live) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    let contexts = call_contexts(&agent, round, batch, &base_context, &live_sender);
    drop(live_sender);
    // A command's effects are bracketed by snapshots (in a git repository), so a rewind
    // can undo them and only them.
    let bracketed = bracketed(state, round, batch, base_context.sandbox.as_ref());
    if let Some(bracketed) = &bracketed {
        for failed in state.bracket.open(bracketed).await {
            run.emit(failed);
        }
    }
    let outputs = run_calls(run, batch, &contexts, &mut live).await;
    // Taken while the next request is out; the next snapshot, or the turn's end, waits.
    if let Some(bracketed) = &bracketed {
        state.bracket.close(bracketed);
    }
    let Some(outputs) = outputs else {
        let (first, end) = (batch[0].0, batch[0].0 + batch.len());
        settle(run, state, round, first..end, ReceiptState::Cancelled)?;
        return Ok(BatchEnd::Cancelled);
    };
    for (((position, valid), output), context) in batch.iter().zip(outputs).zip(&contexts) {
        let final_state = if output.is_error {
            ReceiptState::Failed
        } else {
            ReceiptState::Completed
        };
        // A failure that reads like a sandbox refusal: the person may run it unconfined.
        let call = round.calls[*position].clone();
        let output = crate::hook_points::post_tool_use(
            &agent,
            run.turn,
            &state.history,
            &call,
            valid.arguments(),
            output,
        )
        .await;
        let output = if !read_only && crate::unconfined::worth_offering(run, &call, &output) {
            crate::unconfined::offer(run, state, &call, context, output).await?
        } else {
            output
        };
        finish(run, state, round, *position, final_state, output)?;
    }
    Ok(BatchEnd::Ran)
}

/// Run the batch's calls together, their output shown live as it comes; `None` when the turn
/// was cancelled first (the running tools are dropped: their commands killed).
async fn run_calls(
    run: &mut TurnRun,
    batch: &[(usize, Valid)],
    contexts: &[ToolServices],
    live: &mut tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
) -> Option<Vec<ToolOutput>> {
    let agent = run.agent.clone();
    let running = join_all(
        batch
            .iter()
            .zip(contexts)
            .map(|((_, valid), context)| valid.run(context, &agent.services.surface.mcp)),
    );
    tokio::pin!(running);
    let outputs = loop {
        tokio::select! {
            biased;
            () = run.cancelled() => break None,
            outputs = &mut running => break Some(outputs),
            Some((call_id, delta)) = live.recv() => emit_live(run, live, call_id, delta),
        }
    };
    // What arrived after the last pass, before the results.
    while let Ok((call_id, delta)) = live.try_recv() {
        emit_live(run, live, call_id, delta);
    }
    outputs
}

/// The batch's tool context (the sandbox as the mode in force now confines it), each call's
/// receipt durably `started` (with what a file tool may change) and announced.
fn start_batch(
    run: &TurnRun,
    round: &mut ToolRound,
    batch: &[(usize, Valid)],
    read_only: bool,
) -> Result<ToolServices, AgentError> {
    let agent = &run.agent;
    // The batch runs under the mode in force as it starts (the person may change it).
    let sandbox = agent.sandbox_now().map(|sandbox| {
        if read_only {
            keel_tools::CommandSandbox {
                mode: keel_sandbox::SandboxMode::ReadOnly,
                ..sandbox
            }
        } else {
            sandbox
        }
    });
    let base_context = ToolServices {
        sandbox,
        ..agent.services.tool_services.clone()
    };
    for (position, valid) in batch {
        round.receipts[*position].state = ReceiptState::Started;
        let command = round.calls[*position].name == keel_tools::BuiltinTool::Bash.name();
        // The sandbox a command runs under is part of what was done.
        if command {
            round.receipts[*position].sandbox = base_context
                .sandbox
                .as_ref()
                .map(|sandbox| sandbox.mode.name().to_string());
        }
        kill_point("before_receipt_started");
        // What a file tool may change, as it is now: committed with `started`.
        let pre_images = crate::checkpoint::pre_images(valid, &base_context)?;
        agent.services.store.start_with_pre_images(
            &agent.session.id,
            &round.receipts[*position],
            &pre_images,
            agent.settings.checkpoint_max_bytes,
        )?;
        kill_point("after_receipt_started");
        run.emit(EventBody::ToolStarted {
            call_id: round.calls[*position].id.clone(),
            name: round.calls[*position].name.clone(),
            read_only: command
                && base_context
                    .sandbox
                    .as_ref()
                    .is_some_and(|sandbox| sandbox.mode == keel_sandbox::SandboxMode::ReadOnly),
        });
    }
    Ok(base_context)
}

/// Each call's context: its commands recorded under its id, its output sent to `live`.
fn call_contexts(
    agent: &Agent,
    round: &ToolRound,
    batch: &[(usize, Valid)],
    base_context: &ToolServices,
    live: &tokio::sync::mpsc::UnboundedSender<(String, String)>,
) -> Vec<ToolServices> {
    batch
        .iter()
        .map(|(position, _)| {
            let call_id = round.calls[*position].id.clone();
            let sender = live.clone();
            crate::orphan_processes::context_for_call(
                base_context,
                &agent.services.store,
                &agent.session.id,
                &call_id,
            )
            .with_jobs(keel_tools::jobs::JobSlot {
                jobs: agent.jobs.clone(),
                call_id: call_id.clone(),
            })
            .with_live_output(keel_tools::LiveOutput(std::sync::Arc::new(
                move |text: &str| {
                    let _ = sender.send((call_id.clone(), text.to_string()));
                },
            )))
        })
        .collect()
}

/// The receipts of a batch that runs a command or an MCP tool, which may change files no
/// checkpoint covers; `None` for other batches and where nothing is bracketed.
fn bracketed(
    state: &AgentState,
    round: &ToolRound,
    batch: &[(usize, Valid)],
    sandbox: Option<&keel_tools::CommandSandbox>,
) -> Option<Bracketed> {
    if !state.bracket.is_active() {
        return None;
    }
    // A command confined to reading by an enforced sandbox changes nothing to bracket.
    let reading_only = sandbox.is_some_and(|sandbox| {
        sandbox.mode == keel_sandbox::SandboxMode::ReadOnly && sandbox.enforcement().is_enforced()
    });
    let runs_commands = batch.iter().any(|(_, valid)| match valid {
        Valid::Builtin(call) => call.tool == keel_tools::BuiltinTool::Bash && !reading_only,
        Valid::Mcp { .. } => true,
    });
    let seqs = batch
        .iter()
        .map(|(position, _)| round.receipts[*position].seq);
    runs_commands.then(|| Bracketed {
        first: seqs.clone().min().unwrap_or(0),
        last: seqs.max().unwrap_or(0),
        call_ids: batch
            .iter()
            .map(|(position, _)| round.calls[*position].id.clone())
            .collect(),
    })
}

/// The most text one `tool/output` event carries (what waits is joined up to it).
const LIVE_EVENT_BYTES: usize = 16 * 1024;

/// One `tool/output` event for `call_id`: `delta` and what else of the same call is already
/// waiting (so a noisy command sends few large events, not many small ones).
fn emit_live(
    run: &TurnRun,
    live: &mut tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
    call_id: String,
    mut delta: String,
) {
    let mut other = None;
    while delta.len() < LIVE_EVENT_BYTES {
        match live.try_recv() {
            Ok((id, more)) if id == call_id => delta.push_str(&more),
            Ok(next) => {
                other = Some(next);
                break;
            }
            Err(_) => break,
        }
    }
    run.emit(EventBody::ToolOutput { call_id, delta });
    if let Some((call_id, delta)) = other {
        run.emit(EventBody::ToolOutput { call_id, delta });
    }
}

/// Validate, pin the path, compute the subject: once per call.
fn check(agent: &Agent, offered: &[keel_types::ToolSpec], call: &ToolCall) -> Checked {
    // Only an MCP tool this turn offered can be called (a server's list may have changed).
    let offered_now = offered.iter().any(|spec| spec.name == call.name);
    if let Some(valid) = offered_now
        .then(|| validate_mcp(&agent.services.surface.mcp, &call.name, &call.arguments))
        .flatten()
    {
        // An MCP call's subject is its tool: rules name the tool (or the server's tools).
        return Checked {
            valid,
            subject: None,
        };
    }
    let context = &agent.services.tool_services;
    let valid = agent
        .services
        .registry
        .validate(&call.name, &call.arguments)
        .map(|valid| valid.pinned(context));
    let subject = valid
        .as_ref()
        .ok()
        .map(|valid| valid.subject(context))
        .filter(|subject| !subject.is_empty());
    Checked {
        valid: valid.map(Valid::Builtin),
        subject,
    }
}

/// A parallel batch: `first` (at `index`) and, if it only reads the workspace, the following
/// calls that only read it and need no approval. Each joining call is announced.
fn gather_batch(
    run: &TurnRun,
    offered: &[keel_types::ToolSpec],
    round: &ToolRound,
    index: usize,
    first: Valid,
) -> Vec<(usize, Valid)> {
    let agent = run.agent.clone();
    let agent = &*agent;
    let parallel = !first.is_sensitive(&agent.services.tool_services);
    let mut batch = vec![(index, first)];
    while parallel && index + batch.len() < round.calls.len() {
        let next = &round.calls[index + batch.len()];
        let checked = check(agent, offered, next);
        let joins = match (&checked.valid, &checked.subject) {
            // A tool the engine answers (it may ask the person) is never run in a batch; nor is
            // one a subagent may not use (it is refused on its own).
            (Ok(valid), _) if EngineTool::of(valid).is_some() => false,
            _ if agent
                .role
                .as_ref()
                .is_some_and(|role| role.refuses(&next.name).is_some()) =>
            {
                false
            }
            (Ok(valid), subject) => {
                !valid.is_sensitive(&agent.services.tool_services)
                    && decide(agent, valid, subject.as_deref()) == Decision::Allow
            }
            (Err(_), _) => false,
        };
        if !joins {
            break;
        }
        announce(run, next, checked.subject.clone());
        if let Ok(valid) = checked.valid {
            batch.push((index + batch.len(), valid));
        }
    }
    batch
}

fn decide(agent: &Agent, valid: &Valid, subject: Option<&str>) -> Decision {
    let reach = if valid.is_sensitive(&agent.services.tool_services) {
        Reach::Sensitive
    } else {
        Reach::ReadsWorkspace
    };
    let policy = &agent.policy_now();
    let subject = subject.unwrap_or("");
    if valid.tool_name() == keel_tools::BuiltinTool::Bash.name() {
        return crate::confinement::decide_command(
            policy,
            agent.sandbox_now().as_ref(),
            subject,
            &agent.services.tool_services.guard,
        );
    }
    policy.decide(valid.tool_name(), subject, reach)
}

/// Ask the policy (and the person, if it says so) about a checked call, after its
/// `PreToolUse` hooks said `hook` (`hook_points::apply_permission`).
async fn prepare(
    agent: &Agent,
    turn: u64,
    call: &ToolCall,
    checked: Checked,
    hook: Option<&crate::hooks::HookPermission>,
) -> Prepared {
    let valid = match checked.valid {
        Ok(valid) => valid,
        Err(error) => {
            return Prepared::Finished {
                state: ReceiptState::Failed,
                output: ToolOutput::error(error.to_string()),
            };
        }
    };
    // A subagent uses its agent's tools only: anything else is refused before any rule.
    if let Some(refusal) = agent
        .role
        .as_ref()
        .and_then(|role| role.refuses(&call.name))
    {
        return Prepared::Finished {
            state: ReceiptState::Denied,
            output: ToolOutput::error(refusal),
        };
    }
    if let Some(tool) = EngineTool::of(&valid) {
        return Prepared::Answered(tool.answer(agent, turn, call, &valid).await);
    }
    // keel's own policy first (a write outside the workspace): refused before it runs, and
    // recorded as a denial, so that readiness counts it as the choice it is.
    if let Valid::Builtin(builtin) = &valid
        && let Some(refusal) = builtin.refused_by_policy(&agent.services.tool_services)
    {
        let mut output = ToolOutput::error(refusal);
        output.summary = "outside the workspace: keel only writes inside it".into();
        return Prepared::Finished {
            state: ReceiptState::Denied,
            output,
        };
    }
    let decision = crate::hook_points::apply_permission(
        agent,
        decide(agent, &valid, checked.subject.as_deref()),
        hook,
        valid.tool_name(),
        checked.subject.as_deref().unwrap_or(""),
    );
    match decision {
        Decision::Allow => {
            announce_change(agent, turn, call, &valid);
            Prepared::Run {
                valid,
                read_only: false,
            }
        }
        Decision::AllowReadOnly => Prepared::Run {
            valid,
            read_only: true,
        },
        Decision::Deny(reason) => Prepared::Finished {
            state: ReceiptState::Denied,
            output: ToolOutput::error(format!("{reason}; the call was not run")),
        },
        Decision::Ask => {
            let mut request = approval_request(agent, call, &valid, checked.subject.as_deref());
            if let Some(crate::hooks::HookPermission::Ask(Some(reason))) = hook {
                request.reason = Some(format!("a PreToolUse hook asks: {reason}"));
            }
            match agent.ask(turn, &request).await.refused_output() {
                None => Prepared::Run {
                    valid,
                    read_only: false,
                },
                Some(output) => Prepared::Finished {
                    state: ReceiptState::Denied,
                    output,
                },
            }
        }
    }
}

/// The question for a call the rules say to ask about: what every surface shows (keel's
/// secrets redacted), why it is asked, and the change it would make.
fn approval_request(
    agent: &Agent,
    call: &ToolCall,
    valid: &Valid,
    subject: Option<&str>,
) -> ApprovalRequest {
    crate::approval::with_always_label(ApprovalRequest {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        // What every surface shows: keel's secrets redacted, as in the preview.
        subject: agent
            .services
            .tool_services
            .secrets
            .redact(&approval_subject(valid, subject))
            .into_owned(),
        arguments: call.arguments.clone(),
        unconfined: false,
        plan: false,
        reason: match valid {
            Valid::Builtin(builtin)
                if builtin.reads_outside_workspace(&agent.services.tool_services) =>
            {
                Some("it reads outside the workspace".into())
            }
            Valid::Builtin(builtin) if builtin.tool == keel_tools::BuiltinTool::Bash => {
                crate::confinement::why_asked(
                    subject.unwrap_or(""),
                    &agent.services.tool_services.guard,
                )
            }
            _ => None,
        },
        // The very arguments the call will run with.
        preview: match valid {
            Valid::Builtin(builtin) => {
                keel_tools::preview(&call.name, &builtin.args, &agent.services.tool_services)
            }
            Valid::Mcp { .. } => None,
        },
        always_label: None,
        asked_by: None,
    })
}

/// A write or an edit allowed without a question: what it is about to change, for a surface
/// to show as a diff (transient; text files up to `PREVIEW_EVENT_BYTES`, redacted).
fn announce_change(agent: &Agent, turn: u64, call: &ToolCall, valid: &Valid) {
    let Valid::Builtin(builtin) = valid else {
        return;
    };
    let Some(keel_tools::Preview::Change { before, after }) =
        keel_tools::preview(&call.name, &builtin.args, &agent.services.tool_services)
    else {
        return;
    };
    let limit = keel_types::event::PREVIEW_EVENT_BYTES;
    let text = |bytes: &[u8]| {
        (bytes.len() <= limit)
            .then(|| std::str::from_utf8(bytes).ok())
            .flatten()
            .map(|text| {
                agent
                    .services
                    .tool_services
                    .secrets
                    .redact(text)
                    .into_owned()
            })
    };
    let before = match before.as_deref().map(text) {
        None => None,
        Some(Some(text)) => Some(text),
        Some(None) => return,
    };
    let Some(after) = text(&after) else {
        return;
    };
    agent.emit(
        Some(turn),
        EventBody::ToolPreview {
            call_id: call.id.clone(),
            before,
            after,
        },
    );
}

/// What the person approving sees: the rules' subject, except for `web_fetch`, whose rules name
/// the host but whose approval shows the whole URL that will be fetched, and MCP calls, whose
/// approval shows their arguments.
fn approval_subject(valid: &Valid, subject: Option<&str>) -> String {
    match valid {
        Valid::Builtin(call) if call.tool == keel_tools::BuiltinTool::WebFetch => call
            .args
            .get("url")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string(),
        // An MCP call's rules name only the tool; the person approving sees its arguments.
        Valid::Mcp { args, .. } => serde_json::to_string_pretty(args).unwrap_or_default(),
        Valid::Builtin(_) => subject.unwrap_or_default().to_string(),
    }
}
