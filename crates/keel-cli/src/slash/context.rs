//! `/context` and `/reload-context`: what fills the model's window, and the project
//! instructions the model was given.
//!
//! Invariants: only paths and counts are printed (escaped: a path is the repository's text),
//! never the instructions themselves — `/transcript` shows the block whole; the figures are
//! estimates of the next request, and say so.

use keel_agent::{Controller, Reloaded};
use keel_render::visible_line;

/// Show the session's context block (`show`), or read it again.
pub fn run(controller: &Controller, show: bool) {
    if !show {
        match controller.reload_context() {
            Ok(Reloaded::Unchanged) => eprintln!("context: unchanged"),
            Ok(Reloaded::BeforeFirstPrompt) => {
                eprintln!("context: read again; the first prompt carries it")
            }
            Ok(Reloaded::NotNow(why)) => eprintln!("context: not replaced: {why}"),
            Ok(Reloaded::Rewritten { revision }) => eprintln!(
                "context: replaced (history revision {revision}); the prompt prefix changes once \
                 (instructions_changed)"
            ),
            Err(error) => {
                eprintln!("error: {}", visible_line(&error.to_string()));
                return;
            }
        }
    }
    if show {
        window_parts(controller);
    }
    match controller.context_report() {
        Ok(report) => {
            let state = if report.sent {
                "sent at the head of the session"
            } else {
                "goes with the next prompt"
            };
            eprintln!("context block: ~{} tokens, {state}", report.tokens);
            if report.sources.is_empty() {
                eprintln!(
                    "  no instruction files (AGENTS.md, or the names in instruction_files, in \
                     the workspace, its parents up to the repository root, or $KEEL_HOME)"
                );
            }
            for source in &report.sources {
                let path = visible_line(&source.path);
                if let Some(why) = &source.refused {
                    eprintln!("  {path}: not read: {}", visible_line(why));
                } else if source.kept < source.bytes {
                    eprintln!(
                        "  {path}: {} of {} bytes (cut: instructions are bounded)",
                        source.kept, source.bytes
                    );
                } else {
                    eprintln!("  {path}: {} bytes", source.bytes);
                }
            }
        }
        Err(error) => eprintln!("error: {}", visible_line(&error.to_string())),
    }
}

/// The next request's parts, largest share first in the person's eyes: each part's estimated
/// tokens and its share of the window.
fn window_parts(controller: &Controller) {
    let parts = match controller.context_parts() {
        Ok(parts) => parts,
        Err(error) => {
            eprintln!("error: {}", visible_line(&error.to_string()));
            return;
        }
    };
    let share = |tokens: u64| match parts.window {
        Some(window) if window > 0 => format!("{:>3}%", tokens * 100 / window),
        _ => String::new(),
    };
    eprintln!("what fills the window (estimated, for the next request):");
    for (name, tokens) in [
        ("system prompt", parts.system),
        ("tool specs", parts.tools),
        ("instructions", parts.instructions),
        ("conversation", parts.conversation),
        ("tool results", parts.tool_results),
    ] {
        eprintln!("  {name:<14} ~{:>7} tokens {}", tokens, share(tokens));
    }
    match parts.window {
        Some(window) => eprintln!(
            "  {:<14} ~{:>7} tokens {} of a {window}-token window; /compact frees history",
            "total",
            parts.total(),
            share(parts.total())
        ),
        None => eprintln!(
            "  {:<14} ~{:>7} tokens (the model's window is unknown)",
            "total",
            parts.total()
        ),
    }
}
