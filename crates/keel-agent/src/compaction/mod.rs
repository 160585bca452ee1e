//! Compaction: one summarising request, then one store transaction that writes the next
//! history revision — a summary item and the most recent tail, verbatim.
//!
//! Invariants:
//! - Compaction happens only at `compact_at` of the usable window (window minus the output
//!   reserve), on `/compact`, or as the admitted recovery after a context-limit rejection;
//!   below the threshold the history is only ever appended to.
//! - The tail starts at a user or assistant item, so a tool call is never split from its
//!   result, and never inside a repaired (recovery-projected) prefix; it holds at least the
//!   latest round.
//! - The new revision is committed in one transaction that names the revision it replaces;
//!   a crash before or during the commit leaves the old revision whole. Receipts are never
//!   touched, and nothing is re-run: compaction runs no tool.
//! - The system prompt and tool specs are not part of the history, so the stable prefix of
//!   the next request is byte-identical; the break is announced by `history/rewritten`,
//!   `context/compacted` and `prefix/changed` at once, and pending recoveries expire.

pub mod text;

use crate::agent::Agent;
use crate::agent_state::AgentState;
use crate::error::AgentError;
use crate::model_request::{Deltas, Reply, send_items};
use crate::rewrite::Rewrite;
use crate::turn_run::TurnRun;
use keel_types::{EventBody, FailureDiagnostic, FailureKind, FinishReason, Item, Usage};
use std::collections::BTreeSet;
use std::fmt;

/// Why a compaction runs (the `reason` of `context/compacted`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Threshold,
    Manual,
    ContextLimit,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Threshold => "threshold",
            Reason::Manual => "manual",
            Reason::ContextLimit => "context_limit",
        }
    }
}

/// Why the history cannot be compacted now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CannotCompact {
    /// Everything in the history is the latest round (or one summary): nothing to summarise.
    NothingToSummarise,
    /// The latest round alone does not fit the usable window: no summary can help.
    TailTooLarge { tokens: u64, usable: u64 },
    /// The summary came out no smaller than what it would replace.
    NoGain { before: u64, after: u64 },
}

impl fmt::Display for CannotCompact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CannotCompact::NothingToSummarise => {
                f.write_str("there is nothing to compact yet: the history is only the latest round")
            }
            CannotCompact::TailTooLarge { tokens, usable } => write!(
                f,
                "the latest round alone is about {tokens} tokens, more than the {usable} tokens \
                 the model's window leaves for the history; compaction cannot make it fit — \
                 start a new session, or use a model with a larger window"
            ),
            CannotCompact::NoGain { before, after } => write!(
                f,
                "the summary (about {after} tokens with the kept tail) would not be smaller than \
                 the history it replaces (about {before}); the history was left as it was"
            ),
        }
    }
}

/// What a compaction would keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The verbatim tail is `history[tail_start..]`.
    pub tail_start: usize,
    pub tokens_before: u64,
    /// Tokens of the stable prefix (system prompt and tool specs), measured once per plan.
    pub fixed: u64,
}

/// Share of the usable window the verbatim tail may take.
const TAIL_SHARE: f64 = 0.25;
/// What a compaction must bring a rejected request under, as a share of its size.
const REJECTION_MARGIN: f64 = 0.9;
/// Tokens set aside for the summary when judging whether a compaction can help (at most an
/// eighth of the usable window).
const SUMMARY_ALLOWANCE: u64 = 600;

/// The model's window: configured, else from the model table.
pub(crate) fn window(agent: &Agent) -> Option<u64> {
    let settings = &agent.settings;
    keel_llm::context_window::window_for(&settings.profile, &settings.model)
}

/// Tokens a request may take: the window minus the output reserve, and below any request size
/// the provider already rejected as too long (which is all keel knows of an unknown window).
pub(crate) fn usable(agent: &Agent, state: &AgentState) -> Option<u64> {
    let from_window = window(agent).map(|window| {
        window.saturating_sub(keel_llm::context_window::output_reserve(
            &agent.settings.profile,
            window,
        ))
    });
    let from_rejection = state
        .meter
        .rejected_at()
        .map(|tokens| (tokens as f64 * REJECTION_MARGIN) as u64);
    match (from_window, from_rejection) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (one, other) => one.or(other),
    }
}

/// The request size (tokens) at which a turn compacts before sending: `compact_at` of the
/// window, and never past what a request may take.
pub(crate) fn threshold(agent: &Agent, state: &AgentState) -> Option<u64> {
    let usable = usable(agent, state)?;
    let share = |tokens: u64| (tokens as f64 * agent.settings.compact_at) as u64;
    Some(match window(agent) {
        Some(window) => share(window).min(usable),
        None => share(usable),
    })
}

/// Tokens of the stable prefix (system prompt and tool specs) of this session's requests.
pub(crate) fn fixed_tokens(agent: &Agent, state: &AgentState) -> u64 {
    let bytes = agent
        .project(&[], &state.mcp_tools)
        .map_or(0, |request| request.body.len());
    state.meter.tokens_of_bytes(bytes)
}

/// Where the tail would start, or why no compaction can help.
pub(crate) fn plan(agent: &Agent, state: &AgentState) -> Result<Plan, CannotCompact> {
    let fixed = fixed_tokens(agent, state);
    let tokens: Vec<u64> = state
        .history
        .iter()
        .map(|item| state.meter.tokens_of_item(item))
        .collect();
    let usable = usable(agent, state);
    plan_for(
        &state.history,
        &tokens,
        fixed,
        state.repair.unwrap_or(0),
        usable,
    )
}

/// `plan` on plain numbers: the history, each item's tokens, the stable prefix's tokens, the
/// first index the tail may start at (a repaired prefix stays whole in the summary), and the
/// usable window when known.
fn plan_for(
    history: &[Item],
    tokens: &[u64],
    fixed: u64,
    floor: usize,
    usable: Option<u64>,
) -> Result<Plan, CannotCompact> {
    let tokens_before = fixed + tokens.iter().sum::<u64>();
    // A tail may start at a user or assistant item: never between a call and its result.
    let splits: Vec<usize> = (floor..history.len())
        .filter(|&index| !matches!(history[index], Item::ToolResult(_)))
        .collect();
    let Some(&latest) = splits.last() else {
        return Err(CannotCompact::NothingToSummarise);
    };
    // The summary's share, and what is left for the tail: a quarter of the window at most,
    // and never more than what fits beside the stable prefix and the summary.
    let allowance = usable.map_or(SUMMARY_ALLOWANCE, |usable| {
        SUMMARY_ALLOWANCE.min(usable / 8)
    });
    // A quarter of the history at most too, so that a compaction by hand on a short history
    // still compacts.
    let history_share = ((tokens_before - fixed) as f64 * TAIL_SHARE) as u64;
    let tail_budget = match usable {
        Some(usable) => ((usable as f64 * TAIL_SHARE) as u64)
            .min(usable.saturating_sub(fixed + allowance + 1))
            .min(history_share),
        None => history_share,
    };
    // suffix[i] = tokens of history[i..]
    let mut suffix = vec![0u64; history.len() + 1];
    for index in (0..history.len()).rev() {
        suffix[index] = suffix[index + 1] + tokens[index];
    }
    let best_fit = splits
        .iter()
        .copied()
        .find(|&start| start > 0 && suffix[start] <= tail_budget)
        .unwrap_or(latest);
    // The context block is kept verbatim ahead of the summary: summarising it alone (or it
    // and the previous summary) gains nothing.
    let worth_summarising = |start: usize| {
        let summarised: Vec<&Item> = history[..start]
            .iter()
            .filter(|item| !matches!(item, Item::Context(_)))
            .collect();
        !matches!(summarised.as_slice(), [] | [Item::Summary(_)])
    };
    let Some(tail_start) = [best_fit, latest]
        .into_iter()
        .find(|&start| worth_summarising(start))
    else {
        return Err(CannotCompact::NothingToSummarise);
    };
    if let Some(usable) = usable {
        let after = fixed + allowance + suffix[tail_start];
        if after >= usable {
            return Err(CannotCompact::TailTooLarge {
                tokens: suffix[tail_start],
                usable: usable.saturating_sub(fixed + allowance),
            });
        }
    }
    Ok(Plan {
        tail_start,
        tokens_before,
        fixed,
    })
}

/// How a compaction ended.
pub(crate) enum Compaction {
    Done { usage: Usage, tokens_after: u64 },
    Impossible(CannotCompact),
    Failed(FailureDiagnostic),
    Cancelled,
}

/// Compact the session's history now (see the module invariants).
pub(crate) async fn compact(
    run: &mut TurnRun,
    state: &mut AgentState,
    reason: Reason,
    focus: Option<&str>,
) -> Result<Compaction, AgentError> {
    let agent = run.agent.clone();
    let agent = &*agent;
    let plan = match plan(agent, state) {
        Ok(plan) => plan,
        Err(why) => return Ok(Compaction::Impossible(why)),
    };
    let receipts = agent.services.store.receipts(&agent.session.id)?;
    let tail = &state.history[plan.tail_start..];
    let kept: BTreeSet<&str> = tail
        .iter()
        .filter_map(|item| match item {
            Item::Assistant(assistant) => Some(assistant.tool_calls()),
            Item::User { .. } | Item::ToolResult(_) | Item::Summary(_) | Item::Context(_) => None,
        })
        .flatten()
        .map(|call| call.id.as_str())
        .collect();
    let ledger = text::ledger(&receipts, &kept, &state.history[..plan.tail_start]);
    let request_items = summarising_request(agent, state, &plan, focus, &ledger, &receipts);
    let completion = match send_items(
        run,
        &request_items,
        &state.mcp_tools,
        None,
        &state.meter,
        Deltas::Hidden,
    )
    .await?
    {
        Reply::Completed { completion, .. } => completion,
        Reply::Failed {
            diagnostic,
            sent_bytes,
            ..
        } => {
            if let Some(bytes) = sent_bytes.filter(|_| diagnostic.kind == FailureKind::Limit) {
                let tokens = state.meter.tokens_of_bytes(bytes);
                state.meter.rejected(tokens);
            }
            return Ok(Compaction::Failed(diagnostic));
        }
        Reply::Cancelled | Reply::CompactionDue => return Ok(Compaction::Cancelled),
    };
    if !run.is_current() {
        return Ok(Compaction::Cancelled);
    }
    let usage = completion.usage;
    run.emit(EventBody::LlmResponse {
        finish_reason: completion.finish_reason,
        usage,
    });
    let model_summary = completion.item.text();
    if model_summary.trim().is_empty() {
        return Ok(Compaction::Failed(FailureDiagnostic::with_message(
            FailureKind::EmptyResponse,
            None,
            "the summarising reply had no text; the history was not changed".to_string(),
        )));
    }
    keel_types::kill_point::kill_point("compaction_summarised");
    // The context block is kept, not replaced.
    let replaced = state.history[..plan.tail_start]
        .iter()
        .filter(|item| !matches!(item, Item::Context(_)))
        .count() as u64;
    let plan_in_force = crate::recovery::readiness::latest_plan(&state.history[..plan.tail_start]);
    let cut_off = match completion.finish_reason {
        FinishReason::Length => Some("at the output limit"),
        FinishReason::ContentFilter => Some("by the provider's content filter"),
        FinishReason::Stop | FinishReason::ToolCalls => None,
    };
    let summary = text::summary_item(&model_summary, cut_off, &ledger, replaced, plan_in_force);
    // The kept tail keeps the turns it was written in (the store's rows match the history).
    let stored = agent.services.store.items(&agent.session.id)?;
    let turn_of = |index: usize| {
        if stored.len() == state.history.len() {
            stored[index].turn
        } else {
            run.turn
        }
    };
    // The context block is written once: a compaction keeps it verbatim, ahead of the summary.
    let mut rows: Vec<(u64, Item)> = state.history[..plan.tail_start]
        .iter()
        .enumerate()
        .filter(|(_, item)| matches!(item, Item::Context(_)))
        .map(|(index, item)| (turn_of(index), item.clone()))
        .collect();
    rows.push((run.turn, summary));
    rows.extend(
        state.history[plan.tail_start..]
            .iter()
            .enumerate()
            .map(|(offset, item)| (turn_of(plan.tail_start + offset), item.clone())),
    );
    let tokens_after = plan.fixed
        + rows
            .iter()
            .map(|(_, item)| state.meter.tokens_of_item(item))
            .sum::<u64>();
    if tokens_after >= plan.tokens_before {
        return Ok(Compaction::Impossible(CannotCompact::NoGain {
            before: plan.tokens_before,
            after: tokens_after,
        }));
    }
    let rewrite = Rewrite {
        rows,
        reason: reason.as_str(),
        announced: "compaction",
        tokens_before: plan.tokens_before,
        tokens_after,
        replaced,
        kill_point: Some("after_compaction_commit"),
    };
    let tokens_before = plan.tokens_before;
    crate::rewrite::commit(agent, state, rewrite, Some(run.turn), |revision| {
        vec![EventBody::ContextCompacted {
            revision,
            tokens_before,
            tokens_after,
            reason: reason.as_str().into(),
        }]
    })?;
    Ok(Compaction::Done {
        usage,
        tokens_after,
    })
}

/// The summarising request: the summarised history as the provider saw it (so the prefix
/// cache serves it) and the prompt; when that would not fit the window, a condensed plain-text
/// transcript instead.
fn summarising_request(
    agent: &Agent,
    state: &AgentState,
    plan: &Plan,
    focus: Option<&str>,
    ledger: &str,
    receipts: &[keel_types::ToolReceipt],
) -> Vec<Item> {
    let summarised = &state.history[..plan.tail_start];
    let prompt = text::compaction_prompt(focus, ledger);
    let mut native = match state.repair {
        Some(boundary) => {
            crate::recovery::apply_repair(summarised, boundary.min(summarised.len()), receipts)
        }
        None => summarised.to_vec(),
    };
    native.push(Item::User {
        text: prompt.clone(),
    });
    let Some(usable) = usable(agent, state) else {
        return native;
    };
    let fixed = plan.fixed;
    let native_tokens = fixed
        + native
            .iter()
            .map(|item| state.meter.tokens_of_item(item))
            .sum::<u64>();
    if native_tokens < usable {
        return native;
    }
    let budget_tokens = usable.saturating_sub(fixed + state.meter.tokens_of_bytes(prompt.len()));
    let budget_bytes = (budget_tokens as f64 * 0.9 * bytes_per_token(state)) as usize;
    vec![Item::User {
        text: format!(
            "{prompt}\n\nThe conversation so far, as text:\n{}",
            text::flat_transcript(summarised, budget_bytes)
        ),
    }]
}

fn bytes_per_token(state: &AgentState) -> f64 {
    // tokens_of_bytes(1000) ≈ 1000 / bytes_per_token.
    1000.0 / state.meter.tokens_of_bytes(1000).max(1) as f64
}

#[cfg(test)]
mod tests;
