//! `/context` and `/reload-context`: what fills the model's window, and the project
//! instructions the model was given.
//!
//! Invariants: only paths and counts are printed (escaped: a path is the repository's text),
//! never the instructions themselves — `/transcript` shows the block whole; the figures are
//! estimates of the next request, and say so.

use crate::terminal::shown::Shown;
use keel_agent::{Controller, Reloaded};
use keel_render::visible_line;

/// The session's context block (`show`), or read it again and say how that went.
pub fn run(controller: &Controller, show: bool, shown: &mut Shown) {
    if !show {
        match controller.reload_context() {
            Ok(Reloaded::Unchanged) => shown.say("context: unchanged"),
            Ok(Reloaded::BeforeFirstPrompt) => {
                shown.say("context: read again; the first prompt carries it")
            }
            Ok(Reloaded::NotNow(why)) => shown.say(format!("context: not replaced: {why}")),
            Ok(Reloaded::Rewritten { revision }) => shown.say(format!(
                "context: replaced (history revision {revision}); the prompt prefix changes once \
                 (instructions_changed)"
            )),
            Err(error) => {
                shown.error(visible_line(&error.to_string()));
                return;
            }
        }
    }
    if show {
        window_parts(controller, shown);
    }
    match controller.context_report() {
        Ok(report) => {
            let state = if report.sent {
                "sent at the head of the session"
            } else {
                "goes with the next prompt"
            };
            shown.say(format!("context block: ~{} tokens, {state}", report.tokens));
            if report.sources.is_empty() {
                shown.say(
                    "  no instruction files (AGENTS.md, or the names in instruction_files, in \
                     the workspace, its parents up to the repository root, or $KEEL_HOME)",
                );
            }
            for source in &report.sources {
                let path = visible_line(&source.path);
                if let Some(why) = &source.refused {
                    shown.say(format!("  {path}: not read: {}", visible_line(why)));
                } else if source.kept < source.bytes {
                    shown.say(format!(
                        "  {path}: {} of {} bytes (cut: instructions are bounded)",
                        source.kept, source.bytes
                    ));
                } else {
                    shown.say(format!("  {path}: {} bytes", source.bytes));
                }
            }
        }
        Err(error) => shown.error(visible_line(&error.to_string())),
    }
}

/// The next request's parts, largest share first in the person's eyes: each part's estimated
/// tokens and its share of the window.
fn window_parts(controller: &Controller, shown: &mut Shown) {
    let parts = match controller.window_parts() {
        Ok(parts) => parts,
        Err(error) => {
            shown.error(visible_line(&error.to_string()));
            return;
        }
    };
    let share = |tokens: u64| match parts.window {
        Some(window) if window > 0 => format!("{:>3}%", tokens * 100 / window),
        _ => String::new(),
    };
    shown.say("what fills the window (estimated, for the next request):");
    for (name, tokens) in [
        ("system prompt", parts.system),
        ("tool specs", parts.tools),
        ("instructions", parts.instructions),
        ("conversation", parts.conversation),
        ("tool results", parts.tool_results),
    ] {
        shown.say(format!(
            "  {name:<14} ~{:>7} tokens {}",
            tokens,
            share(tokens)
        ));
    }
    match parts.window {
        Some(window) => shown.say(format!(
            "  {:<14} ~{:>7} tokens {} of a {window}-token window; /compact frees history",
            "total",
            parts.total(),
            share(parts.total())
        )),
        None => shown.say(format!(
            "  {:<14} ~{:>7} tokens (the model's window is unknown)",
            "total",
            parts.total()
        )),
    }
}
