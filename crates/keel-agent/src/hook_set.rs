//! The hooks in force for a session (docs/hooks.md): configured hooks with their matchers
//! compiled, and what was left out, said.
//!
//! Invariants:
//! - Order is kept: the user's hooks, then a trusted project's, as keel-config resolved them.
//! - A hook on an event keel does not run yet, or with a matcher that does not compile, is left
//!   out with a notice, never silently.

use keel_types::hooks::{ConfiguredHook, HookEvent};

/// Events keel reads hooks for but does not run them on yet: said at the start, never silent.
const NOT_YET_RUN: [HookEvent; 3] = [
    HookEvent::SessionStart,
    HookEvent::PreCompact,
    HookEvent::Notification,
];

/// The hooks in force for a session, their matchers compiled.
#[derive(Default)]
pub struct Hooks {
    hooks: Vec<(ConfiguredHook, Option<regex::Regex>)>,
    notices: Vec<String>,
}

impl Hooks {
    /// `configured` in order (the user's first); a matcher that does not compile (keel-config
    /// checked it) leaves its hook out, said among the notices.
    pub fn new(configured: Vec<ConfiguredHook>, mut notices: Vec<String>) -> Hooks {
        let mut hooks = Vec::new();
        for hook in configured {
            if NOT_YET_RUN.contains(&hook.event) {
                notices.push(format!(
                    "{}: keel does not run {} hooks yet (docs/hooks.md#events); left out",
                    hook.origin, hook.event
                ));
                continue;
            }
            let pattern = match hook.matcher.as_deref().map(str::trim) {
                None | Some("" | "*") => Ok(None),
                Some(pattern) => regex::Regex::new(&format!("^(?:{pattern})$")).map(Some),
            };
            match pattern {
                Ok(matcher) => hooks.push((hook, matcher)),
                Err(error) => notices.push(format!("{}: {error}; left out", hook.origin)),
            }
        }
        Hooks { hooks, notices }
    }

    /// Every hook in force, in the order they run.
    pub fn configured(&self) -> impl Iterator<Item = &ConfiguredHook> {
        self.hooks.iter().map(|(hook, _)| hook)
    }

    /// What was left out, and why.
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    pub(crate) fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|(hook, _)| hook.event == event)
    }

    /// The hooks of `event`, in the order they run, with their compiled matchers.
    pub(crate) fn of(
        &self,
        event: HookEvent,
    ) -> impl Iterator<Item = &(ConfiguredHook, Option<regex::Regex>)> {
        self.hooks
            .iter()
            .filter(move |(hook, _)| hook.event == event)
    }
}
