//! `/context` and `/reload-context` on an agent: the context block it holds (or will send)
//! and a fresh read of the instructions put in its place.
//!
//! Invariants:
//! - Neither waits for a turn: while one runs, both are refused as busy.
//! - The block states the session's start: a reload keeps the old block's date, git status and
//!   permission mode, so a reload that finds the same files changes no byte (`Unchanged`).
//! - A block already sent is replaced in a new history revision (`instructions_changed`), never
//!   over a repaired prefix; one not yet sent is simply replaced.

use crate::agent::Agent;
use crate::error::AgentError;
use crate::instructions::{
    ContextReport, Reloaded, git_status_line, read, with_date_of, with_environment_line,
};
use keel_types::Item;

impl Agent {
    /// The context block this session holds or will send with its next prompt.
    pub(crate) fn context_report(&self) -> Result<ContextReport, AgentError> {
        let agent = self;
        let Ok(state) = agent.state.try_lock() else {
            return Err(AgentError::Busy(agent.session.id.clone()));
        };
        let (block, sent) = match state.history.iter().find_map(|item| match item {
            Item::Context(block) => Some(block),
            _ => None,
        }) {
            Some(block) => (block.clone(), true),
            None => (
                state.pending_context.clone().unwrap_or_else(|| {
                    read(
                        &agent.settings,
                        &agent.services.tool_services,
                        agent.permission_mode(),
                        &agent.services.context_lists(),
                    )
                }),
                false,
            ),
        };
        Ok(ContextReport {
            tokens: state.meter.tokens_of_bytes(block.text.len()),
            sources: block.sources,
            sent,
        })
    }

    /// Read the instruction files and the environment again; a block already sent is
    /// replaced in a new history revision (`instructions_changed`: the prefix changes there).
    pub(crate) fn reload_context(&self) -> Result<Reloaded, AgentError> {
        let agent = self;
        let Ok(mut state) = agent.state.try_lock() else {
            return Err(AgentError::Busy(agent.session.id.clone()));
        };
        // The mode and date the block states are the session's start's, whatever happened since.
        let mut fresh = read(
            &agent.settings,
            &agent.services.tool_services,
            agent.settings.policy.mode,
            &agent.services.context_lists(),
        );
        let Some(at) = state
            .history
            .iter()
            .position(|item| matches!(item, Item::Context(_)))
        else {
            let unchanged = state.pending_context.as_ref() == Some(&fresh);
            state.pending_context = Some(fresh);
            return Ok(if unchanged {
                Reloaded::Unchanged
            } else {
                Reloaded::BeforeFirstPrompt
            });
        };
        if let Item::Context(old) = &state.history[at] {
            // The git status is the session's start's, like its date.
            if let Some(status) = git_status_line(&old.text) {
                fresh.text = with_environment_line(&fresh.text, status);
            }
            fresh.text = with_date_of(old, &fresh.text);
            if old == &fresh {
                return Ok(Reloaded::Unchanged);
            }
        }
        if state.repair.is_some() {
            return Ok(Reloaded::NotNow(
                "this session's history holds a recovered (repaired) prefix, which a rewrite \
                 would lose; /compact first, or start a new session to use the new instructions"
                    .into(),
            ));
        }
        let stored = agent.services.store.items(&agent.session.id)?;
        let turn_of = |index: usize| {
            stored
                .get(index)
                .filter(|_| stored.len() == state.history.len())
                .map_or(state.last_turn, |row| row.turn)
        };
        let mut rows: Vec<(u64, Item)> = state
            .history
            .iter()
            .enumerate()
            .map(|(index, item)| (turn_of(index), item.clone()))
            .collect();
        rows[at].1 = Item::Context(fresh);
        let tokens: u64 = crate::compaction::fixed_tokens(agent, &state)
            + rows
                .iter()
                .map(|(_, item)| state.meter.tokens_of_item(item))
                .sum::<u64>();
        let rewrite = crate::rewrite::Rewrite {
            rows,
            reason: "instructions_changed",
            announced: "instructions_changed",
            tokens_before: tokens,
            tokens_after: tokens,
            replaced: 0,
            kill_point: None,
        };
        // Between turns: the events belong to no turn.
        let revision = crate::rewrite::commit(agent, &mut state, rewrite, None, |_| Vec::new())?;
        Ok(Reloaded::Rewritten { revision })
    }
}
