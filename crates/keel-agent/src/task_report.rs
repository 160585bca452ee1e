//! What a subagent's run came to, as its parent's `task` result and `agent/finished` say it:
//! its answer, then a footer of facts — end state, rounds, its tool calls by receipt state,
//! tokens (with the cache hits of its first request) and cost.
//!
//! Invariants:
//! - Every figure is what the child's own turn reported (the events it sent, its receipts),
//!   never estimated: the footer says what happened.
//! - The footer is bounded whatever the child did (tools counted per state, a few named).
//! - A child that did not complete gives no answer; what it said last is quoted, cut, and
//!   marked as such.

use crate::agent::Agent;
use crate::agent_definitions::AgentDefinition;
use crate::turn_run::{ChildTurnEnd, TurnOutcome};
use keel_tools::{PermissionMode, ToolOutput};
use keel_types::{
    AgentEnd, Cost, EventBody, FailureDiagnostic, FailureKind, Item, ReceiptState, ToolReceipt,
    Usage,
};
use std::sync::Arc;

/// How a child's run ended, for its parent to commit.
pub(crate) enum ChildEnded {
    /// It never started: the parent's turn was cancelled while it waited for a place.
    NotStarted,
    /// Its session could not be opened (the reason, in keel's words).
    NotOpened(String),
    Ran(Box<Report>),
}

/// A child that ran, and what it came to.
pub(crate) struct Report {
    /// Held until its answer is committed (its session stays this process's until then).
    pub child: Arc<Agent>,
    pub agent: String,
    pub description: String,
    pub end: AgentEnd,
    pub failure: Option<FailureDiagnostic>,
    /// Its final answer and its turn, to commit with the parent's result.
    pub answer: Option<(u64, Item)>,
    /// What it said last, where it gave no answer.
    pub last_words: Option<String>,
    /// The mode its agent asked for and did not get (looser than its parent's).
    pub mode_refused: Option<PermissionMode>,
    pub rounds: u32,
    pub usage: Usage,
    pub cost: Option<Cost>,
    pub cache_hit_first: u64,
    /// Its tool calls by receipt state.
    pub tools: String,
}

/// The most characters of a child's last words quoted when it gave no answer.
const LAST_WORDS_CHARS: usize = 2000;

/// The text of the last assistant message in `history` that has any, cut.
pub(crate) fn last_words(history: &[Item]) -> Option<String> {
    history.iter().rev().find_map(|item| match item {
        Item::Assistant(assistant) => {
            let text = assistant.text();
            let text = text.trim();
            (!text.is_empty()).then(|| {
                let mut cut: String = text.chars().take(LAST_WORDS_CHARS).collect();
                if cut.len() < text.len() {
                    cut.push('…');
                }
                cut
            })
        }
        _ => None,
    })
}

/// A child's tool calls by receipt state: `completed: read_file ×2, grep ×1; denied: …`
/// (`no tool call` when it made none); at most 8 tools named per state.
pub(crate) fn tools_by_state(receipts: &[ToolReceipt]) -> String {
    let mut by_state: Vec<(ReceiptState, Vec<(&str, usize)>)> = Vec::new();
    for receipt in receipts {
        let at = match by_state
            .iter()
            .position(|(state, _)| *state == receipt.state)
        {
            Some(at) => at,
            None => {
                by_state.push((receipt.state, Vec::new()));
                by_state.len() - 1
            }
        };
        let tools = &mut by_state[at].1;
        match tools.iter_mut().find(|(tool, _)| *tool == receipt.tool) {
            Some((_, count)) => *count += 1,
            None => tools.push((&receipt.tool, 1)),
        }
    }
    if by_state.is_empty() {
        return "no tool call".to_string();
    }
    by_state
        .iter()
        .map(|(state, tools)| {
            let named: Vec<String> = tools
                .iter()
                .take(8)
                .map(|(tool, count)| format!("{tool} ×{count}"))
                .collect();
            let more = tools.len().saturating_sub(8);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("{state}: {}{more}", named.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Report {
    /// What `child`'s turn (`outcome`) came to.
    pub(crate) fn of(
        child: Arc<Agent>,
        definition: AgentDefinition,
        description: String,
        mode_refused: Option<PermissionMode>,
        ended: ChildTurnEnd,
    ) -> Report {
        let ChildTurnEnd {
            outcome,
            answer,
            last_words,
            rounds,
            budget_stop,
            usage,
            cost,
            cache_hit_first,
        } = ended;
        let tools = child
            .services
            .store
            .receipts(&child.session.id)
            .map(|receipts| tools_by_state(&receipts))
            .unwrap_or_else(|error| format!("not readable ({error})"));
        let (end, failure) = match outcome {
            Ok(TurnOutcome::Completed { .. }) => (AgentEnd::Completed, None),
            Ok(TurnOutcome::Cancelled) => (AgentEnd::Cancelled, None),
            Ok(TurnOutcome::Failed { mut diagnostic, .. }) => match budget_stop {
                // The parent's words, not a person's ("ask keel to continue").
                Some(why) => {
                    diagnostic.message = why;
                    (AgentEnd::BudgetExhausted, Some(diagnostic))
                }
                None => (AgentEnd::Failed, Some(diagnostic)),
            },
            Err(error) => (
                AgentEnd::Failed,
                Some(FailureDiagnostic::with_message(
                    FailureKind::Unknown,
                    None,
                    error.to_string(),
                )),
            ),
        };
        Report {
            child,
            agent: definition.name,
            description,
            end,
            failure,
            last_words: (end != AgentEnd::Completed).then_some(last_words).flatten(),
            answer: answer.filter(|_| end == AgentEnd::Completed),
            mode_refused,
            rounds,
            usage,
            cost,
            cache_hit_first,
            tools,
        }
    }

    /// The `task` call's final receipt state.
    pub(crate) fn receipt_state(&self) -> ReceiptState {
        match self.end {
            AgentEnd::Completed => ReceiptState::Completed,
            AgentEnd::Cancelled => ReceiptState::Cancelled,
            AgentEnd::Failed | AgentEnd::BudgetExhausted => ReceiptState::Failed,
        }
    }

    /// How it ended, in a few words: `completed`, `failed (rate_limit)`.
    fn end_words(&self) -> String {
        match (&self.end, &self.failure) {
            (AgentEnd::Failed, Some(failure)) => format!("failed ({})", failure.kind.as_str()),
            (end, _) => end.as_str().to_string(),
        }
    }

    /// The `task` call's result: the answer (or what it said last), then the footer.
    pub(crate) fn output(&self) -> ToolOutput {
        let mut content = String::new();
        match (&self.answer, &self.last_words) {
            (Some((_, Item::Assistant(answer))), _) => content.push_str(answer.text().trim()),
            (_, Some(words)) => {
                content.push_str(&format!("[keel: what the subagent said last]\n{words}"))
            }
            _ => {}
        }
        if !content.is_empty() {
            content.push_str("\n\n");
        }
        content.push_str(&self.footer());
        let mut description: String = self.description.trim().chars().take(40).collect();
        if description.len() < self.description.trim().len() {
            description.push('…');
        }
        let summary = format!(
            "{} ({description}): {} in {} round{}",
            self.agent,
            self.end_words(),
            self.rounds,
            if self.rounds == 1 { "" } else { "s" }
        );
        ToolOutput {
            content,
            summary,
            is_error: self.end != AgentEnd::Completed,
        }
    }

    /// The facts of the run, one bracketed note.
    fn footer(&self) -> String {
        let mut facts = vec![format!(
            "subagent `{}` ({}) {} after {} round{}",
            self.agent,
            self.description.trim(),
            self.end_words(),
            self.rounds,
            if self.rounds == 1 { "" } else { "s" }
        )];
        if let Some(failure) = &self.failure
            && !failure.message.is_empty()
        {
            facts.push(failure.message.clone());
        }
        if let Some(mode) = self.mode_refused {
            facts.push(format!(
                "its agent asked for `{}` mode and ran in its parent's, which is stricter",
                mode.as_str()
            ));
        }
        facts.push(format!("its session {}", self.child.session.id));
        facts.push(format!("its tool calls — {}", self.tools));
        facts.push(format!(
            "tokens: {} in, {} out; {} of its first request's from the cache",
            self.usage.input, self.usage.output, self.cache_hit_first
        ));
        if let Some(cost) = &self.cost {
            facts.push(format!("cost {}", cost.display()));
        }
        format!("[keel: {}]", facts.join(" · "))
    }

    /// `agent/finished` for the `task` call `call_id`.
    pub(crate) fn finished_event(&self, call_id: &str) -> EventBody {
        EventBody::AgentFinished {
            call_id: call_id.to_string(),
            child_session_id: self.child.session.id.clone(),
            agent: self.agent.clone(),
            description: self.description.clone(),
            state: self.end,
            failure: self.failure.as_ref().map(|failure| failure.kind),
            rounds: self.rounds,
            usage: self.usage,
            cache_hit_first: self.cache_hit_first,
            cost: self.cost.clone(),
        }
    }
}
