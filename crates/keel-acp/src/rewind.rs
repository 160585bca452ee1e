//! `/undo` and `/rewind` over ACP: a prompt that is one of them runs no model turn; it
//! rewinds the session and answers with what was restored, as the agent's message.
//!
//! Invariant: what could not be restored (conflicts, commands, files not kept) is always in
//! the answer; a refusal is the prompt's error.

use keel_agent::{AgentError, BetweenTurns, Controller, Line, RewindScope, SurfaceCommand};

/// A `/undo` or `/rewind …` prompt, parsed: the turn (none: the last), what to restore,
/// whether to force.
pub(crate) struct RewindAsk {
    to: Option<u64>,
    scope: RewindScope,
    force: bool,
}

/// `text` as a rewind, if it is `/undo` or `/rewind …`.
pub(crate) fn rewind_ask(controller: &Controller, text: &str) -> Option<RewindAsk> {
    let Line::Command(SurfaceCommand::Rewind {
        to,
        code,
        conversation,
        force,
        // No picker over ACP: without a turn, the last one.
        pick: _,
    }) = controller.parse_line(text)
    else {
        return None;
    };
    Some(RewindAsk {
        to,
        scope: RewindScope { code, conversation },
        force,
    })
}

/// Do `ask` with the session held (taken in read order), and answer with what was restored.
/// Called on a blocking thread: restoring a file the editor has open goes through the editor.
pub(crate) fn rewind_reply(
    controller: &Controller,
    mut lease: BetweenTurns,
    ask: RewindAsk,
) -> Result<String, AgentError> {
    {
        let to = match ask.to {
            Some(to) => to,
            None => match controller.last_turn_held(&lease)? {
                Some(last) => last,
                None => return Ok("Nothing to undo: the conversation holds no turn.".to_string()),
            },
        };
        let report = controller.rewind_held(&mut lease, to, ask.scope, ask.force)?;
        let mut lines = vec![format!("Rewound to before turn {to}.")];
        lines.extend(
            report
                .restored
                .iter()
                .map(|path| format!("- restored {path}")),
        );
        lines.extend(report.saved.iter().map(|(path, retrieve)| {
            format!(
                "- restored {path} — it changed while a command ran; what it held is kept: \
                 `{retrieve}`"
            )
        }));
        lines.extend(
            report
                .conflicts
                .iter()
                .map(|(path, why)| format!("- conflict {path}: {why}")),
        );
        lines.extend(
            report
                .not_restorable
                .iter()
                .map(|what| format!("- not restored: {what}")),
        );
        lines.push(match report.revision {
            Some(revision) => format!("The conversation is history revision {revision}."),
            None => "The conversation is unchanged.".to_string(),
        });
        Ok(lines.join("\n"))
    }
}
